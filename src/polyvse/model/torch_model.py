"""The user-facing model: `polyvse.load(path)` -> PolyvseModel with encode_text / encode_image / similarity."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch

from ..errors import CheckpointError
from ..languages import ADAPTED, ZERO_SHOT, route_language
from ..util.batching import in_length_batches
from .checkpoint import Checkpoint
from .embedding_model import EmbeddingModel


class PolyvseModel(EmbeddingModel):
    """A trained joint embedding model plus everything needed to feed it raw text and raw photos (the
    EmbeddingModel interface, and photos: ``encode_image``).

    It computes on ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N`` or a torch.device; default: where the
    checkpoint's weights already are) and always returns numpy arrays.
    """

    def __init__(
        self,
        checkpoint: Checkpoint,
        batch_size: int = 256,
        device: str | torch.device | None = None,
        zero_shot: str | None = None,
    ):
        from ..device import module_device, resolve_device
        from .parts import zero_shot_option

        self.checkpoint = checkpoint
        self.device = module_device(checkpoint.model) if device is None else resolve_device(device)
        self.model = checkpoint.model.to(self.device).eval()
        self.captions = checkpoint.captions
        self.batch_size = batch_size
        self._extractor = None
        # a language the towers read but the model has no part for borrows this part (polyvse.model.zero_shot)
        self.zero_shot = zero_shot_option(zero_shot, checkpoint, bool(self.model.config.universal_dim))
        self._zero_shot_part = None

    @property
    def adapted_languages(self) -> dict:
        """Languages taught after training by `polyvse adapt` -> how (also in ``languages``)."""
        return dict(self.checkpoint.adapted_languages)

    @property
    def config(self):
        """The ModelConfig the checkpoint was built from."""
        return self.model.config

    @property
    def similarity_name(self) -> str:
        """The similarity module's name (a caller may swap the module), else the config's."""
        return str(getattr(self.model.similarity, "name", None) or self.model.config.similarity)

    def named_weights(self) -> dict:
        """Every weight by its state-dict name (what the index fingerprints hash): the model's, and an adapted
        language's tensors that are no model parameters (``Checkpoint.part_extras``), as the weights file holds
        them."""
        return {**self.model.state_dict(), **self.checkpoint.part_extras}

    @property
    def extractor(self):
        """The image backbone the model was trained on; a mismatch is an error, never silent garbage."""
        if self._extractor is None:
            from ..features.whole import checkpoint_extractor

            # a model trained on squashed photos (f8k-full) sees every other photo squashed the same way, as it
            # learnt them (benchmarks/bench_photo_aspect.py measures both ways). A whole fine-tuned backbone is the
            # model's own (polyvse.features.whole).
            ext = checkpoint_extractor(
                self.checkpoint.backbone,
                self.model,
                ten_crop=self.checkpoint.ten_crop,
                squash=self.checkpoint.squash_photos,
            )
            # a model trained on bf16 features (their key says so) reads bf16 features on CUDA; bf16 runs on CUDA
            # only, so elsewhere it reads the fp32 features they approximate
            trained_on = self.checkpoint.feature_key
            bf16 = trained_on.endswith(".bf16") and self.device.type == "cuda"
            ext.to(self.device, "bf16" if bf16 else "fp32")
            if ext.square_key != (trained_on if bf16 else trained_on.removesuffix(".bf16")):  # square when squashed
                raise CheckpointError(
                    f"the checkpoint was trained on image features {self.checkpoint.feature_key!r} but this "
                    f"installation's {self.checkpoint.backbone!r} extractor produces {ext.square_key!r}; "
                    "use the same backbone, weights and crop setting"
                )
            self._extractor = ext
        return self._extractor

    @torch.no_grad()
    def encode_text(self, texts: str | Sequence[str], lang: str) -> np.ndarray:
        if isinstance(texts, str):
            texts = [texts]
        status, code = route_language(self, lang)
        if status == ZERO_SHOT:
            return self._encode_zero_shot(list(texts), code)
        if status == ADAPTED:  # read by the towers that read it, listed or not
            if "subwords" in self.checkpoint.adapted_languages[code]:
                return self._encode_subwords(list(texts), code)
            return self.encode_ids(self.captions.ids_many(texts, code, unlisted=True), code)
        return self.encode_ids(self.captions.ids_many(texts, code), code)

    def _encode_subwords(self, texts: list[str], lang: str) -> np.ndarray:
        """An adapted language taught with a subword student: its Linear part plus the bag of its sentences'
        hashed n-grams (polyvse.model.subwords), then the shared head."""
        from .zero_shot import encode_through_part

        rows = self.captions.ids_many(texts, lang, unlisted=True)
        student = self.subword_student(lang)
        return self._in_batches(
            rows,
            lambda take: encode_through_part(
                self.model, self.captions.pad([rows[j] for j in take])[0], student, [texts[j] for j in take]
            ),
        )

    def _in_batches(self, rows: Sequence, encode) -> np.ndarray:
        """``encode(row indices)`` over batches of at most ``batch_size`` rows, the vectors in the rows' order. With
        an e5 tail the rows go by token count: a batch is padded to its longest row, and attention runs over that."""
        if not len(rows):
            return np.zeros((0, self.embed_dim), dtype=np.float32)
        lengths = [len(states) for states, _ in rows] if getattr(self.captions, "tail_layers", 0) else None
        return in_length_batches(lengths, len(rows), self.batch_size, lambda take: _numpy(encode(take)))

    def subword_student(self, lang: str):
        """The ``SubwordStudent`` of an adapted language taught with ``--subwords`` (built once, on the model's
        device)."""
        import copy

        from .parts import part_key
        from .subword_student import SubwordStudent
        from .subwords import TABLE, UP, SubwordSpec

        cache = self.__dict__.setdefault("_subword_students", {})
        if lang not in cache:
            spec = SubwordSpec.from_dict(self.checkpoint.adapted_languages[lang]["subwords"])
            extras = self.checkpoint.part_extras
            linear = copy.deepcopy(self.model.text_encoder.universal[lang])
            cache[lang] = SubwordStudent.from_tensors(
                linear, spec, extras[part_key(lang) + TABLE], extras[part_key(lang) + UP]
            ).to(self.model.device)
        return cache[lang]

    def _encode_zero_shot(self, texts: list[str], lang: str) -> np.ndarray:
        from .parts import trained_languages
        from .zero_shot import encode_through_part, fallback_part

        rows = self.captions.ids_many(texts, lang)
        if not self.model.needs_language:  # one shared head for every language
            return self.encode_ids(rows)
        if self._zero_shot_part is None:
            self._zero_shot_part = fallback_part(
                self.model.text_encoder, self.zero_shot, trained_languages(self.checkpoint)
            ).eval()
        return self._in_batches(
            rows,
            lambda take: encode_through_part(
                self.model, self.captions.pad([rows[j] for j in take])[0], self._zero_shot_part
            ),
        )

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
        return self._in_batches(
            id_lists,
            lambda take: self.model.encode_text_ids(
                *self.captions.pad([id_lists[j] for j in take]), None if langs is None else [langs[j] for j in take]
            ),
        )

    @torch.no_grad()
    def encode_image_features(self, feats: np.ndarray | torch.Tensor) -> np.ndarray:
        feats = _tensor(feats)
        if feats.ndim != 2 or feats.shape[1] != self.model.config.image_dim:
            raise CheckpointError(
                f"image features of shape {tuple(feats.shape)} do not fit this model, which "
                f"expects (n, {self.model.config.image_dim}) from {self.checkpoint.backbone}"
            )
        return _numpy(self.model.encode_image_features(feats))

    @torch.no_grad()
    def encode_image(self, photos) -> np.ndarray:
        """Photos as paths or PIL images; raw photos go through the backbone the model was trained with."""
        from ..features.images import load_image

        if isinstance(photos, (str, os.PathLike)) or hasattr(photos, "convert"):
            photos = [photos]
        images = [p if hasattr(p, "convert") else load_image(p) for p in photos]
        feats = self.extractor.extract(images)
        return self.encode_image_features(feats)

    @torch.no_grad()
    def similarity(self, images: np.ndarray, texts: np.ndarray) -> np.ndarray:
        """Score matrix (len(images), len(texts)) under the model's similarity (cosine or order)."""
        a, b = _tensor(images).to(self.device), _tensor(texts).to(self.device)
        return _numpy(self.model.scores(a, b))

    @property
    def hubness(self):
        """The CSLS banks retrieval is scored against (polyvse.csls.banks), None when it is plain
        similarity."""
        return self.checkpoint.hubness

    @property
    def retrieval_scoring(self) -> str:
        """How photos and captions are ranked for each other: "csls" or the similarity's name."""
        return "csls" if self.hubness is not None else self.similarity_name

    @torch.no_grad()
    def retrieval_scores(self, images: np.ndarray, texts: np.ndarray, lang: str | None = None) -> np.ndarray:
        """Score matrix (len(images), len(texts)) for image<->text retrieval with captions in ``lang``: CSLS
        against the checkpoint's banks when it has them (``lang`` picks the caption bank; None or a language
        without one: the pooled bank), else :meth:`similarity`."""
        if self.hubness is None:
            return self.similarity(images, texts)
        return _numpy(self.hubness.scores(_tensor(images), _tensor(texts), lang))


def _tensor(x) -> torch.Tensor:
    """float32 tensor from a numpy array, a sequence or a tensor (which stays on its device)."""
    if isinstance(x, torch.Tensor):
        return x.float()
    return torch.as_tensor(np.asarray(x, dtype=np.float32))


def _numpy(x: torch.Tensor) -> np.ndarray:
    return x.float().cpu().numpy().astype(np.float32, copy=False)
