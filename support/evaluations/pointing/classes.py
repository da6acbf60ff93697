"""CholecSeg8k's 13 classes: ids, names, mask encodings, and decoding of the two class masks.

Two masks name each pixel's class (both (H, W) like the frame, 854x480 for the real data):

- the colour mask (`frame_K_endo_color_mask.png`, column `color_mask`): RGB(A), one colour per
  class (COLOR_TO_CLASS); colours not in the table, and pixels with alpha 0, are ignored (-1).
  The pointing evaluation reads its labels from this mask, as the original does
  (fallcat/llm_cholec_organ src/endopoint/datasets/cholecseg8k.py `_color_mask_to_labels`).
- the watershed mask (`frame_K_endo_watershed_mask.png`, column `watershed_mask`): grey R=G=B
  (sometimes with a 4th, all-255 channel) holding WATERSHED_TO_CLASS ids; 255 marks the white
  frame around the field of view and some region boundaries, and is ignored like any other
  value outside the table.

The pointing evaluation asks about ids 1..12 (not background).
"""

from __future__ import annotations

import re

import numpy as np

IGNORE = -1  # label of pixels whose colour / grey value is not in the table
WATERSHED_BOUNDARY = 255  # watershed grey value of region boundaries and the frame border

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

# grey value in `watershed_mask` (R = G = B) -> class id (the dataset card's table; e.g. torch_em
# cholecseg8k.py LABEL_MAPS and mhjd/cholecseg8k-deeplabv3 src/masks.py use the same ids)
WATERSHED_TO_CLASS: dict[int, int] = {
    50: 0, 11: 1, 21: 2, 13: 3, 12: 4, 31: 5, 23: 6, 24: 7, 25: 8, 32: 9, 22: 10, 33: 11, 5: 12,
}  # fmt: skip
CLASS_TO_WATERSHED: dict[int, int] = {v: k for k, v in WATERSHED_TO_CLASS.items()}

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


_WATERSHED_LUT = np.full(256, IGNORE, dtype=np.int8)
for _grey, _cid in WATERSHED_TO_CLASS.items():
    _WATERSHED_LUT[_grey] = _cid


def color_mask_to_labels(color_mask: np.ndarray) -> np.ndarray:
    """(H, W, 3|4) uint8 RGB(A) colour mask -> (H, W) int8 class ids; IGNORE for unknown colours
    and for pixels whose alpha is 0."""
    arr = np.asarray(color_mask)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4):
        raise ValueError(f"colour mask must be (H, W, 3) or (H, W, 4), got shape {arr.shape}")
    rgb = arr[..., :3].astype(np.uint32)
    packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    labels = _PACKED[packed]
    if arr.shape[2] == 4:
        labels = np.where(arr[..., 3] == 0, np.int8(IGNORE), labels)
    return labels


def watershed_mask_to_labels(watershed_mask: np.ndarray) -> np.ndarray:
    """(H, W), (H, W, 3) or (H, W, 4) uint8 watershed mask -> (H, W) int8 class ids; IGNORE for
    WATERSHED_BOUNDARY (255) and any other grey value outside the table. The 4th channel, where
    present, is ignored. ValueError if R, G and B differ (not a watershed mask)."""
    arr = np.asarray(watershed_mask)
    if arr.dtype != np.uint8:
        raise ValueError(f"watershed mask must be uint8, got {arr.dtype}")
    if arr.ndim == 3 and arr.shape[2] in (3, 4):
        grey = arr[..., 0]
        if not (np.array_equal(grey, arr[..., 1]) and np.array_equal(grey, arr[..., 2])):
            raise ValueError("watershed mask has R, G, B channels that differ (a colour mask?)")
    elif arr.ndim == 2:
        grey = arr
    else:
        raise ValueError(f"watershed mask must be (H, W) or (H, W, 3|4), got shape {arr.shape}")
    return _WATERSHED_LUT[grey]


def presence_vector(labels: np.ndarray, min_pixels: int = 1) -> np.ndarray:
    """(12,) uint8: 1 where organ id 1..12 covers at least `min_pixels` pixels of the label map."""
    counts = np.bincount(labels[labels > 0].ravel().astype(np.int64), minlength=13)
    return (counts[1:13] >= min_pixels).astype(np.uint8)
