"""The HTTP service through FastAPI's TestClient: endpoints, OpenAPI, and bad input -> 4xx with a clear message
(never a 5xx, never a file from outside the index)."""

from __future__ import annotations

import io
import json
import struct
import zlib

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from PIL import Image

import polyvse
from polyvse.index import CaptionCollection, PhotoIndex, Searcher, read_caption_file
from polyvse_app.service import ServeSettings, create_app
from test_index import N_FIRST, serving_assets

UPLOAD_CAP = 1_000_000


@pytest.fixture(scope="module")
def assets(shared_data, tmp_path_factory):
    return serving_assets(shared_data, tmp_path_factory)


@pytest.fixture(scope="module")
def searcher(assets):
    return Searcher(polyvse.load(assets.checkpoint), PhotoIndex.open(assets.index))


@pytest.fixture(scope="module")
def captions_file(assets, shared_data, tmp_path_factory):
    """Real captions (en, de, zh) of the indexed photos, as `polyvse data export` writes them."""
    from polyvse.data.registry import load_dataset

    ids = {p.stem.split("_")[0] for p in assets.photos[:N_FIRST]}
    corpus = load_dataset("f8k-ml", shared_data)
    lines = [
        json.dumps({"image": c.photo_id, "lang": c.lang, "caption": c.text}, ensure_ascii=False)
        for c in corpus.captions
        if c.photo_id in ids and c.lang in ("en", "de", "zh", "fr")
    ]
    path = tmp_path_factory.mktemp("caps") / "captions.jsonl"
    path.write_text("\n".join(lines[:400]) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def client(searcher, captions_file):
    captions = CaptionCollection(searcher, read_caption_file(captions_file))
    app = create_app(searcher, captions, ServeSettings(max_upload_bytes=UPLOAD_CAP))
    with TestClient(app) as c:
        yield c


def no_5xx(response):
    assert response.status_code < 500, response.text
    assert "root:x:0:0" not in response.text
    return response


def error(response, status: int, *fragments: str) -> str:
    no_5xx(response)
    assert response.status_code == status, (response.status_code, response.text)
    detail = response.json()["detail"]
    assert isinstance(detail, str) and detail
    for f in fragments:
        assert f in detail, detail
    return detail


def jpeg_bytes(assets, i: int) -> bytes:
    return assets.photos[i].read_bytes()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height; the pixel data is a stub that would never decode."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


# -- service endpoints ------------------------------------------------------------------------------------
def test_health_model_and_openapi(client, assets):
    health = client.get("/api/health").json()
    assert health["status"] == "ok" and health["photos"] == N_FIRST and health["captions"] > 50
    info = client.get("/api/model").json()
    assert info["languages"] == ["en", "de", "zh"] and info["language_names"]["de"] == "German"
    # a word-level model serves only its trained languages: the page's picker lists them
    assert info["served_languages"] == [
        {"code": c, "name": n, "status": "trained"} for c, n in (("en", "English"), ("de", "German"), ("zh", "Chinese"))
    ]
    assert info["similarity"] == "cosine" and info["index"]["photos"] == N_FIRST
    assert info["fingerprint"] == PhotoIndex.open(assets.index).fingerprint
    assert info["captions"]["languages"] == ["de", "en", "zh"]  # French captions dropped: the model lacks fr
    assert info["limits"]["max_upload_bytes"] == UPLOAD_CAP
    schema = client.get("/openapi.json").json()
    for path in (
        "/api/health",
        "/api/model",
        "/api/search/text",
        "/api/search/image",
        "/api/captions/image",
        "/api/photos/{photo_id}",
        "/api/photos/{photo_id}/similar",
        "/api/photos/{photo_id}/thumbnail",
        "/api/photos/{photo_id}/captions",
    ):
        assert path in schema["paths"], path
    assert "TextSearchResponse" in schema["components"]["schemas"]


def test_every_search_endpoint_defaults_to_the_settings_k(client):
    """A request without k gets ServeSettings.default_k photos, which /api/model reports to the web page."""
    schema = client.get("/openapi.json").json()
    defaults = [
        p["schema"]["default"]
        for path in ("/api/search/text", "/api/photos/{photo_id}/similar")
        for p in schema["paths"][path]["get"]["parameters"]
        if p["name"] == "k"
    ]
    defaults.append(schema["components"]["schemas"]["TextSearchRequest"]["properties"]["k"]["default"])
    upload = schema["paths"]["/api/search/image"]["post"]["requestBody"]["content"]["multipart/form-data"]
    upload_ref = upload["schema"]["$ref"].rsplit("/", 1)[-1]
    defaults.append(schema["components"]["schemas"][upload_ref]["properties"]["k"]["default"])
    assert defaults == [ServeSettings().default_k] * 4
    assert client.get("/api/model").json()["limits"]["default_k"] == ServeSettings().default_k


def test_web_page_and_static_files(client):
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert 'id="query"' in page.text and 'id="lang"' in page.text and 'id="drop-zone"' in page.text
    for name in ("app.js", "style.css"):
        assert client.get(f"/static/{name}").status_code == 200


def test_page_addresses_keep_the_search(client):
    """The page's search lives in its query string (app.js); the server serves the page for it and keeps it
    through the /index.html redirect."""
    assert client.get("/", params={"q": "zwei Hunde", "lang": "de", "k": 6}).status_code == 200
    r = client.get("/index.html?q=zwei+Hunde&lang=de&k=6", follow_redirects=False)
    assert r.status_code in (302, 307) and r.headers["location"] == "/?q=zwei+Hunde&lang=de&k=6"
    assert client.get("/index.html", follow_redirects=False).headers["location"] == "/"


def test_text_search(client, assets):
    r = client.post("/api/search/text", json={"query": assets.german_query, "lang": "de", "k": 5})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["lang"] == "de" and body["detected"] is None and len(body["results"]) == 5
    scores = [h["score"] for h in body["results"]]
    assert scores == sorted(scores, reverse=True)
    first = body["results"][0]
    assert first["url"] == f"/api/photos/{first['id']}" and first["name"].endswith(".jpg")
    # GET variant and language detection
    r = client.get("/api/search/text", params={"q": "zwei Hunde spielen im Schnee", "lang": "auto", "k": 3})
    assert r.status_code == 200 and r.json()["detected"]["lang"] == "de" and len(r.json()["results"]) == 3


def test_photo_to_photo_upload_and_by_id(client, assets):
    r = client.post(
        "/api/search/image", files={"file": ("photo.jpg", jpeg_bytes(assets, 5), "image/jpeg")}, data={"k": "4"}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["results"][0]["id"] == 5 and body["results"][0]["score"] == pytest.approx(1.0, abs=1e-4)
    assert body["image"]["name"] == "photo.jpg" and len(body["results"]) == 4
    similar = client.get("/api/photos/5/similar", params={"k": 3}).json()
    assert [h["id"] for h in similar["results"]] == [h["id"] for h in body["results"][1:4]]


def test_photo_to_caption(client, assets):
    r = client.post(
        "/api/captions/image", files={"file": ("p.jpg", jpeg_bytes(assets, 2), "image/jpeg")}, data={"k": "5"}
    )
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert len(results) == 5 and {c["lang"] for c in results} <= {"en", "de", "zh"}
    assert [c["rank"] for c in results] == [1, 2, 3, 4, 5]
    german = client.post(
        "/api/captions/image",
        files={"file": ("p.jpg", jpeg_bytes(assets, 2), "image/jpeg")},
        data={"k": "3", "lang": "de"},
    ).json()["results"]
    assert len(german) == 3 and all(c["lang"] == "de" for c in german)
    by_id = client.get("/api/photos/2/captions", params={"k": 2}).json()["results"]
    assert [c["caption"] for c in by_id] == [c["caption"] for c in results[:2]]
    error(client.get("/api/photos/2/captions", params={"lang": "fr"}), 422, "no fr captions")
    error(client.get("/api/photos/2/captions", params={"lang": "xx"}), 422, "unknown language code 'xx'")


def test_without_a_caption_collection_captions_are_404(searcher, assets):
    with TestClient(create_app(searcher)) as bare:
        error(bare.get("/api/photos/1/captions"), 404, "no caption collection", "--captions FILE")
        assert bare.get("/api/health").json()["captions"] == 0


def test_photos_are_served_by_index_id_only(client, assets):
    index = PhotoIndex.open(assets.index)
    r = client.get("/api/photos/3")
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    assert r.content == open(index.photos[3].path, "rb").read()
    thumb = client.get("/api/photos/3/thumbnail", params={"size": 128})
    assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/jpeg"
    assert max(Image.open(io.BytesIO(thumb.content)).size) <= 128
    error(client.get(f"/api/photos/{N_FIRST}"), 404, f"no photo with id {N_FIRST}")
    error(client.get("/api/photos/-1"), 404)
    error(client.get("/api/photos/abc"), 404, "photo id")
    error(
        client.get("/api/photos/3/thumbnail", params={"size": 100_000}),
        422,
        "size: Input should be 64, 128, 192, 256, 384 or 512",
    )


# -- bad input --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "payload, status, fragment",
    [
        ({"query": "", "lang": "en"}, 422, "the query is empty"),
        ({"query": "   \n\t ", "lang": "en"}, 422, "the query is empty"),
        ({"query": "Hund " * 2000, "lang": "de"}, 422, "characters long; the limit is 1000"),
        ({"query": "x" * 10_240, "lang": "en"}, 422, "the limit is 1000"),
        ({"query": "a dog", "lang": "xx"}, 422, "unknown language code 'xx'"),
        ({"query": "a dog", "lang": "fr"}, 422, "not trained on 'fr'"),
        ({"query": "a dog", "lang": "../../etc/passwd"}, 422, "unknown language code"),
        ({"query": "Hund", "lang": "auto"}, 422, "too short to tell"),
        ({"query": "los perros juegan en la nieve", "lang": "auto"}, 422, "looks like Spanish"),
        ({"query": "qqqzzz xxyyzz", "lang": "en"}, 422, "none of the words"),
        ({"query": "a dog", "lang": "en", "k": 0}, 422, "k: Input should be greater than or equal to 1"),
        ({"query": "a dog", "lang": "en", "k": 10_000}, 422, "k: Input should be less than or equal to 100"),
        ({"query": "a dog", "lang": "en", "k": "many"}, 422, "k:"),
        ({"lang": "en"}, 422, "query is required"),
        ({"query": ["a", "list"], "lang": "en"}, 422, "query:"),
    ],
)
def test_bad_text_queries_are_4xx_with_a_message(client, payload, status, fragment):
    error(client.post("/api/search/text", json=payload), status, fragment)


def test_query_with_an_unpaired_surrogate_is_422_not_500(client):
    body = json.dumps({"query": "\ud800 dog", "lang": "en"})  # valid JSON (ASCII escapes), invalid text
    r = client.post("/api/search/text", content=body, headers={"content-type": "application/json"})
    error(r, 422, "unpaired surrogate")


def test_malformed_json_and_get_without_q(client):
    error(
        client.post("/api/search/text", content=b"{not json", headers={"content-type": "application/json"}), 422, "JSON"
    )
    error(client.get("/api/search/text", params={"lang": "en"}), 422, "q is required")


def test_bad_uploads_are_4xx_with_a_message(client, assets):
    def upload(data, name="photo.jpg", ctype="image/jpeg", url="/api/search/image"):
        return client.post(url, files={"file": (name, data, ctype)})

    error(upload(b"hello, I am not a photo\n"), 422, "not an image", "looks like a text file")
    error(upload(b""), 422, "empty")
    full = jpeg_bytes(assets, 1)
    error(upload(full[: len(full) // 2]), 422, "truncated")
    error(
        upload(png_header_only(10_000, 10_000), "huge.png", "image/png"),
        422,
        "huge.png: image is 10000x10000 = 100.0 megapixels, more than the limit of 40 megapixels",
    )  # 100 MP
    error(
        upload(png_header_only(8_000, 7_500), "big.png", "image/png"),
        422,
        "60.0 megapixels, more than the limit of 40 megapixels",
    )
    error(upload(b"%PDF-1.4 ...", "doc.pdf", "application/pdf"), 415, "application/pdf")
    error(upload(b"\0" * (UPLOAD_CAP + 10)), 413, "larger than the upload limit of 977 KiB")
    error(
        upload(png_header_only(10_000, 10_000), "huge.png", "image/png", url="/api/captions/image"),
        422,
        "decompression bomb",
    )
    error(client.post("/api/search/image", data={"k": "3"}), 422, "file is required")
    error(
        client.post("/api/search/image", files={"file": ("p.jpg", full, "image/jpeg")}, data={"k": "0"}),
        422,
        "k: Input should be greater than or equal to 1",
    )


def test_body_cap_holds_without_content_length(client):
    """A chunked upload (no Content-Length) gets a 413 once it passes the cap."""

    def chunks():
        for _ in range(15):
            yield b"\0" * 100_000

    r = client.post(
        "/api/search/image", content=chunks(), headers={"content-type": "multipart/form-data; boundary=xyz"}
    )
    error(r, 413, "larger than the limit")


def test_body_cap_stops_reading_at_the_cap():
    """At the ASGI level: the middleware stops pulling body chunks once the cap is passed."""
    import asyncio

    from polyvse_app.service.errors import BodySizeLimit

    inner = FastAPI()

    @inner.post("/upload")
    async def read_all(request: Request):
        return {"bytes": len(await request.body())}

    app = BodySizeLimit(inner, limit=250_000)
    pulled, sent = [], []

    async def receive():
        pulled.append(1)
        return {"type": "http.request", "body": b"\0" * 100_000, "more_body": len(pulled) < 1000}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/upload",
        "raw_path": b"/upload",
        "query_string": b"",
        "headers": [(b"transfer-encoding", b"chunked")],
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 1),
        "root_path": "",
    }
    asyncio.run(app(scope, receive, send))
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 413
    assert len(pulled) == 3  # 300 kB read of the 100 MB offered


def test_path_traversal_gets_nothing_from_outside_the_index(client, assets, tmp_path):
    for url in [
        "/api/photos/..%2F..%2F..%2Fetc%2Fpasswd",
        "/api/photos/%2e%2e/%2e%2e/etc/passwd",
        "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/static/..%2f..%2fapp.py",
        "/static/../../../../../etc/passwd",
        "/api/photos/1/../../../etc/passwd",
        "/api/photos/%2Fetc%2Fpasswd",
        "/api/photos/1/thumbnail?size=..%2F..%2Fetc",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/api/photos/1e3",
    ]:
        r = no_5xx(client.get(url))
        assert r.status_code in (404, 422), (url, r.status_code)
        assert b"def create_app" not in r.content
    # a client-chosen file name is only used in messages, never as a path
    evil = "../../../../" + str(tmp_path / "written.jpg")
    r = client.post("/api/search/image", files={"file": (evil, jpeg_bytes(assets, 0), "image/jpeg")})
    assert r.status_code == 200 and r.json()["image"]["name"] == "written.jpg"
    assert not (tmp_path / "written.jpg").exists()
    r = client.post("/api/search/image", files={"file": (evil, b"junk", "image/jpeg")})
    assert error(r, 422).startswith("written.jpg: ")
