"""Pointing's canvas PNG: what each zlib level and Pillow option costs to encode and decode.

    python benchmarks/pointing_canvas_png.py [--cache-dir DIR] [--frames 24] [--repeats 3]

A plain script, not a pytest module (CI never runs it). Workload: `--frames` frames of the
synthetic CholecSeg8k sample (support.evaluations.pointing.synthetic, built in `--cache-dir` on
first use), spread over its rows, each decoded and letterboxed onto the 768x768 canvas as a run
makes it (task.PointingEvaluation._canvas_png). For each setting, every canvas is encoded with
`PIL.Image.save(format="PNG", **options)` and decoded again (Pillow's decoder, pixels loaded):
the median over `--repeats` of the mean milliseconds per canvas, and the mean bytes. Settings:
zlib levels 0, 1, 3, 6, 9; at level 1, each zlib strategy (`compress_type`: Pillow's PNG filter
choice is its own, adaptive per line, and not an option); `optimize=True` (level 9, the smallest
Pillow makes). The first lines give what making a canvas costs before encoding (frame decode,
letterbox), for scale. The canvas's bytes are what a run sends and hashes into its cache keys:
a setting other than task.CANVAS_RECIPE's changes them (benchmarks/README.md has the decision).

A second table does the same for the frames' canvas label maps (768x768 int8 class ids, what
task.labels_folder keeps): `.npy` as numpy writes it, the same through zlib (level 1), and a PNG
of mode L (IGNORE as 255, task.label_png) at zlib levels 1, 6 and 9; read: bytes to the array.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
import zlib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from PIL import Image  # noqa: E402

from support.evaluations.pointing.classes import IGNORE  # noqa: E402
from support.evaluations.pointing.dataset import CholecSeg8k  # noqa: E402
from support.evaluations.pointing.letterbox import Letterbox, canvas_values, letterbox  # noqa: E402
from support.evaluations.pointing.synthetic import ensure_cholecseg8k  # noqa: E402
from support.evaluations.pointing.task import CANVAS, LABEL_PNG_IGNORE  # noqa: E402

SETTINGS: dict[str, dict] = {
    "level 0": {"compress_level": 0},
    "level 1 (CANVAS_RECIPE)": {"compress_level": 1},
    "level 3": {"compress_level": 3},
    "level 6 (zlib's default)": {"compress_level": 6},
    "level 9": {"compress_level": 9},
    "level 1, Z_FILTERED": {"compress_level": 1, "compress_type": 1},
    "level 1, Z_HUFFMAN_ONLY": {"compress_level": 1, "compress_type": 2},
    "level 1, Z_RLE": {"compress_level": 1, "compress_type": 3},
    "optimize=True": {"optimize": True},
}


def timed_ms(fn, items: list, repeats: int) -> tuple[float, list]:
    """The median over `repeats` of the mean ms of fn(item), and the last round's results."""
    rounds, out = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        out = [fn(item) for item in items]
        rounds.append((time.perf_counter() - started) * 1000 / len(items))
    return statistics.median(rounds), out


def encode(image: Image.Image, options: dict) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG", **options)
    return buf.getvalue()


def decode(data: bytes) -> Image.Image:
    im = Image.open(io.BytesIO(data))
    im.load()
    return im


def npy(labels: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, labels, allow_pickle=False)
    return buf.getvalue()


def from_npy(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data), allow_pickle=False)


def label_png(level: int):
    def write(labels: np.ndarray) -> bytes:
        grey = np.where(labels == IGNORE, LABEL_PNG_IGNORE, labels).astype(np.uint8)
        return encode(Image.fromarray(grey, "L"), {"compress_level": level})

    return write


def from_label_png(data: bytes) -> np.ndarray:
    grey = np.asarray(decode(data))
    return np.where(grey == LABEL_PNG_IGNORE, IGNORE, grey).astype(np.int8)


LABEL_FORMATS = {
    ".npy": (npy, from_npy),
    ".npy, zlib level 1": (
        lambda m: zlib.compress(npy(m), 1),
        lambda b: from_npy(zlib.decompress(b)),
    ),
    "PNG L, level 1 (LABEL_RULE)": (label_png(1), from_label_png),
    "PNG L, level 6": (label_png(6), from_label_png),
    "PNG L, level 9": (label_png(9), from_label_png),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", type=Path, default=REPO / ".cache")
    ap.add_argument("--frames", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)

    ds = CholecSeg8k.open(ensure_cholecseg8k(args.cache_dir))
    rows = np.linspace(0, len(ds) - 1, min(args.frames, len(ds)), dtype=int).tolist()
    decode_ms, frames = timed_ms(ds.image, rows, args.repeats)
    box_ms, canvases = timed_ms(lambda im: letterbox(im, CANVAS)[0], frames, args.repeats)
    print(f"{len(rows)} frames of {ds.source} ({frames[0].width}x{frames[0].height} px)")
    print(f"frame decode {decode_ms:.1f} ms, letterbox {box_ms:.1f} ms a frame\n")
    print("| setting | encode ms | decode ms | KiB |")
    print("|---|---:|---:|---:|")
    reference = None
    for name, options in SETTINGS.items():
        enc_ms, blobs = timed_ms(lambda im, o=options: encode(im, o), canvases, args.repeats)
        dec_ms, decoded = timed_ms(decode, blobs, args.repeats)
        pixels = [np.asarray(im) for im in decoded]
        if reference is None:
            reference = pixels
        assert all(np.array_equal(a, b) for a, b in zip(pixels, reference, strict=True))  # lossless
        kib = sum(map(len, blobs)) / len(blobs) / 1024
        print(f"| {name} | {enc_ms:.1f} | {dec_ms:.1f} | {kib:,.0f} |")

    maps = [
        canvas_values(ds.labels(r), Letterbox(*ds.frame_size(r), *CANVAS), IGNORE) for r in rows
    ]
    print("\n| label map | write ms | read ms | KiB |")
    print("|---|---:|---:|---:|")
    for name, (write, read) in LABEL_FORMATS.items():
        write_ms, blobs = timed_ms(write, maps, args.repeats)
        read_ms, back = timed_ms(read, blobs, args.repeats)
        assert all(np.array_equal(a, b) for a, b in zip(back, maps, strict=True))
        kib = sum(map(len, blobs)) / len(blobs) / 1024
        print(f"| {name} | {write_ms:.2f} | {read_ms:.2f} | {kib:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
