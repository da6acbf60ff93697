"""parse_boxes: every answer variant a model gives -> boxes in pixels, never an exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.backends.base import provider_class
from support.backends.registry import model_spec
from support.evaluations.surgvqa.boxes import Box, BoxAnswer, boxes_json, parse_boxes
from support.evaluations.surgvqa.tools import TOOL_CLASSES

W, H = 640, 512  # px: the challenge's frame size


def one(text: str, frame: str = "auto") -> Box:
    answer = parse_boxes(text, W, H, frame)
    assert answer.reason in ("ok", "truncated"), answer
    assert len(answer.boxes) == 1, answer
    return answer.boxes[0]


def one_in(text: str, frame: str, seen) -> Box:
    answer = parse_boxes(text, W, H, frame, seen)  # type: ignore[arg-type]
    assert answer.reason == "ok" and len(answer.boxes) == 1, answer
    return answer.boxes[0]


def corners(b: Box) -> tuple[float, float, float, float]:
    return (b.x1, b.y1, b.x2, b.y2)


def test_pixels_the_prompts_format():
    text = '[{"bbox_2d": [10, 20, 110, 220], "label": "needle driver"}]'
    answer = parse_boxes(text, W, H)
    expected = BoxAnswer((Box("needle driver", 10, 20, 110, 220),), "ok", 0, read_by="json-list")
    assert answer == expected
    assert answer.boxes[0].xywh() == [10, 20, 100, 200]  # COCO [x, y, w, h]


def test_gemini_box_2d_is_ymin_xmin_ymax_xmax_per_mille():
    # box_2d = [ymin, xmin, ymax, xmax] / 1000 of the frame: x = 250/1000*640 = 160,
    # y = 100/1000*512 = 51.2, x2 = 750/1000*640 = 480, y2 = 500/1000*512 = 256
    text = '```json\n[\n  {"box_2d": [100, 250, 500, 750], "label": "bipolar forceps"}\n]\n```'
    b = one(text)  # auto: the key box_2d means Gemini's convention
    assert b.label == "bipolar forceps"
    assert corners(b) == pytest.approx((160, 51.2, 480, 256))
    assert corners(one(text, "gemini")) == pytest.approx((160, 51.2, 480, 256))


def test_gemini_frame_reads_any_box_key_the_gemini_way():
    b = one('[{"bbox": [100, 250, 500, 750], "label": "stapler"}]', "gemini")
    assert corners(b) == pytest.approx((160, 51.2, 480, 256))


def test_norm1000_is_x1_y1_x2_y2_per_mille():
    # Qwen2-VL / Qwen3-VL: [x1, y1, x2, y2] / 1000: 500/1000*640 = 320, 500/1000*512 = 256
    b = one('[{"bbox_2d": [0, 0, 500, 500], "label": "stapler"}]', "norm1000")
    assert corners(b) == pytest.approx((0, 0, 320, 256))


def test_auto_reads_bbox_2d_as_pixels():
    assert corners(one('[{"bbox_2d": [0, 0, 500, 500], "label": "stapler"}]')) == (0, 0, 500, 500)


@pytest.mark.parametrize(
    "provider, model_id, frame",
    [
        ("openai-compatible", "gemini-2.5-flash", "gemini"),
        ("google", "gemini-2.0-flash", "gemini"),
        ("google", "some-model", "gemini"),
        ("hf", "Qwen/Qwen2-VL-7B-Instruct", "norm1000"),
        ("vllm", "/models/qwen2_vl_2b", "norm1000"),
        ("vllm", "Qwen/Qwen3-VL-8B-Instruct", "norm1000"),
        ("vllm", "Qwen/Qwen2.5-VL-7B-Instruct", "auto"),
        ("openai", "gpt-4o", "auto"),
    ],
)
def test_box_convention_is_a_model_trait(provider, model_id, frame):
    """The provider class's trait (`Backend.box_convention`), from the provider and the model
    id, never the --model name a user chose."""
    assert provider_class(provider).box_convention(model_id) == frame
    assert model_spec(f"{provider}:{model_id}").box_convention == frame


def test_registered_models_carry_their_box_convention():
    assert model_spec("gemini-2.0-flash").box_convention == "gemini"
    assert model_spec("oracle").box_convention == "auto"
    assert model_spec("gpt-4o").box_convention == "auto"


def test_fences_and_prose_around_the_json():
    text = (
        "Sure! I can see two tools [in the frame]:\n```json\n"
        '[{"label": "stapler", "bbox_2d": [1, 2, 30, 40]},\n'
        ' {"label": "clip applier", "bbox_2d": [50, 60, 70, 80]}]\n```\nHope this helps."'
    )
    answer = parse_boxes(text, W, H)
    assert answer.reason == "ok"
    assert [b.label for b in answer.boxes] == ["stapler", "clip applier"]  # the model's order
    assert corners(answer.boxes[1]) == (50, 60, 70, 80)


def test_a_bracket_in_prose_before_the_json_is_not_taken():
    text = 'See [1]. Answer: [{"label": "stapler", "bbox_2d": [1, 2, 30, 40]}]'
    assert one(text).label == "stapler"


@pytest.mark.parametrize(
    "text",
    [
        '{"label": "stapler", "bbox_2d": [1, 2, 30, 40]}',  # one object instead of a list
        '{"boxes": [{"label": "stapler", "bbox_2d": [1, 2, 30, 40]}]}',
        '{"detections": [{"label": "stapler", "bbox_2d": [1, 2, 30, 40]}]}',
        '[{"name": "stapler", "bbox": [1, 2, 30, 40]}]',
        '[{"tool": "stapler", "box": [1, 2, 30, 40]}]',
        '[{"class": "stapler", "bbox_2d": ["1", "2", "30.0", " 40 "]}]',  # numbers as strings
        "[{'label': 'stapler', 'bbox_2d': (1, 2, 30, 40)}]",  # Python literal
        "Boxes: [{'label': 'stapler', 'bbox_2d': [1, 2, 30, 40]}] done.",
    ],
)
def test_variants(text):
    b = one(text)
    assert (b.label, corners(b)) == ("stapler", (1, 2, 30, 40))


def test_truncated_answer_keeps_the_complete_items():
    full = json.dumps(
        [{"label": "stapler", "bbox_2d": [1, 2, 30, 40]}] * 2
        + [{"label": "clip applier", "bbox_2d": [50, 60, 70, 80]}]
    )
    cut = full[: full.rindex("70")]  # max_tokens cut inside the third item's box
    answer = parse_boxes("```json\n" + cut, W, H)
    assert answer.reason == "truncated"
    assert [b.label for b in answer.boxes] == ["stapler", "stapler"]


def test_truncated_wrapper_keeps_the_complete_items():
    cut = '{"boxes": [{"label": "stapler", "bbox_2d": [1, 2, 30, 40]}, {"label": "sta'
    answer = parse_boxes(cut, W, H)
    assert (answer.reason, len(answer.boxes)) == ("truncated", 1)


@pytest.mark.parametrize(
    "name, canonical",
    [
        ("Monopolar Curved Scissors", "monopolar curved scissor"),
        ("tip-up fenestrated grasper", "tip up fenestrated grasper"),
        ("permanent cautery hook/spatula", "permanent cautery hook spatula"),
        ("large needle driver", "needle driver"),
        ("needle_driver", "needle driver"),
        ("CADIERE FORCEPS", "cadiere forceps"),
    ],
)
def test_label_normalisation(name, canonical):
    assert one(json.dumps([{"label": name, "bbox_2d": [1, 2, 30, 40]}])).label == canonical


def test_unknown_labels_and_bad_boxes_are_dropped_and_counted():
    items = [
        {"label": "scalpel", "bbox_2d": [1, 2, 30, 40]},  # not a SurgVU tool
        {"label": "stapler", "bbox_2d": [1, 2, 30]},  # three numbers
        {"label": "stapler", "bbox_2d": [1, 2, "x", 40]},
        {"label": "stapler", "bbox_2d": [5, 5, 5, 40]},  # zero width
        {"label": "stapler", "bbox_2d": [700, 10, 800, 40]},  # right of the frame: nothing left
        {"label": "stapler", "bbox_2d": [True, 2, 30, 40]},
        {"label": "stapler"},  # no box
        "stapler",  # not an object
        {"label": "stapler", "bbox_2d": [1, 2, 30, 40]},  # the one usable item
    ]
    text = json.dumps(items)[:-1] + ', {"label": "stapler", "bbox_2d": [NaN, 2, 30, Infinity]}]'
    answer = parse_boxes(text, W, H)
    assert (answer.reason, len(answer.boxes), answer.dropped) == ("ok", 1, 9)


def test_clipping_to_the_frame():
    b = one('[{"label": "stapler", "bbox_2d": [-20, -5.5, 900, 600]}]')
    assert corners(b) == (0, 0, W, H)


def test_swapped_corners():
    assert corners(one('[{"label": "stapler", "bbox_2d": [110, 220, 10, 20]}]')) == (
        10,
        20,
        110,
        220,
    )
    # Gemini with ymin > ymax: [ymin, xmin, ymax, xmax] = [500, 250, 100, 750] -> y 51.2..256
    b = one('[{"label": "stapler", "box_2d": [500, 250, 100, 750]}]')
    assert corners(b) == pytest.approx((160, 51.2, 480, 256))


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "no JSON"),
        ("I cannot identify any instruments.", "no JSON"),
        ("[]", "empty list"),
        ('```json\n{"boxes": []}\n```', "empty list"),
        ('{"answer": "stapler"}', "not a list"),
        ("42", "no JSON"),
        ('[{"label": "scalpel", "bbox_2d": [1, 2, 3, 4]}]', "no usable box"),
        ('[{"label": "stapler", "bbox_2d": [1, 2, 30', "no JSON"),  # cut in the first item
    ],
)
def test_no_boxes_reasons(text, reason):
    answer = parse_boxes(text, W, H)
    assert (answer.boxes, answer.reason) == ((), reason)


BOXES = (
    Box("stapler", 10, 20, 110, 220),
    Box("tip up fenestrated grasper", 0.5, 100.25, 639.5, 512),
    Box("suction irrigator", 300, 0, 301, 1),
)


@pytest.mark.parametrize("frame", ["pixels", "norm1000", "gemini"])
def test_boxes_json_round_trips(frame):
    text = boxes_json(BOXES, frame, width=W, height=H)
    answer = parse_boxes(text, W, H, "auto" if frame == "pixels" else frame)
    assert answer.reason == "ok"
    assert [b.label for b in answer.boxes] == [b.label for b in BOXES]
    for got, want in zip(answer.boxes, BOXES, strict=True):
        assert corners(got) == pytest.approx(corners(want), abs=1e-9)


def test_resized_is_pixels_of_the_image_the_model_saw():
    # Qwen2.5-VL at the hub's limits sees a 640x512 frame as 644x504 px: x * 640/644, y * 512/504
    text = '[{"bbox_2d": [161, 126, 322, 252], "label": "needle driver"}]'
    got = one_in(text, "resized", (644, 504))
    assert corners(got) == pytest.approx((160, 128, 320, 256))
    assert corners(one_in(text, "resized", None)) == (161, 126, 322, 252)  # no size: pixels
    assert corners(one(text, "pixels")) == (161, 126, 322, 252)
    far = '[{"bbox_2d": [600, 10, 644, 504], "label": "stapler"}]'  # to the resized image's edge
    assert corners(one_in(far, "resized", (644, 504)))[2:] == pytest.approx((640, 512))


@pytest.mark.parametrize(
    "seen", [None, (0, 0), (644, 0), (-1, 5), ("a", "b"), (float("nan"), 1), (1, 2, 3), 7, "ab"]
)
def test_resized_without_a_usable_size_reads_pixels(seen):
    text = '[{"bbox_2d": [10, 20, 110, 220], "label": "needle driver"}]'
    assert corners(one_in(text, "resized", seen)) == (10, 20, 110, 220)


def test_resized_boxes_json_round_trips():
    text = boxes_json(BOXES, "resized", width=W, height=H, seen=(224, 196))
    answer = parse_boxes(text, W, H, "resized", (224, 196))
    for got, want in zip(answer.boxes, BOXES, strict=True):
        assert corners(got) == pytest.approx(corners(want), abs=1e-9)
    with pytest.raises(ValueError, match="size the model saw"):
        boxes_json(BOXES, "resized", width=W, height=H)


def test_boxes_json_is_the_prompts_format():
    assert json.loads(boxes_json(BOXES[:1])) == [
        {"label": "stapler", "bbox_2d": [10, 20, 110, 220]}
    ]
    assert parse_boxes(boxes_json(BOXES), W, H).boxes == BOXES  # exact in pixels
    with pytest.raises(ValueError, match="width and height"):
        boxes_json(BOXES, "gemini")


def test_gemini_json_auto_detected():
    text = boxes_json(BOXES, "gemini", width=W, height=H)
    got = parse_boxes(text, W, H).boxes  # auto: box_2d -> gemini
    assert [corners(b) for b in got] == [pytest.approx(corners(b)) for b in BOXES]


_json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
_json = st.recursive(
    _json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["label", "bbox_2d", "box_2d", "bbox", "boxes", "name", "x"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
_item = st.builds(
    lambda label, key, box: {"label": label, key: box},
    st.sampled_from([*TOOL_CLASSES, "scalpel", ""]) | _json_leaf,
    st.sampled_from(["bbox_2d", "box_2d", "bbox"]),
    st.lists(st.floats() | st.integers() | st.text(max_size=4), min_size=3, max_size=5),
)  # near-valid items: a tool name or not, a box of 3-5 numbers or strings
_frames = st.sampled_from(["auto", "pixels", "resized", "norm1000", "gemini"])
_sizes = st.integers(min_value=0, max_value=5000)
_seen = st.none() | st.tuples(_sizes, _sizes) | st.tuples(st.floats(), st.floats()) | _json_leaf


@settings(max_examples=300, deadline=None)
@given(st.text(), _sizes, _sizes, _frames, _seen)
def test_arbitrary_text_never_raises(text, width, height, frame, seen):
    answer = parse_boxes(text, width, height, frame, seen)
    assert isinstance(answer.boxes, tuple)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(_json, st.lists(_item, max_size=4)),
    st.integers(min_value=0, max_value=200),
    st.text(max_size=5),
    _sizes,
    _sizes,
    _frames,
    _seen,
)
def test_jsonish_text_never_raises_and_boxes_lie_in_the_frame(
    value, cut, prose, width, height, frame, seen
):
    text = json.dumps(value)
    text = prose + text[: len(text) - cut] if cut % 3 else prose + text  # also truncated
    answer = parse_boxes(text, width, height, frame, seen)
    for b in answer.boxes:
        assert 0 <= b.x1 < b.x2 <= width and 0 <= b.y1 < b.y2 <= height
        assert b.label in TOOL_CLASSES


_coord = st.floats(min_value=0, max_value=1, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TOOL_CLASSES), _coord, _coord, _coord, _coord)))
def test_any_boxes_round_trip_through_the_prompts_format(rows):
    candidates = (
        Box(label, min(a, b) * W, min(c, d) * H, max(a, b) * W, max(c, d) * H)
        for label, a, b, c, d in rows
    )
    boxes = tuple(b for b in candidates if b.x1 < b.x2 and b.y1 < b.y2)
    answer = parse_boxes(boxes_json(boxes), W, H)
    assert answer.boxes == boxes  # exact: pixels are written with full precision
    assert answer.reason == ("ok" if boxes else "empty list")
