"""Smoke tests for the benchmark scripts: each runs with --quick at tiny sizes so it cannot rot.

They check that the scripts run and write the JSON keys `make bench` relies on with sane values; they
measure nothing (the figures of a quick run are meaningless).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_index import N_FIRST, assets  # noqa: F401 (fixture)

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"


def run_script(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, str(BENCH / name), *args], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{name} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def finite_positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


# a scan is one of the bound's kernels plus a top-10, so its best time is at least the bound's best; over tiny
# cache-resident matrices on a loaded 2-core machine best-of-few timings still wobble by a few percent
SCAN_BOUND_TOLERANCE = 0.10


def test_scan_fraction_is_clipped_to_the_bound_and_flags_noise():
    sys.path.insert(0, str(BENCH))
    try:
        import bench_search
    finally:
        sys.path.remove(str(BENCH))
    assert bench_search.bound_fraction(18.0, 20.0) == {"fraction": 0.9, "raw": 0.9, "exceeds_bound": False}
    over = bench_search.bound_fraction(24.6, 20.3)  # the old probe: a "fraction" of 1.21
    assert over["fraction"] == 1.0 and over["raw"] == pytest.approx(1.2118, abs=1e-4) and over["exceeds_bound"]
    assert not bench_search.bound_fraction(20.2, 20.0)["exceeds_bound"]  # within the noise tolerance


def test_train_bounds_feed_the_real_batches_own_word_ids():
    """padded_ids, which both training bounds (demo and MULE) build their batches with, returns the captions' own
    ids in batch order: random ids made the bare loop slower than the real one (ratios 1.07 and 1.22)."""
    from types import SimpleNamespace

    sys.path.insert(0, str(BENCH))
    try:
        import bench_train
    finally:
        sys.path.remove(str(BENCH))
    data = SimpleNamespace(train=SimpleNamespace(ids=[[5, 6, 7], [9], [11, 12]]))
    ids, lengths = bench_train.padded_ids(data, [2, 0, 1])
    assert lengths.tolist() == [2, 3, 1]
    assert ids.tolist() == [[11, 12, 0], [5, 6, 7], [9, 0, 0]]


def test_train_bounds_are_timed_side_by_side_with_the_real_steps():
    """interleaved_rates runs step 0 of each kind untimed, then alternates blocks (order swapped every block) over
    the same steps, so a change of machine load hits the real and the bare step alike; a step four times as slow
    shows at a much lower rate; a short epoch gets blocks of one step."""
    import time

    sys.path.insert(0, str(BENCH))
    try:
        import bench_train
    finally:
        sys.path.remove(str(BENCH))
    calls = []

    def stepper(kind, seconds):
        def step(i):
            calls.append((kind, i))
            time.sleep(seconds)

        return step

    real, bare = bench_train.interleaved_rates(stepper("real", 0.004), stepper("bare", 0.001), [8] * 41, block=10)
    assert calls[:2] == [("real", 0), ("bare", 0)]  # the warm-up
    timed = calls[2:]
    assert [k for k, _ in timed[:20]] == ["bare"] * 10 + ["real"] * 10  # block 1: bare first
    assert [k for k, _ in timed[20:40]] == ["real"] * 10 + ["bare"] * 10  # block 2: the order swapped
    assert sorted(i for k, i in timed if k == "real") == list(range(1, 41))  # every step once a kind
    assert sorted(i for k, i in timed if k == "bare") == list(range(1, 41))
    assert bare > 1.5 * real
    calls.clear()  # 5 steps (MULE's epoch): blocks of one step, so each order runs twice
    bench_train.interleaved_rates(stepper("real", 0), stepper("bare", 0), [8] * 5, block=10)
    assert calls[2:] == [
        ("bare", 1),
        ("real", 1),
        ("real", 2),
        ("bare", 2),
        ("bare", 3),
        ("real", 3),
        ("real", 4),
        ("bare", 4),
    ]
    with pytest.raises(ValueError, match="at least 2"):
        bench_train.interleaved_rates(stepper("real", 0), stepper("bare", 0), [8])


def test_bench_train_quick(tmp_path, shared_data):
    """bench_train.py end to end on a tiny demo model and a tiny MULE config (F8K-ML slices): a real run, its steps
    timed beside the bare ones, and the whole epoch after them."""
    out = tmp_path / "train.json"
    run_script("bench_train.py", "--quick", "--data-root", str(shared_data), "--out", str(out))
    r = json.loads(out.read_text())
    for key in (
        "train_throughput_ratio",
        "train_real_captions_per_s",
        "train_bound_captions_per_s",
        "train_real_epoch_captions_per_s",
        "mule_throughput_ratio",
        "mule_real_captions_per_s",
        "mule_bound_captions_per_s",
        "mule_real_epoch_captions_per_s",
    ):
        assert finite_positive(r[key]), key
    assert r["train_steps_timed"] >= 2 and r["mule_steps_timed"] >= 1
    for kind in ("train", "mule"):  # clipped to 1, the raw ratio kept
        raw = r[f"{kind}_real_captions_per_s"] / r[f"{kind}_bound_captions_per_s"]
        assert r[f"{kind}_throughput_ratio_raw"] == pytest.approx(raw)
        assert r[f"{kind}_throughput_ratio"] == pytest.approx(min(1.0, raw))
        assert r[f"{kind}_exceeds_bound"] == (raw > 1.03)


def test_bench_search_quick(tmp_path):
    out = tmp_path / "search.json"
    run_script("bench_search.py", "--quick", "--out", str(out))
    r = json.loads(out.read_text())
    for key in ("exact_scan_bandwidth_fraction", "ann_p50_ms", "ann_recall_at_10", "ann_setting", "data", "per_dim"):
        assert key in r, key
    assert r["quick"] is True
    assert "clustered" in r["data"]
    assert finite_positive(r["exact_scan_bandwidth_fraction"])
    assert finite_positive(r["ann_p50_ms"])
    assert 0.95 <= r["ann_recall_at_10"] <= 1.0  # the headline is only ever a setting that met the target
    assert set(r["per_dim"]) == {"32", "64"}
    # the read bandwidth is a bound: the headline never exceeds it, and the raw ratio only by noise
    assert r["exact_scan_bandwidth_fraction"] <= 1.0
    for p in r["per_dim"].values():
        bw = p["read_bandwidth_gbs"]
        assert finite_positive(bw["best"])
        assert bw["best"] == max(bw["per_kernel"].values())
        assert {"gemv_ones_mkl", "gemv_ones_openblas"} <= set(bw["per_kernel"])  # the scans' own kernels, bare
        assert 0 < p["exact_scan_bandwidth_fraction"] <= 1.0
        assert p["exact_scan_bandwidth_fraction_raw"] <= 1.0 + SCAN_BOUND_TOLERANCE, p["exact_single"]
        best = max(s["scan_gbs_best"] for s in p["exact_single"].values())
        assert p["exact_scan_bandwidth_fraction_raw"] == pytest.approx(best / bw["best"])
        for lib in ("numpy", "torch", "faiss_flat"):
            s = p["exact_single"][lib]
            assert 0 < s["p50_ms"] <= s["p99_ms"] + 1e-9
            assert s["same_top10_as_numpy"] >= 0.5  # the three exact scans agree (up to near-ties)
            for bs in ("8", "32"):
                assert finite_positive(p["exact_batched"][bs][lib]["p50_ms"])
        for index in (p["ivf"]["ivf_flat"], p["ivf"]["ivf_sq8"], p["hnsw"]):
            sweep = index["sweep"]
            assert sweep and all(0.0 <= row["recall_at_10"] <= 1.0 for row in sweep)
            # probing enough lists / a wide enough beam is (nearly) exact: checks the ground truth too
            assert max(row["recall_at_10"] for row in sweep) >= 0.95
            assert finite_positive(index["build_s"]) and finite_positive(index["memory_bytes"])
            assert index["cheapest_at_target"]["recall_at_10"] >= 0.95
        assert p["ivf"]["ivf_sq8"]["memory_bytes"] < p["ivf"]["ivf_flat"]["memory_bytes"]
        assert finite_positive(p["hnsw"]["build_s_extrapolated_full"])


@pytest.mark.slow
def test_bench_extract_quick(tmp_path, shared_data):
    out = tmp_path / "extract.json"
    run_script("bench_extract.py", "--quick", "--images", str(shared_data / "flickr8k" / "images"), "--out", str(out))
    r = json.loads(out.read_text())
    assert finite_positive(r["extract_photos_per_s"])
    assert r["photos"] == 8 and r["quick"] is True
    assert set(r["single_crop_end_to_end"]) == {"workers_0", "workers_2"}
    assert r["extract_photos_per_s"] == max(v["photos_per_s"] for v in r["single_crop_end_to_end"].values())
    ten = r["ten_crop_end_to_end"]
    if ten is None:  # its time budget is measured, so a loaded machine may skip it; the record then says so
        assert any(s.startswith("ten-crop") for s in r["skipped"]), r["skipped"]
    else:
        assert ten["photos"] == 2 and finite_positive(ten["photos_per_s"])
    variants = r["backbone_variants"]["variants"]
    assert variants["default_fp32_channels_last"]["ratio_to_default"] == pytest.approx(1.0)
    # the same network in another memory layout / thread count gives the same features; bf16 nearly so
    assert variants["fp32_contiguous_nchw"]["min_cosine_to_default"] > 0.9999
    assert variants["fp32_channels_last_1_thread"]["min_cosine_to_default"] > 0.9999
    assert variants["bf16_autocast_channels_last"]["min_cosine_to_default"] > 0.95
    for k in ("decode_photos_per_s", "resize_crop_normalise_photos_per_s", "backbone_only_photos_per_s"):
        assert finite_positive(r["stages_alone"][k])


def test_run_all_quick(tmp_path):
    """The runner: children run, their keys are merged, the machine is described, both files written."""
    # --allow-dirty: this checkout may hold uncommitted work (test_run_all_refuses_a_dirty_tree checks the refusal)
    run_script("run_all.py", "--quick", "--allow-dirty", "--only", "eval,search", "--results-dir", str(tmp_path))
    r = json.loads((tmp_path / "latest.json").read_text())
    for key in (
        "train_throughput_ratio",
        "exact_scan_bandwidth_fraction",
        "ann_p50_ms",
        "ann_recall_at_10",
        "extract_photos_per_s",
        "eval_5k_seconds",
    ):
        assert key in r, key
    assert finite_positive(r["eval_5k_seconds"]) and finite_positive(r["ann_p50_ms"])
    assert 0.0 <= r["ann_recall_at_10"] <= 1.0
    assert r["extract_photos_per_s"] is None  # not run (--only): null, never a made-up number
    m = r["machine"]
    for key in (
        "cpu_model",
        "cores",
        "memory_gib",
        "torch",
        "numpy",
        "faiss",
        "torch_blas",
        "numpy_blas",
        "threads",
        "date_utc",
    ):
        assert m.get(key) not in (None, ""), key
    assert set(r["step_seconds"]) == {"eval", "search"}
    md = (tmp_path / "latest.md").read_text()
    assert "ann_p50_ms" in md and "QUICK" in md
    assert not list(tmp_path.glob("*.tmp"))  # written atomically: no temp files left behind


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_run_all_refuses_a_dirty_tree_and_names_the_commit(tmp_path):
    """latest.json must name a commit that reproduces it: a dirty tree is refused, or marked with --allow-dirty."""
    import shutil

    repo = tmp_path / "clone"
    shutil.copytree(BENCH, repo / "benchmarks", ignore=shutil.ignore_patterns("results", "__pycache__"))
    _git(repo, "init", "-q")
    _git(repo, "add", "benchmarks")
    _git(repo, "commit", "-q", "-m", "benchmarks")
    head = _git(repo, "rev-parse", "HEAD")
    run_all = [sys.executable, str(repo / "benchmarks" / "run_all.py"), "--quick", "--only", "eval"]
    (repo / "untracked.txt").write_text("not part of the code\n")  # untracked files do not make a tree dirty
    out = tmp_path / "clean"
    proc = subprocess.run([*run_all, "--results-dir", str(out)], cwd=repo, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads((out / "latest.json").read_text())
    assert r["git_commit"] == head and r["git_dirty"] is False and r["git_dirty_files"] == []
    assert "DIRTY" not in (out / "latest.md").read_text()

    with open(repo / "benchmarks" / "bench_eval.py", "a") as fh:
        fh.write("# an uncommitted edit\n")
    refused = tmp_path / "refused"
    proc = subprocess.run(
        [*run_all, "--results-dir", str(refused)], cwd=repo, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2 and "dirty" in proc.stderr and "benchmarks/bench_eval.py" in proc.stderr
    assert not refused.exists()  # nothing measured, nothing written

    dirty = tmp_path / "dirty"
    proc = subprocess.run(
        [*run_all, "--allow-dirty", "--results-dir", str(dirty)], cwd=repo, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads((dirty / "latest.json").read_text())
    assert r["git_commit"] == head and r["git_dirty"] is True and r["git_dirty_files"] == ["benchmarks/bench_eval.py"]
    assert list(r)[:2] == ["git_commit", "git_dirty"]  # at the top, where a reader sees it first
    assert "DIRTY TREE" in (dirty / "latest.md").read_text()


def test_performance_block_comes_from_the_record():
    """The docs' Performance figures are rendered from latest.json (polyvse_train.report.bench): the commit and
    the model measured are named, a dirty record says so, a probe that was not a bound is withdrawn, a quick
    record is refused. That the committed block equals its rendering is tests/test_report.py's check."""
    import copy

    from polyvse_train.report.bench import bench_markdown

    committed = json.loads((BENCH / "results" / "latest.json").read_text())
    new = copy.deepcopy(committed)
    new.update(git_commit="0123456789abcdef", git_dirty=False, git_dirty_files=[])
    new["provenance"] = {
        **new.get("provenance", {}),
        "model": {"config": "f8k-full-polyvse-best", "fingerprint": "abcdef0123456789"},
    }
    top = new["details"]["search"]["per_dim"]["1024"]
    top.update(
        exact_scan_bandwidth_fraction=0.93, exact_scan_bandwidth_fraction_raw=0.93, exact_scan_exceeds_bound=False
    )
    text = bench_markdown(new)
    assert "commit 0123456789ab" in text and "dirty" not in text
    assert "measured on f8k-full-polyvse-best, fingerprint abcdef012345" in text
    assert "| 0.93 (numpy" in text and f"p50 {new['ann_p50_ms']:.2f} ms" in text

    old = copy.deepcopy(committed)  # as an earlier committed record: a dirty tree, the old probe
    old.update(git_dirty=True, git_dirty_files=["src/x.py"])
    old.pop("provenance", None)
    top = old["details"]["search"]["per_dim"][str(old["details"]["search"]["headline_dim"])]
    top.pop("exact_scan_bandwidth_fraction_raw", None)
    top["exact_scan_bandwidth_fraction"] = 1.21
    block = bench_markdown(old)
    assert "dirty tree (src/x.py)" in block and "withdrawn" in block and "1.21" in block
    assert "a product model the record does not name" in block
    with pytest.raises(ValueError, match="quick"):
        bench_markdown({**committed, "quick": True})


def test_run_all_says_the_gpu_part_was_skipped_without_a_gpu(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the GPU part runs instead of being skipped")
    run_script("run_all.py", "--quick", "--allow-dirty", "--only", "gpu", "--results-dir", str(tmp_path))
    r = json.loads((tmp_path / "latest.json").read_text())
    skipped = "GPU benchmarks skipped: torch sees no CUDA GPU on this machine"
    assert r["gpu_extract_photos_per_s"] is None and r["notes"]["gpu_exact_10m_p50_ms"] == skipped
    assert r["machine"]["gpu"] is None
    assert skipped in (tmp_path / "latest.md").read_text()


@pytest.mark.slow
def test_bench_gpu_code_runs_on_cpu_at_tiny_sizes(tmp_path, shared_data):
    """--device cpu --quick: the GPU benchmark's code paths (not its figures) on this CPU."""
    out = tmp_path / "gpu.json"
    run_script(
        "bench_gpu.py",
        "--device",
        "cpu",
        "--quick",
        "--images",
        str(shared_data / "flickr8k" / "images"),
        "--data-root",
        str(shared_data),
        "--out",
        str(out),
    )
    r = json.loads(out.read_text())
    assert finite_positive(r["extract"]["fp32"]["end_to_end_photos_per_s"]) and r["extract"]["photos"] == 16
    assert finite_positive(r["train"]["fp32"]["train_throughput_ratio"])
    assert r["train"]["fp32"]["train_device"] == "cpu"
    assert r["search"]["ivf"]["cheapest_at_target"]["recall_at_10"] >= 0.95
    assert finite_positive(r["search"]["exact_torch_single"]["p50_ms"])


def test_bench_cli_startup_quick(tmp_path):
    out = tmp_path / "cli.json"
    run_script("bench_cli_startup.py", "--quick", "--out", str(out))
    r = json.loads(out.read_text())
    assert finite_positive(r["cli_search_s"]) and finite_positive(r["cli_search_cpu_s"])
    assert r["quick"] is True and r["index_photos"] == 30
    assert r["same_ranking"] is True  # the numpy text path ranks exactly as the torch model
    assert r["numpy_text_path"]["torch_imported"] is False and r["torch_path"]["torch_imported"] is True
    assert "import torch" in r["torch_path"]["stages_s_median"]
    assert all(x >= 0 for x in r["numpy_text_path"]["stages_s_median"].values())


def test_bench_cli_startup_quick_with_a_frozen_tower_model(tmp_path):
    out = tmp_path / "cli.json"
    run_script("bench_cli_startup.py", "--quick", "--product", "--out", str(out))
    r = json.loads(out.read_text())
    assert finite_positive(r["cli_search_s"]) and r["product"] is True and r["index_photos"] == 30
    assert r["same_ranking"] is True  # the numpy tower path ranks exactly as the torch model
    assert r["numpy_text_path"]["torch_imported"] is False and r["torch_path"]["torch_imported"] is True
    assert "load towers (frozen sentence encoders)" in r["numpy_text_path"]["stages_s_median"]


def test_bench_scale_quick(tmp_path):
    """The scale benchmark's code path on 5k Gaussian vectors (no product index here: the photos data set is skipped,
    saying so): build in a child, query cold in another, keys for run_all."""
    out = tmp_path / "scale.json"
    run_script("bench_scale.py", "--quick", "--dim", "64", "--photos-index", str(tmp_path / "none"), "--out", str(out))
    r = json.loads(out.read_text())
    assert r["scale_data"] == "gaussian" and "no photos data" in r["notes"][0]
    run = r["runs"]["gaussian"]["5k"]
    assert run["n"] == 5000 and run["search"]["kind"] == "ivfpq" and run["search"]["measured_recall"] >= 0.9
    for key in ("rss_gb", "build_peak_rss_gb", "p50_ms", "p99_ms", "build_s", "disk_gb"):
        assert finite_positive(r[f"scale_5k_{key}"]), key
    assert run["build_peak_rss_bytes"] <= run["process_peak_rss_bytes"]
    assert 0.8 <= r["scale_5k_recall_at_10"] <= 1.0
    assert run["cold"]["p50_ms"] <= run["cold"]["p99_ms"] and run["peak_rss_bytes"] >= run["rss_after_open_bytes"]


def test_bench_tail_threads_tiny(tmp_path):
    out = tmp_path / "tail.json"
    run_script("bench_tail_threads.py", "--out", str(out), "--batch", "2", "--steps", "1", "--threads", "1,2")
    r = json.loads(out.read_text())
    assert set(r["seconds_per_step"]) == {"1", "2"} and all(map(finite_positive, r["seconds_per_step"].values()))
    assert r["speedup_vs_1_thread"]["1"] == 1.0 and "seconds_per_step_bf16" not in r
    run_script(
        "bench_tail_threads.py",
        "--out",
        str(out),
        "--batch",
        "2",
        "--steps",
        "1",
        "--threads",
        "1",
        "--precisions",
        "fp32,bf16",
    )
    r = json.loads(out.read_text())
    assert finite_positive(r["seconds_per_step_bf16"]["1"]) and finite_positive(r["speedup_bf16_vs_fp32"]["1"])


def test_bench_photo_aspect_on_a_smoke_checkpoint(tmp_path, shared_data):
    """Three photo forms scored on all val photos and on the full-size ones alone (a tiny model: the figures mean
    nothing, the photo counts do)."""
    from polyvse_train.config import TrainConfig
    from polyvse_train.train import train

    cfg = TrainConfig(
        name="tiny",
        languages=["en", "de"],
        embed_dim=32,
        word_dim=16,
        hidden_dim=32,
        batch_size=32,
        smoke_photos=48,
        smoke_epochs=1,
    )
    train(cfg, tmp_path / "run", shared_data, smoke=True, progress=False)
    out = tmp_path / "aspect.json"
    proc = run_script(
        "bench_photo_aspect.py",
        "--checkpoint",
        str(tmp_path / "run" / "checkpoint"),
        "--split",
        "val",
        "--data-root",
        str(shared_data),
        "--out",
        str(out),
    )
    r = json.loads(out.read_text())
    full = next(v for k, v in r.items() if k.startswith("variants_full_size_photos"))
    assert set(full) == set(r["variants"]) and len(full) == 3
    for every, few in zip(r["variants"].values(), full.values()):
        assert every["photos"]["en"] == 96 and few["photos"]["en"] == 31  # f8k-ml's val; those at 500 px
        assert all(0 <= x <= 100 for x in [*every["mr"].values(), *few["mr"].values()])
    assert "31 full-size photos" in proc.stdout
    assert r["originals_by_longest_side"]["200"] == 562 and r["originals_by_longest_side"]["500"] == 279


def test_make_model_timing_splits_stages_and_refuses_to_resume(tmp_path):
    """bench_make_model.py on a stand-in for `make model`: stages split where make echoes its commands, the
    training log's own timings summed by kind, an empty cache handed to the target; it refuses a runs/model it
    would resume, a cache that is not empty, and a failing target (writing nothing)."""
    fake = tmp_path / "fake-make.sh"
    fake.write_text(
        "\n".join(
            [
                'echo ".venv/bin/pip install --quiet -e .[dev]"',
                'test -z "$(ls -A "$POLYVSE_CACHE")" || { echo "cache not empty"; exit 3; }',
                'sleep 0.3; echo ".venv/bin/polyvse train --config configs/f8k-full/polyvse-best.yaml --out runs/model"',
                'echo "checking feature cache: 6,867 photos, 0 in the cache, 8.0 s"',
                'printf "50%%\\r100%%\\rextracting efficientnet-lite2:tail1 features: 7,941 photos, 300 s\\n"',
                'echo "e5-small [cs]: 22,703 sentences, 1075 s"',
                'echo "use-multilingual [en]: 22,831 sentences, 28 s"',
                'echo "epoch 1/2: loss 6.769, 268 s"',
                'echo "epoch 2/2: loss 3.996, 371 s"',
                "mkdir -p runs/model",
                'echo \'{"wall_time_s": 2000.0, "cpu_time_s": 3000.0, "precision": "bf16"}\' > runs/model/metrics.json',
                'sleep 0.3; echo ".venv/bin/polyvse index build --checkpoint runs/model/checkpoint --out runs/model/index"',
                'sleep 0.2; echo ".venv/bin/python scripts/adapt_model.py --model runs/model --plan configs/adapt/product.yaml"',
                'echo "adapted qu: teacher+subwords, 26,887 lines, 350.5 s"',
                'sleep 0.2; exit "${FAKE_EXIT:-0}"',
                "",
            ]
        )
    )
    out = tmp_path / "make_model.json"
    args = ("--repo", str(tmp_path), "--command", f"bash {fake}", "--out", str(out), "--threads", "2")
    run_script("bench_make_model.py", *args)
    r = json.loads(out.read_text())
    assert r["threads"] == 2 and r["goal_s"] == 5400 and r["within_goal"] and 0.7 < r["wall_s"] < 60
    assert r["precision"] == {"asked": "fp32", "trained": "bf16"}  # what was asked, and what the training says it ran
    st = r["stages"]
    assert set(st) == {"before_training", "training", "index", "adaptation"} and st["training"] >= 0.3
    assert st["index"] >= 0.2 and st["adaptation"] >= 0.2
    assert abs(sum(st.values()) - r["wall_s"]) < 0.5
    lg = r["logged"]
    assert (lg["photo_maps_s"], lg["sentence_vectors_s"], lg["epochs_s"]) == (300.0, 1103.0, 639.0)
    assert lg["steps"][1]["what"] == "extracting efficientnet-lite2:tail1 features"  # the bar's redraws dropped
    assert lg["steps"][-1] == {"what": "adapted qu", "detail": "teacher+subwords, 26,887 lines", "seconds": 350.5}
    assert r["training"]["cpu_time_s"] == 3000.0 and Path(r["cache_root_empty_at_start"]).is_dir()
    again = subprocess.run([sys.executable, str(BENCH / "bench_make_model.py"), *args], capture_output=True, text=True)
    assert again.returncode != 0 and "runs/model exists" in again.stderr and "move it aside" in again.stderr
    (tmp_path / "runs" / "model").rename(tmp_path / "runs" / "model.kept")
    full = Path(r["cache_root_empty_at_start"])
    (full / "x").write_text("cached")
    busy = subprocess.run(
        [sys.executable, str(BENCH / "bench_make_model.py"), *args, "--cache-root", str(full)],
        capture_output=True,
        text=True,
    )
    assert busy.returncode != 0 and "is not empty" in busy.stderr
    out.unlink()
    failed = subprocess.run(
        [sys.executable, str(BENCH / "bench_make_model.py"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "FAKE_EXIT": "2"},
    )
    assert failed.returncode != 0 and "exit code 2" in failed.stderr and not out.exists()


@pytest.mark.slow
def test_bench_gpu_finetune_code_runs_on_cpu_at_tiny_sizes(tmp_path, shared_data):
    """--device cpu --quick: the GPU recipe's step benchmark (pixel path, whole backbone, text tail) on this CPU."""
    out = tmp_path / "gpu_finetune.json"
    run_script(
        "bench_gpu_finetune.py",
        "--device",
        "cpu",
        "--quick",
        "--images",
        str(shared_data / "flickr8k" / "images"),
        "--out",
        str(out),
    )
    r = json.loads(out.read_text())
    assert r["decode"]["photos"] == 8 and finite_positive(r["decode"]["photos_per_s"])
    assert finite_positive(r["fp32"]["step_ms_median"]) and r["fp32"]["losses_finite"]
    assert r["backbone"] == "efficientnet-lite2" and r["text_layers"] == 1 and "bf16" not in r


def test_serve_load_soak_adds_photos_midway_and_samples_memory(assets, tmp_path):  # noqa: F811
    """The soak options: `index add` halfway through a load run, the new photos served without a restart, the
    server's RSS sampled at start, middle and end; no request fails."""
    import shutil

    index = shutil.copytree(assets.index, tmp_path / "index")
    more = tmp_path / "more"
    more.mkdir()
    for photo in assets.photos[N_FIRST : N_FIRST + 4]:
        shutil.copyfile(photo, more / photo.name)
    out = tmp_path / "soak.json"
    run_script(
        "bench_serve_load.py",
        "--index",
        str(index),
        "--duration",
        "10",
        "--clients",
        "2",
        "--add-images",
        str(more),
        "--rss-every",
        "1",
        "--out",
        str(out),
    )
    r = json.loads(out.read_text())
    assert r["errors"] == 0 and r["requests"] > 0
    add = r["index_add"]
    assert add["exit_code"] == 0 and add["photos_after"] == add["photos_before"] + 4
    assert add["new_photos_served_at_s"] is not None and add["new_photos_served_at_s"] >= add["started_s"]
    rss = r["server_rss"]
    assert all(finite_positive(rss[k]) for k in ("start_gib", "middle_gib", "end_gib", "peak_gib"))
    assert len(rss["samples"]) >= 5


def test_bench_adapt_tail_small(tmp_path, shared_data):
    out = tmp_path / "adapt_tail.json"
    run_script("bench_adapt_tail.py", "--data", str(shared_data), "--lines", "40", "--repeats", "1", "--out", str(out))
    r = json.loads(out.read_text())
    assert r["data"]["lines"] == 40 and set(r["best_s"]) == {"file order", "length-sorted"}
    assert all(finite_positive(s) for s in r["best_s"].values()) and finite_positive(r["speedup_sorted"])
    assert r["agreement"]["min_cosine"] > 0.9999  # the order changes the batches, not a line's vector
    assert r["provenance"]["model"]["none"]
