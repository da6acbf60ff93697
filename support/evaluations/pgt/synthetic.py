"""A synthetic PGT sample in the real CSV format: photographs as `real`, procedural images as
`ai-generated` from several named generators.

The real images are crops of the photographs that ship with scikit-image (`skimage.data`: no
download). The fakes come from four procedural "generators" with distinct artifacts: spectral
1/f noise, a Voronoi mosaic, wave interference, and shaded spheres. All images are 256x256 RGB
PNG, so the file format says nothing about the label. Deterministic from the seed.

    python -m support.evaluations.pgt.synthetic --out DIR [--seed S]
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

from support.storage.files import build_once

SIZE = 256  # px, square
VERSION = "v1"  # bump when the images change: it names the cache folder
CSV_NAME = "synthetic_sample.csv"
PHOTOS = (  # skimage.data photographs (name, loader attribute)
    "astronaut", "camera", "chelsea", "coffee", "rocket", "hubble_deep_field",
    "retina", "moon", "coins", "brick", "grass", "gravel",
)  # fmt: skip
CROPS_PER_PHOTO = 2
FAKES_PER_GENERATOR = 6


def _photo(name: str) -> np.ndarray:
    import skimage.data

    image = getattr(skimage.data, name)()
    if image.ndim == 2:
        image = np.stack([image] * 3, axis=-1)
    return np.ascontiguousarray(image[..., :3]).astype(np.uint8)


def real_crop(name: str, rng: np.random.Generator) -> Image.Image:
    """A square crop (random position, 60-100% of the short side) resized to SIZE."""
    image = _photo(name)
    h, w = image.shape[:2]
    side = int(min(h, w) * rng.uniform(0.6, 1.0))
    y, x = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
    crop = Image.fromarray(image[y : y + side, x : x + side])
    return crop.resize((SIZE, SIZE), Image.Resampling.LANCZOS)


def _to_rgb(field: np.ndarray, palette: np.ndarray) -> np.ndarray:
    """Map a (H, W) field onto a (k, 3) colour ramp."""
    f = (field - field.min()) / (np.ptp(field) + 1e-9) * (len(palette) - 1)
    i = np.clip(f.astype(int), 0, len(palette) - 2)
    t = (f - i)[..., None]
    return (palette[i] * (1 - t) + palette[i + 1] * t).astype(np.uint8)


def _palette(rng: np.random.Generator, k: int = 4) -> np.ndarray:
    return rng.integers(0, 256, size=(k, 3)).astype(float)


def spectral_noise(rng: np.random.Generator) -> np.ndarray:
    """1/f^beta noise per channel (too smooth and isotropic for a photograph)."""
    fy, fx = np.meshgrid(np.fft.fftfreq(SIZE), np.fft.fftfreq(SIZE), indexing="ij")
    radius = np.hypot(fx, fy)
    radius[0, 0] = 1.0
    beta = rng.uniform(1.6, 2.4)
    channels = []
    for _ in range(3):
        phase = np.exp(2j * np.pi * rng.random((SIZE, SIZE)))
        field = np.real(np.fft.ifft2(phase / radius**beta))
        channels.append((field - field.min()) / (np.ptp(field) + 1e-9) * 255)
    return np.stack(channels, axis=-1).astype(np.uint8)


def voronoi_mosaic(rng: np.random.Generator) -> np.ndarray:
    """Flat Voronoi cells with a radial shading per cell."""
    seeds = rng.random((int(rng.integers(12, 40)), 2)) * SIZE
    colors = rng.integers(30, 256, size=(len(seeds), 3)).astype(float)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    d = np.hypot(xx[..., None] - seeds[:, 0], yy[..., None] - seeds[:, 1])  # (H, W, k) px
    nearest = d.argmin(axis=-1)
    shade = 1.0 - 0.5 * np.clip(d.min(axis=-1) / 60.0, 0, 1)
    return (colors[nearest] * shade[..., None]).astype(np.uint8)


def wave_interference(rng: np.random.Generator) -> np.ndarray:
    """Sum of plane and radial sinusoids through a colour ramp (periodic artifacts)."""
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(float)
    field = np.zeros((SIZE, SIZE))
    for _ in range(int(rng.integers(3, 6))):
        if rng.random() < 0.5:
            angle, freq = rng.uniform(0, np.pi), rng.uniform(0.02, 0.12)
            field += np.sin(freq * (xx * np.cos(angle) + yy * np.sin(angle)) + rng.uniform(0, 6))
        else:
            cx, cy = rng.random(2) * SIZE
            field += np.sin(rng.uniform(0.05, 0.2) * np.hypot(xx - cx, yy - cy))
    return _to_rgb(field, _palette(rng, 5))


def shaded_spheres(rng: np.random.Generator) -> np.ndarray:
    """Lambert-shaded spheres over a vertical gradient (a too-clean render)."""
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(float)
    top, bottom = _palette(rng, 2)
    out = top * (1 - yy[..., None] / SIZE) + bottom * (yy[..., None] / SIZE)
    light = np.array([-0.5, -0.6, 0.62])
    light /= np.linalg.norm(light)
    for _ in range(int(rng.integers(2, 6))):
        cx, cy, r = rng.uniform(30, SIZE - 30), rng.uniform(30, SIZE - 30), rng.uniform(15, 70)
        dx, dy = (xx - cx) / r, (yy - cy) / r
        inside = dx**2 + dy**2 < 1
        dz = np.sqrt(np.clip(1 - dx**2 - dy**2, 0, 1))
        lambert = np.clip(dx * light[0] + dy * light[1] + dz * light[2], 0.08, 1)
        color = rng.integers(40, 256, size=3).astype(float)
        out[inside] = (color * lambert[..., None])[inside]
    return out.clip(0, 255).astype(np.uint8)


GENERATORS: dict[str, Callable[[np.random.Generator], np.ndarray]] = {
    "spectral-noise": spectral_noise,
    "voronoi-mosaic": voronoi_mosaic,
    "wave-interference": wave_interference,
    "shaded-spheres": shaded_spheres,
}


def build_pgt_sample(folder: Path, seed: int = 0) -> Path:
    """Write images/*.png and the CSV (image_path, label, generator) into folder; the CSV path.

    Rows alternate real and ai-generated, so any evenly spaced subset keeps both classes.
    """
    folder = Path(folder)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    reals = []
    for i, name in enumerate(PHOTOS):
        for j in range(CROPS_PER_PHOTO):
            rng = np.random.default_rng([seed, 0, i, j])
            reals.append((f"real_{name}_{j}", real_crop(name, rng), "real", name))
    fakes = []
    for j in range(FAKES_PER_GENERATOR):
        for g, (name, make) in enumerate(GENERATORS.items()):
            rng = np.random.default_rng([seed, 1, g, j])
            fakes.append((f"fake_{name}_{j}", Image.fromarray(make(rng)), "ai-generated", name))
    rows = [r for pair in zip(reals, fakes, strict=True) for r in pair]
    csv_path = folder / CSV_NAME
    with csv_path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["image_path", "label", "generator"])
        for stem, image, label, generator in rows:
            rel = f"images/{stem}.png"
            image.save(folder / rel, format="PNG")
            writer.writerow([rel, label, "real" if label == "real" else generator])
    return csv_path


def ensure_pgt_sample(cache_dir: Path, seed: int = 0) -> Path:
    """The default synthetic sample's CSV under cache_dir, built on first use."""
    target = Path(cache_dir) / "synthetic" / f"pgt-seed{seed}-{VERSION}"
    return build_once(target, lambda folder: build_pgt_sample(folder, seed)) / CSV_NAME


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m support.evaluations.pgt.synthetic", description=__doc__
    )
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(build_pgt_sample(args.out, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
