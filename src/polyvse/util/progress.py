"""Progress of long stages: a live tqdm bar on a terminal, one plain line per stage everywhere.

Every progress bar of polyvse goes through :class:`Progress` (or :func:`track` for a plain loop), so that
`polyvse demo > log 2>&1`, CI logs and pipes get one line per stage instead of every carriage-return refresh of
every bar:

    extracting efficientnet-lite0 features: 850 photos, 21 s
    epoch 3/15: loss 0.123, 15 s

The bar itself is tqdm's, shown only when its stream (stderr by default) is a terminal: tqdm's own
``disable=None`` test (Jupyter's widget stays on). The closing line is written to the same stream whether or
not the bar was shown, so a terminal keeps the same record a log gets. Settings such as ``TQDM_MININTERVAL``
reach the bar through tqdm's environment overrides.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TextIO


class Progress:
    """A tqdm bar over ``iterable`` (or up to ``total``, advanced with :meth:`update`) that ends in one line.

    ``enabled=False`` shows nothing at all (``--quiet``, other ranks). ``line=False`` keeps the bar but writes
    no closing line (a per-file bar inside a stage that has its own line). The line is written by
    :meth:`close` or at the end of a ``with`` block left without an exception: ``desc: <count> <unit>s,
    <seconds>``, or ``desc: <note>, <seconds>`` after ``close(note)``.
    """

    def __init__(
        self,
        iterable: Iterable | None = None,
        *,
        desc: str,
        total: float | None = None,
        unit: str = "it",
        enabled: bool = True,
        line: bool = True,
        file: TextIO | None = None,
        **tqdm_options,
    ):
        from tqdm.auto import tqdm

        self.desc, self.unit, self.count = desc, unit, 0
        self._file = file if file is not None else sys.stderr
        self._line = enabled and line
        self._closed = False
        self._t0 = time.perf_counter()
        # disable=None: tqdm hides the bar when the stream is no terminal; leave=False: the line replaces it
        self.bar = tqdm(
            iterable,
            desc=desc,
            total=total,
            unit=unit,
            file=self._file,
            leave=False,
            disable=None if enabled else True,
            **tqdm_options,
        )

    def __iter__(self) -> Iterator:
        for item in self.bar:
            self.count += 1
            yield item

    def update(self, n: float = 1) -> None:
        self.count += n
        self.bar.update(n)

    def close(self, note: str | None = None) -> None:
        """Clear the bar and write the stage's line (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        self.bar.close()
        if self._line:
            print(
                f"{self.desc}: {note if note is not None else self._amount()}, "
                f"{_seconds(time.perf_counter() - self._t0)}",
                file=self._file,
                flush=True,
            )

    def _amount(self) -> str:
        plural = "es" if self.unit.endswith(("s", "x", "ch", "sh")) else "s"
        return f"{self.count:,} {self.unit if self.count == 1 else self.unit + plural}"

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:  # a stage that did not finish gets no line: the traceback says what happened
            self._line = False
        self.close()


def track(iterable: Iterable, *, desc: str, **options) -> Iterator:
    """``for x in track(items, desc=...)``: :class:`Progress` over a plain loop; the line is written when the loop
    runs to its end (a loop left by break or an exception gets none)."""
    with Progress(iterable, desc=desc, **options) as bar:
        yield from bar


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
