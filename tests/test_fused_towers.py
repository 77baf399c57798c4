"""Two frozen text towers fused (pretrained_encoder: a+b): side-by-side slices, zeros where a tower lacks the
language, tower dropout that never drops every present tower, checkpoint round trip, and a smoke run with the
real e5 + USE towers on Czech, which only e5 covers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from polyvse.errors import CheckpointError, DataError
from polyvse.modules.pretrained import base
from polyvse.modules.pretrained.captions import PretrainedCaptionEncoder
from polyvse.modules.pretrained.text_branch import PretrainedTextEncoder
from polyvse_train.config import TrainConfig
from polyvse_train.pretrained_tower import check_pretrained_config
from test_pretrained import FakeEncoder


class FakeEnOnly(FakeEncoder):
    name = "fake-en"
    dim = 8
    model_languages = frozenset({"en"})


@pytest.fixture()
def towers(monkeypatch):
    monkeypatch.setitem(base._REGISTRY, "fake", FakeEncoder)
    monkeypatch.setitem(base._REGISTRY, "fake-en", FakeEnOnly)
    return PretrainedCaptionEncoder("fake+fake-en")


def test_fused_inputs_side_by_side(towers):
    assert towers.tower_dims == [8, 8] and towers.dim == 16 and towers.languages == {"en", "de"}
    en = np.stack(towers.ids_many(["a dog", "a cat"], "en"))
    de = np.stack(towers.ids_many(["ein Hund"], "de"))
    assert en.shape == (2, 16) and np.abs(en[:, 8:]).sum() > 0
    assert np.abs(de[:, :8]).sum() > 0 and not de[:, 8:].any()  # fake-en has no German: zeros
    d = towers.to_dict()
    assert d["encoder"] == "fake+fake-en" and d["version"].count("numpy==") == 2 and d["dim"] == 16
    again = PretrainedCaptionEncoder.from_dict(d)
    assert again.tower_dims == [8, 8]
    d["version"] = "numpy==0.0.1+numpy==0.0.1"
    with pytest.raises(CheckpointError, match="trained on numpy==0.0.1"):
        PretrainedCaptionEncoder.from_dict(d)
    with pytest.raises(Exception, match="options apply to a single"):
        PretrainedCaptionEncoder("fake+fake-en", {"prefix": "query"})


def test_tower_dropout_keeps_a_present_tower_and_is_off_in_eval():
    torch.manual_seed(0)
    branch = PretrainedTextEncoder(6, 4, towers=[4, 2], tower_dropout=0.5)
    x = torch.randn(500, 6)
    x[:100, 4:] = 0  # rows whose language the second tower lacks
    dropped = branch._drop_towers(x)
    kept = torch.stack([dropped[:, :4].abs().sum(1) > 0, dropped[:, 4:].abs().sum(1) > 0], 1)
    assert kept.any(1).all()  # never every tower
    assert kept[:100, 0].all() and not kept[:100, 1].any()  # the only present tower is always kept
    rate = 1 - kept[100:, 1].float().mean().item()
    assert 0.18 < rate < 0.32  # dropped alone with 0.5 x 0.5 (a row losing both keeps both)
    branch.eval()
    assert torch.equal(branch._drop_towers(x), dropped) is False  # it is random in training...
    assert torch.equal(branch(x), branch.head(x))  # ...and off in eval: the head sees the input as it is
    with pytest.raises(ValueError, match="add up"):
        PretrainedTextEncoder(7, 4, towers=[4, 2])


def test_config_checks_for_fusion():
    cfg = TrainConfig(
        text_encoder="pretrained",
        pretrained_encoder="e5-small+use-multilingual",
        tower_dropout=0.3,
        languages=["en", "cs"],
    )
    check_pretrained_config(cfg)  # cs: e5 covers it
    cfg.model.pretrained_encoder = "e5-small+bert"
    with pytest.raises(DataError, match="joined by \\+"):
        check_pretrained_config(cfg)
    cfg.model.pretrained_encoder = "e5-small"
    with pytest.raises(DataError, match="tower_dropout"):
        check_pretrained_config(cfg)


def test_smoke_training_with_e5_and_use_on_czech(shared_data, tmp_path):
    import polyvse
    from polyvse_train.train import train

    cfg = TrainConfig(
        name="fused-test",
        languages=["en", "cs"],
        text_encoder="pretrained",
        pretrained_encoder="e5-small+use-multilingual",
        tower_dropout=0.3,
        embed_dim=16,
        smoke_photos=8,
        smoke_max_batches=2,
        threads=1,
    )
    train(cfg, tmp_path, shared_data, smoke=True, progress=False)
    model = polyvse.load(tmp_path / "checkpoint")
    cs = model.encode_text(["pes běží po pláži"], "cs")
    en = model.encode_text(["a dog runs on the beach"], "en")
    assert cs.shape == en.shape == (1, 16) and np.isfinite(cs).all()
