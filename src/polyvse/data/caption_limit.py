"""Fewer training captions of a language, for learning curves (recall against the number of training captions,
as the Translator poster's Figure 3 plots against the number of fr training examples).

``limit_captions(captions, {"fr": 100}, seed)`` keeps 100 of the fr captions and every caption of the other
languages. The kept ones are the first N of a permutation drawn from (seed, language) alone, so a subset is
reproducible, the subsets of one seed are nested (the 100 are among the 250), and a language's subset does not
change when other languages are added or limited. Pass TRAINING captions only: the function only removes.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Mapping, Sequence
from typing import TypeVar

import numpy as np

from ..errors import DataError

log = logging.getLogger("polyvse.data")
C = TypeVar("C")


def limit_captions(
    captions: Sequence[C], limits: Mapping[str, int], seed: int, *, field: str = "caption_limit"
) -> list[C]:
    """The captions (objects with ``.lang``) with at most ``limits[lang]`` of each limited language, in their
    input order. A limit above the number available keeps them all (logged). ``field`` names the config
    field in errors."""
    for lang, n in limits.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise DataError(
                f"{field}: {lang}: {n!r} must be a positive number of captions; "
                "leave the language out to keep all of its captions"
            )
    keep = np.ones(len(captions), dtype=bool)
    for lang, n in limits.items():
        rows = np.array([i for i, c in enumerate(captions) if c.lang == lang], dtype=np.int64)
        if len(rows) == 0:
            raise DataError(
                f"{field}: no training caption in language {lang!r}; limit only languages that are trained on"
            )
        if n >= len(rows):
            log.info("%s %s=%d: only %d training captions, keeping them all", field, lang, n, len(rows))
            continue
        rng = np.random.default_rng([int(seed), zlib.crc32(lang.encode("utf-8"))])
        dropped = rows[rng.permutation(len(rows))[n:]]
        keep[dropped] = False
    return [c for c, k in zip(captions, keep) if k]


def first_captions_per_photo(captions: Sequence[C], n: int, *, field: str = "captions_per_photo") -> list[C]:
    """The first ``n`` captions (in input order) of every (photo, language); ``n = 0`` keeps all. With the
    corpus order this is what ``polyvse features embed-text`` embeds first, so a run can train on a partly
    filled sentence cache; it is also a learning-curve knob (captions per photo instead of per language)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise DataError(f"{field}: {n!r} must be 0 (all captions) or a positive number of captions per photo")
    if n == 0:
        return list(captions)
    seen: dict = {}
    out = []
    for c in captions:
        key = (c.photo_id, c.lang)
        k = seen.get(key, 0)
        if k < n:
            out.append(c)
        seen[key] = k + 1
    return out
