"""Text->photo search under a checkpoint's CSLS scoring, in numpy: the definition of
:mod:`polyvse.csls.scoring` (which ``polyvse.csls.banks.HubnessBanks``, torch, computes too) on
numpy banks.

For one query caption c in language L the CSLS score of photo i is 2 cos(i, c) - r_C(i, L) - r_I(c): r_I(c) is
the same for every photo, so the ranking moves only by each photo's r_C(i, L) (its mean cosine to its k nearest
bank captions of L). The searcher asks its index for the cosine top ``fetch(k)`` photos (exact or ANN alike) and
re-ranks them by CSLS; with CSLS's penalties spanning a few hundredths of cosine, the CSLS top k lies inside a
cosine top max(4k, k + 100) (the search tests compare with the CSLS ranking of every photo). Scores are CSLS
values, as evaluation computes them.

A checkpoint's banks are read from its weights file as a query first needs them (``from_bank_file``): the photo
bank and the query language's, or every language's for the pooled bank; taken as stored (unit float16 rows, as
``polyvse.load``'s HubnessBanks takes them), so both paths score with the same rows.

r_C depends only on the photo and the banks, so an index stores it for every photo and every bank key
(``penalty_table`` at build, ``polyvse.csls.penalties``) and ``rerank`` takes the candidates' stored rows
(``photo_penalty``): a query then reads no caption bank at all. ``digest`` names the banks those rows were computed
with, from what every query reads anyway (the photo bank's rows, the caption banks' names and shapes, k).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from ..util.arrays import normalize_rows
from .scoring import POOLED, bank_key, csls, knn_mean, top_k_values

__all__ = ["SearchHubness"]

#: cosine candidates re-ranked for a top-k search: at least this many more than k, and at least 4 k
EXTRA_CANDIDATES = 100


class _ArrayBanks:
    """Banks already in memory, with ``HubnessBankFile``'s interface (photos(), caption(lang), languages)."""

    def __init__(self, photos: np.ndarray, captions: dict[str, np.ndarray]):
        self._photos, self._captions = photos, captions
        self.languages = sorted(captions)

    def photos(self) -> np.ndarray:
        return self._photos

    def caption(self, lang: str) -> np.ndarray | None:
        return self._captions.get(lang)

    def caption_shapes(self) -> dict[str, tuple[str, list[int]]]:
        return {lang: (np.asarray(b).dtype.name, list(np.shape(b))) for lang, b in self._captions.items()}


class SearchHubness:
    """A checkpoint's CSLS banks as float32 unit rows: ``photos`` (n_p, d), ``captions`` {language: (n_c, d)}.
    Arrays given to the constructor are normalised (any scale); ``from_bank_file`` and ``of_model`` take a
    checkpoint's rows as stored."""

    def __init__(self, k: int, photos: np.ndarray, captions: dict[str, np.ndarray]):
        self._setup(k, _ArrayBanks(photos, captions), normalize_rows)

    @classmethod
    def from_bank_file(cls, k: int, banks) -> SearchHubness:
        """Banks read on demand from ``banks`` (a ``polyvse.model.checkpoint.HubnessBankFile``)."""
        out = cls.__new__(cls)
        out._setup(k, banks, _stored_rows)
        return out

    @classmethod
    def of_model(cls, model) -> SearchHubness | None:
        """The banks of a loaded model (``polyvse.load``'s PolyvseModel or a numpy query model), None without."""
        banks = getattr(model, "hubness", None)
        if banks is None:
            return None
        if isinstance(banks, SearchHubness):
            return banks
        out = cls.__new__(cls)
        out._setup(
            banks.k,
            _ArrayBanks(banks.photos.cpu().numpy(), {lang: b.cpu().numpy() for lang, b in banks.captions.items()}),
            _stored_rows,
        )
        return out

    def _setup(self, k: int, banks, rows) -> None:
        self.k = int(k)
        self._banks, self._rows = banks, rows
        self._unit: dict[str | None, np.ndarray] = {}  # language (None: the photo bank) -> its unit rows
        self._digest: str | None = None

    @property
    def photos(self) -> np.ndarray:
        if None not in self._unit:
            self._unit[None] = self._rows(self._banks.photos())
        return self._unit[None]

    @property
    def captions(self) -> dict[str, np.ndarray]:
        """Every language's caption bank (all of them read)."""
        return {lang: self.caption_bank(lang) for lang in self._banks.languages}

    def caption_bank(self, lang: str | None) -> np.ndarray:
        """The unit rows that score captions in ``lang``: its bank, or the pooled bank of every language's."""
        key = bank_key(lang, self._banks.languages)
        if key not in self._unit:
            self._unit[key] = (
                np.concatenate([self.caption_bank(code) for code in self._banks.languages])
                if key == POOLED
                else self._rows(self._banks.caption(key))
            )
        return self._unit[key]

    @property
    def penalty_keys(self) -> list[str]:
        """The bank keys an index stores r_C for, in its columns' order: every language's bank, then the pooled."""
        return [*self._banks.languages, POOLED]

    def key_of(self, lang: str | None) -> str:
        """The bank key (a column of ``penalty_keys``) that scores captions in ``lang``."""
        return bank_key(lang, self._banks.languages)

    def digest(self) -> str:
        """``sha256:<hex>`` of k, the photo bank's stored rows and each caption bank's name, dtype and shape: what
        an index's stored r_C rows were computed with. The caption banks' rows are left out so that checking it
        reads none of them; they come from the same training run as the photo bank and the weights (which the
        index's model fingerprint pins), so a bank rebuilt in any other way changes the photo bank too."""
        if self._digest is None:
            photos = np.ascontiguousarray(self._banks.photos())
            h = hashlib.sha256(
                json.dumps(
                    {
                        "k": self.k,
                        "photos": [photos.dtype.name, list(photos.shape)],
                        "captions": self._banks.caption_shapes(),
                    },
                    sort_keys=True,
                ).encode()
            )
            h.update(photos.view(np.uint8).reshape(-1).data)
            self._digest = "sha256:" + h.hexdigest()
        return self._digest

    def penalty_table(self, vectors: np.ndarray, keys: list[str] | None = None) -> np.ndarray:
        """r_C of unit photo rows for every key of ``keys`` (default ``penalty_keys``): float32 (len(vectors),
        len(keys)). Only the banks the keys need are scanned; the pooled bank's k nearest are the k best of each
        language's k nearest, so the pooled bank is never scanned (nor built), but it needs every language's. Callers
        bound the memory by passing rows in chunks (chunk x largest bank floats at once)."""
        keys = self.penalty_keys if keys is None else list(keys)
        v = np.asarray(vectors, dtype=np.float32)
        scanned = self._banks.languages if POOLED in keys else [key for key in keys if key != POOLED]
        tops = {lang: top_k_values(v @ self.caption_bank(lang).T, self.k) for lang in scanned}
        if POOLED in keys:
            tops[POOLED] = top_k_values(np.concatenate([tops[lang] for lang in self._banks.languages], axis=1), self.k)
        return np.stack([tops[key].mean(axis=1) for key in keys], axis=1).astype(np.float32)

    def penalty_columns(self, langs) -> list[str]:
        """The bank keys that score queries in ``langs`` (each language's own, the pooled one for a language
        without), in ``penalty_keys``' order: the columns an index stores when told to store these languages'."""
        wanted = {self.key_of(lang) for lang in langs}
        return [key for key in self.penalty_keys if key in wanted]

    def fetch(self, k: int) -> int:
        """How many cosine candidates a top-``k`` search re-ranks."""
        return max(4 * k, k + EXTRA_CANDIDATES)

    def photo_penalty(self, vectors: np.ndarray, lang: str | None) -> np.ndarray:
        """r_C of unit photo rows for queries in ``lang`` (the pooled bank for a language without one)."""
        return knn_mean(np.asarray(vectors, dtype=np.float32), self.caption_bank(lang), self.k)

    def caption_penalty(self, vectors: np.ndarray) -> np.ndarray:
        """r_I of unit caption rows: each one's mean cosine to its k nearest bank photos."""
        return knn_mean(np.asarray(vectors, dtype=np.float32), self.photos, self.k)

    def photo_to_captions(
        self, photo: np.ndarray, captions: np.ndarray, caption_penalty: np.ndarray, langs: list[str]
    ) -> np.ndarray:
        """CSLS scores of one unit ``photo`` row against unit ``captions`` rows (their r_I ``caption_penalty``,
        languages ``langs``): the photo's r_C is taken against each caption's language's bank."""
        p = np.asarray(photo, dtype=np.float32).reshape(1, -1)
        r_c = {lang: float(self.photo_penalty(p, lang)[0]) for lang in set(langs)}
        return csls(captions @ p[0], np.array([r_c[lang] for lang in langs], np.float32), caption_penalty)

    def rerank(
        self,
        query: np.ndarray,
        ids: np.ndarray,
        vectors: np.ndarray,
        lang: str | None,
        k: int,
        photo_penalty: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(CSLS scores, ids) of the best ``k`` of candidate photos ``ids`` (their unit rows ``vectors``) for one
        unit ``query`` row, best first (ties: the cosine order). ``photo_penalty``: the candidates' r_C for
        ``lang`` as the index stores them; None computes it against the caption bank."""
        q = np.asarray(query, dtype=np.float32).reshape(1, -1)
        if len(ids) == 0:
            return np.zeros(0, np.float32), np.asarray(ids, dtype=np.int64)
        if photo_penalty is None:
            photo_penalty = self.photo_penalty(vectors, lang)
        scores = csls(vectors @ q[0], np.asarray(photo_penalty, dtype=np.float32), self.caption_penalty(q)[0])
        order = np.argsort(-scores, kind="stable")[:k]
        return scores[order].astype(np.float32), np.asarray(ids, dtype=np.int64)[order]


def _stored_rows(bank: np.ndarray) -> np.ndarray:
    """A checkpoint's bank (unit rows, float16) as float32 rows to compute with, not normalised again."""
    return np.ascontiguousarray(bank, dtype=np.float32)
