"""The f8k-full tables: polyvse-best against the e5-frozen baseline, 3 training seeds each, on Flickr8K's 1k test
photos (mean ± sd over seeds), and the headline rows README shows, all read from the zoo's committed records
(results/zoo-f8k-full/<config>/official-s<seed>/: metrics.json, zoo_run.json)."""

from __future__ import annotations

import statistics
from pathlib import Path

from polyvse.evaluation.report import markdown_rows

from .product_build import PRODUCT_RUN as PRODUCT
from .records import Page, read_record

RUNS = "results/zoo-f8k-full"
BASELINE, BEST = "e5-frozen", "polyvse-best"
SEEDS = (0, 1, 2)
RECALLS = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10")
LANGS = ("en", "de", "fr", "cs", "zh")
# the settings two f8k-full recipes may differ in beyond their method: a comparison names every one that differs
BUDGET_KEYS = (
    "backbone",
    "pretrained_encoder",
    "finetune_blocks",
    "text_finetune_layers",
    "photo_views",
    "captions_per_photo",
    "retrieval_scoring",
    "objective",
    "epochs",
    "batch_size",
)


def seed_runs(runs: Path, name: str, seeds=SEEDS) -> list[dict]:
    """The metrics.json of each seed of ``name`` (the zoo run's own record added under "zoo_run")."""
    return [
        {
            **read_record(runs, f"{name}/official-s{seed}/metrics.json"),
            "zoo_run": read_record(runs, f"{name}/official-s{seed}/zoo_run.json"),
        }
        for seed in seeds
    ]


def mean_sd(values: list[float], digits: int = 1) -> str:
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def language_table(runs_metrics: list[dict]) -> str:
    """One row per language: mean ± sd over seeds of R@1/5/10 both ways, medR both ways, mR."""
    head = [
        "language",
        "photos",
        "i2t R@1",
        "i2t R@5",
        "i2t R@10",
        "i2t medR",
        "t2i R@1",
        "t2i R@5",
        "t2i R@10",
        "t2i medR",
        "mR",
    ]
    rows = []
    for lang in runs_metrics[0]["languages"]:
        per = [m["languages"][lang] for m in runs_metrics]
        cells = [mean_sd([p[k] for p in per]) for k in RECALLS[:3]] + [mean_sd([p["i2t_medr"] for p in per])]
        cells += [mean_sd([p[k] for p in per]) for k in RECALLS[3:]] + [mean_sd([p["t2i_medr"] for p in per])]
        rows.append([lang, str(int(per[0]["n_images"])), *cells, mean_sd([p["mr"] for p in per])])
    return markdown_rows(head, rows).rstrip("\n")


def difference_table(base: list[dict], best: list[dict]) -> str:
    langs = list(base[0]["languages"])
    rows = [
        [label, *(mean_sd([m["languages"][g]["mr"] for m in group]) for g in langs)]
        for label, group in (("baseline mR", base), ("best mR", best))
    ]
    rows.append(["difference", *(f"{_mean(best, g) - _mean(base, g):+.1f}" for g in langs)])
    return markdown_rows(["", *langs], rows).rstrip("\n")


def _mean(group: list[dict], lang: str, key: str = "mr") -> float:
    return statistics.fmean(m["languages"][lang][key] for m in group)


def budgets(base: list[dict], best: list[dict]) -> str:
    """What the two recipes spend and set differently, from their records: the gap between them is that of
    whole recipes, not of one method change."""
    cpu = [statistics.fmean(m["zoo_run"]["cpu_seconds"] for m in group) for group in (best, base)]

    def setting(metrics: dict, key: str) -> str:  # a record older than the setting trained at its default
        value = metrics["config"].get(key)
        return "its default" if value is None else str(value)

    differ = [
        f"`{k}` {setting(best[0], k)} vs {setting(base[0], k)}"
        for k in BUDGET_KEYS
        if best[0]["config"].get(k) != base[0]["config"].get(k)
    ]
    return (
        f"The two are whole recipes, not one change apart: per seed the best model trained on "
        f"{best[0]['n_train_captions']:,} captions (every caption, one drawn per photo and epoch) against "
        f"{base[0]['n_train_captions']:,}, for {cpu[0]:,.0f} against {cpu[1]:,.0f} CPU-seconds of training "
        f"({cpu[0] / cpu[1]:.0f}x; `cpu_seconds` of zoo_run.json, sentence and photo caches already filled), "
        "and their configs differ in " + "; ".join(differ) + "."
    )


def f8k_full_text(runs: Path, seeds=SEEDS, config_files: dict | None = None) -> str:
    """The 3-seed tables of both configs and their mR difference."""
    base, best = seed_runs(runs, BASELINE, seeds), seed_runs(runs, BEST, seeds)
    files = config_files or {}
    m0, b0 = best[0], base[0]
    captions = f"{m0['n_train_captions']:,} training captions"
    if b0["n_train_captions"] != m0["n_train_captions"]:
        captions += f" for the best model, {b0['n_train_captions']:,} for the baseline"
    return "\n".join(
        [
            f"f8k-full, official split: {m0['n_train_photos']:,} training photos, {captions}; 1k test photos (929 for "
            f"de/fr/cs: the test photos with Multi30K captions); seeds {', '.join(map(str, seeds))}; mean ± sd over "
            "seeds.",
            "",
            f"**Best model** (`{files.get(BEST, BEST)}`):",
            "",
            language_table(best),
            "",
            f"**Baseline** (`{files.get(BASELINE, BASELINE)}`):",
            "",
            language_table(base),
            "",
            "**mR per language** (mean of the six recalls):",
            "",
            difference_table(base, best),
            "",
            budgets(base, best),
        ]
    )


def f8k_full_block(page: Page) -> str:
    files = {n: f"configs/f8k-full/{n}.yaml" for n in (BASELINE, BEST)}
    links = ", ".join(page.record_link(f"{RUNS}/{n}", f"{RUNS}/{n}/official-s{{0,1,2}}/") for n in (BEST, BASELINE))
    return (
        f8k_full_text(page.repo / RUNS, SEEDS, files)
        + f"\n\nRecords: {links}; written by `polyvse report` (the runs: `python scripts/f8k_full_results.py`)."
    )


def headline_block(page: Page) -> str:
    """README's table: the product model and the 3-seed means of the best recipe and the baseline, mR per
    language and English text→photo R@1, each row linked to its record."""
    product = page.read(f"{PRODUCT}/metrics.json")
    base, best = seed_runs(page.repo / RUNS, BASELINE), seed_runs(page.repo / RUNS, BEST)
    head = ["model", *LANGS, "en t2i R@1", "record"]
    rows = [
        [
            f"product model (`make model`, seed {product['seed']}, {product.get('precision', 'fp32')})",
            *(f"{product['languages'][g]['mr']:.1f}" for g in LANGS),
            f"{product['languages']['en']['t2i_r1']:.1f}",
            page.record_link(PRODUCT),
        ]
    ]
    for label, group, name in (
        ("polyvse-best recipe, 3 seeds", best, BEST),
        ("e5-frozen baseline, 3 seeds", base, BASELINE),
    ):
        rows.append(
            [
                label,
                *(mean_sd([m["languages"][g]["mr"] for m in group]) for g in LANGS),
                mean_sd([m["languages"]["en"]["t2i_r1"] for m in group]),
                page.record_link(f"{RUNS}/{name}"),
            ]
        )
    return (
        f"Image–sentence retrieval on Flickr8K's official 1k test photos (929 for de/fr/cs), mR = mean of "
        f"R@1/5/10 in both directions (higher is better); {product['n_train_photos']:,} training photos; trained "
        "on 2-core CPUs (each record names its machine, commit and command); 3-seed rows: mean ± sd over seeds "
        f"0, 1, 2. The baseline's budget is far smaller: the [results]({page.link('docs/results.md')}) page compares "
        "them.\n\n" + markdown_rows(head, rows).rstrip("\n")
    )


def product_model_block(page: Page) -> str:
    """The product model's full table per language, from its record."""
    m = page.read(f"{PRODUCT}/metrics.json")
    head = [
        "language",
        "photos",
        "i2t R@1",
        "i2t R@5",
        "i2t R@10",
        "i2t medR",
        "t2i R@1",
        "t2i R@5",
        "t2i R@10",
        "t2i medR",
        "mR",
    ]
    rows = [
        [
            g,
            str(int(x["n_images"])),
            *(f"{x[k]:.1f}" for k in RECALLS[:3]),
            f"{x['i2t_medr']:g}",
            *(f"{x[k]:.1f}" for k in RECALLS[3:]),
            f"{x['t2i_medr']:g}",
            f"{x['mr']:.1f}",
        ]
        for g, x in m["languages"].items()
    ]
    retrieval = m.get("retrieval") or {}
    scoring = (
        f"ranked by CSLS (k {retrieval['k']}) against the checkpoint's banks of training photos and captions"
        if retrieval.get("scoring") == "csls"
        else "ranked by the model's similarity"
    )
    return (
        f"`{m['config']['name']}` (`make model`), seed {m['seed']}, trained at {m.get('precision', 'fp32')} on "
        f"{m['n_train_photos']:,} photos and {m['n_train_captions']:,} captions in {m['wall_time_s'] / 60:.1f} "
        f"min wall; {m['split']} photos, {scoring}. Record {page.record_link(PRODUCT)}.\n\n"
        + markdown_rows(head, rows).rstrip("\n")
    )
