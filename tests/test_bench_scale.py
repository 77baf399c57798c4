"""benchmarks/bench_scale.py searches as a CSLS model's text search does: its queries go through
polyvse.csls.penalties.csls_search with the checkpoint's banks (read without the model's weights), and its ground
truth is the CSLS re-ranking of the exact cosine top fetch(k)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from polyvse.csls.banks import HubnessBanks
from polyvse.csls.penalties import csls_search
from polyvse.csls.search import SearchHubness
from polyvse.index.build import write_new_index
from polyvse.index.store import PhotoEntry, PhotoIndex
from polyvse.model.checkpoint import Checkpoint, save_checkpoint
from polyvse.modules import JointEmbeddingModel, ModelConfig
from polyvse.modules.text_input import CaptionEncoder

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import bench_scale  # noqa: E402

DIM = 32


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def save_tiny(path: Path, banks: HubnessBanks | None) -> Path:
    torch.manual_seed(0)
    enc = CaptionEncoder.build({"en": ["a dog runs", "two cats sleep"], "de": ["ein Hund rennt"]})
    model = JointEmbeddingModel(
        ModelConfig(vocab_size=len(enc.vocab), image_dim=6, embed_dim=DIM, word_dim=3, hidden_dim=5)
    )
    return save_checkpoint(
        Checkpoint(
            model=model.eval(),
            captions=enc,
            backbone="efficientnet-lite0",
            feature_key="k",
            ten_crop=False,
            languages=["en", "de"],
            hubness=banks,
        ),
        path,
    )


@pytest.fixture(scope="module")
def csls_checkpoint(tmp_path_factory) -> Path:
    """A tiny checkpoint that ranks by CSLS (k 3) against random banks."""
    rng = np.random.default_rng(1)
    banks = HubnessBanks(
        rng.standard_normal((40, DIM)),
        {"en": rng.standard_normal((60, DIM)), "de": rng.standard_normal((50, DIM))},
        k=3,
    )
    return save_tiny(tmp_path_factory.mktemp("csls") / "checkpoint", banks)


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> PhotoIndex:
    root = tmp_path_factory.mktemp("index") / "index"
    vectors = unit(np.random.default_rng(2).standard_normal((3000, DIM)))
    write_new_index(
        root,
        {"fingerprint": "sha256:test", "similarity": "cosine", "checkpoint": None},
        "cosine",
        [PhotoEntry(i, f"{i}.jpg", f"/p/{i}.jpg") for i in range(len(vectors))],
        vectors,
        "exact",
        20_000,
        0.95,
    )
    return PhotoIndex.open(root)


def test_the_banks_are_read_as_the_model_reads_them(csls_checkpoint, tmp_path):
    import polyvse

    ours = bench_scale.checkpoint_hubness(csls_checkpoint)
    theirs = SearchHubness.of_model(polyvse.load(csls_checkpoint, device="cpu"))
    assert ours.k == theirs.k == 3 and sorted(ours.captions) == sorted(theirs.captions) == ["de", "en"]
    np.testing.assert_allclose(ours.photos, theirs.photos, atol=1e-6)
    for lang in ("en", "de"):
        np.testing.assert_allclose(ours.captions[lang], theirs.captions[lang], atol=1e-6)
    assert bench_scale.checkpoint_hubness(save_tiny(tmp_path / "plain", None)) is None  # ranks by cosine


def test_the_query_path_re_ranks_by_csls(csls_checkpoint, index):
    """search_pass answers as csls_search (what `polyvse search` and serve call), not as the cosine ANN alone; on
    an exact index its answers are the bench's ground truth exactly."""
    hubness = bench_scale.checkpoint_hubness(csls_checkpoint)
    queries = unit(np.random.default_rng(3).standard_normal((20, DIM)))
    ids, seconds = bench_scale.search_pass(index, queries, hubness, "en")
    assert ids.shape == (20, bench_scale.K) and seconds.shape == (20,) and (seconds > 0).all()
    for q, row in zip(queries, ids):
        assert row.tolist() == csls_search(index, hubness, q[None, :], bench_scale.K, "en")[1][0].tolist()
    cosine, _ = bench_scale.search_pass(index, queries, None, "en")
    assert cosine.tolist() == index.search(queries, bench_scale.K)[1].tolist()
    assert sum(a.tolist() != b.tolist() for a, b in zip(ids, cosine)) >= 15  # the banks reorder most answers
    candidates = index.search(queries, hubness.fetch(bench_scale.K))[1]  # exact: the chunked scan's top fetch(k)
    truth = bench_scale.csls_truth(index, hubness, queries, candidates, "en")
    assert bench_scale.recall(ids, truth) == 1.0 and bench_scale.recall(cosine, truth) < 0.9


def test_quick_run_searches_the_photos_data_by_csls(csls_checkpoint, index, tmp_path):
    """--quick on a photos index whose manifest names a CSLS checkpoint: caption-like queries, re-ranked by CSLS,
    recall against the CSLS truth, the ANN alone beside it."""
    photos = tmp_path / "photos-index"
    vectors = unit(np.random.default_rng(4).standard_normal((400, DIM)))
    write_new_index(
        photos,
        {"fingerprint": "sha256:test", "similarity": "cosine", "checkpoint": str(csls_checkpoint)},
        "cosine",
        [PhotoEntry(i, f"{i}.jpg", f"/p/{i}.jpg") for i in range(len(vectors))],
        vectors,
        "exact",
        20_000,
        0.95,
    )
    out = tmp_path / "scale.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "bench_scale.py"),
            "--quick",
            "--data",
            "photos",
            "--photos-index",
            str(photos),
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["scoring"] == {
        "csls": True,
        "checkpoint": str(csls_checkpoint),
        "lang": "en",
        "k": 3,
        "fetch": 110,
        "penalties": "stored",
        "penalty_langs": None,
    }
    assert any(note.startswith("csls: ") for note in r["notes"])
    run = r["runs"]["photos"]["5k"]
    assert run["csls"] is True and r["scale_data"] == "photos"
    assert run["penalties"] is True and 0 < run["penalties_s"] <= run["build_s"]  # stored, as `index build` does
    assert 0.8 <= r["scale_5k_recall_at_10"] <= 1.0 and 0.8 <= run["cosine"]["recall_at_10"] <= 1.0
    assert r["scale_5k_p50_ms"] > 0 and run["cosine"]["p50_ms"] > 0


def test_the_bench_index_stores_the_penalties_its_queries_read_and_no_penalties_answers_alike(
    csls_checkpoint, tmp_path, monkeypatch
):
    """build_child stores each vector's r_C as `polyvse index build` does (PenaltyWriter, the checkpoint's banks);
    the query child's copy of the banks (pickled into it) matches their digest, so csls_search reads the stored rows
    and computes no r_C; --no-penalties builds without them, and its per-query r_C gives the same answers."""
    import pickle

    from polyvse.csls.penalties import stored_penalties

    hubness = bench_scale.checkpoint_hubness(csls_checkpoint)
    queries = unit(np.random.default_rng(5).standard_normal((12, DIM)))
    found = {}
    for stored, keys in ((True, None), ("en", ["en"]), (False, None)):  # "en": --penalty-langs en, one column
        root = tmp_path / ("stored" if stored is True else "en" if stored else "per-query")
        built = bench_scale.build_child(
            str(root),
            2000,
            DIM,
            None,
            0.5,
            queries,
            hubness.fetch(bench_scale.K),
            2**30,
            hubness if stored else None,
            keys,
        )
        index = PhotoIndex.open(root)
        assert built["penalties"] is bool(stored) and index.manifest["search"]["kind"] == "ivfpq"
        query_banks = pickle.loads(pickle.dumps(hubness))  # what in_child hands the query process
        if stored:
            columns = 3 if stored is True else 1
            assert 0 < built["penalties_s"] <= built["build_s"] and index.penalties.shape == (2000, columns)
            assert built["penalty_keys"] == (hubness.penalty_keys if keys is None else keys)
            assert stored_penalties(index, query_banks) is not None
            with monkeypatch.context() as m:  # the stored rows are read: no r_C computed per query
                m.setattr(SearchHubness, "photo_penalty", lambda *a, **k: pytest.fail("r_C computed per query"))
                found[stored] = bench_scale.search_pass(index, queries, query_banks, "en")[0]
        else:
            assert built["penalties_s"] is None and index.penalties is None and not list(root.glob("penalties.*"))
            found[stored] = bench_scale.search_pass(index, queries, query_banks, "en")[0]
    assert found["en"].tolist() == found[True].tolist()
    assert found[True].tolist() == found[False].tolist()


def test_the_disk_check_refuses_before_building_when_the_largest_index_does_not_fit(monkeypatch, tmp_path):
    cfg = bench_scale.parse(["--out", str(tmp_path / "out.json"), "--work-dir", str(tmp_path)])
    photos = np.zeros((4, 1024), np.float32)
    runs = bench_scale.planned_runs(cfg, ["photos", "gaussian"], photos)
    assert runs == [
        ("photos", "100k", 1024),
        ("photos", "1m", 1024),
        ("photos", "10m", 1024),
        ("gaussian", "100k", 1024),
        ("gaussian", "1m", 1024),
    ]
    need = bench_scale.disk_needed(10_000_000, 1024)
    assert need > 10_000_000 * 1024 * 4  # the float vectors alone are a floor

    class Usage:
        def __init__(self, free):
            self.free = free

    monkeypatch.setattr(bench_scale.shutil, "disk_usage", lambda path: Usage(need - 1))
    with pytest.raises(SystemExit) as refused:
        bench_scale.check_disk(cfg, runs)
    message = str(refused.value)
    assert str(tmp_path) in message and "photos 10m" in message and "--work-dir" in message
    # without the 10M run the same room is enough
    small = [r for r in runs if r[1] != "10m"]
    monkeypatch.setattr(bench_scale.shutil, "disk_usage", lambda path: Usage(need - 1))
    assert "photos 1m" in bench_scale.check_disk(cfg, small)


def test_run_all_refuses_to_start_when_the_scale_step_would_not_fit(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    import run_all

    fails = tmp_path / "fails.py"
    fails.write_text(
        "import sys\nprint('bench_scale: needs 44.9 GiB in /tmp; 3.0 GiB free', file=sys.stderr)\nsys.exit(1)\n"
    )
    assert run_all.check_scale_disk([str(fails)]) == "bench_scale: needs 44.9 GiB in /tmp; 3.0 GiB free"
    fits = tmp_path / "fits.py"
    fits.write_text("print('the largest index fits')\n")
    assert run_all.check_scale_disk([str(fits)]) is None
