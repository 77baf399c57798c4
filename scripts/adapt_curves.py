"""Learning curves of `polyvse adapt`: per-language image-sentence mR on Flickr8K's official val and test photos of
a checkpoint taught each language from 100, 1k, 10k and all MultiScript30k lines (teacher and procrustes), against
zero-shot (every fallback part), with the model's French as the reference. Writes one JSON record.

    python scripts/adapt_curves.py --checkpoint runs/model/checkpoint --langs qu,gn,es,ar \\
        --sizes 100,1000,10000,all --methods teacher,procrustes --work runs/adapt-curves \\
        --out results/adapt-curves-f8k-full.json

Choices (the zero-shot fallback, the method, the size) are made on ``val``; ``test`` is computed once, for what val
chose (polyvse.adaptation.curves: every other point carries val only). Galleries and scoring are the languages
evaluator's (`polyvse evaluate --task languages`: ranked as search ranks). The captions of a language are
MultiScript30k's lines of the gallery's photos (machine translations of Multi30K's English line: one caption a photo,
so the gallery is the photos that have one -- say so beside every figure). The parallel files come from `polyvse
data parallel` (every evaluation photo and sentence left out); photo vectors come from the checkpoint and never
change. Resumable: finished adaptations (their checkpoint folders under --work) are reused, a stopped teacher run
resumes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from polyvse.adaptation.curves import (  # noqa: F401  (chosen_adaptation, seed_summary: the record's choices)
    CurvePoint,
    chosen_adaptation,
    chosen_pick,
    chosen_zero_shot,
    measure_language,
    scores_through_part,
    seed_summary,
)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--langs", default="qu,gn,es,ar", help="MultiScript30k languages (default %(default)s)")
    p.add_argument("--sizes", default="100,1000,10000,all", help="lines per adaptation (default %(default)s)")
    p.add_argument("--methods", default="teacher,procrustes", help="adapt methods (default %(default)s)")
    p.add_argument("--pivot", default="en")
    p.add_argument("--reference", default="fr", help="a trained language scored on the same galleries")
    p.add_argument("--work", required=True, help="folder for parallel files and adapted checkpoints")
    p.add_argument("--out", required=True, help="JSON record to write (e.g. under results/)")
    p.add_argument("--data-root")
    p.add_argument("--seed", type=int, default=0, help="the parallel files' shuffle (which lines a size takes)")
    p.add_argument(
        "--chosen-seeds",
        default="",
        help="more training seeds (e.g. 1,2) for each language's adaptation chosen on val: its test mR is "
        "then reported as the mean over seed 0 (the curve's point) and these",
    )
    p.add_argument("--max-photos", type=int, help="the first N photos of each split only (a smoke run)")
    p.add_argument(
        "--val-only",
        action="store_true",
        help="score val only (a choice whose test figure comes from one later evaluation of the model "
        "it goes into); no README block",
    )
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--readme", action="store_true", help="rewrite README's adapt-curves block from the record")
    p.add_argument(
        "--from-record",
        action="store_true",
        help="measure nothing: rewrite README's block from the existing --out record",
    )
    return p.parse_args(argv)


def markdown(record: dict) -> str:
    """README's adapt-curves block: val mR of every zero-shot fallback and adaptation, test mR only for the choice
    made on val (the test split is reported once, for what was chosen)."""
    from polyvse.evaluation.report import markdown_rows

    ref_lang, ref = next(iter(record["reference"].items()))
    zs = chosen_zero_shot(record)
    sizes = sorted(
        {size for by_m in record.get("adapted", {}).values() for by_s in by_m.values() for size in by_s},
        key=lambda x: float("inf") if x == "all" else int(x),
    )
    methods = sorted({m for by_m in record.get("adapted", {}).values() for m in by_m})
    head = (
        ["language", "zero-shot val (fallback)"]
        + [f"{m} {s} val" for m in methods for s in sizes]
        + ["chosen on val", "its test mR", f"test mR / {ref_lang}'s"]
    )
    body = []
    for lang in record.get("languages_done", list(record.get("zero_shot", {}))):
        z = record.get("zero_shot", {}).get(lang, {})
        best_z = max(z.items(), key=lambda kv: kv[1]["val"]["mr"]) if z else None
        row = [lang, f"{best_z[1]['val']['mr']:.1f} ({best_z[0]})" if best_z else "not read"]
        runs = record.get("adapted", {}).get(lang, {})
        row += [f"{runs[m][s]['val']['mr']:.1f}" if s in runs.get(m, {}) else "-" for m in methods for s in sizes]
        pick = chosen_pick(record, lang)
        seeds = seed_summary(record, lang) if pick and pick[0] != "zero-shot" else None
        if pick:
            test = seeds["mean"]["test"] if seeds else pick[2]["test"]["mr"]
            cell = f"{test:.1f} ± {seeds['sd']['test']:.1f} ({seeds['seeds']} seeds)" if seeds else f"{test:.1f}"
            row += [f"{pick[0]} {pick[1]}", cell, f"{100 * test / ref['test']['mr']:.0f}%"]
        else:
            row += ["-", "-", "-"]
        body.append(row)
    from polyvse.provenance import machine_line

    where = record.get("provenance", record)  # records before the provenance block: its fields at the top
    machine = machine_line(where["machine"]) if isinstance(where.get("machine"), dict) else where.get("machine", "?")
    note = (
        f"`{record['checkpoint']}`; MultiScript30k lines (machine translations of Multi30K's English line, one "
        f"a photo) of Flickr8K's official val and test photos; parallel files from `polyvse data parallel` "
        f"(pivot {record['pivot']}, every evaluation photo and sentence left out); the reference, {ref_lang} "
        f"(trained), scores val {ref['val']['mr']:.1f} / test {ref['test']['mr']:.1f} mR on the same photos' "
        f"{ref_lang} captions. Zero-shot: the best fallback part on val; on every language together the best "
        f"fallback on val is {zs[0]!r} ({zs[1]:.1f}). A chosen adaptation's test mR is the mean ± sd over its "
        f"training seeds where more than one ran (the choice itself is seed 0's val). Record `{record.get('out', '?')}` ({str(where.get('date', '?'))[:10]}, "
        f"{machine}{'' if record.get('complete') else '; PARTIAL: the run was stopped'}).\n\n"
    )
    return note + markdown_rows(head, body)


def main(argv=None) -> int:
    import torch

    import polyvse
    from polyvse.adaptation import trained_languages
    from polyvse.adaptation.line_vectors import line_vectors
    from polyvse.adaptation.multiscript_lines import write_multiscript_parallel
    from polyvse.evaluation.languages import LanguagesEvaluator
    from polyvse.model.zero_shot import fallback_part
    from polyvse.modules.pretrained.cache import sentence_cache_dir
    from polyvse.provenance import provenance
    from polyvse.util.atomic import write_json_atomic
    from polyvse.util.paths import data_root

    args = parse_args(argv)
    if args.from_record:
        import json

        return readme_block(json.loads(Path(args.out).read_text(encoding="utf-8")))
    t0, root, progress = time.perf_counter(), data_root(args.data_root), not args.quiet
    work, cache = Path(args.work), sentence_cache_dir(args.data_root)
    langs = [x.strip() for x in args.langs.split(",") if x.strip()]
    sizes = [None if s == "all" else int(s) for s in args.sizes.split(",")]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    extra_seeds = [int(x) for x in args.chosen_seeds.split(",") if x.strip()]
    model = polyvse.load(args.checkpoint, device="cpu")
    if args.val_only and (args.chosen_seeds or args.readme):
        raise SystemExit("--val-only scores no test: drop --chosen-seeds and --readme")
    evaluator = LanguagesEvaluator(
        root,
        langs,
        splits=("val",) if args.val_only else ("val", "test"),
        max_photos=args.max_photos,
        progress=progress,
    )
    gals = evaluator.galleries(model, langs, args.reference)
    record = {
        "checkpoint": str(args.checkpoint),
        "pivot": args.pivot,
        "seed": args.seed,
        "provenance": provenance(
            ["python", "scripts/adapt_curves.py", *(argv if argv is not None else sys.argv[1:])], args.checkpoint
        ),
        "out": str(args.out),
        "complete": False,
        "languages_done": [],
        "captions": "MultiScript30k machine translations of Multi30K's English line (one a photo)",
        "reference": {args.reference: {s: evaluator.mean_recall(model, g, args.reference) for s, g in gals.items()}},
        "zero_shot": {},
        "adapted": {},
        **({"splits": ["val"]} if args.val_only else {}),
    }
    for lang in langs:
        vecs = {
            s: torch.from_numpy(
                line_vectors(model.captions, g["captions"][lang][0], lang, cache, progress, model.model.text_encoder)
            )
            for s, g in gals.items()
        }
        pairs = work / f"{lang}-{args.pivot}.tsv"
        if not pairs.is_file():
            record.setdefault("parallel_files", {})[lang] = write_multiscript_parallel(
                root, lang, pairs, args.pivot, seed=args.seed
            )
        point = CurvePoint(
            Path(args.checkpoint), work, args.pivot, (evaluator, model, gals, vecs), lang, pairs, cache, progress
        )
        measure_language(
            record,
            lang,
            ["mean"] + trained_languages(model),
            lambda how, splits: scores_through_part(
                evaluator,
                model,
                gals,
                vecs,
                lang,
                fallback_part(model.model.text_encoder, how, trained_languages(model)),
                splits,
            ),
            methods,
            sizes,
            point.run,
            extra_seeds,
            test=not args.val_only,
        )
        # a partial record after each language: a stopped run keeps what it measured (and resumes its adaptations)
        record["languages_done"].append(lang)
        record["seconds"] = round(time.perf_counter() - t0)
        write_json_atomic(Path(args.out), record)
    record["complete"] = True
    record["seconds"] = round(time.perf_counter() - t0)
    write_json_atomic(Path(args.out), record)
    print(f"wrote {args.out} ({record['seconds']} s)", file=sys.stderr)
    return readme_block(record) if args.readme else 0


def readme_block(record: dict) -> int:
    from polyvse_train.zoo.report import update_readme_block

    table = markdown(record)
    print(table)
    if not update_readme_block(Path(__file__).resolve().parents[1] / "README.md", table, tag="adapt-curves"):
        print("README.md has no adapt-curves block", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
