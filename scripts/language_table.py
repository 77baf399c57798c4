"""Every language a checkpoint serves, scored: image-sentence mR on Flickr8K's official val and test photos for the
languages it trained on (f8k-full's captions) and for the MultiScript30k languages (es, ar, zh machine-translated,
qu, gn: one machine-translated caption a photo, so a gallery is the photos that have one), each through the path a
user's query takes (`model.encode_text(texts, lang)`: trained part, adapted part, or zero-shot), ranked as search
ranks: the languages evaluator of `polyvse evaluate --task languages`. Writes one JSON record and, with --readme,
the docs' blocks (`polyvse report`: docs/languages.md renders results/languages-model.json).

    python scripts/language_table.py --checkpoint runs/model/checkpoint --out results/languages-model.json --readme

Test is recorded beside val: choices are made on val, test is reported once for what was adopted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from polyvse.adaptation.curves import adapted_rows  # noqa: F401  (the rows of adapted languages)
from polyvse.evaluation.languages import MULTISCRIPT
from polyvse_train.report.languages import languages_markdown as markdown  # the docs' table

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--out", required=True, help="JSON record to write (e.g. results/languages-model.json)")
    p.add_argument("--langs", default=",".join(MULTISCRIPT), help="MultiScript30k languages (default %(default)s)")
    p.add_argument("--data-root")
    p.add_argument("--max-photos", type=int, help="the first N photos of each split only (a smoke run)")
    p.add_argument("--splits", default="val,test", help="Flickr8K splits to score (default %(default)s)")
    p.add_argument(
        "--readme",
        action="store_true",
        help="then regenerate the docs' blocks (`polyvse report`: the languages block renders "
        "results/languages-model.json)",
    )
    p.add_argument(
        "--from-record",
        action="store_true",
        help="score nothing: regenerate the docs' blocks from the existing --out record",
    )
    p.add_argument(
        "--adapted",
        metavar="RECORD",
        help="an adapt_curves.py record: a language the checkpoint does not serve gets the row of its "
        "adaptation chosen on val (`polyvse adapt`, served by the adapted checkpoint)",
    )
    p.add_argument(
        "--plan",
        metavar="YAML",
        help="the adaptation plan the checkpoint was taught by (configs/adapt/product.yaml, `make model`): "
        "each adapted row says how its method was chosen",
    )
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def stage_summary(checkpoint: Path) -> dict:
    """``{"adaptation_stage": ...}`` from the record `make model`'s adaptation stage left beside the checkpoint
    (``<model>/adapted.json``, `polyvse model build`): each language's method, lines and seconds; {} without one."""
    import json

    path = checkpoint.parent / "adapted.json"
    if not path.is_file():
        return {}
    stage = json.loads(path.read_text(encoding="utf-8"))
    languages = {
        lang: {
            "method": x["method"],
            **(
                {
                    "lines": x["adaptation"]["lines"],
                    "held_out_translation_mr": x["adaptation"]["held_out_translation_mr"],
                    "seconds": x["seconds"],
                }
                if "adaptation" in x
                else {}
            ),
        }
        for lang, x in stage["languages"].items()
    }
    return {
        "adaptation_stage": {
            "record": str(path),
            "commit": stage["provenance"]["commit"],
            "seconds": stage["seconds"],
            "languages": languages,
        }
    }


def plan_choices(plan: str) -> dict:
    """{lang: how its method was chosen} from an adaptation plan (polyvse.adaptation.plan's YAML)."""
    import yaml

    raw = yaml.safe_load(Path(plan).read_text(encoding="utf-8")) or {}
    return {x["lang"]: x.get("chosen") for x in raw.get("languages", []) if isinstance(x, dict) and "lang" in x}


def main(argv=None) -> int:
    import polyvse
    from polyvse.evaluation.languages import LanguagesEvaluator
    from polyvse.provenance import provenance
    from polyvse.util.atomic import write_json_atomic
    from polyvse.util.paths import data_root
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
    rows = LanguagesEvaluator(data_root(args.data_root), langs, splits, args.max_photos, not args.quiet)(model)
    if args.adapted:
        import json

        adapted_rows(rows, json.loads(Path(args.adapted).read_text(encoding="utf-8")), args.adapted)
    if args.plan:
        chosen = plan_choices(args.plan)
        for row in rows.values():
            if row.get("taught") and chosen.get(row["lang"]):
                row["chosen"] = chosen[row["lang"]]
    adapted_from = {"adapted_from": args.adapted} if args.adapted else {}
    adapted_from.update({"plan": args.plan} if args.plan else {})
    adapted_from.update(stage_summary(Path(args.checkpoint)))
    training = getattr(getattr(model, "checkpoint", None), "training", None) or {}
    record = {
        "checkpoint": str(args.checkpoint),
        "config": (training.get("config") or {}).get("name", "?"),
        "checkpoint_commit": training.get("commit"),
        "out": str(args.out),
        "provenance": provenance(model=args.checkpoint),
        "max_photos": args.max_photos,
        "splits": list(splits),
        "rows": rows,
        **adapted_from,
        "seconds": round(time.perf_counter() - t0),
    }
    write_json_atomic(Path(args.out), record)
    table = markdown(record)
    print(table)
    if args.readme:
        write_all(REPO)
    return 0


if __name__ == "__main__":
    sys.exit(main())
