"""polyvse.alignment: MUSE lexicons, Procrustes, CSLS, RCSLS, word-translation P@1 and AME's alignment ratio.

Hand-computed cases, slow direct references, the real MUSE de-en / en-de files, and an end-to-end check on
synthetic embeddings (no pretrained word vectors are available or assumed).
"""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
import torch
from torch.nn import functional as F

from polyvse.alignment import (
    RCSLSLoss,
    alignment_ratio,
    csls_retrieve,
    csls_scores,
    filter_lexicon,
    fit_rcsls,
    muse_paths,
    nearest_orthogonal,
    nn_retrieve,
    procrustes,
    rcsls_loss,
    read_muse_dictionary,
    spectral_projection,
    word_translation_p_at_1,
)
from polyvse.errors import DataError
from polyvse.text.vocab import Vocabulary

D64 = torch.float64


def rotation2d(deg: float) -> torch.Tensor:
    t = math.radians(deg)
    return torch.tensor([[math.cos(t), math.sin(t)], [-math.sin(t), math.cos(t)]], dtype=D64)


def random_orthogonal(d: int, g: torch.Generator, dtype=D64) -> torch.Tensor:
    q, r = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=dtype))
    return q * torch.sign(torch.diagonal(r))


# ====================================================================== lexicon


def test_read_muse_dictionary_pairs_blank_lines_bom_and_unicode(tmp_path):
    p = tmp_path / "de-en.txt"
    p.write_bytes("\ufeffder the\ndie the\n\nstraße street\n  größe\tsize  \n".encode("utf-8"))
    assert read_muse_dictionary(p) == [("der", "the"), ("die", "the"), ("straße", "street"), ("größe", "size")]


@pytest.mark.parametrize("bad", ["onlyone", "a b c"])
def test_read_muse_dictionary_malformed_line_names_file_and_line(tmp_path, bad):
    p = tmp_path / "en-de.txt"
    p.write_text(f"the die\n{bad}\ncat katze\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_muse_dictionary(p)
    assert e.value.path == str(p) and e.value.line == 2
    assert f"{p}:2" in str(e.value)


def test_read_muse_dictionary_bad_utf8_and_missing_file(tmp_path):
    p = tmp_path / "en-de.txt"
    p.write_bytes(b"the die\ncat k\xe4tze\n")  # latin-1, not UTF-8
    with pytest.raises(DataError) as e:
        read_muse_dictionary(p)
    assert e.value.line == 2 and "UTF-8" in str(e.value)
    with pytest.raises(DataError):
        read_muse_dictionary(tmp_path / "nope.txt")


PAIRS = [("der", "the"), ("hund", "dog"), ("hund", "hound"), ("katze", "cat"), ("unbekannt", "unknown")]


def test_filter_lexicon_with_dicts():
    src = {"der": 0, "hund": 1, "katze": 2}
    tgt = {"the": 5, "dog": 3, "cat": 4}
    idx, kept = filter_lexicon(PAIRS, src, tgt)
    assert kept == [("der", "the"), ("hund", "dog"), ("katze", "cat")]
    assert idx.dtype == torch.long and idx.tolist() == [[0, 5], [1, 3], [2, 4]]


def test_filter_lexicon_with_stoi_object_and_polyvse_vocabulary():
    class StoiVocab:
        def __init__(self, words):
            # defaultdict like torchtext's: a lookup must not turn unknown words into <unk> hits
            self.stoi = defaultdict(lambda: 0, {w: i + 1 for i, w in enumerate(words)})

    src = StoiVocab(["hund", "katze"])
    tgt = Vocabulary(["dog", "cat", "hound"])  # ids 2, 3, 4 (0 = PAD, 1 = UNK)
    idx, kept = filter_lexicon(PAIRS, src, tgt)
    assert kept == [("hund", "dog"), ("hund", "hound"), ("katze", "cat")]
    assert idx.tolist() == [[1, 2], [1, 4], [2, 3]]
    assert "der" not in src.stoi  # membership test did not insert anything


def test_filter_lexicon_empty_result_and_bad_vocab():
    idx, kept = filter_lexicon(PAIRS, {}, {"the": 0})
    assert kept == [] and idx.shape == (0, 2) and idx.dtype == torch.long
    with pytest.raises(TypeError):
        filter_lexicon(PAIRS, ["der"], {"the": 0})


def test_muse_paths(tmp_path):
    muse = tmp_path / "muse"
    (muse / "full").mkdir(parents=True)
    (muse / "splits_reconstructed").mkdir()
    for name in ["full/de-en.txt", "splits_reconstructed/de-en.0-5000.txt", "splits_reconstructed/de-en.5000-6500.txt"]:
        (muse / name).write_text("der the\n", encoding="utf-8")
    assert muse_paths(muse, "de", "en", "full") == muse / "full" / "de-en.txt"
    assert muse_paths(tmp_path, "de", "en", "0-5000") == muse / "splits_reconstructed" / "de-en.0-5000.txt"
    assert muse_paths(muse, "de", "en", "5000-6500") == muse / "splits_reconstructed" / "de-en.5000-6500.txt"
    assert muse_paths(muse, "de", "en", ["full", "5000-6500"]) == [
        muse / "full" / "de-en.txt",
        muse / "splits_reconstructed" / "de-en.5000-6500.txt",
    ]
    for wrong in ("dev", "train", "test"):  # the lexicon parts come from muse_lexicon, not from a file
        with pytest.raises(ValueError):
            muse_paths(muse, "de", "en", wrong)
    with pytest.raises(DataError):
        muse_paths(muse, "en", "de", "full")
    assert muse_paths(muse, "en", "de", "full", check=False) == muse / "full" / "en-de.txt"


# (file, pairs, distinct source words) of the MUSE files at hand
MUSE_COUNTS = {
    ("de", "en", "full"): (101997, 78200),
    ("de", "en", "0-5000"): (10866, 5000),
    ("de", "en", "5000-6500"): (2827, 1500),
    ("en", "de", "full"): (101931, 74655),
    ("en", "de", "0-5000"): (14677, 5000),
    ("en", "de", "5000-6500"): (3660, 1500),
}


@pytest.mark.slow
@pytest.mark.parametrize("src,tgt", [("de", "en"), ("en", "de")])
def test_real_muse_de_en_files(shared_data, src, tgt):
    lex = {
        split: read_muse_dictionary(muse_paths(shared_data, src, tgt, split))
        for split in ("full", "0-5000", "5000-6500")
    }
    for split, pairs in lex.items():
        n_pairs, n_src = MUSE_COUNTS[(src, tgt, split)]
        assert len(pairs) == n_pairs, split
        assert len({s for s, _ in pairs}) == n_src, split
        assert len(set(pairs)) == len(pairs), f"duplicate pairs in {split}"
    full = set(lex["full"])
    assert set(lex["0-5000"]) <= full and set(lex["5000-6500"]) <= full
    first_src = {s for s, _ in lex["0-5000"]}
    assert first_src.isdisjoint(s for s, _ in lex["5000-6500"])
    # the reconstruction rule: the first 5000 / next 1500 distinct source words of full/, in file order
    order = list(dict.fromkeys(s for s, _ in lex["full"]))
    assert first_src == set(order[:5000])
    assert {s for s, _ in lex["5000-6500"]} == set(order[5000:6500])
    # filtering to a vocabulary keeps exactly the covered pairs, as index pairs
    src_vocab = {w: i for i, w in enumerate(order[:200])}
    tgt_vocab = {w: i for i, w in enumerate(dict.fromkeys(t for _, t in lex["0-5000"]))}
    idx, kept = filter_lexicon(lex["0-5000"], src_vocab, tgt_vocab)
    assert kept == [p for p in lex["0-5000"] if p[0] in src_vocab]
    assert idx.shape == (len(kept), 2)
    assert [(order[i], list(tgt_vocab)[j]) for i, j in idx.tolist()[:50]] == kept[:50]


# ====================================================================== Procrustes


def test_procrustes_recovers_a_known_rotation_exactly():
    R = rotation2d(90.0)  # [[0, 1], [-1, 0]]
    X = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=D64)
    W = procrustes(X, X @ R)
    assert torch.allclose(W, torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=D64), atol=1e-12)

    g = torch.Generator().manual_seed(0)
    R = random_orthogonal(16, g)
    X = torch.randn(40, 16, generator=g, dtype=D64)
    W = procrustes(X, X @ R)
    assert torch.allclose(W, R, atol=1e-10)
    assert torch.allclose(W.T @ W, torch.eye(16, dtype=D64), atol=1e-10)
    # float32 in -> float32 out, still (nearly) exact
    W32 = procrustes(X.float(), (X @ R).float())
    assert W32.dtype == torch.float32 and torch.allclose(W32.double(), R, atol=1e-5)


def test_procrustes_is_the_best_orthogonal_map_under_noise():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(30, 4, generator=g, dtype=D64)
    Y = X @ random_orthogonal(4, g) + 0.3 * torch.randn(30, 4, generator=g, dtype=D64)
    W = procrustes(X, Y)
    best = (X @ W - Y).norm()
    for _ in range(200):
        Q = random_orthogonal(4, g)
        assert (X @ Q - Y).norm() >= best - 1e-12
    with pytest.raises(ValueError):
        procrustes(X, Y[:-1])


# ====================================================================== CSLS

# target = the standard basis, so cos(x_i, y_j) = x_i[j] (all rows unit length)
CSLS_SRC = torch.tensor([[0.6, 0.8, 0.0], [0.8, 0.6, 0.0], [0.0, 0.8, 0.6]], dtype=D64)
CSLS_TGT = torch.eye(3, dtype=D64)
# k = 2:  r_T(x) = mean of the two largest entries of each row  = [0.7, 0.7, 0.7]
#         r_S(y) = mean of the two largest entries of each column = [0.7, 0.8, 0.3]   (y2 is a hub)
#         CSLS   = 2 cos - r_T - r_S
CSLS_EXPECTED = torch.tensor([[-0.2, 0.1, -1.0], [0.2, -0.3, -1.0], [-1.4, 0.1, 0.2]], dtype=D64)


def test_csls_scores_hand_example():
    assert torch.allclose(csls_scores(CSLS_SRC, CSLS_TGT, k=2), CSLS_EXPECTED, atol=1e-12)
    # rows are normalised internally: scaling the inputs changes nothing
    assert torch.allclose(csls_scores(3.0 * CSLS_SRC, 0.5 * CSLS_TGT, k=2), CSLS_EXPECTED, atol=1e-12)


def test_csls_retrieve_fixes_the_hub_that_nn_picks():
    idx, val = csls_retrieve(CSLS_SRC, CSLS_TGT, k=2)
    assert idx[:, 0].tolist() == [1, 0, 2]
    assert torch.allclose(val[:, 0], torch.tensor([0.1, 0.2, 0.2], dtype=D64), atol=1e-12)
    nn_idx, nn_val = nn_retrieve(CSLS_SRC, CSLS_TGT)
    assert nn_idx[:, 0].tolist() == [1, 0, 1]  # x3 goes to the hub y2 by plain cosine
    assert torch.allclose(nn_val[:, 0], torch.tensor([0.8, 0.8, 0.8], dtype=D64))
    # top-2, a query subset, and chunking all agree with the full matrix
    idx2, val2 = csls_retrieve(CSLS_SRC, CSLS_TGT, k=2, topk=2, queries=torch.tensor([2, 0]), chunk_size=1)
    assert idx2.tolist() == [[2, 1], [1, 0]]
    assert torch.allclose(val2, torch.tensor([[0.2, 0.1], [0.1, -0.2]], dtype=D64), atol=1e-12)
    with pytest.raises(ValueError):
        csls_retrieve(CSLS_SRC, CSLS_TGT, k=4)


def test_csls_retrieve_chunked_matches_full_matrix_on_random_data():
    g = torch.Generator().manual_seed(2)
    src, tgt = torch.randn(37, 8, generator=g), torch.randn(53, 8, generator=g)
    full = csls_scores(src, tgt, k=5)
    q = torch.tensor([3, 36, 0, 17])
    idx, val = csls_retrieve(src, tgt, k=5, topk=3, queries=q, chunk_size=2)
    ref = full[q].topk(3, dim=1)
    assert torch.equal(idx, ref.indices)
    assert torch.allclose(val, ref.values, atol=1e-6)


# ====================================================================== RCSLS


def rcsls_slow(xw, y, zsw, zt, k):
    """Direct transcription of the loss with Python loops and sorting (dot products)."""
    total = 0.0
    n = xw.shape[0]
    for i in range(n):
        paired = float(xw[i] @ y[i])
        to_tgt = sorted((float(xw[i] @ zt[j]) for j in range(zt.shape[0])), reverse=True)[:k]
        to_src = sorted((float(zsw[j] @ y[i]) for j in range(zsw.shape[0])), reverse=True)[:k]
        total += -2.0 * paired + sum(to_tgt) / k + sum(to_src) / k
    return total / n


def rcsls_reference_grad(X, Y, Zs, Zt, W, k):
    """The closed-form (sub)gradient of Joulin et al.'s code, rewritten for the ``X @ W`` convention."""
    n = X.shape[0]
    g = -2.0 * X.T @ Y
    nn_t = (X @ W @ Zt.T).topk(k, dim=1).indices  # neighbours of x_i W among the targets
    g += X.T @ Zt[nn_t].sum(1) / k
    nn_s = (Y @ (Zs @ W).T).topk(k, dim=1).indices  # neighbours of y_i among the mapped sources
    g += Zs[nn_s].sum(1).T @ Y / k  # sum_i sum_j z_j^T y_i  (z_j in N_k(y_i))
    return g / n


@pytest.fixture()
def tiny_rcsls():
    g = torch.Generator().manual_seed(3)
    X = F.normalize(torch.randn(6, 4, generator=g, dtype=D64), dim=1)
    Y = F.normalize(torch.randn(6, 4, generator=g, dtype=D64), dim=1)
    Zs = F.normalize(torch.randn(9, 4, generator=g, dtype=D64), dim=1)
    Zt = F.normalize(torch.randn(11, 4, generator=g, dtype=D64), dim=1)
    W = torch.eye(4, dtype=D64) + 0.3 * torch.randn(4, 4, generator=g, dtype=D64)
    return X, Y, Zs, Zt, W


def test_rcsls_value_matches_slow_direct_computation(tiny_rcsls):
    X, Y, Zs, Zt, W = tiny_rcsls
    for k in (1, 3, 9):
        got = rcsls_loss(X @ W, Y, Zs @ W, Zt, k=k)
        assert got.dim() == 0
        assert math.isclose(float(got), rcsls_slow(X @ W, Y, Zs @ W, Zt, k), abs_tol=1e-12)
    # module form and chunking give the same number
    assert math.isclose(
        float(RCSLSLoss(k=3)(X @ W, Y, Zs @ W, Zt)),
        float(rcsls_loss(X @ W, Y, Zs @ W, Zt, k=3, chunk_size=2)),
        abs_tol=1e-12,
    )
    # normalize=True is the cosine form: the same as feeding unit rows
    xw, zw = F.normalize(X @ W, dim=1), F.normalize(Zs @ W, dim=1)
    assert math.isclose(
        float(rcsls_loss(X @ W, Y, Zs @ W, Zt, k=3, normalize=True)), rcsls_slow(xw, Y, zw, Zt, 3), abs_tol=1e-12
    )


def test_rcsls_hand_value_one_pair():
    # x W = (1, 0), y = (0.6, 0.8); targets {y, (1, 0)}, mapped sources {x W, (0, 1)}; k = 1
    xw, y = torch.tensor([[1.0, 0.0]], dtype=D64), torch.tensor([[0.6, 0.8]], dtype=D64)
    zt = torch.tensor([[0.6, 0.8], [1.0, 0.0]], dtype=D64)
    zsw = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=D64)
    # -2 * 0.6 + max(0.6, 1.0) + max(0.6, 0.8) = -1.2 + 1.0 + 0.8 = 0.6
    assert math.isclose(float(rcsls_loss(xw, y, zsw, zt, k=1)), 0.6, abs_tol=1e-12)


def test_rcsls_gradient_reaches_w_and_matches_reference_and_finite_differences(tiny_rcsls):
    X, Y, Zs, Zt, W = tiny_rcsls
    k = 3
    Wp = W.clone().requires_grad_(True)
    loss = RCSLSLoss(k=k)(X @ Wp, Y, Zs @ Wp, Zt)
    loss.backward()
    assert Wp.grad is not None and Wp.grad.abs().sum() > 0
    assert torch.allclose(Wp.grad, rcsls_reference_grad(X, Y, Zs, Zt, W, k), atol=1e-12)
    # the neighbour sets are locally constant, so the loss is smooth at a generic W
    assert torch.autograd.gradcheck(lambda M: rcsls_loss(X @ M, Y, Zs @ M, Zt, k=k), (W.clone().requires_grad_(True),))
    # gradients also reach trainable embeddings (AME fine-tunes the word vectors)
    Ytr = Y.clone().requires_grad_(True)
    rcsls_loss(X @ W, Ytr, Zs @ W, Zt, k=k).backward()
    assert Ytr.grad is not None and Ytr.grad.abs().sum() > 0


def test_rcsls_input_checks(tiny_rcsls):
    X, Y, Zs, Zt, W = tiny_rcsls
    with pytest.raises(ValueError):
        rcsls_loss(X @ W, Y[:-1], Zs @ W, Zt)
    with pytest.raises(ValueError):
        rcsls_loss(X @ W, Y, Zs @ W, Zt, k=10)  # only 9 mapped sources
    with pytest.raises(ValueError):
        RCSLSLoss(k=0)


def test_spectral_projection_and_fit_rcsls_constraints(tiny_rcsls):
    X, Y, Zs, Zt, W = tiny_rcsls
    P = spectral_projection(3.0 * W)
    assert torch.linalg.svdvals(P).max() <= 1.0 + 1e-12
    Q = random_orthogonal(4, torch.Generator().manual_seed(4))
    assert torch.allclose(spectral_projection(Q), Q, atol=1e-12)  # orthogonal matrices are fixed points
    assert torch.allclose(nearest_orthogonal(Q @ torch.diag(torch.tensor([2.0, 1, 1, 0.5], dtype=D64))), Q, atol=1e-12)

    hist: list[float] = []
    Ws = fit_rcsls(X, Y, Zs, Zt, k=3, epochs=15, constraint="spectral", history=hist)
    assert torch.linalg.svdvals(Ws).max() <= 1.0 + 1e-9
    assert len(hist) == 16 and all(b <= a + 1e-12 for a, b in zip(hist, hist[1:]))  # never increases
    assert hist[-1] < hist[0]
    Wo = fit_rcsls(X, Y, Zs, Zt, k=3, epochs=5, constraint="orthogonal", init="identity")
    assert torch.allclose(Wo.T @ Wo, torch.eye(4, dtype=D64), atol=1e-10)
    # mini-batch SGD mode runs and returns a finite map of the right shape
    Wb = fit_rcsls(X, Y, Zs, Zt, k=3, epochs=3, batch_size=2, generator=torch.Generator().manual_seed(0))
    assert Wb.shape == (4, 4) and torch.isfinite(Wb).all()
    with pytest.raises(ValueError):
        fit_rcsls(X, Y, init="svd")


# ====================================================================== P@1 and alignment ratio


def test_word_translation_p_at_1_hand_case():
    # CSLS example above: CSLS picks y2, y1, y3; plain NN picks y2, y1, y2 (the hub)
    pairs = torch.tensor([[0, 1], [1, 0], [2, 2]])
    assert word_translation_p_at_1(CSLS_SRC, CSLS_TGT, pairs, method="csls", k=2) == pytest.approx(100.0)
    assert word_translation_p_at_1(CSLS_SRC, CSLS_TGT, pairs, method="nn") == pytest.approx(200.0 / 3)
    # a second gold translation of x3 (y2) makes its NN answer correct: any gold translation counts
    more = [(0, 1), (1, 0), (2, 2), (2, 1)]
    assert word_translation_p_at_1(CSLS_SRC, CSLS_TGT, more, method="nn") == pytest.approx(100.0)
    # one query per distinct source word, not per pair
    assert word_translation_p_at_1(CSLS_SRC, CSLS_TGT, [(0, 0), (0, 2)], method="nn") == pytest.approx(0.0)
    # words of the dictionary missing from the vocabulary count as errors when the file size is given
    assert word_translation_p_at_1(CSLS_SRC, CSLS_TGT, pairs, method="csls", k=2, num_source_words=4) == pytest.approx(
        75.0
    )
    with pytest.raises(ValueError):
        word_translation_p_at_1(CSLS_SRC, CSLS_TGT, pairs, num_source_words=2)
    with pytest.raises(ValueError):
        word_translation_p_at_1(CSLS_SRC, CSLS_TGT, pairs, method="knn")
    with pytest.raises(ValueError):
        word_translation_p_at_1(CSLS_SRC, CSLS_TGT, torch.empty((0, 2), dtype=torch.long))
    with pytest.raises(IndexError):
        word_translation_p_at_1(CSLS_SRC, CSLS_TGT, [(0, 3)])


def test_alignment_ratio_hand_case():
    # AME: percentage of lexicon source words whose cosine nearest target is a gold translation
    pairs = torch.tensor([[0, 1], [1, 0], [2, 2]])
    assert alignment_ratio(CSLS_SRC, CSLS_TGT, pairs) == pytest.approx(200.0 / 3)
    # AME's code divides by the distinct source words of the lexicon file
    assert alignment_ratio(CSLS_SRC, CSLS_TGT, pairs, num_source_words=6) == pytest.approx(100.0 / 3)
    # a perfectly aligned space scores 100, whatever the hubness
    assert alignment_ratio(CSLS_TGT, CSLS_TGT, [(0, 0), (1, 1), (2, 2)]) == pytest.approx(100.0)


# ====================================================================== end to end


def synthetic_pair(n: int, d: int, noise: float, seed: int, anisotropic: bool = False):
    """Unit source rows X, and Y = normalise(X A + noise), A a random rotation (optionally re-scaled)."""
    g = torch.Generator().manual_seed(seed)
    X = F.normalize(torch.randn(n, d, generator=g), dim=1)
    R = random_orthogonal(d, g, torch.float32)
    A = R
    if anisotropic:
        A = R @ torch.diag(torch.linspace(0.3, 1.7, d)) @ random_orthogonal(d, g, torch.float32)
    Y = F.normalize(X @ A + noise / math.sqrt(d) * torch.randn(n, d, generator=g), dim=1)
    return X, Y, R


def test_end_to_end_procrustes_then_rcsls_on_a_noisy_rotation():
    n, d, n_train = 1000, 32, 500
    X, Y, R = synthetic_pair(n, d, noise=0.3, seed=0)
    train = torch.arange(n_train)
    test_pairs = torch.stack([torch.arange(n_train, n)] * 2, dim=1)  # held-out words: i <-> i
    before = word_translation_p_at_1(X, Y, test_pairs, method="csls")
    assert before < 5.0  # unmapped spaces are unrelated

    W = procrustes(X[train], Y[train])
    p_proc = word_translation_p_at_1(X @ W, Y, test_pairs, method="csls")
    assert p_proc >= 99.0
    assert alignment_ratio(X @ W, Y, test_pairs) >= 99.0

    W_r = fit_rcsls(X[train], Y[train], X, Y, init="procrustes", epochs=10, lr=1.0, k=10)
    p_rcsls = word_translation_p_at_1(X @ W_r, Y, test_pairs, method="csls")
    assert p_rcsls >= p_proc
    W_s = fit_rcsls(X[train], Y[train], X, Y, epochs=10, k=10, constraint="spectral")
    assert word_translation_p_at_1(X @ W_s, Y, test_pairs, method="csls") >= p_proc


def test_end_to_end_rcsls_beats_procrustes_when_the_true_map_is_not_orthogonal():
    # Procrustes can only rotate; RCSLS (unconstrained, as in Joulin et al.) also fits the scaling.
    n, d, n_train = 1000, 32, 500
    X, Y, _ = synthetic_pair(n, d, noise=1.2, seed=0, anisotropic=True)
    train = torch.arange(n_train)
    test_pairs = torch.stack([torch.arange(n_train, n)] * 2, dim=1)
    p_proc = word_translation_p_at_1(X @ procrustes(X[train], Y[train]), Y, test_pairs, method="csls")
    W_r = fit_rcsls(X[train], Y[train], X, Y, epochs=10, lr=1.0, k=10)
    p_rcsls = word_translation_p_at_1(X @ W_r, Y, test_pairs, method="csls")
    assert 50.0 < p_proc < 95.0  # a regime where there is something to gain
    assert p_rcsls > p_proc
