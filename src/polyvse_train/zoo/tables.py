"""The markdown tables of the zoo report, each made from a list of finished runs (:mod:`.results`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from polyvse.evaluation.report import markdown_rows

from .results import LANGS, RECALLS, RunResult, by_config, complete_fold_runs, machines, official_runs

CROSSLINGUAL_NOTE = (
    "Each caption queries the captions of the other language; one gold item per query (its "
    "translation). Pairs of the model's training photos are left out (31 Multi30K test_2016 "
    "photos are Flickr8K photos). en-zh pairs: Flickr8K caption #0 and its human translation."
)


def fmt(x: float | None, d: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"


def pm(vals: Sequence[float], d: int = 1) -> str:
    if not vals:
        return "-"
    if len(vals) == 1:
        return fmt(vals[0], d)
    return f"{np.mean(vals):.{d}f} ± {np.std(vals, ddof=1):.{d}f}"


def table_cells(line: str) -> list[str]:
    """The stripped cells of one markdown table row ('| a | b |' -> ['a', 'b'])."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def cpu_minutes(runs: Sequence[RunResult]) -> str:
    """CPU minutes per run: on a shared (or paused) machine wall time says more about the neighbours than the
    method; with threads: 1 a run's CPU time is its wall time on a quiet core. "≥": some run was resumed before
    the time of its earlier processes was kept, so only its last process counts."""
    if not runs:
        return "-"
    return ("" if all(r.time_complete for r in runs) else "≥ ") + fmt(
        float(np.mean([r.run["cpu_seconds"] for r in runs])) / 60
    )


def summary_table(results: Sequence[RunResult], order: Sequence[str]) -> str:
    """A row per config: runs, parameters, minutes per run, mean recall per language (mean ± std over runs)."""
    groups = by_config(results)
    rows = []
    for name in order:
        runs = groups.get(name)
        if not runs:
            continue
        cells = [name, str(len(runs)), fmt(runs[0].metrics["parameters"] / 1e6, 2), cpu_minutes(runs)]
        per_run_mean = []
        for lang in LANGS:
            vals = [v for v in (r.mean_recall(lang) for r in runs) if v is not None]
            cells.append(pm(vals))
        for r in runs:
            langs = [r.mean_recall(lang) for lang in LANGS if r.mean_recall(lang) is not None]
            per_run_mean.append(float(np.mean(langs)))
        cells.append(pm(per_run_mean))
        rows.append(cells)
    return markdown_rows(
        ["config", "runs", "params (M)", "CPU min/run", *[f"{lang} mR" for lang in LANGS], "mean"], rows
    )


def language_table(results: Sequence[RunResult], order: Sequence[str], lang: str, medr: bool = False) -> str:
    """R@K both ways per config (``medr``: and the median ranks, as the Flickr8K literature reports them)."""
    groups = by_config(results)
    keys = [*RECALLS[:3], *(["i2t_medr"] if medr else []), *RECALLS[3:], *(["t2i_medr"] if medr else [])]
    rows = []
    for name in order:
        runs = [r for r in groups.get(name, []) if lang in r.languages]
        if not runs:
            continue
        rows.append([name, str(len(runs))] + [pm([r.languages[lang][k] for r in runs]) for k in keys])
    header = [k.replace("_medr", " medR").replace("_r", " R@") for k in keys]  # i2t_r1 -> i2t R@1
    return markdown_rows(["config", "runs", *header], rows)


def official_table(results: Sequence[RunResult], order: Sequence[str]) -> str:
    groups = {r.config: r for r in official_runs(results)}
    rows = []
    for n in order:
        r = groups.get(n)
        if r is None:
            continue
        cells = [n]
        for lang in LANGS:
            m = r.languages.get(lang)
            cells.append("-" if m is None else f"{m['t2i_r1']:.1f} / {m['t2i_r10']:.1f} · {m['i2t_r1']:.1f}")
        rows.append(cells)
    return markdown_rows(["config", *[f"{lang} t2i R@1 / R@10 · i2t R@1" for lang in LANGS]], rows)


def crosslingual_tables(results: Sequence[RunResult], order: Sequence[str]) -> str:
    groups = {r.config: r for r in official_runs(results) if r.tasks and r.tasks.get("crosslingual")}
    text = []
    for corpus in ("f8k-ml-test", "multi30k-test_2016"):
        pairs = [
            p
            for p in ("en-de", "en-fr", "en-cs", "en-zh")
            if any(p in r.tasks["crosslingual"].get(corpus, {}) for r in groups.values())
        ]
        if not pairs:
            continue
        header = ["config"]
        for p in pairs:
            a, b = p.split("-")
            header += [f"{a}→{b} R@1 / R@10", f"{b}→{a} R@1 / R@10"]
        rows = []
        n_pairs = {}
        for name in order:
            r = groups.get(name)
            if r is None:
                continue
            per = r.tasks["crosslingual"].get(corpus, {})
            cells = [name]
            for p in pairs:
                m = per.get(p)
                if m is None:
                    cells += ["-", "-"]
                    continue
                n_pairs[p] = m["n_pairs"]
                cells += [f"{m['a2b_r1']:.1f} / {m['a2b_r10']:.1f}", f"{m['b2a_r1']:.1f} / {m['b2a_r10']:.1f}"]
            rows.append(cells)
        sizes = ", ".join(f"{p}: {n}" for p, n in n_pairs.items())
        text.append(f"**{corpus}** (pairs per language pair: {sizes})\n\n" + markdown_rows(header, rows))
    return "\n".join(text)


def sts_table(results: Sequence[RunResult], order: Sequence[str]) -> str:
    groups = {r.config: r for r in official_runs(results) if r.tasks and r.tasks.get("sts")}
    keys = ("sts12-msrvid", "sts14-images", "sts15-images")
    rows = [[n] + [fmt(groups[n].tasks["sts"].get(k)) for k in keys] for n in order if n in groups]
    return markdown_rows(["config", "2012 MSRvid", "2014 images", "2015 images"], rows)


def words_table(results: Sequence[RunResult], order: Sequence[str], part: str = "test") -> str:
    """P@1 (source words) per config and language on the MUSE lexicon's ``part`` ("test" or "train")."""
    p1, n = ("p_at_1", "n_words") if part == "test" else ("train_p_at_1", "n_train_words")
    groups = {r.config: r for r in official_runs(results) if r.tasks and r.tasks.get("words")}
    langs = [lang for lang in LANGS if lang != "en"]
    rows = []
    for name in order:
        if name not in groups:
            continue
        w = groups[name].tasks["words"]
        cells = [name]
        for lang in langs:
            e = w.get(lang) or {}
            into = "" if e.get("pivot", "en") == "en" else f", into {e['pivot']}"
            cells.append("-" if e.get(p1) is None else f"{e[p1]:.1f} ({e[n]}{into})")
        rows.append(cells)
    return markdown_rows(["config", *[f"{lang}→en P@1 (words)" for lang in langs]], rows)


def words_section(official: Sequence[RunResult], order: Sequence[str], spec: Any, command: str | None = None) -> str:
    """Section 5 of docs/results.md: word-translation P@1 on held-out MUSE pairs, the method and, with
    ``command``, how its runs were made (when the section is regenerated alone, by scripts/word_translation.py)."""
    from polyvse.alignment import HELD_OUT_RANKS

    start, end = HELD_OUT_RANKS
    lines = ["## 5. Word translation P@1 (CSLS, k = 10), held-out MUSE words", ""]
    if command:
        when = sorted(r.run["finished_utc"] for r in official)
        lines += [
            f"Regenerated alone by `{command}` (then this section is rewritten in place). F8K-ML official "
            f"split (train 629 / test 125 photos), training seed 0, the zoo's budget "
            f"(`configs/zoo/cpu.yaml`: "
            + ", ".join(f"`{k}: {v}`" for k, v in spec.overrides.items())
            + "".join(
                f"; objective {o}: " + ", ".join(f"`{k}: {v}`" for k, v in extra.items())
                for o, extra in spec.by_objective.items()
            )
            + f"). Machine: {machines(official)}; runs finished {when[0] if when else '-'} to "
            f"{when[-1] if when else '-'}, mean {cpu_minutes(official)} CPU minutes per run.",
            "",
        ]
    lines += [
        "Split (`polyvse.alignment.muse_lexicon`, the one definition training and evaluation share): the source "
        "words of each MUSE `full/<src>-<tgt>.txt` are ranked by their first line (MUSE lists them by "
        f"frequency); the **test part** is every pair of the source words ranked {start}–{end - 1}, the **train "
        "part** every pair of every other source word, so the two share no source word. The test parts equal "
        "the `splits_reconstructed/*.5000-6500.txt` files at hand, which were rebuilt from `full/` by this rule "
        "(they are not MUSE's released split files). AME's alignment loss and lexicon initialisation "
        "(`word_init: muse`) and the Translator's Procrustes/RCSLS map use the train part only.",
        "",
        "P@1 of each model's word vectors (what its sentence encoder reads: the word embedding, after the "
        "Translator's map or MULE's universal projection) on the test part, filtered to the model's training "
        "vocabulary (source word and a translation both in it); in brackets the number of held-out source "
        "words. CSLS neighbourhoods span the model's whole vocabulary of each language. Into English, except "
        "the Translator (de/fr, no English): fr→de.",
        "",
        words_table(official, order, "test"),
        "The same on the train part, the pairs the lexicon-trained configs were given: how much of that "
        "alignment they keep, not a translation score. A config near 100 here and near 0 above has kept its "
        "lexicon without learning anything that carries over to other words: with no pretrained word vectors "
        "at hand, every train-part word starts at (or is mapped onto) its translation's vector, and nothing "
        "moves a held-out word towards its translation.",
        "",
        words_table(official, order, "train"),
        "Why configs without a lexicon score ~0: they tie languages together only through images and whole "
        "sentences, so nothing pulls a word's vector towards its translation's; in the embedding table the two "
        "stay as unrelated as their random starts, and P@1 is at chance level (one hit in as many tries as the "
        "vocabulary has English words) on both parts. That is the models, not the measurement: the same "
        "evaluator on the same vocabulary scores ~100 once the held-out words sit at their translations, and "
        "chance for random vectors (`tests/test_word_translation_zero.py`); "
        "`scripts/word_vectors_diagnostics.py RUN/checkpoint` prints, per language and part, the cosine of "
        "translation pairs against random pairs, that sanity score, and P@1 of words encoded as one-word "
        "sentences into the joint space.",
        "",
    ]
    return "\n".join(lines)


def best_per_language(results: Sequence[RunResult]) -> list[tuple[str, str, float, float, int, str]]:
    """(lang, best config, mean mR, std, runs, runner-up text) over the complete folds (else the official
    split). Only configs with the most finished runs for a language compete, so means are over the same folds.
    Configs with identical results on every run (the same recipe, e.g. polyvse-best when it is e5-frozen's) are
    one entry, "a = b", so the runner-up is the next different model."""
    runs = complete_fold_runs(results) or official_runs(results)
    out = []
    for lang in LANGS:
        per: dict[str, dict[str, float]] = {}
        for r in runs:
            v = r.mean_recall(lang)
            if v is not None:
                per.setdefault(r.config, {})[r.split] = v
        if not per:
            continue
        most = max(len(v) for v in per.values())
        same: dict[tuple, list[str]] = {}  # per-fold results -> configs that produced exactly them
        for name, by_split in per.items():
            if len(by_split) == most:
                same.setdefault(tuple(sorted((k, round(v, 9)) for k, v in by_split.items())), []).append(name)
        ranked = []  # (mean, "a = b", per-fold values), best first
        for key, names in same.items():
            values = [v for _, v in key]
            ranked.append((float(np.mean(values)), " = ".join(sorted(names)), values))
        ranked.sort(key=lambda e: (-e[0], e[1]))
        mean, name, values = ranked[0]
        std = float(np.std(values, ddof=1)) if most > 1 else float("nan")
        second = f"{ranked[1][1]} {ranked[1][0]:.1f}" if len(ranked) > 1 else "-"
        out.append((lang, name, mean, std, most, second))
    return out


def best_table(results: Sequence[RunResult]) -> str:
    rows = [
        [
            lang,
            " = ".join(f"`{n}`" for n in name.split(" = ")),
            pm([mean]) if math.isnan(std) else f"{mean:.1f} ± {std:.1f}",
            str(n),
            second,
        ]
        for lang, name, mean, std, n, second in best_per_language(results)
    ]
    split = "folds" if complete_fold_runs(results) else "runs (official split)"
    return markdown_rows(["language", "best config", "mR", split, "runner-up (mR)"], rows)


def budget_text(spec: Any) -> str:
    """The spec's budget as inline code: `field: value` for every config, then per objective."""
    return ", ".join(f"`{k}: {v}`" for k, v in spec.overrides.items()) + "".join(
        f"; objective {o}: " + ", ".join(f"`{k}: {v}`" for k, v in extra.items())
        for o, extra in spec.by_objective.items()
    )
