"""Subword features of a new language's sentences: a bag of hashed words and character n-grams (fastText's
sentence features, Bojanowski et al. 2017), torch-free.

A language the frozen towers do not know (Quechua, Guarani: e5 never saw them) reaches the model as a poor tower
vector, and a per-language Linear on it can only re-weigh what e5 made of unfamiliar subword pieces. Teacher
learning with a subword student (``polyvse adapt --subwords``) adds a second reading of the sentence: each word
(``w:<word>``), each character 3-, 4- and 5-gram of ``<word>`` and, with ``word_ngrams`` n, each run of 2 to n
neighbouring words is hashed into one of ``buckets`` rows of a
learned table; the mean of the sentence's rows, projected to the part's output, is added to the Linear's output::

    part(sentence) = W x + b + U mean(E[h(g)] for g in grams(sentence))

The table ``E`` and the projection ``U`` are stored in the checkpoint beside the language's Linear part, under the
part's own key prefix (``text_encoder.universal.<lang>.subword_table`` / ``.subword_up``), so they are, like the
part, in the model's fingerprint and outside its photo side's. This module holds what both the torch model and the numpy query path need:
the n-grams, their hashes and the numpy arithmetic. The hash is CRC-32 (``zlib``), the same on every machine and
Python (Python's own ``hash`` is salted per process).
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["SubwordSpec", "TABLE", "UP", "subword_ids", "bag_inputs", "subword_term"]

#: the tensors' names under the language's part prefix
TABLE, UP = "subword_table", "subword_up"


@functools.cache
def _words():
    """The word pattern (``regex``'s ``\\w``: letters with their combining marks), compiled on first use, so a query
    in a language without a subword student does not import ``regex``."""
    import regex

    return regex.compile(r"\w+")


@dataclass(frozen=True)
class SubwordSpec:
    """How sentences are cut and hashed (recorded with the adapted language: the query path must cut alike)."""

    buckets: int = 1 << 17
    dim: int = 64
    min_n: int = 3
    max_n: int = 5
    word_ngrams: int = 1  # n: each run of 2..n neighbouring words too (``b:<w1> <w2>``); older checkpoints: 1

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> SubwordSpec:
        return cls(**{k: int(v) for k, v in d.items() if k in cls.__dataclass_fields__})


def _grams(text: str, spec: SubwordSpec) -> list[str]:
    out, words = [], _words().findall(text.casefold())
    for word in words:
        out.append("w:" + word)
        marked = f"<{word}>"
        for n in range(spec.min_n, spec.max_n + 1):
            out.extend(marked[i : i + n] for i in range(max(1, len(marked) - n + 1)))
    for n in range(2, spec.word_ngrams + 1):
        out.extend("b:" + " ".join(words[i : i + n]) for i in range(len(words) - n + 1))
    return out


def subword_ids(text: str, spec: SubwordSpec) -> list[int]:
    """The table rows of a sentence's words and n-grams (repeats kept: the mean weighs them); [] for none."""
    return [zlib.crc32(g.encode("utf-8")) % spec.buckets for g in _grams(text, spec)]


def bag_inputs(texts: Sequence[str], spec: SubwordSpec, known: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(flat row ids, offsets) of ``texts``: torch's ``EmbeddingBag`` input; a sentence without words has an
    empty bag (its subword term is zero). ``known``: {text: row ids} already hashed (a teacher hashes its
    sentences once, not every epoch)."""
    ids = [known[t] if known is not None and t in known else subword_ids(t, spec) for t in texts]
    offsets = np.cumsum([0] + [len(r) for r in ids[:-1]], dtype=np.int64) if ids else np.zeros(0, np.int64)
    flat = np.concatenate([np.asarray(r, dtype=np.int64) for r in ids]) if ids else np.zeros(0, np.int64)
    return flat, offsets


def subword_term(texts: Sequence[str], table: np.ndarray, up: np.ndarray, spec: SubwordSpec) -> np.ndarray:
    """float32 ``(len(texts), up.shape[0])``: ``U mean(E[rows])`` per sentence, as the torch student computes it."""
    out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
    for i, text in enumerate(texts):
        rows = subword_ids(text, spec)
        if rows:
            out[i] = table[rows].mean(axis=0)
    return out @ up.T.astype(np.float32, copy=False)
