"""The served index follows its folder: photos added by `polyvse index add`, or a rebuild by `polyvse index build
--force`, are searched without restarting `polyvse serve`.

Both commit a new index version by replacing manifest.json (polyvse.index.store), so a manifest with another
inode, size or time stamp means a new version. The first request after ``interval`` seconds checks that (one
stat); on a change it opens the new version beside the one in force and swaps it in with one assignment, while
concurrent requests go on with the version in force. A request keeps the searcher it started with to its end
(the old version's vectors stay mapped after its files are removed). A version the running model cannot serve
(built by another model, or with another --photo-fit) is logged and left alone until the manifest changes again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from polyvse.errors import PolyvseError
from polyvse.index import PhotoIndex, Searcher
from polyvse.index.store import MANIFEST

log = logging.getLogger("polyvse.serve")


def manifest_signature(root: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime in ns) of the index's manifest, None while there is none."""
    try:
        st = os.stat(root / MANIFEST)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class LiveSearcher:
    """The searcher over the newest version of an index folder (thread-safe)."""

    def __init__(self, searcher: Searcher, interval: float):
        self.root = searcher.index.root
        self.interval = float(interval)
        self._searcher = searcher
        self._signature = manifest_signature(self.root)
        self._next_check = time.monotonic() + self.interval
        self._loading = threading.Lock()

    def current(self) -> Searcher:
        """The searcher over the version in force, after picking up a newer one when it is time to look."""
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + self.interval
            self._refresh()
        return self._searcher

    def _refresh(self) -> None:
        signature = manifest_signature(self.root)
        if signature is None or signature == self._signature:
            return
        if not self._loading.acquire(blocking=False):
            return  # another request is opening the new version; this one is served by the version in force
        try:
            self._signature = signature
            old = self._searcher
            try:
                new = self._open(old)
            except PolyvseError as exc:
                log.warning(
                    "%s changed but the new version cannot be served (%s); still serving the version of generation %s",
                    self.root,
                    exc,
                    old.index.manifest.get("generation"),
                )
                return
            self._searcher = new
            log.info(
                "%s: now serving generation %s (%s)",
                self.root,
                new.index.manifest.get("generation"),
                new.index.describe(),
            )
        finally:
            self._loading.release()

    @staticmethod
    def _open(old: Searcher) -> Searcher:
        index = PhotoIndex.open(old.index.root)
        if index.fingerprint != old.index.fingerprint:  # a rebuild by another model (or another --photo-fit)
            raise PolyvseError(
                "it was built by another model than the one this server runs; restart "
                "`polyvse serve` to serve it with its own model"
            )
        new = Searcher(old.model, index, check=False)  # same fingerprint: same model, no need to hash it again
        # one bound on concurrent encodings for the whole server, whichever version a request searches
        new.text_slots, new.image_slots = old.text_slots, old.image_slots
        return new
