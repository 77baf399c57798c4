"""polyvse.evaluation.ranking.retrieval_metrics against an independent, slow, sort-based reference."""

from __future__ import annotations

import itertools
import statistics
import time

import numpy as np
import pytest
import torch

from polyvse.evaluation import ranking as metrics_mod
from polyvse.evaluation.ranking import METRIC_KEYS, retrieval_metrics, retrieval_ranks

# ------------------------------------------------------------------------------------------ reference


def reference_ranks(sim, caption_image):
    """Sort every query's candidates by (score descending, gold last among equal scores); return the
    1-based position of the first gold. Plain Python lists, no numpy tricks."""
    rows = [list(map(float, r)) for r in np.asarray(sim).tolist()]
    cap_img = [int(c) for c in caption_image]
    n_img, n_cap = len(rows), len(rows[0])
    i2t = []
    for i in range(n_img):
        if i not in cap_img:
            continue
        order = sorted(range(n_cap), key=lambda j: (-rows[i][j], cap_img[j] == i))
        pos = next(p for p, j in enumerate(order) if cap_img[j] == i)
        i2t.append(pos + 1)
    t2i = []
    for j in range(n_cap):
        order = sorted(range(n_img), key=lambda i: (-rows[i][j], i == cap_img[j]))
        t2i.append(order.index(cap_img[j]) + 1)
    return i2t, t2i


def reference_metrics(sim, caption_image):
    i2t, t2i = reference_ranks(sim, caption_image)
    out = {}
    for name, ranks in (("i2t", i2t), ("t2i", t2i)):
        for k in (1, 5, 10):
            hits = 0
            for r in ranks:
                if r <= k:
                    hits += 1
            out[f"{name}_r{k}"] = 100.0 * hits / len(ranks)
        out[f"{name}_medr"] = float(statistics.median(ranks))
        out[f"{name}_meanr"] = sum(ranks) / len(ranks)
    recalls = [out[f"{d}_r{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10)]
    out["rsum"] = sum(recalls)
    out["mr"] = sum(recalls) / 6
    return out


def worst_case_first_gold(scores, is_gold):
    """Brute force: over every ordering of the candidates consistent with descending scores, the
    latest position at which the first gold can appear (1-based). Defines 'pessimistic ties'."""
    n = len(scores)
    worst = 0
    for perm in itertools.permutations(range(n)):
        if any(scores[perm[p]] < scores[perm[p + 1]] for p in range(n - 1)):
            continue
        first = next(p for p, j in enumerate(perm) if is_gold[j]) + 1
        worst = max(worst, first)
    return worst


def assert_metrics_close(got, want):
    assert list(got) == list(METRIC_KEYS)
    for k in METRIC_KEYS:
        assert got[k] == pytest.approx(want[k], abs=1e-9), k


def random_case(rng, n_img, caps_per_image, *, ties=False, drop_images=0):
    """caps_per_image: int or (lo, hi) range; drop_images: images left without captions."""
    counts = (
        np.full(n_img, caps_per_image)
        if np.isscalar(caps_per_image)
        else rng.integers(caps_per_image[0], caps_per_image[1] + 1, size=n_img)
    )
    if drop_images:
        counts[rng.choice(n_img, size=drop_images, replace=False)] = 0
    if counts.sum() == 0:
        counts[0] = 1
    ci = np.repeat(np.arange(n_img), counts)
    ci = ci[rng.permutation(ci.size)]  # captions not grouped by image
    if ties:
        sim = rng.integers(0, 4, size=(n_img, ci.size)).astype(np.float32)
    else:
        sim = rng.standard_normal((n_img, ci.size)).astype(np.float32)
    return sim, ci


# ------------------------------------------------------------------------------------- hand-made cases


def test_hand_made_case():
    # 3 images, 2 captions each; caption j belongs to image j // 2.
    sim = np.array(
        [
            # c0   c1   c2   c3   c4   c5
            [0.9, 0.1, 0.8, 0.2, 0.0, 0.0],  # img0: best gold c0 (0.9) is top          -> i2t rank 1
            [0.5, 0.6, 0.3, 0.7, 0.9, 0.1],  # img1: golds c2 .3, c3 .7; c4 .9 above    -> i2t rank 2
            [0.4, 0.7, 0.9, 0.8, 0.3, 0.2],  # img2: golds c4 .3, c5 .2; 4 above c4     -> i2t rank 5
        ]
    )
    ci = [0, 0, 1, 1, 2, 2]
    r = retrieval_ranks(sim, ci)
    assert r.i2t.tolist() == [1, 2, 5]
    assert r.images.tolist() == [0, 1, 2]
    # t2i, column by column: c0 gold img0 .9 top -> 1; c1 gold img0 .1 < .6,.7 -> 3; c2 gold img1 .3 < .8,.9 -> 3
    # c3 gold img1 .7 < .8 -> 2; c4 gold img2 .3 < .9 -> 2; c5 gold img2 .2 > .0,.1 -> 1
    assert r.t2i.tolist() == [1, 3, 3, 2, 2, 1]
    m = retrieval_metrics(sim, ci)
    assert m["i2t_r1"] == pytest.approx(100 / 3)
    assert m["i2t_r5"] == 100.0 and m["i2t_r10"] == 100.0
    assert m["i2t_medr"] == 2.0 and m["i2t_meanr"] == pytest.approx(8 / 3)
    assert m["t2i_r1"] == pytest.approx(100 * 2 / 6)
    assert m["t2i_r5"] == 100.0
    assert m["t2i_medr"] == 2.0  # ranks 1,1,2,2,3,3
    assert m["t2i_meanr"] == pytest.approx(2.0)
    assert m["rsum"] == pytest.approx(100 / 3 + 200 + 100 / 3 + 200)
    assert m["mr"] == pytest.approx(m["rsum"] / 6)


def test_identity_is_perfect_and_returns_plain_floats():
    m = retrieval_metrics(np.eye(7), np.arange(7))
    want = {k: 100.0 for k in METRIC_KEYS}
    want.update(i2t_medr=1.0, i2t_meanr=1.0, t2i_medr=1.0, t2i_meanr=1.0, rsum=600.0)
    assert m == want
    assert all(type(v) is float for v in m.values())


def test_even_count_median_is_not_floored():
    # two captions, ranks 1 and 2 both ways -> median 1.5
    sim = np.array([[1.0, 0.5], [0.0, 0.9]])
    sim[0, 1] = 1.0  # caption 1 (image 1) ranks image 0 ahead of its own image: t2i rank 2
    r = retrieval_ranks(sim, [0, 1])
    assert r.t2i.tolist() == [1, 2]
    assert retrieval_metrics(sim, [0, 1])["t2i_medr"] == 1.5


# ------------------------------------------------------------------------------------------------ ties


@pytest.mark.parametrize("caps_per_image", [1, 5])
def test_constant_matrix_gets_worst_ranks(caps_per_image):
    n_img = 12
    ci = np.repeat(np.arange(n_img), caps_per_image)
    sim = np.full((n_img, ci.size), 0.25, dtype=np.float32)
    r = retrieval_ranks(sim, ci)
    assert (r.t2i == n_img).all()
    # worst position of the first of an image's golds: all other images' captions first
    assert (r.i2t == ci.size - caps_per_image + 1).all()
    m = retrieval_metrics(sim, ci)
    assert m["t2i_r1"] == 0.0 and m["t2i_r5"] == 0.0 and m["t2i_r10"] == 0.0
    assert m["i2t_r1"] == 0.0 and m["i2t_r5"] == 0.0 and m["i2t_r10"] == 0.0
    assert m["t2i_medr"] == n_img and m["i2t_medr"] == ci.size - caps_per_image + 1
    assert m["rsum"] == 0.0


def test_tie_with_a_distractor_counts_against_the_gold():
    sim = np.array([[1.0, 1.0], [0.0, 0.0]])  # each row scores its gold and the other caption equally
    r = retrieval_ranks(sim, [0, 1])
    assert r.i2t.tolist() == [2, 2]
    assert r.t2i.tolist() == [1, 2]  # caption 1: gold image 1 (0.0) below image 0 (1.0)
    m = retrieval_metrics(sim, [0, 1])
    assert m["i2t_r1"] == 0.0 and m["t2i_r1"] == 50.0


def test_tied_gold_captions_do_not_push_each_other_down():
    # image 0 has two identical gold captions that both score highest: the first gold is at position 1
    sim = np.array([[0.9, 0.9, 0.1], [0.0, 0.0, 0.5]])
    r = retrieval_ranks(sim, [0, 0, 1])
    assert r.i2t.tolist() == [1, 1]
    # ...but a distractor tied with them does go first
    sim2 = np.array([[0.9, 0.9, 0.9], [0.0, 0.0, 0.5]])
    assert retrieval_ranks(sim2, [0, 0, 1]).i2t.tolist() == [2, 1]


def test_ranks_equal_brute_force_worst_case_over_tie_orders():
    rng = np.random.default_rng(7)
    for _ in range(60):
        n_img = int(rng.integers(1, 5))
        n_cap = int(rng.integers(1, 6))
        ci = rng.integers(0, n_img, size=n_cap)
        sim = rng.integers(0, 3, size=(n_img, n_cap)).astype(np.float64)
        r = retrieval_ranks(sim, ci)
        want_i2t = [worst_case_first_gold(sim[i].tolist(), (ci == i).tolist()) for i in range(n_img) if (ci == i).any()]
        want_t2i = [
            worst_case_first_gold(sim[:, j].tolist(), (np.arange(n_img) == ci[j]).tolist()) for j in range(n_cap)
        ]
        assert r.i2t.tolist() == want_i2t
        assert r.t2i.tolist() == want_t2i


# ------------------------------------------------------------------------- agreement with the reference


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed, caps_per_image", [(1, 1), (2, 5), (3, (0, 4))])
def test_agrees_with_reference_on_random_cases(ties, seed, caps_per_image):
    rng = np.random.default_rng(seed * 10 + ties)
    for _trial in range(8):
        n_img = int(rng.integers(1, 30))
        sim, ci = random_case(rng, n_img, caps_per_image, ties=ties)
        got = retrieval_metrics(sim, ci)
        assert_metrics_close(got, reference_metrics(sim, ci))
        i2t, t2i = reference_ranks(sim, ci)
        r = retrieval_ranks(sim, ci)
        assert r.i2t.tolist() == i2t and r.t2i.tolist() == t2i


def test_agrees_with_reference_across_row_blocks(monkeypatch):
    monkeypatch.setattr(metrics_mod, "_BLOCK_ELEMENTS", 37)  # many blocks, ragged last block
    rng = np.random.default_rng(3)
    for ties in (False, True):
        sim, ci = random_case(rng, 23, (0, 6), ties=ties, drop_images=3)
        assert_metrics_close(retrieval_metrics(sim, ci), reference_metrics(sim, ci))


def test_images_without_captions_are_skipped_for_i2t_but_are_distractors_for_t2i():
    # image 2 has no caption but outscores image 0 on caption 0
    sim = np.array(
        [
            [0.8, 0.1],
            [0.0, 0.9],
            [0.95, 0.0],
        ]
    )
    ci = [0, 1]
    r = retrieval_ranks(sim, ci)
    assert r.images.tolist() == [0, 1]
    assert r.i2t.tolist() == [1, 1]
    assert r.t2i.tolist() == [2, 1]
    m = retrieval_metrics(sim, ci)
    assert m["i2t_r1"] == 100.0
    assert m["t2i_r1"] == 50.0
    rng = np.random.default_rng(11)
    for _ in range(5):
        sim, ci = random_case(rng, 20, (1, 3), ties=True, drop_images=6)
        assert_metrics_close(retrieval_metrics(sim, ci), reference_metrics(sim, ci))
        assert len(retrieval_ranks(sim, ci).i2t) == 14


def test_infinite_scores_are_ranked():
    sim = np.array([[np.inf, -np.inf], [np.inf, 0.0]])
    ci = [0, 1]
    assert_metrics_close(retrieval_metrics(sim, ci), reference_metrics(sim, ci))
    assert retrieval_ranks(sim, ci).t2i.tolist() == [2, 1]  # +inf tied with +inf -> pessimistic


# ----------------------------------------------------------------------------------------- input types


def test_torch_and_numpy_inputs_agree():
    rng = np.random.default_rng(5)
    sim, ci = random_case(rng, 15, 5, ties=True)
    want = retrieval_metrics(sim, ci)
    t = torch.tensor(sim, requires_grad=True)
    assert retrieval_metrics(t, torch.tensor(ci)) == want
    assert retrieval_metrics(t.double(), ci.tolist()) == want
    assert retrieval_metrics(t.to(torch.bfloat16), ci) == retrieval_metrics(
        t.to(torch.bfloat16).float().detach().numpy(), ci
    )
    assert retrieval_metrics(sim.astype(np.float16), ci) == want  # small integers are exact in fp16
    assert retrieval_metrics(sim.astype(np.int64), ci) == want
    assert retrieval_metrics(sim.tolist(), ci) == want
    assert retrieval_metrics(np.asfortranarray(sim), ci) == want


# ------------------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "sim, ci, match",
    [
        (np.array([[0.1, np.nan], [0.2, 0.3]]), [0, 1], r"NaN.*\[0, 1\]"),
        (torch.tensor([[0.1, float("nan")]]), [0, 0], "NaN"),
        (np.zeros(3), [0, 1, 2], "2-D"),
        (np.zeros((2, 3, 1)), [0, 1, 1], "2-D"),
        (np.zeros((0, 3)), [0, 1, 2], "empty"),
        (np.zeros((2, 0)), [], "empty"),
        (np.zeros((2, 3)), [0, 1], "2 entries.*3 captions"),
        (np.zeros((2, 3)), [[0, 1, 1]], "1-D"),
        (np.zeros((2, 3)), [0, 1, 2], "index 2.*outside"),
        (np.zeros((2, 3)), [0, -1, 1], "index -1"),
        (np.zeros((2, 3)), [0.0, 1.0, 1.0], "integer"),
        (np.zeros((2, 2), dtype=complex), [0, 1], "real"),
        (np.array([["a", "b"]]), [0, 0], "real"),
    ],
)
def test_bad_input_raises_clear_value_error(sim, ci, match):
    with pytest.raises(ValueError, match=match):
        retrieval_metrics(sim, ci)


# -------------------------------------------------------------------------------------------- scaling


def test_vectorised_scaling_smoke():
    """Not a benchmark (see benchmarks/bench_eval.py): guards against a per-pair Python loop."""
    rng = np.random.default_rng(0)
    sim = rng.standard_normal((1000, 5000)).astype(np.float32)
    ci = np.repeat(np.arange(1000), 5)
    t0 = time.perf_counter()
    m = retrieval_metrics(sim, ci)
    assert time.perf_counter() - t0 < 5.0
    # random scores: gold rank is uniform, so R@10 is about 10/1000 (t2i) / 5 golds among 5000 (i2t)
    assert m["t2i_r10"] < 5.0 and m["i2t_r10"] < 5.0
