#!/usr/bin/env bash
# Headless Chromium (Debian package) for tests/test_browser.py, which drives it through Playwright
# (no chromedriver, no `playwright install`). Run by `make test`.
# Idempotent: does nothing when chromium is already installed. Needs apt-get, root (or sudo) and the Debian mirror;
# when it cannot install, it says why and exits 1.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    echo "install-browser: chromium already installed ($(chromium --version 2>/dev/null || echo chromium))"
    exit 0
fi

fail() {
    echo "install-browser: cannot install headless Chromium: $1" >&2
    echo "install-browser: install the Debian package 'chromium' (or any chromium on PATH) and run the tests again" >&2
    exit 1
}

command -v apt-get >/dev/null 2>&1 || fail "no apt-get here (not Debian/Ubuntu)"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || fail "not root and no sudo (apt-get install needs root)"
    SUDO="sudo"
fi

echo "install-browser: installing chromium with apt-get (once; later runs find it installed)"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || fail "apt-get update failed (no network, or sudo refused)"
$SUDO apt-get install -y -qq --no-install-recommends chromium || fail "apt-get install chromium failed"
echo "install-browser: installed $(chromium --version 2>/dev/null || echo chromium)"
