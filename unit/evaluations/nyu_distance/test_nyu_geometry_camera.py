"""The pinhole camera's edges (support.evaluations.nyu_distance.camera): the intrinsics' checks and
their messages (a folder's bad intrinsics.npy is reported with them), float64 arithmetic on the
float32 depths the NYU file holds, other number types, and distances across 400 decades."""

from __future__ import annotations

import math
import re
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from support.evaluations.nyu_distance.camera import (
    NYU_KINECT,
    Intrinsics,
    back_project,
    distance_3d,
    project,
)

K = NYU_KINECT
GOOD = {"fx": 500.0, "fy": 500.0, "cx": 320.0, "cy": 240.0, "width": 640, "height": 480}


def test_kinect_constants_are_the_nyu_toolbox_rgb_camera() -> None:
    # NYU Depth V2 toolbox, camera_params.m (RGB intrinsics): fx_rgb = 5.1885790117450188e+02,
    # fy_rgb = 5.1946961112127485e+02, cx_rgb = 3.2558244941119034e+02,
    # cy_rgb = 2.5373616633400465e+02. The source rounds fx, fy to 6 decimals and its cx, cy
    # differ from the toolbox by 2e-4 px: far below a pixel, so every distance is unchanged.
    assert K.fx == pytest.approx(518.85790117450188, abs=1e-6)
    assert K.fy == pytest.approx(519.46961112127485, abs=1e-6)
    assert K.cx == pytest.approx(325.58244941119034, abs=1e-3)
    assert K.cy == pytest.approx(253.73616633400465, abs=1e-3)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("fx", "500", "intrinsics fx='500': expected a number"),
        ("fy", True, "intrinsics fy=True: expected a number"),
        ("cx", None, "intrinsics cx=None: expected a number"),
        ("fx", 0.0, "intrinsics fx=0.0: expected a finite number > 0"),
        ("fy", 0, "intrinsics fy=0: expected a finite number > 0"),
        ("fx", -518.9, "intrinsics fx=-518.9: expected a finite number > 0"),
        ("fy", math.inf, "intrinsics fy=inf: expected a finite number > 0"),
        ("cx", math.nan, "intrinsics cx=nan: expected a finite number"),
        ("cy", -math.inf, "intrinsics cy=-inf: expected a finite number"),
        ("width", 0, "intrinsics width=0: expected a positive whole number"),
        ("height", -480, "intrinsics height=-480: expected a positive whole number"),
        ("width", 640.0, "intrinsics width=640.0: expected a positive whole number"),
        ("height", True, "intrinsics height=True: expected a positive whole number"),
    ],
)
def test_bad_intrinsics_are_rejected_naming_the_field(field: str, value, message: str) -> None:
    # the whole message: folder.py reports it as "unreadable intrinsics (<message>)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        Intrinsics(**{**GOOD, field: value})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("fx", 0.5),  # a tiny focal length is odd but valid (> 0)
        ("fy", 1),
        ("fx", np.float32(518.5)),
        ("cx", 0.0),  # the principal point may sit anywhere, even off the image
        ("cy", -12.5),
        ("cx", np.int64(320)),
        ("width", 1),
        ("height", np.int32(480)),
    ],
)
def test_valid_intrinsics_are_accepted(field: str, value) -> None:
    k = Intrinsics(**{**GOOD, field: value})
    assert getattr(k, field) == value


def test_back_projection_by_hand() -> None:
    # X = (u - cx) Z / fx: one focal length right of the principal point at Z = 2 m is X = 2 m
    assert back_project(K.cx + K.fx, K.cy, 2.0) == pytest.approx([2.0, 0.0, 2.0], abs=1e-12)
    # Y = (v - cy) Z / fy: half a focal length below it at Z = 4 m is Y = 2 m (y points down)
    assert back_project(K.cx, K.cy + K.fy / 2, 4.0) == pytest.approx([0.0, 2.0, 4.0], abs=1e-12)
    # the top-left pixel (0, 0) at 1 m: X = -cx/fx, Y = -cy/fy
    assert back_project(0, 0, 1.0) == pytest.approx([-K.cx / K.fx, -K.cy / K.fy, 1.0])
    # and project inverts it: (2, 0, 2) m lands fx px right of cx
    u, v = project([2.0, 0.0, 2.0])
    assert (float(u), float(v)) == pytest.approx((K.cx + K.fx, K.cy), abs=1e-9)


def test_float32_depths_are_computed_in_float64() -> None:
    # the NYU .mat holds float32 depths and the pair sampler passes them through: the truth must
    # be the float64 formula on those exact values, not float32 arithmetic (~1e-7 relative)
    u, v, z = np.float32(401.3), np.float32(37.9), np.float32(2.5371)
    fu, fv, fz = float(u), float(v), float(z)
    got = back_project(u, v, z)
    assert got.dtype == np.float64
    expected = [(fu - K.cx) * fz / K.fx, (fv - K.cy) * fz / K.fy, fz]
    assert got == pytest.approx(expected, rel=1e-14, abs=0)
    point = np.asarray(expected, dtype=np.float32)
    pu, pv = project(point)
    x, y, zz = (float(c) for c in point)
    assert float(pu) == pytest.approx(K.fx * x / zz + K.cx, rel=1e-14, abs=0)
    assert float(pv) == pytest.approx(K.fy * y / zz + K.cy, rel=1e-14, abs=0)


def test_exact_number_types_are_accepted() -> None:
    # Decimal / Fraction coordinates (e.g. json.loads(..., parse_float=Decimal)) are numbers
    p = [Decimal("3.0"), Decimal("4.0"), Decimal("0")]
    q = [Fraction(0), Fraction(0), Fraction(0)]
    assert float(distance_3d(p, q)) == 5.0  # 3-4-5 triangle
    assert float(distance_3d(q, p)) == 5.0
    got = back_project(Decimal(str(K.cx)), Decimal(str(K.cy)), Decimal("1.5"))
    assert got == pytest.approx([0.0, 0.0, 1.5], abs=1e-12)
    pu, pv = project([Decimal("0"), Decimal("0"), Decimal("2")])
    assert (float(pu), float(pv)) == pytest.approx((K.cx, K.cy))


def test_distances_across_scales_in_one_batch() -> None:
    # each pair is scaled by its own largest component: a tiny and a huge difference in the same
    # batch are both exact (math.hypot is the reference); a shared scale would underflow the tiny
    p = np.array([[3e-200, 4e-200, 0.0], [3e200, 4e200, 0.0], [1.0, 2.0, 2.0], [7.0, 7.0, 7.0]])
    q = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [7.0, 7.0, 7.0]])
    got = distance_3d(p, q)
    expected = [math.hypot(*(a - b)) for a, b in zip(p, q, strict=True)]
    assert expected == pytest.approx([5e-200, 5e200, 3.0, 0.0], rel=1e-15)
    assert got.tolist() == pytest.approx(expected, rel=1e-15, abs=0)


def test_a_distance_beyond_the_float_range_is_inf_without_a_warning() -> None:
    # each component difference is finite (1.5e308 < 1.8e308) but the norm 2.1e308 is not
    p, q = [1.5e308, 1.5e308, 0.0], [0.0, 0.0, 0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(distance_3d(p, q)) == math.inf
        assert math.isinf(math.hypot(*p))  # the reference agrees
