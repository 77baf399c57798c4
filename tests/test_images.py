"""load_image: real photos decode; every kind of broken or hostile file becomes a DataError naming it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image, ImageFile

from conftest import png_bytes
from polyvse.errors import DataError, PolyvseError
from polyvse.features.images import DEFAULT_MAX_PIXELS, load_image


@pytest.fixture(scope="module")
def photo(shared_data) -> Path:
    return sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[0]


def _error(source, **kw) -> DataError:
    with pytest.raises(DataError) as info:
        load_image(source, **kw)
    return info.value


def test_real_photo_from_path_bytes_and_pil_agree(photo):
    a = load_image(photo)
    b = load_image(photo.read_bytes(), name=photo.name)
    c = load_image(Image.open(photo))
    assert a.mode == b.mode == c.mode == "RGB"
    assert a.size == b.size == c.size and min(a.size) > 50
    assert a.tobytes() == b.tobytes() == c.tobytes()


def test_empty_file(tmp_path):
    p = tmp_path / "empty.jpg"
    p.write_bytes(b"")
    err = _error(p)
    assert err.path == str(p) and "empty" in err.reason
    assert str(p) in str(err)
    assert isinstance(err, PolyvseError)


def test_random_bytes(tmp_path):
    p = tmp_path / "noise.jpg"
    p.write_bytes(bytes(range(256)) * 20)
    err = _error(p)
    assert err.path == str(p) and "not an image" in err.reason


def test_text_file_with_jpg_extension(tmp_path):
    p = tmp_path / "notes.jpg"
    p.write_text("shopping list: eggs, milk\n")
    err = _error(p)
    assert "text file" in err.reason and err.path == str(p)


def test_truncated_jpeg(photo, tmp_path):
    data = photo.read_bytes()
    p = tmp_path / "half.jpg"
    p.write_bytes(data[: len(data) // 2])
    err = _error(p)
    assert "truncated" in err.reason and "JPEG" in err.reason and err.path == str(p)


def test_truncated_in_header(photo):
    err = _error(photo.read_bytes()[:150], name="upload.jpg")
    assert err.path == "upload.jpg" and "truncated" in err.reason


def test_missing_file_and_directory(tmp_path):
    assert "not found" in _error(tmp_path / "nope.jpg").reason
    assert "directory" in _error(tmp_path).reason


def test_decompression_bomb_refused_cheaply():
    bomb = png_bytes(20000, 20000)  # 400 megapixels, ~50 KB on disk
    assert len(bomb) < 100_000
    err = _error(bomb, name="bomb.png")
    assert err.path == "bomb.png" and "decompression bomb" in err.reason


def test_pixel_limit_checked_from_header_before_decoding(monkeypatch):
    big = png_bytes(8000, 6000)  # 48 MP: above our 40 MP default, below Pillow's own limit

    def no_decoding(self):
        raise AssertionError("pixel data was decoded before the size check")

    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decoding)
    err = _error(big, name="big.png")
    assert "8000x6000" in err.reason and "megapixels" in err.reason and "decompression bomb" in err.reason
    assert DEFAULT_MAX_PIXELS == 40_000_000


def test_max_pixels_is_configurable():
    small = png_bytes(100, 100)
    assert "megapixels" in _error(small, max_pixels=5000).reason
    assert load_image(small, max_pixels=None).size == (100, 100)
    assert load_image(small, max_pixels=10_000).size == (100, 100)
    pil = Image.new("RGB", (100, 100))
    assert "megapixels" in _error(pil, max_pixels=5000).reason


def test_pillow_bomb_warning_becomes_an_error(monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    warn_size = png_bytes(40, 40)  # 1600 px: Pillow warns (> 1000) but does not raise (< 2000)
    err = _error(warn_size, max_pixels=None, name="w.png")
    assert "decompression bomb" in err.reason
    err = _error(png_bytes(100, 100), max_pixels=None, name="e.png")  # 10000 px: Pillow raises
    assert "decompression bomb" in err.reason


def test_exif_orientation_applied():
    img = Image.new("RGB", (40, 20), (200, 10, 10))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees when displayed
    buf = io.BytesIO()
    img.save(buf, format="JPEG", exif=exif.tobytes())
    out = load_image(buf.getvalue())
    assert out.size == (20, 40) and out.mode == "RGB"


@pytest.mark.parametrize("mode", ["L", "RGBA", "P", "CMYK", "I;16"])
def test_other_modes_become_rgb(mode):
    img = Image.new("RGBA", (8, 8), (0, 0, 0, 0)) if mode == "RGBA" else Image.new(mode, (8, 8))
    buf = io.BytesIO()
    img.save(buf, format="TIFF" if mode in ("CMYK", "I;16") else "PNG")
    out = load_image(buf.getvalue())
    assert out.mode == "RGB" and out.size == (8, 8)
    if mode == "RGBA":  # fully transparent -> white, not black
        assert out.getpixel((0, 0)) == (255, 255, 255)


def test_upload_stream(photo):
    with open(photo, "rb") as fh:
        assert load_image(fh).size == load_image(photo).size
    err = _error(io.BytesIO(b"GIF89a broken"), name="upload.gif")
    assert err.path == "upload.gif"


def test_rejects_unsupported_source_type():
    with pytest.raises(TypeError):
        load_image(42)
