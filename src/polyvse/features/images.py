"""Safe photo loading: one place that turns files, uploaded bytes or PIL images into RGB PIL images.

Everything that can go wrong with a user's photo (empty file, not an image, corrupt or truncated
data, an absurd pixel count) becomes a :class:`~polyvse.errors.DataError` that names the file and
says what is wrong, so callers can report it and move on instead of crashing on a traceback.

The pixel limit is checked from the image header *before* any pixel data is decoded, so a tiny
file that claims to be 100000 x 100000 pixels (a "decompression bomb") never allocates memory.
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path
from typing import BinaryIO

from PIL import Image, ImageOps, UnidentifiedImageError

from ..errors import DataError
from .limits import DEFAULT_MAX_PIXELS

__all__ = ["DEFAULT_MAX_PIXELS", "ImageSource", "load_image", "read_image_bytes"]

ImageSource = str | os.PathLike | bytes | bytearray | memoryview | BinaryIO | Image.Image

# No advice on raising a limit here: the reader may be an HTTP client, who cannot change it.
_BOMB_HINT = "refusing to decode it (possible decompression bomb)"


def read_image_bytes(path: str | os.PathLike) -> bytes:
    """Read a photo file's bytes, turning OS errors into a DataError that names the file."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise DataError("file not found", path) from None
    except IsADirectoryError:
        raise DataError("is a directory, not an image file", path) from None
    except PermissionError:
        raise DataError("permission denied when reading the file", path) from None
    except OSError as exc:
        raise DataError(f"cannot read the file ({exc.strerror or exc})", path) from None


def _check_pixels(size: tuple[int, int], max_pixels: int | None, name: str | None) -> None:
    width, height = size
    if width <= 0 or height <= 0:
        raise DataError(f"image header gives an invalid size {width}x{height}", name)
    if max_pixels is not None and width * height > max_pixels:
        raise DataError(
            f"image is {width}x{height} = {width * height / 1e6:.1f} megapixels, more than the limit of "
            f"{max_pixels / 1e6:g} megapixels; {_BOMB_HINT}",
            name,
        )


def _to_rgb(img: Image.Image) -> Image.Image:
    """RGB copy of img; transparent areas become white rather than whatever the colour data holds."""
    if img.mode == "RGB":
        return img
    has_alpha = img.mode in ("RGBA", "LA", "PA", "La", "RGBa") or (img.mode == "P" and "transparency" in img.info)
    if has_alpha:
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if img.mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        # High bit-depth greyscale: scale to 8 bits instead of letting convert() clip to white.
        import numpy as np

        arr = np.asarray(img, dtype=np.float64)
        lo, hi = float(arr.min()), float(arr.max())
        scaled = (arr - lo) * (255.0 / (hi - lo)) if hi > lo else np.zeros_like(arr)
        return Image.fromarray(scaled.astype(np.uint8), mode="L").convert("RGB")
    return img.convert("RGB")


def _exif_transpose(img: Image.Image) -> Image.Image:
    """Apply the EXIF orientation; a broken EXIF block is not worth losing the photo over."""
    try:
        return ImageOps.exif_transpose(img)
    except Exception:  # noqa: BLE001 - corrupt EXIF data: keep the pixels as stored
        return img


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _bomb_reason(exc: BaseException) -> str:
    return (
        f"image is too large to decode safely (more than {2 * Image.MAX_IMAGE_PIXELS / 1e6:.0f} megapixels; "
        "possible decompression bomb)"
    )


def _decode_reason(fmt: str, exc: BaseException, header: bool = False) -> str:
    if "truncated" in str(exc).lower() or isinstance(exc, EOFError):
        return f"{fmt} file is truncated (incomplete download or copy?): {_describe(exc)}"
    part = "header" if header else "data, cannot decode the pixels"
    return f"corrupt {fmt} {part} ({_describe(exc)})"


def _from_pil(image: Image.Image, max_pixels: int | None, label: str | None) -> Image.Image:
    _check_pixels(image.size, max_pixels, label)
    try:
        image.load()
        return _to_rgb(_exif_transpose(image))
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - Pillow raises many types for bad data
        raise DataError(f"cannot decode the image ({_describe(exc)})", label) from exc


def _read_source(source, name) -> tuple[bytes, str | None]:
    """(the photo's bytes, what messages call it) from a path, bytes or a binary file object."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), None if name is None else str(name)
    if isinstance(source, (str, os.PathLike)):
        return read_image_bytes(Path(source)), str(name if name is not None else source)
    if hasattr(source, "read"):  # binary file object, e.g. an upload's stream
        label = str(name if name is not None else getattr(source, "name", "<upload>"))
        try:
            data = source.read()
        except OSError as exc:
            raise DataError(f"cannot read the upload ({exc})", label) from None
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("load_image() wants a binary file object (opened with 'rb')")
        return bytes(data), label
    raise TypeError(
        f"load_image() wants a path, bytes, a binary file object or a PIL image, not {type(source).__name__}"
    )


def _not_an_image(data: bytes) -> str:
    head = data[:16]
    looks_text = all(32 <= b < 127 or b in (9, 10, 13) for b in head)
    what = "looks like a text file" if looks_text else f"starts with bytes {head[:8].hex(' ')}"
    return (
        f"not an image Pillow can read ({len(data)} bytes, {what}); expected a JPEG, PNG, WebP, GIF, BMP or TIFF photo"
    )


def _decode(data: bytes, max_pixels: int | None, label: str | None) -> Image.Image:
    """The decoded image; the pixel limit is checked from the header, before any decoding."""
    # Pillow warns (DecompressionBombWarning) above MAX_IMAGE_PIXELS and raises above twice that. With a
    # stricter max_pixels of our own, the warning is ignored so that _check_pixels (header only, before any
    # decoding) gives the message with the actual limit; otherwise the warning becomes an error.
    # Note: warnings filters are process-global in Python 3.11.
    ours_first = max_pixels is not None and max_pixels <= Image.MAX_IMAGE_PIXELS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if ours_first else "error", Image.DecompressionBombWarning)
        try:
            img = Image.open(io.BytesIO(data))
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise DataError(_bomb_reason(exc), label) from None
        except UnidentifiedImageError:
            raise DataError(_not_an_image(data), label) from None
        except Exception as exc:  # noqa: BLE001 - broken headers raise SyntaxError, ValueError, ...
            raise DataError(_decode_reason("image", exc, header=True), label) from None

        _check_pixels(img.size, max_pixels, label)
        try:
            img.load()
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise DataError(_bomb_reason(exc), label) from None
        except Exception as exc:  # noqa: BLE001
            raise DataError(_decode_reason(img.format or "image", exc), label) from None
    return img


def load_image(
    source: ImageSource,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
    *,
    name: str | os.PathLike | None = None,
) -> Image.Image:
    """Decode a photo into an RGB PIL image, EXIF orientation applied.

    ``source`` is a file path, the file's bytes or a binary file object (e.g. an HTTP upload; it
    is read whole, so bound the upload size before), or an already opened PIL image. ``name`` is
    what error messages call the photo (defaults to the path; pass the upload's file name for
    bytes). ``max_pixels=None`` leaves only Pillow's own limit (``PIL.Image.MAX_IMAGE_PIXELS``).

    Raises :class:`DataError` (with ``.path`` set to the name) for an empty, unreadable, non-image,
    corrupt or truncated file and for images larger than ``max_pixels``.
    """
    if isinstance(source, Image.Image):
        return _from_pil(source, max_pixels, None if name is None else str(name))
    data, label = _read_source(source, name)
    if not data:
        raise DataError("file is empty (0 bytes)", label)
    img = _decode(data, max_pixels, label)
    fmt = img.format or "image"
    try:
        return _to_rgb(_exif_transpose(img))
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"cannot convert the {fmt} image to RGB ({_describe(exc)})", label) from None
