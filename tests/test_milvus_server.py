"""`polyvse index build / add / search --backend milvus` against a real Milvus standalone server (conftest's
milvus_server, over HTTP on loopback) answer as the FAISS index of the same photos: the same photos found, within
the recall the search structure is tuned to."""

from __future__ import annotations

import json

import numpy as np

from polyvse.index import PhotoIndex, Searcher, add_to_index, build_index
from test_index import N_FIRST, assets, model  # noqa: F401 (fixtures)
from test_milvus_index import build

RECALL_TOLERANCE = 0.95  # the recall target both structures are tuned to


def overlap(a, b) -> float:
    return float(np.mean([len(set(x) & set(y)) / max(1, len(x)) for x, y in zip(a, b)]))


def test_build_add_search_on_a_server_match_faiss(assets, model, milvus_server, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "milvus"
    assert build(assets, milvus_server, out, assets.photos[:N_FIRST], "--collection", "server_check") == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["backend"]["name"] == "milvus" and manifest["backend"]["uri"] == milvus_server
    faiss_root = tmp_path / "faiss"
    build_index(
        model,
        assets.photos[:N_FIRST],
        faiss_root,
        cache_dir=assets.cache_dir,
        progress=False,
        checkpoint_path=assets.checkpoint,
    )
    # `index add` appends to the collection; the FAISS index gets the same photos
    from polyvse_app.cli import main

    listing = tmp_path / "more.txt"
    listing.write_text("".join(f"{p}\n" for p in assets.photos[N_FIRST:]))
    assert main(["index", "add", "--index", str(out), "--list", str(listing), "--quiet", "--workers", "0"]) == 0
    add_to_index(model, faiss_root, assets.photos[N_FIRST:], cache_dir=assets.cache_dir, progress=False)
    on_server, local = PhotoIndex.open(out), PhotoIndex.open(faiss_root)
    assert on_server.count == local.count == len(assets.photos)
    server_search, local_search = Searcher(model, on_server), Searcher(model, local)
    paths = lambda hits: [h.path for h in hits]  # noqa: E731 (ids are per index; the photo files are the same)
    texts = [assets.english_query, "a dog", "a man on a street", "children play in the water"]
    a = [paths(server_search.text(t, "en", k=10).hits) for t in texts]
    b = [paths(local_search.text(t, "en", k=10).hits) for t in texts]
    assert overlap(a, b) >= RECALL_TOLERANCE, (a, b)
    photos = assets.photos[::7]
    a = [paths(server_search.image(p, k=10)) for p in photos]
    b = [paths(local_search.image(p, k=10)) for p in photos]
    assert overlap(a, b) >= RECALL_TOLERANCE
    assert all(x[0] == str(p) for x, p in zip(a, photos))  # each photo finds itself first
    # and `polyvse search` over each, as a user runs it
    printed = []
    for root in (out, faiss_root):
        capsys.readouterr()
        assert main(["search", "--index", str(root), "--json", "--lang", "en", assets.english_query]) == 0
        printed.append([h["path"] for h in json.loads(capsys.readouterr().out)["results"]])
    assert overlap([printed[0]], [printed[1]]) >= RECALL_TOLERANCE, printed
