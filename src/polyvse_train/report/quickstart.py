"""How long the quick start took: one sentence from its record (``benchmarks/results/quickstart.json``, written by
``benchmarks/bench_quickstart.py``), so README and the getting-started page state the record's minutes."""

from __future__ import annotations

from .build_time import machine_words
from .records import Page, dirty_words

RECORD = "benchmarks/results/quickstart.json"
#: a machine whose 1-minute load average at the start was above this shared its cores with other jobs
BUSY_LOAD = 2.5


def quickstart_block(page: Page) -> str:
    record = page.read(RECORD)
    steps = record.get("steps") or {}
    machine = record.get("machine") or {}
    load = (machine.get("load_average_at_start") or [None])[0]
    parts = []
    if "setup" in steps:
        parts.append(f"`make setup` into a new environment took {steps['setup']['minutes']:.1f} minutes")
    if "demo" in steps:
        parts.append(f"`make demo` from an empty data root and caches {steps['demo']['minutes']:.1f} minutes")
    first = f"then the first search {steps['search']['wall_s']:.1f} s" if "search" in steps else ""
    total = record.get("to_first_search_min")
    where = f"on {machine_words(machine)}"
    if load is not None:
        shared = ", its cores shared with other jobs " if load > BUSY_LOAD else " "
        where += f"{shared}(load average {load:.1f} at the start)"
    if (record.get("pip_cache") or {}).get("find_links"):
        where += ", pip reading packages from a local wheel folder"
    head = " and ".join(parts) + (f", {first}" if first else "")
    return (
        f"{head}: **{total:.1f} minutes** from nothing to a first search, {where} "
        f"({dirty_words(record)}{page.record_link(RECORD, 'record')})."
    )
