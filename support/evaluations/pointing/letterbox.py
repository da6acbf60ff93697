"""Letterboxing an image onto a fixed canvas, and mask helpers (pointing's canvases and targets).

Pixel convention (image and canvas alike): x grows right, y grows down, origin at the top-left
corner of the top-left pixel. Pixel (col c, row r) covers [c, c+1) x [r, r+1) in continuous
coordinates and its centre is (c + 0.5, r + 0.5). Masks are (H, W) arrays indexed mask[row, col].
A model that answers an integer canvas pixel (col, row) points at its centre (col + 0.5, row + 0.5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PIL import Image
from scipy import ndimage


@dataclass(frozen=True)
class Letterbox:
    """Maps image pixels <-> a fixed canvas: the image is scaled to fit (aspect kept) and centred;
    the rest is padding.

    The mapping is exactly the one `letterbox` renders: the image is resized to
    (resized_w, resized_h) = round(src * scale) and pasted at the integer offsets (pad_x, pad_y),
    so scale_x / scale_y (the actual resized/src ratios) may differ from `scale` by rounding.
    """

    src_w: int  # image px
    src_h: int  # image px
    canvas_w: int = 768  # canvas px
    canvas_h: int = 768  # canvas px

    def __post_init__(self) -> None:
        if min(self.src_w, self.src_h, self.canvas_w, self.canvas_h) < 1:
            raise ValueError(f"sizes must be >= 1, got {self}")

    @property
    def scale(self) -> float:
        """Nominal canvas px per image px: the largest scale at which the image fits."""
        return min(self.canvas_w / self.src_w, self.canvas_h / self.src_h)

    @property
    def resized_w(self) -> int:
        """Width of the image on the canvas, canvas px."""
        return max(1, min(self.canvas_w, round(self.src_w * self.scale)))

    @property
    def resized_h(self) -> int:
        """Height of the image on the canvas, canvas px."""
        return max(1, min(self.canvas_h, round(self.src_h * self.scale)))

    @property
    def scale_x(self) -> float:
        """Actual horizontal canvas px per image px."""
        return self.resized_w / self.src_w

    @property
    def scale_y(self) -> float:
        """Actual vertical canvas px per image px."""
        return self.resized_h / self.src_h

    @property
    def pad_x(self) -> int:
        """Canvas px of padding left of the image (integer: where the image is pasted)."""
        return (self.canvas_w - self.resized_w) // 2

    @property
    def pad_y(self) -> int:
        """Canvas px of padding above the image (integer: where the image is pasted)."""
        return (self.canvas_h - self.resized_h) // 2

    def to_canvas(self, x: float, y: float) -> tuple[float, float]:
        """Image point (x, y) image px -> canvas point (x, y) canvas px (both origin top-left)."""
        return self.pad_x + x * self.scale_x, self.pad_y + y * self.scale_y

    def to_image(self, x: float, y: float) -> tuple[float, float]:
        """Canvas point (x, y) canvas px -> image point (x, y) image px; may fall outside."""
        return (x - self.pad_x) / self.scale_x, (y - self.pad_y) / self.scale_y

    def to_image_pixel(self, x: float, y: float) -> tuple[int, int] | None:
        """Canvas point (x, y) canvas px -> the image pixel (col, row) containing it, or None when
        the point lies in the padding, outside the canvas, or is not finite.

        The content box [pad, pad + resized) in canvas px decides inside/outside, so the answer
        agrees with the rendered canvas even where float rounding would land on an edge.
        """
        if not (math.isfinite(x) and math.isfinite(y)):
            return None
        if not (self.pad_x <= x < self.pad_x + self.resized_w):
            return None
        if not (self.pad_y <= y < self.pad_y + self.resized_h):
            return None
        ix, iy = self.to_image(x, y)
        col = min(self.src_w - 1, max(0, math.floor(ix)))
        row = min(self.src_h - 1, max(0, math.floor(iy)))
        return col, row


def letterbox(
    image: Image.Image,
    canvas: tuple[int, int] = (768, 768),
    fill: int | tuple[int, ...] = (0, 0, 0),
    *,
    resample: Image.Resampling = Image.Resampling.BICUBIC,
) -> tuple[Image.Image, Letterbox]:
    """Render `image` on a (canvas_w, canvas_h) canvas of colour `fill`, scaled to fit and centred.

    Returns the canvas image (same mode as the input; palette and other modes become RGB) and the
    Letterbox that maps between the two. Use `resample=Image.Resampling.NEAREST` for label masks.
    """
    if image.mode not in ("RGB", "RGBA", "L", "I", "F"):
        image = image.convert("RGB")
    box = Letterbox(image.width, image.height, canvas[0], canvas[1])
    if image.mode in ("L", "I", "F") and isinstance(fill, tuple):
        fill = fill[0]  # single-band canvas: first component of the fill colour
    elif image.mode == "RGBA" and isinstance(fill, tuple) and len(fill) == 3:
        fill = (*fill, 255)  # opaque padding
    out = Image.new(image.mode, (box.canvas_w, box.canvas_h), fill)
    size = (box.resized_w, box.resized_h)
    content = image if image.size == size else image.resize(size, resample=resample)
    out.paste(content, (box.pad_x, box.pad_y))
    return out, box


def interior_point(mask: np.ndarray) -> tuple[int, int] | None:
    """(x, y) = (col, row) image px of the mask's most interior pixel, or None if the mask is empty.

    Most interior = largest Euclidean distance to a non-mask pixel, the image border counting as
    non-mask; ties go to the first pixel in row-major order. The pixel's centre is (x+0.5, y+0.5).
    """
    m = np.asarray(mask, dtype=bool)
    if m.ndim != 2 or not m.any():
        return None
    # Only the mask's bounding box matters: everything outside it is non-mask, so a distance
    # transform of the box with a 1-px non-mask ring gives the same distances (and the same
    # row-major argmax) as one of the whole image, at a fraction of the cost for small structures.
    rows, cols = np.flatnonzero(m.any(axis=1)), np.flatnonzero(m.any(axis=0))
    r0, c0 = int(rows[0]), int(cols[0])
    box = m[r0 : int(rows[-1]) + 1, c0 : int(cols[-1]) + 1]
    dist = ndimage.distance_transform_edt(np.pad(box, 1))[1:-1, 1:-1]
    row, col = np.unravel_index(int(np.argmax(dist)), dist.shape)
    return c0 + int(col), r0 + int(row)


def mask_outline(mask: np.ndarray) -> np.ndarray:
    """(H, W) bool boundary pixels of `mask`: mask pixels with a 4-neighbour outside the mask (the
    image border counts as outside). For drawing outlines."""
    m = np.asarray(mask, dtype=bool)
    return m & ~ndimage.binary_erosion(m, border_value=0)


def canvas_values(values: np.ndarray, box: Letterbox, fill: int | float | bool = 0) -> np.ndarray:
    """(canvas_h, canvas_w) array of `values` (src_h, src_w) as the canvas shows them: each
    canvas pixel takes the value of the image pixel its centre maps to (Letterbox.to_image_pixel);
    padding gets `fill`. Same dtype as `values` (e.g. an int8 label map, one gather per frame)."""
    v = np.asarray(values)
    if v.shape != (box.src_h, box.src_w):
        raise ValueError(f"array shape {v.shape} != letterbox source {(box.src_h, box.src_w)}")
    out = np.full((box.canvas_h, box.canvas_w), fill, dtype=v.dtype)
    xs = np.arange(box.pad_x, box.pad_x + box.resized_w)  # canvas columns of the content box
    ys = np.arange(box.pad_y, box.pad_y + box.resized_h)  # canvas rows of the content box
    cols = np.clip(np.floor((xs + 0.5 - box.pad_x) / box.scale_x).astype(int), 0, box.src_w - 1)
    rows = np.clip(np.floor((ys + 0.5 - box.pad_y) / box.scale_y).astype(int), 0, box.src_h - 1)
    out[box.pad_y : box.pad_y + box.resized_h, box.pad_x : box.pad_x + box.resized_w] = v[
        np.ix_(rows, cols)
    ]
    return out
