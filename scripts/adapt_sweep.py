"""Choose `polyvse adapt`'s teacher settings on val: every combination of a grid, one language at a time, scored
on Flickr8K's val photos only (test is not computed; `scripts/adapt_curves.py` reports test for what is adopted).

    python scripts/adapt_sweep.py --checkpoint runs/model/checkpoint --langs qu,gn --parallel-dir runs/adapt-curves \\
        --grid 'subword_dim=64,128;epochs=0,10,20' --set subwords=true --work runs/adapt-sweep \\
        --out results/adapt-sweep-model.json

``--grid`` names ``TeacherSettings`` fields and their values (``epochs=0``: the automatic count); ``--set`` fixes
fields for every run. The parallel files are adapt_curves.py's (``<lang>-<pivot>.tsv`` under ``--parallel-dir``,
all their lines). The record holds each run's val mR, held-out translation mR and seconds, and the best setting
per language and over the languages together (mean val mR).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
import time
from pathlib import Path

import torch


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--langs", default="qu,gn")
    p.add_argument("--parallel-dir", required=True, help="folder of adapt_curves.py's <lang>-<pivot>.tsv files")
    p.add_argument("--pivot", default="en")
    p.add_argument("--grid", required=True, help="'field=v1,v2;field=v1,...' over TeacherSettings fields")
    p.add_argument("--set", action="append", default=[], help="field=value for every run (repeatable)")
    p.add_argument("--reference", default="fr")
    p.add_argument("--work", required=True, help="folder for the adapted checkpoints")
    p.add_argument("--out", required=True, help="JSON record to write")
    p.add_argument("--data-root")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def _value(field: dataclasses.Field, text: str):
    kind = field.type if isinstance(field.type, str) else field.type.__name__
    if "bool" in kind:
        if text.lower() not in ("true", "false"):
            raise SystemExit(f"{field.name}={text}: true or false")
        return text.lower() == "true"
    if "int" in kind:
        return int(text)
    return float(text)


def settings_grid(grid: str, fixed: list[str]) -> list[dict]:
    from polyvse.adaptation import TeacherSettings

    fields = {f.name: f for f in dataclasses.fields(TeacherSettings)}

    def pairs(items):
        out = []
        for item in items:
            name, _, values = item.partition("=")
            if name.strip() not in fields:
                raise SystemExit(f"{name!r} is not a TeacherSettings field ({', '.join(fields)})")
            out.append((name.strip(), [_value(fields[name.strip()], v.strip()) for v in values.split(",")]))
        return out

    base = {name: values[0] for name, values in pairs(fixed)}
    axes = pairs([x for x in grid.split(";") if x.strip()])
    return [
        {**base, **dict(zip([a for a, _ in axes], combo))}
        for combo in itertools.product(*[values for _, values in axes])
    ]


def label(setting: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(setting.items()))


def summary(runs: dict, langs: list[str]) -> dict:
    """The best setting per language and over the languages together (mean val mR). Where ``seed`` is a grid axis
    a setting's score is its mean over the seeds (``means``: mean, sd and count per setting without the seed)."""
    import numpy as np

    means: dict = {}
    for lang, by_name in runs.items():
        groups: dict = {}
        for name, run in by_name.items():
            key = ",".join(x for x in name.split(",") if not x.startswith("seed="))
            groups.setdefault(key, []).append(run["val"]["mr"])
        means[lang] = {
            k: {"mr": float(np.mean(v)), "sd": float(np.std(v, ddof=1)) if len(v) > 1 else None, "seeds": len(v)}
            for k, v in groups.items()
        }
    common = [n for n in means[langs[0]] if all(n in means[lang] for lang in langs)]
    return {
        "means": means,
        "best": {lang: max(means[lang], key=lambda n: means[lang][n]["mr"]) for lang in means},
        "best_over_languages": max(common, key=lambda n: sum(means[lang][n]["mr"] for lang in langs)),
    }


def main(argv=None) -> int:
    import polyvse
    from polyvse.adaptation import AdaptRequest, TeacherSettings, adapt_language
    from polyvse.adaptation.curves import scores_through_part
    from polyvse.adaptation.line_vectors import line_vectors
    from polyvse.evaluation.languages import LanguagesEvaluator
    from polyvse.modules.pretrained.cache import sentence_cache_dir
    from polyvse.provenance import provenance
    from polyvse.util.atomic import write_json_atomic
    from polyvse.util.paths import data_root

    args = parse_args(argv)
    root, cache, progress = data_root(args.data_root), sentence_cache_dir(args.data_root), not args.quiet
    langs = [x.strip() for x in args.langs.split(",") if x.strip()]
    grid = settings_grid(args.grid, args.set)
    model = polyvse.load(args.checkpoint, device="cpu")
    evaluator = LanguagesEvaluator(root, langs, splits=("val",), progress=progress)
    gals = evaluator.galleries(model, langs, args.reference)
    record = {
        "checkpoint": str(args.checkpoint),
        "provenance": provenance(
            ["python", "scripts/adapt_sweep.py", *(argv if argv is not None else sys.argv[1:])], args.checkpoint
        ),
        "split": "val",
        "runs": {},
    }
    for lang in langs:
        vecs = {
            "val": torch.from_numpy(
                line_vectors(
                    model.captions, gals["val"]["captions"][lang][0], lang, cache, progress, model.model.text_encoder
                )
            )
        }
        for setting in grid:
            name = label(setting)
            out = Path(args.work) / f"{lang}-{name.replace('=', '-').replace(',', '_')}"
            t0 = time.perf_counter()
            adaptation = (
                adapt_language(
                    AdaptRequest(
                        Path(args.checkpoint),
                        lang,
                        Path(args.parallel_dir) / f"{lang}-{args.pivot}.tsv",
                        out,
                        pivot_lang=args.pivot,
                        teacher=TeacherSettings(**{k: (v or None) if k == "epochs" else v for k, v in setting.items()}),
                        resume=True,
                        cache_dir=cache,
                        progress=progress,
                    ),
                    report=lambda s: None,
                )
                if not (out / "config.json").is_file()
                else polyvse.load(out).adapted_languages[lang]
            )
            adapted = polyvse.load(out, device="cpu")
            part = (
                adapted.subword_student(lang)
                if "subwords" in adapted.adapted_languages[lang]
                else adapted.model.text_encoder.universal[lang]
            )
            score = scores_through_part(evaluator, model, gals, vecs, lang, part)["val"]
            record["runs"].setdefault(lang, {})[name] = {
                "val": score,
                "held_out_translation_mr": adaptation["held_out_translation_mr"],
                "epochs": adaptation.get("epochs"),
                "best_epoch": adaptation.get("best_epoch"),
                "seconds": round(time.perf_counter() - t0, 1),
            }
            print(f"{lang} {name}: val mR {score['mr']:.2f}", file=sys.stderr, flush=True)
            write_json_atomic(Path(args.out), record)
    record.update(summary(record["runs"], langs))
    write_json_atomic(Path(args.out), record)
    print(f"best per language: {record['best']}; together: {record['best_over_languages']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
