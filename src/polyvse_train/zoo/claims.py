"""The papers' conclusions checked on a zoo's runs: "better beats worse" on mean recall, paired over folds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from polyvse.evaluation.report import markdown_rows

from .results import LANGS, RunResult, fold_runs, official_runs
from .tables import fmt


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
    Claim(
        "Calixto & Liu",
        "adding the multilingual term (beta 0.75) helps image-sentence ranking",
        "mlmme-b075",
        "mlmme-b1",
    ),
    Claim(
        "Calixto & Liu", "adding the multilingual term (beta 0.5) helps image-sentence ranking", "mlmme-b05", "mlmme-b1"
    ),
    Claim(
        "AME",
        "multilingual training with aligned word embeddings beats monolingual (English)",
        "ame-sym",
        "ame-mono",
        ("en",),
    ),
    Claim("AME", "fine-tuning the word embeddings (with alignment) beats frozen embeddings", "ame-sym", "ame-fme"),
    Claim("AME", "asymmetric similarity beats symmetric", "ame-asym", "ame-sym"),
    Claim("MULE", "one universal language branch beats per-language branches", "mule-embn", "parallel-embn"),
    Claim("MULE", "neighbourhood constraints help", "mule-nc", "mule-embn"),
    Claim("MULE", "the adversarial language classifier helps", "mule-nc-lc", "mule-nc"),
    Claim("MULE", "LP pretraining helps", "mule-full", "mule-nc-lc"),
    Claim("MULE", "translation augmentation helps", "mule-full-mt", "mule-full"),
    Claim("Gella et al.", "PARALLEL gains from Multi30K text-only caption tuples", "parallel-sym-m30k", "parallel-sym"),
    Claim("Calixto & Liu", "R_ML gains from Multi30K text-only caption tuples", "mlmme-b05-m30k", "mlmme-b05"),
    Claim("MULE", "text-only caption tuples (Multi30K + Flickr8K/8K-CN) help", "mule-full-text", "mule-full"),
    Claim(
        "Translator",
        "T1 (encoder from the de model) beats training fr from scratch (FS)",
        "translator-t1",
        "translator-fs",
        ("fr",),
    ),
    Claim(
        "Translator", "T2 (lexicon-initialised map) beats T1 (random map)", "translator-t2", "translator-t1", ("fr",)
    ),
    Claim(
        "beyond the papers", "a frozen pretrained tower (e5-small) beats training the text encoder", "e5-frozen", "vse"
    ),
)


#: two-sided 95% Student t quantiles by degrees of freedom (index = folds - 1; the last entry for many folds)
T95 = (float("nan"), 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 1.96)


def _paired(a: dict[str, RunResult], b: dict[str, RunResult], claim: Claim) -> dict[str, Any]:
    """Δ = better - worse of the mean recall over the shared languages, paired by key (fold or seed): n, langs,
    delta (mean over keys), per_lang, and with 2+ keys se and a Student-t verdict."""
    common = sorted(set(a) & set(b))
    out: dict[str, Any] = {"n": len(common)}
    if not common:
        return out
    langs = [
        lang
        for lang in (claim.langs or LANGS)
        if all(lang in a[s].languages and lang in b[s].languages for s in common)
    ]
    diffs = np.array([np.mean([a[s].mean_recall(lang) - b[s].mean_recall(lang) for lang in langs]) for s in common])
    out["langs"] = langs
    out["delta"] = float(diffs.mean())
    out["per_lang"] = {
        lang: float(np.mean([a[s].mean_recall(lang) - b[s].mean_recall(lang) for s in common])) for lang in langs
    }
    if len(common) >= 2:
        out["se"] = float(diffs.std(ddof=1) / math.sqrt(len(common)))
        out["verdict"] = verdict(out["delta"], T95[min(len(common) - 1, len(T95) - 1)] * out["se"])
    return out


HOLDS, REVERSED, NOISE = "holds", "does not hold (reversed)", "not distinguishable from noise"
VERDICTS = (HOLDS, REVERSED, NOISE)  # the verdicts of a measured difference (the others say why there is none)


def verdict(delta: float, bound: float) -> str:
    if delta > bound:
        return HOLDS
    if delta < -bound:
        return REVERSED
    return NOISE


def claim_check(results: Sequence[RunResult], claim: Claim) -> dict:
    """Paired difference better - worse of the mean recall over shared languages, per common fold."""
    folds = fold_runs(results)
    out = _paired(
        {r.split: r for r in folds if r.config == claim.better},
        {r.split: r for r in folds if r.config == claim.worse},
        claim,
    )
    # the official split's single pair: shown beside the verdict, never a verdict itself (one split)
    off = {r.config: r for r in official_runs(results) if r.config in (claim.better, claim.worse)}
    if len(off) == 2:
        ra, rb = off[claim.better], off[claim.worse]
        shared = [lang for lang in (claim.langs or LANGS) if lang in ra.languages and lang in rb.languages]
        if shared:
            out["official_delta"] = float(np.mean([ra.mean_recall(lang) - rb.mean_recall(lang) for lang in shared]))
    if out["n"] == 0:
        out["verdict"] = "no fold run yet"
    elif out["n"] == 1:
        out["verdict"] = "one fold only: no verdict"
    return out


def seed_noise(results: Sequence[RunResult]) -> tuple[float, int] | None:
    """(pooled standard deviation over training seeds of a run's mR averaged over its languages, degrees of
    freedom) from the official-split configs with 2+ seeds; None when there is none."""
    per_config: dict[str, list[float]] = {}
    for r in official_runs(results):
        vals = [r.mean_recall(lang) for lang in LANGS if r.mean_recall(lang) is not None]
        if vals:
            per_config.setdefault(r.config, []).append(float(np.mean(vals)))
    groups = [np.array(v) for v in per_config.values() if len(v) >= 2]
    df = sum(len(g) - 1 for g in groups)
    if not df:
        return None
    return math.sqrt(sum(((g - g.mean()) ** 2).sum() for g in groups) / df), df


def claim_check_seeds(results: Sequence[RunResult], claim: Claim, noise: tuple[float, int] | None) -> dict:
    """The claim on the official split, paired by training seed. With 2+ common seeds the verdict is the
    paired Student t over seeds; with one, Δ is judged against the seed-to-seed noise of the configs that
    have several seeds (``noise`` = (pooled s.d. σ, degrees of freedom)): a difference of two single runs has
    s.d. √2·σ, so it holds when Δ > t·√2·σ."""
    off = official_runs(results)
    out = _paired(
        {str(r.seed): r for r in off if r.config == claim.better},
        {str(r.seed): r for r in off if r.config == claim.worse},
        claim,
    )
    if out["n"] == 0:
        out["verdict"] = "not run yet"
    elif out["n"] == 1 and noise is None:
        out["verdict"] = "one seed, no seed noise measured yet: no verdict"
    elif out["n"] == 1:
        sigma, df = noise
        out["noise_bound"] = T95[min(df, len(T95) - 1)] * math.sqrt(2) * sigma
        out["verdict"] = verdict(out["delta"], out["noise_bound"])
    return out


def claims_table(results: Sequence[RunResult]) -> str:
    rows = []
    for c in CLAIMS:
        chk = claim_check(results, c)
        if chk["n"] == 0:
            delta = "-"
        else:
            delta = fmt(chk["delta"], 2) + (f" ± {chk['se']:.2f}" if "se" in chk else "")
        rows.append(
            [
                c.source,
                c.statement,
                f"{c.better} vs {c.worse}",
                str(chk["n"]),
                delta,
                per_language(chk),
                f"{chk['official_delta']:+.1f}" if "official_delta" in chk else "-",
                chk["verdict"],
            ]
        )
    return markdown_rows(
        [
            "paper",
            "claim",
            "comparison",
            "folds",
            "Δ mean recall (± s.e.)",
            "Δ per language",
            "Δ official split",
            "verdict on F8K-ML",
        ],
        rows,
    )


def per_language(chk: dict) -> str:
    return ", ".join(f"{lang} {v:+.1f}" for lang, v in chk.get("per_lang", {}).items()) or "-"
