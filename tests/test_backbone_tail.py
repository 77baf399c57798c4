"""Partial fine-tuning of the image backbone (polyvse.features.tail, model.finetune_blocks)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import polyvse
from polyvse.errors import DataError
from polyvse.features.backbones import backbone_tail, get_extractor
from polyvse.features.images import load_image
from polyvse.features.tail import BackboneCutExtractor, split_tail_name, tail_name
from polyvse.model.checkpoint import load_training_state
from polyvse.modules.joint import JointEmbeddingModel, ModelConfig
from polyvse_train.config import TrainConfig
from polyvse_train.train import STATE, build_optimiser, train

SMALL = dict(
    name="tail",
    languages=["en", "de"],
    embed_dim=64,
    word_dim=32,
    hidden_dim=64,
    batch_size=32,
    smoke_photos=32,
    smoke_epochs=2,
    lr=5e-4,
    finetune_blocks=1,
)


@pytest.fixture(scope="module")
def photos(shared_data):
    paths = sorted((shared_data / "flickr8k").rglob("*.jpg"))[:3]
    assert paths, "no Flickr8K photos in the shared data"
    return [load_image(p) for p in paths]


@pytest.fixture(scope="module")
def cut():
    return get_extractor("efficientnet-lite0:tail1")


def test_names():
    assert tail_name("efficientnet-lite2", 1) == "efficientnet-lite2:tail1"
    assert split_tail_name("efficientnet-lite2:tail3") == ("efficientnet-lite2", 3)
    assert split_tail_name("efficientnet-lite2") is None


def test_cut_extractor_and_its_tail_reproduce_the_frozen_backbone(cut, photos):
    full = get_extractor("efficientnet-lite0")
    assert isinstance(cut, BackboneCutExtractor)
    assert cut.map_shape == (192, 7, 7) and cut.dim == 192 * 7 * 7
    assert cut.key != full.key and "tail1" in cut.key  # its own cache entries
    maps = cut.extract(photos)
    assert maps.shape == (3, cut.dim)
    tail = cut.tail_module()
    assert all(p.requires_grad for p in tail.parameters())
    with torch.no_grad():
        pooled = tail(torch.from_numpy(maps)).numpy()
    np.testing.assert_allclose(pooled, full.extract(photos), atol=1e-4)
    # ImageNet classes through cut + tail are those of the whole network
    assert torch.equal(cut.classify(photos).argmax(1), full.classify(photos).argmax(1))


def test_tail_architecture_from_its_name_takes_the_trained_weights(cut, photos):
    tail = backbone_tail(cut.name, cut.map_shape)
    trained = cut.tail_module()
    assert list(tail.state_dict()) == list(trained.state_dict())
    tail.load_state_dict(trained.state_dict())
    x = torch.from_numpy(cut.extract(photos[:1]))
    with torch.no_grad():
        assert torch.allclose(tail(x), trained(x))


def test_what_cannot_be_cut_is_refused():
    with pytest.raises(ValueError, match="train between 1 and 15"):
        get_extractor("efficientnet-lite0:tail16")
    with pytest.raises(ValueError, match="centre crop"):
        get_extractor("efficientnet-lite0:tail1", ten_crop=True)
    with pytest.raises(ValueError, match="names no backbone tail"):
        backbone_tail("efficientnet-lite0", (192, 7, 7))


@pytest.mark.parametrize(
    "over, field",
    [
        ({"backbone": "efficientnet-lite0+efficientnet-lite2"}, "data.backbone"),
        ({"backbone": "resnet152"}, "data.backbone"),
        ({"ten_crop": True}, "data.ten_crop"),
        ({"finetune_blocks": -1}, "model.finetune_blocks"),
        ({"finetune_lr_scale": 0}, "schedule.finetune_lr_scale"),
    ],
)
def test_config_names_the_field_that_stops_fine_tuning(over, field):
    with pytest.raises(DataError, match=field.replace(".", r"\.")):
        TrainConfig.from_dict({**SMALL, **over})


def test_the_tail_learns_at_its_own_rate(cut):
    cfg = TrainConfig(**{**SMALL, "finetune_lr_scale": 0.25})
    model = JointEmbeddingModel(
        ModelConfig(
            vocab_size=10,
            image_dim=cut.dim,
            embed_dim=16,
            word_dim=8,
            hidden_dim=8,
            image_tail=cut.name,
            image_tail_shape=list(cut.map_shape),
        )
    )
    opt = build_optimiser(cfg, model)
    head, tail = opt.param_groups
    assert (head["lr"], tail["lr"]) == (pytest.approx(5e-4), pytest.approx(1.25e-4))
    assert {id(p) for p in tail["params"]} == {id(p) for p in model.image_tail.parameters()}
    assert model.encode_image_features(torch.zeros(2, cut.dim)).shape == (2, 16)


def test_fine_tuned_model_trains_saves_and_embeds_raw_photos(shared_data, tmp_path, cut, photos):
    out = tmp_path / "run"
    metrics = train(TrainConfig(**SMALL), out, shared_data, smoke=True, progress=False)
    assert set(metrics["languages"]) == {"en", "de"}
    model = polyvse.load(out / "checkpoint")
    assert model.checkpoint.backbone == "efficientnet-lite0:tail1"
    assert model.checkpoint.feature_key == cut.key
    # the tail moved away from the ImageNet weights it started from
    start = cut.tail_module().state_dict()
    moved = [k for k, v in model.model.image_tail.state_dict().items() if not torch.allclose(v, start[k])]
    assert moved
    # a raw photo goes through the cut backbone, then the trained tail and head
    direct = model.encode_image(photos[:2])
    via_maps = model.encode_image_features(cut.extract(photos[:2]))
    np.testing.assert_allclose(direct, via_maps, atol=1e-5)
    # the schedule set each epoch's lr and kept the tail's fraction of it
    groups = load_training_state(out / STATE)["optimiser"]["param_groups"]
    assert [g["lr"] for g in groups] == [pytest.approx(5e-4), pytest.approx(5e-5)]
