"""Losses of the five papers: hand-computed values and gradient checks."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from polyvse.losses import (
    GradientReversal,
    GradientReversalLayer,
    HingeRankingLoss,
    LanguageAdversarialLoss,
    LanguageClassifier,
    MlmmeLoss,
    NeighbourhoodConstraintLoss,
    ParallelLoss,
    PivotLoss,
    every_negative,
    grad_reverse,
)
from polyvse.similarity import CosineSimilarity, OrderSimilarity


class DotSimilarity(nn.Module):
    """Plain inner product: keeps the hand arithmetic readable."""

    def forward(self, a, b):
        return a @ b.T

    def paired(self, a, b):
        return (a * b).sum(-1)


# ---------------------------------------------------------------- hinge ranking

# margin 0.5; the positives (diagonal) are 0, so every cost is [0.5 + s_ij]_+
SCORES = torch.tensor(
    [
        [0.0, 0.1, 0.3, 0.2],
        [0.2, 0.0, -1.0, 0.4],
        [-1.0, 0.0, 0.0, 0.25],
        [0.1, -1.0, 0.35, 0.0],
    ]
)
# rows (image i -> captions j != i):
#   row0: .6 .8 .7  -> sum 2.1   top2 1.5   max .8
#   row1: .7  0 .9  -> sum 1.6   top2 1.6   max .9
#   row2:  0 .5 .75 -> sum 1.25  top2 1.25  max .75
#   row3: .6  0 .85 -> sum 1.45  top2 1.45  max .85
#   rows: sum 6.4, top2 5.8, max 3.3
# columns (caption j -> images i != j):
#   col0: .7  0 .6  -> sum 1.3   top2 1.3   max .7
#   col1: .6 .5  0  -> sum 1.1   top2 1.1   max .6
#   col2: .8  0 .85 -> sum 1.65  top2 1.65  max .85
#   col3: .7 .9 .75 -> sum 2.35  top2 1.65  max .9
#   cols: sum 6.4, top2 5.7, max 3.05
HINGE_SUM = 6.4 + 6.4  # 12.8
HINGE_TOP2 = 5.8 + 5.7  # 11.5
HINGE_MAX = 3.3 + 3.05  # 6.35


def test_hinge_hand_case_three_modes():
    assert HingeRankingLoss(0.5)(SCORES).item() == pytest.approx(HINGE_SUM)
    assert HingeRankingLoss(0.5, top_k=2)(SCORES).item() == pytest.approx(HINGE_TOP2)
    assert HingeRankingLoss(0.5, max_violation=True)(SCORES).item() == pytest.approx(HINGE_MAX)
    assert HingeRankingLoss(0.5, top_k=1)(SCORES).item() == pytest.approx(HINGE_MAX)
    assert HingeRankingLoss(0.5, max_violation=True, top_k=1)(SCORES).item() == pytest.approx(HINGE_MAX)
    assert HingeRankingLoss(0.5, top_k=3)(SCORES).item() == pytest.approx(HINGE_SUM)  # 3 negatives each
    assert HingeRankingLoss(0.5, top_k=100)(SCORES).item() == pytest.approx(HINGE_SUM)  # K clipped
    assert HingeRankingLoss(0.5, reduction="mean")(SCORES).item() == pytest.approx(HINGE_SUM / 4)


def test_every_negative_sums_all_negatives_inside_the_block_only():
    top2, vsepp = HingeRankingLoss(0.5, top_k=2), HingeRankingLoss(0.5, max_violation=True)
    nc = NeighbourhoodConstraintLoss(0.05, top_k=1)
    holder = nn.ModuleList([top2, nn.ModuleList([vsepp]), nc])
    with every_negative(holder):
        assert top2(SCORES).item() == pytest.approx(HINGE_SUM)
        assert vsepp(SCORES).item() == pytest.approx(HINGE_SUM)
        assert nc.top_k == 1  # neighbourhood constraints keep their K
    assert top2(SCORES).item() == pytest.approx(HINGE_TOP2)
    assert vsepp(SCORES).item() == pytest.approx(HINGE_MAX)
    with pytest.raises(RuntimeError), every_negative(holder):  # restored on errors too
        raise RuntimeError
    assert top2(SCORES).item() == pytest.approx(HINGE_TOP2)


def _hinge_reference(scores, margin, max_violation):
    """The original (pre-top_k) implementation, verbatim."""
    pos = scores.diag()
    cost_caption = (margin - pos[:, None] + scores).clamp(min=0)
    cost_image = (margin - pos[None, :] + scores).clamp(min=0)
    eye = torch.eye(scores.shape[0], dtype=torch.bool)
    cost_caption = cost_caption.masked_fill(eye, 0)
    cost_image = cost_image.masked_fill(eye, 0)
    if max_violation:
        return cost_caption.max(dim=1).values.sum() + cost_image.max(dim=0).values.sum()
    return cost_caption.sum() + cost_image.sum()


@pytest.mark.parametrize("max_violation", [False, True])
def test_hinge_default_behaviour_unchanged(max_violation):
    torch.manual_seed(0)
    scores = torch.rand(9, 9)
    loss = HingeRankingLoss(0.2, max_violation)  # positional signature kept
    torch.testing.assert_close(loss(scores), _hinge_reference(scores, 0.2, max_violation))


def test_hinge_argument_checks():
    with pytest.raises(ValueError):
        HingeRankingLoss(0.2, max_violation=True, top_k=10)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError):
            HingeRankingLoss(0.2, top_k=bad)
    with pytest.raises(ValueError):
        HingeRankingLoss(0.2, reduction="max")
    with pytest.raises(ValueError):
        HingeRankingLoss(0.2)(torch.rand(3, 4))


@pytest.mark.parametrize("kw", [{}, {"max_violation": True}, {"top_k": 3}])
def test_hinge_gradcheck(kw):
    torch.manual_seed(2)
    scores = torch.rand(6, 6, dtype=torch.double, requires_grad=True)
    loss = HingeRankingLoss(0.2, **kw)
    assert torch.autograd.gradcheck(loss, (scores,))


def test_hinge_gradcheck_through_order_similarity():
    torch.manual_seed(3)
    im = torch.randn(5, 4, dtype=torch.double, requires_grad=True)
    cap = torch.randn(5, 4, dtype=torch.double, requires_grad=True)
    sim, loss = OrderSimilarity(), HingeRankingLoss(0.05, top_k=2)
    assert torch.autograd.gradcheck(lambda a, b: loss(sim(a, b)), (im, cap))


def test_hinge_gradient_only_on_violating_entries():
    scores = SCORES.clone().requires_grad_(True)
    HingeRankingLoss(0.5, max_violation=True)(scores).backward()
    g = scores.grad
    # hardest negatives: rows -> (0,2) (1,3) (2,3) (3,2); columns -> (1,0) (0,1) (3,2) (1,3)
    # each active term has d/ds_ij = +1 and d/ds_anchor-positive = -1
    assert g[3, 2].item() == 2.0 and g[1, 3].item() == 2.0  # hardest for both its row and its column
    assert g[0, 2].item() == 1.0 and g[2, 3].item() == 1.0 and g[1, 0].item() == 1.0 and g[0, 1].item() == 1.0
    assert g.diag().tolist() == [-2.0, -2.0, -2.0, -2.0]  # one row term + one column term per positive
    assert g[2, 0].item() == 0.0 and g[2, 1].item() == 0.0  # not the hardest: no gradient


# ---------------------------------------------------------------- Gella PIVOT / PARALLEL, Calixto MLMME

IM = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
EN = torch.tensor([[0.8, 0.6], [0.45, 0.9]])
DE = torch.tensor([[0.5, 0.1], [0.25, 0.7]])
# margin 0.5, dot similarity.
# S(images, en) = [[.8, .45], [.6, .9]]
#   image0: .5 - .8 + .45 = .15    image1: .5 - .9 + .6 = .2
#   en0:    .5 - .8 + .6  = .3     en1:    .5 - .9 + .45 = .05        -> en term .7
# S(images, de) = [[.5, .25], [.1, .7]]
#   image0: .5 - .5 + .25 = .25    image1: .5 - .7 + .1 = -.1 -> 0
#   de0:    .5 - .5 + .1  = .1     de1:    .5 - .7 + .25 = .05        -> de term .4
PIVOT = 0.7 + 0.4  # 1.1
# S(en, de) = en @ de.T:
#   en0.de0 = .8*.5 + .6*.1 = .46       en0.de1 = .8*.25 + .6*.7 = .62
#   en1.de0 = .45*.5 + .9*.1 = .315     en1.de1 = .45*.25 + .9*.7 = .7425
#   en0 (row):    .5 - .46 + .62 = .66        en1 (row):    .5 - .7425 + .315 = .0725
#   de0 (column): .5 - .46 + .315 = .355      de1 (column): .5 - .7425 + .62 = .3775
PARALLEL_TERM = 0.66 + 0.0725 + 0.355 + 0.3775  # 1.465


def test_pivot_hand_case():
    loss = PivotLoss(DotSimilarity(), margin=0.5, languages=["en", "de"])
    caps = {"en": EN, "de": DE}
    assert loss(IM, caps).item() == pytest.approx(PIVOT)
    terms = loss.terms(IM, caps)
    assert terms["en"].item() == pytest.approx(0.7) and terms["de"].item() == pytest.approx(0.4)
    # languages=None: every language in the batch
    assert PivotLoss(DotSimilarity(), 0.5)(IM, caps).item() == pytest.approx(PIVOT)
    assert PivotLoss(DotSimilarity(), 0.5, languages=["de"])(IM, caps).item() == pytest.approx(0.4)


def test_parallel_hand_case_and_gella_parallel_objective():
    caps = {"en": EN, "de": DE}
    para = ParallelLoss(DotSimilarity(), margin=0.5, languages=["en", "de"])
    assert para(IM, caps).item() == pytest.approx(PARALLEL_TERM)
    assert para(None, caps).item() == pytest.approx(PARALLEL_TERM)  # images are not used
    pivot = PivotLoss(DotSimilarity(), margin=0.5, languages=["en", "de"])
    assert (pivot(IM, caps) + para(IM, caps)).item() == pytest.approx(PIVOT + PARALLEL_TERM)  # 2.565


def test_mlmme_hand_case():
    caps = {"en": EN, "de": DE}
    loss = MlmmeLoss(beta=0.25, margin=0.5, similarity=DotSimilarity())
    # .25 * R_MM + .75 * R_ML = .25 * 1.1 + .75 * 1.465 = .275 + 1.09875 = 1.37375
    assert loss(IM, caps).item() == pytest.approx(1.37375)
    r_mm, r_ml = loss.parts(IM, caps)
    assert r_mm.item() == pytest.approx(PIVOT) and r_ml.item() == pytest.approx(PARALLEL_TERM)
    assert MlmmeLoss(1.0, 0.5, DotSimilarity())(IM, caps).item() == pytest.approx(PIVOT)
    assert MlmmeLoss(0.0, 0.5, DotSimilarity())(IM, caps).item() == pytest.approx(PARALLEL_TERM)
    assert isinstance(MlmmeLoss(0.5).similarity, CosineSimilarity)
    with pytest.raises(ValueError):
        MlmmeLoss(1.5)


def test_parallel_three_languages_sums_unordered_pairs_in_given_order():
    torch.manual_seed(4)
    caps = {lang: torch.randn(5, 3) for lang in ("en", "de", "fr")}
    sim, hinge = OrderSimilarity(), HingeRankingLoss(0.05)
    loss = ParallelLoss(sim, 0.05, languages=["fr", "en", "de"])
    expected = (
        hinge(sim(caps["fr"], caps["en"])) + hinge(sim(caps["fr"], caps["de"])) + hinge(sim(caps["en"], caps["de"]))
    )
    torch.testing.assert_close(loss(None, caps), expected)
    assert set(loss.terms(caps)) == {("fr", "en"), ("fr", "de"), ("en", "de")}
    # one language: no caption-caption term
    assert ParallelLoss(sim, 0.05, languages=["en"])(None, caps).item() == 0.0


def test_pivot_uses_image_as_first_argument_of_asymmetric_similarity():
    torch.manual_seed(5)
    im, en = torch.randn(4, 3), torch.randn(4, 3)
    sim, hinge = OrderSimilarity(), HingeRankingLoss(0.05)
    got = PivotLoss(sim, 0.05)(im, {"en": en})
    torch.testing.assert_close(got, hinge(sim(im, en)))
    assert not torch.allclose(got, hinge(sim(en, im)))


def test_multilingual_losses_check_inputs():
    pivot = PivotLoss(DotSimilarity(), 0.5, languages=["en", "de"])
    with pytest.raises(KeyError):
        pivot(IM, {"en": EN})
    with pytest.raises(ValueError):
        pivot(IM, {"en": EN, "de": DE[:1]})
    with pytest.raises(TypeError):
        pivot(IM, [EN, DE])


def test_pivot_gradients_flow_to_captions_not_to_detached_images():
    im = torch.randn(4, 3, requires_grad=True)
    en = torch.randn(4, 3, requires_grad=True)
    de = torch.randn(4, 3, requires_grad=True)
    PivotLoss(CosineSimilarity(), 0.2)(im.detach(), {"en": en, "de": de}).backward()
    assert im.grad is None
    assert en.grad is not None and en.grad.abs().sum() > 0
    assert de.grad is not None and de.grad.abs().sum() > 0


def test_parallel_gradients_reach_both_languages_and_not_images():
    im = torch.randn(4, 3, requires_grad=True)
    en = torch.randn(4, 3, requires_grad=True)
    de = torch.randn(4, 3, requires_grad=True)
    ParallelLoss(CosineSimilarity(), 0.2)(im, {"en": en, "de": de}).backward()
    assert im.grad is None
    assert en.grad.abs().sum() > 0 and de.grad.abs().sum() > 0


def test_mlmme_beta_routes_gradients():
    torch.manual_seed(6)
    im = torch.randn(4, 3, requires_grad=True)
    en = torch.randn(4, 3, requires_grad=True)
    de = torch.randn(4, 3, requires_grad=True)
    # beta = 0: only R_ML -> images receive exactly zero gradient
    MlmmeLoss(0.0, 0.2)(im, {"en": en, "de": de}).backward()
    assert torch.count_nonzero(im.grad) == 0 and en.grad.abs().sum() > 0
    # beta = 1: same caption gradients as PIVOT alone
    en.grad = de.grad = None
    MlmmeLoss(1.0, 0.2)(im.detach(), {"en": en, "de": de}).backward()
    g_en = en.grad.clone()
    en.grad = None
    PivotLoss(CosineSimilarity(), 0.2)(im.detach(), {"en": en, "de": de}).backward()
    torch.testing.assert_close(g_en, en.grad)


def test_gella_parallel_gradcheck_order_similarity():
    torch.manual_seed(7)
    im, en, de = (torch.randn(3, 4, dtype=torch.double, requires_grad=True) for _ in range(3))
    sim = OrderSimilarity()
    pivot, para = PivotLoss(sim, 0.05), ParallelLoss(sim, 0.05)

    def objective(i, e, d):
        caps = {"en": e, "de": d}
        return pivot(i, caps) + para(i, caps)

    assert torch.autograd.gradcheck(objective, (im, en, de))


# ---------------------------------------------------------------- MULE neighbourhood constraints

# 1-D sentences, dot similarity s_ij = x_i * x_j, margin .5; images: {0, 1, 2} -> image 0, {3, 4} -> image 1
NC_X = torch.tensor([[1.0], [-1.0], [2.0], [0.5], [-0.5]])
NC_IDS = torch.tensor([0, 0, 0, 1, 1])
# triplet cost [.5 - s(i, p) + s(i, n)]_+ for every (positive p, negative n) of anchor i:
# anchor0 (1):   p1 s=-1, p2 s=2;  n3 s=.5, n4 s=-.5
#   (p1,n3) .5+1+.5=2  (p1,n4) .5+1-.5=1  (p2,n3) .5-2+.5<0  (p2,n4) <0       sum 3     top2 3    top1 2
# anchor1 (-1):  p0 s=-1, p2 s=-2; n3 s=-.5, n4 s=.5
#   (p0,n3) 1  (p0,n4) 2  (p2,n3) .5+2-.5=2  (p2,n4) .5+2+.5=3                  sum 8     top2 5    top1 3
# anchor2 (2):   p0 s=2, p1 s=-2;  n3 s=1, n4 s=-1
#   (p0,n3) .5-2+1<0  (p0,n4) <0  (p1,n3) .5+2+1=3.5  (p1,n4) .5+2-1=1.5          sum 5     top2 5    top1 3.5
# anchor3 (.5):  p4 s=-.25;  n0 s=.5, n1 s=-.5, n2 s=1
#   .5+.25+.5=1.25  .5+.25-.5=.25  .5+.25+1=1.75                                 sum 3.25  top2 3    top1 1.75
# anchor4 (-.5): p3 s=-.25;  n0 s=-.5, n1 s=.5, n2 s=-1
#   .5+.25-.5=.25  .5+.25+.5=1.25  .5+.25-1<0                                    sum 1.5   top2 1.5  top1 1.25
NC_ALL = 3 + 8 + 5 + 3.25 + 1.5  # 20.75
NC_TOP2 = 3 + 5 + 5 + 3 + 1.5  # 17.5
NC_TOP1 = 2 + 3 + 3.5 + 1.75 + 1.25  # 11.5


def test_neighbourhood_hand_case():
    def loss(k, **kw):
        return NeighbourhoodConstraintLoss(margin=0.5, top_k=k, similarity=DotSimilarity(), **kw)

    assert loss(None)(NC_X, NC_IDS).item() == pytest.approx(NC_ALL)
    assert loss(2)(NC_X, NC_IDS).item() == pytest.approx(NC_TOP2)
    assert loss(1)(NC_X, NC_IDS).item() == pytest.approx(NC_TOP1)
    assert loss(4)(NC_X, NC_IDS).item() == pytest.approx(NC_ALL)  # at most 4 triplets per anchor here
    assert loss(None, reduction="mean")(NC_X, NC_IDS).item() == pytest.approx(NC_ALL / 5)
    # ids may be any hashables, e.g. photo id strings
    assert loss(2)(NC_X, ["a", "a", "a", "b", "b"]).item() == pytest.approx(NC_TOP2)


def test_neighbourhood_multi_layer_sums_layers():
    second = NC_X * 2  # a second layer (e.g. MULE's u_i next to s_i) for the same sentences
    one = NeighbourhoodConstraintLoss(margin=0.5, top_k=2, similarity=DotSimilarity())
    two_layers = one([NC_X, second], NC_IDS)
    torch.testing.assert_close(two_layers, one(NC_X, NC_IDS) + one(second, NC_IDS))
    per_layer = NeighbourhoodConstraintLoss(margin=[0.5, 0.1], top_k=2, similarity=DotSimilarity())
    other = NeighbourhoodConstraintLoss(margin=0.1, top_k=2, similarity=DotSimilarity())
    torch.testing.assert_close(per_layer([NC_X, second], NC_IDS), one(NC_X, NC_IDS) + other(second, NC_IDS))
    with pytest.raises(ValueError):
        per_layer([NC_X], NC_IDS)


def _neighbourhood_brute_force(x, ids, margin, k):
    """MULE Eq. 1 with cosine distance d = 1 - cos, enumerating every triplet of every anchor."""
    d = 1 - F.normalize(x, dim=-1) @ F.normalize(x, dim=-1).T
    total = x.new_zeros(())
    for i in range(len(x)):
        costs = [
            (d[i, p] - d[i, n] + margin).clamp(min=0)
            for p in range(len(x))
            if p != i and ids[p] == ids[i]
            for n in range(len(x))
            if ids[n] != ids[i]
        ]
        if costs:
            costs = torch.stack(costs).sort(descending=True).values
            total = total + (costs if k is None else costs[:k]).sum()
    return total


@pytest.mark.parametrize("k", [None, 1, 3, 10])
def test_neighbourhood_matches_brute_force_cosine_distance(k):
    torch.manual_seed(8)
    x = torch.randn(14, 5, dtype=torch.double)
    ids = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4, 4, 5, 5])  # image 3 has a lone sentence
    got = NeighbourhoodConstraintLoss(margin=0.3, top_k=k)(x, ids)  # default similarity: cosine
    torch.testing.assert_close(got, _neighbourhood_brute_force(x, ids, 0.3, k))


def test_neighbourhood_gradcheck_and_gradient_routing():
    torch.manual_seed(9)
    s = torch.randn(8, 4, dtype=torch.double, requires_grad=True)
    u = torch.randn(8, 3, dtype=torch.double, requires_grad=True)
    ids = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    loss = NeighbourhoodConstraintLoss(margin=0.5, top_k=3)
    assert torch.autograd.gradcheck(lambda a, b: loss([a, b], ids), (s, u))
    loss([s, u.detach()], ids).backward()
    assert s.grad.abs().sum() > 0 and u.grad is None


def test_neighbourhood_without_positives_is_zero_but_connected():
    x = torch.randn(4, 3, requires_grad=True)
    out = NeighbourhoodConstraintLoss()(x, torch.arange(4))
    assert out.item() == 0.0
    out.backward()
    assert torch.count_nonzero(x.grad) == 0


# ---------------------------------------------------------------- MULE adversarial language classifier


def test_gradient_reversal_function():
    x = torch.randn(3, 4, requires_grad=True)
    up = torch.randn(3, 4)
    y = GradientReversal.apply(x, 0.3)
    assert torch.equal(y, x)
    y.backward(up)
    assert torch.equal(x.grad, -0.3 * up)
    x.grad = None
    GradientReversalLayer(2.0)(x).backward(up)
    assert torch.equal(x.grad, -2.0 * up)
    x.grad = None
    grad_reverse(x).sum().backward()
    assert torch.equal(x.grad, -torch.ones(3, 4))


def test_language_classifier_is_one_linear_layer_on_mean_pooled_features():
    clf = LanguageClassifier(4, 3)
    linears = [m for m in clf.modules() if isinstance(m, nn.Linear)]
    assert len(linears) == 1 and linears[0].in_features == 4 and linears[0].out_features == 3
    assert len(list(clf.parameters())) == 2  # weight + bias, nothing else
    words = torch.randn(2, 5, 4)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    pooled = torch.stack([words[0, :3].mean(0), words[1].mean(0)])
    torch.testing.assert_close(clf(words, mask), clf(pooled))
    torch.testing.assert_close(clf(words), clf(words.mean(1)))


def test_language_adversarial_loss_hand_case():
    clf = LanguageClassifier(2, 2)
    with torch.no_grad():
        clf.fc.weight.copy_(torch.eye(2))
        clf.fc.bias.zero_()
    u = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
    lang = torch.tensor([0, 0])
    # logits: [2, 0] and [0, 1]
    # CE0 = -log(e^2 / (e^2 + e^0)) = log(1 + e^-2)
    # CE1 = -log(e^0 / (e^0 + e^1)) = log(1 + e^1)
    expected = (math.log(1 + math.exp(-2)) + math.log(1 + math.exp(1))) / 2  # mean over the batch
    assert LanguageAdversarialLoss(clf, 0.5)(u, lang).item() == pytest.approx(expected)


def test_language_adversarial_reverses_exactly_the_encoder_gradient():
    torch.manual_seed(10)
    lam = 0.7
    encoder = nn.Linear(6, 4)
    clf = LanguageClassifier(4, 3)
    inputs = torch.randn(5, 6)
    lang = torch.tensor([0, 1, 2, 1, 0])

    # without reversal: plain classifier cross-entropy
    feats = encoder(inputs)
    feats.retain_grad()
    F.cross_entropy(clf(feats), lang).backward()
    g_feat = feats.grad.clone()
    g_enc = [p.grad.clone() for p in encoder.parameters()]
    g_clf = [p.grad.clone() for p in clf.parameters()]
    encoder.zero_grad()
    clf.zero_grad()

    # with the adversarial loss
    feats = encoder(inputs)
    feats.retain_grad()
    loss = LanguageAdversarialLoss(clf, lam)(feats, lang)
    loss.backward()
    assert torch.equal(feats.grad, -lam * g_feat)  # exactly -lambda times, at the encoder's output
    for p, g in zip(encoder.parameters(), g_enc):
        torch.testing.assert_close(p.grad, -lam * g, rtol=1e-6, atol=1e-7)
    for p, g in zip(clf.parameters(), g_clf):  # the classifier itself still minimises L_LC
        assert torch.equal(p.grad, g)


def test_language_adversarial_detached_features_reach_only_the_classifier():
    encoder = nn.Linear(6, 4)
    clf = LanguageClassifier(4, 2)
    feats = encoder(torch.randn(3, 6)).detach()
    LanguageAdversarialLoss(clf)(feats, torch.tensor([0, 1, 1])).backward()
    assert all(p.grad is None for p in encoder.parameters())
    assert all(p.grad is not None for p in clf.parameters())


def test_language_adversarial_gradcheck():
    torch.manual_seed(11)
    clf = LanguageClassifier(3, 2).double()
    x = torch.randn(4, 3, dtype=torch.double, requires_grad=True)
    lang = torch.tensor([0, 1, 1, 0])
    # the forward is the plain CE, so finite differences see the un-reversed gradient: check that CE's
    # analytic gradient numerically, then that the adversarial loss sends exactly -lambda times it.
    assert torch.autograd.gradcheck(lambda t: F.cross_entropy(clf(t), lang), (x,))
    reversed_grad = torch.autograd.grad(LanguageAdversarialLoss(clf, 0.5)(x, lang), x)[0]
    plain_grad = torch.autograd.grad(F.cross_entropy(clf(x), lang), x)[0]
    torch.testing.assert_close(reversed_grad, -0.5 * plain_grad)


def test_infonce_hand_case_and_checks():
    from polyvse.losses import InfoNceLoss

    s = torch.tensor([[0.9, 0.1], [0.3, 0.5]])
    t = 0.1
    # rows: image i picks caption i; columns: caption j picks image j
    rows = -(math.log(math.exp(9) / (math.exp(9) + math.exp(1))) + math.log(math.exp(5) / (math.exp(3) + math.exp(5))))
    cols = -(math.log(math.exp(9) / (math.exp(9) + math.exp(3))) + math.log(math.exp(5) / (math.exp(1) + math.exp(5))))
    assert InfoNceLoss(t)(s).item() == pytest.approx((rows / 2 + cols / 2) / 2, rel=1e-5)
    # a batch that ranks its positives first costs less than the same scores shuffled
    good = torch.eye(4) * 0.8 + 0.1
    assert InfoNceLoss(0.05)(good) < InfoNceLoss(0.05)(good[[1, 0, 3, 2]])
    x = torch.randn(3, 3, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(InfoNceLoss(0.2), (x,))
    with pytest.raises(ValueError, match="temperature"):
        InfoNceLoss(0.0)
    with pytest.raises(ValueError, match="square"):
        InfoNceLoss()(torch.zeros(2, 3))


def test_hn_nce_weights_negatives_by_closeness():
    from polyvse.losses import InfoNceLoss

    torch.manual_seed(0)
    s = torch.rand(5, 5)
    # beta 0 is plain InfoNCE, bit for bit
    assert torch.equal(InfoNceLoss(0.1, 0.0)(s), InfoNceLoss(0.1)(s))
    # hand case, one direction at a time: n = 3, row 0's negatives weighted (n - 1) softmax(b s / t)
    s = torch.tensor([[0.9, 0.6, 0.1], [0.2, 0.8, 0.3], [0.4, 0.0, 0.7]])
    t, b = 0.1, 0.5

    def one_way(m):
        total = 0.0
        for i in range(3):
            neg = [j for j in range(3) if j != i]
            z = sum(math.exp(b * m[i][j] / t) for j in neg)
            denom = math.exp(m[i][i] / t) + sum(2 * math.exp(b * m[i][j] / t) / z * math.exp(m[i][j] / t) for j in neg)
            total += -(m[i][i] / t - math.log(denom))
        return total / 3

    expected = (one_way(s.tolist()) + one_way(s.T.tolist())) / 2
    assert InfoNceLoss(t, b)(s).item() == pytest.approx(expected, rel=1e-5)
    # the closest negative takes a larger share of the gradient than under plain InfoNCE
    x = s.clone().requires_grad_(True)
    plain = torch.autograd.grad(InfoNceLoss(t)(x), x)[0]
    hard = torch.autograd.grad(InfoNceLoss(t, b)(x), x)[0]
    assert hard[0, 1] / hard[0, 2] > plain[0, 1] / plain[0, 2] > 1
    # the weights carry no gradient: the loss's gradient is that of the CE with the weights held constant
    loss = InfoNceLoss(0.2, 1.0)
    x = torch.randn(4, 4, dtype=torch.double, requires_grad=True)
    w_rows, w_cols = loss.log_weights(x.detach() / 0.2), loss.log_weights(x.detach().T / 0.2)
    target = torch.arange(4)

    def held(y):
        return (F.cross_entropy(y / 0.2 + w_rows, target) + F.cross_entropy(y.T / 0.2 + w_cols, target)) / 2

    torch.testing.assert_close(torch.autograd.grad(loss(x), x)[0], torch.autograd.grad(held(x), x)[0])
    assert torch.isfinite(InfoNceLoss(0.07, 1.0)(torch.ones(1, 1)))  # one pair: no negatives to weigh
    with pytest.raises(ValueError, match="hard_negative_beta"):
        InfoNceLoss(0.1, -1.0)
