import json

import numpy as np
import pytest
import torch

import polyvse
from polyvse.errors import CheckpointError
from polyvse.model.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from polyvse.modules import JointEmbeddingModel, ModelConfig
from polyvse.modules.text_input import CaptionEncoder


def tiny_checkpoint(seed=0) -> Checkpoint:
    torch.manual_seed(seed)
    enc = CaptionEncoder.build({"en": ["a dog runs", "two cats sleep"], "de": ["ein Hund rennt"]})
    model = JointEmbeddingModel(
        ModelConfig(vocab_size=len(enc.vocab), image_dim=6, embed_dim=4, word_dim=3, hidden_dim=5)
    )
    return Checkpoint(
        model=model.eval(),
        captions=enc,
        backbone="efficientnet-lite0",
        feature_key="k1",
        ten_crop=False,
        languages=["en", "de"],
        training={"seed": seed},
    )


def test_round_trip_gives_identical_embeddings(tmp_path):
    ckpt = tiny_checkpoint()
    save_checkpoint(ckpt, tmp_path / "c")
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["config.json", "model.safetensors", "training.json"]
    model = polyvse.load(tmp_path / "c")
    original = polyvse.model.torch_model.PolyvseModel(ckpt)
    for lang, text in [("en", "a dog sleeps"), ("de", "ein Hund")]:
        np.testing.assert_array_equal(model.encode_text([text], lang), original.encode_text([text], lang))
    feats = np.random.default_rng(0).normal(size=(3, 6)).astype(np.float32)
    np.testing.assert_array_equal(model.encode_image_features(feats), original.encode_image_features(feats))
    sim = model.similarity(model.encode_image_features(feats), model.encode_text(["a dog", "cats"], "en"))
    assert sim.shape == (3, 2)
    assert json.loads((tmp_path / "c" / "training.json").read_text())["seed"] == 0


def test_killed_save_leaves_previous_checkpoint_intact(tmp_path, monkeypatch):
    save_checkpoint(tiny_checkpoint(0), tmp_path / "c")
    import polyvse.model.checkpoint as cp

    def boom(*a, **k):
        raise KeyboardInterrupt("killed mid-save")

    monkeypatch.setattr(cp, "write_json_atomic", boom)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tiny_checkpoint(1), tmp_path / "c")
    assert load_checkpoint(tmp_path / "c").training == {"seed": 0}
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_first_save_killed_leaves_nothing_that_loads(tmp_path, monkeypatch):
    import polyvse.model.checkpoint as cp

    monkeypatch.setattr(cp, "write_json_atomic", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        save_checkpoint(tiny_checkpoint(), tmp_path / "c")
    with pytest.raises(CheckpointError, match="no checkpoint folder"):
        load_checkpoint(tmp_path / "c")


def test_mismatches_fail_clearly(tmp_path):
    save_checkpoint(tiny_checkpoint(), tmp_path / "c")
    cfg_path = tmp_path / "c" / "config.json"
    cfg = json.loads(cfg_path.read_text())

    cfg_path.write_text(json.dumps({**cfg, "format_version": 99}))
    with pytest.raises(CheckpointError, match="format version 99"):
        load_checkpoint(tmp_path / "c")

    bad_vocab = json.loads(json.dumps(cfg))
    bad_vocab["captions"]["vocab"]["tokens"] = bad_vocab["captions"]["vocab"]["tokens"][:-1] + ["en:zebra"]
    cfg_path.write_text(json.dumps(bad_vocab))
    with pytest.raises(CheckpointError, match="vocabulary"):
        load_checkpoint(tmp_path / "c")

    cfg_path.write_text(json.dumps(cfg))
    weights = tmp_path / "c" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="cannot load weights"):
        load_checkpoint(tmp_path / "c")


def test_unknown_language_and_backbone_mismatch(tmp_path):
    save_checkpoint(tiny_checkpoint(), tmp_path / "c")
    model = polyvse.load(tmp_path / "c")
    # the Python API refuses as the command line does: what the model reads and how a language is taught
    with pytest.raises(
        CheckpointError,
        match=r"cannot read Chinese \('zh'\): it is a word-level model, not trained "
        r"on 'zh'.*train one that includes 'zh'",
    ):
        model.encode_text(["狗"], "zh")
    with pytest.raises(
        polyvse.errors.UnknownLanguageError, match="unknown language code .xx.: expected an ISO 639 code"
    ):
        model.encode_text(["x"], "xx")
    with pytest.raises(CheckpointError, match="trained on image features 'k1'"):
        _ = model.extractor  # the installed efficientnet-lite0 has a different key than the fake "k1"
    with pytest.raises(CheckpointError, match="expects"):
        model.encode_image_features(np.zeros((2, 5), dtype=np.float32))
