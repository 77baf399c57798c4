"""Token vocabularies: token <-> id, with PAD=0 and UNK=1.

A Vocabulary is built from *training text only*. `Vocabulary.build` takes whatever token lists it
is given and has no notion of splits: the caller must pass the tokens of training captions
(e.g. `corpus.filter(...)` of the train split, or a text-only training corpus) and never those of
validation or test captions, or evaluation words leak into the model's input space.

Ids are assigned by descending count, ties broken by the token itself (code-point order), so the
same input always gives the same vocabulary and the same `fingerprint()`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from ..errors import DataError

__all__ = ["Vocabulary", "PAD", "UNK", "PAD_TOKEN", "UNK_TOKEN"]

PAD = 0
UNK = 1
PAD_TOKEN = "<pad>"
UNK_TOKEN = "<unk>"
_FORMAT = "polyvse-vocabulary"
_VERSION = 1


class Vocabulary:
    """An ordered list of tokens; position = id. Index 0 is PAD, index 1 is UNK."""

    PAD = PAD
    UNK = UNK

    def __init__(self, tokens: Sequence[str] = ()):
        """`tokens` are the regular tokens (ids 2, 3, ...), without the PAD/UNK specials."""
        self._itos: list[str] = [PAD_TOKEN, UNK_TOKEN]
        self._stoi: dict[str, int] = {PAD_TOKEN: PAD, UNK_TOKEN: UNK}
        for tok in tokens:
            if not isinstance(tok, str) or not tok:
                raise ValueError(f"vocabulary tokens must be non-empty strings, got {tok!r}")
            if tok in self._stoi:
                raise ValueError(f"duplicate token {tok!r} in vocabulary")
            self._stoi[tok] = len(self._itos)
            self._itos.append(tok)

    # -- building -------------------------------------------------------------------------------
    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], min_count: int = 1, max_size: int | None = None) -> Vocabulary:
        """Count tokens over `token_lists` (training text only!) and keep the frequent ones.

        min_count: keep tokens seen at least this often. max_size: keep at most this many regular
        tokens (PAD and UNK come on top). Tokens equal to the special strings are ignored.
        """
        if min_count < 1:
            raise ValueError("min_count must be >= 1")
        if max_size is not None and max_size < 0:
            raise ValueError("max_size must be >= 0 or None")
        counts: Counter[str] = Counter()
        for tokens in token_lists:
            if isinstance(tokens, str):
                raise TypeError("Vocabulary.build takes lists of tokens, not strings; tokenize first")
            counts.update(tokens)
        counts.pop(PAD_TOKEN, None)
        counts.pop(UNK_TOKEN, None)
        counts.pop("", None)
        kept = sorted((t for t, c in counts.items() if c >= min_count), key=lambda t: (-counts[t], t))
        if max_size is not None:
            kept = kept[:max_size]
        return cls(kept)

    # -- lookup ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._itos)

    def __contains__(self, token: object) -> bool:
        return token in self._stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self._itos == other._itos

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} entries, fingerprint={self.fingerprint()[:12]})"

    @property
    def tokens(self) -> list[str]:
        """All entries in id order, specials included (a copy)."""
        return list(self._itos)

    def token_to_id(self, token: str) -> int:
        return self._stoi.get(token, UNK)

    def id_to_token(self, idx: int) -> str:
        return self._itos[idx]

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Ids of `tokens`; unknown tokens map to UNK (1)."""
        get = self._stoi.get
        return [get(t, UNK) for t in tokens]

    def decode(self, ids: Iterable[int], *, skip_pad: bool = True) -> list[str]:
        return [self._itos[i] for i in ids if not (skip_pad and i == PAD)]

    # -- persistence ----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """A JSON-able description; `from_dict(to_dict())` gives an equal vocabulary."""
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "pad": PAD_TOKEN,
            "unk": UNK_TOKEN,
            "tokens": self._itos[2:],
            "fingerprint": self.fingerprint(),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> Vocabulary:
        if not isinstance(data, Mapping) or data.get("format") != _FORMAT:
            raise DataError(
                "not a polyvse vocabulary (missing format marker); pass the dict written by Vocabulary.to_dict()"
            )
        if data.get("version") != _VERSION:
            raise DataError(
                f"vocabulary version {data.get('version')!r} is not supported (this polyvse reads version {_VERSION})"
            )
        if data.get("pad") != PAD_TOKEN or data.get("unk") != UNK_TOKEN:
            raise DataError("vocabulary has different special tokens; it was not written by this polyvse")
        tokens = data.get("tokens")
        if not isinstance(tokens, list):
            raise DataError("vocabulary 'tokens' must be a list of strings")
        try:
            vocab = cls(tokens)
        except ValueError as exc:
            raise DataError(f"corrupt vocabulary: {exc}") from None
        stored = data.get("fingerprint")
        if stored is not None and stored != vocab.fingerprint():
            raise DataError("vocabulary fingerprint does not match its tokens (file edited or corrupt)")
        return vocab

    def fingerprint(self) -> str:
        """sha256 (hex) of the id -> token mapping; equal fingerprints mean identical vocabularies."""
        payload = json.dumps(self._itos, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()
