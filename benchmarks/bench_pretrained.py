"""Sentences per second of the frozen pretrained sentence encoders on real F8K-ML captions, per language.

    python benchmarks/bench_pretrained.py --out runs/bench_pretrained.json [--data ../shared/data]
        [--per-lang 300] [--threads 1,2] [--encoders e5-small,use-multilingual] [--corpus f8kml|text]

Each (encoder, threads) runs in its own fresh process (OpenMP/BLAS read their thread settings once,
at load), which also makes the load time a cold one: import + model load, then the first encode.
Per language it times ``encode`` on ``--per-lang`` captions sampled with a fixed seed (after a warm-up
of 8 others) and records wall time, process CPU time and the load average, because on a shared
machine the load average says how much of the 2 cores the run actually had, and sentences per
CPU-second says what the encoder does per core it gets.

With ``--corpus f8kml`` (default) captions come from ``load_f8kml`` (the evaluation corpus); with
``--corpus text`` from ``load_f8kml_text`` (the ~518k-caption training text corpus, incl. Flickr8K-CN's
machine translations and Multi30K task2). Either way the report estimates the hours to embed the
distinct captions of the training text corpus per encoder (at the measured per-language rates; cs
is not counted for use-multilingual, which has no Czech). Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LANGS = ("en", "de", "fr", "cs", "zh")


def _default_data() -> Path:
    env = os.environ.get("POLYVSE_DATA")
    if env and (Path(env) / "flickr8k" / "images").is_dir():
        return Path(env)
    return REPO.parent / "shared" / "data"


# -- worker: one encoder configuration in a fresh process ---------------------------------------------
def worker(spec: dict) -> dict:
    threads = spec.get("threads")
    if threads:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(threads)
    if spec.get("wait_policy") == "active":
        os.environ["OMP_WAIT_POLICY"] = "ACTIVE"
    t0 = time.perf_counter()
    import numpy as np

    from polyvse.modules.pretrained import E5SmallEncoder, UseMultilingualEncoder

    import_s = time.perf_counter() - t0
    if spec["encoder"] == "e5-small":
        enc = E5SmallEncoder(
            num_threads=threads, omp_wait_policy="passive" if spec.get("wait_policy") == "passive" else None
        )
    else:
        enc = UseMultilingualEncoder(threads=threads)
    t = time.perf_counter()
    enc.load()
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    enc.encode(["a dog runs on the beach"], "en")
    first_s = time.perf_counter() - t

    texts = json.loads(Path(spec["texts"]).read_text(encoding="utf-8"))
    per_lang = {}
    for lang, items in texts.items():
        if lang not in enc.languages:
            per_lang[lang] = {"supported": False}
            continue
        warm, timed = items["warmup"], items["timed"]
        enc.encode(warm, lang)
        load0 = os.getloadavg()[0]
        w, c = time.perf_counter(), time.process_time()
        out = enc.encode(timed, lang, batch_size=spec.get("batch_size"))
        wall, cpu = time.perf_counter() - w, time.process_time() - c
        assert out.shape == (len(timed), enc.dim) and np.isfinite(out).all()
        per_lang[lang] = {
            "supported": True,
            "n": len(timed),
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "sentences_per_s": round(len(timed) / wall, 1),
            "cpu_per_wall": round(cpu / wall, 2),
            "sentences_per_cpu_s": round(len(timed) / cpu, 1) if cpu > 0 else None,
            "mean_chars": round(sum(map(len, timed)) / len(timed), 1),
            "loadavg_1m_before": round(load0, 2),
            "loadavg_1m_after": round(os.getloadavg()[0], 2),
        }
        if enc.name == "e5-small":
            per_lang[lang]["mean_tokens"] = round(sum(enc.token_count(s) for s in timed) / len(timed), 1)
    return {
        "encoder": enc.name,
        "cache_id": enc.cache_id,
        "threads": threads,
        "wait_policy": spec.get("wait_policy"),
        "batch_size": spec.get("batch_size") or enc.default_batch_size,
        "import_s": round(import_s, 3),
        "load_s": round(load_s, 3),
        "first_encode_s": round(first_s, 3),
        "per_lang": per_lang,
    }


# -- driver ---------------------------------------------------------------------------------------------
def sample_texts(data: Path, corpus: str, per_lang: int, seed: int, langs: list[str]) -> dict:
    if corpus == "f8kml":
        from polyvse.data.f8kml import load_f8kml

        caps = load_f8kml(data).captions
    else:
        from polyvse.data.f8kml import load_f8kml_text

        caps = load_f8kml_text(data).captions
    rng = random.Random(seed)
    out = {}
    for lang in langs:
        pool = sorted({c.text for c in caps if c.lang == lang})
        pick = rng.sample(pool, min(len(pool), per_lang + 8))
        out[lang] = {"warmup": pick[:8], "timed": pick[8:]}
    return out


def text_corpus_counts(data: Path) -> dict:
    from polyvse.data.f8kml import load_f8kml_text

    caps = load_f8kml_text(data).captions
    counts: dict = {}
    for lang in LANGS:
        texts = [c.text for c in caps if c.lang == lang]
        counts[lang] = {"captions": len(texts), "distinct": len(set(texts))}
    return counts


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="JSON file to write the results to")
    ap.add_argument(
        "--data", type=Path, default=_default_data(), help="data root (default: $POLYVSE_DATA or ../shared/data)"
    )
    ap.add_argument("--corpus", choices=("f8kml", "text"), default="f8kml")
    ap.add_argument("--encoders", default="e5-small,use-multilingual")
    ap.add_argument("--langs", default=",".join(LANGS))
    ap.add_argument("--per-lang", type=int, default=300, help="timed captions per language")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts to try per encoder")
    ap.add_argument(
        "--e5-wait-policy",
        choices=("passive", "active"),
        default="passive",
        help="OMP_WAIT_POLICY for e5's OpenMP (polyvse's default: passive)",
    )
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-estimate", action="store_true", help="skip loading the 518k text corpus for the estimate")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        print(json.dumps(worker(json.loads(args.worker.read_text()))))
        return {}

    langs = [x for x in args.langs.split(",") if x]
    t0 = time.perf_counter()
    texts = sample_texts(args.data, args.corpus, args.per_lang, args.seed, langs)
    counts = None if args.no_estimate else text_corpus_counts(args.data)
    setup_s = time.perf_counter() - t0

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        texts_path = Path(tmp) / "texts.json"
        texts_path.write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
        for name in args.encoders.split(","):
            for th in (int(x) for x in args.threads.split(",")):
                spec = {
                    "encoder": name,
                    "threads": th,
                    "texts": str(texts_path),
                    "batch_size": args.batch_size,
                    "wait_policy": args.e5_wait_policy if name == "e5-small" else None,
                }
                spec_path = Path(tmp) / "spec.json"
                spec_path.write_text(json.dumps(spec))
                r = subprocess.run(
                    [sys.executable, __file__, "--out", os.devnull, "--worker", str(spec_path)],
                    capture_output=True,
                    text=True,
                    cwd=REPO,
                )
                if r.returncode != 0:
                    raise SystemExit(f"worker {spec} failed:\n{r.stderr[-3000:]}")
                run = json.loads(r.stdout.strip().splitlines()[-1])
                if counts is not None:
                    hours, langs_used = 0.0, []
                    for lang, c in counts.items():
                        m = run["per_lang"].get(lang)
                        if m and m.get("supported"):
                            hours += c["distinct"] / m["sentences_per_s"] / 3600
                            langs_used.append(lang)
                    run["estimate_text_corpus_hours"] = round(hours, 2)
                    # the same at the CPU-time rate x threads: what `threads` dedicated cores would give if
                    # the work scaled perfectly (an upper bound on speed, i.e. a lower bound on hours)
                    ideal = (
                        sum(
                            counts[lang]["distinct"] / run["per_lang"][lang]["sentences_per_cpu_s"]
                            for lang in langs_used
                        )
                        / 3600
                        / max(1, th)
                    )
                    run["estimate_text_corpus_hours_dedicated_cores"] = round(ideal, 2)
                    run["estimate_langs"] = langs_used
                runs.append(run)
                rates = "  ".join(
                    f"{lang} {m['sentences_per_s']:.0f}" for lang, m in run["per_lang"].items() if m.get("supported")
                )
                print(
                    f"{name:17s} threads={th}  load {run['load_s']:.2f} s  first {run['first_encode_s']:.2f} s  "
                    f"sent/s: {rates}"
                    + (
                        f"  -> text corpus {run['estimate_text_corpus_hours']:.1f} h "
                        f"(dedicated cores: {run['estimate_text_corpus_hours_dedicated_cores']:.1f} h)"
                        if counts
                        else ""
                    ),
                    flush=True,
                )

    report = {
        "corpus": args.corpus,
        "data": str(args.data),
        "per_lang": args.per_lang,
        "seed": args.seed,
        "setup_s": round(setup_s, 1),
        "runs": runs,
        "text_corpus_counts": counts,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "loadavg_at_end": os.getloadavg(),
        },
    }
    from polyvse.provenance import no_model, provenance

    report["provenance"] = provenance(model=no_model("pretrained sentence encoders (no polyvse checkpoint)"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
