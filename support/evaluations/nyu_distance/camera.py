"""The pinhole camera of NYU Depth V2: pixel + depth <-> 3D point, and the 3D distance between
two points (nyu_distance's ground truth)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Camera frame: x right, y down, z forward (optical axis), metres, origin at the optical centre.
# A pixel coordinate (u, v) = (column, row) image px, origin top-left, is used as is (no half-pixel
# shift), as the NYU Depth V2 toolbox and the source do. `depth` is Z depth (distance along the
# optical axis, metres), which is what the NYU `depths` maps hold, not the range along the ray.


@dataclass(frozen=True)
class Intrinsics:
    """Pinhole intrinsics: focal lengths fx, fy and principal point (cx, cy), all image px."""

    fx: float
    fy: float
    cx: float
    cy: float
    width: int  # image px
    height: int  # image px

    def __post_init__(self) -> None:
        """Reject what would divide by zero or poison every distance later: focal lengths must be
        finite and > 0, the principal point finite, the size positive whole pixels."""
        for name in ("fx", "fy", "cx", "cy"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise ValueError(f"intrinsics {name}={v!r}: expected a number")
            if not math.isfinite(v) or (name in ("fx", "fy") and v <= 0):
                raise ValueError(
                    f"intrinsics {name}={v!r}: expected a finite number"
                    + (" > 0" if name in ("fx", "fy") else "")
                )
        for name in ("width", "height"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                raise ValueError(f"intrinsics {name}={v!r}: expected a positive whole number")


# The Kinect RGB camera of NYU Depth V2 (the source's constants), 640x480 images
NYU_KINECT = Intrinsics(
    fx=518.857901, fy=519.469611, cx=325.582244, cy=253.736347, width=640, height=480
)


def back_project(u, v, depth, k: Intrinsics = NYU_KINECT) -> np.ndarray:
    """Pixel (u, v) image px with Z depth `depth` metres -> (..., 3) points (X, Y, Z) metres in the
    camera frame: X = (u - cx) Z / fx, Y = (v - cy) Z / fy. Broadcasts over numpy arrays."""
    u, v, z = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (u, v, depth)))
    return np.stack([(u - k.cx) * z / k.fx, (v - k.cy) * z / k.fy, z], axis=-1)


def project(point, k: Intrinsics = NYU_KINECT) -> tuple[np.ndarray, np.ndarray]:
    """(..., 3) camera-frame points metres (Z > 0) -> pixel coordinates (u, v) image px."""
    p = np.asarray(point, dtype=np.float64)
    x, y, z = p[..., 0], p[..., 1], p[..., 2]
    return k.fx * x / z + k.cx, k.fy * y / z + k.cy


def distance_3d(p, q) -> np.ndarray:
    """Euclidean distance between (..., 3) points, in their unit (metres here). Scaled by the
    largest component so tiny or huge differences neither underflow nor overflow."""
    d = np.abs(np.asarray(p, dtype=np.float64) - np.asarray(q, dtype=np.float64))
    s = d.max(axis=-1)
    safe = np.where(s > 0, s, 1.0)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(s > 0, s * np.sqrt(((d / safe[..., None]) ** 2).sum(axis=-1)), 0.0)
