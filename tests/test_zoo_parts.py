"""Unit tests of the zoo's parts: encoders, image head, tuple sampler (quotas, masks), masked losses, api."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import polyvse
from polyvse.losses import GroupedHingeLoss, HingeRankingLoss, ParallelLoss, PivotLoss
from polyvse.model.checkpoint import Checkpoint, save_checkpoint
from polyvse.modules import JointEmbeddingModel, MlpImageHead, ModelConfig, TextEncoder
from polyvse.modules.text_input import CaptionEncoder
from polyvse.similarity import CosineSimilarity, OrderSimilarity
from polyvse_train.sampling import PhotoTupleBatchSampler

IDS = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0], [8, 9, 2, 1]])
LENGTHS = torch.tensor([3, 2, 4])


@pytest.mark.parametrize("cell", ["gru", "lstm", "mean"])
@pytest.mark.parametrize("sharing,universal", [("shared", 0), ("per_language", 0), ("shared", 6)])
def test_text_encoders_shape_padding_and_gradients(cell, sharing, universal):
    torch.manual_seed(0)
    enc = TextEncoder(
        20,
        word_dim=4,
        hidden_dim=8,
        embed_dim=5,
        cell=cell,
        sharing=sharing,
        languages=["en", "de"],
        universal_dim=universal,
    )
    langs = torch.tensor([0, 1, 0]) if enc.needs_language else None
    out = enc(IDS, LENGTHS, langs)
    assert out.shape == (3, 5)
    # padding does not change a sentence's embedding
    alone = enc(IDS[1:2, :2], LENGTHS[1:2], None if langs is None else langs[1:2])
    torch.testing.assert_close(out[1:2], alone, atol=1e-6, rtol=1e-5)
    out.pow(2).sum().backward()
    assert enc.embed.weight.grad[[3, 4, 5, 6, 7]].abs().sum() > 0
    assert enc.embed.weight.grad[10:].abs().sum() == 0  # unused words get nothing
    if sharing == "per_language":  # each language's branch gets the gradient of its own rows only
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in enc.branches["de"].parameters())
    if universal:
        assert enc.universal["de"].weight.grad.abs().sum() > 0


def test_per_language_encoder_needs_languages_and_routes_rows():
    torch.manual_seed(0)
    enc = TextEncoder(20, 4, 8, 5, sharing="per_language", languages=["en", "de"]).eval()
    with pytest.raises(ValueError, match="langs"):
        enc(IDS, LENGTHS)
    mixed = enc(IDS, LENGTHS, torch.tensor([0, 1, 0]))
    all_en = enc(IDS, LENGTHS, torch.tensor([0, 0, 0]))
    torch.testing.assert_close(mixed[[0, 2]], all_en[[0, 2]])
    assert not torch.allclose(mixed[1], all_en[1])  # the de row went through the de branch


def test_mlp_image_head_shape_gradient_and_eval_determinism():
    torch.manual_seed(0)
    head = MlpImageHead(7, 5, hidden_dim=16)
    x = torch.randn(6, 7, requires_grad=True)
    out = head(x)
    assert out.shape == (6, 5)
    out.sum().backward()
    assert head.fc1.weight.grad.abs().sum() > 0 and head.fc2.weight.grad.abs().sum() > 0 and x.grad is not None
    head.eval()  # running statistics: one image embeds the same alone or in a batch
    torch.testing.assert_close(head(x[:1]), head(x)[:1])


def test_joint_model_order_similarity_and_mlp_head():
    model = JointEmbeddingModel(
        ModelConfig(
            vocab_size=20,
            image_dim=7,
            embed_dim=5,
            word_dim=4,
            hidden_dim=6,
            similarity="order",
            image_head="mlp",
            image_hidden_dim=8,
            text_encoder="lstm",
        )
    )
    assert isinstance(model.similarity, OrderSimilarity)
    s = model.scores(model.encode_image_features(torch.randn(4, 7)), model.encode_text_ids(IDS, LENGTHS))
    assert s.shape == (4, 3) and (s <= 0).all()


def make_sampler(batch_size=4, seed=0):
    # photo 0: 3 en, 1 de, 0 fr;  photo 1: 1 en, 2 de, 1 fr;  photo 2: 0 en, 0 de, 1 fr;  photos 3-6: 2 en, 1 de
    photo, lang = [], []
    for p, caps in {0: "eeed", 1: "eddf", 2: "f", 3: "eed", 4: "eed", 5: "eed", 6: "eed"}.items():
        for c in caps:
            photo.append(p * 10)  # photo rows need not be contiguous
            lang.append({"e": "en", "d": "de", "f": "fr"}[c])
    return (
        np.array(photo),
        lang,
        PhotoTupleBatchSampler(photo, lang, {"en": 2, "de": 1, "fr": 1}, batch_size, seed=seed),
    )


def test_tuple_sampler_quotas_masks_and_distinct_photos():
    photo, lang, s = make_sampler()
    assert s.slot_langs == ["en", "en", "de", "fr"]
    batches = s.epoch_batches(0)
    seen = []
    for rows, slots in batches:
        assert slots.shape == (len(rows), 4) and len(set(rows.tolist())) == len(rows)
        for r, row in zip(rows, slots):
            seen.append(int(r))
            for j, c in enumerate(row):
                if c >= 0:
                    assert photo[c] == r and lang[c] == s.slot_langs[j]
            assert len(set(row[row >= 0].tolist())) == (row >= 0).sum()  # no caption twice
    assert sorted(seen) == [0, 10, 20, 30, 40, 50, 60]  # every photo once, none dropped
    by_row = {int(r): row for rows, slots in batches for r, row in zip(rows, slots)}
    assert (by_row[0] >= 0).tolist() == [True, True, True, False]  # no French: masked slot
    assert (by_row[10] >= 0).tolist() == [True, False, True, True]  # one English caption for two slots
    assert (by_row[20] >= 0).tolist() == [False, False, False, True]  # French only, still sampled
    assert len(s) == len(batches) == 2


def test_tuple_sampler_reproducible_and_varies_by_epoch():
    _, _, a = make_sampler(seed=3)
    _, _, b = make_sampler(seed=3)
    for (r1, s1), (r2, s2) in zip(a.epoch_batches(1), b.epoch_batches(1)):
        assert (r1 == r2).all() and (s1 == s2).all()
    flat = lambda e: np.concatenate([s.ravel() for _, s in a.epoch_batches(e)])
    assert any(not np.array_equal(flat(0), flat(e)) for e in (1, 2, 3))


def test_masked_hinge_equals_the_loss_on_the_existing_rows_only():
    torch.manual_seed(0)
    scores = torch.randn(5, 5)
    loss = HingeRankingLoss(0.2)
    assert torch.allclose(loss(scores, torch.ones(5, dtype=torch.bool), torch.ones(5, dtype=torch.bool)), loss(scores))
    keep = torch.tensor([True, False, True, True, False])
    # rows and columns both masked: the same as the loss of the sub-matrix
    torch.testing.assert_close(loss(scores, keep, keep), loss(scores[keep][:, keep]))
    # only captions missing (pivot): images of captionless photos remain negatives for the captions
    cols = keep
    pos = scores.diag()
    expected = sum(
        max(0.0, 0.2 - pos[i] + scores[i, j]) for i in range(5) for j in range(5) if cols[i] and cols[j] and j != i
    )
    expected += sum(max(0.0, 0.2 - pos[j] + scores[i, j]) for j in range(5) for i in range(5) if cols[j] and i != j)
    torch.testing.assert_close(loss(scores, None, cols), torch.as_tensor(expected, dtype=scores.dtype))


def test_pivot_and_parallel_masks_ignore_empty_slots():
    torch.manual_seed(0)
    img, en, de = torch.randn(4, 3), torch.randn(4, 3), torch.randn(4, 3)
    mask = {"en": torch.ones(4, dtype=torch.bool), "de": torch.tensor([True, True, False, True])}
    garbage = de.clone()
    garbage[2] = 100.0  # an empty slot holds anything
    sim = CosineSimilarity()
    for loss in (PivotLoss(sim), ParallelLoss(sim)):
        a = loss(img, {"en": en, "de": de}, mask)
        b = loss(img, {"en": en, "de": garbage}, mask)
        torch.testing.assert_close(a, b)
    # pairs (en_i, de_i) exist for i in {0, 1, 3}; en_2 has no partner but stays a negative for de anchors
    S = sim(en, de)
    ok = [0, 1, 3]
    expected = sum(max(0.0, 0.2 - S[i, i] + S[i, j]) for i in ok for j in ok if j != i)
    expected += sum(max(0.0, 0.2 - S[j, j] + S[i, j]) for j in ok for i in range(4) if i != j)
    torch.testing.assert_close(
        ParallelLoss(sim)(None, {"en": en, "de": de}, mask), torch.as_tensor(expected, dtype=S.dtype)
    )


def test_grouped_hinge_with_one_caption_per_image_is_the_hinge_and_skips_same_image_captions():
    torch.manual_seed(0)
    scores = torch.randn(4, 4)
    for k in (None, 1, 2):
        torch.testing.assert_close(
            GroupedHingeLoss(0.2, top_k=k)(scores, torch.arange(4)), HingeRankingLoss(0.2, top_k=k)(scores)
        )
    # two captions of image 0: neither is a negative of the other's image->caption term
    scores = torch.tensor([[1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]])
    assert GroupedHingeLoss(0.2)(scores, torch.tensor([0, 0, 1])).item() == 0.0


def test_api_passes_the_language_to_per_language_models(tmp_path):
    torch.manual_seed(0)
    enc = CaptionEncoder.build({"en": ["a dog runs"], "de": ["ein hund rennt"]})
    model = JointEmbeddingModel(
        ModelConfig(
            vocab_size=len(enc.vocab),
            image_dim=6,
            embed_dim=4,
            word_dim=3,
            hidden_dim=5,
            text_sharing="per_language",
            languages=["en", "de"],
            universal_dim=3,
        )
    )
    save_checkpoint(
        Checkpoint(
            model=model.eval(),
            captions=enc,
            backbone="efficientnet-lite0",
            feature_key="k",
            ten_crop=False,
            languages=["en", "de"],
        ),
        tmp_path / "c",
    )
    loaded = polyvse.load(tmp_path / "c")
    de = loaded.encode_text(["ein hund"], "de")
    ids = enc.ids_many(["ein hund"], "de")
    np.testing.assert_allclose(loaded.encode_ids(ids), de)  # language read off the tagged ids
    np.testing.assert_allclose(loaded.encode_ids(ids, "de"), de)
    assert not np.allclose(loaded.encode_ids(ids, "en"), de)  # another language's branch differs
