"""Photo indexes in Milvus (polyvse.index.milvus) on embedded milvus-lite, started by these tests (a .db file in the
module's temp folder; one in-process server for the module): `index build --backend milvus`, `index add`, `search`
and `serve` on it, answers equal to the FAISS index's, CSLS re-ranking through it, and the errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from fastapi.testclient import TestClient

import polyvse
from polyvse.csls.search import SearchHubness
from polyvse.index import PhotoIndex, Searcher, model_fingerprint
from polyvse.index.milvus import (
    MilvusCollectionError,
    MilvusPhotoIndex,
    MilvusUnreachableError,
    connect,
    nlist_for,
    target_for,
    write_milvus_index,
)
from polyvse.index.store import PhotoEntry
from polyvse.util.arrays import normalize_rows
from polyvse_app.cli import main
from polyvse_app.service import ServeSettings
from polyvse_app.service.app import build_app
from test_index import N_FIRST, serving_assets

pytest.importorskip("milvus_lite")


@pytest.fixture(scope="module")
def assets(shared_data, tmp_path_factory):
    return serving_assets(shared_data, tmp_path_factory)


@pytest.fixture(scope="module")
def lite(tmp_path_factory):
    """The milvus-lite file every index of this module lives in."""
    return tmp_path_factory.mktemp("milvus") / "photos.db"


def photo_list(assets, tmp_path, photos) -> str:
    listing = tmp_path / "photos.txt"
    listing.write_text("".join(f"{p}\n" for p in photos))
    return str(listing)


def build(assets, lite, out, photos, *extra) -> int:
    listing = photo_list(assets, out.parent, photos)
    return main(
        [
            "index",
            "build",
            "--checkpoint",
            str(assets.checkpoint),
            "--list",
            listing,
            "--out",
            str(out),
            "--backend",
            "milvus",
            "--uri",
            str(lite),
            "--quiet",
            "--workers",
            "0",
            *extra,
        ]
    )


@pytest.fixture(scope="module")
def milvus_index(assets, lite, tmp_path_factory):
    """The FAISS fixture's photos (photos[:N_FIRST], named by file name) in a Milvus collection, by the CLI."""
    out = tmp_path_factory.mktemp("mv") / "index"
    assert build(assets, lite, out, assets.photos[:N_FIRST]) == 0
    return out


@pytest.fixture(scope="module")
def model(assets):
    return polyvse.load(assets.checkpoint)


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_build_writes_a_manifest_and_the_collection(assets, lite, milvus_index, model):
    manifest = json.loads((milvus_index / "manifest.json").read_text())
    assert manifest["backend"] == {
        "name": "milvus",
        "uri": str(lite.resolve()),
        "collection": "polyvse_index",
        "db_name": "",
    }
    assert manifest["model"]["fingerprint"] == model_fingerprint(model) == PhotoIndex.open(assets.index).fingerprint
    assert manifest["count"] == N_FIRST and manifest["search"]["kind"] == "exact"
    assert manifest["search"]["milvus"]["index_type"] == "FLAT"
    assert sorted(f.name for f in milvus_index.iterdir() if not f.name.startswith(".")) == ["manifest.json"]
    index = PhotoIndex.open(milvus_index)
    assert isinstance(index, MilvusPhotoIndex) and index.count == N_FIRST
    faiss_index = PhotoIndex.open(assets.index)
    assert [index.photos[i].name for i in range(N_FIRST)] == [p.name for p in faiss_index.photos]
    assert np.allclose(index.vector(7), faiss_index.vector(7), atol=1e-6)
    assert "Milvus collection 'polyvse_index'" in index.describe()


def test_text_and_photo_search_equal_the_faiss_index(assets, milvus_index, model):
    ours = Searcher(model, PhotoIndex.open(milvus_index))
    theirs = Searcher(model, PhotoIndex.open(assets.index))
    for query, lang in [(assets.english_query, "en"), (assets.german_query, "de")]:
        a, b = ours.text(query, lang, k=10).hits, theirs.text(query, lang, k=10).hits
        assert [h.id for h in a] == [h.id for h in b] and [h.name for h in a] == [h.name for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
    a, b = ours.image(assets.photos[4], k=5), theirs.image(assets.photos[4], k=5)
    assert [h.id for h in a] == [h.id for h in b] and a[0].score == pytest.approx(1.0, abs=1e-4)
    assert [h.id for h in ours.similar(3, k=4)] == [h.id for h in theirs.similar(3, k=4)]


def test_csls_reranks_the_candidates_milvus_returns(assets, milvus_index, model):
    """A CSLS checkpoint re-ranks the index's cosine candidates with their vectors: the same ranking through Milvus
    as through FAISS, and one that differs from plain cosine (the banks matter)."""
    rng = np.random.default_rng(0)
    dim = model.embed_dim
    banks = SearchHubness(
        3, rng.standard_normal((40, dim)).astype(np.float32), {"en": rng.standard_normal((50, dim)).astype(np.float32)}
    )
    ours = Searcher(model, PhotoIndex.open(milvus_index))
    theirs = Searcher(model, PhotoIndex.open(assets.index))
    cosine = [h.id for h in ours.text(assets.english_query, "en", k=10).hits]
    ours.hubness = theirs.hubness = banks
    a = ours.text(assets.english_query, "en", k=10).hits
    b = theirs.text(assets.english_query, "en", k=10).hits
    assert [h.id for h in a] == [h.id for h in b] != cosine
    assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


def test_lite_clients_ping_within_the_servers_policy_and_builds_wait(monkeypatch, tmp_path):
    """milvus-lite's gRPC server hangs up on pings under 5 minutes apart during a request that sends no data (a long
    index build; pymilvus's retry then fails with "index already exists"): lite clients ask for rarer pings, a
    server's keep pymilvus's; the index build and load are given far longer than one request's TIMEOUT_S."""
    import pymilvus

    from polyvse.index import milvus

    made = []
    monkeypatch.setattr(pymilvus, "MilvusClient", lambda **kw: made.append(kw) or object())
    monkeypatch.setattr(milvus, "_CLIENTS", {})  # these stand-in clients are not kept for other tests
    connect(target_for("milvus", str(tmp_path / "ping.db"), "c", tmp_path / "a"), create=True)
    connect(target_for("milvus", "http://ping-check.invalid:19530", "c", tmp_path / "b"))
    assert made[0]["grpc_options"]["grpc.keepalive_time_ms"] > 300_000 and "grpc_options" not in made[1]
    assert milvus.BUILD_TIMEOUT_S >= 60 * milvus.TIMEOUT_S


def test_ivf_recall_is_tuned_like_faiss(lite, tmp_path):
    """Past the exact threshold Milvus gets IVF_FLAT with FAISS's nlist and nprobe tuned to the target; held-out
    queries find the exact top 10 within the recall tolerance of the FAISS IVF index over the same vectors."""
    from polyvse.index.build import write_new_index

    rng = np.random.default_rng(1)
    centres = rng.standard_normal((40, 32))
    x = normalize_rows(centres[rng.integers(0, 40, 4000)] + 0.6 * rng.standard_normal((4000, 32)))
    queries = normalize_rows(centres[rng.integers(0, 40, 100)] + 0.6 * rng.standard_normal((100, 32)))
    photos = [PhotoEntry(i, f"v{i}", f"/v/{i}.jpg") for i in range(len(x))]
    info = {"fingerprint": "sha256:synthetic", "similarity": "cosine"}
    write_new_index(tmp_path / "faiss", info, "cosine", photos, x, "auto", 1000, 0.95)
    target = target_for("milvus", str(lite), "ivf_check", tmp_path / "milvus")
    manifest = write_milvus_index(tmp_path / "milvus", target, info, photos, x, "auto", 1000, 0.95)
    faiss_index, milvus = PhotoIndex.open(tmp_path / "faiss"), PhotoIndex.open(tmp_path / "milvus")
    s, f = manifest["search"], faiss_index.manifest["search"]
    assert s["kind"] == "ivf" and s["milvus"]["index_type"] == "IVF_FLAT"
    assert s["ivf"]["nlist"] == f["ivf"]["nlist"] and s["measured_recall"] >= 0.95
    # the collection's index has those lists (milvus-lite reads only the nested params), and nprobe is obeyed
    assert connect(target).describe_index("ivf_check", "vector")["params"]["nlist"] == s["ivf"]["nlist"]
    one = milvus.raw_search(queries, 10, nprobe=1)[1]
    truth = np.argsort(-(queries @ x.T), axis=1)[:, :10]

    def recall(index):
        ids = index.search(queries, 10)[1]
        return np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids.tolist(), truth.tolist())])

    assert recall(milvus) >= 0.9 and abs(recall(milvus) - recall(faiss_index)) <= 0.05
    # Milvus clusters segment by segment: a collection past a segment gets a segment's lists, not the collection's
    assert nlist_for(target, 4000, 32) == f["ivf"]["nlist"]
    assert nlist_for(target, 10_000_000, 1024) == nlist_for(target, 100_000, 1024) == 1264  # lite: 100k-row segments
    server = target_for("milvus", "http://milvus.example.org:19530", "c", tmp_path / "s")
    assert nlist_for(server, 10_000_000, 1024) == 2048  # 1 GiB segments of 1024-d float32: 262,144 rows
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(one.tolist(), truth.tolist())]) < recall(milvus) - 0.1


def test_search_cli_answers_from_milvus_as_from_faiss(assets, milvus_index, capsys):
    for argv in (
        [assets.german_query, "--lang", "de", "-k", "5"],
        ["--image", str(assets.photos[4]), "-k", "3"],
        ["--similar-to", "4", "-k", "3"],
    ):
        code, out, err = run(capsys, "search", "--index", str(milvus_index), *argv, "--json")
        assert code == 0, err
        code, expected, _ = run(capsys, "search", "--index", str(assets.index), *argv, "--json")
        assert [(h["id"], h["name"]) for h in json.loads(out)["results"]] == [
            (h["id"], h["name"]) for h in json.loads(expected)["results"]
        ]
    code, out, _ = run(capsys, "index", "info", "--index", str(milvus_index))
    assert code == 0 and f"photos:     {N_FIRST}" in out and "Milvus collection" in out


def test_serve_answers_from_a_milvus_index(assets, milvus_index):
    app, searcher, _ = build_app(milvus_index, settings=ServeSettings())
    assert isinstance(searcher.index, MilvusPhotoIndex)
    with TestClient(app) as client:
        assert client.get("/api/health").json()["photos"] == N_FIRST
        assert client.get("/").status_code == 200
        r = client.get("/api/search/text", params={"q": assets.german_query, "lang": "de", "k": 5})
        assert r.status_code == 200, r.text
        faiss_hits = Searcher(searcher.model, PhotoIndex.open(assets.index)).text(assets.german_query, "de", k=5).hits
        assert [h["id"] for h in r.json()["results"]] == [h.id for h in faiss_hits]
        first = r.json()["results"][0]
        photo = client.get(first["url"])
        assert photo.status_code == 200 and photo.content == (assets.photos_dir / first["name"]).read_bytes()
        assert [h["id"] for h in client.get("/api/photos/5/similar", params={"k": 3}).json()["results"]] == [
            h.id for h in Searcher(searcher.model, PhotoIndex.open(assets.index)).similar(5, k=3)
        ]

        # the database failing under the service: 503 naming the collection, not a 500 or the client's 422
        def down(*args, **kwargs):
            raise ConnectionError("server went away")

        searcher.index.client = type("Down", (), {"search": staticmethod(down)})()
        r = client.get("/api/search/text", params={"q": assets.german_query, "lang": "de", "k": 5})
        assert r.status_code == 503 and "Milvus failed to search (collection 'polyvse_index'" in r.json()["detail"]
        assert "server went away" in r.json()["detail"]


def test_index_add_appends_only_new_photos(assets, lite, tmp_path, capsys):
    out = tmp_path / "grow"
    assert build(assets, lite, out, assets.photos[:N_FIRST], "--collection", "grow") == 0
    listing = photo_list(assets, tmp_path, assets.photos)  # old and new photos
    code, text, err = run(capsys, "index", "add", "--index", str(out), "--list", listing, "--quiet", "--workers", "0")
    added = len(assets.photos) - N_FIRST
    assert code == 0, err
    assert f"{added} photos added, {N_FIRST} already in the index" in text
    index = PhotoIndex.open(out)
    assert index.count == len(assets.photos) and index.manifest["generation"] == 2
    assert index.photos[N_FIRST].name == assets.photos[N_FIRST].name
    model = polyvse.load(assets.checkpoint)
    hits = Searcher(model, index).image(assets.photos[-1], k=1)
    assert hits[0].id == len(assets.photos) - 1 and hits[0].score == pytest.approx(1.0, abs=1e-4)


def test_errors_name_the_server_the_collection_and_the_model(assets, lite, milvus_index, tmp_path, capsys):
    # a model other than the one that built it
    code, _, err = run(
        capsys,
        "search",
        "--index",
        str(milvus_index),
        assets.english_query,
        "--lang",
        "en",
        "--checkpoint",
        str(assets.other_checkpoint),
    )
    assert code == 2 and "this index was built with model" in err and "Traceback" not in err
    # the collection is taken: no silent overwrite
    again = tmp_path / "again"
    code, _, err = run(
        capsys,
        "index",
        "build",
        "--checkpoint",
        str(assets.checkpoint),
        "--images",
        str(assets.photos_dir),
        "--out",
        str(again),
        "--backend",
        "milvus",
        "--uri",
        str(lite),
        "--collection",
        "polyvse_index",
        "--quiet",
        "--workers",
        "0",
    )
    assert code == 2 and "'polyvse_index'" in err and "already exists" in err and "--force" in err
    # an unreachable server
    moved = tmp_path / "moved"
    shutil.copytree(milvus_index, moved)
    manifest = json.loads((moved / "manifest.json").read_text())
    manifest["backend"]["uri"] = "http://127.0.0.1:9"
    (moved / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(MilvusUnreachableError, match=r"cannot reach Milvus at http://127\.0\.0\.1:9"):
        PhotoIndex.open(moved)
    code, _, err = run(capsys, "search", "--index", str(moved), "a dog", "--lang", "en")
    assert code == 2 and "cannot reach Milvus at http://127.0.0.1:9" in err and "Traceback" not in err
    # a missing collection
    gone = tmp_path / "gone"
    assert build(assets, lite, gone, assets.photos[:8], "--collection", "gone") == 0
    connect(target_for("milvus", str(lite), "gone", gone)).drop_collection("gone")
    with pytest.raises(MilvusCollectionError, match="'gone' at .*photos.db, which is not there.*--force"):
        PhotoIndex.open(gone)
    code, _, err = run(capsys, "search", "--index", str(gone), "a dog", "--lang", "en")
    assert code == 2 and "which is not there" in err
    # a request Milvus is not given here
    code, _, err = run(
        capsys,
        "index",
        "build",
        "--checkpoint",
        str(assets.checkpoint),
        "--images",
        str(assets.photos_dir),
        "--out",
        str(tmp_path / "x"),
        "--backend",
        "milvus",
        "--quiet",
    )
    assert code == 2 and "--backend milvus needs --uri" in err


def test_make_bench_writes_the_side_by_side_keys(tmp_path):
    """run_all.py's milvus step (benchmarks/bench_milvus.py, --quick: 5k vectors) merges both backends' figures into
    latest.json, with the size in the keys."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [
            sys.executable,
            str(repo / "benchmarks" / "run_all.py"),
            "--quick",
            "--allow-dirty",
            "--only",
            "milvus",
            "--results-dir",
            str(tmp_path),
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads((tmp_path / "latest.json").read_text())
    for backend in ("faiss", "milvus"):
        assert r[f"{backend}_5k_build_s"] > 0 and r[f"{backend}_5k_p50_ms"] > 0
        assert r[f"{backend}_5k_recall_at_10"] == pytest.approx(1.0)  # 5k: below the exact threshold, both exact
    assert r["details"]["milvus"]["runs"]["milvus"]["structure"].endswith("photos.db")
    assert r["details"]["milvus"]["provenance"]["model"] == {"none": "synthetic vectors (random Gaussian directions)"}
