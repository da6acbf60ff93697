"""Hand-computed letterbox numbers: canvas <-> image px, the content box's edges and the canvas
masks (support/evaluations/pointing/letterbox.py).

Frame: pixels, x right, y down, origin the top-left corner of the top-left pixel; image pixel
(col, row) covers [col, col+1) x [row, row+1). Each box's numbers are worked out in its comment:
scale = min(canvas_w / w, canvas_h / h), resized = round(size * scale), pad = (canvas - resized)
// 2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

from support.evaluations.pointing.letterbox import (
    Letterbox,
    canvas_values,
    interior_point,
    letterbox,
    mask_outline,
)


@pytest.mark.parametrize(
    ("box", "scale", "resized", "pad"),
    [
        # 1x1 on 768x768: scale 768, fills the canvas
        (Letterbox(1, 1), 768.0, (768, 768), (0, 0)),
        # 1x4000: scale 768/4000 = 0.192; width round(0.192) = 0 -> at least 1; pad (768-1)//2 = 383
        (Letterbox(1, 4000), 0.192, (1, 768), (383, 0)),
        (Letterbox(4000, 1), 0.192, (768, 1), (0, 383)),
        # 10x5 on 100x101: scale min(10, 20.2) = 10 -> 100x50; pad_y (101-50)//2 = 25 (not 25.5)
        (Letterbox(10, 5, 100, 101), 10.0, (100, 50), (0, 25)),
        # 3x2 on 10x10: scale min(3.33, 5) = 3.33 -> round(10) x round(6.67) = 10x7; pad_y 3//2 = 1
        (Letterbox(3, 2, 10, 10), 10 / 3, (10, 7), (0, 1)),
        # 2x3 on 11x6: scale min(5.5, 2) = 2 -> 4x6; pad_x (11-4)//2 = 3
        (Letterbox(2, 3, 11, 6), 2.0, (4, 6), (3, 0)),
    ],
)
def test_box_numbers(box: Letterbox, scale: float, resized, pad) -> None:
    assert box.scale == pytest.approx(scale)
    assert (box.resized_w, box.resized_h) == resized
    assert (box.pad_x, box.pad_y) == pad
    assert type(box.pad_x) is int and type(box.pad_y) is int
    assert (box.scale_x, box.scale_y) == (resized[0] / box.src_w, resized[1] / box.src_h)


def test_defaults_are_a_768_canvas() -> None:
    box = Letterbox(854, 480)
    assert (box.canvas_w, box.canvas_h) == (768, 768)


@pytest.mark.parametrize("sizes", [(0, 5, 5, 5), (5, 0, 5, 5), (5, 5, 0, 5), (5, 5, 5, 0)])
def test_each_size_must_be_positive(sizes: tuple[int, int, int, int]) -> None:
    with pytest.raises(ValueError, match="sizes must be >= 1"):
        Letterbox(*sizes)
    assert Letterbox(*(max(s, 1) for s in sizes)).scale > 0  # 1 px is allowed


def test_mapping_with_unequal_axis_scales() -> None:
    # 3x2 on 10x10: scale_x = 10/3, scale_y = 7/2 = 3.5, pad (0, 1)
    box = Letterbox(3, 2, 10, 10)
    assert box.to_canvas(1.5, 1.0) == pytest.approx((5.0, 4.5))  # (1.5 * 10/3, 1 + 1 * 3.5)
    assert box.to_image(5.0, 4.5) == pytest.approx((1.5, 1.0))
    assert box.to_image_pixel(5.0, 4.5) == (1, 1)
    # 10x5 on 100x101: 10 canvas px per image px, pad_y 25
    box = Letterbox(10, 5, 100, 101)
    assert box.to_canvas(3, 2) == (30.0, 45.0)
    assert box.to_image(30, 45) == (3.0, 2.0)


@pytest.mark.parametrize(
    ("x", "y", "pixel"),
    [
        # 2x3 image on an 11x6 canvas: content box [3, 7) x [0, 6) canvas px, 2 canvas px a pixel
        (3.0, 0.0, (0, 0)),  # the content box's top-left corner is inside
        (2.999, 0.0, None),  # left padding
        (6.999, 5.999, (1, 2)),  # (6.999 - 3) / 2 = 1.9995 -> col 1; 5.999 / 2 -> row 2
        (7.0, 3.0, None),  # the right edge x = 3 + 4 is outside
        (4.0, 6.0, None),  # the bottom edge y = 6 is outside
        (4.0, -0.001, None),
        (5.0, 2.0, (1, 1)),  # (5 - 3) / 2 = 1, 2 / 2 = 1
        (math.inf, 2.0, None),
        (4.0, math.nan, None),
    ],
)
def test_to_image_pixel_content_box(x: float, y: float, pixel) -> None:
    assert Letterbox(2, 3, 11, 6).to_image_pixel(x, y) == pixel


def test_to_image_pixel_clamps_the_last_column_and_row() -> None:
    # 9x1 on 768x768: scale_x 768/9; just left of the right edge (768) maps to 9.0 in float,
    # which is clamped to the last column 8; the row: pad_y = (768 - 85)//2 = 341
    box = Letterbox(9, 1)
    x = math.nextafter(768.0, 0.0)
    assert box.to_image(x, 341.5)[0] == 9.0
    assert box.to_image_pixel(x, 341.5) == (8, 0)
    box = Letterbox(1, 9)  # the same on the vertical axis: pad_x 341, last row 8
    assert box.to_image_pixel(341.5, x) == (0, 8)


def test_interior_point_hand_cases() -> None:
    mask = np.zeros((10, 20), bool)
    mask[4:7, 10:15] = True  # rows 4..6, cols 10..14: a 3x5 block
    # distance to the nearest non-mask pixel: 2 on the middle row's cols 11..13 (1 elsewhere);
    # the first of the tie in row-major order is (col 11, row 5)
    assert interior_point(mask) == (11, 5)
    assert interior_point(np.ones((3, 5), bool)) == (1, 1)  # the image border counts as outside
    assert interior_point(np.ones(5, bool)) is None  # not a 2-D mask
    assert interior_point(np.ones((2, 2, 2), bool)) is None


def test_mask_outline_counts_the_image_border() -> None:
    outline = mask_outline(np.ones((3, 4), bool))
    # all 12 pixels but the two interior ones (row 1, cols 1..2)
    assert outline.sum() == 10 and not outline[1, 1:3].any()


@pytest.mark.parametrize(
    ("values", "box", "expected"),
    [
        # 2x1 image on 4x4: scale 2 -> 4x2 at pad (0, 1); canvas col c -> floor((c + 0.5) / 2)
        (
            [[1, 2]],
            Letterbox(2, 1, 4, 4),
            [[9, 9, 9, 9], [1, 1, 2, 2], [1, 1, 2, 2], [9, 9, 9, 9]],
        ),
        # 1x3 image on 4x6: scale 2 -> 2x6 at pad (1, 0); canvas row r -> floor((r + 0.5) / 2)
        (
            [[1], [2], [3]],
            Letterbox(1, 3, 4, 6),
            [[9, 1, 1, 9], [9, 1, 1, 9], [9, 2, 2, 9], [9, 2, 2, 9], [9, 3, 3, 9], [9, 3, 3, 9]],
        ),
        # 3x1 image on 4x4: scale 4/3 -> 4x1 at pad (0, 1); scale_x 4/3, so canvas col c ->
        # floor((c + 0.5) * 3/4): 0.375, 1.125, 1.875, 2.625 -> cols 0, 1, 1, 2
        (
            [[10, 20, 30]],
            Letterbox(3, 1, 4, 4),
            [[9, 9, 9, 9], [10, 20, 20, 30], [9, 9, 9, 9], [9, 9, 9, 9]],
        ),
    ],
)
def test_canvas_values_hand_cases(values, box: Letterbox, expected) -> None:
    out = canvas_values(np.array(values, dtype=np.int8), box, fill=9)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, np.array(expected))


def test_canvas_values_default_fill_and_shape_check() -> None:
    out = canvas_values(np.array([[5, 6]]), Letterbox(2, 1, 4, 4))
    np.testing.assert_array_equal(out[0], [0, 0, 0, 0])  # padding: fill 0 by default
    with pytest.raises(ValueError, match=r"array shape \(2, 3\) != letterbox source \(1, 3\)"):
        canvas_values(np.zeros((2, 3)), Letterbox(3, 1, 4, 4))


def test_canvas_values_of_a_mask_hand_case() -> None:
    cm = canvas_values(np.array([[True, False]]), Letterbox(2, 1, 4, 4), False)
    expected = np.zeros((4, 4), bool)
    expected[1:3, 0:2] = True  # canvas cols 0..1 show image col 0, rows 1..2 the content
    assert cm.dtype == np.bool_
    np.testing.assert_array_equal(cm, expected)


def test_letterbox_fill_per_mode() -> None:
    # RGBA with an RGB fill: opaque padding; with an RGBA fill: as given
    out, _ = letterbox(Image.new("RGBA", (4, 2), (1, 2, 3, 255)), (4, 4), fill=(5, 6, 7))
    assert out.getpixel((0, 0)) == (5, 6, 7, 255) and out.getpixel((0, 1)) == (1, 2, 3, 255)
    out, _ = letterbox(Image.new("RGBA", (4, 2), (1, 2, 3, 255)), (4, 4), fill=(5, 6, 7, 8))
    assert out.getpixel((0, 0)) == (5, 6, 7, 8)
    # single-band images take the fill's first component
    for mode, value in (("L", 200), ("I", 70000), ("F", 0.25)):
        out, _ = letterbox(Image.new(mode, (4, 2), value), (4, 4), fill=(7, 8, 9))
        assert out.mode == mode
        assert out.getpixel((0, 0)) == 7 and out.getpixel((0, 1)) == value
    # a 1-bit image becomes RGB
    out, _ = letterbox(Image.new("1", (4, 2), 1), (4, 4), fill=(7, 8, 9))
    assert out.mode == "RGB" and out.getpixel((0, 0)) == (7, 8, 9)
    assert out.getpixel((0, 1)) == (255, 255, 255)


def test_letterbox_resamples_bicubic_by_default() -> None:
    # a 2x1 black/white image doubled onto a 4x2 content box: bicubic blends the middle columns,
    # nearest keeps only 0 and 255
    img = Image.fromarray(np.array([[0, 255]], dtype=np.uint8))
    smooth, _ = letterbox(img, (4, 2))
    sharp, _ = letterbox(img, (4, 2), resample=Image.Resampling.NEAREST)
    assert set(np.unique(np.asarray(sharp))) == {0, 255}
    expected = np.asarray(img.resize((4, 2), resample=Image.Resampling.BICUBIC))
    np.testing.assert_array_equal(np.asarray(smooth), expected)
    assert len(np.unique(np.asarray(smooth))) > 2


def test_mask_outline_of_a_0_255_mask_is_boolean() -> None:
    # an 8-bit mask (0 / 255) gives the same boolean outline as its bool version
    mask = np.zeros((5, 5), np.uint8)
    mask[1:4, 1:4] = 255
    outline = mask_outline(mask)
    assert outline.dtype == np.bool_
    expected = np.zeros((5, 5), bool)
    expected[1:4, 1:4] = True
    expected[2, 2] = False  # the 3x3 block's centre has all four neighbours inside
    np.testing.assert_array_equal(outline, expected)
