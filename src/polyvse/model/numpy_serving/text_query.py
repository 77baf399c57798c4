"""A word-level checkpoint's text branch run in numpy: text queries without torch.

A text search embeds one short caption. Importing torch and building the whole model (image head included)
takes seconds on a small CPU, far longer than the query itself; ``TextQueryModel`` reads the checkpoint's
config and its safetensors weights with ``safetensors.numpy`` and runs the same arithmetic as
``polyvse.modules.text_encoder.TextEncoder`` in eval mode (the ``EmbeddingModel`` interface of
``polyvse.model.torch_model.PolyvseModel``, text only):

    word ids -> embedding rows -> [Translator map (x @ M)] -> [MULE universal projection]
             -> GRU / LSTM last hidden state (layers, both directions) or the mean of the word vectors
             -> Linear into the joint space -> [L2-normalised for order similarity]

shared or per language, as the config says. tests/test_text_query.py checks its vectors against the torch
model's for every kind of word-level text branch. It has the same index fingerprint as ``polyvse.load`` of
the same checkpoint, so an index accepts it exactly when it accepts the torch model.

A frozen pretrained sentence encoder's checkpoint (e5, USE) has its own numpy model, ``polyvse.model.numpy_serving.tower_query``;
``TextQueryModel.load`` returns None for such checkpoints. ``NumpyQueryModel`` is what both share: the checkpoint
read without torch, its weights, the fingerprint's view of them and the similarity.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from ...errors import CheckpointError
from ...languages import route_language
from ...modules.config import ModelConfig
from ..checkpoint import HUBNESS_PREFIX, CheckpointConfig, is_pretrained_text, pop_hubness_banks, read_checkpoint_config
from ..embedding_model import EmbeddingModel

_PREFIX = "text_encoder."


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _rnn_direction(cell: str, x: np.ndarray, w_ih, w_hh, b_ih, b_hh) -> np.ndarray:
    """One direction of one layer of torch's GRU / LSTM (gate order r,z,n / i,f,g,o): all hidden states."""
    hidden = w_hh.shape[1]
    inputs = x @ w_ih.T + b_ih  # every step's input part at once
    h = np.zeros(hidden, dtype=np.float32)
    c = np.zeros(hidden, dtype=np.float32)
    out = np.empty((x.shape[0], hidden), dtype=np.float32)
    for t in range(x.shape[0]):
        gi, gh = inputs[t], w_hh @ h + b_hh
        if cell == "gru":
            r = _sigmoid(gi[:hidden] + gh[:hidden])
            z = _sigmoid(gi[hidden : 2 * hidden] + gh[hidden : 2 * hidden])
            n = np.tanh(gi[2 * hidden :] + r * gh[2 * hidden :])
            h = (1.0 - z) * n + z * h
        else:
            g = gi + gh
            i, f = _sigmoid(g[:hidden]), _sigmoid(g[hidden : 2 * hidden])
            c = f * c + i * np.tanh(g[2 * hidden : 3 * hidden])
            h = _sigmoid(g[3 * hidden :]) * np.tanh(c)
        out[t] = h
    return out


class _Branch:
    """A pooler (recurrent or mean) + the projection into the joint space, from weights under ``prefix``."""

    def __init__(self, config: ModelConfig, weights: dict[str, np.ndarray], prefix: str):
        self.cell = config.text_encoder
        self.layers = config.num_layers
        self.directions = ("", "_reverse") if config.bidirectional else ("",)
        self.rnn = {name[len(prefix) + 4 :]: w for name, w in weights.items() if name.startswith(prefix + "rnn.")}
        self.proj_w, self.proj_b = weights[prefix + "proj.weight"], weights[prefix + "proj.bias"]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.cell == "mean":
            pooled = x.mean(axis=0)
        else:
            finals = []
            for layer in range(self.layers):
                outs = []
                for suffix in self.directions:
                    w = [
                        self.rnn[f"{kind}_l{layer}{suffix}"]
                        for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
                    ]
                    steps = x[::-1] if suffix else x
                    hs = _rnn_direction(self.cell, steps, *w)
                    finals.append(hs[-1])
                    outs.append(hs[::-1] if suffix else hs)
                x = np.concatenate(outs, axis=1)
            # torch's h[-2], h[-1]: the last layer's final state of each direction
            pooled = np.concatenate(finals[-len(self.directions) :])
        return pooled @ self.proj_w.T + self.proj_b


class LazyMapping(Mapping):
    """A read-only mapping over ``names`` whose values ``read(name)`` gives when first asked for, then kept."""

    def __init__(self, names: Sequence[str], read):
        self._names, self._known, self._load, self._read = list(names), set(names), read, {}

    def __getitem__(self, name: str):
        if name not in self._read:
            if name not in self._known:
                raise KeyError(name)
            self._read[name] = self._load(name)
        return self._read[name]

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class LazyTensors(LazyMapping):
    """A safetensors file's tensors (less those under ``skip``) as a read-only mapping whose arrays are read when
    first asked for: a query in one language never reads another adapted language's subword table (32 MiB each),
    which reading the whole file would cost every fresh process."""

    def __init__(self, path: str | os.PathLike, skip: str = HUBNESS_PREFIX):
        from safetensors import safe_open

        self.path = str(path)
        with safe_open(self.path, "np") as f:
            names = [name for name in f.keys() if not name.startswith(skip)]
        super().__init__(names, self._tensor)

    def _tensor(self, name: str) -> np.ndarray:
        from safetensors import safe_open

        try:
            with safe_open(self.path, "np") as f:
                return f.get_tensor(name)
        except Exception as exc:  # safetensors raises several types for truncated/corrupt files
            raise CheckpointError(f"{self.path}: cannot load weights ({exc})") from exc


class Prefixed(Mapping):
    """The entries of ``weights`` under ``prefix``, named without it; a view, so lazy weights stay unread."""

    def __init__(self, weights: Mapping[str, np.ndarray], prefix: str):
        self.weights, self.prefix = weights, prefix

    def __getitem__(self, name: str) -> np.ndarray:
        return self.weights[self.prefix + name]

    def __iter__(self):
        return (name[len(self.prefix) :] for name in self.weights if name.startswith(self.prefix))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class NumpyQueryModel(EmbeddingModel):
    """A checkpoint's text side in numpy (no ``encode_image``): its config read without torch and its safetensors
    weights as numpy arrays."""

    def __init__(self, checkpoint: CheckpointConfig, weights: Mapping[str, np.ndarray]):
        self.checkpoint = checkpoint
        self.captions = checkpoint.captions
        # CSLS banks (polyvse.csls.banks) are no weights: outside named_weights, as in polyvse.load
        if isinstance(weights, LazyTensors):  # read_weights: the banks left out, each array read when needed
            self._weights = weights
        else:  # weights given otherwise may hold the banks
            self._weights = dict(weights)
            pop_hubness_banks(self._weights)
        self.hubness = None
        if checkpoint.retrieval:  # each bank read from the file when a query first needs it
            from ...csls.search import SearchHubness
            from ..checkpoint import HubnessBankFile

            self.hubness = SearchHubness.from_bank_file(checkpoint.retrieval["k"], HubnessBankFile(checkpoint.weights))

    #: the checkpoint's ONNX image encoder (polyvse.features.onnx_encoder), which
    #: ``polyvse.model.loading.photo_model`` attaches: photos embedded without torch
    image_encoder = None

    def encode_image(self, photos) -> np.ndarray:
        """Photos as paths or PIL images -> ``(n, embed_dim)``, as ``PolyvseModel.encode_image``, through the
        image encoder."""
        if self.image_encoder is None:
            raise CheckpointError(
                f"{self.checkpoint.path}: this model was loaded for text only; load it with "
                "polyvse.model.loading.photo_model to embed photos"
            )
        from ...features.images import load_image

        if isinstance(photos, (str, os.PathLike)) or hasattr(photos, "convert"):
            photos = [photos]
        return self.image_encoder.encode([p if hasattr(p, "convert") else load_image(p) for p in photos])

    @staticmethod
    def read_weights(checkpoint: CheckpointConfig) -> Mapping[str, np.ndarray]:
        """The model's weights, less the CSLS banks (``NumpyQueryModel.hubness`` reads those when needed), each
        read when first used (``LazyTensors``)."""
        try:
            return LazyTensors(checkpoint.weights)
        except Exception as exc:  # safetensors raises several types for truncated/corrupt files
            raise CheckpointError(f"{checkpoint.weights}: cannot load weights ({exc})") from exc

    @property
    def config(self) -> ModelConfig:
        return self.checkpoint.model

    def named_weights(self) -> Mapping[str, np.ndarray]:
        """As ``PolyvseModel.named_weights``: the weights file's tensors but the CSLS banks; lazy weights are read
        only when the fingerprint asks for them (an index's check reads no adapted subword table)."""
        return self._weights

    def similarity(self, images: np.ndarray, texts: np.ndarray) -> np.ndarray:
        """Score matrix (len(images), len(texts)), as ``PolyvseModel.similarity``."""
        a = np.asarray(images, dtype=np.float32)
        b = np.asarray(texts, dtype=np.float32)
        if self.config.similarity == "cosine":

            def unit(x):
                return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

            return unit(a) @ unit(b).T
        # OrderSimilarity: -||max(0, |b| - |a|)||^2, a row of images at a time (no (n, m, d) array)
        a, b = np.abs(a), np.abs(b)
        return -np.stack([np.square(np.maximum(b - row, 0.0)).sum(axis=1) for row in a]).reshape(len(a), len(b))

    def joint(self, out: np.ndarray) -> np.ndarray:
        """Rows into the joint space as ``JointEmbeddingModel._joint``: order embeddings are unit vectors."""
        if self.config.similarity == "order":
            out = out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
        return out


class TextQueryModel(NumpyQueryModel):
    """The text side of a word-level checkpoint (module docstring)."""

    def __init__(self, checkpoint: CheckpointConfig, weights: Mapping[str, np.ndarray]):
        config = checkpoint.model
        if config.text_encoder not in ("gru", "lstm", "mean"):
            raise CheckpointError(
                f"{checkpoint.path}: text_encoder {config.text_encoder!r} has no numpy path; load it with polyvse.load"
            )
        super().__init__(checkpoint, weights)
        w = {name[len(_PREFIX) :]: a for name, a in weights.items() if name.startswith(_PREFIX)}
        self._embed = w["embed.weight"]
        self._maps = {lang: w[f"language_map.maps.{lang}"] for lang in config.language_map}
        self._universal = (
            {lang: (w[f"universal.{lang}.weight"], w[f"universal.{lang}.bias"]) for lang in config.languages}
            if config.universal_dim
            else {}
        )
        if config.text_sharing == "shared":
            self._branches = {None: _Branch(config, w, "")}
        else:
            self._branches = {lang: _Branch(config, w, f"branches.{lang}.") for lang in config.languages}

    @classmethod
    def load(cls, path: str | os.PathLike) -> TextQueryModel | None:
        """The numpy text model of a checkpoint folder, or None when its text branch is a pretrained encoder."""
        if is_pretrained_text(path):
            return None
        checkpoint = read_checkpoint_config(path)
        return cls(checkpoint, cls.read_weights(checkpoint))

    def encode_text(self, texts: str | Sequence[str], lang: str) -> np.ndarray:
        _, lang = route_language(self, lang)  # a word-level model serves its trained languages only
        if isinstance(texts, str):
            texts = [texts]
        rows = [self._encode_ids(ids, lang) for ids in self.captions.ids_many(texts, lang)]
        return np.stack(rows).astype(np.float32, copy=False) if rows else np.zeros((0, self.embed_dim), np.float32)

    def _encode_ids(self, ids: Sequence[int], lang: str) -> np.ndarray:
        x = self._embed[np.asarray(ids, dtype=np.int64)]
        if lang in self._maps:
            x = x @ self._maps[lang]
        if self._universal:
            weight, bias = self._universal[lang]
            x = x @ weight.T + bias
        return self.joint(self._branches[lang if self.config.text_sharing != "shared" else None](x))
