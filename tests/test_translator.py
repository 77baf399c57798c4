"""The Translator's parts: the language map in the text branch, its SVD/Procrustes + RCSLS initialisation,
the staged/repeated epoch schedules, the caption limit for learning curves, and a two-stage run on real data."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from polyvse.alignment import rcsls_loss
from polyvse.data.caption_limit import limit_captions
from polyvse.errors import DataError
from polyvse.modules import JointEmbeddingModel, ModelConfig, TextEncoder
from polyvse.modules.language_mapping import LanguageMapping, fit_language_map
from polyvse_train.config import TrainConfig
from polyvse_train.objectives.translator import TranslatorSchedule
from polyvse_train.sampling import CaptionSubsetSampler, DistinctPhotoBatchSampler, RepeatedPassSampler, StagedSampler
from polyvse_train.train import STATE, train

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


# -- the map in the text branch -------------------------------------------------------------------------
def test_language_map_multiplies_the_rows_of_its_language_only():
    mapping = LanguageMapping(2, ["de", "fr"], ["fr"])
    mapping.set_map("fr", torch.tensor([[0.0, 2.0], [1.0, 0.0]]))
    x = torch.tensor([[[1.0, 3.0]], [[1.0, 3.0]]])  # (batch 2, T 1, d 2): a de row, then a fr row
    out = mapping(x, torch.tensor([0, 1]))
    # [1, 3] @ [[0, 2], [1, 0]] = [3, 2]; the de row passes unchanged
    torch.testing.assert_close(out, torch.tensor([[[1.0, 3.0]], [[3.0, 2.0]]]))
    with pytest.raises(ValueError, match="language_map"):
        LanguageMapping(2, ["de"], ["fr"])
    with pytest.raises(ValueError, match="shape"):
        mapping.set_map("fr", torch.eye(3))


def test_random_map_starts_orthogonal():
    torch.manual_seed(0)
    weight = LanguageMapping(16, ["de", "fr"], ["fr"]).maps["fr"].detach()
    torch.testing.assert_close(weight @ weight.T, torch.eye(16), atol=1e-5, rtol=0)


def test_a_fr_word_mapped_onto_a_de_word_reads_as_that_de_word():
    """What the Translator is for: once M sends a fr word vector to a de word vector, the (de-trained)
    encoder gives the fr caption the de caption's embedding."""
    torch.manual_seed(0)
    enc = TextEncoder(6, word_dim=4, hidden_dim=8, embed_dim=5, languages=["de", "fr"], language_map=["fr"]).eval()
    assert enc.needs_language
    q, _ = torch.linalg.qr(torch.randn(4, 4))
    enc.language_map.set_map("fr", q)
    with torch.no_grad():  # fr words 4, 5 are the de words 2, 3 rotated by q^T
        enc.embed.weight[4:6] = enc.embed.weight[2:4] @ q.T
    lengths = torch.tensor([2, 2])
    out = enc(torch.tensor([[2, 3], [4, 5]]), lengths, torch.tensor([0, 1]))
    torch.testing.assert_close(out[0], out[1], atol=1e-5, rtol=1e-5)
    # without the language the map cannot be applied
    with pytest.raises(ValueError, match="langs"):
        enc(torch.tensor([[2, 3]]), torch.tensor([2]))


def _model(freeze: bool = False) -> tuple[JointEmbeddingModel, TrainConfig]:
    torch.manual_seed(0)
    model = JointEmbeddingModel(
        ModelConfig(
            vocab_size=8,
            image_dim=3,
            embed_dim=5,
            word_dim=4,
            hidden_dim=6,
            languages=["de", "fr"],
            language_map=["fr"],
        )
    )
    cfg = TrainConfig(
        languages=["de", "fr"],
        objective="translator",
        source_language="de",
        source_epochs=1,
        language_map=["fr"],
        freeze_language_map=freeze,
    )
    return model, cfg


def _loss(model, langs) -> torch.Tensor:
    images, texts = model(torch.randn(2, 3), torch.tensor([[1, 2], [3, 4]]), torch.tensor([2, 2]), langs)
    return model.scores(images, texts).sum()


def test_gradient_reaches_the_map_from_fr_rows_only_and_never_when_frozen():
    model, cfg = _model()
    TranslatorSchedule(cfg, model, data=None, root=None)
    weight = model.text_encoder.language_map.maps["fr"]
    _loss(model, ["de", "de"]).backward()
    assert weight.grad is None  # no fr caption, no gradient (the source stage leaves M alone)
    _loss(model, ["de", "fr"]).backward()
    assert weight.grad is not None and weight.grad.abs().sum() > 0

    frozen, cfg = _model(freeze=True)
    TranslatorSchedule(cfg, frozen, data=None, root=None)
    weight = frozen.text_encoder.language_map.maps["fr"]
    assert not weight.requires_grad
    before = weight.detach().clone()
    from polyvse_train.train import build_optimiser

    optimiser = build_optimiser(cfg, frozen)
    _loss(frozen, ["fr", "fr"]).backward()
    optimiser.step()
    assert weight.grad is None and torch.equal(weight.detach(), before)
    assert frozen.text_encoder.embed.weight.grad.abs().sum() > 0  # the rest still learns


def test_translator_fields_are_checked():
    for bad, match in (
        (dict(language_map=["fr"], language_map_init="lexicon"), "objective.translator.source_language: "),
        (dict(source_language="de", language_map=["de"]), "model.language_map .* INTO"),
        (dict(source_language="de", language_map_init="svd"), "objective.translator.language_map_init: 'svd'"),
        (dict(source_language="it"), "objective.translator.source_language: 'it' is not among"),
        (dict(), "needs a source stage .* or a map"),
        (dict(source_language="de", objective="pivot"), "an option of objective translator, not of pivot"),
        (dict(language_map=["fr"], objective="vse"), "model.language_map .* set objective.name: translator"),
    ):
        with pytest.raises(DataError, match=match):
            TrainConfig.from_dict(dict(languages=["de", "fr"], **{"objective": "translator", **bad}))


# -- SVD/Procrustes + RCSLS initialisation -------------------------------------------------------------
def test_fit_on_a_hand_computed_rotation():
    # fr unit vectors e1, e2 translate to the de vectors e2, -e1: the map is the rotation [[0, 1], [-1, 0]]
    src = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    tgt = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])
    fit = fit_language_map(src, tgt, torch.tensor([[0, 0], [1, 1]]), rcsls_epochs=0, k=1)
    torch.testing.assert_close(fit.weight, torch.tensor([[0.0, 1.0], [-1.0, 0.0]]), atol=1e-6, rtol=0)
    assert fit.pairs == 2


def test_procrustes_init_is_orthogonal_maps_the_lexicon_and_rcsls_does_not_worsen_it():
    g = torch.Generator().manual_seed(0)
    d, n = 12, 40
    de = torch.nn.functional.normalize(torch.randn(n, d, generator=g), dim=1)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=g))
    fr = de @ q.T + 0.05 * torch.randn(n, d, generator=g)  # fr = de rotated, plus noise
    order = torch.randperm(n, generator=g)  # the two vocabularies list the words in different orders
    fr = fr[order]
    pairs = torch.stack([torch.arange(n), order], dim=1)[:30]  # fr row i translates to de row order[i]
    init = fit_language_map(fr, de, pairs, rcsls_epochs=0, k=5)
    torch.testing.assert_close(init.weight @ init.weight.T, torch.eye(d), atol=1e-5, rtol=0)
    mapped = torch.nn.functional.normalize(fr @ init.weight, dim=1)
    assert ((mapped[:30] * de[order[:30]]).sum(1) > 0.95).all()  # lexicon pairs land on their translation
    assert ((mapped[30:] * de[order[30:]]).sum(1) > 0.95).all()  # and so do words outside the lexicon
    refined = fit_language_map(fr, de, pairs, rcsls_epochs=10, k=5)
    assert refined.rcsls_loss <= refined.procrustes_loss + 1e-6
    assert refined.procrustes_loss == pytest.approx(init.rcsls_loss, abs=1e-5)
    # the reported losses are the alignment module's RCSLS loss
    unit_fr, unit_de = (torch.nn.functional.normalize(t, dim=1) for t in (fr, de))
    expected = rcsls_loss(
        unit_fr[pairs[:, 0]] @ refined.weight, unit_de[pairs[:, 1]], unit_fr @ refined.weight, unit_de, k=5
    )
    assert refined.rcsls_loss == pytest.approx(float(expected), abs=1e-5)
    with pytest.raises(ValueError, match="pairs"):
        fit_language_map(fr, de, torch.empty(0, 2, dtype=torch.long))


# -- epoch schedules ------------------------------------------------------------------------------------
def test_subset_staged_and_repeated_samplers():
    caption_photo = np.array([0, 0, 1, 2, 3, 3, 4, 5, 6, 7])
    langs = np.array(["de", "fr", "de", "de", "fr", "de", "fr", "fr", "fr", "fr"])

    def make(cp):
        return DistinctPhotoBatchSampler(cp, 2, seed=3)

    fr_rows = np.flatnonzero(langs == "fr")
    fr = CaptionSubsetSampler(caption_photo, fr_rows, make)
    batches = fr.epoch_batches(0)
    assert sorted(i for b in batches for i in b) == fr_rows.tolist()  # fr captions only, each once
    de = CaptionSubsetSampler(caption_photo, np.flatnonzero(langs == "de"), make)
    staged = StagedSampler(de, fr, switch_epoch=2)
    assert staged.epoch_batches(1) == de.epoch_batches(1) and staged.epoch_batches(2) == fr.epoch_batches(2)

    repeated = RepeatedPassSampler(fr, min_batches=7)  # a pass = 3 batches (6 fr captions, batches of 2)
    epoch = repeated.epoch_batches(4)
    assert len(epoch) == 7 and epoch == repeated.epoch_batches(4)  # exact size, reproducible
    assert epoch[:3] == fr.epoch_batches(4 * repeated.passes)
    assert repeated.epoch_batches(5) != epoch
    assert RepeatedPassSampler(fr, min_batches=2).epoch_batches(4) == fr.epoch_batches(4)  # a pass is enough
    with pytest.raises(ValueError, match="empty"):
        CaptionSubsetSampler(caption_photo, [], make)


# -- caption limit ----------------------------------------------------------------------------------------
@dataclass
class Cap:
    lang: str
    text: str


def test_caption_limit_keeps_a_seeded_nested_subset_of_one_language():
    caps = [Cap("fr", f"fr {i}") for i in range(50)] + [Cap("de", f"de {i}") for i in range(30)]
    ten = limit_captions(caps, {"fr": 10}, seed=0)
    assert sum(c.lang == "fr" for c in ten) == 10 and sum(c.lang == "de" for c in ten) == 30
    assert [c for c in caps if c in ten] == ten  # input order kept
    twenty = limit_captions(caps, {"fr": 20}, seed=0)
    assert {c.text for c in ten} < {c.text for c in twenty}  # nested
    assert limit_captions(caps, {"fr": 10}, seed=0) == ten  # reproducible
    assert {c.text for c in limit_captions(caps, {"fr": 10}, seed=1)} != {c.text for c in ten}
    assert limit_captions(caps, {"fr": 100}, seed=0) == caps  # more than available: all
    assert limit_captions(caps, {}, seed=0) == caps
    both = limit_captions(caps, {"fr": 10, "de": 5}, seed=0)
    assert [c for c in both if c.lang == "fr"] == [c for c in ten if c.lang == "fr"]  # independent per language
    for bad in (0, -3, 2.5, True):
        with pytest.raises(DataError, match="caption_limit"):
            limit_captions(caps, {"fr": bad}, seed=0)
    with pytest.raises(DataError, match="no training caption"):
        limit_captions(caps, {"cs": 5}, seed=0)


def test_caption_limit_on_f8kml_touches_training_captions_only(shared_data):
    from polyvse.data.registry import load_dataset
    from polyvse.data.splits import resolve_split

    corpus = load_dataset("f8k-ml", shared_data).filter(langs=["de", "fr"])
    train_ids, eval_ids = resolve_split(corpus)  # a config's default split: official, evaluated on test
    train_caps = [c for c in corpus.captions if c.photo_id in train_ids]
    kept = limit_captions(train_caps, {"fr": 100}, seed=0)
    assert sum(c.lang == "fr" for c in kept) == 100 and sum(c.lang == "fr" for c in train_caps) == 580
    assert all(c.photo_id in train_ids and c.photo_id not in eval_ids for c in kept)
    assert [c for c in kept if c.lang == "de"] == [c for c in train_caps if c.lang == "de"]


# -- the configs and a two-stage run ------------------------------------------------------------------------
def test_translator_configs_say_what_the_poster_says():
    fs, t1, t2 = (TrainConfig.load(CONFIGS / f"translator-{n}.yaml") for n in ("fs", "t1", "t2"))
    assert fs.data.languages == ["fr"] and not fs.model.language_map and fs.objective.name == "vse"
    for t in (t1, t2):  # de-trained encoder + a trainable map for fr
        opts = t.objective.options
        assert t.objective.name == "translator"
        assert (opts.source_language, t.model.language_map, opts.freeze_language_map) == ("de", ["fr"], False)
        assert opts.source_epochs > 0
    assert (t1.objective.options.language_map_init, t2.objective.options.language_map_init) == ("random", "lexicon")
    # the same target-language budget, so the three are comparable at every point of the learning curve
    for key in ("epochs", "lr", "batch_size", "min_batches_per_epoch", "embed_dim", "hidden_dim", "word_dim"):
        assert fs.get(key) == t1.get(key) == t2.get(key), key


TINY_T2 = dict(
    name="tiny-t2",
    languages=["de", "fr"],
    objective="translator",
    source_language="de",
    source_epochs=2,
    language_map=["fr"],
    language_map_init="lexicon",
    caption_limit={"fr": 12},
    min_batches_per_epoch=3,
    embed_dim=32,
    word_dim=16,
    hidden_dim=32,
    batch_size=8,
    smoke_photos=24,
    smoke_epochs=1,
    smoke_max_batches=3,
    lr=5e-4,
)


def test_two_stage_run_fits_the_map_counts_captions_and_resumes_identically(shared_data, tmp_path):
    cfg = TrainConfig(**TINY_T2)
    ref = train(cfg, tmp_path / "ref", shared_data, smoke=True, progress=False)
    log = [json.loads(line) for line in (tmp_path / "ref" / "train_log.jsonl").read_text().splitlines()]
    assert len(log) == 2  # smoke: one source epoch + one target epoch
    assert log[0]["items"] > 0 and "language_map_fit" not in log[0]
    assert log[1]["language_map_fit"]["fr"]["pairs"] > 0  # fitted at the start of the target stage
    saved = json.loads((tmp_path / "ref" / "metrics.json").read_text())
    assert saved["n_train_captions_by_language"]["fr"] == 12
    assert saved["n_train_captions_by_language"]["de"] > 12
    assert set(saved["languages"]) == {"de", "fr"}
    # stopped at the stage boundary, resumed: the map is fitted on resumption, the numbers are the same
    stopped = train(cfg, tmp_path / "cut", shared_data, smoke=True, progress=False, max_steps=3)
    assert stopped == {"stopped_at_step": 3} and (tmp_path / "cut" / STATE).exists()
    resumed = train(cfg, tmp_path / "cut", shared_data, resume=True, smoke=True, progress=False)
    assert resumed["languages"] == ref["languages"]
