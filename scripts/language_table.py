"""Every language a checkpoint serves, scored: image-sentence mR on Flickr8K's official val and test photos for the
languages it trained on (f8k-full's captions) and for the MultiScript30k languages (es, ar, zh machine-translated,
qu, gn: one machine-translated caption a photo, so a gallery is the photos that have one), each through the path a
user's query takes (`model.encode_text(texts, lang)`: trained part, adapted part, or zero-shot). Writes one JSON
record and, with --readme, the docs' blocks (`polyvse report`: docs/languages.md renders results/languages-model.json).

    python scripts/language_table.py --checkpoint runs/model/checkpoint --out results/languages-model.json --readme

Test is recorded beside val: choices are made on val, test is reported once for what was adopted.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from adapt_curves import chosen_adaptation, galleries, mean_recall, seed_summary  # noqa: E402  (a sibling script: the same galleries)

from polyvse_train.report.languages import languages_markdown as markdown  # noqa: E402  (the docs' table)

MULTISCRIPT = ("es", "ar", "zh", "qu", "gn")
MT_SUFFIX = "-mt"  # the machine-translated zh lines beside the native zh captions


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--out", required=True, help="JSON record to write (e.g. results/languages-model.json)")
    p.add_argument("--langs", default=",".join(MULTISCRIPT), help="MultiScript30k languages (default %(default)s)")
    p.add_argument("--data-root")
    p.add_argument("--max-photos", type=int, help="the first N photos of each split only (a smoke run)")
    p.add_argument("--splits", default="val,test", help="Flickr8K splits to score (default %(default)s)")
    p.add_argument("--readme", action="store_true",
                   help="then regenerate the docs' blocks (`polyvse report`: the languages block renders "
                        "results/languages-model.json)")
    p.add_argument("--from-record", action="store_true",
                   help="score nothing: regenerate the docs' blocks from the existing --out record")
    p.add_argument("--adapted", metavar="RECORD",
                   help="an adapt_curves.py record: a language the checkpoint does not serve gets the row of its "
                        "adaptation chosen on val (`polyvse adapt`, served by the adapted checkpoint)")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def score_languages(model, root: Path, langs: list[str], progress: bool, max_photos=None,
                    splits=("val", "test")) -> dict:
    """{row name: {"lang", "status", "captions", "val", "test"}} for the trained languages and `langs`."""
    from polyvse.languages import serving_status

    trained = list(model.languages)
    rows: dict[str, dict] = {}
    for ref in trained:  # one gallery build per trained language (its f8k-full captions)
        gals = galleries(model, root, [], ref, progress, max_photos, splits)
        rows[ref] = {"lang": ref, "status": serving_status(model, ref), "captions": "f8k-full (human)",
                     **{s: mean_recall(model, g, ref, model.encode_text(g["captions"][ref][0], ref))
                        for s, g in gals.items()}}
    readable = [x for x in langs if serving_status(model, x)]
    gals = galleries(model, root, readable, trained[0], progress, max_photos, splits)
    for lang in langs:
        name = lang + MT_SUFFIX if lang in rows else lang
        status = serving_status(model, lang)
        row = {"lang": lang, "status": status, "captions": "MultiScript30k (machine-translated)"}
        if status:
            row.update({s: mean_recall(model, g, lang, model.encode_text(g["captions"][lang][0], lang))
                        for s, g in gals.items()})
        rows[name] = row
    return rows


def adapted_rows(rows: dict, curves: dict, curves_path: str) -> None:
    """Fill the rows of languages the checkpoint does not serve with their adaptation chosen on val (in place); a
    row an earlier curves record filled is filled again from this one."""
    for name, row in rows.items():
        served = row["status"] and not row["status"].startswith("adapted")
        pick = None if served else chosen_adaptation(curves, row["lang"])
        if pick:
            method, size, scores = pick
            row.update({"status": f"adapted ({method}, {size} lines)", "from": curves_path,
                        **{s: scores[s] for s in ("val", "test") if s in scores}})
            seeds = seed_summary(curves, row["lang"])
            if seeds:  # the mean over training seeds of what seed 0's val chose
                row["status"] = f"adapted ({method}, {size} lines; mean of {seeds['seeds']} seeds)"
                for s in ("val", "test"):
                    row[s] = {**row[s], "mr": seeds["mean"][s], "mr_sd": seeds["sd"][s]}


def main(argv=None) -> int:
    import polyvse
    from polyvse.atomic import write_json_atomic
    from polyvse.paths import data_root
    from polyvse.provenance import provenance
    from polyvse_train.report import write_all

    args = parse_args(argv)
    if args.from_record:
        import json

        record = json.loads(Path(args.out).read_text(encoding="utf-8"))
        if args.adapted:  # the adapted rows join the record itself: the docs' block is always one record's
            adapted_rows(record["rows"], json.loads(Path(args.adapted).read_text(encoding="utf-8")), args.adapted)
            record["adapted_from"] = args.adapted
            write_json_atomic(Path(args.out), record)
        write_all(REPO)
        return 0
    t0 = time.perf_counter()
    model = polyvse.load(args.checkpoint, device="cpu")
    langs = [x.strip() for x in args.langs.split(",") if x.strip()]
    splits = tuple(x.strip() for x in args.splits.split(",") if x.strip())
    rows = score_languages(model, data_root(args.data_root), langs, not args.quiet, args.max_photos, splits)
    if args.adapted:
        import json

        adapted_rows(rows, json.loads(Path(args.adapted).read_text(encoding="utf-8")), args.adapted)
    adapted_from = {"adapted_from": args.adapted} if args.adapted else {}
    training = getattr(getattr(model, "checkpoint", None), "training", None) or {}
    record = {"checkpoint": str(args.checkpoint), "config": (training.get("config") or {}).get("name", "?"),
              "checkpoint_commit": training.get("commit"), "out": str(args.out),
              "provenance": provenance(model=args.checkpoint),
              "max_photos": args.max_photos, "splits": list(splits), "rows": rows, **adapted_from,
              "seconds": round(time.perf_counter() - t0)}
    write_json_atomic(Path(args.out), record)
    table = markdown(record)
    print(table)
    if args.readme:
        write_all(REPO)
    return 0


if __name__ == "__main__":
    sys.exit(main())
