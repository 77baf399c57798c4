"""The user-facing model: `polyvse.load(path)` -> PolyvseModel with encode_text / encode_image / similarity."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from .checkpoint import Checkpoint, load_checkpoint
from .errors import CheckpointError
from .languages import check_language


class PolyvseModel:
    """A trained joint embedding model plus everything needed to feed it raw text and raw photos."""

    def __init__(self, checkpoint: Checkpoint, batch_size: int = 256):
        self.checkpoint = checkpoint
        self.model = checkpoint.model.eval()
        self.captions = checkpoint.captions
        self.batch_size = batch_size
        self._extractor = None

    @property
    def languages(self) -> list[str]:
        return list(self.checkpoint.languages)

    @property
    def embed_dim(self) -> int:
        return self.model.config.embed_dim

    @property
    def extractor(self):
        """The image backbone the model was trained on; a mismatch is an error, never silent garbage."""
        if self._extractor is None:
            from .features.extractor import get_extractor

            ext = get_extractor(self.checkpoint.backbone, ten_crop=self.checkpoint.ten_crop)
            if ext.key != self.checkpoint.feature_key:
                raise CheckpointError(
                    f"the checkpoint was trained on image features {self.checkpoint.feature_key!r} but this "
                    f"installation's {self.checkpoint.backbone!r} extractor produces {ext.key!r}; "
                    "use the same backbone, weights and crop setting"
                )
            self._extractor = ext
        return self._extractor

    @torch.no_grad()
    def encode_text(self, texts: str | Sequence[str], lang: str) -> np.ndarray:
        lang = check_language(lang)
        if lang not in self.languages:
            raise CheckpointError(
                f"this model was trained on {', '.join(self.languages)}, not on {lang!r}: "
                f"query it in one of those languages or train a model that includes {lang!r}"
            )
        if isinstance(texts, str):
            texts = [texts]
        return self.encode_ids(self.captions.ids_many(texts, lang), lang)

    def infer_languages(self, id_lists: Sequence[Sequence[int]]) -> list[str]:
        """Each caption's language from its language-tagged word ids (``de:hund``); a caption of unknown
        words only falls back to the model's first language -- pass ``langs`` to encode_ids instead."""
        vocab, default = self.captions.vocab, self.languages[0]
        out = []
        for ids in id_lists:
            lang = default
            for i in ids:
                token = vocab.id_to_token(int(i))
                if ":" in token and token.split(":", 1)[0] in self.languages:
                    lang = token.split(":", 1)[0]
                    break
            out.append(lang)
        return out

    @torch.no_grad()
    def encode_ids(self, id_lists: Sequence[Sequence[int]], langs: str | Sequence[str] | None = None) -> np.ndarray:
        """Embed captions given as word ids. ``langs`` (one code, or one per caption) feeds models with
        per-language parts; without it their language is read off the language-tagged ids."""
        if isinstance(langs, str):
            langs = [langs] * len(id_lists)
        if langs is None and getattr(self.model, "needs_language", False):
            langs = self.infer_languages(id_lists)
        out = []
        for i in range(0, len(id_lists), self.batch_size):
            ids, lengths = self.captions.pad(id_lists[i: i + self.batch_size])
            part = None if langs is None else list(langs[i: i + self.batch_size])
            out.append(self.model.encode_text_ids(ids, lengths, part))
        if not out:
            return np.zeros((0, self.embed_dim), dtype=np.float32)
        return torch.cat(out).numpy().astype(np.float32, copy=False)

    @torch.no_grad()
    def encode_image_features(self, feats: np.ndarray | torch.Tensor) -> np.ndarray:
        feats = torch.as_tensor(np.asarray(feats, dtype=np.float32))
        if feats.ndim != 2 or feats.shape[1] != self.model.config.image_dim:
            raise CheckpointError(f"image features of shape {tuple(feats.shape)} do not fit this model, which "
                                  f"expects (n, {self.model.config.image_dim}) from {self.checkpoint.backbone}")
        return self.model.encode_image_features(feats).numpy().astype(np.float32, copy=False)

    @torch.no_grad()
    def encode_image(self, photos) -> np.ndarray:
        """Photos as paths or PIL images; raw photos go through the backbone the model was trained with."""
        from .features.images import load_image

        if isinstance(photos, (str, os.PathLike)) or hasattr(photos, "convert"):
            photos = [photos]
        images = [p if hasattr(p, "convert") else load_image(p) for p in photos]
        feats = self.extractor.extract(images)
        return self.encode_image_features(feats)

    @torch.no_grad()
    def similarity(self, images: np.ndarray, texts: np.ndarray) -> np.ndarray:
        """Score matrix (len(images), len(texts)) under the model's similarity (cosine or order)."""
        a = torch.as_tensor(np.asarray(images, dtype=np.float32))
        b = torch.as_tensor(np.asarray(texts, dtype=np.float32))
        return self.model.scores(a, b).numpy()


def load(path: str | os.PathLike) -> PolyvseModel:
    return PolyvseModel(load_checkpoint(Path(path)))
