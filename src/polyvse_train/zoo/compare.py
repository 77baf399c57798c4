"""A zoo's official runs set against an earlier record of the same zoo: what a change of rule moved (`polyvse zoo
compare`). A change of exclusion rule retrains every config; docs/results.md must say what each old figure was
and how far it moved, and the rows here are read from both sets of committed records, not copied by hand.

Each config is compared on the seeds both records hold (so a config whose extra seeds are not yet retrained is
compared on seed 0 alone, and says so): mR per language (mean of R@1/5/10 both ways) and their mean, before and
after, the change, and whether it is larger than the seeds' spread where there are several. A run whose record is
the earlier one itself (same run file and metrics: a records folder keeps a config's old record until it is
retrained) is not a retraining: such configs are listed as not yet retrained.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .results import LANGS, RunResult, by_config, collect, fold_runs, official_runs
from .tables import pm, table_cells


def mean_mr(run: RunResult, langs: Sequence[str]) -> float:
    """The mean over ``langs`` (languages the run holds) of the run's mR."""
    return float(np.mean([run.mean_recall(lang) for lang in langs]))


def same_record(a: RunResult, b: RunResult) -> bool:
    """Whether two runs are one record (a records folder keeps a config's old record until it is retrained)."""
    return a.run == b.run and a.metrics == b.metrics


def paired(before: Sequence[RunResult], after: Sequence[RunResult]) -> dict[str, tuple[list, list]]:
    """config -> (runs before, runs after) on the seeds both hold and ``after`` retrained, in seed order; configs
    with no such seed are left out (the caller lists them)."""
    old, new = by_config(official_runs(before)), by_config(official_runs(after))
    out = {}
    for config in sorted(set(old) & set(new)):
        was, now = ({r.seed: r for r in runs[config]} for runs in (old, new))
        seeds = sorted(s for s in set(was) & set(now) if not same_record(was[s], now[s]))
        if seeds:
            out[config] = ([was[s] for s in seeds], [now[s] for s in seeds])
    return out


def mean_mr_of(runs: Sequence[RunResult], lang: str) -> float:
    """The mean over ``runs`` of their mR in ``lang``."""
    return float(np.mean([r.mean_recall(lang) for r in runs]))


def compare_rows(before: Sequence[RunResult], after: Sequence[RunResult], order: Sequence[str] = ()) -> list[dict]:
    """One row per config both records hold: seeds, mean mR before/after over those seeds (values per seed kept),
    per-language change of the means, and whether the change exceeds twice the larger seed deviation."""
    rows = []
    pairs = paired(before, after)
    for config in [c for c in order if c in pairs] + [c for c in pairs if c not in order]:
        old, new = pairs[config]
        langs = [lang for lang in LANGS if all(lang in r.languages for r in old + new)]
        if not langs:
            continue
        b, a = [mean_mr(r, langs) for r in old], [mean_mr(r, langs) for r in new]
        per_lang = {lang: mean_mr_of(new, lang) - mean_mr_of(old, lang) for lang in langs}
        spread = max(float(np.std(b, ddof=1)), float(np.std(a, ddof=1))) if len(b) > 1 else None
        change = float(np.mean(a) - np.mean(b))
        rows.append(
            {
                "config": config,
                "seeds": [r.seed for r in old],
                "langs": langs,
                "before": b,
                "after": a,
                "change": change,
                "per_language": per_lang,
                "beyond_spread": None if spread is None else abs(change) > 2 * spread,
            }
        )
    return rows


def compare_table(rows: Sequence[dict], only_before: Sequence[str] = (), only_after: Sequence[str] = ()) -> str:
    """The markdown table of ``compare_rows``, with the configs one record lacks named under it."""
    lines = [
        "| config | seeds | mean mR before | after | change | per language | beyond 2 sd of the seeds |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        langs = ", ".join(f"{lang} {v:+.1f}" for lang, v in r["per_language"].items())
        beyond = {None: "one seed", True: "yes", False: "no"}[r["beyond_spread"]]
        lines.append(
            f"| {r['config']} | {','.join(map(str, r['seeds']))} | {pm(r['before'])} | {pm(r['after'])} | "
            f"{r['change']:+.1f} | {langs} | {beyond} |"
        )
    if only_before:
        lines += ["", "Not yet retrained (the earlier record only): " + ", ".join(only_before) + "."]
    if only_after:
        lines += ["", "New since the earlier record: " + ", ".join(only_after) + "."]
    return "\n".join(lines) + "\n"


def compare_records(before_dir: Path, after_dir: Path, order: Sequence[str] = ()) -> str:
    """The comparison of two zoo record folders (each as `polyvse zoo records` writes it, or a runs folder)."""
    before, _ = collect(before_dir)
    after, _ = collect(after_dir)
    if not official_runs(before):
        raise FileNotFoundError(
            f"{before_dir} holds no finished official run (a folder `polyvse zoo records` wrote, "
            "e.g. extracted with `git archive <commit> results/zoo-f8k-full | tar -x -C DIR`)"
        )
    rows = compare_rows(before, after, order)
    old, new = {r.config for r in official_runs(before)}, {r.config for r in official_runs(after)}
    retrained = set(paired(before, after))
    return compare_table(rows, sorted(old - retrained), sorted(new - old))


# The F8K-ML zoo's runs before the rule were never kept as records: its earlier figures are the cross-validation
# table of the results.md its report wrote then (`git show <commit>:docs/results.md`), read back here.
FOLD_TABLE_HEADING = "## 1. Image–sentence retrieval, 5-fold cross-validation (primary)"


def _mean_of_cell(cell: str) -> float | None:
    """45.1 from '45.1 ± 1.6' (or '45.1'); None for '-'."""
    value = cell.split("±")[0].strip()
    return None if value in ("", "-") else float(value)


def fold_means_from_doc(text: str, source: str = "results.md") -> dict[str, dict]:
    """config -> {language: fold-mean mR, "mean": mean over languages, "cell": the mean column as printed} from
    section 1 of a results.md the F8K-ML zoo report wrote; an error naming ``source`` when it has no such table."""
    if FOLD_TABLE_HEADING not in text:
        raise ValueError(
            f"{source} has no section {FOLD_TABLE_HEADING!r}: give a results.md written by the F8K-ML "
            "zoo report (e.g. `git show <commit>:docs/results.md > FILE`)"
        )
    section = text.split(FOLD_TABLE_HEADING, 1)[1].split("\n## ", 1)[0].strip()
    first_table = section.split("\n\n", 1)[0] if section.startswith("|") else ""  # other tables follow it
    rows = [table_cells(line) for line in first_table.splitlines()]
    if len(rows) < 3 or rows[0][:2] != ["config", "runs"]:
        raise ValueError(
            f"{source}: section 1 holds no cross-validation table (its header should start '| config | runs |')"
        )
    header = rows[0]
    langs = [h.split()[0] for h in header if h.endswith(" mR")]
    out = {}
    for cells in rows[2:]:
        row = dict(zip(header, cells))
        means = {lang: _mean_of_cell(row[f"{lang} mR"]) for lang in langs}
        out[row["config"]] = {
            **{k: v for k, v in means.items() if v is not None},
            "mean": _mean_of_cell(row["mean"]),
            "cell": row["mean"],
        }
    return out


def _folds_of(split: str) -> int:
    """5 from 'fold2of5'."""
    return int(split.rsplit("of", 1)[1])


def compare_folds_with_doc(
    before_text: str, after_dir: Path, order: Sequence[str] = (), source: str = "results.md"
) -> str:
    """The F8K-ML zoo's configs retrained on every fold, set against the fold means an earlier results.md printed
    (rounded to 0.1 there, so a change carries up to 0.1 of rounding). Same folds before and after (fixed by seed
    0): the change is not a draw of new test photos; the fold spread is shown, not used as a noise bound."""
    before = fold_means_from_doc(before_text, source)
    after = by_config(fold_runs(collect(after_dir)[0]))
    # every fold of the k the split names say ("fold2of5"): k folds of a config, not just as many as the others have
    whole = {c: runs for c, runs in after.items() if len({r.split for r in runs}) == _folds_of(runs[0].split)}
    lines = ["| config | folds | mean mR before | after | change | per language |", "|---|---:|---:|---:|---:|---|"]
    shared = [c for c in order if c in whole and c in before] + sorted(
        c for c in whole if c in before and c not in order
    )
    for config in shared:
        runs, was = whole[config], before[config]
        langs = [lang for lang in LANGS if lang in was and all(lang in r.languages for r in runs)]
        now = {lang: mean_mr_of(runs, lang) for lang in langs}
        per_run = [float(np.mean([r.mean_recall(lang) for lang in langs])) for r in runs]
        change = ", ".join(f"{lang} {now[lang] - was[lang]:+.1f}" for lang in langs)
        lines.append(
            f"| {config} | {_folds_of(runs[0].split)} | {was['cell']} | {pm(per_run)} | {np.mean(per_run) - was['mean']:+.1f} "
            f"| {change} |"
        )
    lines.append("")
    left = sorted(set(before) - set(shared))
    if left:
        lines.append("Not yet retrained on every fold (the earlier figure only): " + ", ".join(left) + ".")
    new = sorted(set(whole) - set(before))
    if new:
        lines.append("New since the earlier table: " + ", ".join(new) + ".")
    return "\n".join(lines).rstrip("\n") + "\n"
