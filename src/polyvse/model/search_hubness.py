"""Text->photo search under a checkpoint's CSLS scoring (polyvse.similarity.hubness), in numpy.

For one query caption c in language L the CSLS score of photo i is 2 cos(i, c) - r_C(i, L) - r_I(c): r_I(c) is
the same for every photo, so the ranking moves only by each photo's r_C(i, L) (its mean cosine to its k nearest
bank captions of L). The searcher asks its index for the cosine top ``fetch(k)`` photos (exact or ANN alike) and
re-ranks them by CSLS; with CSLS's penalties spanning a few hundredths of cosine, the CSLS top k lies inside a
cosine top max(4k, k + 100) (the search tests compare with the CSLS ranking of every photo). Scores are CSLS
values, as evaluation computes them.
"""
from __future__ import annotations

import numpy as np

from ..util.arrays import normalize_rows

__all__ = ["SearchHubness"]

#: cosine candidates re-ranked for a top-k search: at least this many more than k, and at least 4 k
EXTRA_CANDIDATES = 100


def knn_mean(queries: np.ndarray, keys: np.ndarray, k: int) -> np.ndarray:
    """Each query row's mean of its ``k`` largest dot products with the rows of ``keys``."""
    sims = queries @ keys.T
    return -np.partition(-sims, k - 1, axis=1)[:, :k].mean(axis=1)


class SearchHubness:
    """A checkpoint's CSLS banks as unit float32 rows: ``photos`` (n_p, d), ``captions`` {language: (n_c, d)}."""

    def __init__(self, k: int, photos: np.ndarray, captions: dict[str, np.ndarray]):
        self.k = int(k)
        self.photos = normalize_rows(photos)
        self.captions = {lang: normalize_rows(bank) for lang, bank in captions.items()}
        self._pooled = np.concatenate(list(self.captions.values()))

    @classmethod
    def of_model(cls, model) -> SearchHubness | None:
        """The banks of a loaded model (``polyvse.load``'s PolyvseModel or a numpy query model), None without."""
        banks = getattr(model, "hubness", None)
        if banks is None:
            return None
        if isinstance(banks, SearchHubness):
            return banks
        return cls(banks.k, banks.photos.float().cpu().numpy(),
                   {lang: b.float().cpu().numpy() for lang, b in banks.captions.items()})

    def fetch(self, k: int) -> int:
        """How many cosine candidates a top-``k`` search re-ranks."""
        return max(4 * k, k + EXTRA_CANDIDATES)

    def photo_penalty(self, vectors: np.ndarray, lang: str | None) -> np.ndarray:
        """r_C of unit photo rows for queries in ``lang`` (the pooled bank for a language without one)."""
        return knn_mean(np.asarray(vectors, dtype=np.float32), self.captions.get(lang, self._pooled), self.k)

    def caption_penalty(self, vectors: np.ndarray) -> np.ndarray:
        """r_I of unit caption rows: each one's mean cosine to its k nearest bank photos."""
        return knn_mean(np.asarray(vectors, dtype=np.float32), self.photos, self.k)

    def photo_to_captions(self, photo: np.ndarray, captions: np.ndarray, caption_penalty: np.ndarray,
                          langs: list[str]) -> np.ndarray:
        """CSLS scores of one unit ``photo`` row against unit ``captions`` rows (their r_I ``caption_penalty``,
        languages ``langs``): the photo's r_C is taken against each caption's language's bank."""
        p = np.asarray(photo, dtype=np.float32).reshape(1, -1)
        r_c = {lang: float(self.photo_penalty(p, lang)[0]) for lang in set(langs)}
        return 2.0 * (captions @ p[0]) - caption_penalty - np.array([r_c[lang] for lang in langs], np.float32)

    def rerank(self, query: np.ndarray, ids: np.ndarray, vectors: np.ndarray, lang: str | None,
               k: int) -> tuple[np.ndarray, np.ndarray]:
        """(CSLS scores, ids) of the best ``k`` of candidate photos ``ids`` (their unit rows ``vectors``) for one
        unit ``query`` row, best first (ties: the cosine order)."""
        q = np.asarray(query, dtype=np.float32).reshape(1, -1)
        if len(ids) == 0:
            return np.zeros(0, np.float32), np.asarray(ids, dtype=np.int64)
        scores = 2.0 * (vectors @ q[0]) - self.photo_penalty(vectors, lang) - knn_mean(q, self.photos, self.k)[0]
        order = np.argsort(-scores, kind="stable")[:k]
        return scores[order].astype(np.float32), np.asarray(ids, dtype=np.int64)[order]
