"""A synthetic NYU Depth V2 labeled file in exactly the real layout, for offline tests and runs.

Writes `nyu_depth_v2_labeled.mat`: MATLAB v7.3 (an HDF5 file behind MATLAB's 512-byte header) with
`images` uint8 (N, 3, 640, 480), `depths` float32 (N, 640, 480) and `labels` uint16 (N, 640, 480)
in h5py's view, i.e. the transposes of (480, 640, 3) and (480, 640) arrays, chunked one image per
chunk. Each image is an indoor room (floor, ceiling, four walls) with a few boxes on the floor,
ray-cast per pixel through the NYU Kinect intrinsics: `depths` is the Z depth in metres of the
surface each pixel's ray hits, so back-projected pixels lie exactly on the scene's surfaces. Some
images have a window on the far wall where the depth is 0 (invalid, like a Kinect hole), so the
pair sampler's validity filter has something to do. Deterministic from the seed.

    python -m support.evaluations.nyu_distance.synthetic --out DIR [--seed S] [--n-images N]

Frames: world x right, y down (gravity), z forward at zero yaw, metres; the floor is y = 0, the
ceiling y = -height. Camera frame as support.evaluations.nyu_distance.camera: x right, y down, z
forward.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from support.evaluations.nyu_distance.camera import NYU_KINECT, Intrinsics
from support.evaluations.nyu_distance.mat import FILE_NAME, HEIGHT, WIDTH
from support.storage.files import build_once

VERSION = "v1"  # bump when the rendering changes: it names the cache folder
N_IMAGES = 8
# label values (the real file's labels index its 894 class names; these are the scene's own)
FLOOR, CEILING, WALL, WINDOW, BOX = 1, 2, 3, 4, 5  # boxes are BOX, BOX + 1, ...
MATLAB_HEADER = (
    (
        b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  5 00:00:00 2015 "
        b"HDF5 schema 1.00 ."
    ).ljust(116)
    + b"\x00" * 8
    + b"\x00\x02"
    + b"IM"
)  # text, subsystem offset, version, endianness
USERBLOCK = 512  # bytes before the HDF5 superblock, as MATLAB writes v7.3 files
LIGHT = np.array([0.3, -1.0, -0.6]) / np.linalg.norm([0.3, -1.0, -0.6])  # towards the light
FLOOR_RGB, WINDOW_RGB = (150.0, 105.0, 65.0), (200.0, 225.0, 250.0)
PALETTE = np.array(
    [(176, 124, 80), (60, 90, 160), (70, 140, 80), (170, 50, 50), (200, 170, 70), (120, 80, 140)],
    dtype=np.float64,
)  # box colours, RGB


def rot_y(a: float) -> np.ndarray:
    """Rotation by a radians about the y (down) axis: z turns towards x."""
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rot_x(a: float) -> np.ndarray:
    """Rotation by a radians about the x (right) axis: z turns towards -y."""
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


@dataclass(frozen=True)
class Box:
    """A box standing on the floor: centre (x, y, z) m world, half extents m, yaw rad about y."""

    centre: tuple[float, float, float]
    half: tuple[float, float, float]
    yaw: float
    colour: tuple[float, float, float]


@dataclass(frozen=True)
class Scene:
    """One room: size (width x, depth z, height) m, camera pose, boxes, optional far-wall window."""

    size: tuple[float, float, float]  # (width along x, depth along z, height) m
    camera: tuple[float, float, float]  # optical centre, world m
    yaw: float  # rad, camera turned right of +z
    pitch: float  # rad, camera tilted down
    boxes: tuple[Box, ...]
    window: tuple[float, float, float, float] | None  # (x0, x1, y0, y1) m on the far wall z = depth
    wall_colour: tuple[float, float, float]

    @property
    def rotation(self) -> np.ndarray:
        """(3, 3) camera-to-world rotation: world = R @ camera + camera_centre."""
        return rot_y(self.yaw) @ rot_x(-self.pitch)

    def to_world(self, points: np.ndarray) -> np.ndarray:
        """(..., 3) camera-frame points m -> world-frame points m."""
        return np.asarray(points) @ self.rotation.T + np.asarray(self.camera)


def make_scene(seed: int, index: int) -> Scene:
    """The room of image `index`, deterministic from (seed, index)."""
    rng = np.random.default_rng([seed, index, 0x4E59])
    w, d, h = rng.uniform(3.5, 6.0), rng.uniform(4.5, 7.5), rng.uniform(2.4, 3.0)
    cam = (rng.uniform(0.35, 0.65) * w, -rng.uniform(1.1, 1.6), rng.uniform(0.3, 0.8))
    boxes = []
    for k in range(int(rng.integers(2, 5))):
        hx, hy, hz = rng.uniform(0.15, 0.6), rng.uniform(0.15, 0.5), rng.uniform(0.15, 0.6)
        reach = math.hypot(hx, hz)  # stays inside the room whatever the yaw
        x = rng.uniform(reach + 0.05, w - reach - 0.05)
        z = rng.uniform(cam[2] + 1.2 + reach, d - reach - 0.05)
        colour = tuple(PALETTE[(index + k) % len(PALETTE)].tolist())
        boxes.append(Box((x, -hy, z), (hx, hy, hz), rng.uniform(0, math.pi / 2), colour))
    window = None
    if index % 2:
        x0 = rng.uniform(0.2, w - 1.4)
        window = (x0, x0 + rng.uniform(0.6, 1.2), -2.1, -1.0)
    wall = tuple(rng.uniform(150, 220, 3).tolist())
    return Scene(
        (w, d, h), cam, rng.uniform(-0.35, 0.35), rng.uniform(0.1, 0.3), tuple(boxes), window, wall
    )


def _rays(k: Intrinsics) -> tuple[np.ndarray, np.ndarray]:
    """Camera-frame ray directions (x, y, 1) with unit z, as two (H, W) arrays x and y: pixel
    (u, v) = (col, row) as is. Component-major arrays keep the renderer's loops fast."""
    v, u = np.mgrid[0 : k.height, 0 : k.width].astype(np.float64)
    return (u - k.cx) / k.fx, (v - k.cy) / k.fy


def render_scene(
    scene: Scene, k: Intrinsics = NYU_KINECT, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ray-cast the scene: (H, W, 3) uint8 RGB, (H, W) float32 Z depth m (0 = invalid), (H, W)
    uint16 labels (FLOOR, CEILING, WALL, WINDOW, BOX + box index)."""
    rx, ry = _rays(k)
    rot = scene.rotation
    # world directions, one (H, W) array per axis; the ray parameter t is the camera Z
    dirs = [rot[i, 0] * rx + rot[i, 1] * ry + rot[i, 2] for i in range(3)]
    o = scene.camera
    w, d, h = scene.size
    lo, hi = (0.0, -h, 0.0), (w, 0.0, d)
    t = np.full(rx.shape, np.inf)
    axis = np.zeros(rx.shape, dtype=np.int8)  # the room face each ray leaves through
    outward = np.zeros(rx.shape, dtype=bool)  # ... on its high side (+x, +y = floor, +z)
    with np.errstate(divide="ignore", invalid="ignore"):
        for a in range(3):
            da = dirs[a]
            ta = np.where(da < 0, (lo[a] - o[a]) / da, np.inf)
            ta = np.where(da > 0, (hi[a] - o[a]) / da, ta)
            closer = ta < t
            t = np.where(closer, ta, t)
            axis = np.where(closer, a, axis)
            outward = np.where(closer, da > 0, outward)
    normal = [np.where(axis == a, np.where(outward, -1.0, 1.0), 0.0) for a in range(3)]  # inward
    labels = np.where(axis == 1, np.where(outward, FLOOR, CEILING), WALL).astype(np.uint16)
    for b, box in enumerate(scene.boxes):
        br = rot_y(box.yaw)  # box-to-world
        ol = br.T @ (np.asarray(o) - np.asarray(box.centre))  # camera in the box frame
        dl = [br[0, a] * dirs[0] + br[1, a] * dirs[1] + br[2, a] * dirs[2] for a in range(3)]
        t_near, t_far = np.full(rx.shape, -np.inf), np.full(rx.shape, np.inf)
        face = np.zeros(rx.shape, dtype=np.int8)
        with np.errstate(divide="ignore", invalid="ignore"):
            for a in range(3):  # slabs
                t1, t2 = (-box.half[a] - ol[a]) / dl[a], (box.half[a] - ol[a]) / dl[a]
                near = np.minimum(t1, t2)
                face = np.where(near > t_near, a, face)
                t_near = np.maximum(t_near, near)
                t_far = np.minimum(t_far, np.maximum(t1, t2))
        hit = (t_near <= t_far) & (t_near > 0) & (t_near < t)
        local = [np.where(face == a, -np.sign(dl[a]), 0.0) for a in range(3)]  # box frame
        for i in range(3):
            n_i = br[i, 0] * local[0] + br[i, 1] * local[1] + br[i, 2] * local[2]
            normal[i] = np.where(hit, n_i, normal[i])
        t = np.where(hit, t_near, t)
        labels = np.where(hit, BOX + b, labels).astype(np.uint16)
    points = [o[i] + t * dirs[i] for i in range(3)]  # world m
    if scene.window is not None:
        x0, x1, y0, y1 = scene.window
        win = (labels == WALL) & np.isclose(points[2], d)  # on the far wall
        win &= (points[0] > x0) & (points[0] < x1) & (points[1] > y0) & (points[1] < y1)
        labels = np.where(win, WINDOW, labels).astype(np.uint16)
    rgb = _shade(scene, labels, normal, points, t, seed)
    depth = np.where(labels == WINDOW, 0.0, t).astype(np.float32)
    return rgb, depth, labels


def _shade(scene, labels, normal, points, t, seed) -> np.ndarray:
    """Colours: planked floor, painted walls, white ceiling, coloured boxes; Lambert shading."""
    plank = np.floor(points[0] / 0.18)  # 18 cm planks along z
    tone = 0.85 + 0.15 * np.sin(plank * 12.9898) ** 2
    lambert = np.clip(sum(n * li for n, li in zip(normal, LIGHT, strict=True)), 0, None)
    light = np.where(labels == WINDOW, 1.0, (0.6 + 0.4 * lambert) * np.exp(-0.03 * t))
    rng = np.random.default_rng([seed, 0x5EED])
    rgb = np.empty((*labels.shape, 3), dtype=np.uint8)
    for c in range(3):
        base = np.full(labels.shape, scene.wall_colour[c])
        base = np.where(labels == FLOOR, FLOOR_RGB[c] * tone, base)
        base = np.where(labels == CEILING, 235.0, base)
        base = np.where(labels == WINDOW, WINDOW_RGB[c], base)
        for b, box in enumerate(scene.boxes):
            base = np.where(labels == BOX + b, box.colour[c], base)
        noise = rng.normal(0, 2.5, labels.shape)
        rgb[..., c] = np.clip(base * light + noise, 0, 255)
    return rgb


def write_nyu_mat(
    path: Path, images: list[np.ndarray], depths: list[np.ndarray], labels: list[np.ndarray]
) -> Path:
    """Write (480, 640, 3) uint8 images, (480, 640) depths and labels in the real v7.3 layout."""
    import h5py

    n = len(images)
    with h5py.File(path, "w", userblock_size=USERBLOCK) as f:
        specs = [
            ("images", (3, WIDTH, HEIGHT), "uint8", "uint8"),
            ("depths", (WIDTH, HEIGHT), "float32", "single"),
            ("labels", (WIDTH, HEIGHT), "uint16", "uint16"),
        ]
        for (name, one, dtype, matlab), arrays in zip(specs, (images, depths, labels), strict=True):
            ds = f.create_dataset(name, (n, *one), dtype=dtype, chunks=(1, *one))
            ds.attrs["MATLAB_class"] = np.bytes_(matlab)
            for i, a in enumerate(arrays):
                ds[i] = np.asarray(a, dtype=dtype).T  # (H, W[, C]) -> (C,) W, H
    with open(path, "r+b") as f:  # MATLAB's header in the userblock h5py left zeroed
        f.write(MATLAB_HEADER.ljust(USERBLOCK, b"\x00"))
    return path


def build_nyu_mat(out_dir: Path, seed: int = 0, n_images: int = N_IMAGES) -> Path:
    """Render n_images rooms and write out_dir/nyu_depth_v2_labeled.mat; returns its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    def render(i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return render_scene(make_scene(seed, i), seed=seed * 1000 + i)

    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:  # numpy drops the GIL
        rendered = list(pool.map(render, range(n_images)))
    images, depths, labels = (list(x) for x in zip(*rendered, strict=True))
    return write_nyu_mat(out_dir / FILE_NAME, images, depths, labels)


def ensure_nyu_mat(cache_dir: Path, seed: int = 0) -> Path:
    """The default synthetic file under cache_dir, built on first use (safe across processes)."""
    target = Path(cache_dir) / "synthetic" / f"nyu_depth_v2-seed{seed}-{VERSION}"
    return build_once(target, lambda folder: build_nyu_mat(folder, seed=seed)) / FILE_NAME


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m support.evaluations.nyu_distance.synthetic", description=__doc__
    )
    ap.add_argument("--out", required=True, type=Path, help="folder to write the .mat into")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-images", type=int, default=N_IMAGES)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    path = build_nyu_mat(args.out, args.seed, args.n_images)
    print(f"wrote {args.n_images} images to {path} in {time.perf_counter() - t0:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
