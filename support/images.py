"""The one door every image the suite decodes goes through (data files, frames, model parts).

Image files are data, and data is untrusted (docs/untrusted-data.md). `decode_image` opens bytes or
a file with Pillow's own decoders for `READ_FORMATS` only: never EPS/PS/PDF or any plugin that hands
the file to an external program (Pillow's EPS plugin runs Ghostscript). It checks the pixel count
from the header before decoding anything (`MAX_PIXELS`), converts modes explicitly (16- and 32-bit
grayscale scaled to 8 bits, not clipped; transparency composited on white; CMYK to RGB) and applies
the EXIF orientation. Whatever goes wrong is one `ImageDecodeError` (a ValueError) naming the file
(or the label given for bytes), the format found and the formats read.

`model_image` turns encoded bytes into what a model is sent: PNG or JPEG with its true MIME type
(anything else is decoded here and re-encoded as PNG).

PIL is imported inside the functions: evaluation specs import this module at start-up.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from PIL import Image

# The formats decoded, all by Pillow's own decoders (no external program): PNG, JPEG, WebP, and
# GIF, BMP, TIFF which PGT's data may hold. A file of any other format is refused unread.
READ_FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF")
# Largest image decoded, in pixels (width x height) read from the header before decoding: 80
# megapixels, ~10x a 4K frame, 240 MB as 8-bit RGB. It is below Pillow's own warning threshold
# (Image.MAX_IMAGE_PIXELS, ~89.5 MP), so an image decoded here never raises Pillow's bomb warning.
MAX_PIXELS = 80_000_000
SENT_MIMES = ("image/png", "image/jpeg")  # what a model is sent
_SNIFF_BYTES = 16  # bytes of a file's start that Pillow's plugins identify a format by
WHITE = (255, 255, 255)  # what transparent pixels are composited on (8-bit RGB)

Source = bytes | bytearray | memoryview | str | os.PathLike[str]
Mode = Literal["RGB", "stored"]


class ImageDecodeError(ValueError):
    """An image that is not decoded: refused format, over MAX_PIXELS, unreadable or broken. The
    message names the file (or the label given for bytes), the format found and the formats
    read."""


def _allowed() -> str:
    return f"formats read: {', '.join(READ_FORMATS)}"


def _label(source: Source, label: str | None) -> str:
    if label:
        return label
    if isinstance(source, bytes | bytearray | memoryview):
        return "image bytes"
    return os.fsdecode(source)


def _head(source: Source) -> bytes:
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source[:_SNIFF_BYTES])
    try:
        with open(source, "rb") as f:
            return f.read(_SNIFF_BYTES)
    except OSError:
        return b""


def format_found(head: bytes) -> str:
    """The format Pillow's plugins recognise in a file's first bytes, by their own signature
    checks (nothing is parsed or decoded): 'EPS' for PostScript, else e.g. 'PNG', 'unknown'."""
    from PIL import Image

    if head.startswith(b"%PDF"):
        return "PDF"  # Pillow writes PDF but has no reader plugin to name it
    Image.init()
    for fmt in Image.ID:
        accept = Image.OPEN[fmt][1]
        try:
            if accept is not None and accept(head):
                return fmt
        except Exception:  # a signature check given too few bytes
            continue
    return "unknown"


def _open(source: Source, where: str) -> Image.Image:
    """The opened (header read, nothing decoded) image; ImageDecodeError for everything else."""
    from PIL import Image, UnidentifiedImageError

    Image.init()  # every plugin registered: `formats` names some that open() loads lazily
    fp = io.BytesIO(bytes(source)) if isinstance(source, bytes | bytearray | memoryview) else source
    try:
        im = Image.open(fp, formats=READ_FORMATS)
    except FileNotFoundError:
        raise ImageDecodeError(f"{where}: missing") from None
    except UnidentifiedImageError:
        found = format_found(_head(source))
        raise ImageDecodeError(
            f"{where}: not a readable image (format found: {found}, not one of the {_allowed()})"
        ) from None
    except Image.DecompressionBombError as exc:  # over twice Pillow's limit: refused in open()
        raise ImageDecodeError(
            f"{where}: {format_found(_head(source))} image over the limit MAX_PIXELS = "
            f"{MAX_PIXELS:,} pixels ({exc}): not decoded"
        ) from None
    except OSError as exc:
        raise ImageDecodeError(f"{where}: not readable ({exc.strerror or exc})") from None
    except Exception as exc:  # untrusted bytes: a header parser may raise anything
        raise ImageDecodeError(
            f"{where}: not a readable image ({type(exc).__name__}: {exc}; {_allowed()})"
        ) from None
    pixels = im.width * im.height
    if pixels > MAX_PIXELS:
        im.close()
        raise ImageDecodeError(
            f"{where}: {im.format} image of {im.width}x{im.height} px ({pixels:,} pixels) is over "
            f"the limit MAX_PIXELS = {MAX_PIXELS:,} pixels: not decoded"
        )
    return im


def image_size(source: Source, label: str | None = None) -> tuple[int, int]:
    """(width, height) in pixels from the header only, after the format and pixel checks."""
    with _open(source, _label(source, label)) as im:
        return im.size


def checked_size(source: Source, label: str | None = None) -> tuple[int, int]:
    """(width, height) of an image checked whole without decoding a pixel: the header through
    the door's checks, then Pillow's `verify` (for a PNG every chunk is read and its CRC checked,
    so a truncated or altered file fails). ImageDecodeError as decode_image's."""
    where = _label(source, label)
    with _open(source, where) as im:
        found, size = im.format, im.size
        try:
            im.verify()
        except Exception as exc:  # a plugin's verify may raise anything (OSError, SyntaxError)
            problem = f"{type(exc).__name__}: {exc}"
            raise ImageDecodeError(
                f"{where}: not a readable image (format found: {found}; {problem}; {_allowed()})"
            ) from None
    return size


def decode_image(source: Source, label: str | None = None, mode: Mode = "RGB") -> Image.Image:
    """Bytes or a file decoded through the door (see the module): an 8-bit RGB image by default;
    `mode="stored"` keeps the stored mode (masks: their values are labels, not intensities).
    The EXIF orientation is applied either way. ImageDecodeError names `label` (default: the
    path, or "image bytes")."""
    from PIL import ImageOps

    where = _label(source, label)
    with _open(source, where) as im:
        found = im.format
        try:
            im.load()
            ImageOps.exif_transpose(im, in_place=True)
            return im if mode == "stored" else to_rgb(im)
        except Exception as exc:  # a decoder may raise anything (OSError, SyntaxError, ...)
            problem = f"{type(exc).__name__}: {exc}"
            raise ImageDecodeError(
                f"{where}: not a readable image (format found: {found}; {problem}; {_allowed()})"
            ) from None


def to_rgb(im: Image.Image) -> Image.Image:
    """`im` as 8-bit RGB, each mode converted explicitly: 16-bit grayscale (I;16*) scaled by
    255/65535; 32-bit integers (I) the same when they fit 16 bits, else their range stretched to
    0..255; floats (F) in 0..1 times 255, else their range stretched; palette with transparency,
    LA, PA and RGBA composited on white; CMYK and the rest through Pillow's convert. An RGB
    image is returned as is."""
    from PIL import Image

    if im.mode == "RGB":
        return im
    if im.mode.startswith("I") or im.mode == "F":
        return _gray8(im).convert("RGB")
    if im.mode in ("RGBA", "RGBa", "LA", "La", "PA") or (
        im.mode in ("P", "L", "1") and "transparency" in im.info
    ):
        white = Image.new("RGBA", im.size, (*WHITE, 255))
        return Image.alpha_composite(white, im.convert("RGBA")).convert("RGB")
    return im.convert("RGB")  # 1, L, P, CMYK (no ICC conversion), YCbCr, HSV


def _gray8(im: Image.Image) -> Image.Image:
    """An I;16*, I or F image as 8-bit L, scaled (never clipped)."""
    import numpy as np
    from PIL import Image

    if im.mode == "F":
        values = np.asarray(im, dtype=np.float64)
        lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
        if lo >= 0.0 and hi <= 1.0:
            lo, hi = 0.0, 1.0  # a 0..1 image
    else:
        values = np.asarray(im.convert("I") if im.mode != "I" else im, dtype=np.float64)
        lo, hi = float(values.min()), float(values.max())
        if im.mode.startswith("I;16") or (lo >= 0 and hi <= 65535):
            lo, hi = 0.0, 65535.0  # 16-bit data (I;16*, or a 16-bit PNG/TIFF opened as I)
    scale = 255.0 / (hi - lo) if hi > lo else 0.0
    scaled = np.nan_to_num((values - lo) * scale, nan=0.0)
    return Image.fromarray(np.clip(np.rint(scaled), 0, 255).astype(np.uint8), "L")


def encode_image(image: Any, fmt: str = "PNG", **save_options: Any) -> bytes:
    """A PIL image encoded as `fmt` bytes; `save_options` go to PIL's `Image.save` (e.g. quality,
    compress_level)."""
    buf = io.BytesIO()
    image.save(buf, format=fmt, **save_options)
    return buf.getvalue()


def sniff_mime(data: bytes) -> str:
    """The image type of `data` from its first bytes (PNG, JPEG, WebP), else
    application/octet-stream. What a model is sent is PNG or JPEG only (Part.of_image)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"


def model_image(data: bytes, label: str | None = None) -> tuple[bytes, str]:
    """(bytes, MIME type) to send a model: PNG or JPEG bytes as they are (nothing decoded), any
    other format decoded through the door and re-encoded as PNG. ImageDecodeError when it is not
    an image read here."""
    mime = sniff_mime(data)
    if mime in SENT_MIMES:
        return data, mime
    return encode_image(decode_image(data, label), "PNG"), "image/png"


def read_image_file(path: Path, label: str | None = None) -> bytes:
    """The bytes of an image file once all of it decodes through the door (format, pixel limit,
    a broken or truncated file); ImageDecodeError naming it, empty files included."""
    where = label or str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ImageDecodeError(f"{where}: missing") from None
    except OSError as exc:
        raise ImageDecodeError(f"{where}: image not readable: {exc.strerror or exc}") from None
    if not data:
        raise ImageDecodeError(f"{where}: empty file (0 bytes), not an image")
    decode_image(data, where, mode="stored")
    return data
