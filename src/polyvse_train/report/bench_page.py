"""The whole benchmark page, benchmarks/results/latest.md, from a latest.json record (`make bench` writes both;
the docs' bench block is :mod:`polyvse_train.report.bench`'s, from the same record)."""

from __future__ import annotations

from .bench import merged_runs


def fmt(v, nd: int = 3) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{nd}g}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def bench_page(r: dict, headline: dict) -> str:
    """The whole page, latest.md, of a latest.json record ``r``; ``headline``: key -> (target, predicate)."""
    d = r["details"]
    lines = [*_head(r, headline), *_search(d.get("search")), *_extract(d.get("extract")), *_evaluator(d.get("eval"))]
    lines += cli_markdown(d.get("cli"), "Command-line search start-up (bench_cli_startup.py)")
    lines += cli_markdown(
        d.get("cli_product"), "Command-line search with the product model (bench_cli_startup.py --product)"
    )
    lines += scale_markdown(d.get("scale"))
    tr = d.get("train")
    if tr:
        lines += ["", "## Training (bench_train.py)", ""]
        lines += [f"- `{k}`: {fmt(v)}" for k, v in tr.items() if isinstance(v, (int, float, str)) and len(str(v)) < 200]
    lines += gpu_markdown(d.get("gpu"))
    lines += ["", "Step wall times: " + ", ".join(f"{k} {v:.0f} s" for k, v in r["step_seconds"].items()), ""]
    return "\n".join(lines)


def _head(r: dict, headline: dict) -> list[str]:
    m = r["machine"]
    lines = [
        "# polyvse benchmarks",
        "",
        f"Run {m['date_utc']} on {m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB; "
        f"torch {m['torch']} ({m['torch_blas']}), numpy {m['numpy']} ({m['numpy_blas']}), faiss {m['faiss']}; "
        f"threads torch {m['threads']['torch']}, faiss {m['threads']['faiss_omp']}, "
        f"OpenBLAS {m['threads']['numpy_openblas']}. Load average at start "
        f"{', '.join(f'{x:.1f}' for x in m['load_average_at_start'])}, at end "
        f"{', '.join(f'{x:.1f}' for x in r['load_average_at_end'])} (a shared, noisy machine: compare ratios "
        f"measured in one run). Git {m['git_commit']}{' (dirty)' if r['git_dirty'] else ''}. "
        f"Wall time {r['wall_s']:.0f} s{' — QUICK mode (tiny sizes, numbers meaningless)' if r['quick'] else ''}.",
    ]
    if r.get("merged"):
        lines += ["", merged_runs(r).strip()]
    if r["git_dirty"]:
        lines += [
            "",
            f"**DIRTY TREE (run with --allow-dirty): these figures measure code no commit holds: "
            f"{', '.join(r['git_dirty_files'])} on top of {m['git_commit']}.**",
        ]
    lines += ["", "| metric | value | target | met |", "| --- | --- | --- | --- |"]
    for key, (target, ok) in headline.items():
        v = r.get(key)
        met = "—" if v is None or ok is None else ("yes" if ok(v) else "**no**")
        lines.append(f"| `{key}` | {fmt(v)} | {target} | {met} |")
    if r["notes"]:
        lines += ["", "Notes:"] + [f"- `{k}`: {v}" for k, v in r["notes"].items()]
    return lines


def _search(s: dict | None) -> list[str]:
    if not s:
        return []
    lines: list[str] = []

    def cheap(x, label):
        c = x["cheapest_at_target"]
        return (
            "none"
            if c is None
            else (
                f"{label}={c['param']}: p50 {c['single']['p50_ms']:.2f} ms, "
                f"p99 {c['single']['p99_ms']:.2f}, R@10 {c['recall_at_10']:.3f}"
            )
        )

    lines += [
        "",
        "## Search (bench_search.py)",
        "",
        s["data"] + ".",
        "",
        "| dim | read GB/s | exact 1-query p50 ms (numpy / torch / faiss) | best scan GB/s | fraction "
        "| exact batch-256 p50 ms (numpy / torch / faiss) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for dim, p in s["per_dim"].items():
        es, eb = p["exact_single"], p["exact_batched"]
        big = eb[str(max(int(k) for k in eb if k.isdigit()))]
        lines.append(
            f"| {dim} | {p['read_bandwidth_gbs']['best']:.1f} | "
            + " / ".join(f"{es[k]['p50_ms']:.0f}" for k in ("numpy", "torch", "faiss_flat"))
            + f" | {es[p['exact_best_single_library']]['scan_gbs_best']:.1f} ({p['exact_best_single_library']}) "
            f"| {p['exact_scan_bandwidth_fraction']:.2f} | "
            + " / ".join(f"{big[k]['p50_ms']:.0f}" for k in ("numpy", "torch", "faiss_flat"))
            + " |"
        )
    lines += [
        "",
        "| dim | index | build s | memory GiB | cheapest with recall@10 ≥ 0.95 (single query) "
        "| batch-32 p50 ms at it |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for dim, p in s["per_dim"].items():
        for kind, x in p["ivf"].items():
            b32 = (x.get("batched_at_cheapest") or {}).get("32", {}).get("p50_ms")
            lines.append(
                f"| {dim} | {kind} nlist {x['nlist']} (1M) | {x['build_s']:.0f} | "
                f"{x['memory_bytes'] / 2**30:.2f} | {cheap(x, 'nprobe')} | {fmt(b32)} |"
            )
        hn = p["hnsw"]
        b32 = (hn.get("batched_at_cheapest") or {}).get("32", {}).get("p50_ms")
        lines.append(
            f"| {dim} | hnsw M {hn['M']} efC {hn['efConstruction']} ({hn['points']} slice) | "
            f"{hn['build_s']:.0f} (1M est. {hn['build_s_extrapolated_full'] / 60:.0f} min) | "
            f"{hn['memory_bytes'] / 2**30:.2f} | {cheap(hn, 'efSearch')} | {fmt(b32)} |"
        )
    first = next(iter(s["per_dim"].values()))
    lines += [
        "",
        f"HNSW runs on {first['hnsw']['slice']}: see benchmarks/README.md for why and how the 1M build "
        "time is extrapolated. The headline ANN figures come only from indexes over the full set.",
    ]
    return lines


def _extract(e: dict | None) -> list[str]:
    if not e:
        return []
    lines: list[str] = []
    v = e["backbone_variants"]["variants"]
    lines += [
        "",
        "## Feature extraction (bench_extract.py)",
        "",
        f"{e['photos']} photos, EfficientNet-Lite0, fresh cache each run. Best default: "
        f"**{e['extract_photos_per_s']:.1f} photos/s** ({e['extract_best_config']}).",
        "",
        "| configuration | photos/s |",
        "| --- | --- |",
    ]
    for k, x in e["single_crop_end_to_end"].items():
        lines.append(f"| single crop, {k.replace('_', ' ')} | {x['photos_per_s']:.1f} |")
    t = e.get("ten_crop_end_to_end")
    if t:
        lines.append(f"| ten-crop ({t['photos']} photos), workers {t['workers']} | {t['photos_per_s']:.1f} |")
    if e.get("skipped"):
        lines += ["", "Skipped (time budget or not needed): " + "; ".join(e["skipped"]) + "."]
    st = e["stages_alone"]
    lines += [
        "",
        f"Stages alone (one process): decode {st['decode_photos_per_s']:.0f}/s, resize+crop+normalise "
        f"{st['resize_crop_normalise_photos_per_s']:.0f}/s, sha256 {st['sha256_photos_per_s']:.0f}/s, "
        f"backbone {st['backbone_only_photos_per_s']:.0f}/s.",
        "",
        "| backbone variant (same batch) | photos/s | × default | min cosine to default |",
        "| --- | --- | --- | --- |",
    ]
    for k, x in v.items():
        lines.append(
            f"| {k} | {x['photos_per_s']:.0f} | {x['ratio_to_default']:.2f} | {x['min_cosine_to_default']:.4f} |"
        )
    for k, x in e.get("variants_end_to_end", {}).items():
        lines.append(
            f"| {k}, end to end | {x['photos_per_s']:.1f} | {x['ratio_to_default']:.2f} "
            f"| {x['min_cosine_to_default']:.4f} |"
        )
    return lines


def _evaluator(ev: dict | None) -> list[str]:
    if not ev:
        return []
    lines: list[str] = []
    lines += [
        "",
        "## Evaluator (bench_eval.py)",
        "",
        f"retrieval_metrics on {ev['n_images']} images × {ev['n_captions']} captions: median "
        f"{ev['median_s']:.2f} s (numpy input), torch input "
        f"{sorted(ev['retrieval_metrics_torch_s'])[len(ev['retrieval_metrics_torch_s']) // 2]:.2f} s.",
    ]
    return lines


def cli_markdown(c: dict | None, title: str) -> list[str]:
    if not c:
        return []
    lines = [
        "",
        f"## {title}",
        "",
        f"`{c['command']}` ({c['index_photos']} photos), fresh process: median **{c['cli_search_s']:.2f} s** "
        f"over {c['repeats']} runs, CPU {c['cli_search_cpu_s']:.2f} s (python alone {c['python_startup_s']:.2f} s). "
        f"The same search stage by stage, median s (numpy text path / torch model, same ranking: "
        f"{c['same_ranking']}):",
        "",
        "| stage | numpy path | torch path |",
        "| --- | --- | --- |",
    ]
    fast, slow = c["numpy_text_path"]["stages_s_median"], c["torch_path"]["stages_s_median"]
    for stage in slow:
        lines.append(f"| {stage} | {fmt(fast.get(stage))} | {fmt(slow[stage])} |")
    lines.append(
        f"| whole process | {fmt(c['numpy_text_path']['wall_s_median'])} | {fmt(c['torch_path']['wall_s_median'])} |"
    )
    return lines


def ranked_by(run: dict) -> str:
    """A bench_scale run's scoring: cosine, or CSLS with each photo's r_C stored or computed per query."""
    if not run["csls"]:
        return "cosine"
    if "penalties" not in run:  # a record from before the bench stored them
        return "CSLS"
    return "CSLS, r_C stored" if run["penalties"] else "CSLS, r_C per query"


def scale_markdown(sc: dict | None) -> list[str]:
    """bench_scale.py's runs: one row per data set and size."""
    if not sc:
        return []
    lines = [
        "",
        "## Scale: the compressed index (bench_scale.py)",
        "",
        f"Built under --max-memory {sc['max_memory']}; {sc['queries']} held-out queries, one thread, the vectors "
        "file dropped from the page cache first (cold), then again (warm), then the ANN alone (warm, against "
        "the exact cosine top 10). Headline data: "
        f"{sc.get('scale_data')}." + (" " + " ".join(sc["notes"]) if sc.get("notes") else ""),
        "",
        "| data | vectors | structure | ranked by | build s | build peak RSS GiB | disk GiB | peak RSS GiB "
        "| recall@10 | p50 ms | p99 ms | warm p50 ms | ANN alone: recall@10, p50 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for data, runs in sc["runs"].items():
        for x in runs.values():
            c = x["search"]["ivfpq"]
            lines.append(
                f"| {data} | {x['n']:,} × {x['dim']} | {c['factory']}, nprobe {c['nprobe']}, "
                f"depth {c['depth']} | {ranked_by(x)} "
                f"| {x['build_s']:.0f} | {x['build_peak_rss_bytes'] / 2**30:.2f} "
                f"| {x['disk_bytes'] / 2**30:.2f} | {x['peak_rss_bytes'] / 2**30:.2f} "
                f"| {x['cold']['recall_at_10']:.3f} | {x['cold']['p50_ms']:.2f} | {x['cold']['p99_ms']:.2f} "
                f"| {x['warm']['p50_ms']:.2f} | {x['cosine']['recall_at_10']:.3f}, "
                f"{x['cosine']['p50_ms']:.2f} |"
            )
    return lines


def gpu_markdown(g: dict | None) -> list[str]:
    if not g:
        return []
    if "skipped" in g:
        return ["", "## GPU (bench_gpu.py)", "", g["skipped"] + "."]
    e, s = g["extract"], g["search"]
    lines = [
        "",
        "## GPU (bench_gpu.py)",
        "",
        f"{g['gpu']}.",
        "",
        "| what | fp32 | bf16 autocast |",
        "| --- | --- | --- |",
    ]
    two = lambda f: " | ".join(fmt(f(p)) if p in e else "—" for p in ("fp32", "bf16"))  # noqa: E731
    lines.append(
        f"| extraction end to end, photos/s ({e['photos']} photos, {e['workers']} workers) | "
        + two(lambda p: e[p]["end_to_end_photos_per_s"])
        + " |"
    )
    lines.append("| backbone alone, photos/s | " + two(lambda p: e[p]["backbone_alone_photos_per_s"]) + " |")
    t = g["train"]
    for key, label in (
        ("train_real_captions_per_s", "training, real loop, captions/s"),
        ("train_bound_captions_per_s", "training, bare-kernel bound, captions/s"),
        ("train_throughput_ratio", "training, real / bound"),
    ):
        lines.append(f"| {label} | " + " | ".join(fmt(t[p][key]) if p in t else "—" for p in ("fp32", "bf16")) + " |")
    if "bf16_min_cosine_to_fp32" in e:
        lines += ["", f"bf16 features: min cosine to fp32 {e['bf16_min_cosine_to_fp32']:.4f}."]
    ivf = s["ivf"]
    lines += [
        "",
        f"Search over {s['vectors']:,} × {s['dim']} ({s['data']}): exact through torch p50 "
        f"{s['exact_torch_single']['p50_ms']:.2f} ms single, {s['exact_torch_batch_256']['p50_ms']:.1f} ms for "
        f"256 queries; IVF{ivf['nlist']} in FAISS on the {ivf['faiss']}, built in {ivf['build_s']:.0f} s, "
        + (
            f"nprobe {ivf['cheapest_at_target']['nprobe']}: p50 {ivf['cheapest_at_target']['p50_ms']:.2f} ms at "
            f"recall@10 {ivf['cheapest_at_target']['recall_at_10']:.3f}."
            if ivf.get("cheapest_at_target")
            else "no nprobe reached recall@10 0.95."
        ),
    ]
    return lines
