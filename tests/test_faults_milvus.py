"""A real Milvus server (conftest's milvus_process: this module's own, on its own port and data folder) killed or
hung under polyvse, and started again on the same data:

- during `polyvse index add`: the command fails naming the URI and saying to start the server and rerun, the index
  folder still describes the photos it held, and the same command completes once the server is back;
- under `polyvse serve`: searches get a 503 with a JSON ``detail`` (within a bounded time when the server hangs),
  and the same serving process answers 200 again once the server is back, without a restart.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from polyvse.index import PhotoIndex, Searcher, milvus as milvus_module
from polyvse_app.cli import main
from test_browser import uvicorn_thread
from test_index import N_FIRST, assets, model  # noqa: F401 (fixtures)

pytest.importorskip("pymilvus")

QUERY_TIMEOUT_S = 3.0  # the serve test's bound on one search against a hung server
RECOVERY_S = 120  # the longest the first request after a restart may take: it loads the collection again


def photo_list(tmp_path, photos) -> str:
    listing = tmp_path / f"photos-{len(photos)}.txt"
    listing.write_text("".join(f"{p}\n" for p in photos))
    return str(listing)


def build(assets, uri, out, photos, collection) -> None:  # noqa: F811
    assert (
        main(
            [
                "index",
                "build",
                "--checkpoint",
                str(assets.checkpoint),
                "--list",
                photo_list(out.parent, photos),
                "--out",
                str(out),
                "--backend",
                "milvus",
                "--uri",
                uri,
                "--collection",
                collection,
                "--quiet",
                "--workers",
                "0",
            ]
        )
        == 0
    )


@pytest.fixture()
def server(milvus_process):
    """The module's server, running (a test that failed midway may have left it killed or hung)."""
    if milvus_process.hung:
        milvus_process.kill()
    if milvus_process.pid is None:
        milvus_process.start()
    return milvus_process


def test_index_add_with_the_server_killed_fails_clearly_and_completes_after_restart(
    assets, model, server, tmp_path, capsys, monkeypatch
):  # noqa: F811
    import pymilvus

    out = tmp_path / "index"
    build(assets, server.uri, out, assets.photos[:N_FIRST], "fault_add")
    before = (out / "manifest.json").read_bytes()
    argv = [
        "index",
        "add",
        "--index",
        str(out),
        "--list",
        photo_list(tmp_path, assets.photos[N_FIRST:]),
        "--quiet",
        "--workers",
        "0",
    ]
    # the server dies once the add has inserted the new photos' rows, before it flushes them and switches the
    # manifest: rows past the manifest's count are left in the collection
    real_insert, killed = pymilvus.MilvusClient.insert, []

    def insert_then_crash(self, *args, **kwargs):
        answer = real_insert(self, *args, **kwargs)
        server.kill()
        killed.append(time.monotonic())
        return answer

    monkeypatch.setattr(pymilvus.MilvusClient, "insert", insert_then_crash)
    code, err = main(argv), capsys.readouterr().err
    failed_after = time.monotonic() - killed[0]
    monkeypatch.setattr(pymilvus.MilvusClient, "insert", real_insert)
    assert code == 2 and "Traceback" not in err, err
    assert f"the Milvus server at {server.uri} does not answer" in err and "start it" in err, err
    assert "rerun the same `polyvse index add`" in err and f"still holds its {N_FIRST} photos" in err, err
    assert failed_after < milvus_module.TIMEOUT_S, failed_after
    assert (out / "manifest.json").read_bytes() == before  # the old generation and count, byte for byte

    restart_s = server.start()
    # a restarted server on a loaded machine may still be warming up when it first answers: the error says to wait
    # until it is back and try again, which is what the user does, within RECOVERY_S
    t0, tries = time.monotonic(), 1
    while (code := main(argv)) == 2 and time.monotonic() - t0 < RECOVERY_S:
        err = capsys.readouterr().err
        assert f"the Milvus server at {server.uri} does not answer" in err, err
        tries += 1
        time.sleep(2.0)
    assert code == 0, capsys.readouterr().err
    rerun_s = time.monotonic() - t0
    manifest, old = json.loads((out / "manifest.json").read_text()), json.loads(before)
    assert manifest["count"] == len(assets.photos) and manifest["generation"] == old["generation"] + 1
    index = PhotoIndex.open(out)
    searcher = Searcher(model, index)
    for photo in assets.photos[N_FIRST:]:
        assert searcher.image(photo, k=3)[0].path == str(photo)  # each new photo finds itself first
    # the rows the killed add inserted were deleted before the rerun inserted them again: one row a photo
    rows = index.client.query("fault_add", filter="id >= 0", output_fields=["count(*)"], consistency_level="Strong")
    assert rows[0]["count(*)"] == len(assets.photos)
    print(
        f"failed {failed_after:.2f} s after the kill; restart {restart_s:.1f} s; rerun {rerun_s:.1f} s in {tries} tries"
    )


def test_serve_answers_503_while_the_server_is_down_and_200_once_it_is_back(
    assets,
    server,
    tmp_path,  # noqa: F811
    monkeypatch,
):
    from polyvse_app.service import ServeSettings, build_app

    out = tmp_path / "index"
    build(assets, server.uri, out, assets.photos, "fault_serve")
    monkeypatch.setattr(milvus_module, "QUERY_TIMEOUT_S", QUERY_TIMEOUT_S)
    app, _, _ = build_app(out, settings=ServeSettings(), device="cpu")
    query = {"query": assets.english_query, "lang": "en", "k": 10}
    with uvicorn_thread(app) as url, httpx.Client(base_url=url, timeout=RECOVERY_S) as http:
        first = http.post("/api/search/text", json=query)
        assert first.status_code == 200, first.text
        found = [h["id"] for h in first.json()["results"]]

        def down(why: str) -> float:
            t0 = time.monotonic()
            r = http.post("/api/search/text", json=query, timeout=8 * QUERY_TIMEOUT_S)
            took = time.monotonic() - t0
            assert r.status_code == 503, (why, r.status_code, r.text)
            detail = r.json()["detail"]
            assert f"the Milvus server at {server.uri} does not answer" in detail and "start it" in detail, detail
            assert int(r.headers["Retry-After"]) > 0
            return took

        server.hang()  # the port accepts connections; nothing answers
        hung_s = down("hung")
        assert hung_s < 3 * QUERY_TIMEOUT_S, hung_s
        server.kill()
        killed_s = down("killed")
        assert http.get("/api/health").status_code == 200  # the service itself is up
        restart_s = server.start()
        t0 = time.monotonic()
        # the restarted server loads the collection again at its first search, which on a loaded machine may
        # outrun one query's limit: the client is told to retry (503, Retry-After), as while it was down
        again = http.post("/api/search/text", json=query)
        while again.status_code == 503 and time.monotonic() - t0 < RECOVERY_S:
            assert "does not answer" in again.json()["detail"], again.text
            time.sleep(min(int(again.headers["Retry-After"]), 2))
            again = http.post("/api/search/text", json=query)
        back_s = time.monotonic() - t0
        assert again.status_code == 200, again.text
        assert [h["id"] for h in again.json()["results"]] == found
        similar = http.get("/api/photos/1/similar", params={"k": 5})
        assert similar.status_code == 200 and len(similar.json()["results"]) == 5, similar.text
    print(
        f"503 after {hung_s:.2f} s (hung), {killed_s:.2f} s (killed); restart {restart_s:.1f} s; "
        f"first answer after it {back_s:.1f} s"
    )


def test_open_restores_the_vector_index_an_interrupted_add_dropped(assets, model, server, tmp_path):  # noqa: F811
    """An add that changes the structure (exact -> IVF) drops the vector index before it builds the new one; the
    server killed in between leaves the collection released without one, which Milvus cannot load. That state, made
    directly: the index opens with the manifest's vector index again, and searches."""
    out = tmp_path / "index"
    build(assets, server.uri, out, assets.photos[:N_FIRST], "fault_structure")
    client = PhotoIndex.open(out).client
    client.release_collection("fault_structure")
    client.drop_index("fault_structure", "vector")
    index = PhotoIndex.open(out)
    assert client.list_indexes("fault_structure")
    assert Searcher(model, index).image(assets.photos[0], k=1)[0].path == str(assets.photos[0])
