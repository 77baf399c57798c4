"""Where data lives: --data-root flag, else $POLYVSE_DATA, else ~/.cache/polyvse."""

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
    """Feature and model caches live under the data root so one setting moves everything."""
    return data_root(root) / "cache"
