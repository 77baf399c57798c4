"""A zoo's official runs set against an earlier record of the same zoo: what a change of rule moved (`polyvse zoo
compare`). Issue #24's exclusion rule retrained every config; docs/results.md must say what each old figure was
and how far it moved, and the rows here are read from both sets of committed records, not copied by hand.

Each config is compared on the seeds both records hold (so a config whose extra seeds are not yet retrained is
compared on seed 0 alone, and says so): mR per language (mean of R@1/5/10 both ways) and their mean, before and
after, the change, and whether it is larger than the seeds' spread where there are several. A run whose record is
the earlier one itself (same run file and metrics: a records folder keeps a config's old record until it is
retrained) is not a retraining: such configs are listed as not yet retrained.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from .results import LANGS, RunResult, by_config, collect, official_runs
from .tables import pm


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
        rows.append({"config": config, "seeds": [r.seed for r in old], "langs": langs, "before": b, "after": a,
                     "change": change, "per_language": per_lang,
                     "beyond_spread": None if spread is None else abs(change) > 2 * spread})
    return rows


def compare_table(rows: Sequence[dict], only_before: Sequence[str] = (), only_after: Sequence[str] = ()) -> str:
    """The markdown table of ``compare_rows``, with the configs one record lacks named under it."""
    lines = ["| config | seeds | mean mR before | after | change | per language | beyond 2 sd of the seeds |",
             "|---|---|---:|---:|---:|---|---|"]
    for r in rows:
        langs = ", ".join(f"{lang} {v:+.1f}" for lang, v in r["per_language"].items())
        beyond = {None: "one seed", True: "yes", False: "no"}[r["beyond_spread"]]
        lines.append(f"| {r['config']} | {','.join(map(str, r['seeds']))} | {pm(r['before'])} | {pm(r['after'])} | "
                     f"{r['change']:+.1f} | {langs} | {beyond} |")
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
        raise FileNotFoundError(f"{before_dir} holds no finished official run (a folder `polyvse zoo records` wrote, "
                                "e.g. extracted with `git archive <commit> results/zoo-f8k-full | tar -x -C DIR`)")
    rows = compare_rows(before, after, order)
    old, new = {r.config for r in official_runs(before)}, {r.config for r in official_runs(after)}
    retrained = set(paired(before, after))
    return compare_table(rows, sorted(old - retrained), sorted(new - old))
