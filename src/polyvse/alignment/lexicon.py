"""Bilingual lexicons of the MUSE benchmark (Conneau et al. 2018, "Word translation without parallel data").

A MUSE dictionary file holds one translation pair per line, ``<source word> <target word>``, UTF-8,
whitespace-separated. A source word with several translations appears on several lines.

Layout expected under the MUSE folder (``<data root>/muse``, as in ``../shared/data/muse``)::

    full/<src>-<tgt>.txt                              every pair of the dictionary, by source-word frequency
    splits_reconstructed/<src>-<tgt>.0-5000.txt       pairs of the first 5000 source words of full/
    splits_reconstructed/<src>-<tgt>.5000-6500.txt    pairs of the next 1500 source words of full/

The split files at hand are RECONSTRUCTED, not the official MUSE ``*.0-5000.txt`` / ``*.5000-6500.txt``
downloads: they were rebuilt from ``full/`` by taking the pairs of the first 5000 (resp. the next 1500)
distinct source words in file order. Numbers measured on them are therefore not directly comparable with
numbers published on the official splits.

Every use of a lexicon -- training (AME's alignment and lexicon initialisation, the Translator's
Procrustes/RCSLS map) and evaluation (word-translation P@1, the alignment ratio) -- takes its pairs from
:func:`muse_lexicon`, which defines the one train/test split (see :func:`split_lexicon`), so that no model is
tested on a source word it was given a translation for.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from ..errors import DataError

__all__ = [
    "read_muse_dictionary",
    "filter_lexicon",
    "muse_paths",
    "muse_lexicon",
    "split_lexicon",
    "MUSE_SPLITS",
    "HELD_OUT_RANKS",
    "LEXICON_PARTS",
]

#: file section -> (sub-folder, file-name suffix). "0-5000"/"5000-6500" are the RECONSTRUCTED split files;
#: training and evaluation do not read them but take their pairs from :func:`muse_lexicon`.
MUSE_SPLITS: dict[str, tuple[str, str]] = {
    "full": ("full", ""),
    "0-5000": ("splits_reconstructed", ".0-5000"),
    "5000-6500": ("splits_reconstructed", ".5000-6500"),
}
#: frequency ranks [start, end) of the held-out (test) source words: MUSE's own test band
HELD_OUT_RANKS: tuple[int, int] = (5000, 6500)
LEXICON_PARTS = ("train", "test")


def read_muse_dictionary(path: str | os.PathLike) -> list[tuple[str, str]]:
    """Read a MUSE dictionary: list of ``(source word, target word)`` in file order.

    Lines are split on any whitespace. Blank lines are skipped (every MUSE file ends with a newline);
    a line that does not hold exactly two words, or bytes that are not UTF-8, raise
    :class:`~polyvse.errors.DataError` naming ``file:line``. A UTF-8 byte-order mark on the first line is
    ignored. Duplicate pairs are kept as they are (the MUSE files at hand have none).
    """
    path = Path(path)
    pairs: list[tuple[str, str]] = []
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise DataError(
            "MUSE dictionary not found; check the data root and the language pair (see polyvse.alignment.muse_paths)",
            path,
        ) from None
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(
                    f"not valid UTF-8 ({exc.reason} at byte {exc.start}); MUSE dictionaries are UTF-8 text",
                    path,
                    lineno,
                ) from None
            if lineno == 1 and line.startswith("\ufeff"):
                line = line[1:]
            words = line.split()
            if not words:
                continue
            if len(words) != 2:
                raise DataError(
                    f"expected 2 whitespace-separated words (source target), got {len(words)}: {line.strip()[:80]!r}",
                    path,
                    lineno,
                )
            pairs.append((words[0], words[1]))
    return pairs


def _lookup(vocab: Any, name: str):
    """A function word -> index or None for a dict, a ``.stoi`` object, or a polyvse Vocabulary."""
    if isinstance(vocab, Mapping):
        table = vocab
    elif isinstance(getattr(vocab, "stoi", None), Mapping):
        table = vocab.stoi
    elif hasattr(vocab, "__contains__") and callable(getattr(vocab, "token_to_id", None)):

        def get(word: str, _v=vocab):
            return _v.token_to_id(word) if word in _v else None

        return get
    else:
        raise TypeError(
            f"{name} must be a dict word->index, an object with a .stoi dict, or an object "
            f"with __contains__ and token_to_id (polyvse Vocabulary); got {type(vocab).__name__}"
        )

    def get(word: str, _t=table):
        # `in` first: a defaultdict-style stoi must not map unknown words to <unk>.
        return _t[word] if word in _t else None

    return get


def filter_lexicon(
    pairs: Iterable[tuple[str, str]], src_vocab: Any, tgt_vocab: Any
) -> tuple[torch.Tensor, list[tuple[str, str]]]:
    """Keep the pairs whose source word is in ``src_vocab`` and whose target word is in ``tgt_vocab``.

    The vocabularies are dicts ``word -> row index``, objects with such a ``.stoi`` dict, or
    :class:`polyvse.text.vocab.Vocabulary` (``__contains__`` + ``token_to_id``).

    Returns ``(index_pairs, kept_pairs)``: a LongTensor of shape ``(n, 2)`` whose row ``r`` is
    ``(src_vocab[s], tgt_vocab[t])`` for the ``r``-th kept pair ``(s, t)``, and the kept word pairs in the
    same (input) order. This is AME's "filter them to the training words" step (AME Sec. 4.1).
    """
    get_src = _lookup(src_vocab, "src_vocab")
    get_tgt = _lookup(tgt_vocab, "tgt_vocab")
    kept: list[tuple[str, str]] = []
    idx: list[tuple[int, int]] = []
    for s, t in pairs:
        i = get_src(s)
        if i is None:
            continue
        j = get_tgt(t)
        if j is None:
            continue
        kept.append((s, t))
        idx.append((int(i), int(j)))
    index = torch.tensor(idx, dtype=torch.long) if idx else torch.empty((0, 2), dtype=torch.long)
    return index, kept


def muse_paths(
    root: str | os.PathLike, src: str, tgt: str, split: str | Sequence[str] = "full", *, check: bool = True
) -> Path | list[Path]:
    """Path of the MUSE ``src``-``tgt`` dictionary file ``split`` ("full", "0-5000" or "5000-6500").

    ``root`` is the MUSE folder (holding ``full/`` and ``splits_reconstructed/``) or a data root that has a
    ``muse/`` folder. "0-5000" and "5000-6500" are the RECONSTRUCTED split files (see the module docstring),
    not the official MUSE files. A list of names gives a list of paths. With ``check`` a missing file raises
    :class:`~polyvse.errors.DataError`. For training or evaluation pairs use :func:`muse_lexicon`.
    """
    if not isinstance(split, str):
        return [muse_paths(root, src, tgt, s, check=check) for s in split]  # type: ignore[misc]
    if split not in MUSE_SPLITS:
        raise ValueError(f"unknown MUSE split {split!r}; use one of {sorted(MUSE_SPLITS)}")
    base = Path(root)
    if not (base / "full").is_dir() and (base / "muse").is_dir():
        base = base / "muse"
    folder, suffix = MUSE_SPLITS[split]
    path = base / folder / f"{src}-{tgt}{suffix}.txt"
    if check and not path.is_file():
        raise DataError(
            f"MUSE {split!r} dictionary for {src}-{tgt} not found; expected the MUSE folder "
            f"(full/, splits_reconstructed/) at {base}",
            path,
        )
    return path


def split_lexicon(
    pairs: Sequence[tuple[str, str]], held_out: tuple[int, int] = HELD_OUT_RANKS
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(train pairs, test pairs)``: the one train/test split of a MUSE dictionary, disjoint by source word.

    Source words are ranked by their first line in ``pairs`` (MUSE's ``full`` files list them by
    frequency). The test part is every pair of the source words ranked ``held_out[0]`` to ``held_out[1] - 1``
    (default 5000-6499: MUSE's own test band, and exactly the pairs of the reconstructed
    ``*.5000-6500.txt`` files); the train part is every pair of every OTHER source word (the first 5000 and
    the rarer ones after 6500). So no test source word has a pair in the train part, whatever its
    translations; a target word may be in both parts (as in MUSE's split). Pair order is kept.
    """
    start, end = held_out
    if not 0 <= start < end:
        raise ValueError(f"held_out must be ranks (start, end) with 0 <= start < end, got {held_out}")
    rank: dict[str, int] = {}
    for s, _ in pairs:
        rank.setdefault(s, len(rank))
    train = [p for p in pairs if not start <= rank[p[0]] < end]
    test = [p for p in pairs if start <= rank[p[0]] < end]
    return train, test


def muse_lexicon(root: str | os.PathLike, src: str, tgt: str, part: str) -> list[tuple[str, str]]:
    """The ``part`` ("train" or "test") of the MUSE ``src``-``tgt`` dictionary: :func:`split_lexicon` of
    ``full/<src>-<tgt>.txt``. Models train on "train" only and are evaluated on "test". Works for every
    pair that has a ``full`` file (e.g. fr-de, which has no split files)."""
    if part not in LEXICON_PARTS:
        raise ValueError(f"unknown lexicon part {part!r}; use one of {', '.join(LEXICON_PARTS)}")
    train, test = split_lexicon(read_muse_dictionary(muse_paths(root, src, tgt, "full")))
    return train if part == "train" else test
