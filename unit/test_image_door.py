"""The image door (issue 34, item 1): every image the suite decodes goes through support/images.py.

A PostScript file saved with an image's name is refused unread by every reader (Pillow's EPS plugin
would hand it to Ghostscript, which writes the marker file and then loops forever), a bomb's pixel
count is refused from its header with the file named, modes are converted explicitly (16-bit grey
scaled, not clipped to white), and a model is sent PNG or JPEG only, with its true MIME type.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support.backends import chat_template, tokens
from support.evaluations.nyu_distance.folder import NyuFolder, NyuFolderError
from support.evaluations.pgt.dataset import ImageError, read_image
from support.evaluations.pointing.dataset import (
    CholecSeg8k,
    CholecSeg8kFileError,
    RawTree,
    _DatasetRows,
)
from support.evaluations.pointing.synthetic import build_cholecseg8k
from support.images import (
    MAX_PIXELS,
    READ_FORMATS,
    ImageDecodeError,
    decode_image,
    image_size,
    to_rgb,
)
from support.types import Part

REPO = Path(__file__).resolve().parents[1]
HANG_BOUND_S = 60  # seconds a child reading a looping PostScript file may take (it reads nothing)
needs_gs = pytest.mark.skipif(shutil.which("gs") is None, reason="Ghostscript (gs) not installed")


def postscript(marker: Path, loop: bool = False) -> bytes:
    """An EPS file that, if Ghostscript ran it, writes `marker` (and then loops forever)."""
    return (
        "%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 16 16\n"
        f"({marker}) (w) file dup (ran) writestring closefile\n"
        + ("{ } loop\n" if loop else "")
        + "showpage\n"
    ).encode()


def encoded(image: Image.Image, fmt: str = "PNG", **options) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format=fmt, **options)
    return buf.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A 1x1 PNG whose header claims width x height px (a bomb: decoding it would allocate all)."""
    png = bytearray(encoded(Image.new("1", (1, 1))))
    ihdr = bytearray(png[12:29])  # b"IHDR" + 13 bytes of fields
    ihdr[4:12] = struct.pack(">II", width, height)
    png[12:29] = ihdr
    png[29:33] = struct.pack(">I", zlib.crc32(bytes(ihdr)))
    return bytes(png)


def nyu_folder(root: Path, first: bytes | None = None) -> Path:
    """A one-image extracted NYU folder (landscape); `first` replaces its image's bytes."""
    (root / "rgb").mkdir(parents=True)
    (root / "depth").mkdir()
    image = root / "rgb" / "0000.png"
    Image.new("RGB", (640, 480), (90, 90, 90)).save(image)
    if first is not None:
        image.write_bytes(first)
    np.save(root / "depth" / "0000.npy", np.full((480, 640), 2.0, dtype=np.float32))
    return root


@pytest.fixture(scope="module")
def cholec(tmp_path_factory) -> Path:
    """A small synthetic CholecSeg8k raw tree (8 frames), copied per test that breaks it."""
    return build_cholecseg8k(
        tmp_path_factory.mktemp("cholec") / "tree", n_videos=2, frames_per_video=4
    )


def datasets_copy(frame: bytes):
    """A one-row `datasets` copy of CholecSeg8k whose frame holds `frame` (bytes, unchecked)."""
    import datasets

    mask = encoded(Image.new("RGB", (16, 16), (127, 127, 127)))
    rows = {
        "image": [{"bytes": frame, "path": "video01/video01_00000/frame_0_endo.png"}],
        "color_mask": [{"bytes": mask, "path": "frame_0_endo_color_mask.png"}],
    }
    features = datasets.Features({"image": datasets.Image(), "color_mask": datasets.Image()})
    return datasets.Dataset.from_dict(rows, features=features)


def first_frame(root: Path) -> Path:
    return root / RawTree.scan(root)[0].frames[0]


# ---- PostScript: refused unread by every reader ----------------------------------------------
def _readers(tmp_path: Path, cholec: Path, payload: bytes) -> dict:
    """reader name -> (a call reading `payload` planted as an image, the error it must raise)."""
    tree = tmp_path / "tree"
    shutil.copytree(cholec, tree)
    first_frame(tree).write_bytes(payload)
    rows, _ = RawTree.scan(tree)
    nyu = nyu_folder(tmp_path / "nyu", payload)
    pgt = tmp_path / "pgt" / "a.png"
    pgt.parent.mkdir()
    pgt.write_bytes(payload)
    part = Part(image=payload, mime="image/png")  # bytes that claim to be a PNG
    copy = _DatasetRows(datasets_copy(payload), "hub-copy")
    return {
        "door-path": (lambda: decode_image(pgt), ImageDecodeError),
        "door-bytes": (lambda: decode_image(payload, "frame.png"), ImageDecodeError),
        "door-size": (lambda: image_size(pgt), ImageDecodeError),
        "pointing-read": (lambda: rows.read("image", 0), CholecSeg8kFileError),
        "pointing-size": (lambda: rows.size("image", 0), CholecSeg8kFileError),
        "pointing-image": (
            lambda: CholecSeg8k(rows, str(tree), "f").image(0),
            CholecSeg8kFileError,
        ),
        "pointing-datasets-copy": (lambda: copy.read("image", 0), CholecSeg8kFileError),
        "nyu-folder": (lambda: NyuFolder(nyu).image(0), NyuFolderError),
        "pgt": (lambda: read_image(pgt), ImageError),
        "part-of-image": (lambda: Part.of_image(payload), ImageDecodeError),
        "chat-template": (lambda: chat_template._decode(part), ImageDecodeError),
        "tokens": (lambda: tokens.image_size(part), ImageDecodeError),
    }


READERS = [
    "door-path",
    "door-bytes",
    "door-size",
    "pointing-read",
    "pointing-size",
    "pointing-image",
    "pointing-datasets-copy",
    "nyu-folder",
    "pgt",
    "part-of-image",
    "chat-template",
    "tokens",
]


@needs_gs
@pytest.mark.parametrize("reader", READERS)
def test_postscript_saved_as_an_image_never_runs(tmp_path, cholec, reader):
    marker = tmp_path / "marker"
    call, error = _readers(tmp_path, cholec, postscript(marker))[reader]
    with pytest.raises(
        error,
        match=r"not a readable image \(format found: EPS, not one of the formats read: PNG, JPEG",
    ) as e:
        call()
    assert isinstance(e.value, ValueError)
    assert not marker.exists(), "Ghostscript ran the data file"


@needs_gs
def test_a_looping_postscript_file_hangs_no_reader(tmp_path, cholec):
    """Every reader, in a child process bounded by HANG_BOUND_S: Ghostscript would loop forever."""
    marker = tmp_path / "marker"
    payload = tmp_path / "payload.ps"
    payload.write_bytes(postscript(marker, loop=True))
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(REPO / "unit")!r})
        import test_image_door as t
        for name, (call, error) in t._readers(
            Path({str(tmp_path)!r}), Path({str(cholec)!r}), Path({str(payload)!r}).read_bytes()
        ).items():
            try:
                call()
            except error as e:
                print(name, "refused:", e)
            else:
                print(name, "READ IT")
    """)
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # gs would be its child: the whole group is stopped on time-out
    )
    try:
        out, _ = child.communicate(timeout=HANG_BOUND_S)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        pytest.fail(f"a reader hung on a looping PostScript file (> {HANG_BOUND_S} s)")
    assert child.returncode == 0, out
    assert out.count("refused:") == len(READERS), out
    assert not marker.exists()


# ---- the pixel limit, from the header, before decoding ----------------------------------------
@pytest.mark.parametrize("size", [(9_000, 9_000), (20_000, 9_000)])  # over ours / over Pillow's
def test_a_bomb_is_refused_from_its_header_naming_the_file(tmp_path, cholec, size):
    bomb = png_header_only(*size)
    path = tmp_path / "big.png"
    path.write_bytes(bomb)
    for call in (lambda: decode_image(path), lambda: image_size(path)):
        with pytest.raises(ImageDecodeError, match=rf"{path}: PNG image .*MAX_PIXELS = 80,000,000"):
            call()
    with pytest.raises(NyuFolderError, match=r"0000\.png: PNG image .*MAX_PIXELS"):
        NyuFolder(nyu_folder(tmp_path / "nyu", bomb)).image(0)
    tree = tmp_path / "tree"
    shutil.copytree(cholec, tree)
    first_frame(tree).write_bytes(bomb)
    with pytest.raises(CholecSeg8kFileError, match=r"frame_\d+_endo\.png: PNG image .*MAX_PIXELS"):
        RawTree.scan(tree)[0].size("image", 0)
    assert size[0] * size[1] > MAX_PIXELS


# ---- modes, converted explicitly --------------------------------------------------------------
def gray16(fraction: float = 0.3) -> np.ndarray:
    """A 16-bit grey ramp from 0 to `fraction` of full scale (16 x 256 px)."""
    return np.linspace(0, 65535 * fraction, 16 * 256).reshape(16, 256).astype(np.uint16)


@pytest.mark.parametrize("fmt", ["PNG", "TIFF"])
def test_16_bit_grey_is_scaled_not_clipped_to_white(tmp_path, fmt):
    values = gray16()
    data = encoded(Image.fromarray(values), fmt)
    rgb = np.asarray(decode_image(data, "grey16"))
    assert rgb.shape == (16, 256, 3) and rgb.dtype == np.uint8
    expected = np.rint(values / 257.0).astype(np.uint8)
    assert np.array_equal(rgb[..., 0], expected) and np.array_equal(rgb[..., 2], expected)
    assert (rgb == 255).mean() < 0.01  # the old convert("RGB") left it ~92% pure white


def test_16_bit_frames_reach_pointing_and_nyu_scaled(tmp_path, cholec):
    tree = tmp_path / "tree"
    shutil.copytree(cholec, tree)
    frame = first_frame(tree)
    w, h = Image.open(frame).size
    values = np.full((h, w), 65535 // 4, dtype=np.uint16)  # a quarter of full scale
    Image.fromarray(values).save(frame)
    rows, _ = RawTree.scan(tree)
    pointing = np.asarray(CholecSeg8k(rows, str(tree), "f").image(0))
    assert pointing.shape == (h, w, 3) and abs(int(pointing.mean()) - 64) <= 1
    nyu = nyu_folder(tmp_path / "nyu")
    Image.fromarray(np.full((480, 640), 65535 // 4, dtype=np.uint16)).save(nyu / "rgb" / "0000.png")
    assert abs(int(NyuFolder(nyu).image(0).mean()) - 64) <= 1


def test_32_bit_integer_and_float_grey_are_scaled():
    ints = Image.fromarray((gray16(1.0).astype(np.int32)), "I")
    assert np.asarray(to_rgb(ints))[..., 0].max() == 255
    floats = Image.fromarray(np.linspace(0, 0.5, 64, dtype=np.float32).reshape(8, 8), "F")
    assert np.asarray(to_rgb(floats))[..., 0].max() == 128  # 0..1 floats times 255


def test_transparency_is_composited_on_white():
    palette = Image.new("P", (4, 4), 1)
    palette.putpalette([0, 0, 0, 255, 0, 0])
    data = encoded(palette, "PNG", transparency=1)  # index 1 (red) transparent
    assert np.asarray(decode_image(data))[0, 0].tolist() == [255, 255, 255]
    rgba = Image.new("RGBA", (4, 4), (0, 0, 255, 0))
    assert np.asarray(decode_image(encoded(rgba)))[0, 0].tolist() == [255, 255, 255]
    half = Image.new("LA", (4, 4), (0, 128))  # black, half transparent
    assert np.asarray(decode_image(encoded(half)))[0, 0].tolist() == [127] * 3


def test_cmyk_jpeg_becomes_rgb():
    data = encoded(Image.new("CMYK", (8, 8), (0, 255, 255, 0)), "JPEG", quality=95)
    red = np.asarray(decode_image(data, "cmyk.jpg"))[4, 4]
    assert red[0] > 240 and red[1] < 15 and red[2] < 15


def test_exif_orientation_is_applied():
    image = Image.new("RGB", (40, 20), (0, 0, 0))
    image.paste((255, 0, 0), (0, 0, 10, 20))  # red on the left
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 degrees clockwise to display
    data = encoded(image, "JPEG", exif=exif.tobytes(), quality=95)
    shown = decode_image(data)
    assert shown.size == (20, 40)
    assert np.asarray(shown)[2, 10, 0] > 200  # the red band is now at the top


def test_rgb_png_and_jpeg_decode_unchanged_and_are_sent_as_they_are():
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8))
    for fmt, mime in (("PNG", "image/png"), ("JPEG", "image/jpeg")):
        data = encoded(image, fmt)
        before = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        assert np.array_equal(np.asarray(decode_image(data)), before)
        part = Part.of_image(data)
        assert part.image == data and part.mime == mime


# ---- what a model is sent: PNG or JPEG, its true MIME type --------------------------------------
@pytest.mark.parametrize("fmt", ["GIF", "BMP", "TIFF", "WEBP"])
def test_other_formats_are_sent_as_png(tmp_path, fmt):
    image = Image.new("RGB", (16, 8), (200, 40, 10))
    path = tmp_path / f"a.{fmt.lower()}"
    image.save(path, format=fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    part = Part.of_image(read_image(path), label=str(path))  # what pgt's task sends
    assert part.mime == "image/png" and part.image[:8] == b"\x89PNG\r\n\x1a\n"
    assert np.asarray(Image.open(io.BytesIO(part.image)))[4, 4].tolist() == [200, 40, 10]


def test_the_formats_read_are_stated_and_exclude_programs():
    assert READ_FORMATS == ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF")
    assert not {"EPS", "PS", "PDF", "MPEG"} & set(READ_FORMATS)
    doc = (REPO / "docs" / "untrusted-data.md").read_text(encoding="utf-8")
    assert "support/images.py" in doc and "PNG, JPEG, WebP, GIF, BMP, TIFF" in doc


def test_a_broken_image_names_the_file_and_the_format(tmp_path):
    path = tmp_path / "cut.png"
    path.write_bytes(encoded(Image.new("RGB", (64, 64), (1, 2, 3)))[:60])  # truncated
    with pytest.raises(
        ImageDecodeError, match=rf"{path}: not a readable image \(format found: PNG; .*formats read"
    ):
        decode_image(path)
    with pytest.raises(ImageDecodeError, match=r"empty\.png: missing"):
        decode_image(tmp_path / "empty.png")
    with pytest.raises(
        ImageDecodeError, match=r"label: not a readable image \(format found: unknown"
    ):
        decode_image(b"plain text, not an image", "label")


# ---- end to end: a bomb in NYU's folder is that image's cases' error, the summary still written --
@pytest.mark.slow
def test_a_bomb_in_the_nyu_folder_is_named_and_costs_no_summary(run_suite, tmp_path):
    root = tmp_path / "nyu"
    (root / "rgb").mkdir(parents=True)
    (root / "depth").mkdir()
    v, u = np.mgrid[0:480, 0:640].astype(np.float32)
    for i in range(2):  # a tilted plane 1.5-4 m deep (metres): every image yields pairs
        Image.new("RGB", (640, 480), (90, 90, 40 * i)).save(root / "rgb" / f"{i:04d}.png")
        np.save(root / "depth" / f"{i:04d}.npy", 1.5 + 2.0 * u / 640 + 0.5 * v / 480)
    bomb = root / "rgb" / "0001.png"
    bomb.write_bytes(png_header_only(20_000, 9_000))  # over Pillow's own error limit too
    result, results = run_suite(
        "nyu_distance", f"--nyu-dir={root}", "--model=oracle,chance", "--pairs-per-image=2",
        "-m", "quick",
    )  # fmt: skip
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, text[-3000:]
    assert "bug of the suite" not in text and "summary failed" not in text, text[-3000:]
    out = results / "nyu_distance" / "r1"
    rows = [json.loads(line) for line in (out / "raw_results.jsonl").read_text().splitlines()]
    errors = [r for r in rows if r["status"] == "error"]
    assert errors and all(r["case_id"].startswith("img0001") for r in errors)
    assert all(f"{bomb}: PNG image over the limit MAX_PIXELS" in r["error"] for r in errors)
    assert (out / "summary.csv").exists() and (out / "comparisons.csv").exists()
