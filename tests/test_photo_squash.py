"""Models trained on squashed photos (f8k-full) see other photos squashed the same way: the preprocessing, the
feature cache's square-photo shortcut, the checkpoint field and its fallback for older checkpoints."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

import polyvse
from polyvse.features import extract_features
from polyvse.features.backbones import get_extractor
from polyvse.features.extractor import Preprocess
from polyvse.model.checkpoint import load_checkpoint, read_checkpoint_config, save_checkpoint
from test_checkpoint import tiny_checkpoint


def _photo(w: int, h: int, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8))


def _pre(squash: bool) -> Preprocess:
    return Preprocess(resize=40, crop=32, mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bicubic", squash=squash)


def test_squash_is_the_photo_resized_to_a_square_and_changes_nothing_on_a_square_photo():
    wide = _photo(90, 45)
    squashed = _pre(True)(wide)
    # the same as resizing both sides with torchvision, then the plain path's centre crop
    from torchvision.transforms import v2 as T

    square = T.Resize((40, 40), interpolation=T.InterpolationMode.BICUBIC, antialias=True)(wide)
    assert torch.equal(squashed, _pre(False)(square))
    assert not torch.equal(squashed, _pre(False)(wide))  # the plain path keeps the aspect ratio: another crop
    sq = _photo(50, 50, seed=1)
    assert torch.equal(_pre(True)(sq), _pre(False)(sq))
    assert _pre(True).describe().endswith(".center.squash.p1") and ".squash" not in _pre(False).describe()
    assert _pre(True).describe(squash=False) == _pre(False).describe()


def test_squashing_extractor_reads_square_photos_from_the_training_cache_and_keeps_its_own(tmp_path):
    plain = get_extractor("efficientnet-lite0", _random_init=True)
    squash = get_extractor("efficientnet-lite0", squash=True, _random_init=True)
    assert squash.key != plain.key and squash.square_key == plain.key == plain.square_key
    (tmp_path / "p").mkdir()
    square, wide = tmp_path / "p" / "square.jpg", tmp_path / "p" / "wide.jpg"
    _photo(240, 240).save(square)
    _photo(360, 240, seed=2).save(wide)
    cache = tmp_path / "cache"
    base = extract_features([square, wide], plain, cache, progress=False)
    assert base.extracted == 2
    got = extract_features([square, wide], squash, cache, progress=False)
    assert (got.cached, got.extracted) == (1, 1)  # the square photo from the plain key, the wide one computed
    np.testing.assert_array_equal(got.features[0], base.features[0])
    assert not np.allclose(got.features[1], base.features[1])
    # the wide photo's squashed vector went under the squashing key only: the plain key still holds its own
    again = extract_features([wide], plain, cache, progress=False)
    assert again.cached == 1
    np.testing.assert_array_equal(again.features[0], base.features[1])
    assert extract_features([wide], squash, cache, progress=False).cached == 1


def test_checkpoint_records_squash_and_older_checkpoints_take_it_from_their_dataset(tmp_path):
    ck = tiny_checkpoint()
    ck.squash_photos = True
    save_checkpoint(ck, tmp_path / "new")
    assert json.loads((tmp_path / "new" / "config.json").read_text())["image_features"]["squash"] is True
    assert load_checkpoint(tmp_path / "new").squash_photos
    for dataset, expected in [("f8k-full", True), ("f8k-ml", False), (None, False)]:
        d = tmp_path / f"old-{dataset}"
        save_checkpoint(tiny_checkpoint(), d)
        cfg = json.loads((d / "config.json").read_text())
        del cfg["image_features"]["squash"]  # as written before the field existed
        (d / "config.json").write_text(json.dumps(cfg))
        (d / "training.json").write_text(json.dumps({"data": dataset} if dataset else {}))
        assert read_checkpoint_config(d).squash_photos is expected, dataset


@pytest.mark.parametrize("squash", [True, False])
def test_a_loaded_model_embeds_raw_photos_the_way_its_training_photos_were_made(tmp_path, squash):
    from polyvse.index.fingerprint import model_fingerprint

    ck = tiny_checkpoint()
    plain = get_extractor("efficientnet-lite0")  # the packaged weights, as polyvse.load builds it
    ck.feature_key, ck.squash_photos = plain.key, squash
    save_checkpoint(ck, tmp_path / "c")
    model = polyvse.load(tmp_path / "c", device="cpu")
    assert model.extractor.preprocess.squash is squash  # and no key-mismatch error for the squashing one
    other = tiny_checkpoint()
    other.feature_key, other.squash_photos = plain.key, not squash
    assert model_fingerprint(model) != model_fingerprint(polyvse.model.torch_model.PolyvseModel(other))


def test_photo_fit_overrides_the_checkpoint_and_an_index_keeps_what_it_was_built_with(tmp_path, shared_data, capsys):
    """--photo-fit crop on a model trained on squashed photos: the index records it, and adding to or searching
    the index by photo later fits photos the same way (the model check passes); the default stays squash."""
    import shutil

    from polyvse.index import PhotoIndex, model_for_index
    from polyvse.model.checkpoint import Checkpoint
    from polyvse.modules import JointEmbeddingModel, ModelConfig
    from polyvse.modules.text_input import CaptionEncoder
    from polyvse_app.cli import main

    torch.manual_seed(0)
    enc = CaptionEncoder.build({"en": ["a dog runs", "two cats sleep"]})
    model = JointEmbeddingModel(
        ModelConfig(vocab_size=len(enc.vocab), image_dim=1280, embed_dim=8, word_dim=4, hidden_dim=8)
    )
    plain = get_extractor("efficientnet-lite0")
    save_checkpoint(
        Checkpoint(
            model=model.eval(),
            captions=enc,
            backbone="efficientnet-lite0",
            feature_key=plain.key,
            ten_crop=False,
            languages=["en"],
            squash_photos=True,
        ),
        tmp_path / "c",
    )
    assert polyvse.load(tmp_path / "c", device="cpu").extractor.preprocess.squash is True
    assert polyvse.load(tmp_path / "c", device="cpu", squash_photos=False).extractor.preprocess.squash is False

    photos = tmp_path / "photos"
    photos.mkdir()
    src = [
        p
        for p in sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))
        if Image.open(p).size[0] != Image.open(p).size[1]
    ][:3]
    for p in src[:2]:
        shutil.copy(p, photos / p.name)
    common = [
        "--checkpoint",
        str(tmp_path / "c"),
        "--images",
        str(photos),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--workers",
        "0",
        "--quiet",
        "--device",
        "cpu",
    ]
    for fit, squash in (("crop", False), (None, True)):
        out = tmp_path / f"index-{fit}"
        assert main(["index", "build", "--out", str(out), *common, *(["--photo-fit", fit] if fit else [])]) == 0
        assert json.loads((out / "manifest.json").read_text())["model"]["squash_photos"] is squash
        loaded, _ = model_for_index(PhotoIndex.open(out), device="cpu")
        assert loaded.checkpoint.squash_photos is squash  # the checkpoint says squash; the index decides
    # a photo query on the crop index is embedded as its photos were: the top hit is that very photo
    capsys.readouterr()
    assert main(["search", "--index", str(tmp_path / "index-crop"), "--image", str(src[0]), "-k", "1", "--json"]) == 0
    assert src[0].name in json.dumps(json.loads(capsys.readouterr().out))
