"""The marked image a model sees (a red cross at A, a blue one at B, drawn by the profile's
rule), its file name among the marked images, and a case's point pair from its params: shared
by the worker side (task.py) and the summary (the marked images written on the controller)."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from support.evaluations.nyu_distance.pairs import PointPair
from support.evaluations.nyu_distance.profiles import PROFILES, WRITEUP, NyuProfile
from support.images import encode_image
from support.settings import Compat

RED, BLUE = (255, 0, 0), (0, 0, 255)


def mark_pair(rgb: np.ndarray, pair: PointPair, rules: NyuProfile = WRITEUP) -> Image.Image:
    """The (480, 640, 3) RGB image with a red cross at A (point1) and a blue one at B (point2),
    drawn by the profile's rule."""
    image = Image.fromarray(rgb).convert("RGB")
    draw = ImageDraw.Draw(image)
    rules.cross(draw, pair.point1, RED, "A")
    rules.cross(draw, pair.point2, BLUE, "B")
    return image


def marked_jpeg(rgb: np.ndarray, pair: PointPair, compat: Compat = "writeup") -> bytes:
    """What the model sees under the `compat` profile: the marked image as JPEG bytes."""
    rules = PROFILES[compat]
    return encode_image(mark_pair(rgb, pair, rules), "JPEG", quality=rules.jpeg_quality)


def marked_name(image_idx: int, pair_idx: int) -> str:
    """img0000_pair0.jpg, as the source names its marked images."""
    return f"img{image_idx:04d}_pair{pair_idx}.jpg"


def pair_of(params: dict) -> PointPair:
    """The case's point pair from its params."""
    return PointPair(tuple(params["point1"]), tuple(params["point2"]), params["depth1"],
                     params["depth2"])  # fmt: skip
