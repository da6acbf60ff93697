"""Point pairs to ask about, sampled as the source does: grid candidates across the image, valid
depths only (finite, > 0), pixel separation > 50 px and depth difference > 0.2 m (so the two points
likely lie on different objects), `k` pairs per image, seeded and reproducible.

All valid candidate pairs are enumerated and `k` of them drawn without replacement, so an image
yields exactly min(k, number of valid pairs) distinct pairs, and the same (seed, image) always gives
the same pairs. Only the depths at the grid are needed
(support.evaluations.nyu_distance.mat.NyuMat.depth_at reads just those from the 2.8 GB file).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from support.contract.evaluation import linspace_subset
from support.evaluations.nyu_distance.camera import (
    NYU_KINECT,
    Intrinsics,
    back_project,
    distance_3d,
)
from support.evaluations.nyu_distance.mat import HEIGHT, WIDTH

GRID_STEP = 40  # px between grid candidates, both axes
GRID_MARGIN = 40  # px kept clear of the image border (NYU frames have a blank rim; crosses fit)
MIN_SEPARATION = 50.0  # px, pixel distance between A and B must exceed this
MIN_DEPTH_DIFF = 0.2  # m, |Z_A - Z_B| must exceed this


@dataclass(frozen=True)
class PointPair:
    """Two marked pixels (u, v) = (column, row) image px and their Z depths in metres."""

    point1: tuple[int, int]  # A, red cross
    point2: tuple[int, int]  # B, blue cross
    depth1: float  # m
    depth2: float  # m

    def distance(self, k: Intrinsics = NYU_KINECT) -> float:
        """The ground truth: 3D Euclidean distance in metres between the back-projected points."""
        p = back_project(*self.point1, self.depth1, k)
        q = back_project(*self.point2, self.depth2, k)
        return float(distance_3d(p, q))


def grid(
    width: int = NYU_KINECT.width,
    height: int = NYU_KINECT.height,
    step: int = GRID_STEP,
    margin: int = GRID_MARGIN,
) -> tuple[np.ndarray, np.ndarray]:
    """Candidate columns `us` and rows `vs` (image px): every `step` px, `margin` px from the
    border. The candidates are their cross product."""
    us = np.arange(margin, width - margin + 1, step)
    vs = np.arange(margin, height - margin + 1, step)
    return us, vs


def pair_rng(seed: int, image_idx: int) -> np.random.Generator:
    """The stream that samples the pairs of one image: the same in every process."""
    return np.random.default_rng([int(seed), int(image_idx), 0xD157])


def sample_pairs(
    grid_depth: np.ndarray,
    us: Sequence[int],
    vs: Sequence[int],
    k: int,
    rng: np.random.Generator,
    min_separation: float = MIN_SEPARATION,
    min_depth_diff: float = MIN_DEPTH_DIFF,
) -> list[PointPair]:
    """Up to `k` distinct pairs of grid pixels that satisfy the constraints, in draw order.

    grid_depth: (len(vs), len(us)) Z depths in metres at pixels (us[j], vs[i]); invalid depths
    (NaN, inf, <= 0) are never used.
    """
    depth = np.asarray(grid_depth, dtype=np.float64)
    if depth.shape != (len(vs), len(us)):
        raise ValueError(f"grid_depth shape {depth.shape} != (len(vs), len(us))")
    vv, uu = np.meshgrid(np.asarray(vs, dtype=np.float64), np.asarray(us, dtype=np.float64))
    uu, vv, dd = uu.T.ravel(), vv.T.ravel(), depth.ravel()  # row-major over (v, u)
    valid = np.isfinite(dd) & (dd > 0)
    uu, vv, dd = uu[valid], vv[valid], dd[valid]
    i, j = np.triu_indices(len(dd), k=1)
    separation = np.hypot(uu[i] - uu[j], vv[i] - vv[j])  # px
    ok = (separation > min_separation) & (np.abs(dd[i] - dd[j]) > min_depth_diff)
    i, j = i[ok], j[ok]
    if k <= 0 or len(i) == 0:
        return []
    chosen = rng.choice(len(i), size=min(k, len(i)), replace=False)
    return [
        PointPair(
            (int(uu[i[c]]), int(vv[i[c]])),
            (int(uu[j[c]]), int(vv[j[c]])),
            float(dd[i[c]]),
            float(dd[j[c]]),
        )
        for c in chosen.tolist()
    ]


def sample_pairs_from_depth(
    depth: np.ndarray, k: int, seed: int, image_idx: int = 0
) -> list[PointPair]:
    """sample_pairs on the grid of a full (H, W) depth map in metres (tests, the extractor)."""
    h, w = depth.shape
    us, vs = grid(w, h)
    return sample_pairs(depth[np.ix_(vs, us)], us, vs, k, pair_rng(seed, image_idx))


# ---- `--compat source`: the original script's sampler (IronsiteHackathon nyu_utils.py) -----------
SOURCE_GRID = 8  # cells per axis; candidates are the cell centres
SOURCE_SEED = 42  # the original re-seeds numpy's global generator with this for every image
SOURCE_ATTEMPTS_PER_PAIR = 10  # draws allowed per wanted pair before giving up


def source_cell_centres(width: int, height: int, cells: int = SOURCE_GRID) -> tuple[list, list]:
    """Candidate columns `us` and rows `vs` (image px) of the original: the centre of each of
    `cells` x `cells` cells (integer division), clipped into the image."""
    cw, ch = width // cells, height // cells
    us = [min(j * cw + cw // 2, width - 1) for j in range(cells)]
    vs = [min(i * ch + ch // 2, height - 1) for i in range(cells)]
    return us, vs


def sample_pairs_source(
    grid_depth: np.ndarray,
    us: Sequence[int],
    vs: Sequence[int],
    k: int,
    min_separation: float = MIN_SEPARATION,
    min_depth_diff: float = MIN_DEPTH_DIFF,
) -> list[PointPair]:
    """The original's pairs for one image, in draw order (up to `k`; duplicates possible).

    Candidates: the valid depths (finite, > 0) at the grid in row-major order (row v outer,
    column u inner). A fresh legacy numpy stream seeded 42 (the same numbers as the original's
    `np.random.seed(42)` before its draws) picks two distinct candidates per draw, `10 * k`
    draws at most; a draw is kept unless the points are less than 50 px apart or their depths
    differ by less than 0.2 m (so exactly 50 px and exactly 0.2 m are kept). A is the first
    drawn point. grid_depth: (len(vs), len(us)) Z metres.
    """
    depth = np.asarray(grid_depth)  # kept in its own dtype (float32 in the .mat), as the original
    if depth.shape != (len(vs), len(us)):
        raise ValueError(f"grid_depth shape {depth.shape} != (len(vs), len(us))")
    points = [
        ((int(u), int(v)), depth[i, j])
        for i, v in enumerate(vs)
        for j, u in enumerate(us)
        if np.isfinite(depth[i, j]) and depth[i, j] > 0
    ]
    rng = np.random.RandomState(SOURCE_SEED)
    pairs: list[PointPair] = []
    for _ in range(k * SOURCE_ATTEMPTS_PER_PAIR):
        if len(pairs) >= k or len(points) < 2:
            break
        a, b = rng.choice(len(points), size=2, replace=False)
        (pa, da), (pb, db) = points[a], points[b]
        if math.sqrt((pa[0] - pb[0]) ** 2 + (pa[1] - pb[1]) ** 2) < min_separation:  # px
            continue
        if abs(da - db) < min_depth_diff:  # m, in the map's dtype
            continue
        pairs.append(PointPair(pa, pb, float(da), float(db)))
    return pairs


DepthAt = Callable[[int, Sequence[int], Sequence[int]], np.ndarray]  # (image, us, vs) -> metres
Sampled = tuple[dict[int, np.ndarray], dict[int, list[PointPair]]]  # image -> grid depths, pairs


def sample_images(
    depth_at: DepthAt, n_images: int, k: int, samples: int | None, seed: int, source_images: int
) -> Sampled:
    """The write-up's: `samples` images spread evenly over the n (all when None), k pairs each by
    `sample_pairs` at `grid()`, seeded by `seed` and the image (`source_images` is not read)."""
    us, vs = grid()
    images = linspace_subset(list(range(n_images)), samples)
    grids = {i: depth_at(i, us, vs) for i in images}
    return grids, {i: sample_pairs(grids[i], us, vs, k, pair_rng(seed, i)) for i in images}


def sample_images_source(
    depth_at: DepthAt, n_images: int, k: int, samples: int | None, seed: int, source_images: int
) -> Sampled:
    """The original's: the first `source_images` images (its --num_images), k pairs each by
    `sample_pairs_source` at its cell centres (`samples` and `seed` are not read)."""
    us, vs = source_cell_centres(WIDTH, HEIGHT)
    images = list(range(min(source_images, n_images)))
    grids = {i: depth_at(i, us, vs) for i in images}
    return grids, {i: sample_pairs_source(grids[i], us, vs, k) for i in images}
