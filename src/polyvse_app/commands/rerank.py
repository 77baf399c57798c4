"""`polyvse rerank --checkpoint C --nbest FILE --images-list FILE --references FILE --lang de [--weight 0.5]
[--out FILE]`: re-rank Moses n-best translation lists with the photo of each source sentence and print
BLEU/TER (sacrebleu) of the baseline 1-best and of the re-ranked output. See docs/rerank.md."""

from __future__ import annotations

from pathlib import Path

from polyvse.util.paths import cache_root, data_root


def register(sub) -> None:
    p = sub.add_parser("rerank", help="re-rank translation n-best lists with the source photos (BLEU/TER)")
    p.add_argument("--checkpoint", required=True, help="checkpoint folder of a model that knows --lang")
    p.add_argument("--nbest", required=True, help="Moses n-best file: `id ||| hypothesis ||| features ||| score`")
    p.add_argument(
        "--images-list",
        required=True,
        help="one photo path per line; line i is the photo of sentence id i-1 (relative paths: "
        "from the list's folder, or --images-dir)",
    )
    p.add_argument("--images-dir", help="resolve relative photo paths against this folder")
    p.add_argument(
        "--references",
        required=True,
        nargs="+",
        help="reference translations, one per line (several files = several references)",
    )
    p.add_argument("--lang", required=True, help="language of the hypotheses (target language), e.g. de")
    p.add_argument(
        "--weight",
        type=float,
        default=0.5,
        help="image weight w in [0, 1]: score = (1-w) z(translation score) + w z(similarity); "
        "0 reproduces the baseline (default 0.5; tune it on held-out data)",
    )
    p.add_argument(
        "--tokenize",
        default=None,
        help="sacrebleu BLEU tokeniser (default: 13a; zh for Chinese, char for Japanese); "
        "'none' for pre-tokenised text",
    )
    p.add_argument("--oracle", action="store_true", help="also report the sentence-BLEU oracle of the lists")
    p.add_argument("--out", help="write the re-ranked translations here, one per line")
    p.add_argument("--json", help="write the scores (and signatures) to this JSON file")
    p.add_argument(
        "--data-root",
        help="data root, for the feature cache (default: $POLYVSE_DATA, else "
        "~/.cache/polyvse; $POLYVSE_CACHE overrides the cache)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def _row(name: str, scores: dict) -> list[str]:
    return [name, f"{scores['bleu']:.2f}", f"{scores['ter']:.2f}"]


def check_extra() -> None:
    """Re-ranking scores BLEU/TER with sacrebleu and reads photos through the torch backbone (polyvse.alignment is
    torch's), both of the [train] extra: without them, the message that says so before any work."""
    import importlib.util

    from polyvse.errors import DataError

    from ..train_extra import TRAIN_EXTRA, needs_extra_message

    missing = [TRAIN_EXTRA[m] for m in ("torch", "sacrebleu") if importlib.util.find_spec(m) is None]
    if missing:
        raise DataError(needs_extra_message("rerank", " and ".join(missing)))


def run(args) -> int:
    check_extra()
    import numpy as np

    import polyvse
    from polyvse.alignment.rerank import (
        oracle_choice,
        read_images_list,
        read_nbest,
        read_references,
        rerank,
        translation_scores,
    )
    from polyvse.errors import DataError
    from polyvse.features.cache import extract_features
    from polyvse.languages import check_language
    from polyvse.util.atomic import atomic_open, write_json_atomic

    # Everything cheap and checkable first, so a bad file fails before any photo is read.
    lang = check_language(args.lang, where="--lang")
    if not 0.0 <= args.weight <= 1.0:
        raise DataError(f"--weight must be in [0, 1], got {args.weight}")
    lists = read_nbest(args.nbest)
    n = len(lists)
    photos = read_images_list(args.images_list, n, base=args.images_dir)
    refs = [read_references(r, n) for r in args.references]
    model = polyvse.load(args.checkpoint)
    if lang not in model.languages:
        raise DataError(
            f"the model in {args.checkpoint} has no {lang!r} text encoder (languages: {', '.join(model.languages)})"
        )

    cache = cache_root(data_root(args.data_root)) / "features"
    feats = extract_features(photos, model.extractor, cache, strict=True, progress=not args.quiet)
    image_emb = model.encode_image_features(np.asarray(feats.features))
    result = rerank(lists, image_emb, model, args.weight, lang)

    base = translation_scores(result.baseline_texts, refs, lang=lang, tokenize=args.tokenize)
    new = translation_scores(result.texts, refs, lang=lang, tokenize=args.tokenize)
    rows = [_row("baseline (1-best)", base), _row(f"re-ranked (w={result.weight:g})", new)]
    report = {
        "n_sentences": n,
        "mean_list_size": float(np.mean([len(h) for h in lists])),
        "lang": lang,
        "weight": result.weight,
        "n_changed": result.n_changed,
        "baseline": base,
        "reranked": new,
        "nbest": str(args.nbest),
        "checkpoint": str(Path(args.checkpoint)),
    }
    if args.oracle:
        choice = oracle_choice(lists, refs, lang=lang, tokenize=args.tokenize)
        oracle = translation_scores(
            [lists[i][j].text for i, j in enumerate(choice)], refs, lang=lang, tokenize=args.tokenize
        )
        rows.append(_row("oracle (sentence BLEU)", oracle))
        report["oracle"] = oracle

    print(
        f"\n{n} sentences, {report['mean_list_size']:.1f} hypotheses per list on average, {lang}; "
        f"re-ranking changed {result.n_changed} of {n} choices\n"
    )
    print("| system | BLEU | TER |\n|---|---:|---:|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"\nBLEU: {base['bleu_signature']}\nTER:  {base['ter_signature']}")
    if args.out:
        with atomic_open(args.out) as fh:
            fh.write("".join(t + "\n" for t in result.texts))
    if args.json:
        write_json_atomic(Path(args.json), report)
    return 0
