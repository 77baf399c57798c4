"""The figures of the zoo report (PNG files beside results.md), one function each."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .results import LANGS, RunResult, by_config, complete_fold_runs, curve_points, official_runs


def _save(plt, fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def recall_bars(plt, results: Sequence[RunResult], order: Sequence[str], path: Path) -> bool:
    """Mean recall per language per config (complete folds ± std, else the official split)."""
    folds = complete_fold_runs(results)
    groups = by_config(folds or official_runs(results))
    names = [n for n in order if n in groups]
    if not names:
        return False
    fig, ax = plt.subplots(figsize=(max(8, len(names) * 0.55), 4.2))
    width = 0.8 / len(LANGS)
    x = np.arange(len(names))
    for i, lang in enumerate(LANGS):
        means, stds = [], []
        for n in names:
            vals = [v for v in (r.mean_recall(lang) for r in groups[n]) if v is not None]
            means.append(np.mean(vals) if vals else np.nan)
            stds.append(np.std(vals, ddof=1) if len(vals) > 1 else 0.0)
        ax.bar(x + (i - 2) * width, means, width, yerr=stds, label=lang, capsize=1.5)
    ax.set_xticks(x, names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("mean recall (R@1,5,10 both ways), %")
    if folds:  # split names are fold<i>of<k>
        k = folds[0].split.rsplit("of", 1)[1]
        where = f" ({len({r.split for r in folds})} of {k} cross-validation folds, ± std)"
    else:
        where = " (official split)"
    ax.set_title("Image–sentence retrieval per language" + where)
    ax.legend(ncol=5, fontsize=8)
    _save(plt, fig, path)
    return True


def training_curves(plt, results: Sequence[RunResult], order: Sequence[str], path: Path) -> bool:
    """Training loss / first-epoch loss of the official split's runs."""
    official = {r.config: r for r in official_runs(results) if r.log}
    if not official:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for n in [n for n in order if n in official]:
        losses = [(e["epoch"], e["loss"]) for e in official[n].log if e.get("loss")]
        if losses:
            ep, ls = zip(*losses)
            ax.plot(ep, np.array(ls) / ls[0], label=n, lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss / first-epoch loss")
    ax.set_title("Training curves (official split, seed 0)")
    ax.legend(fontsize=6, ncol=2)
    _save(plt, fig, path)
    return True


def translator_curve(plt, results: Sequence[RunResult], path: Path) -> bool:
    """The Translator's recall against the number of target-language captions."""
    curves = curve_points(results)
    if not curves:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, pts in curves.items():
        ax.plot([p[0] for p in pts], [p[2] for p in pts], marker="o", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("target-language training captions")
    ax.set_ylabel("mean recall (target language), %")
    ax.set_title("Translator learning curve (official split)")
    ax.legend(fontsize=8)
    _save(plt, fig, path)
    return True


def make_plots(results: Sequence[RunResult], order: Sequence[str], docs: Path) -> list[str]:
    """PNG files under docs/ (names returned)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    if recall_bars(plt, results, order, docs / "zoo_recall_by_language.png"):
        made.append("zoo_recall_by_language.png")
    if training_curves(plt, results, order, docs / "zoo_training_curves.png"):
        made.append("zoo_training_curves.png")
    if translator_curve(plt, results, docs / "zoo_translator_curve.png"):
        made.append("zoo_translator_curve.png")
    return made
