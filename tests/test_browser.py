"""The web page end to end in real headless Chromium (Debian's `chromium`, driven by Playwright).

uvicorn serves the F8K-ML index of the tiny test model on a free loopback port; the browser types a
German query, picks German, and must show thumbnails with scores; a photo dropped on the page (and one
chosen with the file input) must show photos like it; the address must keep the search (shared, reloaded,
Back and Forward). Needs /usr/bin/chromium: `make test` installs it
(scripts/install-browser.sh). Never downloads a browser (no `playwright install`).
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from polyvse_tooling.harness import free_port
from test_index import serving_assets

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def chromium() -> Path:
    if not CHROMIUM.is_file() and not shutil.which("chromium"):
        pytest.fail(
            "headless Chromium is not installed (/usr/bin/chromium); run scripts/install-browser.sh "
            "(apt-get install chromium; `make test` runs it), then run the browser test again"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.fail(
            "the browser test needs Playwright: .venv/bin/pip install playwright==1.65.2 "
            "(no `playwright install`: it drives Debian's /usr/bin/chromium)"
        )
    return CHROMIUM if CHROMIUM.is_file() else Path(shutil.which("chromium"))


@contextlib.contextmanager
def uvicorn_thread(app):
    """uvicorn serving ``app`` on 127.0.0.1:<free port> in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not srv.started:
        assert thread.is_alive() and time.time() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=15)


@pytest.fixture(scope="module")
def server(shared_data, tmp_path_factory):
    """uvicorn on a free loopback port in a thread, serving the tiny model's index."""
    from polyvse_app.service import build_app

    assets = serving_assets(shared_data, tmp_path_factory)
    app, _, _ = build_app(assets.index)
    with uvicorn_thread(app) as url:
        yield url, assets


@pytest.fixture(scope="module")
def page(chromium, server, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh --user-data-dir
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(chromium),
            headless=True,
            args=FLAGS,
            viewport={"width": 1200, "height": 900},
        )
        context.set_default_timeout(TIMEOUT_MS)
        pg = context.new_page()
        errors = []
        pg.on("pageerror", lambda exc: errors.append(str(exc)))
        pg.goto(server[0] + "/")
        pg.wait_for_selector("body[data-ready='1']")
        yield pg
        context.close()
        assert not errors, f"JavaScript errors on the page: {errors}"


def _results(pg) -> list[dict]:
    """Rendered result cards once every thumbnail has loaded."""
    pg.wait_for_selector("#results figure.result")
    pg.wait_for_function(
        "Array.from(document.querySelectorAll('#results img')).every(i => i.complete && i.naturalWidth > 0)"
    )
    return pg.eval_on_selector_all(
        "#results figure.result",
        "els => els.map(e => ({id: Number(e.dataset.id), rank: e.querySelector('.rank').textContent,"
        " score: e.querySelector('.score').textContent, name: e.querySelector('.name').textContent,"
        " width: e.querySelector('img').naturalWidth}))",
    )


def test_german_query_shows_photos_with_scores(page, server, tmp_path):
    _, assets = server
    assert "German (de)" in page.inner_text("#lang")
    page.fill("#query", assets.german_query)
    page.select_option("#lang", "de")
    page.select_option("#k", "6")
    page.click("#search-button")
    page.wait_for_function("document.querySelector('#status').textContent.includes('photos for')")
    cards = _results(page)
    assert len(cards) == 6
    assert [c["rank"] for c in cards] == ["#1", "#2", "#3", "#4", "#5", "#6"]
    scores = [float(c["score"]) for c in cards]
    assert scores == sorted(scores, reverse=True) and all(c["width"] > 0 for c in cards)
    status = page.inner_text("#status")
    assert assets.german_query in status and "· de ·" in status
    page.screenshot(path=str(tmp_path / "german-query.png"))


def _query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlparse(url).query)


def _status_has(pg, text: str) -> None:
    """Wait for the status line of an answered request holding ``text``: the page shows a pending status
    ending in "…" first ("photos like NAME…" before the answer), which must not count as the answer."""
    pg.wait_for_function(
        "t => { const s = document.querySelector('#status').textContent; return s.includes(t) && !s.endsWith('…'); }",
        arg=text,
    )


def _form(pg) -> tuple[str, str, str]:
    return pg.input_value("#query"), pg.input_value("#lang"), pg.input_value("#k")


def test_the_search_is_kept_in_the_address(page, server):
    """After a search the address holds q/lang/k; that address opened in a new tab shows the same photos; Back
    and Forward go through earlier searches (a similar-photos click included), form and results alike."""
    base, assets = server
    page.goto(base + "/")
    page.wait_for_selector("body[data-ready='1']")
    assert urlparse(page.url).query == ""
    page.fill("#query", assets.german_query)
    page.select_option("#lang", "de")
    page.select_option("#k", "6")
    page.click("#search-button")
    _status_has(page, f"photos for “{assets.german_query}”")
    first = _results(page)
    first_url = page.url
    assert _query(first_url) == {"q": [assets.german_query], "lang": ["de"], "k": ["6"]}

    shared = page.context.new_page()  # the address shared with someone, or reloaded
    errors = []
    shared.on("pageerror", lambda exc: errors.append(str(exc)))
    shared.goto(first_url)
    _status_has(shared, f"photos for “{assets.german_query}”")
    assert _results(shared) == first and _form(shared) == (assets.german_query, "de", "6")
    shared.close()
    assert not errors, errors

    page.fill("#query", "zwei Hunde spielen im Schnee")
    page.select_option("#lang", "auto")
    page.select_option("#k", "12")
    page.click("#search-button")
    _status_has(page, "detected de")
    second = _results(page)
    assert _query(page.url) == {"q": ["zwei Hunde spielen im Schnee"], "lang": ["auto"], "k": ["12"]}
    page.click("#results figure.result:nth-child(2)")
    _status_has(page, f"photos like {second[1]['name']}")
    assert _query(page.url) == {"similar": [str(second[1]["id"])], "k": ["12"]}

    page.go_back()
    _status_has(page, "photos for “zwei Hunde spielen im Schnee”")
    assert _results(page) == second and _form(page) == ("zwei Hunde spielen im Schnee", "auto", "12")
    page.go_back()
    _status_has(page, f"photos for “{assets.german_query}”")
    assert page.url == first_url
    assert _results(page) == first and _form(page) == (assets.german_query, "de", "6")
    page.go_back()  # the page before any search
    page.wait_for_function("document.querySelector('#status').textContent === ''")
    assert page.eval_on_selector_all("#results figure.result", "els => els.length") == 0
    page.go_forward()
    _status_has(page, f"photos for “{assets.german_query}”")
    assert _results(page) == first


def test_language_detection_and_its_refusal_show_on_the_page(page):
    page.fill("#query", "zwei Hunde spielen im Schnee")
    page.select_option("#lang", "auto")
    page.click("#search-button")
    _status_has(page, "detected de")
    page.fill("#query", "Hund")
    page.click("#search-button")
    page.wait_for_function("document.querySelector('#status').classList.contains('error')")
    assert "too short to tell" in page.inner_text("#status")


def _drop_photo(pg, data: bytes, name: str) -> None:
    """Drag a photo file from outside onto the drop zone, as a person would."""
    transfer = pg.evaluate_handle(
        """([b64, name]) => {
            const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
            const dt = new DataTransfer();
            dt.items.add(new File([bytes], name, {type: 'image/jpeg'}));
            return dt;
        }""",
        [base64.b64encode(data).decode(), name],
    )
    for event in ("dragenter", "dragover", "drop"):
        pg.dispatch_event("#drop-zone", event, {"dataTransfer": transfer})


def test_drag_and_drop_a_photo_shows_similar_photos(page, server):
    _, assets = server
    target = assets.photos[9]
    _drop_photo(page, target.read_bytes(), target.name)
    _status_has(page, f"photos like {target.name}")
    cards = _results(page)
    assert cards[0]["id"] == 9 and cards[0]["name"] == target.name and cards[0]["score"] == "1.000"
    assert page.is_visible("#upload-preview")


def test_file_input_upload_and_click_for_similar(page, server):
    _, assets = server
    page.set_input_files("#file-input", str(assets.photos[11]))
    _status_has(page, f"photos like {assets.photos[11].name}")
    cards = _results(page)
    assert cards[0]["id"] == 11
    page.click("#results figure.result:nth-child(2)")
    _status_has(page, f"photos like {cards[1]['name']}")
    assert all(c["id"] != cards[1]["id"] for c in _results(page))  # the clicked photo itself is left out


def test_a_non_image_drop_shows_the_servers_message(page):
    _drop_photo(page, b"this is not a photo", "notes.jpg")
    page.wait_for_function("document.querySelector('#status').classList.contains('error')")
    assert "notes.jpg: not an image" in page.inner_text("#status")


def test_the_guide_screenshot_script_shoots_an_answered_search(page, server, tmp_path):
    """scripts/search_page_screenshot.py: the page with a typed query's results, saved once its thumbnails loaded."""
    import argparse
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "search_page_screenshot", Path(__file__).resolve().parents[1] / "scripts" / "search_page_screenshot.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    url, assets = server
    out = tmp_path / "page.png"
    page.goto(url + "/")
    script.shoot_page(page, argparse.Namespace(query=assets.german_query, lang="de", k=6), out)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(data[16:20], "big") == 1200  # the page's width
    assert len(page.query_selector_all("#results figure.result")) == 6
    assert not list(tmp_path.glob("*.tmp.png"))
