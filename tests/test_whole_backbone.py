"""Fine-tuning the whole image backbone (model.finetune_backbone): the whole EfficientNet-Lite as a trainable tail
(polyvse.features.tail.whole_of), the pixel path's crops and staging (polyvse_train.pixels), a tiny run that moves
every part of the backbone, and its checkpoint embedding photos through the trained backbone
(polyvse.features.whole)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

import polyvse
from polyvse.errors import DataError
from polyvse.features.augment import crop_box
from polyvse.features.backbones import backbone_tail, get_extractor
from polyvse.features.extractor import UnknownBackboneError
from polyvse.features.images import load_image
from polyvse.features.tail import whole_of
from polyvse.features.whole import FineTunedExtractor
from polyvse.index.build import embed_photo_files, stored_vectors
from polyvse_train.config import TrainConfig
from polyvse_train.pixels import PhotoPixels, TrainCrop, pixel_key
from polyvse_train.train import STATE, train

TINY = dict(
    name="whole",
    languages=["en", "de"],
    embed_dim=32,
    word_dim=16,
    hidden_dim=32,
    batch_size=4,
    smoke_photos=8,
    smoke_epochs=1,
    smoke_max_batches=2,
    lr=5e-4,
    finetune_backbone=True,
    finetune_lr_scale=1.0,
    threads=1,
)


@pytest.fixture(scope="module")
def lite0():
    return get_extractor("efficientnet-lite0")


@pytest.fixture(scope="module")
def photo_paths(shared_data):
    paths = sorted((shared_data / "flickr8k").rglob("*.jpg"))[:2]
    assert paths, "no Flickr8K photos in the shared data"
    return paths


def test_the_whole_backbone_starts_as_the_frozen_extractor(lite0, photo_paths):
    photos = [load_image(p) for p in photo_paths]
    whole = whole_of(lite0.model, (3, 224, 224))
    assert whole.whole and all(p.requires_grad for p in whole.parameters())
    with torch.no_grad():
        pooled = whole(torch.stack([lite0.transform(p) for p in photos])).numpy()
    np.testing.assert_allclose(pooled, lite0.extract(photos), atol=1e-5)
    # its architecture from its name takes its weights, as a tail's does
    arch = backbone_tail("efficientnet-lite0:whole", (3, 224, 224))
    assert arch.whole and list(arch.state_dict()) == list(whole.state_dict())
    # as an extractor: the same features, under a key naming the weights
    extractor = FineTunedExtractor("efficientnet-lite0:whole", whole)
    np.testing.assert_allclose(extractor.extract(photos), pooled, atol=1e-5)
    assert extractor.weights_tag.startswith("ft-") and extractor.key != lite0.key
    with pytest.raises(UnknownBackboneError, match="polyvse.load"):
        get_extractor("efficientnet-lite0:whole")


def test_train_crops_are_random_in_range_and_reproducible(lite0):
    rng = np.random.default_rng(0)
    for _ in range(200):
        top, left, h, w = crop_box(rng, 256, 300, 0.5)
        assert 0 <= top <= 256 - h and 0 <= left <= 300 - w and h * w >= 0.5 * 256 * 300 * 0.99
    photo = Image.fromarray(np.random.default_rng(1).integers(0, 255, (180, 240, 3), dtype=np.uint8))
    crop = TrainCrop(lite0.preprocess, 0.5)
    a, b = crop(photo, np.random.default_rng(7)), crop(photo, np.random.default_rng(7))
    assert a.shape == (3, 224, 224) and torch.equal(a, b)
    assert not torch.equal(a, crop(photo, np.random.default_rng(8)))


def test_staged_batches_depend_on_the_batch_not_where_the_feed_starts(lite0, tmp_path):
    paths, noise = [], np.random.default_rng(0)
    for i in range(3):  # textured: every crop of them differs
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(noise.integers(0, 255, (64, 80, 3), dtype=np.uint8)).save(paths[-1])
    pixels = PhotoPixels(paths, TrainCrop(lite0.preprocess, 0.3), seed=3, workers=0, key="k", cache_dir=tmp_path)
    batches = [np.array([0, 2]), np.array([1, 2, 1])]
    feed = pixels.feed(batches, epoch=1, first=0)
    next(feed)
    first = pixels[np.array([2, 0])]
    next(feed)
    assert pixels[[1, 2, 1]].shape == (3, 3, 224, 224)
    with pytest.raises(RuntimeError, match="not decoded for this step"):
        pixels[[0]]
    resumed = pixels.feed(batches[1:], epoch=1, first=1)  # a resumed run starts at batch 1
    next(resumed)
    again = pixels[[2]]
    # batch 0 again, decoded in two worker processes: the same crops
    in_workers = PhotoPixels(paths, TrainCrop(lite0.preprocess, 0.3), seed=3, workers=2, key="k", cache_dir=tmp_path)
    restart = in_workers.feed(batches, epoch=1, first=0)
    next(restart)
    assert torch.equal(in_workers[[2, 0]], first)
    next(restart)
    assert torch.equal(in_workers[[2]], again)
    assert not torch.equal(again, first[:1])  # another batch, other crops


def test_resident_photos_take_the_workers_crops_and_a_resumed_feed_the_same(tmp_path, shared_data):
    """data.resident_photos: photos decoded once, crops cut on the device from the same draws (boxes, mirrors) as
    the workers' and resized by torch instead of PIL: the same photos in the same order, values within a few
    levels; a feed resumed at batch 1 stages what the whole feed staged there."""
    lite2 = get_extractor("efficientnet-lite2")  # bicubic, 297 -> 260: the GPU recipe's backbone
    paths = sorted((shared_data / "flickr8k-224" / "images").glob("*.jpg"))[:12]
    crop = TrainCrop(lite2.preprocess, 0.5)
    batches = [np.array([0, 3, 5, 3, 7, 1, 2]), np.array([11, 4, 6, 9, 8, 10])]
    staged = {}
    for resident in (False, True):
        pixels = PhotoPixels(paths, crop, seed=2, workers=0, key="k", cache_dir=tmp_path, resident=resident)
        feed = pixels.feed(batches, epoch=3, first=0)
        staged[resident] = []
        for rows in batches:
            next(feed)
            staged[resident].append(pixels[rows].clone())
            if resident:
                assert pixels._rows == list(dict.fromkeys(int(r) for r in rows))
    levels = torch.as_tensor(lite2.preprocess._scale).view(1, 3, 1, 1)  # one grey level, normalised
    for a, b in zip(staged[False], staged[True]):
        assert a.shape == b.shape == (len(a), 3, 260, 260)
        diff = ((a - b) / levels).abs()
        assert diff.mean() < 0.5 and (diff > 3).float().mean() < 0.01
    # another draw would differ far more: the boxes and mirrors are the workers'
    assert ((staged[True][0][1:] - staged[False][0][:-1]) / levels).abs().mean() > 5
    resumed = PhotoPixels(paths, crop, seed=2, workers=0, key="k", cache_dir=tmp_path, resident=True)
    feed = resumed.feed(batches[1:], epoch=3, first=1)
    next(feed)
    assert torch.equal(resumed[batches[1]], staged[True][1])
    # decoded once: a later epoch's feed reads the photos already on the device
    photos = resumed.resident.photos
    next(resumed.feed(batches, epoch=4, first=0))
    assert resumed.resident.photos is photos
    # its input is another one (torch's resize): a run's state names it, so a resume cannot switch paths
    assert pixel_key(lite2, "efficientnet-lite2:whole", crop, True) != pixel_key(
        lite2, "efficientnet-lite2:whole", crop
    )


@pytest.mark.parametrize(
    "over, field",
    [
        ({"backbone": "resnet152"}, "data.backbone"),
        ({"ten_crop": True}, "data.ten_crop"),
        ({"finetune_blocks": 1}, "model.finetune_blocks"),
        ({"crop_scale_min": 0.0}, "data.crop_scale_min"),
        ({"finetune_backbone": False, "crop_scale_min": 0.3}, "data.crop_scale_min"),
        ({"finetune_backbone": False, "resident_photos": True}, "data.resident_photos"),
    ],
)
def test_config_names_the_field_that_stops_the_pixel_path(over, field):
    with pytest.raises(DataError, match=field.replace(".", r"\.")):
        TrainConfig.from_dict({**TINY, **over})


@pytest.fixture(scope="module")
def tiny_run(shared_data, tmp_path_factory):
    """A tiny pixel-path run (two steps of four photos): its output folder and metrics."""
    out = tmp_path_factory.mktemp("whole-run")
    return out, train(TrainConfig(**TINY), out, shared_data, smoke=True, progress=False)


def test_a_tiny_run_trains_the_whole_backbone_and_its_checkpoint_embeds_photos_with_it(
    tiny_run, tmp_path, lite0, photo_paths
):
    out, metrics = tiny_run
    assert set(metrics["languages"]) == {"en", "de"}
    model = polyvse.load(out / "checkpoint", device="cpu")
    assert model.checkpoint.backbone == "efficientnet-lite0:whole"
    # every part of the backbone moved away from the ImageNet weights: stem, first and last block, head conv
    start = whole_of(lite0.model, (3, 224, 224)).state_dict()
    trained = model.model.image_tail.state_dict()
    for part in ("stem.weight", "blocks.0.", "blocks.15.", "conv_head.weight"):
        names = [k for k in start if k.startswith(part)]
        assert names and any(not torch.allclose(trained[k], start[k]) for k in names), f"{part} stayed frozen"
    # a photo goes through the fine-tuned backbone (the checkpoint's extractor), not the ImageNet one
    extractor = model.extractor
    assert isinstance(extractor, FineTunedExtractor) and extractor.key == model.checkpoint.feature_key
    photos = [load_image(p) for p in photo_paths]
    with torch.no_grad():
        pixels = torch.stack([lite0.transform(p) for p in photos])
        expected = model.model.image_head(model.model.image_tail(pixels)).numpy()
        imagenet = model.model.image_head(torch.from_numpy(lite0.extract(photos))).numpy()
    embedded = model.encode_image(photo_paths)
    np.testing.assert_allclose(embedded, expected, atol=1e-4)
    assert np.abs(embedded - imagenet).max() > 1e-3
    # `polyvse index build` embeds photos the same way, through the feature cache under the trained weights' key
    stored, _, result = embed_photo_files(model, [str(p) for p in photo_paths], tmp_path / "cache", progress=False)
    assert result.key == extractor.key
    np.testing.assert_allclose(stored, stored_vectors(model, expected), atol=1e-4)
    groups = torch.load(out / STATE, weights_only=False)["optimiser"]["param_groups"]
    assert [g["lr"] for g in groups] == [pytest.approx(5e-4), pytest.approx(5e-4)]  # finetune_lr_scale 1


def test_a_stopped_and_resumed_run_reaches_the_same_weights(tiny_run, shared_data, tmp_path):
    assert train(TrainConfig(**TINY), tmp_path, shared_data, smoke=True, progress=False, max_steps=1) == {
        "stopped_at_step": 1
    }
    train(TrainConfig(**TINY), tmp_path, shared_data, smoke=True, progress=False, resume=True)
    resumed = torch.load(tmp_path / STATE, weights_only=False)["model"]
    whole = torch.load(tiny_run[0] / STATE, weights_only=False)["model"]
    assert all(torch.equal(resumed[k], whole[k]) for k in whole)  # the crops of step 2 were the same


def test_a_run_on_resident_photos_trains_the_backbone_and_resumes_exactly(tiny_run, shared_data, tmp_path, lite0):
    cfg = TrainConfig(**{**TINY, "resident_photos": True})
    whole = train(cfg, tmp_path / "whole", shared_data, smoke=True, progress=False)
    assert set(whole["languages"]) == {"en", "de"}
    stepped = torch.load(tmp_path / "whole" / STATE, weights_only=False)["model"]
    imagenet = whole_of(lite0.model, (3, 224, 224)).state_dict()
    assert not torch.allclose(stepped["image_tail.stem.weight"], imagenet["stem.weight"])
    start = torch.load(tiny_run[0] / STATE, weights_only=False)["model"]  # the worker path's run
    # close to the worker path's run (same draws, torch's resize), not the same weights
    assert any(not torch.equal(stepped[k], start[k]) for k in start if k.startswith("image_tail."))
    assert train(cfg, tmp_path / "cut", shared_data, smoke=True, progress=False, max_steps=1) == {"stopped_at_step": 1}
    train(cfg, tmp_path / "cut", shared_data, smoke=True, progress=False, resume=True)
    resumed = torch.load(tmp_path / "cut" / STATE, weights_only=False)["model"]
    assert all(torch.equal(resumed[k], stepped[k]) for k in stepped)


def test_a_batch_is_shared_among_workers_in_chunks_with_the_same_crops(lite0, tmp_path, monkeypatch):
    """A batch's photos are decoded in chunks (one worker each), cropped as uint8 and normalised where they land:
    the crops depend on (seed, epoch, batch, chunk), not on the workers; the values are the preprocessing's."""
    import polyvse_train.pixels as pixels_module

    monkeypatch.setattr(pixels_module, "PHOTOS_PER_ITEM", 2)
    paths, noise = [], np.random.default_rng(0)
    for i in range(5):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(noise.integers(0, 255, (64, 80, 3), dtype=np.uint8)).save(paths[-1])
    crop = TrainCrop(lite0.preprocess, 0.3)
    batches = [np.array([4, 0, 3, 0, 1, 2]), np.array([2, 1])]
    staged = {}
    for workers in (0, 2):
        pixels = PhotoPixels(paths, crop, seed=5, workers=workers, key="k", cache_dir=tmp_path)
        feed = pixels.feed(batches, epoch=0, first=0)
        next(feed)
        staged[workers] = [pixels[batches[0]].clone()]
        next(feed)
        staged[workers].append(pixels[batches[1]].clone())
    assert staged[0][0].shape == (6, 3, 224, 224) and staged[0][0].dtype == torch.float32
    assert all(torch.equal(a, b) for a, b in zip(staged[0], staged[2]))
    assert torch.equal(staged[0][0][1], staged[0][0][3])  # photo 0 twice in a batch: one crop
    # chunk 0 of batch 0 holds photos 4 and 0: their crops, drawn by the chunk's generator, normalised on the host
    rng = np.random.default_rng([5, 0, 0, 0])
    for position, row in ((0, 4), (1, 0)):
        raw = crop(Image.open(paths[row]).convert("RGB"), rng)
        assert raw.dtype == torch.uint8
        host = lite0.preprocess.normalised(raw.numpy().transpose(1, 2, 0))
        assert torch.allclose(staged[0][0][position], host, atol=1e-6)
