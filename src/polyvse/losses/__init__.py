"""Training objectives over score matrices and multilingual embedding batches."""

from .adversarial import (
    GradientReversal,
    GradientReversalLayer,
    LanguageAdversarialLoss,
    LanguageClassifier,
    grad_reverse,
)
from .contrastive import InfoNceLoss
from .hinge import GroupedHingeLoss, HingeRankingLoss, every_negative
from .mlmme import MlmmeLoss
from .neighbourhood import NeighbourhoodConstraintLoss
from .parallel import ParallelLoss
from .pivot import PivotLoss

__all__ = [
    "GradientReversal",
    "GradientReversalLayer",
    "GroupedHingeLoss",
    "HingeRankingLoss",
    "InfoNceLoss",
    "LanguageAdversarialLoss",
    "LanguageClassifier",
    "MlmmeLoss",
    "NeighbourhoodConstraintLoss",
    "ParallelLoss",
    "PivotLoss",
    "every_negative",
    "grad_reverse",
]
