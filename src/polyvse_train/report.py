"""Printing results for people."""
from __future__ import annotations

from pathlib import Path


def print_metrics(metrics: dict, out: Path) -> None:
    from polyvse.evaluation.report import markdown_table

    print(f"\n{metrics['dataset']} · split {metrics['split']} · seed {metrics['seed']}"
          f" · {metrics['wall_time_s']} s\n")
    print(markdown_table(metrics["languages"]))
    print(f"\ncheckpoint: {out / 'checkpoint'}\nmetrics:    {out / 'metrics.json'}")
