"""The service's guards under real use: a bound on concurrent photo decodes, the token (401 / 200, header or
cookie), closed by default (an address other machines can reach is refused without a token unless
--allow-unauthenticated, and then warned about), and 405 answers whose Allow header names every method of the
path."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

import polyvse.features.images as images
from polyvse_app.cli import main
from polyvse_app.commands.serve import exposure_warning
from polyvse_app.service import ServeSettings, create_app
from test_serve import assets, searcher  # noqa: F401 (fixtures)

TOKEN = "s3cret-token-for-tests"


# -- concurrent decodes ---------------------------------------------------------------------------------------
@pytest.fixture
def decodes_at_once(monkeypatch):
    """The most photo decodes seen running at the same time (each held 0.2 s)."""
    real, lock, running, seen = images.load_image, threading.Lock(), [0], [0]

    def slow_load_image(*args, **kwargs):
        with lock:
            running[0] += 1
            seen[0] = max(seen[0], running[0])
        try:
            time.sleep(0.2)
            return real(*args, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(images, "load_image", slow_load_image)
    return seen


def test_concurrent_decodes_are_bounded(searcher, assets, decodes_at_once):
    app = create_app(searcher, settings=ServeSettings(decode_concurrency=2))
    jpeg = assets.photos[0].read_bytes()

    def upload(_):
        return client.post("/api/search/image", files={"file": ("p.jpg", jpeg, "image/jpeg")}, data={"k": "2"})

    def thumbnail(i):
        return client.get(f"/api/photos/{i}/thumbnail", params={"size": 64})

    with TestClient(app) as client, ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(upload, range(4))) + list(pool.map(thumbnail, range(4)))
        assert [r.status_code for r in answers] == [200] * 8
        assert decodes_at_once[0] == 2  # 4 uploads and 4 thumbnails at once, decoded two at a time
        # the bound is per app: another setting, another bound
        decodes_at_once[0] = 0
    with (
        TestClient(create_app(searcher, settings=ServeSettings(decode_concurrency=4))) as client,
        ThreadPoolExecutor(8) as pool,
    ):
        assert [r.status_code for r in pool.map(upload, range(6))] == [200] * 6
        assert decodes_at_once[0] == 4


# -- token ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def guarded(searcher):
    with TestClient(create_app(searcher, settings=ServeSettings(token=TOKEN))) as client:
        yield client


def test_with_a_token_the_api_wants_it(guarded):
    r = guarded.get("/api/health")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert "Authorization: Bearer <token>" in r.json()["detail"]
    r = guarded.get("/api/photos/1/thumbnail", headers={"Authorization": "Bearer not-the-token"})
    assert r.status_code == 401 and "wrong token" in r.json()["detail"]
    assert (
        guarded.post(
            "/api/search/text", json={"query": "a dog", "lang": "en"}, headers={"Authorization": "Basic " + TOKEN}
        ).status_code
        == 401
    )
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert guarded.get("/api/health", headers=bearer).status_code == 200
    assert guarded.get("/api/photos/1/similar", headers=bearer).status_code == 200
    # the web page's way: the cookie it sets, which its <img> requests send too
    assert guarded.get("/api/photos/1/thumbnail", headers={"Cookie": f"polyvse_token={TOKEN}"}).status_code == 200
    assert guarded.get("/api/photos/1/thumbnail", headers={"Cookie": f"polyvse_token={TOKEN}x"}).status_code == 401
    limits = guarded.get("/api/model", headers=bearer).json()["limits"]
    assert TOKEN not in str(limits)


def test_with_a_token_the_page_and_schema_stay_open_and_declare_it(guarded, searcher):
    assert guarded.get("/").status_code == 200 and guarded.get("/static/app.js").status_code == 200
    schema = guarded.get("/openapi.json").json()
    assert set(schema["components"]["securitySchemes"]) == {"HTTPBearer", "APIKeyCookie"}
    text_search = schema["paths"]["/api/search/text"]["post"]
    assert {"HTTPBearer": []} in text_search["security"] and "401" in text_search["responses"]
    with TestClient(create_app(searcher)) as open_client:  # without a token: nothing asked, nothing declared
        assert open_client.get("/api/health").status_code == 200
        assert "securitySchemes" not in open_client.get("/openapi.json").json().get("components", {})


@pytest.mark.parametrize(
    "token, message",
    [("short", "at least 16"), ("a token with spaces!", "visible ASCII"), ("semi;colons;are;out;", "visible ASCII")],
)
def test_a_bad_token_is_refused_before_serving(searcher, assets, token, message, capsys, monkeypatch):
    with pytest.raises(ValueError, match=message):
        create_app(searcher, settings=ServeSettings(token=token))
    monkeypatch.setenv("POLYVSE_TOKEN", token)  # the default of --token
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("the server started"))
    assert main(["serve", "--index", str(assets.index), "--no-warm-up"]) == 2
    assert "POLYVSE_TOKEN" in capsys.readouterr().err


# -- exposure warning -----------------------------------------------------------------------------------------
def test_an_address_other_machines_reach_gets_a_warning():
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert exposure_warning(host, 8000, None) is None
    loud = exposure_warning("0.0.0.0", 8000, None)
    assert "WITHOUT authentication" in loud and "port 8000" in loud and "POLYVSE_TOKEN" in loud
    assert "WITHOUT" in exposure_warning("my-laptop.local", 8000, None)
    quiet = exposure_warning("0.0.0.0", 8000, TOKEN)
    assert "WITHOUT" not in quiet and "TLS" in quiet


@pytest.fixture
def started(monkeypatch):
    """The keyword arguments of every uvicorn.run `polyvse serve` reached (none: it refused before serving)."""
    import uvicorn

    calls = []
    monkeypatch.delenv("POLYVSE_TOKEN", raising=False)
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    return calls


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "my-laptop.local"])
def test_a_reachable_address_without_a_token_is_refused(assets, started, capsys, monkeypatch, host):
    import polyvse_app.service as service

    # refused before the index and the model load
    monkeypatch.setattr(service, "build_app", lambda *a, **k: pytest.fail("loaded the index"))
    assert main(["serve", "--index", str(assets.index), "--host", host, "--no-warm-up", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert not started
    assert f"--host {host}" in err and "POLYVSE_TOKEN" in err and "--allow-unauthenticated" in err
    assert "every indexed photo" in err


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_without_a_token_still_serves(assets, started, capsys, host):
    assert main(["serve", "--index", str(assets.index), "--host", host, "--no-warm-up", "--device", "cpu"]) == 0
    assert started and started[0][1]["host"] == host
    assert "WARNING" not in capsys.readouterr().err


def test_allow_unauthenticated_serves_with_the_warning(assets, started, capsys):
    assert (
        main(
            [
                "serve",
                "--index",
                str(assets.index),
                "--host",
                "0.0.0.0",
                "--allow-unauthenticated",
                "--no-warm-up",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    assert started and started[0][1]["host"] == "0.0.0.0"
    assert "WITHOUT authentication" in capsys.readouterr().err
    with TestClient(started[0][0]) as client:  # and it is open: nothing asked
        assert client.get("/api/health").status_code == 200


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_reachable_address_with_a_token_serves_page_and_api_behind_it(assets, started, capsys, monkeypatch, how):
    extra = ["--token", TOKEN] if how == "option" else []
    if how == "environment":
        monkeypatch.setenv("POLYVSE_TOKEN", TOKEN)
    assert (
        main(["serve", "--index", str(assets.index), "--host", "0.0.0.0", "--no-warm-up", "--device", "cpu", *extra])
        == 0
    )
    err = capsys.readouterr().err
    assert "WITHOUT" not in err and "TLS" in err
    with TestClient(started[0][0]) as client:
        assert client.get("/").status_code == 200  # the page holds no photos
        assert client.get("/api/photos/1/thumbnail").status_code == 401
        assert client.post("/api/search/text", json={"query": "a dog", "lang": "en"}).status_code == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert client.post("/api/search/text", json={"query": "a dog", "lang": "en"}, headers=bearer).status_code == 200
        assert client.get("/api/photos/1/thumbnail", headers={"Cookie": f"polyvse_token={TOKEN}"}).status_code == 200


# -- methods --------------------------------------------------------------------------------------------------
def test_405_names_every_method_of_the_path(searcher):
    with TestClient(create_app(searcher)) as client:
        for method, url, allowed in [
            ("OPTIONS", "/api/search/text", "GET, POST"),
            ("DELETE", "/api/search/text", "GET, POST"),
            ("PUT", "/api/photos/1", "GET"),
            ("OPTIONS", "/api/search/image", "POST"),
        ]:
            r = client.request(method, url)
            assert r.status_code == 405 and r.headers["allow"] == allowed, (method, url, r.headers)
            assert f"this path takes {allowed}" in r.json()["detail"]
