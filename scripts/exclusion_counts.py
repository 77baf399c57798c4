"""What the evaluation exclusion set (polyvse.data.exclusion) takes out of the training data, and what the old rule
let in: writes results/exclusion-counts.json, the record README and docs/results.md cite.

    python scripts/exclusion_counts.py --out results/exclusion-counts.json

Per dataset (f8k-full, f8k-ml; official split, test as the evaluation split): the set's size and how many
image-training captions it drops, by language and source. And the leak the rule closed: how many of the en-cs
Multi30K test_2016 pairs the cross-lingual task scores for an f8k-full model were teacher pairs under the old rule
(task1 lines of every photo outside Flickr8K's val/test lists).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path


def dataset_counts(root: Path, name: str) -> dict:
    from polyvse.data.exclusion import evaluation_exclusion
    from polyvse.data.registry import load_dataset

    corpus = load_dataset(name, root)
    split = {c.photo_id: c.split for c in corpus.captions}
    train = {p for p, s in split.items() if s == "train"}
    test = {p for p, s in split.items() if s == "test"}
    ex = evaluation_exclusion(
        root,
        eval_photo_ids=test,
        train_photo_ids=train,
        eval_texts=[c.text for c in corpus.captions if c.photo_id in test],
    )
    own = [c for c in corpus.captions if c.photo_id in train]
    dropped = [c for c in own if ex.excludes(c.photo_id, c.text)]
    return {
        "exclusion": ex.summary(),
        "training_captions": len(own),
        "dropped": len(dropped),
        "dropped_by_language_source": {
            f"{lang} {src}": n for (lang, src), n in Counter((c.lang, c.source) for c in dropped).most_common()
        },
    }


def old_teacher_leak(root: Path) -> dict:
    from polyvse.data.exclusion import flickr8k_eval_photo_ids
    from polyvse.data.multi30k import Multi30kReader
    from polyvse.data.registry import load_dataset

    reader = Multi30kReader(root, langs=["en", "cs"])
    lines = {(r.photo_id, r.lang, r.split) for r in reader.records() if r.source == "multi30k-task1"}
    test_pairs = {p for p, lang, s in lines if s == "test" and lang == "cs"} & {
        p for p, lang, s in lines if s == "test" and lang == "en"
    }
    corpus = load_dataset("f8k-full", root)
    f8k_train = {c.photo_id for c in corpus.captions if c.split == "train"}
    scored = test_pairs - f8k_train  # the task leaves the model's training photos out
    old_teacher = test_pairs - flickr8k_eval_photo_ids(root)
    return {
        "test_2016_en_cs_pairs": len(test_pairs),
        "scored_for_an_f8k_full_model": len(scored),
        "scored_that_were_old_teacher_pairs": len(scored & old_teacher),
    }


def main(argv=None) -> int:
    from polyvse.provenance import no_model, provenance
    from polyvse.util.atomic import write_json_atomic
    from polyvse.util.paths import data_root

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--data-root")
    args = p.parse_args(argv)
    root = data_root(args.data_root)
    record = {
        "provenance": provenance(model=no_model("counts of the data sets' photos and captions")),
        "split": "official, test as evaluation split",
        "datasets": {n: dataset_counts(root, n) for n in ("f8k-full", "f8k-ml")},
        "old_teacher_rule": old_teacher_leak(root),
    }
    write_json_atomic(Path(args.out), record)
    print(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
