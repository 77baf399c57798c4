"""The finished runs of a zoo read back from their folders, and the selections the report makes of them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polyvse.provenance import RECONSTRUCTED_MARK

from .runner import ERROR_FILE, RUN_FILE, TASKS_FILE
from .spec import OFFICIAL

LANGS = ("en", "de", "fr", "cs", "zh")
RECALLS = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10")


@dataclass
class RunResult:
    config: str
    split: str
    seed: int
    tag: str
    folder: Path
    metrics: dict
    run: dict
    tasks: dict | None = None
    log: list[dict] = field(default_factory=list)

    @property
    def languages(self) -> dict[str, dict]:
        return self.metrics.get("languages", {})

    @property
    def time_complete(self) -> bool:
        """Whether the recorded wall/CPU time covers the whole training. Recorded since polyvse keeps the time
        over a resumed run's processes; for runs recorded before, the training log tells whether one process
        trained it (its clock never went back, and its epochs' loops fit in the recorded wall time)."""
        if "time_complete" in self.run:
            return bool(self.run["time_complete"])
        seconds = [e["seconds"] for e in self.log if "seconds" in e]
        loops = sum(e.get("loop_seconds", 0.0) for e in self.log)
        return all(b >= a for a, b in zip(seconds, seconds[1:])) and loops <= self.run["wall_seconds"] * 1.02 + 5

    def mean_recall(self, lang: str) -> float | None:
        m = self.languages.get(lang)
        return None if m is None else float(np.mean([m[k] for k in RECALLS]))


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def collect(out: Path) -> tuple[list[RunResult], list[dict]]:
    """(finished runs, failed runs) under a zoo output folder."""
    results, failed = [], []
    for rec in sorted(Path(out).glob(f"*/*/{RUN_FILE}")):
        d = rec.parent
        if ".stale-" in d.name or not (d / "metrics.json").exists():
            continue
        run = _read_json(rec)
        cfg = run["config"]
        split_seed = d.name
        tag = split_seed.split("-", 2)[2] if split_seed.count("-") >= 2 else ""
        log = []
        if (d / "train_log.jsonl").exists():
            log = [json.loads(x) for x in (d / "train_log.jsonl").read_text(encoding="utf-8").splitlines() if x]
        results.append(
            RunResult(
                run["config_name"],
                cfg["split"],
                cfg["seed"],
                tag,
                d,
                _read_json(d / "metrics.json"),
                run,
                _read_json(d / TASKS_FILE) if (d / TASKS_FILE).exists() else None,
                log,
            )
        )
    for err in sorted(Path(out).glob(f"*/*/{ERROR_FILE}")):
        if ".stale-" not in err.parent.name:
            failed.append(_read_json(err))
    return results, failed


def fold_runs(results: Sequence[RunResult]) -> list[RunResult]:
    return [r for r in results if r.split.startswith("fold") and not r.tag]


def complete_fold_runs(results: Sequence[RunResult]) -> list[RunResult]:
    """The fold runs of the folds that every config (with any run) has finished: means over the same folds
    for every row. A partial fold enters only the paired claim checks."""
    configs = {r.config for r in results if not r.tag}
    by_fold: dict[str, set[str]] = {}
    for r in fold_runs(results):
        by_fold.setdefault(r.split, set()).add(r.config)
    complete = {split for split, have in by_fold.items() if have >= configs}
    return [r for r in fold_runs(results) if r.split in complete]


def official_runs(results: Sequence[RunResult]) -> list[RunResult]:
    return [r for r in results if r.split == OFFICIAL and not r.tag]


def by_config(results: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    out: dict[str, list[RunResult]] = {}
    for r in results:
        out.setdefault(r.config, []).append(r)
    return out


def curve_points(results: Sequence[RunResult]) -> dict[str, list[tuple[int, float, float]]]:
    """config -> [(n target captions, t2i R@10, mean recall)] of the learning-curve runs (official split)."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    curve_langs: dict[str, str] = {}
    for r in results:
        limit = r.run.get("overrides", {}).get("caption_limit")
        if r.split != OFFICIAL or not r.tag or not limit:
            continue
        ((lang, n),) = limit.items()
        curve_langs[r.config] = lang
        m = r.languages.get(lang)
        if m is not None:
            out.setdefault(f"{r.config} ({lang})", []).append((int(n), m["t2i_r10"], r.mean_recall(lang)))
    for r in official_runs(results):  # the config's plain run: every target caption
        lang = curve_langs.get(r.config)
        n = r.metrics.get("n_train_captions_by_language", {}).get(lang)
        if lang and n and lang in r.languages:
            out[f"{r.config} ({lang})"].append((int(n), r.languages[lang]["t2i_r10"], r.mean_recall(lang)))
    return {k: sorted(v) for k, v in out.items()}


def machines(results: Sequence[RunResult]) -> str:
    """The machines the runs say they ran on, with how many runs each; runs that predate the record are counted
    as not recorded (a report must not name the machine that writes it for runs another machine trained)."""
    counts: dict[str, int] = {}
    for r in results:
        name = r.run.get("machine") or "not recorded"
        counts[name] = counts.get(name, 0) + 1
    if not counts:
        return "-"
    order = sorted(counts, key=lambda k: (k == "not recorded", -counts[k], k))
    if len(order) == 1:
        return order[0] if order[0] != "not recorded" else f"not recorded by these runs ({SINCE})"
    return "; ".join(f"{k} ({counts[k]} runs)" for k in order) + (f" ({SINCE})" if "not recorded" in counts else "")


#: why a run counts as "not recorded": its record predates the field
SINCE = "their `zoo_run.json` names no machine"


def reconstructed_note(results: Sequence[RunResult]) -> list[str]:
    """A line saying which runs' figures rest on a provenance block reconstructed after the fact, marked as the
    record links of the generated blocks are (none such: no line)."""
    n = sum(isinstance(r.run.get("provenance"), dict) and "reconstructed" in r.run["provenance"] for r in results)
    if not n:
        return []
    runs = "every run" if n == len(results) else f"{n} of {len(results)} runs"
    return [
        f"- Records: the figures of {runs} rest on records {RECONSTRUCTED_MARK}: the provenance block of "
        "their `zoo_run.json` was reconstructed after the fact and names, under `reconstructed.unknown`, what "
        "was not recorded and why."
    ]
