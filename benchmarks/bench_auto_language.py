"""How often ``--lang auto`` refuses real captions, per language, on a given model and index.

    python benchmarks/bench_auto_language.py --index INDEX [--checkpoint C] [--dataset f8k-full] [--per-lang 300]
        [--captions es=FILE.gz --captions ar=FILE.gz ...] [-k 10] [--out benchmarks/results/auto_language.json]

Each caption is searched with ``lang="auto"`` exactly as ``polyvse search`` / the HTTP API do it (``Searcher``):
a model whose frozen towers read the query without its language goes through ``polyvse.langid.choose_language``
(refused only where the plausible languages' top k photos differ), a word-level model through
``detect_language``. Captions: the test split of ``--dataset`` (default: the dataset the checkpoint trained on),
``--per-lang`` of each language drawn with a fixed seed, plus any ``--captions LANG=FILE`` (one caption a line,
``.gz`` allowed; e.g. MultiScript30k's ``en-es/test_2016_flickr.es.gz``, machine translations).

Reported per language: captions, refusal rate at the default agreement (0.8) and why (a language the model cannot
read / the language changes the answer / other), how often the searched language is the caption's own, the
refusal rate at other agreement thresholds (from each caption's measured agreement: one run, every threshold),
and, for comparison, the refusal rate of the strict rule that asks for a confident detection among the trained
languages (what ``auto`` did for every model before). Not a test; a smoke test runs it on a tiny model.
"""
from __future__ import annotations

import argparse
import gzip
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index", required=True, help="index folder (polyvse index build) the captions search")
    p.add_argument("--checkpoint", help="checkpoint folder (default: the one recorded in the index)")
    p.add_argument("--dataset", help="dataset whose test captions to use (default: the checkpoint's training data)")
    p.add_argument("--data-root", help="data root (default: $POLYVSE_DATA)")
    p.add_argument("--captions", action="append", default=[], metavar="LANG=FILE",
                   help="more captions, one a line (.gz allowed), all in LANG; repeatable")
    p.add_argument("--per-lang", type=int, default=300, help="captions per language (default: %(default)s)")
    p.add_argument("-k", type=int, default=10, help="photos per search (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="benchmarks/results/auto_language.json")
    return p.parse_args(argv)


def read_lines(spec: str) -> tuple[str, list[str]]:
    from polyvse.errors import DataError
    from polyvse.languages import check_language

    lang, sep, path = spec.partition("=")
    if not sep or not path:
        raise DataError(f"--captions {spec!r}: expected LANG=FILE, e.g. es=test_2016_flickr.es.gz")
    lang = check_language(lang, f"--captions {spec!r}")
    p = Path(path)
    if not p.is_file():
        raise DataError(f"--captions {spec!r}: no such file {p}")
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", encoding="utf-8") as fh:
        return lang, [line.strip() for line in fh if line.strip()]


def test_captions(args, checkpoint) -> dict[str, list[str]]:
    from polyvse.data.registry import load_dataset
    from polyvse.paths import data_root

    by_lang: dict[str, list[str]] = defaultdict(list)
    dataset = args.dataset or checkpoint.training.get("data")
    if dataset:
        corpus = load_dataset(dataset, data_root(args.data_root))
        for cap in corpus.captions:
            if cap.split == "test":
                by_lang[cap.lang].append(cap.text)
    for spec in args.captions:
        lang, lines = read_lines(spec)
        by_lang[lang].extend(lines)
    rng = random.Random(args.seed)
    out = {}
    for lang in sorted(by_lang):
        texts = sorted(set(by_lang[lang]))
        out[lang] = rng.sample(texts, min(args.per_lang, len(texts)))
    return out


def measure(searcher, text: str, k: int) -> dict:
    """One caption through ``auto`` with agreement 0, so the run gives every threshold's answer."""
    from polyvse.langid import LanguageDetectionError, choose_language, detect_language
    from polyvse.languages import reads_without_language

    model = searcher.model
    try:
        if reads_without_language(model):
            def answer(code):
                return [h.id for h in searcher.search_vectors(searcher.embed_text(text, code), k)[0]]

            guess = choose_language(text, list(searcher.served_languages), answer, trained=searcher.languages,
                                    min_agreement=0.0)
        else:
            guess = detect_language(text, searcher.languages)
    except LanguageDetectionError as exc:
        msg = str(exc)
        return {"refused": "cannot read" if "cannot read" in msg or "looks like" in msg else "other", "message": msg}
    return {"lang": guess.lang, "decided_by": guess.decided_by, "agreement": guess.agreement}


def strict_refusal(text: str, trained: list[str]) -> bool:
    from polyvse.langid import LanguageDetectionError, detect_language

    try:
        detect_language(text, trained)
    except LanguageDetectionError:
        return True
    return False


def summarise(lang: str, records: list[dict], strict: list[bool]) -> dict:
    from polyvse.langid import DEFAULT_MIN_AGREEMENT

    n = len(records)

    def refused_at(rec, threshold):
        return "refused" in rec or (rec["decided_by"] == "same answer" and rec["agreement"] + 1e-9 < threshold)

    why = Counter()
    for rec in records:
        if "refused" in rec:
            why[rec["refused"]] += 1
        elif refused_at(rec, DEFAULT_MIN_AGREEMENT):
            why["changes the answer"] += 1
    searched = [r for r in records if not refused_at(r, DEFAULT_MIN_AGREEMENT)]
    agreements = sorted(r["agreement"] for r in records if r.get("agreement") is not None)
    return {
        "captions": n,
        "refusal_rate": round(sum(refused_at(r, DEFAULT_MIN_AGREEMENT) for r in records) / n, 4) if n else None,
        "refusals_by_reason": dict(why),
        "detected_confidently": sum(1 for r in records if r.get("decided_by") == "detection"),
        "searched_as_own_language": (round(sum(r["lang"] == lang for r in searched) / len(searched), 4)
                                     if searched else None),
        "searched_as": dict(Counter(r["lang"] for r in searched).most_common(5)),
        "refusal_rate_by_min_agreement": {str(t): round(sum(refused_at(r, t) for r in records) / n, 4)
                                          for t in THRESHOLDS} if n else {},
        "median_agreement_when_unclear": agreements[len(agreements) // 2] if agreements else None,
        "strict_rule_refusal_rate": round(sum(strict) / n, 4) if n else None,
        "examples_refused": [r.get("message", "") for r in records if "refused" in r][:3],
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    from polyvse.atomic import write_json_atomic
    from polyvse.index import PhotoIndex, Searcher, model_for_index
    from polyvse.langid import CANDIDATE_FLOOR, CLEAR_RATIO, DEFAULT_MIN_AGREEMENT, DEFAULT_MIN_CONFIDENCE
    from polyvse.languages import reads_without_language

    index = PhotoIndex.open(args.index)
    model, checkpoint_path = model_for_index(index, args.checkpoint, device="cpu")
    searcher = Searcher(model, index)
    captions = test_captions(args, model.checkpoint)
    if not captions:
        print("no captions: pass --dataset or --captions LANG=FILE", file=sys.stderr)
        return 2
    t0 = time.time()
    languages = {}
    for lang, texts in captions.items():
        records = [measure(searcher, t, args.k) for t in texts]
        strict = [strict_refusal(t, searcher.languages) for t in texts]
        languages[lang] = summarise(lang, records, strict)
        row = languages[lang]
        print(f"{lang}: {row['captions']} captions, auto refuses {row['refusal_rate']:.1%} "
              f"(strict rule {row['strict_rule_refusal_rate']:.1%}), searched as own language "
              f"{row['searched_as_own_language']}", flush=True)
    result = {
        "benchmark": "auto_language", "index": str(args.index), "checkpoint": str(checkpoint_path),
        "model_languages": searcher.languages, "served_languages": len(searcher.served_languages),
        "reads_without_language": reads_without_language(model), "photos": index.count, "k": args.k,
        "min_agreement": DEFAULT_MIN_AGREEMENT, "min_confidence": DEFAULT_MIN_CONFIDENCE,
        "candidate_floor": CANDIDATE_FLOOR, "clear_ratio": CLEAR_RATIO, "per_lang": args.per_lang,
        "seed": args.seed, "dataset": args.dataset or model.checkpoint.training.get("data"),
        "extra_captions": args.captions, "seconds": round(time.time() - t0, 1), "languages": languages,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out, result)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
