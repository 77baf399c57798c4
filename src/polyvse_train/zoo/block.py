"""The section of docs/results.md for a zoo on another dataset (the spec's ``title``, e.g. f8k-full), written
into its own marked block ``<!-- zoo-<title>:start -->`` ... ``<!-- zoo-<title>:end -->`` (appended when the
document has none), so the F8K-ML sections around it stay as they are.

Its protocol is one split (the official one) with 1 or more training seeds per config: tables are mean ± std
over seeds, and the papers' claims are checked by seed (see :func:`.claims.claim_check_seeds`), side by side
with their 5-fold verdicts on F8K-ML (850 photos), read from those runs when they are at hand, else from the
F8K-ML claims table of the document itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polyvse.evaluation.report import markdown_rows, replace_block
from polyvse.util.atomic import atomic_path

from .claims import CLAIMS, VERDICTS, Claim, claim_check, claim_check_seeds, per_language, seed_noise
from .results import LANGS, RunResult, collect, machines, official_runs, reconstructed_note
from .tables import (
    budget_text,
    crosslingual_tables,
    fmt,
    language_table,
    sts_table,
    summary_table,
    table_cells,
    words_table,
)

F8KML_CLAIMS_HEADING = "## 8. Which of the papers' conclusions hold"


def blocks_in(text: str) -> list[str]:
    """Every zoo block of a document, markers included, in order (what the F8K-ML report keeps)."""
    return [m.group(0) for m in re.finditer(r"<!-- zoo-(\S+):start -->.*?<!-- zoo-\1:end -->", text, re.S)]


def write_block(doc: Path, title: str, text: str) -> None:
    """Put ``text`` between the block's markers in ``doc`` (appending the block when absent); nothing else
    of the document changes."""
    content = doc.read_text(encoding="utf-8") if doc.exists() else ""
    doc.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(doc) as tmp:
        Path(tmp).write_text(replace_block(content, f"zoo-{title}", text.rstrip()), encoding="utf-8")


def f8kml_claims_from_doc(doc: Path) -> dict[str, tuple[str, str]]:
    """{"better vs worse": (Δ cell, verdict)} from the F8K-ML claims table of results.md ({} without one)."""
    if not doc.exists():
        return {}
    text = doc.read_text(encoding="utf-8")
    if F8KML_CLAIMS_HEADING not in text:
        return {}
    section = text.split(F8KML_CLAIMS_HEADING, 1)[1].split("\n## ", 1)[0].split("<!-- zoo-", 1)[0]
    out = {}
    for line in section.splitlines():
        cells = table_cells(line)
        if len(cells) == 8 and " vs " in cells[2]:
            out[cells[2]] = (cells[4], cells[7])
    return out


def f8kml_claims(compare_out: Path | None, doc: Path) -> tuple[dict[str, tuple[str, str]], str]:
    """The F8K-ML verdicts by comparison, and where they come from (its runs, else the document)."""
    runs = collect(compare_out)[0] if compare_out is not None and Path(compare_out).is_dir() else []
    if any(r.split.startswith("fold") for r in runs):
        out = {}
        for c in CLAIMS:
            chk = claim_check(runs, c)
            delta = "-" if chk["n"] == 0 else fmt(chk["delta"], 2) + (f" ± {chk['se']:.2f}" if "se" in chk else "")
            out[f"{c.better} vs {c.worse}"] = (delta, chk["verdict"])
        return out, f"the F8K-ML runs in `{compare_out}`"
    return f8kml_claims_from_doc(doc), "the F8K-ML claims table above (section 8)"


def _distinguishing_digits(delta: float, bound: float) -> int:
    """Decimals enough that |Δ| and the noise bound it was judged against do not print alike (2 at least)."""
    d = 2
    while d < 6 and f"{abs(delta):.{d}f}" == f"{bound:.{d}f}":
        d += 1
    return d


def _claim_rows(
    results: Sequence[RunResult], small: dict[str, tuple[str, str]], claims: Sequence[Claim]
) -> list[list[str]]:
    noise = seed_noise(results)
    rows = []
    for c in claims:
        chk = claim_check_seeds(results, c, noise)
        key = f"{c.better} vs {c.worse}"
        if chk["n"] == 0:
            delta = "-"
        elif "noise_bound" in chk:
            d = _distinguishing_digits(chk["delta"], chk["noise_bound"])
            delta = f"{fmt(chk['delta'], d)} (noise ±{chk['noise_bound']:.{d}f})"
        else:
            delta = fmt(chk["delta"], 2) + (f" ± {chk['se']:.2f}" if "se" in chk else "")
        d850, v850 = small.get(key, ("-", "-"))
        rows.append([c.source, c.statement, key, d850, v850, str(chk["n"]), delta, per_language(chk), chk["verdict"]])
    return rows


def verdict_changes(rows: Sequence[Sequence[str]]) -> str:
    """One line: how many claims keep their 850 verdict at 8k, and which change (rows of ``_claim_rows``)."""
    both = [r for r in rows if r[4] in VERDICTS and r[8] in VERDICTS]
    if not both:
        return "No claim has a verdict at both scales yet."
    changed = [f"{r[2]} ({r[4]} → {r[8]})" for r in both if r[4] != r[8]]
    line = f"{len(both) - len(changed)} of the {len(both)} claims with a verdict at both scales keep it at 8k photos"
    return line + (f"; {len(changed)} change: " + "; ".join(changed) + "." if changed else ".")


def claims_side_by_side(
    results: Sequence[RunResult], small: dict[str, tuple[str, str]], source: str, claims: Sequence[Claim] = CLAIMS
) -> list[str]:
    noise = seed_noise(results)
    rows = _claim_rows(results, small, claims)
    how = (
        "no config has two seeds yet, so single-seed differences get no verdict"
        if noise is None
        else f"pooled seed-to-seed s.d. of a run's mR (mean over its languages) σ = {noise[0]:.2f} "
        f"({noise[1]} degrees of freedom, from the configs with several seeds)"
    )
    return [
        "Δ = mean recall of the first config minus the second, averaged over the languages both have, on the "
        "1,000-photo test split, paired by training seed. With 2+ seeds in common: ± standard error over seeds "
        "and the paired Student-t verdict (as the folds at 850). With one seed each: judged against the seed "
        f"noise, *holds* when Δ > t·√2·σ, *reversed* when Δ < −t·√2·σ; {how}. The 850-photo columns "
        f"(5-fold cross-validation on F8K-ML) come from {source}. The configs trained at their own settings "
        "(above) enter a claim as they are: there, one side is not at the common budget.",
        "",
        markdown_rows(
            [
                "paper",
                "claim",
                "comparison",
                "Δ at 850 (5 folds)",
                "verdict at 850",
                "seeds at 8k",
                "Δ at 8k",
                "Δ per language at 8k",
                "verdict at 8k",
            ],
            rows,
        ),
        "",
        verdict_changes(rows),
    ]


def _how_made(
    results: Sequence[RunResult],
    failed: Sequence[dict],
    planned: Sequence[str],
    missing: Sequence[str],
    command: str,
    spec: Any,
    budget: str,
) -> list[str]:
    when = sorted(r.run["finished_utc"] for r in results)
    cpu_hours = sum(r.run["cpu_seconds"] for r in results) / 3600
    partial_time = sum(not r.time_complete for r in results)  # runs whose CPU time counts only their last process
    own = ", ".join(f"`{n}` (`{p}`)" for n, p in spec.own_settings.items())
    seeds = ", ".join(f"`{n}` {sorted({0, *s})}" for n, s in spec.extra_seeds.items())
    done = len(planned) - len(missing)
    state = (
        ("**Partial report: the zoo is still running.** " if missing else "")
        + f"{done} of {len(planned)} planned runs finished"
        + (f"; {len(failed)} failed" if failed else "")
        + "."
    )
    return (
        [
            state + (" Missing: " + ", ".join(f"`{m}`" for m in missing) + "." if missing else ""),
            "",
            f"- Command (runs, then this section): `{command}`; spec `configs/zoo/{spec.title}.yaml`, whose comment "
            "gives the budget's reasons and the CPU estimate.",
            "- Data: f8k-full, Flickr8K's official split of the 7,941 photos at hand (train 5,867 / test 1,000 photos; "
            "de/fr/cs galleries hold the test photos with Multi30K captions); training captions: the first caption "
            "of each photo and language (`captions_per_photo: 1`); evaluation on every test caption.",
            f"- Budget for every config, on top of its own file: {budget}. Trained at their own settings instead: "
            f"{own or '-'}. Seeds: 0 for every config, and {seeds or 'none other'}.",
            f"- Machine: {machines(results)}; runs finished between {when[0] if when else '-'} and {when[-1] if when else '-'}; "
            f"{'at least ' if partial_time else ''}{cpu_hours:.1f} CPU-hours{' so far' if missing else ''}"
            + (
                f" (runs resumed before the time of a run's earlier processes was kept: {partial_time}; their "
                "CPU time, marked ≥, counts only the last process)"
                if partial_time
                else ""
            )
            + ". mR = mean of R@1, R@5, R@10 both ways, in percent.",
            *reconstructed_note(results),
        ]
        + [f"- failed `{f['run_id']}`: {f['error']}" for f in failed]
        + [""]
    )


def block_text(
    results: Sequence[RunResult],
    failed: Sequence[dict],
    planned: Sequence[str],
    order: Sequence[str],
    command: str,
    spec: Any,
    budget: str,
    small: tuple[dict[str, tuple[str, str]], str],
) -> str:
    done_ids = {f"{r.config}/{r.folder.name}" for r in results}
    missing = [p for p in planned if p not in done_ids]
    official = official_runs(results)
    lines = [f"## The zoo at 8k photos: {spec.title}, official split", ""]
    lines += _how_made(results, failed, planned, missing, command, spec, budget)
    lines += [
        "### Image–sentence retrieval per language (mR, mean ± std over seeds where there are several)",
        "",
        summary_table(official, order) if official else "_No run finished yet._\n",
    ]
    for lang in LANGS:
        if any(lang in r.languages for r in official):
            lines += [
                f"**{lang}** (R@K in percent; medR: median rank of the first right answer)",
                "",
                language_table(official, order, lang, medr=True),
            ]
    lines += ["### Which conclusions hold at 8k photos, beside 850", ""]
    lines += claims_side_by_side(results, *small)
    seed0 = [r for r in official if r.seed == 0 and r.tasks]
    if seed0:
        seconds = [r.tasks.get("seconds", 0.0) for r in seed0]
        lines += [
            "",
            "### Text-only tasks of the seed-0 models",
            "",
            "As sections 3–5 at 850 photos: pairs of the model's training photos are left out (hence "
            "fewer than 1,000 Multi30K test_2016 pairs: the others are f8k-full training photos). Wall time "
            f"of the tasks per model {min(seconds):.0f}–{max(seconds):.0f} s (a frozen tower's sentence "
            "vectors come from the sentence cache: the first model of each encoder embeds the ~7k "
            "sentences).",
            "",
            crosslingual_tables(seed0, order) or "_No task results yet._\n",
            "STS (English, Pearson r × 100):",
            "",
            sts_table(seed0, order),
            "Word translation P@1 (CSLS) on the held-out part of the MUSE lexicons, as section 5:",
            "",
            words_table(seed0, order, "test"),
        ]
    return "\n".join(lines)


def write_block_report(
    out: Path,
    doc: Path,
    planned: Sequence[str],
    order: Sequence[str],
    command: str,
    spec: Any,
    compare_out: Path | None = None,
) -> Path:
    """Write the zoo's block of ``doc`` (docs/results.md) from the runs under ``out``."""
    results, failed = collect(out)
    text = block_text(results, failed, planned, order, command, spec, budget_text(spec), f8kml_claims(compare_out, doc))
    write_block(doc, spec.title, text)
    return doc
