"""ONNX Runtime for the frozen fronts whose outputs training caches: e5's front (the states entering its trainable
tail, :mod:`polyvse.modules.pretrained.e5.front_onnx`) and the cut image backbone (the map entering its trainable
tail, :mod:`polyvse.features.cut_onnx`).

Both fronts run once per caption or photo and never train, so what computes them may change as long as the
outputs agree: ONNX Runtime runs the same float32 graphs faster on a CPU than torch's eager modules (its fused
kernels; benchmarks/bench_frozen_fronts.py measures both and their agreement). Outputs ONNX Runtime computed are
cached under keys of their own (:data:`ONNX_RUNTIME` in them), never mixed with torch's, and each graph file is
cached by content: its name is a digest of the weights, the cut, :data:`FORMAT` and torch's version, so another
model exports afresh and a graph is never run against other weights.

``POLYVSE_FRONT_RUNTIME`` chooses (:func:`front_runtime`): ``auto`` (default) is ONNX Runtime for a front on the
CPU and torch on a GPU; ``torch`` keeps torch everywhere (the caches torch filled before stay valid); ``onnx``
asks for ONNX Runtime.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import warnings
from pathlib import Path

from ..errors import DataError

__all__ = ["FORMAT", "ONNX_RUNTIME", "RUNTIME_ENV", "front_runtime", "graph_digest", "load_session", "write_graph"]

RUNTIME_ENV = "POLYVSE_FRONT_RUNTIME"
#: what a cache key says of outputs ONNX Runtime computed (torch's keys say nothing: those of before stay valid)
ONNX_RUNTIME = "ort"
#: bump when an exported graph's inputs, outputs or arithmetic change (it is part of every graph file's digest)
FORMAT = 1
#: ONNX operator set of the graphs (ONNX Runtime 1.32 runs up to 23)
OPSET = 18


def front_runtime(device: str = "cpu") -> str:
    """``"torch"`` or ``"onnx"``: what ``POLYVSE_FRONT_RUNTIME`` gives a frozen front on ``device`` (a torch device
    type: "cpu", "cuda", ...)."""
    value = os.environ.get(RUNTIME_ENV, "auto").strip().lower() or "auto"
    if value not in ("auto", "torch", "onnx"):
        raise DataError(f"${RUNTIME_ENV}={value!r}: give auto, torch or onnx")
    if value == "torch" or device != "cpu":  # the graphs run on ONNX Runtime's CPU provider
        return "torch"
    if importlib.util.find_spec("onnxruntime") is None:
        if value == "onnx":
            raise DataError(
                f"${RUNTIME_ENV}=onnx but onnxruntime is not installed: pip install onnxruntime, or give auto or torch"
            )
        return "torch"
    return "onnx"


def _threads(threads: int | None) -> int | None:
    """``threads``, else torch's thread count where torch is loaded (both runtimes then use the cores a run was
    given), else None (ONNX Runtime's default)."""
    if threads:
        return max(1, int(threads))
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def load_session(path: str | os.PathLike, threads: int | None = None):
    """An ONNX Runtime CPU session of the graph at ``path``: ``threads`` intra-op threads (None: torch's), one
    inter-op thread, every graph optimisation. A file ONNX Runtime cannot load is a DataError naming it."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    n = _threads(threads)
    if n is not None:
        opts.intra_op_num_threads = n
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own types for a damaged file
        raise DataError(
            f"ONNX Runtime cannot load this cached graph ({exc}); delete it and run again to export it afresh",
            str(path),
        ) from exc


def graph_digest(*parts: str) -> str:
    """The hex digest naming a cached graph file: of ``parts`` (what decides its numbers: weights, cut), the
    graph format and torch's version (the exporter)."""
    import torch

    return hashlib.sha256("|".join((*parts, f"format={FORMAT}", f"torch={torch.__version__}")).encode()).hexdigest()


def write_graph(
    module, args: tuple, path: str | os.PathLike, input_names: list[str], output_names: list[str], dynamic_axes: dict
) -> Path:
    """``torch.onnx.export`` of ``module`` (eval mode) to ``path`` through a temporary file renamed into place,
    so a reader never sees half a graph (two writers racing each write the same graph)."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")[1])
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on folded constants are no user's concern
            # the TorchScript exporter: plain matmuls and convolutions that need no onnxscript
            torch.onnx.export(
                module,
                args,
                str(tmp),
                input_names=input_names,
                output_names=output_names,
                dynamic_axes=dynamic_axes,
                opset_version=OPSET,
                dynamo=False,
                do_constant_folding=True,
            )
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def cached_graph(path: Path, export) -> Path:
    """``path``, written first by ``export(path)`` where it is not there yet."""
    if not path.is_file():
        export(path)
    return path
