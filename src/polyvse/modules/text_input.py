"""From raw captions to padded word-id tensors: per-language tokenisation + one language-tagged vocabulary."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..languages import check_language
from ..text.tokenize import tokenize
from ..text.vocab import UNK, Vocabulary

if TYPE_CHECKING:
    import torch


def tag_tokens(tokens: Iterable[str], lang: str) -> list[str]:
    """`dog` in English and `dog` in Czech are different words: vocabulary keys carry the language."""
    return [f"{lang}:{t}" for t in tokens]


class CaptionEncoder:
    """Tokenises captions of a language and maps them to ids of a language-tagged vocabulary."""

    def __init__(self, vocab: Vocabulary, max_len: int = 64, lowercase: bool = True):
        self.vocab = vocab
        self.max_len = max_len
        self.lowercase = lowercase

    @classmethod
    def build(
        cls, texts_by_lang: dict[str, Sequence[str]], min_count: int = 1, max_len: int = 64, lowercase: bool = True
    ) -> CaptionEncoder:
        """Build the vocabulary from the given texts; pass training captions only."""
        token_lists = [
            tag_tokens(tokenize(t, lang, lowercase=lowercase), lang)
            for lang, texts in texts_by_lang.items()
            for t in texts
        ]
        return cls(Vocabulary.build(token_lists, min_count=min_count), max_len=max_len, lowercase=lowercase)

    def ids(self, text: str, lang: str) -> list[int]:
        lang = check_language(lang)
        ids = self.vocab.encode(tag_tokens(tokenize(text, lang, lowercase=self.lowercase), lang))
        return ids[: self.max_len] or [UNK]  # an empty caption still needs one step for the GRU

    def ids_many(self, texts: Sequence[str], lang: str) -> list[list[int]]:
        return [self.ids(t, lang) for t in texts]

    @staticmethod
    def pad(id_lists: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        import torch  # here, not at the top: the numpy text-query path reads ids without torch

        lengths = torch.tensor([len(x) for x in id_lists], dtype=torch.long)
        out = torch.zeros(len(id_lists), int(lengths.max()) if len(id_lists) else 0, dtype=torch.long)
        for i, x in enumerate(id_lists):
            out[i, : len(x)] = torch.as_tensor(x, dtype=torch.long)
        return out, lengths

    def fingerprint(self) -> str:
        """What the model's input ids mean: the vocabulary's fingerprint."""
        return self.vocab.fingerprint()

    def to_dict(self) -> dict:
        return {
            "vocab": self.vocab.to_dict(),
            "max_len": self.max_len,
            "lowercase": self.lowercase,
            "tokenizer": "polyvse.text.tokenize",
            "tagging": "lang:token",
        }

    @classmethod
    def from_dict(cls, d: dict) -> CaptionEncoder:
        return cls(Vocabulary.from_dict(d["vocab"]), max_len=d["max_len"], lowercase=d["lowercase"])


def caption_inputs(encoder, caps) -> list:
    """Each caption's model input (word ids, or a sentence vector) from ``encoder.ids_many``, called once per
    language so that a pretrained sentence encoder embeds in batches. ``caps``: records with .text and .lang."""
    out: list = [None] * len(caps)
    by_lang: dict[str, list[int]] = {}
    for i, c in enumerate(caps):
        by_lang.setdefault(c.lang, []).append(i)
    for lang, idx in by_lang.items():
        for i, x in zip(idx, encoder.ids_many([caps[i].text for i in idx], lang)):
            out[i] = x
    return out
