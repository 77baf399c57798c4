"""A screenshot of the search page, for the serving guide: `polyvse serve` on an index, one query typed into the
page in headless Chromium, the page saved as a PNG once every thumbnail has loaded.

    python scripts/search_page_screenshot.py [--index runs/demo/index] [--query 'zwei Hunde spielen im Schnee']
        [--lang de] [--k 12] [--out docs/images/search-page.png]

Needs headless Chromium (scripts/install-browser.sh) and Playwright, as tests/test_browser.py does; it never
downloads a browser. The index defaults to the one `make demo` leaves. The PNG is written atomically.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from polyvse_tooling.harness import ServerError, free_port, serving

REPO = Path(__file__).resolve().parents[1]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
TIMEOUT_MS = 60_000


def chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None)
    if not found:
        raise SystemExit("search_page_screenshot: no headless Chromium; run scripts/install-browser.sh first")
    return found


def shoot(base: str, args, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="screenshot-profile-") as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile,
            executable_path=chromium(),
            headless=True,
            args=FLAGS,
            viewport={"width": args.width, "height": args.height},
        )
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.goto(base + "/")
        shoot_page(page, args, out)
        context.close()


def shoot_page(page, args, out: Path) -> None:
    """Type ``args.query`` into the loaded page, search, and save the page once its thumbnails have loaded."""
    page.wait_for_selector("body[data-ready='1']")
    page.fill("#query", args.query)
    page.select_option("#lang", args.lang)
    page.select_option("#k", str(args.k))
    page.click("#search-button")
    page.wait_for_function("document.querySelector('#status').textContent.includes('photos for')")
    page.wait_for_function(
        "Array.from(document.querySelectorAll('#results img')).every(i => i.complete && i.naturalWidth > 0)"
    )
    tmp = out.with_name(out.name + ".tmp.png")
    page.screenshot(path=str(tmp), full_page=False)
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", type=Path, default=REPO / "runs" / "demo" / "index")
    ap.add_argument("--query", default="zwei Hunde spielen im Schnee")
    ap.add_argument("--lang", default="de")
    ap.add_argument("--k", type=int, default=12, choices=[6, 12, 24, 48], help="results shown (the page's choices)")
    ap.add_argument("--width", type=int, default=1200)
    ap.add_argument("--height", type=int, default=700)
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "images" / "search-page.png")
    args = ap.parse_args(argv)
    if not (args.index / "manifest.json").is_file():
        print(f"search_page_screenshot: no index at {args.index}; run `make demo` or pass --index", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="screenshot-serve-") as tmp:
        try:
            with serving(["--index", args.index, "--port", port], Path(tmp) / "serve.log", port, timeout=300) as (_, b):
                shoot(b, args, args.out)
        except ServerError as exc:
            print(f"search_page_screenshot: {exc}", file=sys.stderr)
            return 1
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
