"""The Performance block: every figure of `make bench`'s record (benchmarks/results/latest.json), with the machine,
the commit and the model each product-model figure was measured on."""

from __future__ import annotations

import re

from .records import Page

RECORD = "benchmarks/results/latest.json"


def measured_model(r: dict) -> str:
    """The sentence naming the model the record's product-model figures (product query, compressed index and Milvus
    on its photo embeddings) were measured on, as its provenance names it; a record that measured none says why."""
    model = (r.get("provenance") or {}).get("model") or {}
    if "none" in model:
        return (
            f"This record measured no product model ({model['none']}): its compressed-index rows are "
            "of random Gaussian vectors."
        )
    if not model:
        return "The product-model rows were measured on a product model the record does not name."
    name = model.get("description") or model.get("config") or "the product model"
    fingerprint = model.get("fingerprint")
    return f"The product-model rows were measured on {name}" + (
        f", fingerprint {str(fingerprint)[:12]}." if fingerprint else "."
    )


def bench_block(page: Page) -> str:
    return bench_markdown(page.read(RECORD), page.record_link(RECORD))


def bench_markdown(r: dict, link: str = f"`{RECORD}`") -> str:
    """The Performance figures, every one read from a latest.json written by a full run."""
    if r.get("quick"):
        raise ValueError("a --quick run's figures are meaningless: the docs take only a full run's latest.json")
    lines = [_head(r, link), "", *_rows(r)]
    variants = _variants(r["details"].get("extract"))
    if variants:
        lines += ["", variants]
    return "\n".join(lines)


def _head(r: dict, link: str) -> str:
    """Where and when the record was made, and on which model."""
    m = r["machine"]
    dirty = r.get("git_dirty", m.get("git_dirty"))
    commit = r.get("git_commit") or m.get("git_commit")
    head = (
        f"From {link} (`make bench` on "
        f"{m['date_utc'][:10]}, commit {str(commit)[:12]}; {m['cpu_model']}, {m['cores']} cores, "
        f"{m['memory_gib']} GiB, GPU {m.get('gpu') or 'none'}; load average {m['load_average_at_start'][0]:.1f} at "
        f"start, {r['load_average_at_end'][0]:.1f} at the end; rendered by `polyvse report`). {measured_model(r)}"
    )
    head += merged_runs(r)
    if dirty:
        files = r.get("git_dirty_files")
        head += (
            " **Written on a dirty tree"
            + (f" ({', '.join(files)})" if files else "")
            + ": no commit reproduces these figures; rerun `make bench` in a clean clone.**"
        )
    return head


def merged_runs(r: dict) -> str:
    """For a record merged from two runs (`run_all.py --merge`): which steps the second ran, when, and why the
    first run's were replaced; empty for one run."""
    m = r.get("merged")
    if not m:
        return ""
    first, second = m["runs"]
    why = sorted(set(first["notes_replaced"].values()))
    return (
        f" Its {', '.join(m['steps'])} step{'s' if len(m['steps']) > 1 else ''} came from a second run at the same "
        f"commit on the same machine (load average {second['load_average_at_start'][0]:.1f} at its start; the "
        "record's merged.runs say when each ran)"
        + (f", replacing the first run's ({'; '.join(why)})" if why else "")
        + "."
    )


def _rows(r: dict) -> list[str]:
    """The table: one row per figure, its target beside it."""
    return [
        "| what | figure | target |",
        "|---|---|---|",
        *_train_rows(r),
        *_search_rows(r),
        *_extract_rows(r),
        *_cli_rows(r),
        *_scale_rows(r),
    ]


# a tracker reference in a target's text (the word issue and a number, or a hash and a number): the docs show
# the goal alone
_ISSUE_REF = re.compile(r"\bissues?\s*#?\s*\d+(?:\s*(?:,|and)\s*#?\d+)*|(?<![\w&])#\d+\b", re.IGNORECASE)


def target_text(target) -> str:
    """A target as the table shows it: its goal, without the tracker reference that set it (``< 0.5 s (issue N)``
    -> ``< 0.5 s``; ``>= 0.95 (CSLS, issue N)`` -> ``>= 0.95 (CSLS)``)."""
    text = _ISSUE_REF.sub("", str(target))
    text = re.sub(r"\s*[,;:]\s*(?=[,;:)]|$)", "", text)  # the separator the reference left behind
    text = re.sub(r"\(\s*[,;:]\s*", "(", text)
    text = re.sub(r"\s*\(\s*\)", "", text)  # a parenthesis that held only the reference
    return re.sub(r"\s{2,}", " ", text).strip(" ,;:") or "—"


def _row(r: dict, what: str, fig: str, key: str | None) -> str:
    target = target_text(r["targets"][key]) if key and key in r["targets"] else "—"
    return f"| {what} | {fig} | {target} |"


def _missing(r: dict, key: str) -> str:
    return (
        f"not measured: {r['notes'][key]}"
        if key in r.get("notes", {})
        else "not measured"
        if key in r
        else "not in this record (written before the benchmark was added)"
    )


def _train_rows(r: dict) -> list[str]:
    tr = r["details"].get("train") or {}
    v = r.get("train_throughput_ratio")
    rows = [
        _row(
            r,
            "training throughput, demo model: real loop / bare-kernel bound (`train_throughput_ratio`)",
            f"{v:.2f} ({tr['train_real_captions_per_s']:.0f} vs {tr['train_bound_captions_per_s']:.0f} captions/s)"
            if v is not None
            else _missing(r, "train_throughput_ratio"),
            "train_throughput_ratio",
        )
    ]
    if tr.get("mule_throughput_ratio") is not None:
        rows.append(
            _row(
                r,
                "training throughput, MULE (`configs/mule-nc-lc.yaml`): real / bound",
                f"{tr['mule_throughput_ratio']:.2f} ({tr['mule_real_captions_per_s']:.0f} vs "
                f"{tr['mule_bound_captions_per_s']:.0f} captions/s)",
                "train_throughput_ratio",
            )
        )
    return rows


def _search_rows(r: dict) -> list[str]:
    """Exact scan against the streaming-read bound, and the cheapest ANN setting at the recall target."""
    s = r["details"].get("search")
    if not s:
        return [_row(r, "exact scan / ANN", _missing(r, "exact_scan_bandwidth_fraction"), None)]
    top = s["per_dim"][str(s["headline_dim"])]
    bw, lib = top["read_bandwidth_gbs"], top["exact_best_single_library"]
    if "exact_scan_bandwidth_fraction_raw" not in top:  # a record of the probe that was not a bound
        fig = (
            f"withdrawn: this record measured against a read probe that was not a bound ({top['exact_scan_bandwidth_fraction']:.2f} "
            "of it); rerun `make bench`"
        )
    else:
        fig = (
            f"{top['exact_scan_bandwidth_fraction']:.2f} ({lib} {top['exact_single'][lib]['scan_gbs_best']:.1f} GB/s "
            f"vs peak read {bw['best']:.1f} GB/s, {bw['best_kernel']}; p50 {top['exact_single'][lib]['p50_ms']:.0f} ms"
            + (
                f"; raw {top['exact_scan_bandwidth_fraction_raw']:.3f}, above the bound by noise"
                if top.get("exact_scan_exceeds_bound")
                else ""
            )
            + ")"
        )
    rows = [
        _row(
            r,
            f"exact scan of {top['n']:,} × {top['dim']} float32, one query: bytes/s / peak streaming read "
            "(`exact_scan_bandwidth_fraction`)",
            fig,
            "exact_scan_bandwidth_fraction",
        )
    ]
    if r.get("ann_p50_ms") is not None:
        rows.append(
            _row(
                r,
                f"ANN, {top['n']:,} × {top['dim']}, cheapest setting with recall@10 ≥ 0.95 (`ann_p50_ms`)",
                f"{r['ann_setting']}: p50 {r['ann_p50_ms']:.2f} ms, p99 {s['ann_p99_ms']:.2f} ms, recall@10 "
                f"{r['ann_recall_at_10']:.3f}",
                "ann_p50_ms",
            )
        )
    else:
        rows.append(_row(r, "ANN (`ann_p50_ms`)", _missing(r, "ann_p50_ms"), "ann_p50_ms"))
    return rows


def _extract_rows(r: dict) -> list[str]:
    """Feature extraction and the evaluator."""
    e = r["details"].get("extract")
    ev = r.get("eval_5k_seconds")
    return [
        _row(
            r,
            "feature extraction, EfficientNet-Lite0, real photos, fresh cache (`extract_photos_per_s`)",
            (
                f"{e['extract_photos_per_s']:.1f} photos/s ({e['photos']} photos; "
                + ", ".join(
                    f"{k.replace('_', ' ')}: {x['photos_per_s']:.1f}" for k, x in e["single_crop_end_to_end"].items()
                )
                + ")"
            )
            if e
            else _missing(r, "extract_photos_per_s"),
            None,
        ),
        _row(
            r,
            "evaluator, 5k images × 25k captions (`eval_5k_seconds`)",
            f"{ev:.2f} s" if ev is not None else _missing(r, "eval_5k_seconds"),
            None,
        ),
    ]


def _cli_rows(r: dict) -> list[str]:
    """`polyvse search` in a fresh process, on the demo index and on the product index."""
    d = r["details"]
    c, cp = r.get("cli_search_s"), r.get("cli_search_product_s")
    return [
        _row(
            r,
            "`polyvse search` text query on the demo index, fresh process (`cli_search_s`)",
            (
                f"{c:.2f} s median (torch path {d['cli']['torch_path']['wall_s_median']:.2f} s)"
                if c is not None
                else _missing(r, "cli_search_s")
            ),
            "cli_search_s",
        ),
        _row(
            r,
            "`polyvse search` text query on the product index (frozen e5 + USE), fresh process "
            "(`cli_search_product_s`)",
            (
                f"{cp:.2f} s median (torch path {d['cli_product']['torch_path']['wall_s_median']:.2f} s)"
                if cp is not None
                else _missing(r, "cli_search_product_s")
            ),
            "cli_search_product_s",
        ),
    ]


def _scale_rows(r: dict) -> list[str]:
    """The compressed index at 10M, 1M and 100K photos."""
    rows = []
    for size in ("10m", "1m", "100k"):
        key = f"scale_{size}_p50_ms"
        fig = (
            f"peak RSS {r[f'scale_{size}_rss_gb']:.2f} GiB, recall@10 {r[f'scale_{size}_recall_at_10']:.3f}, p50 "
            f"{r[key]:.2f} ms, p99 {r[f'scale_{size}_p99_ms']:.2f} ms (one thread, cold cache); built in "
            f"{r[f'scale_{size}_build_s']:.0f} s, {r[f'scale_{size}_disk_gb']:.1f} GiB on disk "
            f"({r.get('scale_data')} data)"
            if r.get(key) is not None
            else _missing(r, key)
        )
        rows.append(
            _row(
                r,
                f"compressed index (`--max-memory 8GB`), {size.upper()} photos (`scale_{size}_*`)",
                fig,
                "scale_10m_p50_ms" if size == "10m" else None,
            )
        )
    return rows


def _variants(e: dict | None) -> str | None:
    """The backbone variants measured in the same run, as one sentence."""
    if not e:
        return None
    var = e["backbone_variants"]["variants"]
    parts = []
    if "fp32_contiguous_nchw" in var:
        parts.append(
            f"channels-last is {1 / var['fp32_contiguous_nchw']['ratio_to_default']:.1f}× faster on the "
            "backbone than NCHW (kept)"
        )
    if "bf16_autocast_channels_last" in var:
        b = var["bf16_autocast_channels_last"]
        e2e = next((x for k, x in e.get("variants_end_to_end", {}).items() if k.startswith("bf16")), None)
        parts.append(
            f"bf16 autocast {b['ratio_to_default']:.2f}× on the backbone"
            + (f", {e2e['ratio_to_default']:.2f}× end to end" if e2e else "")
            + f", minimum cosine {min(b['min_cosine_to_default'], e2e['min_cosine_to_default'] if e2e else 1):.4f}"
            " to fp32 features (not the default)"
        )
    return ("Same run, backbone variants on one batch: " + "; ".join(parts) + ".") if parts else None
