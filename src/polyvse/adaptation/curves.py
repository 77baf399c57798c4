"""Learning curves of `polyvse adapt` (scripts/adapt_curves.py, scripts/adapt_sweep.py): a language's zero-shot
fallbacks and its adaptations from growing numbers of lines, scored by the languages evaluator
(:class:`polyvse.evaluation.languages.LanguagesEvaluator`: its galleries, ranked as search ranks), and the choices
made from them.

Every point is scored on val; the choice (the zero-shot fallback, the method, the size) is made on val; test is
computed once, for what val chose: the adaptation chosen on val (what a language the checkpoint does not serve is
served by) and, where a zero-shot fallback beats it on val, that fallback. A choice's further training seeds are
scored on both, their test mR reported as the choice's mean.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: a curve's method label of a teacher with a subword student (polyvse adapt --method teacher, subwords on)
SUBWORDS = "teacher+subwords"
TRAINED = ("teacher", SUBWORDS)  # the methods a training seed changes (procrustes on the same lines is fixed)
VAL, BOTH = ("val",), ("val", "test")

#: (how or method, size, seed, splits) -> {split: scores}
ScoreRun = Callable[..., dict]


def _lines(size: str) -> float:
    return float("inf") if size == "all" else int(size)


def chosen_adaptation(record: dict, lang: str) -> tuple[str, str, dict] | None:
    """(method, size, scores) of ``lang``'s adaptation with the best val mR (ties: fewer lines, then the method
    listed first), or None when none was measured: the choice is made on val only."""
    runs = [
        (method, size, sc)
        for method, by_size in record.get("adapted", {}).get(lang, {}).items()
        for size, sc in by_size.items()
        if "val" in sc
    ]
    if not runs:
        return None
    return max(runs, key=lambda r: (round(r[2]["val"]["mr"], 6), -_lines(r[1])))


def chosen_pick(record: dict, lang: str) -> tuple[str, str, dict] | None:
    """What ``lang`` is served by on val: its chosen adaptation, or its best zero-shot fallback
    (``("zero-shot", how, scores)``) where that scores higher on val; None when nothing was measured."""
    z = record.get("zero_shot", {}).get(lang, {})
    best_z = max(z.items(), key=lambda kv: kv[1]["val"]["mr"]) if z else None
    pick = chosen_adaptation(record, lang)
    if best_z and (pick is None or best_z[1]["val"]["mr"] > pick[2]["val"]["mr"]):
        return "zero-shot", best_z[0], best_z[1]
    return pick


def seed_summary(record: dict, lang: str) -> dict | None:
    """{"seeds": n, "mean": {split: mR}, "sd": {split: mR}} of ``lang``'s chosen adaptation over its training seeds
    (``--chosen-seeds``), or None where only seed 0 was run or the chosen one is not the one the seeds ran."""
    runs = record.get("chosen_seeds", {}).get(lang)
    pick = chosen_adaptation(record, lang)
    if not runs or pick is None or (runs["method"], runs["size"]) != pick[:2] or len(runs["seeds"]) < 2:
        return None
    by_split = {s: [sc[s]["mr"] for sc in runs["seeds"].values()] for s in BOTH}
    return {
        "seeds": len(runs["seeds"]),
        "mean": {s: float(np.mean(v)) for s, v in by_split.items()},
        "sd": {s: float(np.std(v, ddof=1)) for s, v in by_split.items()},
    }


def chosen_zero_shot(record: dict) -> tuple[str, float] | None:
    """The zero-shot fallback with the best mean val mR over the measured languages the towers read, or None."""
    means: dict[str, list[float]] = {}
    for by_how in record.get("zero_shot", {}).values():
        for how, sc in by_how.items():
            if "val" in sc:
                means.setdefault(how, []).append(sc["val"]["mr"])
    if not means:
        return None
    how = max(means, key=lambda h: sum(means[h]) / len(means[h]))
    return how, sum(means[how]) / len(means[how])


def adapted_rows(rows: dict, curves: dict, curves_path: str) -> None:
    """Fill the language rows (the languages evaluator's) of languages the checkpoint does not serve with their
    adaptation chosen on val (in place); a row an earlier curves record filled is filled again from this one."""
    for row in rows.values():
        served = row["status"] and not row["status"].startswith("adapted")
        pick = None if served else chosen_adaptation(curves, row["lang"])
        if pick:
            method, size, scores = pick
            row.update(
                {
                    "status": f"adapted ({method}, {size} lines)",
                    "from": curves_path,
                    **{s: scores[s] for s in BOTH if s in scores},
                }
            )
            seeds = seed_summary(curves, row["lang"])
            if seeds:  # the mean over training seeds of what seed 0's val chose
                row["status"] = f"adapted ({method}, {size} lines; mean of {seeds['seeds']} seeds)"
                for s in BOTH:
                    row[s] = {**row[s], "mr": seeds["mean"][s], "mr_sd": seeds["sd"][s]}


def measure_language(
    record: dict,
    lang: str,
    fallbacks: Sequence[str],
    zero_shot: ScoreRun,
    methods: Sequence[str],
    sizes: Sequence[int | None],
    adapt: ScoreRun,
    extra_seeds: Sequence[int] = (),
    test: bool = True,
) -> None:
    """``lang``'s points into ``record`` (in place): ``zero_shot(how, splits)`` of each fallback and
    ``adapt(method, size, seed, splits)`` of each method and size on val, then test for what val chose (``test``
    False: val only, the choice's test left to the one evaluation of the model it goes into)."""
    record["zero_shot"][lang] = {how: zero_shot(how, VAL) for how in fallbacks}
    for method in methods:
        for size in sizes:
            record["adapted"].setdefault(lang, {}).setdefault(method, {})[str(size or "all")] = adapt(
                method, size, 0, VAL
            )
    if not test:
        return
    pick = chosen_adaptation(record, lang)
    if pick:
        pick[2]["test"] = adapt(pick[0], None if pick[1] == "all" else int(pick[1]), 0, ("test",))["test"]
    served = chosen_pick(record, lang)
    if served and served[0] == "zero-shot":
        served[2]["test"] = zero_shot(served[1], ("test",))["test"]
    if extra_seeds and pick and pick[0] in TRAINED:  # the choice is seed 0's val; more seeds for its test
        method, size = pick[:2]
        record.setdefault("chosen_seeds", {})[lang] = {
            "method": method,
            "size": size,
            "seeds": {
                "0": pick[2],
                **{str(sd): adapt(method, None if size == "all" else int(size), sd, BOTH) for sd in extra_seeds},
            },
        }


def scores_through_part(
    evaluator: Any, model: Any, gals: dict, vecs: dict, lang: str, part, splits: Sequence[str] | None = None
) -> dict:
    """``{split: mean recall}`` of ``lang``'s gallery captions embedded through ``part`` (a language part of the
    model's text encoder) from their line vectors ``vecs[split]``, ranked by ``evaluator``'s scorer."""
    import torch

    from ..model.zero_shot import encode_through_part

    with torch.no_grad():  # a subword student also reads the captions themselves
        return {
            split: evaluator.mean_recall(
                model,
                gals[split],
                lang,
                encode_through_part(model.model, vecs[split], part.eval(), gals[split]["captions"][lang][0])
                .cpu()
                .numpy(),
            )
            for split in (splits or list(gals))
        }


class CurvePoint:
    """One language's adaptations of ``checkpoint``, each run (or reused from its folder under ``work``) and scored
    through :func:`scores_through_part`."""

    def __init__(
        self,
        checkpoint: Path,
        work: Path,
        pivot: str,
        scoring: tuple,
        lang: str,
        pairs: Path,
        cache: Path,
        progress: bool,
    ):
        self.checkpoint, self.work, self.pivot = Path(checkpoint), Path(work), pivot
        self.evaluator, self.model, self.gals, self.vecs = scoring
        self.lang, self.pairs, self.cache, self.progress = lang, pairs, cache, progress

    def run(self, method: str, size: int | None, seed: int = 0, splits: Sequence[str] = BOTH) -> dict:
        from ..model.loading import load
        from .adapt import AdaptRequest, adapt_language
        from .options import TeacherSettings

        out = self.work / (f"{self.lang}-{method}-{size or 'all'}" + (f"-seed{seed}" if seed else ""))
        if not (out / "config.json").is_file():
            adapt_language(
                AdaptRequest(
                    self.checkpoint,
                    self.lang,
                    self.pairs,
                    out,
                    method="teacher" if method == SUBWORDS else method,
                    teacher=TeacherSettings(subwords=method == SUBWORDS, seed=seed),
                    pivot_lang=self.pivot,
                    lines=size,
                    resume=True,
                    cache_dir=self.cache,
                    progress=self.progress,
                )
            )
        adapted = load(out, device="cpu")
        part = (
            adapted.subword_student(self.lang)
            if method == SUBWORDS
            else adapted.model.text_encoder.universal[self.lang]
        )
        scores = scores_through_part(self.evaluator, self.model, self.gals, self.vecs, self.lang, part, splits)
        print(
            f"{self.lang} {method} {size or 'all'}"
            + (f" seed {seed}" if seed else "")
            + ": "
            + ", ".join(f"{s} mR {v['mr']:.1f}" for s, v in scores.items()),
            file=sys.stderr,
        )
        return {**scores, "adaptation": adapted.adapted_languages[self.lang]}
