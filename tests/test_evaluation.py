"""polyvse.evaluation: COCO folds, per-language galleries, cross-lingual retrieval, reports."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from polyvse.evaluation import (
    CROSS_LINGUAL_KEYS,
    coco_5fold_metrics,
    coco_fold_metrics,
    cosine_scores,
    cross_lingual_retrieval,
    evaluate_by_language,
    markdown_table,
    mean_std,
    mean_std_table,
)
from polyvse.evaluation.ranking import METRIC_KEYS, retrieval_metrics, retrieval_ranks


def _noisy_case(rng, n_img, caps_per_image, noise=1.0, dim=16):
    """Image embeddings and caption embeddings near their image's, captions shuffled."""
    img = rng.standard_normal((n_img, dim)).astype(np.float32)
    ci = np.repeat(np.arange(n_img), caps_per_image)
    ci = ci[rng.permutation(ci.size)]
    cap = img[ci] + noise * rng.standard_normal((ci.size, dim)).astype(np.float32)
    return img, cap, ci


def _cos(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return a @ b.T


def _order_score(img, cap):
    """Asymmetric order-embedding score: -|| max(0, cap - img) ||^2 (numpy)."""
    img, cap = np.asarray(img, np.float64), np.asarray(cap, np.float64)
    return -(np.maximum(0.0, cap[None, :, :] - img[:, None, :]) ** 2).sum(-1)


# ---------------------------------------------------------------------------------------- COCO folds


def test_coco_folds_are_consecutive_image_blocks_with_their_captions():
    rng = np.random.default_rng(0)
    img, cap, ci = _noisy_case(rng, 20, 5, noise=1.5)
    sim = _cos(img, cap)
    folds = coco_fold_metrics(sim, ci, n_folds=4)
    assert len(folds) == 4
    for f, got in enumerate(folds):
        rows = np.arange(5 * f, 5 * f + 5)
        cols = np.flatnonzero(np.isin(ci, rows))  # captions of this fold's images, original order
        want = retrieval_metrics(sim[np.ix_(rows, cols)], ci[cols] - 5 * f)
        assert got == want
    avg = coco_5fold_metrics(sim, ci, n_folds=4)
    assert list(avg) == list(METRIC_KEYS)
    for k in METRIC_KEYS:
        assert avg[k] == pytest.approx(np.mean([f[k] for f in folds]))
        assert type(avg[k]) is float
    recalls = [f"{d}_r{k}" for d in ("i2t", "t2i") for k in (1, 5, 10)]
    assert avg["rsum"] == pytest.approx(sum(avg[k] for k in recalls))


def test_coco_folds_smaller_galleries_and_one_fold_is_the_whole_set():
    rng = np.random.default_rng(1)
    img, cap, ci = _noisy_case(rng, 50, 5, noise=2.0)
    sim = torch.tensor(_cos(img, cap))
    assert coco_5fold_metrics(sim, ci, n_folds=1) == retrieval_metrics(sim, ci)
    # a 10-image gallery is easier than a 50-image one
    assert coco_5fold_metrics(sim, ci)["t2i_r1"] >= retrieval_metrics(sim, ci)["t2i_r1"]


def test_coco_folds_validation():
    sim = np.zeros((12, 12))
    ci = np.arange(12)
    with pytest.raises(ValueError, match="divisible"):
        coco_5fold_metrics(sim, ci)
    with pytest.raises(ValueError, match="n_folds"):
        coco_5fold_metrics(sim, ci, n_folds=0)
    with pytest.raises(ValueError, match="fold 1.*no captions"):
        coco_5fold_metrics(np.zeros((4, 2)), [0, 1], n_folds=2)
    with pytest.raises(ValueError, match="NaN"):
        coco_5fold_metrics(np.full((5, 5), np.nan), np.arange(5))


# ------------------------------------------------------------------------------------- per language


def _multilingual_case(rng):
    # 12 images; en captions for all, de for images 0..7, fr for images 4..11 (2 each), shuffled
    img = rng.standard_normal((12, 8)).astype(np.float32)
    ci, lang = [], []
    for code, images in (("en", range(12)), ("de", range(8)), ("fr", range(4, 12))):
        for i in images:
            ci += [i, i]
            lang += [code, code]
    ci = np.array(ci)
    perm = rng.permutation(ci.size)
    ci, lang = ci[perm], [lang[p] for p in perm]
    cap = img[ci] + 1.2 * rng.standard_normal((ci.size, 8)).astype(np.float32)
    return img, cap, ci, lang


def test_evaluate_by_language_gallery_is_images_with_captions_in_that_language():
    rng = np.random.default_rng(2)
    img, cap, ci, lang = _multilingual_case(rng)
    seen = []

    def score(a, b):
        seen.append((a.shape[0], b.shape[0]))
        return _cos(a, b)

    res = evaluate_by_language(img, cap, ci, lang, score)
    assert list(res) == ["de", "en", "fr"]
    assert seen == [(8, 16), (12, 24), (8, 16)]
    lang_arr = np.array(lang)
    for code, res_l in res.items():
        cols = np.flatnonzero(lang_arr == code)
        rows = sorted(set(ci[cols].tolist()))
        local = np.array([rows.index(i) for i in ci[cols]])
        want = retrieval_metrics(_cos(img[rows], cap[cols]), local)
        assert {k: res_l[k] for k in METRIC_KEYS} == want
        assert res_l["n_images"] == len(rows) and res_l["n_captions"] == cols.size
        assert type(res_l["n_images"]) is int and type(res_l["n_captions"]) is int
    # fr gallery holds images 4..11 only: distractor images 0..3 must not appear
    assert res["fr"]["n_images"] == 8


def test_evaluate_by_language_torch_numpy_and_asymmetric_scores():
    rng = np.random.default_rng(3)
    img, cap, ci, lang = _multilingual_case(rng)
    want = evaluate_by_language(img, cap, ci, lang, _order_score, languages=["fr", "en"])
    assert list(want) == ["fr", "en"]

    def torch_order(a, b):
        assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
        return -(torch.clamp(b[None].double() - a[:, None].double(), min=0) ** 2).sum(-1)

    got = evaluate_by_language(
        torch.tensor(img), torch.tensor(cap), torch.tensor(ci), lang, torch_order, languages=["fr", "en"]
    )
    for code in want:
        for k in want[code]:
            assert got[code][k] == pytest.approx(want[code][k]), (code, k)
    # order scores are asymmetric: swapping roles changes the result, i.e. rows really are images
    sim = _order_score(img, cap)
    assert not np.allclose(sim, _order_score(cap, img).T)
    # cosine via torch module output works too, and requires_grad inputs do not leak graphs
    t_img = torch.tensor(img, requires_grad=True)
    res = evaluate_by_language(t_img, cap, ci, np.array(lang), cosine_scores, languages="de")
    assert list(res) == ["de"] and type(next(iter(res))) is str
    assert res["de"] == evaluate_by_language(img, cap, ci, lang, _cos)["de"]


def test_evaluate_by_language_validation():
    rng = np.random.default_rng(4)
    img, cap, ci, lang = _multilingual_case(rng)
    with pytest.raises(ValueError, match="no captions in language.*'ja'"):
        evaluate_by_language(img, cap, ci, lang, _cos, languages=["en", "ja"])
    with pytest.raises(ValueError, match="caption_lang has"):
        evaluate_by_language(img, cap, ci, lang[:-1], _cos)
    with pytest.raises(ValueError, match="caption_image has"):
        evaluate_by_language(img, cap, ci[:-1], lang, _cos)
    with pytest.raises(ValueError, match="outside"):
        evaluate_by_language(img[:5], cap, ci, lang, _cos)
    with pytest.raises(ValueError, match="score_fn returned shape"):
        evaluate_by_language(img, cap, ci, lang, lambda a, b: _cos(b, a))
    with pytest.raises(ValueError, match="2-D"):
        evaluate_by_language(img[0], cap, ci, lang, _cos)
    with pytest.raises(ValueError, match="NaN"):
        evaluate_by_language(img, cap, ci, lang, lambda a, b: np.full((len(a), len(b)), np.nan))


# ------------------------------------------------------------------------------------ cross-lingual


def test_cross_lingual_identical_is_perfect_and_uses_the_shared_ranking():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((30, 10))
    res = cross_lingual_retrieval(a, a.copy())
    assert list(res) == list(CROSS_LINGUAL_KEYS)
    assert res["a2b_r1"] == 100.0 and res["b2a_r1"] == 100.0 and res["a2b_medr"] == 1.0
    b = a + 1.5 * rng.standard_normal(a.shape)
    res = cross_lingual_retrieval(torch.tensor(a), b)
    m = retrieval_metrics(_cos(a, b), np.arange(30))
    for key in CROSS_LINGUAL_KEYS:
        src = key.replace("a2b", "i2t").replace("b2a", "t2i")
        assert res[key] == pytest.approx(m[src]), key


def test_cross_lingual_directions_are_not_swapped():
    # sim[i, j] = score(a_i, b_j); a0 prefers b1 (a->b miss for row 0); each b column prefers its own a
    sim = np.array([[0.5, 0.6], [0.1, 0.9]])
    res = cross_lingual_retrieval(np.zeros((2, 1)), np.zeros((2, 1)), score_fn=lambda a, b: sim)
    r = retrieval_ranks(sim, [0, 1])
    assert r.i2t.tolist() == [2, 1] and r.t2i.tolist() == [1, 1]
    assert res["a2b_r1"] == 50.0 and res["b2a_r1"] == 100.0


def test_cross_lingual_constant_embeddings_get_worst_ranks_and_validation():
    res = cross_lingual_retrieval(np.ones((20, 4)), np.ones((20, 4)))
    assert res["a2b_medr"] == 20.0 and res["b2a_medr"] == 20.0 and res["rsum"] == 0.0
    with pytest.raises(ValueError, match="aligned"):
        cross_lingual_retrieval(np.ones((8, 4)), np.ones((7, 4)))
    with pytest.raises(ValueError, match="NaN"):
        cross_lingual_retrieval(np.full((3, 4), np.nan), np.ones((3, 4)))
    with pytest.raises(ValueError, match="score_fn returned shape"):
        cross_lingual_retrieval(np.ones((3, 4)), np.ones((3, 4)), score_fn=lambda a, b: np.ones((3, 2)))


# ------------------------------------------------------------------------------------------- reports


def test_markdown_table_layout():
    res = {
        "en": {
            "i2t_r1": 12.345,
            "i2t_r5": 40.0,
            "i2t_r10": 55.55,
            "i2t_medr": 9.0,
            "t2i_r1": 10.0,
            "t2i_r5": 33.33,
            "t2i_r10": 50.0,
            "t2i_medr": 10.5,
            "rsum": 201.2,
            "n_images": 1000,
            "n_captions": 5000,
        },
        "de": {"i2t_r1": 1.0, "rsum": 3.0},
    }
    table = markdown_table(res)
    lines = table.strip().split("\n")
    assert lines[0] == (
        "| language | i2t R@1 | i2t R@5 | i2t R@10 | i2t medR | t2i R@1 | t2i R@5 | t2i R@10 "
        "| t2i medR | rsum | images | captions |"
    )
    assert lines[1].startswith("|---|---:|")
    assert lines[2] == "| en | 12.3 | 40.0 | 55.5 | 9 | 10.0 | 33.3 | 50.0 | 10.5 | 201.2 | 1000 | 5000 |"
    assert lines[3] == "| de | 1.0 | - | - | - | - | - | - | - | 3.0 | - | - |"
    short = markdown_table(res, keys=("i2t_r1", "mr"), row_label="model")
    assert short.split("\n")[0] == "| model | i2t R@1 | mR |"


def test_one_table_writer_escapes_a_bar_in_a_cell_for_the_zoo_report_too():
    from polyvse.evaluation.report import markdown_rows
    from polyvse_train.zoo import tables

    assert markdown_rows(["config", "mR"], [["a|b", "1.0"]]) == "| config | mR |\n|---|---:|\n| a\\|b | 1.0 |\n"
    assert tables.markdown_rows is markdown_rows  # the zoo's tables are written by the same function


def test_mean_std_and_table():
    runs = [
        {"i2t_r1": 10.0, "t2i_medr": 3.0, "n_images": 1000, "folds": [1]},
        {"i2t_r1": 20.0, "t2i_medr": 3.0, "n_images": 1000, "folds": [2]},
    ]
    ms = mean_std(runs)
    assert set(ms) == {"i2t_r1", "t2i_medr", "n_images"}
    assert ms["i2t_r1"][0] == pytest.approx(15.0)
    assert ms["i2t_r1"][1] == pytest.approx(np.std([10.0, 20.0], ddof=1))
    assert ms["t2i_medr"] == (3.0, 0.0)
    single = mean_std(runs[:1])
    assert single["i2t_r1"][0] == 10.0 and math.isnan(single["i2t_r1"][1])
    with pytest.raises(ValueError, match="missing"):
        mean_std([{"a": 1.0}, {"b": 2.0}])
    with pytest.raises(ValueError):
        mean_std([])
    table = mean_std_table({"en": runs, "de": single}, keys=("i2t_r1", "t2i_medr", "n_images"))
    lines = table.strip().split("\n")
    assert lines[0] == "| language | i2t R@1 | t2i medR | images |"
    assert lines[2] == "| en | 15.0 ± 7.1 | 3 ± 0 | 1000 ± 0 |"
    assert lines[3] == "| de | 10.0 | 3 | 1000 |"


def test_coco_folds_summarised_with_mean_std():
    rng = np.random.default_rng(6)
    img, cap, ci = _noisy_case(rng, 25, 5, noise=1.5)
    folds = coco_fold_metrics(_cos(img, cap), ci)
    ms = mean_std(folds)
    avg = coco_5fold_metrics(_cos(img, cap), ci)
    for k in METRIC_KEYS:
        assert ms[k][0] == pytest.approx(avg[k])
    assert "±" in mean_std_table({"model": folds}, row_label="run")
