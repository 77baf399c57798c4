"""A checkpoint's image encoder through ONNX Runtime: photos into the joint space without torch.

``polyvse export onnx`` (and every checkpoint the trainer or ``polyvse adapt`` saves) writes, beside the weights:

    image_encoder.onnx   the whole image side as one graph: normalised crops ``(n, crops, 3, H, W)`` -> the
                         frozen backbone (or the fine-tuned whole backbone), the fine-tuned tail, the crops'
                         mean, the image head -> ``(n, embed_dim)`` joint-space vectors (as ``encode_image``)
    image_encoder.json   how photos become those crops (resize, crop, mean, std, ten crops), the feature key the
                         graph reproduces, and a digest of the checkpoint's image weights it was exported from

The preprocessing is redone here in PIL + numpy, the same numbers as ``polyvse.features.extractor.Preprocess``
(which resizes through torchvision: for PIL photos, PIL's own resize at the size torchvision computes). A graph
whose digest no longer matches the checkpoint's image weights is refused, so a checkpoint changed after its export
never embeds photos with stale weights. tests/test_onnx_encoder.py holds the graph to the torch model's vectors
and top-10 on real photos.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import CheckpointError, DataError
from .limits import DEFAULT_MAX_PIXELS

__all__ = [
    "ENCODER_FILE",
    "ENCODER_META",
    "FORMAT",
    "OnnxImageEncoder",
    "PhotoEmbeddings",
    "encoder_choice",
    "image_weights_digest",
    "set_threads",
]

ENCODER_FILE = "image_encoder.onnx"
ENCODER_META = "image_encoder.json"
FORMAT = 1
#: the weights-file prefixes of a checkpoint's image side (the backbone tail and the head)
IMAGE_PREFIXES = ("image_tail.", "image_head.")
#: POLYVSE_IMAGE_ENCODER: "torch" or "onnx" forces how photos are embedded; "auto" (default) takes torch where it is
#: installed (a checkpoint's own model) and the ONNX graph where it is not
ENCODER_ENV = "POLYVSE_IMAGE_ENCODER"
_THREADS: dict[str, int | None] = {"n": None}


def set_threads(n: int | None) -> None:
    """Threads of the ONNX Runtime sessions made from now on (None: ONNX Runtime's default, every core)."""
    _THREADS["n"] = None if n is None else max(1, int(n))


def _env_threads() -> int | None:
    """OMP_NUM_THREADS where set to a positive number: ONNX Runtime's own pool follows it as torch's does."""
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return n if n > 0 else None


def encoder_choice() -> str:
    """POLYVSE_IMAGE_ENCODER checked: auto, torch or onnx."""
    value = os.environ.get(ENCODER_ENV, "auto").strip().lower() or "auto"
    if value not in ("auto", "torch", "onnx"):
        raise DataError(f"${ENCODER_ENV}={value!r}: give auto, torch or onnx")
    return value


def image_weights_digest(weights: str | os.PathLike) -> str:
    """A digest of the checkpoint's image-side tensors (names, dtypes, shapes, bytes) read from its weights file,
    so a graph is tied to the weights it was exported from whatever wrote them (torch or numpy)."""
    from safetensors import safe_open

    h = hashlib.sha256()
    try:
        with safe_open(str(weights), "np") as f:
            for name in sorted(n for n in f.keys() if n.startswith(IMAGE_PREFIXES)):
                t = np.ascontiguousarray(f.get_tensor(name))
                h.update(f"{name}:{t.dtype.str}:{t.shape}".encode())
                h.update(t.tobytes())
    except Exception as exc:  # safetensors raises several types for truncated/corrupt files
        raise CheckpointError(f"{weights}: cannot read the image weights ({exc})") from exc
    return h.hexdigest()[:32]


class NumpyPreprocess:
    """A photo -> its ``(crops, 3, crop, crop)`` float32 input, as ``Preprocess`` computes it, without torch."""

    _PIL_FILTERS = {"nearest": 0, "bilinear": 2, "bicubic": 3, "box": 4, "hamming": 5, "lanczos": 1}

    def __init__(
        self,
        resize: int,
        crop: int,
        mean: Sequence[float],
        std: Sequence[float],
        interpolation: str = "bilinear",
        ten_crop: bool = False,
        squash: bool = False,
    ):
        if interpolation not in self._PIL_FILTERS:
            raise CheckpointError(
                f"image_encoder.json: interpolation {interpolation!r} is not one of {', '.join(self._PIL_FILTERS)}"
            )
        self.resize, self.crop = int(resize), int(crop)
        self.filter = self._PIL_FILTERS[interpolation]
        self.ten_crop, self.squash = bool(ten_crop), bool(squash)
        std_ = np.asarray(std, dtype=np.float32)
        self._scale = (1.0 / (255.0 * std_)).astype(np.float32)
        self._shift = (np.asarray(mean, dtype=np.float32) / std_).astype(np.float32)

    @property
    def crops(self) -> int:
        return 10 if self.ten_crop else 1

    def _size(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) after the resize: torchvision's rule for an int size (shorter side to ``resize``)."""
        if self.squash:
            return self.resize, self.resize
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = self.resize, int(self.resize * long / short)
        return (new_short, new_long) if width <= height else (new_long, new_short)

    def __call__(self, img) -> np.ndarray:
        if img.mode != "RGB":
            img = img.convert("RGB")
        size = self._size(*img.size)
        if size != img.size:  # torchvision hands back an image already at the size untouched
            img = img.resize(size, resample=self.filter)
        arr = np.asarray(img)
        c = self.crop
        h, w = arr.shape[:2]
        if h < c or w < c:
            raise ValueError(f"image {w}x{h} is smaller than the {c}x{c} crop")
        top, left = int(round((h - c) / 2.0)), int(round((w - c) / 2.0))
        crops = [arr[top : top + c, left : left + c]]
        if self.ten_crop:  # torchvision's ten_crop order: 4 corners + centre, then the same mirrored

            def five(a):
                return [
                    a[:c, :c],
                    a[:c, w - c :],
                    a[h - c :, :c],
                    a[h - c :, w - c :],
                    a[top : top + c, left : left + c],
                ]

            crops = five(arr) + five(arr[:, ::-1])
        out = np.stack([x.astype(np.float32) * self._scale - self._shift for x in crops])  # (crops, c, c, 3)
        return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


@dataclass
class PhotoEmbeddings:
    """What ``OnnxImageEncoder.embed_files`` gives, shaped like the feature cache's result for the index build:
    the vectors of the readable photos, their positions, the unreadable ones."""

    vectors: np.ndarray
    index: np.ndarray
    failures: list[tuple[str, str]] = field(default_factory=list)
    extracted: int = 0
    cached: int = 0  # photos embedded through ONNX are not cached: the graph runs from pixels to the vector


class OnnxImageEncoder:
    """A checkpoint folder's ``image_encoder.onnx`` with its preprocessing (module docstring)."""

    def __init__(self, checkpoint: str | os.PathLike, squash: bool | None = None, check_weights: bool = True):
        self.root = Path(checkpoint)
        self.path, meta_path = self.root / ENCODER_FILE, self.root / ENCODER_META
        if not self.path.is_file() or not meta_path.is_file():
            raise CheckpointError(missing_message(self.root))
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if meta.get("format") != FORMAT:
                raise CheckpointError(
                    f"{meta_path}: image encoder format {meta.get('format')!r}, this polyvse "
                    f"reads {FORMAT}; export it again: polyvse export onnx --checkpoint {self.root}"
                )
            pre = meta["preprocess"]
            self.preprocess = NumpyPreprocess(
                pre["resize"],
                pre["crop"],
                pre["mean"],
                pre["std"],
                pre.get("interpolation", "bilinear"),
                bool(pre["ten_crop"]),
                bool(pre["squash"]) if squash is None else bool(squash),
            )
            self.embed_dim = int(meta["embed_dim"])
            self.feature_key = str(meta["feature_key"])
            self.digest = str(meta["image_weights"])
        except CheckpointError:
            raise
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(
                f"{meta_path}: unreadable ({exc}); export it again: polyvse export onnx --checkpoint {self.root}"
            ) from exc
        self.meta = meta
        if check_weights and self.digest != image_weights_digest(self.root / "model.safetensors"):
            raise CheckpointError(
                f"{self.path} was exported from other image weights than the checkpoint's "
                f"model.safetensors; export it again: polyvse export onnx --checkpoint {self.root}"
            )
        self._session = None

    @property
    def session(self):
        if self._session is None:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            threads = _THREADS["n"] or _env_threads()
            if threads is not None:
                opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            try:
                self._session = ort.InferenceSession(
                    str(self.path), sess_options=opts, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:  # onnxruntime raises its own types for a bad file
                raise CheckpointError(
                    f"{self.path}: ONNX Runtime cannot load it ({exc}); export it again: "
                    f"polyvse export onnx --checkpoint {self.root}"
                ) from exc
            self._input = self._session.get_inputs()[0].name
        return self._session

    def run(self, pixels: np.ndarray) -> np.ndarray:
        """``(n, crops, 3, H, W)`` preprocessed crops -> ``(n, embed_dim)`` float32 joint-space vectors."""
        if len(pixels) == 0:
            return np.zeros((0, self.embed_dim), dtype=np.float32)
        session = self.session
        out = session.run(None, {self._input: np.ascontiguousarray(pixels, dtype=np.float32)})[0]
        return np.asarray(out, dtype=np.float32)

    def encode(self, images: Sequence, batch_size: int = 32) -> np.ndarray:
        """RGB PIL images -> ``(n, embed_dim)``: what ``PolyvseModel.encode_image`` gives for them."""
        parts = [
            self.run(np.stack([self.preprocess(img) for img in images[i : i + batch_size]]))
            for i in range(0, len(images), batch_size)
        ]
        return np.concatenate(parts) if parts else np.zeros((0, self.embed_dim), dtype=np.float32)

    def _decode(self, path: str, max_pixels: int | None):
        """(crops or None, reason or None) for one photo file; runs in the decoding threads."""
        from .images import load_image, read_image_bytes

        try:
            return self.preprocess(load_image(read_image_bytes(path), max_pixels, name=path)), None
        except DataError as exc:
            return None, exc.reason
        except Exception as exc:  # noqa: BLE001 - one photo never stops the build
            return None, f"{type(exc).__name__}: {exc}"

    def embed_files(
        self,
        paths: Sequence[str | os.PathLike],
        *,
        batch_size: int = 32,
        num_workers: int = 0,
        progress: bool = True,
        strict: bool = False,
        max_pixels: int | None = DEFAULT_MAX_PIXELS,
    ) -> PhotoEmbeddings:
        """Photo files -> their vectors; unreadable ones are reported (``strict``: the first stops it). Photos are
        decoded by ``num_workers`` threads (PIL decodes and resizes without the GIL) while the graph runs."""
        from ..util.progress import Progress

        paths = [os.fspath(p) for p in paths]
        batch_size = max(1, int(batch_size))
        rows, failures, parts = [], [], []
        pool = ThreadPoolExecutor(max(1, int(num_workers))) if num_workers and num_workers > 0 else None
        decode = (
            (lambda ps: pool.map(lambda p: self._decode(p, max_pixels), ps))
            if pool
            else (lambda ps: [self._decode(p, max_pixels) for p in ps])
        )
        try:
            with Progress(
                total=len(paths), desc="embedding photos (ONNX Runtime)", unit="photo", enabled=progress
            ) as bar:
                for start in range(0, len(paths), batch_size):
                    batch, ok = [], []
                    for j, (x, reason) in enumerate(decode(paths[start : start + batch_size])):
                        if x is None:
                            if strict:
                                raise DataError(reason, paths[start + j])
                            failures.append((paths[start + j], reason))
                        else:
                            batch.append(x)
                            ok.append(start + j)
                    if batch:
                        parts.append(self.run(np.stack(batch)))
                        rows.extend(ok)
                    bar.update(min(batch_size, len(paths) - start))
        finally:
            if pool is not None:
                pool.shutdown()
        vectors = np.concatenate(parts) if parts else np.zeros((0, self.embed_dim), dtype=np.float32)
        return PhotoEmbeddings(vectors, np.asarray(rows, dtype=np.int64), failures, extracted=len(rows))


def missing_message(checkpoint: Path) -> str:
    return (
        f"{checkpoint}: no ONNX image encoder ({ENCODER_FILE}), and torch is not installed to embed photos "
        f"with the checkpoint's own model; on an install with torch (pip install 'polyvse[train]') write it "
        f"with: polyvse export onnx --checkpoint {checkpoint}"
    )


def has_encoder(checkpoint: str | os.PathLike) -> bool:
    return (Path(checkpoint) / ENCODER_FILE).is_file() and (Path(checkpoint) / ENCODER_META).is_file()


def torch_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None
