"""The web page of a server started with a token, in real headless Chromium: it asks for the token once (a prompt),
or takes it from a #token=... link, and then searches and shows thumbnails (which carry it as a cookie)."""

from __future__ import annotations

import pytest

from test_browser import FLAGS, TIMEOUT_MS, chromium, uvicorn_thread  # noqa: F401 (chromium: a fixture)
from test_index import serving_assets

TOKEN = "browser-token-0123456789"


@pytest.fixture(scope="module")
def guarded_server(shared_data, tmp_path_factory):
    """uvicorn on a free loopback port in a thread, serving the tiny model's index behind TOKEN."""
    from polyvse_app.service import ServeSettings, build_app

    assets = serving_assets(shared_data, tmp_path_factory)
    app, _, _ = build_app(assets.index, settings=ServeSettings(token=TOKEN))
    with uvicorn_thread(app) as url:
        yield url, assets


@pytest.fixture
def browser(chromium, tmp_path):  # noqa: F811 (the chromium fixture)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=str(chromium), headless=True, args=FLAGS
        )
        context.set_default_timeout(TIMEOUT_MS)
        yield context
        context.close()


def search_shows_thumbnails(page, query: str) -> None:
    page.wait_for_selector("body[data-ready='1']")
    page.fill("#query", query)
    page.select_option("#lang", "en")
    page.click("#search-button")
    page.wait_for_selector("#results figure.result")
    page.wait_for_function(
        "Array.from(document.querySelectorAll('#results img')).every(i => i.complete && i.naturalWidth > 0)"
    )


@pytest.mark.parametrize("answer", [TOKEN, None])
def test_the_page_asks_for_the_token_once(browser, guarded_server, answer):
    url, assets = guarded_server
    page, prompts = browser.new_page(), []

    def on_dialog(dialog):
        prompts.append(dialog.message)
        if answer:
            dialog.accept(answer)
        else:
            dialog.dismiss()

    page.on("dialog", on_dialog)
    page.goto(url + "/")
    if answer is None:  # refused: the server's 401 message, and nothing searched
        page.wait_for_function("document.querySelector('#status').textContent.includes('token')")
        assert "Authorization: Bearer" in page.inner_text("#status") and len(prompts) == 1
        return
    search_shows_thumbnails(page, assets.english_query)
    assert len(prompts) == 1 and "token" in prompts[0]
    page.reload()  # the cookie keeps it: no second question
    search_shows_thumbnails(page, assets.english_query)
    assert len(prompts) == 1


def test_a_link_can_carry_the_token(browser, guarded_server):
    url, assets = guarded_server
    page = browser.new_page()
    page.on("dialog", lambda dialog: pytest.fail(f"asked for the token: {dialog.message}"))
    page.goto(f"{url}/#token={TOKEN}")
    search_shows_thumbnails(page, assets.english_query)
    assert "token" not in page.url  # taken out of the address, so it is not shared with the results
