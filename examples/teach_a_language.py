"""Teach a trained model a new language from a parallel file, then use it: no photos needed.

    polyvse data parallel --lang es --pivot en --out es-en.tsv      # or your own file: es<TAB>en, one pair a line
    python examples/teach_a_language.py --checkpoint runs/model/checkpoint --lang es --parallel es-en.tsv \
        --out runs/model-es --query "dos perros juegan en la nieve"

The model must read text through frozen pretrained towers (e5 or USE, as `make model`'s does); each line pairs a
sentence in the new language with its counterpart in a language the model trained on. The new checkpoint serves the
old languages with the same vectors, so an index the old one built answers queries in the new language too.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import polyvse
from polyvse.adaptation import AdaptRequest, TeacherSettings, adapt_language, read_parallel_file
from polyvse.evaluation.sts import cosine_rows


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True, help="a trained frozen-tower model")
    ap.add_argument("--lang", required=True, help="the new language, an ISO 639 code (e.g. es, qu)")
    ap.add_argument("--parallel", required=True, help="TSV (new<TAB>known) or JSONL pairs")
    ap.add_argument("--pivot-lang", default="en", help="the counterparts' language in a TSV file (default en)")
    ap.add_argument("--out", required=True, help="folder of the adapted checkpoint")
    ap.add_argument("--query", help="a sentence in the new language to compare with its counterparts")
    ap.add_argument("--epochs", type=int, help="teacher epochs (default: enough for ~300 steps)")
    args = ap.parse_args(argv)

    # teacher learning: the new language's part learns to put each sentence where the model puts its counterpart;
    # a share of the pairs is held out, and the record says how well they are matched before and after
    record = adapt_language(
        AdaptRequest(
            checkpoint=Path(args.checkpoint),
            lang=args.lang,
            parallel=Path(args.parallel),
            pivot_lang=args.pivot_lang,
            out=Path(args.out),
            teacher=TeacherSettings(epochs=args.epochs),
            progress=False,
        )
    )
    mr = record["held_out_translation_mr"]
    if mr["adapted"] is not None:
        print(f"held-out pairs matched (mR): zero-shot {mr['zero_shot']:.1f} -> adapted {mr['adapted']:.1f}")

    if args.query:
        model = polyvse.load(args.out)
        pairs = read_parallel_file(args.parallel, args.pivot_lang, limit=200).lines
        known = [x.pivot_text for x in pairs]
        # one space for every language: the new sentence lands near the counterpart that means the same
        query = model.encode_text([args.query], args.lang)
        scores = cosine_rows(model.encode_text(known, args.pivot_lang), np.repeat(query, len(known), axis=0))
        best = int(np.argmax(scores))
        print(f"{args.query!r} is closest to {known[best]!r} ({args.pivot_lang}, cosine {scores[best]:.3f})")
        record["closest"] = known[best]
    return record


if __name__ == "__main__":
    main()
