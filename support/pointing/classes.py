"""CholecSeg8k's 13 classes: ids, names, mask colours, and decoding of the RGB colour mask.

Class ids come from the colour mask (`color_mask` column), (H, W, 3) uint8 RGB; colours not in the
table are ignored pixels (label -1). The pointing evaluation asks about ids 1..12 (not background).
"""

from __future__ import annotations

import re

import numpy as np

IGNORE = -1  # label of pixels whose colour is not in the table

# RGB colour in `color_mask` -> class id
COLOR_TO_CLASS: dict[tuple[int, int, int], int] = {
    (127, 127, 127): 0,
    (210, 140, 140): 1,
    (255, 114, 114): 2,
    (231, 70, 156): 3,
    (186, 183, 75): 4,
    (170, 255, 0): 5,
    (255, 85, 0): 6,
    (255, 0, 0): 7,
    (255, 255, 0): 8,
    (169, 255, 184): 9,
    (255, 160, 165): 10,
    (0, 50, 128): 11,
    (111, 74, 0): 12,
}
CLASS_TO_COLOR: dict[int, tuple[int, int, int]] = {v: k for k, v in COLOR_TO_CLASS.items()}

CLASS_NAMES: dict[int, str] = {
    0: "Background",
    1: "Abdominal Wall",
    2: "Liver",
    3: "Gastrointestinal Tract",
    4: "Fat",
    5: "Grasper",
    6: "Connective Tissue",
    7: "Blood",
    8: "Cystic Duct",
    9: "L-hook Electrocautery",
    10: "Gallbladder",
    11: "Hepatic Vein",
    12: "Liver Ligament",
}

ORGAN_IDS: tuple[int, ...] = tuple(range(1, 13))  # the 12 structures asked about, in source order


def slug(name: str) -> str:
    """`"L-hook Electrocautery"` -> `"l_hook_electrocautery"`: the organ part of case ids."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


ORGAN_SLUGS: dict[int, str] = {i: slug(CLASS_NAMES[i]) for i in ORGAN_IDS}

# 24-bit packed colour -> class id, for vectorised decoding
_PACKED = np.full(1 << 24, IGNORE, dtype=np.int8)
for (_r, _g, _b), _cid in COLOR_TO_CLASS.items():
    _PACKED[(_r << 16) | (_g << 8) | _b] = _cid


def color_mask_to_labels(color_mask: np.ndarray) -> np.ndarray:
    """(H, W, 3|4) uint8 RGB(A) colour mask -> (H, W) int8 class ids, IGNORE for unknown colours."""
    arr = np.asarray(color_mask)
    if arr.ndim != 3 or arr.shape[2] < 3:
        raise ValueError(f"colour mask must be (H, W, 3), got shape {arr.shape}")
    rgb = arr[..., :3].astype(np.uint32)
    packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    return _PACKED[packed]


def presence_vector(labels: np.ndarray, min_pixels: int = 1) -> np.ndarray:
    """(12,) uint8: 1 where organ id 1..12 covers at least `min_pixels` pixels of the label map."""
    counts = np.bincount(labels[labels > 0].ravel().astype(np.int64), minlength=13)
    return (counts[1:13] >= min_pixels).astype(np.uint8)
