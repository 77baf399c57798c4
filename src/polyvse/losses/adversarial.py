"""MULE language-domain alignment: an adversarial language classifier behind a gradient reversal layer."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class GradientReversal(torch.autograd.Function):
    """Gradient reversal layer (Ganin & Lempitsky 2015), as MULE uses for its language classifier.

    Forward: identity. Backward: -lambda * grad (no gradient for lambda).
    Use ``GradientReversal.apply(x, lambda_)`` or ``grad_reverse(x, lambda_)`` or ``GradientReversalLayer``.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, lambda_: float) -> torch.Tensor:
        ctx.lambda_ = float(lambda_)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        return -ctx.lambda_ * grad_output, None


def grad_reverse(x: torch.Tensor, lambda_: float = 1.0) -> torch.Tensor:
    return GradientReversal.apply(x, lambda_)


class GradientReversalLayer(nn.Module):
    """Module form of ``GradientReversal``."""

    def __init__(self, lambda_: float = 1.0):
        super().__init__()
        self.lambda_ = float(lambda_)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return grad_reverse(x, self.lambda_)

    def extra_repr(self) -> str:
        return f"lambda_={self.lambda_}"


def masked_mean(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over the token axis of (n, T, d) features; `mask` (n, T) marks real tokens (True / 1)."""
    if mask is None:
        return x.mean(1)
    m = mask.to(device=x.device, dtype=x.dtype).unsqueeze(-1)
    return (x * m).sum(1) / m.sum(1).clamp(min=1)


class LanguageClassifier(nn.Module):
    """MULE's language discriminator W_lc (Kim et al. 2020, Eq. 2 and Implementation Details): "a single
    fully connected layer that takes mean-pooled universal embedding features as an input".

    ``forward(features, mask=None)`` -> logits (n, num_languages). ``features`` is either the already
    mean-pooled MULE sentence embeddings u_i (n, d) or the per-word MULE features (n, T, d) (then
    mean-pooled here over the tokens that ``mask`` marks). The layer has a bias (the paper writes W_lc u_i;
    a bias is the standard fully connected layer and does not change the adversarial signal).
    """

    def __init__(self, input_dim: int, num_languages: int):
        super().__init__()
        if num_languages < 2:
            raise ValueError(f"a language classifier needs at least 2 languages, got {num_languages}")
        self.input_dim = input_dim
        self.num_languages = num_languages
        self.fc = nn.Linear(input_dim, num_languages)

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if features.dim() == 3:
            features = masked_mean(features, mask)
        elif features.dim() != 2 or mask is not None:
            raise ValueError(
                f"features must be (n, d) pooled or (n, T, d) with an optional mask, got {tuple(features.shape)}"
            )
        return self.fc(features)


class LanguageAdversarialLoss(nn.Module):
    """L_LC = CrossEntropy(W_lc u_i, l_i) (MULE Eq. 2) evaluated on gradient-reversed features.

    One backward pass implements both lines of MULE Eq. 4: the classifier's parameters receive
    dL_LC/dW_lc (it minimises L_LC), and everything upstream of ``features`` (the language-specific
    parameters theta) receives -lambda * dL_LC/du (it maximises L_LC, the "-lambda_2 L_LC" term).
    MULE weights this loss by lambda_2 = 1e-6: multiply the returned value by that weight in the total
    objective and keep ``lambda_ = 1`` to get Eq. 4 exactly (then both sides see weight lambda_2).
    Cross-entropy is averaged over the n sentences (PyTorch's default "mean"); ``languages`` holds class
    indices in [0, num_languages).
    """

    def __init__(self, classifier: LanguageClassifier, lambda_: float = 1.0):
        super().__init__()
        self.classifier = classifier
        self.reversal = GradientReversalLayer(lambda_)

    def forward(
        self, features: torch.Tensor, languages: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        logits = self.classifier(self.reversal(features), mask)
        return F.cross_entropy(logits, languages.to(logits.device))
