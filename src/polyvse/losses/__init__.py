"""Training objectives over score matrices."""
from .hinge import HingeRankingLoss

__all__ = ["HingeRankingLoss"]
