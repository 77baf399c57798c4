"""Shared fixtures. Real-data tests read ../shared/data (the public-repository mirror) read-only."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The mirror of the public data repositories; its layout is the data-root layout."""
    root = Path(os.environ.get("POLYVSE_TEST_DATA", REPO.parent / "shared" / "data")).resolve()
    if not (root / "flickr8k" / "images").is_dir():
        pytest.fail(f"real data not found at {root}: put ../shared/data beside the repo or set POLYVSE_TEST_DATA")
    return root
