"""docs/results.md and its plots, regenerated from the run folders of a zoo run (see :mod:`polyvse_train.zoo`).

Nothing in the document is typed by hand: every figure is read from metrics.json / tasks.json /
zoo_run.json / train_log.jsonl of the runs, and the verdicts on the papers' claims are computed from the
same numbers (paired differences over the folds both configs finished).
"""
from __future__ import annotations

import json
import math
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from polyvse.atomic import atomic_path

from .zoo import OFFICIAL, RUN_FILE, TASKS_FILE, ERROR_FILE

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

    def mean_recall(self, lang: str) -> float | None:
        m = self.languages.get(lang)
        return None if m is None else float(np.mean([m[k] for k in RECALLS]))


@dataclass
class Claim:
    source: str
    statement: str
    better: str  # the config the paper says wins
    worse: str
    langs: Sequence[str] = ()  # () = every language both configs have


#: The papers' conclusions checked on this data (config names of configs/). Each is "better beats worse" on
#: mean recall (mean of R@1/5/10 both ways), paired over the cross-validation folds.
CLAIMS: tuple[Claim, ...] = (
    Claim("Vendrov et al. / Gella et al.", "order embeddings (asymmetric) beat cosine VSE", "order-embeddings", "vse"),
    Claim("Faghri et al. (VSE++)", "the hardest negative beats the sum over negatives", "vsepp", "vse"),
    Claim("Gella et al.", "PIVOT: asymmetric similarity beats symmetric", "pivot-asym", "pivot-sym"),
    Claim("Gella et al.", "PARALLEL: asymmetric similarity beats symmetric", "parallel-asym", "parallel-sym"),
    Claim("Gella et al.", "the caption-caption term (PARALLEL) improves on PIVOT", "parallel-sym", "pivot-sym"),
    Claim("Calixto & Liu", "adding the multilingual term (beta 0.75) helps image-sentence ranking",
          "mlmme-b075", "mlmme-b1"),
    Claim("Calixto & Liu", "adding the multilingual term (beta 0.5) helps image-sentence ranking",
          "mlmme-b05", "mlmme-b1"),
    Claim("AME", "multilingual training with aligned word embeddings beats monolingual (English)",
          "ame-sym", "ame-mono", ("en",)),
    Claim("AME", "fine-tuning the word embeddings (with alignment) beats frozen embeddings", "ame-sym", "ame-fme"),
    Claim("AME", "asymmetric similarity beats symmetric", "ame-asym", "ame-sym"),
    Claim("MULE", "one universal language branch beats per-language branches", "mule-embn", "parallel-embn"),
    Claim("MULE", "neighbourhood constraints help", "mule-nc", "mule-embn"),
    Claim("MULE", "the adversarial language classifier helps", "mule-nc-lc", "mule-nc"),
    Claim("MULE", "LP pretraining helps", "mule-full", "mule-nc-lc"),
    Claim("MULE", "translation augmentation helps", "mule-full-mt", "mule-full"),
    Claim("Gella et al.", "PARALLEL gains from Multi30K text-only caption tuples", "parallel-sym-m30k",
          "parallel-sym"),
    Claim("Calixto & Liu", "R_ML gains from Multi30K text-only caption tuples", "mlmme-b05-m30k", "mlmme-b05"),
    Claim("MULE", "text-only caption tuples (Multi30K + Flickr8K/8K-CN) help", "mule-full-text", "mule-full"),
    Claim("Translator", "T1 (encoder from the de model) beats training fr from scratch (FS)",
          "translator-t1", "translator-fs", ("fr",)),
    Claim("Translator", "T2 (lexicon-initialised map) beats T1 (random map)", "translator-t2", "translator-t1",
          ("fr",)),
    Claim("beyond the papers", "a frozen pretrained tower (e5-small) beats training the text encoder",
          "e5-frozen", "vse"),
)


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
        results.append(RunResult(run["config_name"], cfg["split"], cfg["seed"], tag, d, _read_json(d / "metrics.json"),
                                 run, _read_json(d / TASKS_FILE) if (d / TASKS_FILE).exists() else None, log))
    for err in sorted(Path(out).glob(f"*/*/{ERROR_FILE}")):
        if ".stale-" not in err.parent.name:
            failed.append(_read_json(err))
    return results, failed


def _fmt(x: float | None, d: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"


def _pm(vals: Sequence[float], d: int = 1) -> str:
    if not vals:
        return "-"
    if len(vals) == 1:
        return _fmt(vals[0], d)
    return f"{np.mean(vals):.{d}f} ± {np.std(vals, ddof=1):.{d}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _folds(results: Sequence[RunResult]) -> list[RunResult]:
    return [r for r in results if r.split.startswith("fold") and not r.tag]


def _complete_folds(results: Sequence[RunResult]) -> list[RunResult]:
    """The fold runs of the folds that every config (with any run) has finished: means over the same folds
    for every row. A partial fold enters only the paired claim checks."""
    configs = {r.config for r in results if not r.tag}
    by_fold: dict[str, set[str]] = {}
    for r in _folds(results):
        by_fold.setdefault(r.split, set()).add(r.config)
    complete = {split for split, have in by_fold.items() if have >= configs}
    return [r for r in _folds(results) if r.split in complete]


def _official(results: Sequence[RunResult]) -> list[RunResult]:
    return [r for r in results if r.split == OFFICIAL and not r.tag]


def _by_config(results: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    out: dict[str, list[RunResult]] = {}
    for r in results:
        out.setdefault(r.config, []).append(r)
    return out


def _minutes(runs: Sequence[RunResult]) -> str:
    """CPU minutes per run: on a shared (or paused) machine wall time says more about the neighbours than the
    method; with threads: 1 a run's CPU time is its wall time on a quiet core."""
    return _fmt(float(np.mean([r.run["cpu_seconds"] for r in runs])) / 60) if runs else "-"


def summary_table(results: Sequence[RunResult], order: Sequence[str]) -> str:
    """A row per config: runs, parameters, minutes per run, mean recall per language (mean ± std over runs)."""
    groups = _by_config(results)
    rows = []
    for name in order:
        runs = groups.get(name)
        if not runs:
            continue
        cells = [name, str(len(runs)), _fmt(runs[0].metrics["parameters"] / 1e6, 2), _minutes(runs)]
        per_run_mean = []
        for lang in LANGS:
            vals = [v for v in (r.mean_recall(lang) for r in runs) if v is not None]
            cells.append(_pm(vals))
        for r in runs:
            langs = [r.mean_recall(lang) for lang in LANGS if r.mean_recall(lang) is not None]
            per_run_mean.append(float(np.mean(langs)))
        cells.append(_pm(per_run_mean))
        rows.append(cells)
    return _table(["config", "runs", "params (M)", "CPU min/run", *[f"{lang} mR" for lang in LANGS], "mean"], rows)


def language_table(results: Sequence[RunResult], order: Sequence[str], lang: str) -> str:
    groups = _by_config(results)
    rows = []
    for name in order:
        runs = [r for r in groups.get(name, []) if lang in r.languages]
        if not runs:
            continue
        rows.append([name, str(len(runs))] + [_pm([r.languages[lang][k] for r in runs]) for k in RECALLS])
    return _table(["config", "runs", "i2t R@1", "i2t R@5", "i2t R@10", "t2i R@1", "t2i R@5", "t2i R@10"], rows)


def crosslingual_tables(results: Sequence[RunResult], order: Sequence[str]) -> str:
    groups = {r.config: r for r in _official(results) if r.tasks and r.tasks.get("crosslingual")}
    text = []
    for corpus in ("f8k-ml-test", "multi30k-test_2016"):
        pairs = [p for p in ("en-de", "en-fr", "en-cs", "en-zh")
                 if any(p in r.tasks["crosslingual"].get(corpus, {}) for r in groups.values())]
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
        text.append(f"**{corpus}** (pairs per language pair: {sizes})\n\n" + _table(header, rows))
    return "\n".join(text)


def sts_table(results: Sequence[RunResult], order: Sequence[str]) -> str:
    groups = {r.config: r for r in _official(results) if r.tasks and r.tasks.get("sts")}
    keys = ("sts12-msrvid", "sts14-images", "sts15-images")
    rows = [[n] + [_fmt(groups[n].tasks["sts"].get(k)) for k in keys] for n in order if n in groups]
    return _table(["config", "2012 MSRvid", "2014 images", "2015 images"], rows)


def words_table(results: Sequence[RunResult], order: Sequence[str], part: str = "test") -> str:
    """P@1 (source words) per config and language on the MUSE lexicon's ``part`` ("test" or "train")."""
    p1, n = ("p_at_1", "n_words") if part == "test" else ("train_p_at_1", "n_train_words")
    groups = {r.config: r for r in _official(results) if r.tasks and r.tasks.get("words")}
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
    return _table(["config", *[f"{lang}→en P@1 (words)" for lang in langs]], rows)


def words_section(official: Sequence[RunResult], order: Sequence[str], spec: Any, command: str | None = None) -> str:
    """Section 5 of docs/results.md: word-translation P@1 on held-out MUSE pairs, the method and, with
    ``command``, how its runs were made (when the section is regenerated alone, by scripts/word_translation.py)."""
    from polyvse.alignment import HELD_OUT_RANKS

    start, end = HELD_OUT_RANKS
    lines = ["## 5. Word translation P@1 (CSLS, k = 10), held-out MUSE words", ""]
    if command:
        when = sorted(r.run["finished_utc"] for r in official)
        lines += [f"Regenerated alone by `{command}` (then this section is rewritten in place). F8K-ML official "
                  f"split (train 629 / test 125 photos), training seed 0, the zoo's budget "
                  f"(`configs/zoo/cpu.yaml`: " + ", ".join(f"`{k}: {v}`" for k, v in spec.overrides.items())
                  + "".join(f"; objective {o}: " + ", ".join(f"`{k}: {v}`" for k, v in extra.items())
                            for o, extra in spec.by_objective.items())
                  + f"). Machine: {_machine()}; runs finished {when[0] if when else '-'} to "
                  f"{when[-1] if when else '-'}, mean {_minutes(official)} CPU minutes per run.", ""]
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


def replace_section(path: Path, heading: str, text: str) -> None:
    """Put ``text`` in place of the section of ``path`` whose heading line starts with ``heading`` (up to the
    next ``## `` heading); a document without that heading is an error naming it."""
    doc = path.read_text(encoding="utf-8").split("\n")
    starts = [i for i, line in enumerate(doc) if line.startswith(heading)]
    if not starts:
        raise ValueError(f"{path} has no section starting with {heading!r}; run `polyvse zoo report` first")
    i = starts[0]
    j = next((k for k in range(i + 1, len(doc)) if doc[k].startswith("## ")), len(doc))
    with atomic_path(path) as tmp:
        Path(tmp).write_text("\n".join(doc[:i] + text.rstrip("\n").split("\n") + [""] + doc[j:]), encoding="utf-8")


def official_table(results: Sequence[RunResult], order: Sequence[str]) -> str:
    groups = {r.config: r for r in _official(results)}
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
    return _table(["config", *[f"{lang} t2i R@1 / R@10 · i2t R@1" for lang in LANGS]], rows)


def best_per_language(results: Sequence[RunResult]) -> list[tuple[str, str, float, float, int, str]]:
    """(lang, best config, mean mR, std, runs, runner-up text) over the complete folds (else the official
    split). Only configs with the most finished runs for a language compete, so means are over the same folds.
    Configs with identical results on every run (the same recipe, e.g. polyvse-best when it is e5-frozen's) are
    one entry, "a = b", so the runner-up is the next different model."""
    runs = _complete_folds(results) or _official(results)
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
    rows = [[lang, " = ".join(f"`{n}`" for n in name.split(" = ")),
             _pm([mean]) if math.isnan(std) else f"{mean:.1f} ± {std:.1f}", str(n), second]
            for lang, name, mean, std, n, second in best_per_language(results)]
    split = "folds" if _complete_folds(results) else "runs (official split)"
    return _table(["language", "best config", "mR", split, "runner-up (mR)"], rows)


def update_readme_block(readme: Path, text: str, tag: str = "zoo-best") -> bool:
    """Replace the text between ``<!-- tag:start -->`` and ``<!-- tag:end -->`` in README; False if absent."""
    start, end = f"<!-- {tag}:start -->", f"<!-- {tag}:end -->"
    content = readme.read_text(encoding="utf-8")
    if start not in content or end not in content:
        return False
    head, rest = content.split(start, 1)
    _, tail = rest.split(end, 1)
    with atomic_path(readme) as tmp:
        Path(tmp).write_text(f"{head}{start}\n{text}{end}{tail}", encoding="utf-8")
    return True


#: two-sided 95% Student t quantiles by degrees of freedom (index = folds - 1; the last entry for many folds)
T95 = (float("nan"), 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 1.96)


def claim_check(results: Sequence[RunResult], claim: Claim) -> dict:
    """Paired difference better - worse of the mean recall over shared languages, per common fold."""
    folds = _folds(results)
    a = {r.split: r for r in folds if r.config == claim.better}
    b = {r.split: r for r in folds if r.config == claim.worse}
    common = sorted(set(a) & set(b))
    out: dict[str, Any] = {"n": len(common)}
    # the official split's single pair: shown beside the verdict, never a verdict itself (one split)
    off = {r.config: r for r in _official(results) if r.config in (claim.better, claim.worse)}
    if len(off) == 2:
        ra, rb = off[claim.better], off[claim.worse]
        shared = [lang for lang in (claim.langs or LANGS) if lang in ra.languages and lang in rb.languages]
        if shared:
            out["official_delta"] = float(np.mean([ra.mean_recall(lang) - rb.mean_recall(lang) for lang in shared]))
    if not common:
        out["verdict"] = "no fold run yet"
        return out
    langs = [lang for lang in (claim.langs or LANGS)
             if all(lang in a[s].languages and lang in b[s].languages for s in common)]
    diffs = np.array([np.mean([a[s].mean_recall(lang) - b[s].mean_recall(lang) for lang in langs]) for s in common])
    out["langs"] = langs
    out["delta"] = float(diffs.mean())
    out["per_lang"] = {lang: float(np.mean([a[s].mean_recall(lang) - b[s].mean_recall(lang) for s in common]))
                       for lang in langs}
    if len(common) < 2:
        out["verdict"] = "one fold only: no verdict"
        return out
    se = float(diffs.std(ddof=1) / math.sqrt(len(common)))
    out["se"] = se
    bound = T95[min(len(common) - 1, len(T95) - 1)] * se
    if out["delta"] > bound:
        out["verdict"] = "holds"
    elif out["delta"] < -bound:
        out["verdict"] = "does not hold (reversed)"
    else:
        out["verdict"] = "not distinguishable from noise"
    return out


def claims_table(results: Sequence[RunResult]) -> str:
    rows = []
    for c in CLAIMS:
        chk = claim_check(results, c)
        if chk["n"] == 0:
            delta = "-"
        else:
            delta = _fmt(chk["delta"], 2) + (f" ± {chk['se']:.2f}" if "se" in chk else "")
        per = ", ".join(f"{lang} {v:+.1f}" for lang, v in chk.get("per_lang", {}).items()) or "-"
        official = f"{chk['official_delta']:+.1f}" if "official_delta" in chk else "-"
        rows.append([c.source, c.statement, f"{c.better} vs {c.worse}", str(chk["n"]), delta, per, official,
                     chk["verdict"]])
    return _table(["paper", "claim", "comparison", "folds", "Δ mean recall (± s.e.)", "Δ per language",
                   "Δ official split", "verdict on F8K-ML"], rows)


def curve_points(results: Sequence[RunResult]) -> dict[str, list[tuple[int, float, float]]]:
    """config -> [(n target captions, t2i R@10, mean recall)] of the learning-curve runs (official split)."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    curve_langs: dict[str, str] = {}
    for r in results:
        limit = r.run.get("overrides", {}).get("caption_limit")
        if r.split != OFFICIAL or not r.tag or not limit:
            continue
        (lang, n), = limit.items()
        curve_langs[r.config] = lang
        m = r.languages.get(lang)
        if m is not None:
            out.setdefault(f"{r.config} ({lang})", []).append((int(n), m["t2i_r10"], r.mean_recall(lang)))
    for r in _official(results):  # the config's plain run: every target caption
        lang = curve_langs.get(r.config)
        n = r.metrics.get("n_train_captions_by_language", {}).get(lang)
        if lang and n and lang in r.languages:
            out[f"{r.config} ({lang})"].append((int(n), r.languages[lang]["t2i_r10"], r.mean_recall(lang)))
    return {k: sorted(v) for k, v in out.items()}


def make_plots(results: Sequence[RunResult], order: Sequence[str], docs: Path) -> list[str]:
    """PNG files under docs/ (names returned)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    folds = _complete_folds(results)
    groups = _by_config(folds or _official(results))
    names = [n for n in order if n in groups]
    if names:
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
        fig.tight_layout()
        fig.savefig(docs / "zoo_recall_by_language.png", dpi=110)
        plt.close(fig)
        made.append("zoo_recall_by_language.png")
    official = {r.config: r for r in _official(results) if r.log}
    if official:
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
        fig.tight_layout()
        fig.savefig(docs / "zoo_training_curves.png", dpi=110)
        plt.close(fig)
        made.append("zoo_training_curves.png")
    curves = curve_points(results)
    if curves:
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, pts in curves.items():
            ax.plot([p[0] for p in pts], [p[2] for p in pts], marker="o", label=name)
        ax.set_xscale("log")
        ax.set_xlabel("target-language training captions")
        ax.set_ylabel("mean recall (target language), %")
        ax.set_title("Translator learning curve (official split)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(docs / "zoo_translator_curve.png", dpi=110)
        plt.close(fig)
        made.append("zoo_translator_curve.png")
    return made


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    return f"{cpu}, {os.cpu_count()} cores, no GPU"


def write_report(out: Path, docs: Path, planned: Sequence[str], order: Sequence[str], command: str,
                 spec: Any, readme: Path | None = None) -> Path:
    """Write docs/results.md (+ PNGs) from the runs under ``out``; ``planned`` = run ids of the full zoo. With
    ``readme``, its ``zoo-best`` block gets the best configuration per language."""
    results, failed = collect(out)
    docs.mkdir(parents=True, exist_ok=True)
    plots = make_plots(results, order, docs)
    done_ids = {f"{r.config}/{r.folder.name}" for r in results}
    missing = [p for p in planned if p not in done_ids]
    folds, official = _complete_folds(results), _official(results)
    partial = sorted({r.split for r in _folds(results)} - {r.split for r in folds})
    hours = sum(r.run["wall_seconds"] for r in results) / 3600
    cpu_hours = sum(r.run["cpu_seconds"] for r in results) / 3600
    when = sorted(r.run["finished_utc"] for r in results)
    lines = [
        "# Method zoo: results on F8K-ML",
        "",
        "Generated by `polyvse zoo report` from the run folders of `polyvse zoo run`; do not edit by hand.",
        "",
        "## How these numbers were made",
        "",
        f"- Command (runs, then this document): `{command}`",
        "- Data: F8K-ML, the 850 Flickr8K photos at hand with captions in en, de, fr, cs (Multi30K) and zh "
        "(Flickr8K-CN); EfficientNet-Lite0 image features (ImageNet weights), single centre crop.",
        "- Protocol: **5-fold cross-validation over all 850 photos** (folds fixed by seed 0; ~170 test photos "
        "per fold, fewer for de/fr/cs), numbers are mean ± std over folds; the official Flickr8K split "
        "(train 629 / test 125 photos) is the reference and the split of the text-only tasks (sections 3–5). "
        "One training seed (0) per fold.",
        "- Every config trains under the same budget (`configs/zoo/cpu.yaml`, whose comments give the "
        "reasons), applied on top of its own file: " + ", ".join(f"`{k}: {v}`" for k, v in spec.overrides.items())
        + "".join(f"; objective {o}: " + ", ".join(f"`{k}: {v}`" for k, v in extra.items())
                  for o, extra in spec.by_objective.items())
        + ". The configs themselves keep the papers' settings for users with more compute.",
        f"- Machine: {_machine()}; runs finished between {when[0] if when else '-'} and "
        f"{when[-1] if when else '-'}; total {hours:.1f} h wall, {cpu_hours:.1f} CPU-hours. "
        "Times per run are CPU time (data preparation, training and evaluation), which does not depend on "
        "what else the machine runs. The frozen-tower configs (e5-frozen, usem-frozen, polyvse-best) read "
        "their caption vectors from the content-keyed sentence cache: embedding F8K-ML's ~15k captions once "
        "(about 10 min on 2 cores for e5-small) is not in their times.",
        f"- Completeness: {len(planned) - len(missing)} of {len(planned)} planned runs finished"
        + (f"; **{len(missing)} not yet run** (listed at the end)" if missing else "")
        + (f"; {len(failed)} failed (listed at the end)" if failed else "") + ".",
        "- mR = mean of R@1, R@5, R@10 in both directions (image→text and text→image), in percent. With "
        "~120–170 test photos per language one R@1 figure carries several points of sampling error: read "
        "differences against the ± std.",
        "",
        "## 1. Image–sentence retrieval, 5-fold cross-validation (primary)",
        "",
        summary_table(folds, order) if folds else "_No fold finished by every config yet._\n",
        *([f"Folds still running ({', '.join(partial)}: "
           f"{sum(r.split in partial for r in _folds(results))} runs) are left out of this section so that every "
           "row is a mean over the same folds; section 8 pairs them by fold.", ""] if partial else []),
        "Best configuration per language (highest mean mR among the configs with the most finished folds):",
        "",
        best_table(results),
    ]
    if "zoo_recall_by_language.png" in plots:
        lines += ["![mean recall per language per config](zoo_recall_by_language.png)", ""]
    if folds:
        lines += ["Per language, R@K in percent (mean ± std over folds), in the shape of the papers' tables:", ""]
    for lang in LANGS:
        if folds and any(lang in r.languages for r in folds):
            lines += [f"**{lang}**", "", language_table(folds, order, lang)]
    lines += ["## 2. Official Flickr8K test split (reference, seed 0)", "",
              official_table(official, order) if official else "_No official-split run finished yet._\n",
              "## 3. Cross-lingual caption retrieval (official-split models)", "",
              "Each caption queries the captions of the other language; one gold item per query (its "
              "translation). Pairs of the model's training photos are left out (31 Multi30K test_2016 photos "
              "are Flickr8K photos). en-zh pairs: Flickr8K caption #0 and its human translation.", "",
              crosslingual_tables(official, order) or "_No task results yet._\n",
              "## 4. Semantic textual similarity (English, Pearson r × 100)", "",
              sts_table(official, order),
              words_section(official, order, spec)]
    curves = curve_points(results)
    lines += ["## 6. Translator: recall against the number of target-language captions", ""]
    if curves:
        rows = [[name, str(n), _fmt(r10), _fmt(mr)] for name, pts in curves.items() for n, r10, mr in pts]
        lines += [_table(["config (target)", "captions", "t2i R@10", "mR"], rows)]
        if "zoo_translator_curve.png" in plots:
            lines += ["![Translator learning curve](zoo_translator_curve.png)", ""]
    else:
        lines += ["_No learning-curve run finished yet._", ""]
    if "zoo_training_curves.png" in plots:
        lines += ["## 7. Training curves", "", "![training curves](zoo_training_curves.png)", ""]
    lines += ["## 8. Which of the papers' conclusions hold on this data", "",
              "Δ = mean recall of the first config minus the second, averaged over the languages both have, "
              "paired by fold (± standard error over folds). Verdict: *holds* when Δ > t·s.e., *reversed* when "
              "Δ < −t·s.e. (t = two-sided 95% Student quantile with folds − 1 degrees of freedom: 12.7 for 2 "
              "folds, 2.78 for 5), otherwise not distinguishable from noise. *Δ official split*: the same "
              "difference on the official test split (one split, seed 0): a pointer only, with several points of "
              "sampling error. The papers trained on Multi30K/COCO "
              "(29k–120k photos) with the budgets in each config's comment; F8K-ML trains on ~680 photos under "
              "one CPU budget, so a claim that does not hold here is not refuted in general.", "",
              claims_table(results)]
    if missing or failed:
        lines += ["## Runs not finished", ""]
        if missing:
            lines += ["Not yet run: " + ", ".join(f"`{m}`" for m in missing), ""]
        for f in failed:
            lines += [f"- failed `{f['run_id']}`: {f['error']}"]
        lines += [""]
    path = docs / "results.md"
    with atomic_path(path) as tmp:
        Path(tmp).write_text("\n".join(lines), encoding="utf-8")
    if readme is not None and results:
        kind = "5-fold cross-validation" if folds else "official split only"
        done = f"{len(planned) - len(missing)} of {len(planned)} planned runs"
        update_readme_block(readme, f"Best configuration per language ({kind}; {done} finished; generated by "
                                    f"`polyvse zoo report` from the runs, see [docs/results.md](docs/results.md)):"
                                    f"\n\n{best_table(results)}")
    return path
