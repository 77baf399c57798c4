"""How long one `polyvse search` on the product model takes from a fresh process: one sentence from the record
`benchmarks/run_all.py --only cli_product` writes (``benchmarks/results/query-product/latest.json``), so the search
guide states the record's seconds and names the machine."""

from __future__ import annotations

from .build_time import machine_words
from .records import Page, dirty_words

RECORD = "benchmarks/results/query-product/latest.json"


def query_start_block(page: Page) -> str:
    record = page.read(RECORD)
    runs = ((record.get("details") or {}).get("cli_product") or {}).get("cli_search_runs_s") or []
    median = record.get("cli_search_product_s")
    if median is None:
        raise ValueError(f"{RECORD}: no cli_search_product_s; rerun `python benchmarks/run_all.py --only cli_product`")
    machine = record.get("machine") or {}
    load = (machine.get("load_average_at_start") or [None])[0]
    over = f"the median of {len(runs)} runs" if len(runs) > 1 else "one run"
    spread = f", {min(runs):.2f}–{max(runs):.2f} s" if len(runs) > 1 else ""
    at = f" (load average {load:.1f} at the start)" if load is not None else ""
    return (
        f"On the product model a query took **{median:.2f} s** from a fresh process ({over}{spread}), on "
        f"{machine_words(machine)}{at} ({dirty_words(record)}{page.record_link(RECORD, 'record')})."
    )
