"""docs/results.md, the zoo's page, rendered whole from the committed zoo records (results/zoo: F8K-ML,
results/zoo-f8k-full: its marked block), exactly as `polyvse zoo report` writes it."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from polyvse_train.zoo import find_configs, load_spec, plan_runs
from polyvse_train.zoo.block import write_block_report
from polyvse_train.zoo.report import write_report
from polyvse_train.zoo.spec import MAKE_TARGETS

PAGE = "docs/results.md"
# (spec, its committed records): the F8K-ML zoo writes the page, f8k-full its block of it
ZOOS = (("configs/zoo/cpu.yaml", "results/zoo"), ("configs/zoo/f8k-full.yaml", "results/zoo-f8k-full"))


def render_zoo_page(repo: Path, keep_plots_in: Path | None = None) -> str:
    """The page's text (and, with ``keep_plots_in``, its PNG figures copied there)."""
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp)
        current = repo / PAGE
        if current.exists():
            shutil.copy(current, docs / "results.md")
        for spec_file, records in ZOOS:
            spec = load_spec(repo / spec_file)
            configs = find_configs(repo / "configs", spec.configs or None, spec.own_settings)
            known = [n for n, _ in find_configs(repo / "configs", None, spec.own_settings)]
            planned = [r.run_id for r in plan_runs(configs, spec, known)]
            order = [n for n, _ in configs]
            command = MAKE_TARGETS.get(spec_file, f"polyvse zoo run --spec {spec_file}")
            if spec.title:  # the F8K-ML claims it sets beside its own: from the page itself, rendered just above
                write_block_report(
                    repo / records, docs / "results.md", planned, order, command, spec, compare_out=docs / "no-runs"
                )
            else:
                write_report(repo / records, docs, planned, order, command, spec)
        if keep_plots_in is not None:
            for png in docs.glob("*.png"):
                shutil.copy(png, keep_plots_in / png.name)
        return (docs / "results.md").read_text(encoding="utf-8")
