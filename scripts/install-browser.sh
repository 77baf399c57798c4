#!/usr/bin/env bash
# Headless Chromium + chromedriver (Debian packages) for tests/test_browser.py.
# Idempotent: does nothing when both are already installed. Needs root (or sudo) and the Debian mirror.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    echo "install-browser: chromium and chromedriver already installed ($(chromium --version 2>/dev/null || echo chromium))"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-browser: needs root (or sudo) to apt-get install chromium chromium-driver" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends chromium chromium-driver
echo "install-browser: installed $(chromium --version 2>/dev/null || echo chromium)"
