"""Caption slots of a tuple: for each owner (a photo, or a text-only tuple) the captions of each language,
and the draw of ``quotas[lang]`` of them per epoch. Shared by every tuple sampler so they draw alike."""

from __future__ import annotations

import numpy as np


def slot_languages(quotas: dict[str, int]) -> list[str]:
    """The language of each slot of a tuple: ``quotas[lang]`` slots per language, in the quotas' order."""
    return [lang for lang, q in quotas.items() for _ in range(q)]


class CaptionSlots:
    """Captions grouped by owner and language; ``draw`` fills an (n, S) slot array, S = sum(quotas).

    ``owners`` are the owners (sorted) that have at least one caption in a quota language; positions into
    ``owners`` index ``captions``, where ``captions[i][lang]`` lists the caption indices of owner i.
    """

    def __init__(self, caption_owner, caption_lang, quotas: dict[str, int]):
        if not quotas or any(int(q) < 1 for q in quotas.values()):
            raise ValueError(f"quotas must map languages to positive counts, got {quotas!r}")
        self.quotas = {lang: int(q) for lang, q in quotas.items()}
        self.slot_langs = slot_languages(self.quotas)
        by_owner: dict[int, dict[str, list[int]]] = {}
        for idx, (owner, lang) in enumerate(zip(np.asarray(caption_owner).tolist(), caption_lang)):
            if lang in self.quotas:
                by_owner.setdefault(int(owner), {}).setdefault(lang, []).append(idx)
        self.owners = np.array(sorted(by_owner), dtype=np.int64)
        self.captions = [by_owner[int(o)] for o in self.owners]

    def draw(self, rng: np.random.Generator, positions) -> np.ndarray:
        """(len(positions), S) caption indices for owners ``self.owners[positions]``: per owner and language,
        up to the quota drawn without replacement; -1 where the owner has fewer captions."""
        slots = np.full((len(positions), len(self.slot_langs)), -1, dtype=np.int64)
        for row, p in enumerate(positions):
            col = 0
            for lang, q in self.quotas.items():
                caps = self.captions[p].get(lang, [])
                chosen = rng.permutation(len(caps))[:q] if caps else []
                for j, c in enumerate(chosen):
                    slots[row, col + j] = caps[c]
                col += q
        return slots
