"""Letterbox mapping <-> rendering, and the mask helpers of
support.evaluations.pointing.letterbox."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays
from PIL import Image

from support.evaluations.pointing.letterbox import (
    Letterbox,
    interior_point,
    letterbox,
    mask_outline,
)

sizes = st.integers(1, 4000)
canvases = st.sampled_from([(768, 768), (512, 384), (100, 300)])
masks = arrays(np.bool_, array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=24))


def test_854x480_numbers() -> None:
    box = Letterbox(854, 480)
    assert box.scale == pytest.approx(0.8993, abs=1e-4)
    assert (box.resized_w, box.resized_h) == (768, 432)
    assert (box.pad_x, box.pad_y) == (0, 168)
    assert box.scale_x == 768 / 854 and box.scale_y == 432 / 480
    assert box.to_canvas(0, 0) == (0, 168)
    assert box.to_canvas(854, 480) == pytest.approx((768, 600))


def test_invalid_sizes() -> None:
    with pytest.raises(ValueError):
        Letterbox(0, 10)


@given(sizes, sizes, canvases, st.floats(0, 1), st.floats(0, 1))
def test_image_canvas_round_trip(w: int, h: int, canvas, fx: float, fy: float) -> None:
    box = Letterbox(w, h, *canvas)
    x, y = fx * w, fy * h  # image px
    cx, cy = box.to_canvas(x, y)
    assert -1e-9 <= cx <= box.canvas_w + 1e-9 and -1e-9 <= cy <= box.canvas_h + 1e-9
    bx, by = box.to_image(cx, cy)
    assert abs(bx - x) <= 1e-6 and abs(by - y) <= 1e-6


@given(sizes, sizes, canvases, st.data())
def test_pixel_centre_maps_back_to_its_pixel(w: int, h: int, canvas, data) -> None:
    box = Letterbox(w, h, *canvas)
    col, row = data.draw(st.integers(0, w - 1)), data.draw(st.integers(0, h - 1))
    assert box.to_image_pixel(*box.to_canvas(col + 0.5, row + 0.5)) == (col, row)


def test_pixel_centres_exact_854x480() -> None:
    box = Letterbox(854, 480)
    for col in range(854):
        for row in (0, 1, 239, 478, 479):
            assert box.to_image_pixel(*box.to_canvas(col + 0.5, row + 0.5)) == (col, row)
    # every canvas pixel centre of the content box lands in some image pixel
    for cy in range(168, 600):
        assert box.to_image_pixel(383.5, cy + 0.5) is not None


@given(sizes, sizes, canvases, st.data())
def test_padding_maps_to_none(w: int, h: int, canvas, data) -> None:
    box = Letterbox(w, h, *canvas)
    x0, y0 = box.pad_x, box.pad_y  # content box [x0, x1) x [y0, y1), canvas px
    x1, y1 = x0 + box.resized_w, y0 + box.resized_h
    inside_x = data.draw(st.floats(x0, x1, exclude_max=True))
    inside_y = data.draw(st.floats(y0, y1, exclude_max=True))
    assert box.to_image_pixel(inside_x, inside_y) is not None
    for x, y in [(x0 - 1e-9, inside_y), (x1, inside_y), (inside_x, y0 - 1e-9), (inside_x, y1)]:
        assert box.to_image_pixel(x, y) is None
    if y0 > 0:  # a point in the top padding band
        assert box.to_image_pixel(inside_x, data.draw(st.floats(0, y0, exclude_max=True))) is None
    if x0 > 0:
        assert box.to_image_pixel(data.draw(st.floats(0, x0, exclude_max=True)), inside_y) is None
    assert box.to_image_pixel(float("nan"), inside_y) is None
    assert box.to_image_pixel(-5.0, -5.0) is None


def _content_bbox(img: Image.Image, fill: tuple[int, int, int]) -> tuple[int, int, int, int]:
    arr = np.asarray(img.convert("RGB")).astype(int)
    ys, xs = np.nonzero(np.any(arr != np.array(fill), axis=-1))
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def test_rendered_854x480_matches_mapping() -> None:
    fill = (0, 0, 0)
    img = Image.new("RGB", (854, 480), (200, 120, 40))
    out, box = letterbox(img, fill=fill)
    assert out.size == (768, 768) and out.mode == "RGB"
    x0, y0 = box.to_canvas(0, 0)
    x1, y1 = box.to_canvas(854, 480)
    assert np.allclose(_content_bbox(out, fill), (x0, y0, x1, y1), atol=1)
    arr = np.asarray(out)
    assert (arr[:168] == 0).all() and (arr[600:] == 0).all()  # padding is the fill colour
    assert (arr[168:600] == (200, 120, 40)).all()


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.integers(1, 300), canvases)
def test_rendered_box_matches_mapping(w: int, h: int, canvas) -> None:
    fill = (10, 20, 30)
    out, box = letterbox(Image.new("RGB", (w, h), (250, 250, 250)), canvas, fill)
    assert out.size == canvas
    assert _content_bbox(out, fill) == (
        box.pad_x,
        box.pad_y,
        box.pad_x + box.resized_w,
        box.pad_y + box.resized_h,
    )
    x0, y0 = box.to_canvas(0, 0)
    x1, y1 = box.to_canvas(w, h)
    assert np.allclose((x0, y0, x1, y1), _content_bbox(out, fill), atol=1e-6)


def test_letterbox_modes() -> None:
    out, _ = letterbox(Image.new("L", (20, 10), 255), (40, 40), fill=(0, 0, 0))
    assert out.mode == "L" and out.getpixel((0, 0)) == 0 and out.getpixel((20, 20)) == 255
    out, _ = letterbox(Image.new("RGBA", (20, 10), (1, 2, 3, 255)), (40, 40))
    assert out.getpixel((0, 0)) == (0, 0, 0, 255)
    out, _ = letterbox(Image.new("P", (20, 10)), (40, 40))
    assert out.mode == "RGB"
    labels = Image.fromarray(np.array([[1, 2], [3, 4]], dtype=np.uint8))
    out, box = letterbox(labels, (8, 8), fill=0, resample=Image.Resampling.NEAREST)
    assert set(np.unique(np.asarray(out))) == {1, 2, 3, 4} and box.scale == 4


@settings(max_examples=200)
@given(masks)
def test_interior_point_inside(mask: np.ndarray) -> None:
    p = interior_point(mask)
    if not mask.any():
        assert p is None
    else:
        assert p is not None and mask[p[1], p[0]]
        assert interior_point(mask) == p  # deterministic


def test_interior_point_examples() -> None:
    assert interior_point(np.zeros((5, 5), bool)) is None
    mask = np.zeros((9, 9), bool)
    mask[1:8, 1:8] = True  # 7 x 7 square: unique centre (col 4, row 4)
    assert interior_point(mask) == (4, 4)
    mask[:] = False
    mask[1:8, 2:7] = True  # 7 rows x 5 cols: rows 3..5 tie at col 4; the first row wins
    assert interior_point(mask) == (4, 3)
    assert interior_point(np.ones((1, 1), bool)) == (0, 0)
    assert interior_point(np.ones((4, 4), bool)) == (1, 1)  # first of the tied centre pixels


@settings(max_examples=200)
@given(masks)
def test_mask_outline_subset_and_nonempty(mask: np.ndarray) -> None:
    outline = mask_outline(mask)
    assert outline.shape == mask.shape and outline.dtype == np.bool_
    assert not (outline & ~mask).any()
    assert outline.any() == mask.any()


def test_mask_outline_ring() -> None:
    mask = np.zeros((7, 7), bool)
    mask[1:6, 1:6] = True
    outline = mask_outline(mask)
    assert outline.sum() == 16 and not outline[2:5, 2:5].any()


# (image w, image h, canvas w, canvas h) px and an rng seed
SIZES_AND_SEED = (
    st.integers(1, 60),
    st.integers(1, 60),
    st.integers(4, 90),
    st.integers(4, 90),
    st.integers(0, 2**32 - 1),
)


@settings(max_examples=60, deadline=None)
@given(*SIZES_AND_SEED)
def test_canvas_values_of_a_mask_agree_with_pixel_mapping(w, h, cw, ch, seed):
    """canvas_values(mask)[y, x] is True exactly when canvas pixel (x, y)'s centre maps into the
    mask."""
    from support.evaluations.pointing.letterbox import canvas_values

    mask = np.random.default_rng(seed).random((h, w)) < 0.4
    box = Letterbox(w, h, cw, ch)
    cm = canvas_values(mask, box, False)
    assert cm.shape == (ch, cw)
    for y in range(ch):
        for x in range(cw):
            pixel = box.to_image_pixel(x + 0.5, y + 0.5)
            expected = pixel is not None and bool(mask[pixel[1], pixel[0]])
            assert cm[y, x] == expected, (x, y, pixel)


@settings(max_examples=60, deadline=None)
@given(*SIZES_AND_SEED)
def test_canvas_values_of_a_label_map_give_every_organs_canvas_mask(w, h, cw, ch, seed):
    """One gather of the int8 label map (padding -1) == the gather of each class's bool mask."""
    from support.evaluations.pointing.letterbox import canvas_values

    labels = np.random.default_rng(seed).integers(-1, 4, (h, w)).astype(np.int8)
    box = Letterbox(w, h, cw, ch)
    on_canvas = canvas_values(labels, box, -1)
    assert on_canvas.shape == (ch, cw) and on_canvas.dtype == np.int8
    for organ in range(4):
        assert np.array_equal(on_canvas == organ, canvas_values(labels == organ, box, False))


@settings(max_examples=80, deadline=None)
@given(arrays(np.bool_, array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=40)))
def test_interior_point_equals_whole_image_distance_argmax(mask):
    """The bounding-box shortcut gives exactly the whole-image answer (same tie-break)."""
    from scipy import ndimage

    if not mask.any():
        assert interior_point(mask) is None
        return
    dist = ndimage.distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1]
    row, col = np.unravel_index(int(np.argmax(dist)), dist.shape)
    assert interior_point(mask) == (int(col), int(row))
