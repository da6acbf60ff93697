"""Pinhole geometry (support.evaluations.nyu_distance.camera) and the NYU pair sampler, as
properties; the synthetic
scene's depths are geometrically consistent with the intrinsics they were rendered through."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from support.evaluations.nyu_distance.camera import (
    NYU_KINECT,
    Intrinsics,
    back_project,
    distance_3d,
    project,
)
from support.evaluations.nyu_distance.pairs import (
    MIN_DEPTH_DIFF,
    MIN_SEPARATION,
    PointPair,
    grid,
    pair_rng,
    sample_pairs,
    sample_pairs_from_depth,
)

K = NYU_KINECT
us_ = st.floats(0, K.width - 1, allow_nan=False)  # image px
vs_ = st.floats(0, K.height - 1, allow_nan=False)
depths = st.floats(0.05, 20.0, allow_nan=False)  # metres
coords = st.floats(-50, 50, allow_nan=False, allow_subnormal=False)  # metres
points = st.tuples(coords, coords, coords)
intrinsics = st.builds(
    Intrinsics,
    fx=st.floats(100, 2000),
    fy=st.floats(100, 2000),
    cx=st.floats(0, 1000),
    cy=st.floats(0, 1000),
    width=st.just(1000),
    height=st.just(1000),
)


def test_source_constants_and_formula() -> None:
    assert (K.fx, K.fy, K.cx, K.cy) == (518.857901, 519.469611, 325.582244, 253.736347)
    assert (K.width, K.height) == (640, 480)
    u, v, z = 400, 300, 2.5
    expected = ((u - K.cx) * z / K.fx, (v - K.cy) * z / K.fy, z)  # the source's pixel_to_3d
    assert back_project(u, v, z) == pytest.approx(expected, abs=1e-12)
    assert back_project(K.cx, K.cy, 3.0) == pytest.approx((0, 0, 3.0))  # principal point: axis


@given(us_, vs_, depths, intrinsics)
def test_back_projection_then_projection_returns_the_pixel(u, v, z, k) -> None:
    p = back_project(u, v, z, k)
    assert p[2] == z
    pu, pv = project(p, k)
    assert abs(pu - u) <= 1e-9 * max(1.0, abs(u)) + 1e-9
    assert abs(pv - v) <= 1e-9 * max(1.0, abs(v)) + 1e-9


def test_vectorised_over_arrays() -> None:
    u = np.arange(0, 640, 40.0)
    v = np.full_like(u, 100.0)
    z = np.linspace(0.5, 8, len(u))
    pts = back_project(u, v, z)
    assert pts.shape == (len(u), 3)
    assert np.allclose(np.stack(project(pts), -1), np.stack([u, v], -1))
    assert distance_3d(pts, pts[::-1]).shape == (len(u),)
    assert np.allclose(distance_3d(pts, pts[::-1]), np.linalg.norm(pts - pts[::-1], axis=-1))


@given(points, points)
def test_distance_is_symmetric_non_negative_and_zero_only_for_the_same_point(p, q) -> None:
    d = float(distance_3d(p, q))
    assert d == float(distance_3d(q, p))
    assert d >= 0
    assert (d == 0) == (p == q)
    assert float(distance_3d(p, p)) == 0


@given(points, points, points)
def test_triangle_inequality(p, q, r) -> None:
    pq, qr, pr = (float(distance_3d(a, b)) for a, b in ((p, q), (q, r), (p, r)))
    assert pr <= pq + qr + 1e-9 * (1 + pq + qr)


@given(us_, vs_, depths, us_, vs_, depths, st.floats(0.01, 100))
def test_distance_scales_linearly_with_depth_scale(u1, v1, z1, u2, v2, z2, s) -> None:
    d = float(distance_3d(back_project(u1, v1, z1), back_project(u2, v2, z2)))
    ds = float(distance_3d(back_project(u1, v1, s * z1), back_project(u2, v2, s * z2)))
    assert ds == pytest.approx(s * d, rel=1e-9, abs=1e-12)


# ---- pair sampling ---------------------------------------------------------------------------
US, VS = grid()
depth_values = st.one_of(
    st.floats(0.3, 10.0),
    st.sampled_from([0.0, -1.0, np.nan, np.inf, -np.inf]),
)
grid_depths = arrays(np.float64, (len(VS), len(US)), elements=depth_values)


def _check(pair: PointPair, depth: np.ndarray) -> None:
    (u1, v1), (u2, v2) = pair.point1, pair.point2
    assert np.hypot(u1 - u2, v1 - v2) > MIN_SEPARATION
    assert abs(pair.depth1 - pair.depth2) > MIN_DEPTH_DIFF
    for (u, v), z in ((pair.point1, pair.depth1), (pair.point2, pair.depth2)):
        assert u in US and v in VS
        assert np.isfinite(z) and z > 0
        assert z == depth[list(VS).index(v), list(US).index(u)]  # the depth at that pixel
    assert pair.distance() > 0


@settings(max_examples=60, deadline=None)
@given(grid_depths, st.integers(1, 8), st.integers(0, 2**32 - 1), st.integers(0, 1448))
def test_sampled_pairs_always_satisfy_the_constraints(depth, k, seed, image) -> None:
    pairs = sample_pairs(depth, US, VS, k, pair_rng(seed, image))
    assert len(pairs) <= k
    for pair in pairs:
        _check(pair, depth)
    keys = {frozenset((p.point1, p.point2)) for p in pairs}
    assert len(keys) == len(pairs)  # distinct pairs
    again = sample_pairs(depth, US, VS, k, pair_rng(seed, image))
    assert again == pairs  # same seed, same pairs


def test_enough_valid_pairs_give_exactly_k_and_seeds_differ() -> None:
    rng = np.random.default_rng(0)
    depth = rng.uniform(0.5, 6.0, (480, 640))
    a = sample_pairs_from_depth(depth, 5, seed=0, image_idx=3)
    assert len(a) == 5
    assert a == sample_pairs_from_depth(depth, 5, seed=0, image_idx=3)
    assert a != sample_pairs_from_depth(depth, 5, seed=1, image_idx=3)
    assert a != sample_pairs_from_depth(depth, 5, seed=0, image_idx=4)


def test_no_valid_pairs_gives_none() -> None:
    flat = np.full((len(VS), len(US)), 2.0)  # depth differences all 0
    assert sample_pairs(flat, US, VS, 3, pair_rng(0, 0)) == []
    holes = np.full((len(VS), len(US)), np.nan)
    holes[0, 0], holes[-1, -1] = 1.0, 4.0  # one valid pair only
    pairs = sample_pairs(holes, US, VS, 3, pair_rng(0, 0))
    assert [(p.point1, p.point2) for p in pairs] == [((US[0], VS[0]), (US[-1], VS[-1]))]


# ---- the synthetic scenes are consistent with the intrinsics ---------------------------------
def test_synthetic_depths_back_project_onto_the_scene_surfaces() -> None:
    from support.evaluations.nyu_distance.synthetic import (
        BOX,
        CEILING,
        FLOOR,
        WALL,
        WINDOW,
        make_scene,
        render_scene,
        rot_y,
    )

    seen = []
    for index in (0, 1):
        scene = make_scene(0, index)
        rgb, depth, labels = render_scene(scene)
        assert rgb.shape == (480, 640, 3) and depth.shape == labels.shape == (480, 640)
        v, u = np.mgrid[0:480, 0:640]
        world = scene.to_world(back_project(u, v, depth))  # world m, y down, floor y = 0
        w, d, h = scene.size
        tol = 2e-5 * float(depth.max())  # float32 depths
        floor, ceiling = labels == FLOOR, labels == CEILING
        assert floor.sum() > 1000 and (labels == WALL).sum() > 1000
        assert np.abs(world[floor][:, 1]).max() < tol  # on the floor plane
        if ceiling.any():  # image 1 looks up enough to see it
            assert np.abs(world[ceiling][:, 1] + h).max() < tol
        walls = world[labels == WALL]
        to_wall = np.min(np.abs(np.stack([walls[:, 0], walls[:, 0] - w, walls[:, 2] - d,
                                          walls[:, 2]], -1)), axis=-1)  # fmt: skip
        assert to_wall.max() < tol
        inside = (world[..., 0] > -tol) & (world[..., 0] < w + tol)
        inside &= (world[..., 2] > -tol) & (world[..., 2] < d + tol)
        assert inside[depth > 0].all()
        for b, box in enumerate(scene.boxes):
            pts = world[labels == BOX + b]
            if len(pts) == 0:
                continue
            local = np.abs((pts - np.asarray(box.centre)) @ rot_y(box.yaw))  # box frame
            excess = local - np.asarray(box.half)  # <= 0 inside, one face at 0
            assert excess.max() < tol and np.abs(excess.max(axis=-1)).max() < tol
        assert (depth[labels == WINDOW] == 0).all()
        assert (depth[labels != WINDOW] > 0).all()
        seen.append((ceiling.any(), (labels == WINDOW).any(), len(scene.boxes)))
    assert seen[1][:2] == (True, True)  # image 1: ceiling and a window (odd images have one)
