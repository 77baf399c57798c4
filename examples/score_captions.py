"""Score your own captions with a trained model: how well each caption fits a photo, and how alike two sentences
are (semantic textual similarity, across languages too).

    python examples/score_captions.py --checkpoint runs/demo/checkpoint --photo dog.jpg \
        --captions "a dog runs on the beach" "zwei Kinder spielen Fußball" --lang en
    python examples/score_captions.py --checkpoint runs/demo/checkpoint --pairs pairs.tsv

--pairs reads a TSV file: sentence1<TAB>sentence2, optionally a third column with a gold score (any scale, e.g.
SemEval's 0-5); with gold scores it prints Pearson's r x 100, as `polyvse evaluate --task sts` reports it.
"""

from __future__ import annotations

import argparse
import csv

import numpy as np

import polyvse
from polyvse.evaluation.sts import cosine_rows, pearson


def fit_to_photo(model, photo: str, captions: list[str], lang: str) -> list[tuple[float, str]]:
    """The captions ranked by how well they fit the photo, scored as search and evaluation score them."""
    scores = model.retrieval_scores(model.encode_image([photo]), model.encode_text(captions, lang), lang=lang)[0]
    return sorted(zip(scores.tolist(), captions), reverse=True)


def sentence_similarity(model, path: str, lang1: str, lang2: str) -> tuple[np.ndarray, float | None]:
    """(cosine of each pair of the TSV file, Pearson r x 100 against its gold column or None)."""
    with open(path, encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE) if r]
    for line, row in enumerate(rows, 1):
        if len(row) not in (2, 3):
            raise SystemExit(f"{path}:{line}: {len(row)} tab-separated fields, expected 2 or 3")
    cos = cosine_rows(model.encode_text([r[0] for r in rows], lang1), model.encode_text([r[1] for r in rows], lang2))
    gold = [float(r[2]) for r in rows if len(r) == 3]
    return cos, 100 * pearson(cos, gold) if len(gold) == len(rows) else None


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True, help="a trained model")
    ap.add_argument("--photo", help="a photo to score --captions against")
    ap.add_argument("--captions", nargs="+", default=[], help="captions for --photo")
    ap.add_argument("--lang", default="en", help="the captions' language (default %(default)s)")
    ap.add_argument("--pairs", help="TSV of sentence pairs (and gold scores) to compare")
    ap.add_argument("--lang1", default="en", help="language of the pairs' first column (default %(default)s)")
    ap.add_argument("--lang2", default="en", help="language of the pairs' second column (default %(default)s)")
    args = ap.parse_args(argv)
    if not (args.photo and args.captions) and not args.pairs:
        ap.error("give --photo with --captions, or --pairs")

    model = polyvse.load(args.checkpoint)
    out = {}
    if args.photo and args.captions:
        out["captions"] = fit_to_photo(model, args.photo, args.captions, args.lang)
        print(f"captions for {args.photo}, best first:")
        for score, caption in out["captions"]:
            print(f"  {score:7.4f}  {caption}")
    if args.pairs:
        out["cosines"], out["pearson"] = sentence_similarity(model, args.pairs, args.lang1, args.lang2)
        print(
            f"{len(out['cosines'])} pairs, mean cosine {out['cosines'].mean():.3f}"
            + (f"; Pearson r x 100 against the gold scores: {out['pearson']:.1f}" if out["pearson"] is not None else "")
        )
    return out


if __name__ == "__main__":
    main()
