"""Where data lives: --data-root flag, else $POLYVSE_DATA, else ~/.cache/polyvse; caches: $POLYVSE_CACHE."""

from __future__ import annotations

import os
from pathlib import Path


def data_root(flag: str | os.PathLike | None = None) -> Path:
    if flag:
        return Path(flag).expanduser()
    env = os.environ.get("POLYVSE_DATA")
    if env:
        return Path(env).expanduser()
    return Path("~/.cache/polyvse").expanduser()


def cache_root(root: str | os.PathLike | None = None) -> Path:
    """Feature caches: $POLYVSE_CACHE if set, else <data root>/cache, so one setting moves everything
    but a read-only data mirror can still be used with a writable cache elsewhere."""
    env = os.environ.get("POLYVSE_CACHE")
    if env:
        return Path(env).expanduser()
    return data_root(root) / "cache"


#: Where `make model` writes the product model; `polyvse search` and `polyvse serve` open its index by default.
MODEL_DIR = Path("runs") / "model"
DEFAULT_INDEX = MODEL_DIR / "index"
