"""How long the product build took: one sentence from its build record (``benchmarks/results/make_model.json``,
written by ``benchmarks/bench_make_model.py``), so every page that states the build's time states the record's."""

from __future__ import annotations

from polyvse.provenance import PRODUCT_BUILD_RECORD

from .records import Page

#: the stages the record times, in the order the build runs them, and how a reader calls them
STAGES = (("training", "training"), ("index", "the index"), ("adaptation", "the adaptation stage"))
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def machine_words(machine: dict) -> str:
    """'a 2-core AMD EPYC without native bf16' from the record's machine block."""
    flags = machine.get("cpu_flags_of_note") or []
    native = "with" if any(f in flags for f in BF16_FLAGS) else "without"
    gpu = machine.get("gpu")
    where = f"{machine.get('cores')}-core {machine.get('cpu_model') or 'CPU'}"
    return f"a {where} {native} native bf16" + (f" and a {gpu}" if gpu else "")


def build_time_block(page: Page) -> str:
    record = page.read(PRODUCT_BUILD_RECORD)
    stages = record.get("stages") or {}
    parts = [f"{words} {_minutes(stages[name])}" for name, words in STAGES if name in stages]
    precision = (record.get("precision") or {}).get("trained") or (record.get("precision") or {}).get("asked")
    goal = record.get("goal_s")
    against = f", against a goal of {goal / 60:.0f}" if goal else ""
    what = "The whole build" if "adaptation" in stages else "The build (it had no adaptation stage then)"
    return (
        f"{what} took **{_minutes(record['wall_s'])} minutes** from empty caches in one run{against}, on "
        f"{machine_words(record.get('machine') or {})}, trained in {precision}, "
        f"{record.get('threads')} threads: {', '.join(parts)} minutes "
        f"({page.record_link(PRODUCT_BUILD_RECORD, 'record')})."
    )
