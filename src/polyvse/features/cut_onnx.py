"""The cut image backbone's frozen part (:class:`.tail.BackboneCutExtractor`: stem and every block before the
cut) as an ONNX graph run by ONNX Runtime, to fill the feature cache with the maps a trainable tail reads
(:mod:`polyvse.util.frozen_onnx` says why, and how ``POLYVSE_FRONT_RUNTIME`` chooses).

The graph: ``pixels`` (n, 3, crop, crop) normalised crops -> ``maps`` (n, C*h*w), the flattened map entering the
cut (as ``BackboneCutExtractor._pooled``), n dynamic. Its file is ``<graph_dir>/<name>-<digest>.onnx``, the digest
over the backbone's weights (every tensor's values) and the cut, so other weights export afresh.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..util.frozen_onnx import cached_graph, graph_digest, load_session, write_graph

__all__ = ["CutGraph", "cut_graph_path"]


def cut_graph_path(extractor, graph_dir: str | os.PathLike) -> Path:
    """Where the graph of ``extractor`` (a ``BackboneCutExtractor``) is kept under ``graph_dir``."""
    from .extractor import weights_digest

    digest = graph_digest(
        "cut-backbone",
        extractor.name,
        f"weights={weights_digest(extractor.model)}",
        f"blocks={extractor.blocks}",
        f"crop={extractor.preprocess.crop}",
    )
    return Path(graph_dir) / f"{re.sub(r'[^A-Za-z0-9._-]+', '_', extractor.name)}-{digest[:32]}.onnx"


class _Map(nn.Module):
    def __init__(self, extractor):
        super().__init__()
        self.model = extractor.model  # registered: the export reads its weights
        self._pooled = extractor._pooled

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self._pooled(pixels)


class CutGraph:
    """The ONNX Runtime session of one cut extractor's frozen part, built on first use (exported first where
    ``graph_dir`` lacks the graph). Shared by the extractor's augmented-view copies (``augment.view_extractor``
    copies the extractor, not this), so the graph is exported and loaded once per process; a pickled or deep
    copy keeps the folder and builds its own session."""

    def __init__(self, graph_dir: str | os.PathLike | None = None, threads: int | None = None):
        self.graph_dir, self.threads = graph_dir, threads
        self._session = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {"graph_dir": self.graph_dir, "threads": self.threads}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["graph_dir"], state["threads"])

    def session(self, extractor):
        if self.graph_dir is None:
            raise ValueError("CutGraph: no folder to keep the graph in (keep_graphs_in)")
        with self._lock:
            if self._session is None:
                crop = extractor.preprocess.crop
                path = cut_graph_path(extractor, self.graph_dir)
                self._session = load_session(
                    cached_graph(
                        path,
                        lambda p: write_graph(
                            _Map(extractor).eval(),
                            (torch.zeros(2, 3, crop, crop),),
                            p,
                            ["pixels"],
                            ["maps"],
                            {"pixels": {0: "n"}, "maps": {0: "n"}},
                        ),
                    ),
                    self.threads,
                )
            return self._session

    def run(self, extractor, flat: torch.Tensor) -> torch.Tensor:
        """``(m, 3, crop, crop)`` crops -> ``(m, dim)`` float32 maps, ``extractor.max_crops_per_pass`` at a time
        (as the torch path passes them)."""
        session = self.session(extractor)
        x = np.ascontiguousarray(flat.detach().to("cpu", torch.float32).numpy())
        step = max(1, int(extractor.max_crops_per_pass))
        parts = [session.run(None, {"pixels": x[i : i + step]})[0] for i in range(0, len(x), step)]
        out = np.concatenate(parts) if parts else np.zeros((0, extractor.dim), dtype=np.float32)
        return torch.from_numpy(np.asarray(out, dtype=np.float32))
