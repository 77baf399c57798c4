"""Training objectives: one class per objective behind the small interface of ``base.Objective`` (its
options, its sampler, its image-batch loss, an optional text-batch loss), and the registry below that picks the
class of a config by its ``objective.name``. A new objective is one module here (the class and its ``Options``)
and one line in ``OBJECTIVES``.

    vse         captions of distinct photos, languages mixed (VSE, order embeddings, VSE++, AME); teacher learning
    pivot       distinct photos, one caption per language (Gella et al. PIVOT)
    parallel    pivot + caption-caption term (Gella et al. PARALLEL)
    mlmme       beta * R_MM + (1 - beta) * R_ML (Calixto & Liu)
    mule        several captions per language: top-K + neighbourhood constraints + language classifier (MULE)
    translator  vse in the Translator's source and target stages, through model.language_map

AME's word alignment (the ``align:`` section) is not an objective: ``word_alignment.WordAlignment`` runs beside
whichever objective the run has.
"""

from __future__ import annotations

from pathlib import Path

from .base import Objective, ObjectiveOptions
from .mlmme import MlmmeObjective
from .mule import MuleObjective
from .parallel import ParallelObjective
from .pivot import PivotObjective
from .translator import TranslatorObjective
from .vse import VseObjective, batch_scores

OBJECTIVES: dict[str, type[Objective]] = {
    cls.name: cls
    for cls in (VseObjective, PivotObjective, ParallelObjective, MlmmeObjective, MuleObjective, TranslatorObjective)
}

__all__ = ["OBJECTIVES", "Objective", "ObjectiveOptions", "batch_scores", "build_objective", "objective_class"]


def objective_class(cfg) -> type[Objective]:
    """The class of ``cfg.objective.name`` (a checked config names a registered one)."""
    return OBJECTIVES[cfg.objective.name]


def build_objective(cfg, model, data, root: Path | None = None) -> Objective:
    """The objective of ``cfg`` (a --smoke run passes the config its smoke caps were applied to)."""
    return objective_class(cfg)(cfg, model, data, root)
