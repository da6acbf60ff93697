"""A synthetic CholecSeg8k sample in exactly the real format, for offline tests and `--quick` runs.

Writes the raw tree as published (fmt "raw", the default): `videoNN/videoNN_SSSSS/frame_K_endo.png`
(RGB, 854x480 W x H) with, beside each frame,

- `frame_K_endo_color_mask.png`: RGB, one colour per class (classes.COLOR_TO_CLASS); about
  0.5-1% of pixels have colours outside the table (a 1-px border at the top and bottom rows and
  instrument outlines), which decode as IGNORE;
- `frame_K_endo_watershed_mask.png`: grey R=G=B RGB with the class ids of CLASS_TO_WATERSHED, 255
  on the border, the outlines and the boundaries between classes; every frame K with K % 10 == 3
  has a 4th, all-255 channel (RGBA), as some real masks do;
- `frame_K_endo_mask.png`: the annotation tool's mask, which the suite never reads; its real
  encoding is undocumented: written as RGBA, RGB = the watershed grey without boundaries, A = 255.

The frames of each video form one 80-frame clip starting at a 3-digit frame number (so that row
order by name equals frame order; real clips such as `video01_00080` mix 2- and 3-digit names).
`fmt` "save_to_disk" / "parquet" convert that tree with
support.evaluations.pointing.dataset.raw_to_dataset. Each video has a persistent layout of the 12
structures that drifts slowly over frames; each structure is present in runs of frames with its own
frequency (common: fat, liver, abdominal wall; rare: hepatic vein, blood, cystic duct).

    python -m support.evaluations.pointing.synthetic --out DIR [--seed S] [--format raw]
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from support.evaluations.pointing.classes import (
    CLASS_TO_COLOR,
    CLASS_TO_WATERSHED,
    WATERSHED_BOUNDARY,
)
from support.evaluations.pointing.dataset import COLUMNS, SUFFIX, raw_to_dataset
from support.images import encode_image
from support.storage.files import build_once

WIDTH, HEIGHT = 854, 480  # pixels, as the real frames
VERSION = "v2"  # bump when the rendering or the layout changes: it names the cache folder
BORDER_ID, OUTLINE_ID = 13, 14  # label-image values for the two unknown (ignored) colours
FORMATS = ("raw", "save_to_disk", "parquet")
# video numbers of the real CholecSeg8k, used in order for the synthetic videos
REAL_VIDEOS = (1, 9, 12, 17, 18, 20, 24, 25, 26, 27, 28, 35, 37, 43, 48, 52, 55)

# class id -> (target fraction of frames present, parent class id or 0); drawn back to front
PRESENCE: dict[int, tuple[float, int]] = {
    1: (0.80, 0),  # abdominal wall
    4: (0.85, 0),  # fat
    2: (0.80, 0),  # liver
    3: (0.40, 0),  # gastrointestinal tract
    6: (0.50, 0),  # connective tissue
    12: (0.30, 2),  # liver ligament, only on a visible liver
    10: (0.55, 0),  # gallbladder
    11: (0.18, 2),  # hepatic vein, only with liver
    8: (0.22, 10),  # cystic duct, only with gallbladder
    7: (0.20, 0),  # blood
    5: (0.60, 0),  # grasper
    9: (0.40, 0),  # L-hook electrocautery
}
# class id -> (radius x, radius y) of its blob as fractions of the frame width / height
BLOB_SIZE: dict[int, tuple[float, float]] = {
    4: (0.22, 0.34), 2: (0.34, 0.45), 3: (0.20, 0.28), 6: (0.12, 0.18), 12: (0.16, 0.05),
    10: (0.14, 0.17), 11: (0.08, 0.035), 8: (0.09, 0.03), 7: (0.04, 0.06),
}  # fmt: skip
# class id -> RGB base colour of the rendered tissue / instrument
TISSUE_RGB = np.array(
    [
        (45, 20, 18), (205, 150, 140), (125, 42, 36), (200, 120, 112), (222, 190, 110),
        (150, 156, 162), (212, 172, 160), (135, 12, 10), (205, 182, 150), (112, 112, 118),
        (112, 132, 72), (72, 40, 82), (232, 202, 190), (15, 8, 8), (95, 60, 58),
    ],
    dtype=np.uint8,
)  # fmt: skip
# label value -> colour-mask RGB; 13 and 14 are colours absent from the class table
MASK_RGB = np.array([CLASS_TO_COLOR[c] for c in range(13)] + [(0, 0, 0), (140, 140, 140)], np.uint8)
# label value -> watershed grey; the border and the outlines are boundaries (255)
WATERSHED_GREY = np.array(
    [CLASS_TO_WATERSHED[c] for c in range(13)] + [WATERSHED_BOUNDARY] * 2, np.uint8
)

_yy, _xx = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
_VIGNETTE = 1.0 - 0.45 * (
    ((_xx - WIDTH / 2) / (WIDTH / 2)) ** 2 + ((_yy - HEIGHT / 2) / (HEIGHT / 2)) ** 2
)
del _yy, _xx


def _presence_runs(rng: np.random.Generator, p: float, n: int) -> np.ndarray:
    """(n,) bool: a sticky two-state Markov chain with stationary probability p (runs of frames)."""
    q = 0.25  # ~1/q frames between state changes
    on = np.empty(n, bool)
    state = rng.random() < p
    for f, u in enumerate(rng.random(n)):
        on[f] = state
        state = u >= (1 - p) * q if state else u < p * q
    return on


def _video_layout(rng: np.random.Generator, n_frames: int) -> dict[int, dict]:
    """Per class: presence per frame and the shape parameters that stay fixed within a video."""
    p_video = rng.uniform(0.8, 1.2)  # some videos show more structures than others
    layout: dict[int, dict] = {}
    for cid, (p, parent) in PRESENCE.items():
        p_own = min(0.97, p * p_video / (PRESENCE[parent][0] if parent else 1.0))
        on = _presence_runs(rng, p_own, n_frames)
        if parent:
            on &= layout[parent]["on"]
        n_vert = int(rng.integers(9, 15))
        layout[cid] = {
            "on": on,
            "centre": rng.uniform((0.15, 0.15), (0.85, 0.85)),  # fractions of (W, H)
            "amp": rng.uniform(0.02, 0.08, 2),  # drift amplitude, fractions of (W, H)
            "period": rng.uniform(25, 80, 2),  # drift period, frames
            "phase": rng.uniform(0, 2 * math.pi, 2),
            "angle": rng.uniform(0, math.pi),  # radians
            "spin": rng.normal(0, 0.01),  # radians per frame
            "radii": 1 + 0.25 * rng.standard_normal(n_vert).clip(-2, 2),
            "edge": int(rng.integers(4)),  # instruments / wall: which side they enter from
            "count": int(rng.integers(1, 4)),  # blood: number of drops
        }
    return layout


def _blob(cx: float, cy: float, rx: float, ry: float, angle: float, radii: np.ndarray) -> list:
    t = np.linspace(0, 2 * math.pi, len(radii), endpoint=False)
    x, y = rx * radii * np.cos(t), ry * radii * np.sin(t)
    c, s = math.cos(angle), math.sin(angle)
    return list(zip((cx + c * x - s * y).tolist(), (cy + s * x + c * y).tolist(), strict=True))


def _edge_point(edge: int, u: float) -> tuple[float, float]:
    """A point on side `edge` (0 top, 1 right, 2 bottom, 3 left) at fraction u along it, pixels."""
    return [(u * WIDTH, 0), (WIDTH, u * HEIGHT), (u * WIDTH, HEIGHT), (0, u * HEIGHT)][edge]


def _draw_labels(layout: dict[int, dict], f: int) -> np.ndarray:
    """(H, W) uint8 label image of frame f: class ids 0..12, BORDER_ID / OUTLINE_ID for unknowns."""
    img = Image.new("L", (WIDTH, HEIGHT), 0)
    draw = ImageDraw.Draw(img)
    for cid, g in layout.items():
        if not g["on"][f]:
            continue
        drift = g["amp"] * np.sin(2 * math.pi * f / g["period"] + g["phase"])
        cx, cy = (g["centre"] + drift) * (WIDTH, HEIGHT)  # pixels
        angle = g["angle"] + g["spin"] * f
        wobble = g["radii"] * (1 + 0.05 * math.sin(0.2 * f + g["phase"][0]))
        if cid == 1:  # abdominal wall: a band along one side with a wavy inner edge
            depth = 0.4 + 0.1 * math.sin(0.05 * f + g["phase"][1])  # fraction of short side
            outer = [_edge_point(g["edge"], u) for u in np.linspace(0, 1, len(wobble))]
            dx, dy = [(0, 1), (-1, 0), (0, -1), (1, 0)][g["edge"]]  # inward direction
            push = depth * min(WIDTH, HEIGHT) * wobble.clip(0.8, 1.2)  # band depth, pixels
            inner = [(x + dx * d, y + dy * d) for (x, y), d in zip(outer, push, strict=True)]
            pts = outer + inner[::-1]
            draw.polygon(pts, fill=cid)
        elif cid in (5, 9):  # grasper / L-hook: a shaft from the side to a moving tip
            tip = np.array([cx, cy])
            base = np.array(_edge_point(g["edge"], 0.5 + 0.4 * math.sin(g["phase"][1])))
            axis = (tip - base) / max(1e-6, float(np.hypot(*(tip - base))))
            half = (14.0 if cid == 5 else 6.0) * np.array([-axis[1], axis[0]])  # half width, px
            shaft = [tuple(base + half), tuple(tip + half), tuple(tip - half), tuple(base - half)]
            draw.polygon(shaft, fill=cid, outline=OUTLINE_ID)
            if cid == 5:  # two jaws
                for sign in (1, -1):
                    jaw = tip + 40 * axis + sign * 1.8 * half
                    draw.polygon([tuple(tip + half), tuple(jaw), tuple(tip - half)], fill=cid)
            else:  # the L of the hook
                hook = [tuple(tip), tuple(tip + 30 * axis), tuple(tip + 30 * axis + 3.5 * half)]
                draw.line(hook, fill=cid, width=8)
        else:
            rx, ry = BLOB_SIZE[cid]
            for k in range(g["count"] if cid == 7 else 1):
                off = 0.08 * k * np.array([WIDTH, HEIGHT])  # extra blood drops, pixels
                pts = _blob(cx + off[0], cy - off[1], rx * WIDTH, ry * HEIGHT, angle, wobble)
                draw.polygon(pts, fill=cid)
    draw.line([(0, 0), (WIDTH - 1, 0)], fill=BORDER_ID)  # 1-px unknown-colour rows, top / bottom
    draw.line([(0, HEIGHT - 1), (WIDTH - 1, HEIGHT - 1)], fill=BORDER_ID)
    return np.asarray(img)


def _png(arr: np.ndarray) -> bytes:
    """(H, W) grey or (H, W, 3|4) RGB(A) uint8 -> PNG bytes (fast zlib level: synthetic data)."""
    return encode_image(Image.fromarray(arr), "PNG", compress_level=1)


def _watershed(labels: np.ndarray, rgba: bool) -> np.ndarray:
    """(H, W, 3|4) watershed mask of a label image: class greys, 255 on the border, outlines and
    the pixels whose right or lower neighbour has another class."""
    grey = WATERSHED_GREY[labels]
    edge = np.zeros(labels.shape, bool)
    edge[:, :-1] |= labels[:, :-1] != labels[:, 1:]
    edge[:-1, :] |= labels[:-1, :] != labels[1:, :]
    grey = np.where(edge, np.uint8(WATERSHED_BOUNDARY), grey)
    planes = [grey] * 3 + ([np.full_like(grey, 255)] if rgba else [])
    return np.stack(planes, axis=-1)


def _annotation(labels: np.ndarray) -> np.ndarray:
    """(H, W, 4) stand-in for the annotation tool's mask (never read): class greys, alpha 255."""
    grey = WATERSHED_GREY[labels]
    return np.stack([grey, grey, grey, np.full_like(grey, 255)], axis=-1)


def _render_frame(seed: int, v: int, f: int, k: int, layout: dict[int, dict]) -> dict[str, bytes]:
    """The four PNGs of frame f (frame number k) of video v: textured RGB image and three masks."""
    labels = _draw_labels(layout, f)
    rng = np.random.default_rng([seed, v, f])  # per-frame stream: order of threads doesn't matter
    low = rng.normal(1.0, 0.08, (HEIGHT // 16 + 1, WIDTH // 16 + 1)).astype(np.float32)
    shade = np.asarray(Image.fromarray(low).resize((WIDTH, HEIGHT), Image.BILINEAR))  # brightness
    rgb = TISSUE_RGB[labels] * (shade * _VIGNETTE)[..., None]
    grain = rng.integers(-3, 4, (HEIGHT // 2, WIDTH // 2, 1), dtype=np.int8)  # 2x2-px grain
    rgb += grain.repeat(2, 0).repeat(2, 1)
    rgb = np.clip(rgb, 0, 255, out=rgb).astype(np.uint8)
    return {
        "image": _png(rgb),
        "color_mask": _png(MASK_RGB[labels]),
        "watershed_mask": _png(_watershed(labels, rgba=k % 10 == 3)),
        "annotation_mask": _png(_annotation(labels)),
    }


def _write_tree(root: Path, seed: int, n_videos: int, frames_per_video: int, workers: int) -> int:
    """Write the raw tree under root, video by video (memory: one video's PNGs); returns rows."""
    n_rows = 0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for v in range(n_videos):
            rng = np.random.default_rng([seed, v, 0x5EED])
            video = f"video{REAL_VIDEOS[v] if v < len(REAL_VIDEOS) else 60 + v:02d}"
            # first frame of the 80-frame clip: 160..880, so all its frame numbers have 3 digits
            first = 80 * (2 + int(rng.integers(0, 40)) % 10)
            layout = _video_layout(rng, frames_per_video)
            clip = root / video / f"{video}_{first:05d}"
            clip.mkdir(parents=True, exist_ok=True)
            n = frames_per_video
            ks = [first + f for f in range(n)]
            frames = pool.map(_render_frame, [seed] * n, [v] * n, range(n), ks, [layout] * n)
            for k, frame in zip(ks, frames, strict=True):
                for c in COLUMNS:
                    (clip / f"frame_{k}_endo{SUFFIX[c]}.png").write_bytes(frame[c])
                n_rows += 1
    return n_rows


def build_cholecseg8k(
    out_dir: Path,
    seed: int = 0,
    n_videos: int = 6,
    frames_per_video: int = 80,
    fmt: str = "raw",
) -> Path:
    """Write a synthetic CholecSeg8k at out_dir, deterministic from seed; returns the path to load.

    fmt "raw": the raw tree (`out_dir/videoNN/...`), returns out_dir.
    fmt "save_to_disk": a `Dataset.save_to_disk` folder of the same rows. As with a real copy saved
    that way, the image paths keep only their file names (datasets embeds the bytes and drops the
    folders), so the loader recovers clips as row // 80: with the default 80 frames per video,
    clips and videos agree.
    fmt "parquet": `<out_dir>/data/train-00000-of-00001.parquet`, which keeps the relative
    `videoNN/videoNN_SSSSS/frame_K_endo.png` paths, so the loader reads videos from them.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown synthetic format {fmt!r}: use one of {', '.join(FORMATS)}")
    out_dir = Path(out_dir)
    workers = min(4, os.cpu_count() or 1)
    if fmt == "raw":
        out_dir.mkdir(parents=True, exist_ok=True)
        _write_tree(out_dir, seed, n_videos, frames_per_video, workers)
        return out_dir
    import datasets

    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # quiet at collection time; the CLI reports its own time
    try:
        with tempfile.TemporaryDirectory(prefix="cholecseg8k-build-") as scratch:
            tree = Path(scratch) / "tree"
            _write_tree(tree, seed, n_videos, frames_per_video, workers)
            ds = raw_to_dataset(tree, cache_dir=Path(scratch) / "hf")
            if fmt == "save_to_disk":
                ds.save_to_disk(str(out_dir), num_shards=1)
                return out_dir
            path = out_dir / "data" / "train-00000-of-00001.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            ds.to_parquet(str(path))
            return path
    finally:
        if bars:
            datasets.enable_progress_bars()


def ensure_cholecseg8k(cache_dir: Path, seed: int = 0) -> Path:
    """The default synthetic dataset under cache_dir, built on first use (safe across processes)."""
    target = Path(cache_dir) / "synthetic" / f"cholecseg8k-seed{seed}-{VERSION}"
    return build_once(target, lambda folder: build_cholecseg8k(folder, seed=seed))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m support.evaluations.pointing.synthetic", description=__doc__
    )
    ap.add_argument("--out", required=True, type=Path, help="folder to write (must not exist)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-videos", type=int, default=6)
    ap.add_argument("--frames-per-video", type=int, default=80)
    ap.add_argument("--format", default="raw", choices=FORMATS)
    args = ap.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        ap.error(f"{args.out} exists and is not empty")
    t0 = time.perf_counter()
    build_cholecseg8k(args.out, args.seed, args.n_videos, args.frames_per_video, args.format)
    n = args.n_videos * args.frames_per_video
    print(f"wrote {n} rows to {args.out} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
