"""The f8k-full comparison of issue #13: the frozen-tower baseline against polyvse's best model, 3 training seeds
each, on the 1,000-photo Flickr8K test gallery per language, and the README table made from those runs.

    python scripts/f8k_full_results.py                 # train what is missing (resumable), print the tables
    python scripts/f8k_full_results.py --readme        # ... and rewrite README's `f8k-full` block
    python scripts/f8k_full_results.py --jobs 2        # two trainings at a time (each uses one thread)

The runs are the f8k-full zoo's own (configs/zoo/f8k-full.yaml trains e5-frozen and polyvse-best from these
same config files with seeds 0, 1, 2): training goes through `polyvse zoo run --configs e5-frozen,polyvse-best`
into runs/zoo-f8k-full/<name>/official-s<seed>/ (metrics.json, checkpoint, tasks.json), so one training serves the
README and docs/results.md. A finished run is never retrained, a stopped one resumes from its training state; a
run of an older config file is moved aside and trained again. Numbers are the standard protocol of the Flickr8K
literature (1k test photos; R@1/5/10 both ways, median rank) plus mR (the mean of the six recalls), as mean ±
standard deviation over the seeds. de/fr/cs galleries hold the test photos that have Multi30K captions (929).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = "configs/zoo/f8k-full.yaml"
BASELINE = "e5-frozen"  # names in the zoo spec; their config files are the spec's own_settings
BEST = "polyvse-best"
SEEDS = (0, 1, 2)
RECALLS = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10")


def config_file(name: str) -> str:
    """The config file the zoo spec trains ``name`` from (configs/f8k-full/<...>.yaml)."""
    import yaml

    return yaml.safe_load((REPO / SPEC).read_text(encoding="utf-8"))["own_settings"][name]


def run_dir(runs: Path, name: str, seed: int) -> Path:
    return runs / name / f"official-s{seed}"


def data_root(given: str | None) -> str | None:
    """--data-root, else $POLYVSE_DATA, else the repo's .data (what `make data` fills), else polyvse's default."""
    if given or os.environ.get("POLYVSE_DATA"):
        return given or os.environ["POLYVSE_DATA"]
    return str(REPO / ".data") if (REPO / ".data").is_dir() else None


def train(runs: Path, jobs: int, polyvse: str, root: str | None = None) -> None:
    """`polyvse zoo run --jobs N` on the two configs (N workers share the plan, each claims the next run);
    a run that failed before is tried again."""
    cmd = [polyvse, "zoo", "run", "--spec", str(REPO / SPEC), "--configs", f"{BASELINE},{BEST}", "--out", str(runs),
           "--retry-failed", "--jobs", str(max(1, jobs)), *(["--data-root", root] if root else [])]
    print("running:", " ".join(cmd), flush=True)
    if subprocess.run(cmd, cwd=REPO).returncode != 0:
        raise SystemExit("a training failed: see runs/zoo-f8k-full/<name>/official-s<seed>/error.json")


def load(runs: Path, name: str, seeds) -> list[dict]:
    return [json.loads((run_dir(runs, name, s) / "metrics.json").read_text(encoding="utf-8")) for s in seeds]


def _ms(values: list[float], digits: int = 1) -> str:
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def language_table(runs_metrics: list[dict]) -> str:
    """One row per language: mean ± sd over seeds of R@1/5/10 both ways, medR both ways, mR."""
    langs = list(runs_metrics[0]["languages"])
    head = ("| language | photos | i2t R@1 | i2t R@5 | i2t R@10 | i2t medR | t2i R@1 | t2i R@5 | t2i R@10 | "
            "t2i medR | mR |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for lang in langs:
        per = [m["languages"][lang] for m in runs_metrics]
        cells = [_ms([p[k] for p in per]) for k in RECALLS[:3]] + [_ms([p["i2t_medr"] for p in per])]
        cells += [_ms([p[k] for p in per]) for k in RECALLS[3:]] + [_ms([p["t2i_medr"] for p in per])]
        cells.append(_ms([mr(p) for p in per]))
        rows.append(f"| {lang} | {int(per[0]['n_images'])} | " + " | ".join(cells) + " |")
    return "\n".join([head, *rows])


def mr(lang_metrics: dict) -> float:
    return lang_metrics["mr"]  # polyvse.metrics: the mean of the six recalls


def difference_table(base: list[dict], best: list[dict]) -> str:
    langs = list(base[0]["languages"])
    lines = ["| | " + " | ".join(langs) + " |", "|---|" + "---:|" * len(langs)]
    for label, group in (("baseline mR", base), ("best mR", best)):
        lines.append(f"| {label} | " + " | ".join(_ms([mr(m["languages"][g]) for m in group]) for g in langs) + " |")
    diffs = [statistics.fmean(mr(m["languages"][g]) for m in best) - statistics.fmean(mr(m["languages"][g])
                                                                                       for m in base) for g in langs]
    lines.append("| difference | " + " | ".join(f"{d:+.1f}" for d in diffs) + " |")
    return "\n".join(lines)


def report(runs: Path, seeds) -> str:
    base, best = load(runs, BASELINE, seeds), load(runs, BEST, seeds)
    m0, b0 = best[0], base[0]
    captions = f"{m0['n_train_captions']:,} training captions"
    if b0["n_train_captions"] != m0["n_train_captions"]:  # the best model may read more of each photo's captions
        captions += f" for the best model, {b0['n_train_captions']:,} for the baseline"
    return "\n".join([
        f"f8k-full, official split: {m0['n_train_photos']:,} training photos, {captions}; "
        f"1k test photos (the gallery of each language); seeds {', '.join(map(str, seeds))}; "
        "mean ± sd over seeds.",
        "", f"**Best model** (`{config_file(BEST)}`):", "", language_table(best),
        "", f"**Baseline** (`{config_file(BASELINE)}`, e5-frozen's recipe):", "", language_table(base),
        "", "**mR per language** (mean of the six recalls):", "", difference_table(base, best),
    ])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=Path, default=REPO / "runs" / "zoo-f8k-full",
                   help="the f8k-full zoo's run folder (default: %(default)s)")
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    p.add_argument("--jobs", type=int, default=1, help="trainings at a time (default: %(default)s)")
    p.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else the repo's .data if present)")
    p.add_argument("--no-train", action="store_true", help="only report runs that exist")
    p.add_argument("--readme", action="store_true", help="rewrite README's f8k-full block")
    args = p.parse_args(argv)
    polyvse = str(Path(sys.executable).with_name("polyvse"))
    if not args.no_train:
        train(args.runs, args.jobs, polyvse, data_root(args.data_root))
    text = report(args.runs, args.seeds)
    print(text)
    if args.readme:
        from polyvse_train.zoo.report import update_readme_block  # the zoo's README block writer (atomic)

        if not update_readme_block(REPO / "README.md", text + "\n", tag="f8k-full"):
            raise SystemExit("README.md has no <!-- f8k-full:start --> ... <!-- f8k-full:end --> block")
    return 0


if __name__ == "__main__":
    sys.exit(main())
