"""A running service picks up a new version of its index (service/live.py): photos added with `polyvse index add`
are found by the next search, without a restart; a request that started before keeps the version it started on;
a rebuild by another model is refused with a log line while the version in force goes on serving."""

from __future__ import annotations

import logging
import shutil

import pytest
from fastapi.testclient import TestClient

import polyvse
from polyvse.index import PhotoIndex, Searcher, add_to_index, build_index
from polyvse_app.service import ServeSettings, create_app
from test_index import N_FIRST, assets, model  # noqa: F401 (fixtures)


@pytest.fixture
def served(assets, model, tmp_path):
    """(client, app, index folder) over a copy of the base index, checked for new versions on every request."""
    root = shutil.copytree(assets.index, tmp_path / "index")
    app = create_app(Searcher(model, PhotoIndex.open(root)), settings=ServeSettings(reload_interval_s=0))
    with TestClient(app) as client:
        yield client, app, root


def upload_search(client, photo_path, k=3) -> list[dict]:
    r = client.post(
        "/api/search/image", files={"file": ("q.jpg", photo_path.read_bytes(), "image/jpeg")}, data={"k": str(k)}
    )
    assert r.status_code == 200, r.text
    return r.json()["results"]


def test_photos_added_while_serving_are_found_without_a_restart(served, assets, model):
    client, app, root = served
    new_photos = assets.photos[N_FIRST : N_FIRST + 3]
    before = client.get("/api/health").json()
    assert before["photos"] == N_FIRST
    assert all(h["name"] != new_photos[0].name for h in upload_search(client, new_photos[0]))
    in_flight = app.state.service.pinned()  # what a request that started now holds to its end

    add_to_index(
        model, root, new_photos, cache_dir=assets.cache_dir, progress=False, names=[p.name for p in new_photos]
    )

    after = client.get("/api/health").json()
    assert after["photos"] == N_FIRST + 3 and after["generation"] == before["generation"] + 1
    top = upload_search(client, new_photos[0])[0]  # the added photo is its own best match
    assert (top["id"], top["name"]) == (N_FIRST, new_photos[0].name) and top["score"] == pytest.approx(1, abs=1e-4)
    assert client.get(f"/api/photos/{N_FIRST + 2}").content == new_photos[2].read_bytes()
    assert client.get(f"/api/photos/{N_FIRST + 1}/thumbnail", params={"size": 64}).status_code == 200
    # the request begun before the switch finishes on the old version, whose files are gone from the folder
    assert in_flight.index.count == N_FIRST and not (root / in_flight.index.manifest["files"]["vectors"]).exists()
    assert len(in_flight.searcher.similar(0, 5)) == 5


def test_a_rebuild_by_another_model_is_logged_and_the_old_version_served(served, assets, caplog):
    client, app, root = served
    other = polyvse.load(assets.other_checkpoint)
    with caplog.at_level(logging.WARNING, logger="polyvse.serve"):
        build_index(other, assets.photos[:5], root, cache_dir=assets.cache_dir, progress=False, overwrite=True)
        health = client.get("/api/health").json()
    assert health["photos"] == N_FIRST  # still the version the running model built
    assert "built by another model" in caplog.text and "restart `polyvse serve`" in caplog.text
    assert len(upload_search(client, assets.photos[1])) == 3
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="polyvse.serve"):
        client.get("/api/health")
    assert "another model" not in caplog.text  # said once per version, not on every request


def test_the_interval_bounds_how_often_the_folder_is_looked_at(assets, model, tmp_path):
    root = shutil.copytree(assets.index, tmp_path / "index")
    app = create_app(Searcher(model, PhotoIndex.open(root)), settings=ServeSettings(reload_interval_s=3600))
    with TestClient(app) as client:
        add_to_index(model, root, assets.photos[N_FIRST : N_FIRST + 1], cache_dir=assets.cache_dir, progress=False)
        assert client.get("/api/health").json()["photos"] == N_FIRST  # not looked at again before the hour
        app.state.service.live._next_check = 0  # the hour has passed
        assert client.get("/api/health").json()["photos"] == N_FIRST + 1
