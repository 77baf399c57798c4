"""Training objectives: one class per objective behind the small interface of ``base.Objective`` (its
sampler, its image-batch loss, an optional text-batch loss), and the registry below that picks the class of
a config. A new objective is one module here and one line in ``OBJECTIVES``.

    vse         captions of distinct photos, languages mixed (VSE, order embeddings, VSE++, AME)
    pivot       distinct photos, one caption per language (Gella et al. PIVOT)
    parallel    pivot + caption-caption term (Gella et al. PARALLEL)
    mlmme       beta * R_MM + (1 - beta) * R_ML (Calixto & Liu)
    mule        several captions per language: top-K + neighbourhood constraints + language classifier (MULE)
    translator  vse in the Translator's source and target stages (objective vse with source_language or
                language_map)
"""
from __future__ import annotations

from pathlib import Path

from polyvse.errors import DataError

from .base import Objective
from .mlmme import MlmmeObjective
from .mule import MuleObjective
from .parallel import ParallelObjective
from .pivot import PivotObjective
from .translator import TranslatorObjective
from .vse import VseObjective, batch_scores

OBJECTIVES: dict[str, type[Objective]] = {
    cls.name: cls for cls in (VseObjective, PivotObjective, ParallelObjective, MlmmeObjective, MuleObjective,
                              TranslatorObjective)
}

__all__ = ["OBJECTIVES", "Objective", "batch_scores", "build_objective", "objective_class", "objective_name"]


def objective_name(cfg) -> str:
    """The registry key of ``cfg``: its objective, or ``translator`` for objective vse with the Translator's
    fields."""
    if cfg.objective.source_language or cfg.model.language_map:
        if cfg.objective.name in ("vse", "translator"):
            return "translator"
        raise DataError(f"the Translator's stages and language map (source_language, language_map) run with "
                        f"objective vse, not {cfg.objective.name!r}")
    if cfg.objective.name not in OBJECTIVES:
        raise DataError(f"objective {cfg.objective.name!r}: use one of {', '.join(OBJECTIVES)}")
    return cfg.objective.name


def objective_class(cfg) -> type[Objective]:
    return OBJECTIVES[objective_name(cfg)]


def build_objective(cfg, model, data, root: Path | None = None, smoke: bool = False) -> Objective:
    return objective_class(cfg)(cfg, model, data, root, smoke)
