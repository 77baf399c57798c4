"""Cached augmented views of the training photos (polyvse.features.augment, polyvse_train.photo_views)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from PIL import Image

from polyvse.data.registry import load_dataset
from polyvse.errors import DataError
from polyvse.features.augment import ViewPreprocess, pixel_seed, view_extractor
from polyvse.features.backbones import get_extractor
from polyvse.features.cache import FeatureCache, extract_features, file_sha256
from polyvse.features.images import load_image
from polyvse.util.paths import cache_root
from polyvse_train.config import TrainConfig
from polyvse_train.data import prepare_data
from polyvse_train.photo_views import PhotoViews
from polyvse_train.train import train

SMALL = dict(
    name="views",
    languages=["en", "de"],
    embed_dim=64,
    word_dim=32,
    hidden_dim=64,
    batch_size=32,
    smoke_photos=32,
    smoke_epochs=2,
    lr=5e-4,
    finetune_blocks=1,
    photo_views=3,
)


@pytest.fixture(scope="module")
def photos(shared_data):
    paths = sorted((shared_data / "flickr8k").rglob("*.jpg"))[:2]
    assert paths, "no Flickr8K photos in the shared data"
    return [load_image(p) for p in paths]


@pytest.fixture(scope="module")
def lite0():
    return get_extractor("efficientnet-lite0")


def test_a_view_is_fixed_per_photo_and_differs_between_views_and_photos(lite0, photos):
    one, two = ViewPreprocess(lite0.preprocess, 1, 0.5), ViewPreprocess(lite0.preprocess, 2, 0.5)
    a = one(photos[0])
    assert a.shape == lite0.preprocess(photos[0]).shape == (3, lite0.preprocess.crop, lite0.preprocess.crop)
    assert torch.equal(a, one(photos[0].copy()))  # seeded by the pixels, not by the object or a global RNG
    assert torch.equal(a, pickle.loads(pickle.dumps(one))(photos[0]))  # the same in a DataLoader worker
    assert not torch.equal(a, two(photos[0]))
    assert not torch.equal(a, lite0.preprocess(photos[0]))
    # the seed is the pixels': one changed pixel, another seed (another photo, another crop)
    flat = Image.new("RGB", photos[0].size, (128, 128, 128))
    marked = flat.copy()
    marked.putpixel((0, 0), (0, 0, 0))
    assert pixel_seed(flat) != pixel_seed(marked) and pixel_seed(flat) == pixel_seed(flat.copy())


def test_each_view_is_an_extractor_of_its_own_key(lite0):
    keys = {view_extractor(lite0, v, 0.5).key for v in range(3)}
    assert len(keys) == 3 and lite0.key in keys
    assert view_extractor(lite0, 0, 0.5) is lite0
    assert view_extractor(lite0, 1, 0.5).key != view_extractor(lite0, 1, 0.3).key
    squash = view_extractor(get_extractor("efficientnet-lite0", squash=True), 1, 0.5)
    assert squash.square_key == view_extractor(lite0, 1, 0.5).key  # square photos: squash changes nothing
    with pytest.raises(ValueError, match="view 0"):
        ViewPreprocess(lite0.preprocess, 0, 0.5)


def test_photo_views_stage_a_drawn_view_per_photo_and_evaluation_reads_the_photos():
    base = torch.arange(5 * 4, dtype=torch.float32).reshape(5, 4)
    views = torch.stack([-base[[1, 3]], 100 + base[[1, 3]]])  # (2 views, photos 1 and 3, 4)
    pv = PhotoViews(base, views, np.array([1, 3]), seed=7)
    assert pv.n_views == 3 and pv.shape == (5, 4) and len(pv) == 5
    draws = np.stack([pv.draw([0, 1, 2, 3, 4], epoch=e, batch=b) for e in range(4) for b in range(5)])
    assert (draws[:, [0, 2, 4]] == 0).all()  # evaluation photos have no views
    assert set(np.unique(draws[:, [1, 3]])) == {0, 1, 2}
    np.testing.assert_array_equal(pv.draw([1, 3], 2, 3), pv.draw([1, 3], 2, 3))  # (seed, epoch, batch) decide
    # ... and the photo: not its company (a rank staging part of a batch draws what one process would)
    np.testing.assert_array_equal(pv.draw([3], 2, 3), pv.draw([0, 1, 3], 2, 3)[2:])
    feats = pv.features([1, 3, 0], np.array([1, 2, 0]))
    torch.testing.assert_close(feats, torch.stack([-base[1], 100 + base[3], base[0]]))
    feed = pv.feed([np.array([3, 1, 3]), np.array([0, 1])], epoch=1, first=4)
    next(feed)
    staged = pv[np.array([3, 1])]
    want = pv.features([3, 1], pv.draw([3, 1], 1, 4))
    torch.testing.assert_close(staged, want)
    torch.testing.assert_close(pv[[1]], want[1:])
    with pytest.raises(RuntimeError, match="not staged"):
        pv[[0]]
    next(feed)
    feed.close()
    torch.testing.assert_close(pv[np.array([1, 3])], base[[1, 3]])  # outside a step: the photos themselves


@pytest.mark.parametrize(
    "over, field",
    [
        ({"photo_views": 0}, "data.photo_views"),
        ({"photo_views": 2, "ten_crop": True, "finetune_blocks": 0}, "data.photo_views"),
        ({"finetune_blocks": 0, "finetune_backbone": True}, "data.photo_views"),
        ({"photo_views": 1, "crop_scale_min": 0.3}, "data.crop_scale_min"),
    ],
)
def test_config_names_the_field(over, field):
    with pytest.raises(DataError, match=field.replace(".", r"\.")):
        TrainConfig.from_dict({**SMALL, **over})
    TrainConfig.from_dict({**SMALL, "crop_scale_min": 0.3})  # augmented views crop: the fraction is theirs too


def test_a_run_caches_views_of_its_training_photos_only_and_trains_on_them(shared_data, monkeypatch, tmp_path):
    cfg = TrainConfig(**SMALL)
    data = prepare_data(cfg, shared_data, smoke=True, progress=False)
    pv = data.features
    assert isinstance(pv, PhotoViews) and pv.n_views == 3
    assert set(np.flatnonzero(pv.slot >= 0)) == set(data.train_rows.tolist())
    assert not set(data.train_rows.tolist()) & set(data.eval_rows.tolist())
    cut = get_extractor("efficientnet-lite0:tail1")
    photos = load_dataset(cfg.data.dataset, shared_data).photos
    paths = [photos[p].path for p in data.photo_ids]
    cache = cache_root(shared_data) / "features"
    for v in (1, 2):
        view = view_extractor(cut, v, 0.5)
        got = extract_features([paths[r] for r in data.train_rows], view, cache, progress=False)
        assert got.extracted == 0  # the run put them there
        np.testing.assert_allclose(pv.views[v - 1].float().numpy(), got.features, rtol=1e-2, atol=1e-2)
        # no evaluation photo was augmented: none has a vector under a view's key
        assert all(FeatureCache(cache).get(view.cache_key, file_sha256(paths[r])) is None for r in data.eval_rows)
    assert not np.allclose(pv.views[0].float().numpy(), pv.base[data.train_rows].numpy(), atol=1e-2)

    drawn = []
    real_draw = PhotoViews.draw

    def spy(self, rows, epoch, batch):
        out = real_draw(self, rows, epoch, batch)
        drawn.append(out)
        return out

    monkeypatch.setattr(PhotoViews, "draw", spy)
    metrics = train(cfg, tmp_path / "run", shared_data, smoke=True, progress=False)
    assert set(metrics["languages"]) == {"en", "de"}
    views = np.concatenate(drawn)
    assert (views > 0).any() and (views == 0).any()
