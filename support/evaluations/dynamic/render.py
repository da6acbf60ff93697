"""A scene's point cloud drawn as the RGB picture a vision-language model sees: numpy + Pillow.

A pinhole camera with a fixed viewing direction (front, slightly above: CAMERA_TEXT says so for the
prompt), framed on the scene's bounding sphere; every point is a disc of POINT_RADIUS pixels in its
own colour, the nearest point winning each pixel (a z-buffer), on a white background. Headless, CPU
only. World frame as support.evaluations.dynamic.scenes: metres, Y up, +x right, +z towards the
viewer.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image

ELEVATION_DEG = 25.0  # the camera looks down at the scene by this angle
FOV_DEG = 40.0  # full vertical and horizontal field of view (square image)
POINT_RADIUS = 2  # pixels
MARGIN = 1.05  # the bounding sphere fills the view up to 1 / MARGIN
BACKGROUND = (255, 255, 255)
CAMERA_TEXT = (
    "The scene is viewed from the front and slightly above: +x (right) points to the right of the "
    "image, +y (up) points up, and +z (in front) points towards the viewer, so an object "
    '"in front of" another is nearer to the camera and lower in the image, and "behind" is '
    "farther away."
)


def _offsets(radius: int) -> np.ndarray:
    """(k, 2) integer (dx, dy) pixel offsets of a disc of `radius` pixels."""
    span = np.arange(-radius, radius + 1)
    dx, dy = np.meshgrid(span, span)
    keep = dx**2 + dy**2 <= radius**2
    return np.stack([dx[keep], dy[keep]], axis=1)


def camera_basis(elevation_deg: float = ELEVATION_DEG) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit vectors (right, up, forward) of the camera, world frame; forward looks at the scene."""
    e = math.radians(elevation_deg)
    right = np.array([1.0, 0.0, 0.0])
    forward = np.array([0.0, -math.sin(e), -math.cos(e)])
    up = np.array([0.0, math.cos(e), -math.sin(e)])
    return right, up, forward


def project(points: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pixel columns u, rows v (float, origin top-left) and depths (m) of (N, 3+) world points."""
    xyz = np.asarray(points, dtype=np.float64)[:, :3]
    centre = (xyz.min(axis=0) + xyz.max(axis=0)) / 2
    radius = max(float(np.linalg.norm(xyz - centre, axis=1).max()), 1e-6)
    half_fov = math.radians(FOV_DEG) / 2
    right, up, forward = camera_basis()
    eye = centre - forward * (radius * MARGIN / math.sin(half_fov))
    rel = xyz - eye
    depth = rel @ forward
    focal = (size / 2) / math.tan(half_fov)  # pixels
    u = size / 2 + focal * (rel @ right) / depth
    v = size / 2 - focal * (rel @ up) / depth
    return u, v, depth


def render(points: np.ndarray, size: int = 512) -> Image.Image:
    """An RGB size x size picture of (N, 6) points (xyz, rgb in [0, 1]); white when empty."""
    cloud = np.asarray(points)
    if cloud.ndim != 2 or (len(cloud) and cloud.shape[1] < 6):
        raise ValueError(f"points: expected an (N, 6) array of xyz and rgb, got {cloud.shape}")
    image = np.empty((size, size, 3), np.uint8)
    image[:] = BACKGROUND
    finite = np.isfinite(cloud[:, :6]).all(axis=1) if len(cloud) else np.zeros(0, bool)
    cloud = cloud[finite]
    if len(cloud) == 0:
        return Image.fromarray(image)
    u, v, depth = project(cloud, size)
    order = np.argsort(depth, kind="stable")  # nearest first
    offsets = _offsets(POINT_RADIUS)
    cols = np.rint(u[order])[:, None].astype(np.int64) + offsets[:, 0]
    rows = np.rint(v[order])[:, None].astype(np.int64) + offsets[:, 1]
    inside = (cols >= 0) & (cols < size) & (rows >= 0) & (rows < size)
    pixel = (rows * size + cols)[inside]  # point-major, so nearest points come first
    owner = np.broadcast_to(order[:, None], inside.shape)[inside]
    pixel, first = np.unique(pixel, return_index=True)  # first occurrence = the nearest point
    rgb = np.clip(cloud[owner[first], 3:6], 0.0, 1.0) * 255
    image.reshape(-1, 3)[pixel] = np.rint(rgb).astype(np.uint8)
    return Image.fromarray(image)
