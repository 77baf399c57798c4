"""The cheap alternative to teacher learning: map the new language's tower vectors onto the pivot's, then read
them with the pivot's own part (the Translator's map, Procrustes or RCSLS, ``polyvse.alignment``).

Per tower that reads both languages, an orthogonal map ``W_t`` (Procrustes, closed form) or an RCSLS map started
from it takes the new language's slice onto the pivot's slice of the same sentence pairs; a tower that does not
read both leaves its slice at zero, as a caption of a language that tower lacks (the model was trained for that
with tower dropout). The maps form one block-diagonal ``W`` over the fused vector; since the pivot's part is linear
(``A x + b``), the new part is the same Linear with weight ``A W^T``: one ordinary ``universal[lang]`` part, served
like any other.
"""

from __future__ import annotations

import torch
from torch import nn

from ..alignment.procrustes import procrustes
from ..alignment.rcsls import fit_rcsls
from ..errors import CheckpointError
from .options import MAP_METHODS

__all__ = ["MAP_METHODS", "fit_tower_map", "part_through_map"]

RCSLS_NEIGHBOURS = 10000  # rows of each neighbourhood set (fastText's --maxneg): keeps an epoch at seconds


def fit_tower_map(
    captions,
    lang: str,
    pivot_lang: str,
    x_new: torch.Tensor,
    x_pivot: torch.Tensor,
    method: str = "procrustes",
    *,
    rcsls_epochs: int = 10,
    k: int = 10,
    seed: int = 0,
) -> torch.Tensor:
    """``W`` (dim, dim), block-diagonal by tower: ``x_new @ W`` lands near ``x_pivot``."""
    if method not in MAP_METHODS:
        raise ValueError(f"method must be one of {', '.join(MAP_METHODS)}, got {method!r}")
    dim = captions.dim
    W = torch.zeros((dim, dim), dtype=torch.float32)
    start, mapped = 0, []
    for tower in captions.towers:
        end = start + tower.dim
        if tower.reads(lang, unlisted=True) and tower.reads(pivot_lang, unlisted=True):
            X, Y = x_new[:, start:end].double(), x_pivot[:, start:end].double()
            block = procrustes(X, Y)
            if method == "rcsls":
                g = torch.Generator().manual_seed(seed)
                neg = torch.randperm(len(X), generator=g)[:RCSLS_NEIGHBOURS]
                block = fit_rcsls(X, Y, X[neg], Y[neg], init=block, epochs=rcsls_epochs, k=min(k, len(neg)))
            W[start:end, start:end] = block.float()
            mapped.append(tower.name)
        start = end
    if not mapped:
        raise CheckpointError(f"no tower reads both {lang!r} and {pivot_lang!r}: nothing to map; use --method teacher")
    return W


def part_through_map(pivot_part: nn.Linear, W: torch.Tensor) -> nn.Linear:
    """The Linear ``x -> pivot_part(x @ W)``."""
    out = nn.Linear(pivot_part.in_features, pivot_part.out_features).to(pivot_part.weight.device)
    with torch.no_grad():
        out.weight.copy_(pivot_part.weight @ W.to(pivot_part.weight).T)
        out.bias.copy_(pivot_part.bias)
    return out
