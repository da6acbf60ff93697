"""Edges of parse_boxes and boxes_json (support/evaluations/surgvqa/boxes.py): the scan limits,
the per-tool cap, key precedence, non-square frames, truncation and the number rules.

Expected pixels are worked out in the comments (relative frames: value * size / 1000)."""

from __future__ import annotations

import json

import pytest

from support.evaluations.surgvqa.boxes import (
    MAX_BOXES_PER_TOOL,
    MAX_CHARS,
    MAX_LITERAL_STARTS,
    MAX_STARTS,
    Box,
    boxes_json,
    parse_boxes,
)

W, H = 800, 400  # px: a non-square frame, so x and y scales differ
ITEM = '{"label": "stapler", "bbox_2d": [10, 20, 30, 40]}'
PY_ITEM = "{'label': 'stapler', 'bbox_2d': [10, 20, 30, 40]}"  # a Python literal, not JSON


def corners(b: Box) -> tuple[float, float, float, float]:
    return (b.x1, b.y1, b.x2, b.y2)


# ---- how far the scan looks -----------------------------------------------------------------
def test_only_the_leading_max_chars_are_read() -> None:
    assert MAX_CHARS == 100_000
    pad = " " * (MAX_CHARS - len(ITEM) - 2)
    assert parse_boxes(pad + f"[{ITEM}]", W, H).reason == "ok"  # ends at character 100,000
    assert parse_boxes(pad + f" [{ITEM}]", W, H).reason == "truncated"  # its "]" is cut
    assert parse_boxes(" " * MAX_CHARS + f"[{ITEM}]", W, H).reason == "no JSON"


@pytest.mark.parametrize(
    ("prefix", "reason"), [(MAX_STARTS - 1, "ok"), (MAX_STARTS, "no usable box")]
)
def test_only_the_first_max_starts_brackets_are_tried(prefix: int, reason: str) -> None:
    # "[1]" decodes but holds no object: kept only as the last resort, [1] -> one unusable item
    answer = parse_boxes("[1] " * prefix + f"[{ITEM}]", W, H)
    assert answer.reason == reason
    if reason != "ok":
        assert answer.dropped == 1


@pytest.mark.parametrize(
    ("prefix", "reason"), [(MAX_LITERAL_STARTS - 1, "ok"), (MAX_LITERAL_STARTS, "no usable box")]
)
def test_python_literals_are_tried_at_the_first_starts_only(prefix: int, reason: str) -> None:
    # a "[1]" start's literal runs to the last "]" and fails; the answer's list is tried only
    # when it is one of the first MAX_LITERAL_STARTS starts
    text = "[1] " * prefix + f"[{PY_ITEM}]"
    assert parse_boxes(text, W, H).reason == reason


def test_a_python_object_literal_is_read() -> None:
    answer = parse_boxes(f"Here: {PY_ITEM} done", W, H)
    assert answer.reason == "ok" and corners(answer.boxes[0]) == (10, 20, 30, 40)


# ---- the per-tool cap ---------------------------------------------------------------------------
def test_at_most_max_boxes_per_tool_each_tool_apart() -> None:
    items = [
        {"label": "stapler", "bbox_2d": [k, 0, k + 5, 5]} for k in range(MAX_BOXES_PER_TOOL + 2)
    ]
    items.insert(50, {"label": "clip applier", "bbox_2d": [0, 0, 9, 9]})
    items.append({"label": "clip applier", "bbox_2d": [1, 1, 9, 9]})
    items.append({"label": "nothing known", "bbox_2d": [1, 1, 9, 9]})
    answer = parse_boxes(json.dumps(items), W, H)
    staplers = [b for b in answer.boxes if b.label == "stapler"]
    assert len(staplers) == 100 and staplers[-1].x1 == 99  # the first 100 in answer order
    assert [b.label for b in answer.boxes].count("clip applier") == 2
    assert (answer.over_cap, answer.dropped, answer.reason) == (2, 1, "ok")
    assert answer.boxes[50].label == "clip applier"  # answer order kept


# ---- keys, wrappers, frames ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("item", "want"),
    [
        ({"name": "stapler", "label": "clip applier", "bbox_2d": [1, 2, 3, 4]}, "clip applier"),
        ({"tool": "stapler", "class": "clip applier", "bbox": [1, 2, 3, 4]}, "stapler"),
        ({"class": "stapler", "box": [1, 2, 3, 4]}, "stapler"),
        ({"label": "scalpel", "name": "stapler", "bbox": [1, 2, 3, 4]}, None),  # first key wins
    ],
)
def test_label_key_precedence(item: dict, want: str | None) -> None:
    answer = parse_boxes(json.dumps([item]), W, H)
    assert [b.label for b in answer.boxes] == ([want] if want else [])


def test_box_key_precedence_and_auto_frame() -> None:
    # bbox_2d before bbox: pixels [1, 2, 3, 4]
    item = {"label": "stapler", "bbox": [100, 100, 200, 200], "bbox_2d": [1, 2, 3, 4]}
    assert corners(parse_boxes(json.dumps([item]), W, H).boxes[0]) == (1, 2, 3, 4)
    # box before box_2d: read as pixels under "auto"
    item = {"label": "stapler", "box_2d": [100, 100, 200, 200], "box": [5, 6, 7, 8]}
    assert corners(parse_boxes(json.dumps([item]), W, H).boxes[0]) == (5, 6, 7, 8)
    # box_2d alone under "auto": Gemini's [ymin, xmin, ymax, xmax] per mille
    # x = 100 * 800 / 1000 = 80 .. 160, y = 250 * 400 / 1000 = 100 .. 200
    item = {"label": "stapler", "box_2d": [250, 100, 500, 200]}
    assert corners(parse_boxes(json.dumps([item]), W, H).boxes[0]) == (80, 100, 160, 200)


@pytest.mark.parametrize(
    ("frame", "want"),
    [  # [100, 250, 200, 500] on an 800 x 400 px frame
        ("pixels", (100, 250, 200, 400)),  # y2 clipped to the frame's 400 px
        ("norm1000", (80, 100, 160, 200)),  # x * 0.8, y * 0.4
        ("gemini", (200, 40, 400, 80)),  # x from [1], [3]: 250*0.8, 500*0.8; y 100*0.4, 200*0.4
    ],
)
def test_frames_on_a_non_square_image(frame: str, want: tuple) -> None:
    text = '[{"label": "stapler", "bbox_2d": [100, 250, 200, 500]}]'
    assert corners(parse_boxes(text, W, H, frame).boxes[0]) == pytest.approx(want)


@pytest.mark.parametrize(
    ("text", "reason", "n"),
    [
        (f'{{"detections": [{ITEM}, {ITEM}]}}', "ok", 2),
        (f'{{"boxes": {ITEM}, "detections": [{ITEM}]}}', "ok", 1),  # an object is no list
        ('{"boxes": "none", "label": "stapler", "bbox": [1, 1, 5, 5]}', "ok", 1),
        ('{"label": "stapler"}', "no usable box", 0),  # a single item with no box
        ('{"bbox_2d": [1, 2, 3, 4]}', "no usable box", 0),
        ('{"box_2d": [1, 2, 3, 4]}', "no usable box", 0),
        ('{"tool": "stapler"}', "no usable box", 0),
        ('{"class": "stapler"}', "no usable box", 0),
        ('{"name": "stapler"}', "no usable box", 0),
        ('{"box": [1, 2, 3, 4]}', "no usable box", 0),
        ('{"bbox": [1, 2, 3, 4]}', "no usable box", 0),
        ('{"other": 1}', "not a list", 0),
        ("null", "no JSON", 0),
        ('"[1, 2]"', "no usable box", 0),  # a "[" anywhere is a start, [1, 2] the last resort
        ("[1, 2]", "no usable box", 0),
        ("[[1, 2, 3, 4]]", "no usable box", 0),
        (f"({ITEM},)", "ok", 1),  # a Python tuple literal
    ],
)
def test_wrappers_and_single_items(text: str, reason: str, n: int) -> None:
    answer = parse_boxes(text, W, H)
    assert (answer.reason, len(answer.boxes)) == (reason, n)


def test_truncation_keeps_complete_objects_across_whitespace() -> None:
    text = f'[ {ITEM} ,\n\t{ITEM}\r\n, {{"label": "stapler", "bbox_2d": [1, 2'
    answer = parse_boxes(text, W, H)
    assert (answer.reason, len(answer.boxes)) == ("truncated", 2)
    assert parse_boxes(f"[{ITEM} {ITEM}", W, H).boxes == parse_boxes(f"[{ITEM}]", W, H).boxes
    assert parse_boxes("[1, 2, 3", W, H).reason == "no JSON"  # no object before the cut
    assert parse_boxes(f"[1, {ITEM}, 2", W, H).reason == "truncated"  # an object among numbers
    assert parse_boxes(f"[{ITEM}, ", W, H).reason == "truncated"


def test_nesting_past_the_decoders_recursion_limit_is_no_json() -> None:
    # json's decoder raises RecursionError past ~1,000 levels: such a start is skipped, not fatal
    assert parse_boxes("[" * 5000 + ITEM + "]" * 5000, W, H).reason == "no JSON"
    # a deep item after complete ones ends a truncated list: the complete ones are kept
    answer = parse_boxes(f"[{ITEM}, " + "[" * 5000, W, H)
    assert (answer.reason, len(answer.boxes)) == ("truncated", 1)


@pytest.mark.parametrize(
    ("coords", "ok"),
    [
        (["10", "20", "30.5", "40"], True),  # numbers as strings
        ([10, 20, 30, 40, 50], False),
        ([10, 20, 30], False),
        ("10, 20, 30, 40", False),
        ({"x": 1}, False),
        ([10, 20, None, 40], False),
        ([10, 20, "inf", 40], False),
        ([10, 20, "1e999", 40], False),  # overflows to inf
        ([10, 20, "nan", 40], False),
        ([10, 20, "thirty", 40], False),
        ([10, 20, 10, 40], False),  # no width
        ([10, 20, 30, 20], False),  # no height
        ([-50, -50, -10, -10], False),  # nothing left in the frame
        ([W + 1, 0, W + 9, 9], False),
    ],
)
def test_four_numbers(coords: object, ok: bool) -> None:
    answer = parse_boxes(json.dumps([{"label": "stapler", "bbox_2d": coords}]), W, H)
    assert len(answer.boxes) == int(ok) and answer.dropped == int(not ok)
    if ok:
        assert corners(answer.boxes[0]) == (10, 20, 30.5, 40)


def test_a_frame_of_no_size_keeps_nothing() -> None:
    assert parse_boxes(f"[{ITEM}]", 0, 0).reason == "no usable box"
    assert parse_boxes(f"[{ITEM}]", -5, 400).reason == "no usable box"
    # a box reaching past 0 on a 0-px-wide frame is clipped to [0, 0]: no width left
    wide = '[{"label": "stapler", "bbox_2d": [-5, 10, 30, 40]}]'
    assert parse_boxes(wide, 0, H).reason == "no usable box"
    assert len(parse_boxes(wide, 1, H).boxes) == 1  # clipped to [0, 1] px
    assert parse_boxes(None, W, H).reason == "no JSON"  # type: ignore[arg-type]


# ---- boxes_json --------------------------------------------------------------------------------
def test_boxes_json_numbers_and_frames() -> None:
    boxes = [Box("stapler", 80, 100, 160.5, 200)]
    assert json.loads(boxes_json(boxes)) == [{"label": "stapler", "bbox_2d": [80, 100, 160.5, 200]}]
    floats = [Box("stapler", 80.0, 100.0, 160.5, 200.0)]  # pixels as parse_boxes gives them
    assert '"bbox_2d": [80, 100, 160.5, 200]' in boxes_json(floats, "auto")  # integral: ints
    # per mille: x * 1000 / 800, y * 1000 / 400
    norm = json.loads(boxes_json(boxes, "norm1000", width=W, height=H))
    assert norm == [{"label": "stapler", "bbox_2d": [100, 250, 200.625, 500]}]
    gem = json.loads(boxes_json(boxes, "gemini", width=W, height=H))
    assert gem == [{"label": "stapler", "box_2d": [250, 100, 500, 200.625]}]
    assert boxes[0].xywh() == [80, 100, 80.5, 100]
    for kwargs in ({"width": W}, {"height": H}, {"width": 0, "height": H}):
        with pytest.raises(ValueError, match="frame 'gemini' needs the frame's width and height"):
            boxes_json(boxes, "gemini", **kwargs)
    assert boxes_json([], "norm1000") == "[]"
