"""How often ``--lang auto`` refuses real captions, per language, on a given model and index, and what refusing
costs in retrieval: the measurement its agreement threshold was chosen by (on the validation split).

    python benchmarks/bench_auto_language.py --index INDEX [--checkpoint C] [--dataset f8k-full] [--per-lang 300]
        [--split val|test] [--multiscript es,ar] [--captions es=FILE.gz ...] [-k 10]
        [--out benchmarks/results/auto_language.json]

Each caption is searched with ``lang="auto"`` as ``polyvse search`` / the HTTP API do it (``Searcher``): a model
whose frozen towers read the query without its language goes through ``polyvse.text.langid.choose_language``, here
with the plausible languages always compared (``compare=True``), so one run gives the answer at every agreement
threshold; a word-level model goes through ``detect_language``. Captions: the ``--split`` (default test) captions
of ``--dataset`` (default: the dataset the checkpoint trained on), plus ``--multiscript`` languages' MultiScript30k
lines of the same split's photos (machine translations), plus any ``--captions LANG=FILE`` (one caption a line,
``.gz`` allowed; no photo, so no recall); ``--per-lang`` of each language drawn with a fixed seed.

Reported per language: captions, the refusal rate at the default agreement threshold and why (a language the
model cannot read / the language changes the answer / other), how the language was decided, how often the
searched language is the caption's own, the refusal rate at every threshold, and, for captions with a photo,
their recall over the whole index at every threshold: R@1, R@5, R@k (the share of all captions answered with
their photo among the top 1, 5, k; a refusal is a miss) and mR, their mean, beside the oracle's (the same search
told the caption's true language). ``choice`` names the threshold with the best mR averaged over the languages
(ties: the higher threshold, which refuses more). For comparison, the refusal rate of the strict rule that asks
for a confident detection among the trained languages (what ``auto`` did for every model before). Not a test;
tests/test_bench_auto_language.py runs its parts on stubs.
"""

from __future__ import annotations

import argparse
import gzip
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

THRESHOLDS = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index", required=True, help="index folder (polyvse index build) the captions search")
    p.add_argument("--checkpoint", help="checkpoint folder (default: the one recorded in the index)")
    p.add_argument("--dataset", help="dataset whose captions to use (default: the checkpoint's training data)")
    p.add_argument("--split", default="test", choices=("val", "test"), help="whose captions (default: %(default)s)")
    p.add_argument(
        "--multiscript",
        default="",
        help="comma-separated MultiScript30k languages (e.g. es,ar): their lines of the split's photos",
    )
    p.add_argument("--data-root", help="data root (default: $POLYVSE_DATA)")
    p.add_argument(
        "--captions",
        action="append",
        default=[],
        metavar="LANG=FILE",
        help="more captions, one a line (.gz allowed), all in LANG; repeatable",
    )
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


def labelled_captions(args, checkpoint) -> dict[str, list[tuple[str, str | None]]]:
    """{lang: [(caption, its photo id or None)]}, ``--per-lang`` a language, drawn with ``--seed``."""
    from polyvse.data.registry import load_dataset
    from polyvse.util.paths import data_root

    root = data_root(args.data_root)
    by_lang: dict[str, dict[str, str | None]] = defaultdict(dict)  # text -> photo (the first one it describes)
    dataset = args.dataset or checkpoint.training.get("data")
    if dataset:
        corpus = load_dataset(dataset, root)
        for cap in corpus.captions:
            if cap.split == args.split:
                by_lang[cap.lang].setdefault(cap.text, cap.photo_id)
    langs = [c.strip() for c in args.multiscript.split(",") if c.strip()]
    if langs:
        from polyvse.data.flickr8kcn import official_split
        from polyvse.data.multiscript30k import MultiScript30kReader

        split_of, reader = official_split(root), MultiScript30kReader(root)
        for lang in langs:
            for line in reader.all_lines([lang]):
                if split_of.get(line.photo_id) == args.split:
                    by_lang[lang].setdefault(line.text, line.photo_id)
    for spec in args.captions:
        lang, lines = read_lines(spec)
        for text in lines:
            by_lang[lang].setdefault(text, None)
    rng = random.Random(args.seed)
    out = {}
    for lang in sorted(by_lang):
        texts = sorted(by_lang[lang])
        out[lang] = [(t, by_lang[lang][t]) for t in rng.sample(texts, min(args.per_lang, len(texts)))]
    return out


def photo_id(name: str) -> str:
    """The Flickr photo id of an index entry's file name ("1000268201_693b08cb0e.jpg" -> "1000268201"), as the
    corpora name photos."""
    return Path(name).stem.split("_")[0]


def measure(searcher, text: str, lang: str, photo: str | None, k: int) -> dict:
    """One caption through ``auto``, the plausible languages compared (so every threshold's answer is known);
    ``rank``: where ``photo`` is in the chosen language's top k (1-based; 0: not there; None without a photo),
    ``oracle_rank``: the same for the search told ``lang``."""
    from polyvse.languages import reads_without_language
    from polyvse.text.langid import DEFAULT_MIN_AGREEMENT, LanguageDetectionError, choose_language, detect_language

    answers: dict[str, list[str]] = {}

    def answer(code):
        if code not in answers:
            hits = searcher.search_vectors(searcher.embed_text(text, code), k)[0]
            answers[code] = [photo_id(h.name) for h in hits]
        return answers[code]

    def rank(code):
        if photo is None:
            return None
        found = answer(code)
        return found.index(photo) + 1 if photo in found else 0

    oracle = rank(lang) if lang in searcher.served_languages else None
    try:
        if reads_without_language(searcher.model):
            guess = choose_language(
                text, list(searcher.served_languages), answer, trained=searcher.languages, compare=True
            )
        else:
            guess = detect_language(text, searcher.languages)
    except LanguageDetectionError as exc:
        msg = str(exc)
        return {
            "refused": "cannot read" if "cannot read" in msg or "looks like" in msg else "other",
            "message": msg,
            "rank": None if photo is None else 0,
            "oracle_rank": oracle,
        }
    decided = guess.decided_by
    if decided == "same answer" and DEFAULT_MIN_AGREEMENT <= 0:  # compared here only to measure; auto does not
        decided = "plausible"
    return {
        "lang": guess.lang,
        "decided_by": decided,
        "agreement": guess.agreement,
        "rank": rank(guess.lang),
        "oracle_rank": oracle,
    }


def strict_refusal(text: str, trained: list[str]) -> bool:
    from polyvse.text.langid import LanguageDetectionError, detect_language

    try:
        detect_language(text, trained)
    except LanguageDetectionError:
        return True
    return False


def refused_at(rec: dict, threshold: float) -> bool:
    """Whether ``auto`` at agreement ``threshold`` refuses the caption (compared candidates carry an agreement)."""
    return "refused" in rec or (rec.get("agreement") is not None and rec["agreement"] + 1e-9 < threshold)


def _rate(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def recall(ranks: list[int], k: int) -> dict:
    """R@1, R@5, R@k (percent) and mR, their mean, of 1-based ranks (0: not in the top k)."""
    cut = sorted({1, min(5, k), k})
    r = {f"r{n}": round(100.0 * sum(1 for x in ranks if 0 < x <= n) / len(ranks), 2) for n in cut}
    return {**r, "mr": round(sum(r.values()) / len(r), 2)}


def summarise(lang: str, records: list[dict], strict: list[bool], k: int = 10) -> dict:
    """One language's figures from its captions' measure() records."""
    from polyvse.text.langid import DEFAULT_MIN_AGREEMENT

    n = len(records)
    why = Counter()
    for rec in records:
        if "refused" in rec:
            why[rec["refused"]] += 1
        elif refused_at(rec, DEFAULT_MIN_AGREEMENT):
            why["changes the answer"] += 1
    searched = [r for r in records if not refused_at(r, DEFAULT_MIN_AGREEMENT)]
    agreements = sorted(r["agreement"] for r in records if r.get("agreement") is not None)
    with_photo = [i for i, r in enumerate(records) if r.get("rank") is not None]
    out = {
        "captions": n,
        "refusal_rate": _rate([refused_at(r, DEFAULT_MIN_AGREEMENT) for r in records]),
        "refusals_by_reason": dict(why),
        "decided_by": dict(Counter(r["decided_by"] for r in searched)),
        "detected_confidently": sum(1 for r in records if r.get("decided_by") == "detection"),
        "searched_as_own_language": (
            round(sum(r["lang"] == lang for r in searched) / len(searched), 4) if searched else None
        ),
        "searched_as": dict(Counter(r["lang"] for r in searched).most_common(5)),
        "refusal_rate_by_min_agreement": {str(t): _rate([refused_at(r, t) for r in records]) for t in THRESHOLDS}
        if n
        else {},
        "median_agreement_when_unclear": agreements[len(agreements) // 2] if agreements else None,
        "strict_rule_refusal_rate": _rate(strict),
        "examples_refused": [r.get("message", "") for r in records if "refused" in r][:3],
    }
    if with_photo:

        def at(threshold):  # a refusal is a miss
            return [0 if refused_at(records[i], threshold) else records[i]["rank"] for i in with_photo]

        out["recall"] = recall(at(DEFAULT_MIN_AGREEMENT), k)
        out["recall_by_min_agreement"] = {str(t): recall(at(t), k) for t in THRESHOLDS}
        if all(records[i].get("oracle_rank") is not None for i in with_photo):
            out["oracle_recall"] = recall([records[i]["oracle_rank"] for i in with_photo], k)
    return out


def choose_threshold(languages: dict[str, dict]) -> dict | None:
    """The agreement threshold with the best mR averaged over the languages that have one (ties: the higher)."""
    rows = [row for row in languages.values() if row.get("recall_by_min_agreement")]
    if not rows:
        return None
    table = []
    for threshold in rows[0]["recall_by_min_agreement"]:
        table.append(
            {
                "min_agreement": float(threshold),
                "mean_mr": round(sum(r["recall_by_min_agreement"][threshold]["mr"] for r in rows) / len(rows), 3),
                "mean_refusal_rate": round(
                    sum(r["refusal_rate_by_min_agreement"][threshold] for r in rows) / len(rows), 4
                ),
            }
        )
    oracle = [r["oracle_recall"]["mr"] for r in rows if r.get("oracle_recall")]
    best = max(table, key=lambda t: (t["mean_mr"], t["min_agreement"]))
    return {
        **best,
        "oracle_mean_mr": round(sum(oracle) / len(oracle), 3) if len(oracle) == len(rows) else None,
        "by_threshold": table,
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    from polyvse.index import PhotoIndex, Searcher, model_for_index
    from polyvse.languages import reads_without_language
    from polyvse.text.langid import CANDIDATE_FLOOR, CLEAR_RATIO, DEFAULT_MIN_AGREEMENT, DEFAULT_MIN_CONFIDENCE
    from polyvse.util.atomic import write_json_atomic

    index = PhotoIndex.open(args.index)
    model, checkpoint_path = model_for_index(index, args.checkpoint, device="cpu")
    searcher = Searcher(model, index)
    captions = labelled_captions(args, model.checkpoint)
    if not captions:
        print("no captions: pass --dataset, --multiscript or --captions LANG=FILE", file=sys.stderr)
        return 2
    t0 = time.time()
    languages = {}
    for lang, items in captions.items():
        records = [measure(searcher, t, lang, photo, args.k) for t, photo in items]
        strict = [strict_refusal(t, searcher.languages) for t, _ in items]
        languages[lang] = row = summarise(lang, records, strict, args.k)
        print(
            f"{lang}: {row['captions']} captions, auto refuses {row['refusal_rate']:.1%} "
            f"(strict rule {row['strict_rule_refusal_rate']:.1%}), searched as own language "
            f"{row['searched_as_own_language']}, recall {row.get('recall')} (oracle {row.get('oracle_recall')})",
            flush=True,
        )
    result = {
        "benchmark": "auto_language",
        "index": str(args.index),
        "checkpoint": str(checkpoint_path),
        "model_languages": searcher.languages,
        "served_languages": len(searcher.served_languages),
        "reads_without_language": reads_without_language(model),
        "photos": index.count,
        "k": args.k,
        "min_agreement": DEFAULT_MIN_AGREEMENT,
        "min_confidence": DEFAULT_MIN_CONFIDENCE,
        "candidate_floor": CANDIDATE_FLOOR,
        "clear_ratio": CLEAR_RATIO,
        "per_lang": args.per_lang,
        "seed": args.seed,
        "split": args.split,
        "dataset": args.dataset or model.checkpoint.training.get("data"),
        "multiscript": args.multiscript,
        "extra_captions": args.captions,
        "seconds": round(time.time() - t0, 1),
        "languages": languages,
        "choice": choose_threshold(languages),
    }
    from polyvse.provenance import checkpoint_model, provenance

    result["provenance"] = provenance(model=checkpoint_model(checkpoint_path, fingerprint=index.fingerprint))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out, result)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
