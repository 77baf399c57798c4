"""Similarity functions: hand-computed scores, asymmetry conventions, chunking, gradients."""

from __future__ import annotations

import math

import pytest
import torch

from polyvse.similarity import CosineSimilarity, OrderSimilarity, order as order_module

# ---------------------------------------------------------------- cosine (existing; pinned here)


def test_cosine_hand_case():
    a = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
    b = torch.tensor([[0.0, 2.0], [1.0, 1.0]])
    s = CosineSimilarity()(a, b)
    # a0/|a0| = (.6, .8); a1 = (1, 0); b0/|b0| = (0, 1); b1/|b1| = (1, 1)/sqrt2
    # s00 = .8; s01 = (.6 + .8)/sqrt2 = 1.4/sqrt2; s10 = 0; s11 = 1/sqrt2
    expected = torch.tensor([[0.8, 1.4 / math.sqrt(2)], [0.0, 1 / math.sqrt(2)]])
    torch.testing.assert_close(s, expected)
    torch.testing.assert_close(CosineSimilarity().paired(a, b), expected.diag())


# ---------------------------------------------------------------- order

IMAGES = torch.tensor([[1.0, 2.0], [-3.0, 0.0]])  # abs -> [[1, 2], [3, 0]]
CAPTIONS = torch.tensor([[2.0, -4.0], [0.0, -1.0]])  # abs -> [[2, 4], [0, 1]]
# S(a_i, b_j) = -|| max(0, |b_j| - |a_i|) ||^2
# S(a0, b0): [2-1, 4-2] = [1, 2]   -> -(1 + 4)   = -5
# S(a0, b1): [0-1, 1-2] = [-1, -1] -> 0
# S(a1, b0): [2-3, 4-0] = [-1, 4]  -> -(0 + 16)  = -16
# S(a1, b1): [0-3, 1-0] = [-3, 1]  -> -(0 + 1)   = -1
ORDER_EXPECTED = torch.tensor([[-5.0, 0.0], [-16.0, -1.0]])


def test_order_hand_case():
    sim = OrderSimilarity()
    torch.testing.assert_close(sim(IMAGES, CAPTIONS), ORDER_EXPECTED)
    torch.testing.assert_close(sim.paired(IMAGES, CAPTIONS), torch.tensor([-5.0, -1.0]))


def test_order_is_asymmetric_image_is_the_specific_argument():
    sim = OrderSimilarity()
    image = torch.tensor([[2.0, 2.0]])
    caption = torch.tensor([[1.0, 1.0]])  # caption below the image: its abstraction
    # S(image, caption) = -||max(0, [1-2, 1-2])||^2 = 0 (order satisfied)
    assert sim(image, caption).item() == 0.0
    # swapped: -||max(0, [2-1, 2-1])||^2 = -2
    assert sim(caption, image).item() == -2.0
    assert not torch.equal(sim(IMAGES, CAPTIONS), sim(CAPTIONS, IMAGES).T)


def test_order_abs_constraint():
    sim = OrderSimilarity()
    a, b = torch.randn(5, 4), torch.randn(6, 4)
    torch.testing.assert_close(sim(a, b), sim(a.abs(), -b.abs()))
    assert (sim(a, b) <= 0).all()


def test_order_paired_matches_matrix_diagonal():
    sim = OrderSimilarity()
    a, b = torch.randn(7, 5), torch.randn(7, 5)
    torch.testing.assert_close(sim.paired(a, b), sim(a, b).diag())


def test_order_chunked_matches_direct_without_materialising(monkeypatch):
    torch.manual_seed(0)
    a = torch.randn(13, 6, requires_grad=True)
    b = torch.randn(9, 6, requires_grad=True)
    g = torch.randn(13, 9)
    direct = OrderSimilarity()(a, b)  # 13*9*6 = 702 <= default limit
    ga, gb = torch.autograd.grad(direct, (a, b), g)

    limit = 9 * 6 * 2  # two rows of a per chunk
    seen = []
    real = order_module._order_violation_direct

    def spy(x, y):
        seen.append(x.shape[0] * y.shape[0] * x.shape[1])
        return real(x, y)

    monkeypatch.setattr(order_module, "_order_violation_direct", spy)
    chunked = OrderSimilarity(max_elements=limit)(a, b)
    assert seen and max(seen) <= limit and len(seen) == 7  # ceil(13 / 2) chunks
    torch.testing.assert_close(chunked, direct)
    ca, cb = torch.autograd.grad(chunked, (a, b), g)
    torch.testing.assert_close(ca, ga)
    torch.testing.assert_close(cb, gb)


def test_order_chunked_grad_only_for_one_input():
    a = torch.randn(4, 3)
    b = torch.randn(5, 3, requires_grad=True)
    OrderSimilarity(max_elements=3)(a, b).sum().backward()
    assert b.grad is not None and a.grad is None
    expected = torch.autograd.grad(OrderSimilarity()(a, b).sum(), b)[0]
    torch.testing.assert_close(b.grad, expected)


@pytest.mark.parametrize("max_elements", [2**24, 7])  # direct path, chunked path (1 row per chunk)
def test_order_gradcheck(max_elements):
    torch.manual_seed(1)
    a = torch.randn(4, 3, dtype=torch.double, requires_grad=True)
    b = torch.randn(5, 3, dtype=torch.double, requires_grad=True)
    sim = OrderSimilarity(max_elements=max_elements)
    assert torch.autograd.gradcheck(lambda x, y: sim(x, y), (a, b))
    assert torch.autograd.gradcheck(lambda x, y: sim.paired(x, y[:4]), (a, b))


def test_order_rejects_bad_shapes():
    with pytest.raises(ValueError):
        OrderSimilarity()(torch.randn(2, 3), torch.randn(2, 4))
    with pytest.raises(ValueError):
        OrderSimilarity().paired(torch.randn(2, 3), torch.randn(3, 3))
