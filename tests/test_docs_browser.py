"""The documentation site's equations in real headless Chromium (driven by Playwright, as tests/test_browser.py):
the built site, served from this machine with every other request refused, must typeset every equation of the
methods pages with the bundled KaTeX. A module of its own, because the search page's tests hold one Playwright
session open for their whole module."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from polyvse_tooling.harness import free_port
from test_browser import FLAGS, TIMEOUT_MS, chromium  # noqa: F401 -- chromium is a fixture


@pytest.fixture(scope="module")
def docs_site(tmp_path_factory) -> Path:
    """The site built as `make docs` builds it, into a temporary folder."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=repo,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"mkdocs build failed (tests/test_docs.py says why):\n{proc.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def docs_url(docs_site):
    """The built site served on a free loopback port, as `mkdocs serve` or any static server would."""
    import functools
    import http.server

    handler = functools.partial(_QuietHandler, directory=str(docs_site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=httpd.serve_forever, name="docs-site", daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join(timeout=15)


def _quiet_handler():
    import http.server

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # the test reads what the browser asked for, not the server's log
            pass

    return Handler


_QuietHandler = _quiet_handler()


METHODS = Path(__file__).resolve().parents[1] / "docs" / "methods"
MATH_PAGES = sorted(p.stem for p in METHODS.glob("*.md") if "\\(" in p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("method", MATH_PAGES)
def test_method_equations_render_offline(chromium, docs_url, method):
    """A methods page of the built site, served from this machine, with every request elsewhere refused: the bundled
    KaTeX typesets every equation, no raw TeX delimiter is left on the page, and nothing was asked of the network."""
    from playwright.sync_api import sync_playwright

    asked = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), headless=True, args=FLAGS)
        try:
            context = browser.new_context(viewport={"width": 1200, "height": 900})

            def route(r):
                if r.request.url.startswith(docs_url + "/"):
                    r.continue_()
                else:
                    asked.append(r.request.url)
                    r.abort()

            context.route("**/*", route)
            pg = context.new_page()
            errors = []
            pg.on("pageerror", lambda exc: errors.append(str(exc)))
            pg.goto(f"{docs_url}/methods/{method}/")
            pg.wait_for_function(
                "document.querySelectorAll('.arithmatex').length > 0 && "
                "Array.from(document.querySelectorAll('.arithmatex')).every(e => e.querySelector('.katex'))",
                timeout=TIMEOUT_MS,
            )
            article = pg.inner_text("article")
            counts = pg.evaluate("""async () => { await document.fonts.ready; return {
                math: document.querySelectorAll('.arithmatex').length,
                rendered: document.querySelectorAll('.arithmatex .katex').length,
                display: document.querySelectorAll('.arithmatex .katex-display').length,
                failed: document.querySelectorAll('.katex-error, .arithmatex-error').length,
                font: document.fonts.check('16px KaTeX_Main'),
            }; }""")
        finally:
            browser.close()
    assert not errors, f"JavaScript errors on {method}: {errors}"
    assert asked == [], f"the page asked the network for {asked}"
    assert counts["math"] > 0 and counts["rendered"] == counts["math"], counts
    source = (METHODS / f"{method}.md").read_text(encoding="utf-8")
    displayed = sum(line.strip() == "\\[" for line in source.splitlines())
    assert counts["display"] == displayed, counts  # every display equation (\\[ ... \\]) typeset as one
    assert counts["failed"] == 0, counts
    assert counts["font"], "KaTeX's fonts did not load from the bundle"
    for raw in ("\\(", "\\)", "\\[", "\\]", "\\frac", "\\sum"):
        assert raw not in article, f"raw TeX {raw!r} left on the {method} page"
