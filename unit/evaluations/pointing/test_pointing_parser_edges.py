"""Edges of the pointing parser: exact reasons, the 20k-character and 64-start limits, the canvas
bounds on each axis, the regex rescue rules and the original's (`--compat source`) reading.

Canvas px: x right, y down, origin top-left; a 768x768 canvas takes x, y in [0, 767] (module
docstring of support/evaluations/pointing/parser.py).
"""

from __future__ import annotations

import json

import pytest

from support.evaluations.pointing.parser import (
    MAX_CHARS,
    MAX_OBJECT_STARTS,
    PointingAnswer,
    format_pointing,
    parse_pointing,
    parse_pointing_source,
)

SOURCE_CANVAS = (854, 480)  # (width, height) px: the original's canvas is the frame


# ---- the writeup parser --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        (" \n\t ", "empty"),
        ("I cannot tell", "no present field"),
        ('{"name": "Liver"}', "no present field"),
        # a well-formed object said "present" with an unusable value: no regex rescue
        ('{"present": "maybe", "point_canvas": [1, 2]}', "invalid present value"),
        # the same from an embedded object, though a later pair would read as present
        ('Answer: {"present": "maybe"} and "present": 1', "invalid present value"),
        ('{"a": 1} then {"present": 7}. "present": 1', "invalid present value"),
        (None, "not text: NoneType"),
        (12, "not text: int"),
        (b'{"present": 1}', "not text: bytes"),
    ],
)
def test_unparsable_reasons(text: object, reason: str) -> None:
    assert parse_pointing(text) == PointingAnswer(None, None, False, reason)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # adjacent braces: the embedded object starts one character after a failed start
        ('{{"present": 1, "point_canvas": [3, 4]}', (1, (3, 4), "json-in-text")),
        ('{{"present": 0}', (0, None, "json-in-text")),
        # the first embedded object with a usable "present" wins, not the last
        (
            'A: {"present": 1, "point_canvas": [1, 2]} B: {"present": 0}',
            (1, (1, 2), "json-in-text"),
        ),
        (
            'x {"a": 1} {"present": 1, "point_canvas": [1, 2]} {"present": 0}',
            (1, (1, 2), "json-in-text"),
        ),
        # an object starting at index 1 of the text
        ('A{"present": 1, "point_canvas": [3, 4]}', (1, (3, 4), "json-in-text")),
        # an object without "present" before the answer does not stop the regex
        ('{"name": "Liver"} "present": 1, "point_canvas": [3, 4]', (1, (3, 4), "regex")),
        # the regex: present words, point null/None, quotes of either kind
        ("{'present': 'yes', 'point_canvas': None", (1, None, "regex; point missing")),
        ('"present": TRUE, "point_canvas": [7, 8]', (1, (7, 8), "regex")),
        ('"present": "0"', (0, None, "regex")),
        ('"present": false, "point_canvas": [7, 8]', (0, None, "regex")),
        # "1.5" is not a present word: the lookahead stops "1" followed by "."
        ('"present": 1.5, "point_canvas": [7, 8]', None),
        ('"present": 10', None),
        # a point key whose value is not a pair nor null
        ('"present": 1, "point_canvas": "centre"', (1, None, "regex; point malformed")),
        # 33 digits exceed the regex's 32
        (
            '"present": 1, "point_canvas": [' + "1" * 33 + ", 2]",
            (1, None, "regex; point malformed"),
        ),
        # floats round half up on the regex path too: 10.5 -> 11, 2.49 -> 2
        ('"present": 1, "point_canvas": [10.5, 2.49]', (1, (11, 2), "regex")),
    ],
)
def test_embedded_and_regex_paths(text: str, expected: tuple | None) -> None:
    ans = parse_pointing(text)
    got = (ans.ok, ans.present, ans.point, ans.reason)
    if expected is None:
        assert got == (False, None, None, "no present field")
    else:
        assert got == (True, *expected)


@pytest.mark.parametrize(
    ("point", "canvas", "expected"),
    [
        # bounds [0, w-1] x [0, h-1] on each axis separately; canvas (w, h) = (400, 200) px
        ([0, 0], (400, 200), (0, 0)),
        ([399, 199], (400, 200), (399, 199)),
        ([399, 0], (400, 200), (399, 0)),
        ([0, 199], (400, 200), (0, 199)),
        ([400, 0], (400, 200), None),
        ([0, 200], (400, 200), None),
        ([199, 0], (200, 400), (199, 0)),  # a tall canvas: x is bounded by the width
        ([0, 399], (200, 400), (0, 399)),
        ([200, 0], (200, 400), None),
        ([-0.4, 0], (400, 200), None),  # below 0 before rounding: out of bounds
        ([0, -0.4], (400, 200), None),
        ([398.5, 198.5], (400, 200), (399, 199)),  # halves round up
        ([0.49, 0.5], (400, 200), (0, 1)),
        ([1.0, 2.0], (400, 200), (1, 2)),  # integral floats
    ],
)
def test_point_bounds_per_axis(point: list, canvas: tuple[int, int], expected) -> None:
    ans = parse_pointing(json.dumps({"present": 1, "point_canvas": point}), canvas)
    assert ans.point == expected
    assert ans.reason == ("json" if expected else "json; point out of bounds")


@pytest.mark.parametrize(
    ("value", "present"),
    [
        *[(True, 1), (False, 0), (0, 0), (1, 1), (0.0, 0), (1.0, 1), ("1", 1), ("TRUE", 1)],
        *[("false", 0), (" no ", 0), ("Yes", 1), (2, None), (-1, None), (0.5, None), ("", None)],
    ],
)
def test_present_values(value: object, present: int | None) -> None:
    ans = parse_pointing(json.dumps({"present": value}))
    assert ans.present == present
    assert ans.ok is (present is not None)


def test_the_first_20k_characters_are_read() -> None:
    answer = '"present": 1'  # regex path: the value is the last character
    # the "1" is character 20 000 (index 19 999): read
    assert parse_pointing("x" * (MAX_CHARS - len(answer)) + answer).present == 1
    # one more filler character pushes it to index 20 000: cut off
    ans = parse_pointing("x" * (MAX_CHARS - len(answer) + 1) + answer)
    assert (ans.ok, ans.reason) == (False, "no present field")
    assert MAX_CHARS == 20_000


def test_only_64_object_starts_are_tried() -> None:
    answer = format_pointing("Liver", 1, (3, 4))
    # 63 stray "{" then the answer: its "{" is the 64th start, decoded as embedded JSON
    ans = parse_pointing("{ " * (MAX_OBJECT_STARTS - 1) + answer)
    assert (ans.point, ans.reason) == ((3, 4), "json-in-text")
    # 64 stray starts: the answer's "{" is the 65th, not tried; the regex reads the pairs
    ans = parse_pointing("{ " * MAX_OBJECT_STARTS + answer)
    assert (ans.point, ans.reason) == ((3, 4), "regex")
    assert MAX_OBJECT_STARTS == 64


def test_answer_record_round_trip() -> None:
    assert PointingAnswer(0, None, True).reason == ""
    # a record written without "reason" (older runs) reads back with an empty one
    assert PointingAnswer.from_json({"present": 1, "point": [3, 4], "ok": 1}) == PointingAnswer(
        1, (3, 4), True, ""
    )
    assert PointingAnswer.from_json({"ok": 0}) == PointingAnswer(None, None, False, "")


def test_format_pointing_keeps_unicode_names() -> None:
    text = format_pointing("Ünïcode", 1, (1.0, 2.0))  # type: ignore[arg-type]
    assert text == '{"name":"Ünïcode","present":1,"point_canvas":[1,2]}'
    assert format_pointing("Fat", True, (5, 6)) == '{"name":"Fat","present":1,"point_canvas":[5,6]}'
    assert format_pointing("Fat", 1, None) == '{"name":"Fat","present":1,"point_canvas":null}'
    with pytest.raises(ValueError, match="present must be 0 or 1, got -1"):
        format_pointing("Fat", -1, None)


# ---- the original's parser (eval/parser.py:35-78 of fallcat/llm_cholec_organ) -------------------
@pytest.mark.parametrize(
    ("text", "present", "point", "reason"),
    [
        ('{"present": 1, "point_canvas": [0, 0]}', 1, (0, 0), "source; json"),
        ('{"present": 1, "point_canvas": [10, 480]}', 1, None, "source; json"),  # y = h
        ('{"present": 1, "point_canvas": [10, -1]}', 1, None, "source; json"),
        ('{"present": "true"}', 1, None, "source; json"),  # 47-48: "true" is a yes
        ('{"present": "no", "point_canvas": [5, 6]}', 0, (5, 6), "source; json"),
        ('{"present": 1.0}', 1, None, "source; json"),  # 45-46: int(1.0) == 1
        ('{"present": 0.9}', 0, None, "source; json"),  # int(0.9) == 0
        ('{"present": [1]}', 0, None, "source; json"),  # another type: 0
        ('{"present": 1, "point_canvas": [null, 5]}', 1, None, "source; json"),  # round(None)
        # 58 + 62: round(-Infinity) overflows: the outer handler, then the regex finds no pair
        ('{"present": 1, "point_canvas": [-Infinity, 5]}', 1, None, "source; no point in text"),
        # 46: int(Infinity) overflows: present falls back to its default 0, the regex reads [1,2]
        ('{"present": Infinity, "x": [1, 2]}', 1, (1, 2), "source; coordinates in text"),
        ('{"present": -Infinity}', 0, None, "source; no point in text"),
        ("The point is [0, 0].", 1, (0, 0), "source; coordinates in text"),
        ("At [853, 479]", 1, (853, 479), "source; coordinates in text"),
        ("At [10, 480]", 0, None, "source; no point in text"),
        ("At [ 12 ,34 ]", 1, (12, 34), "source; coordinates in text"),
        # more digits than int() reads (4300): no point, absent
        ("[" + "9" * 5000 + ", 5]", 0, None, "source; no point in text"),
        ("[5, " + "9" * 5000 + "]", 0, None, "source; no point in text"),
        (None, 0, None, "source; no point in text"),
    ],
)
def test_source_reading(text: object, present: int, point, reason: str) -> None:
    ans = parse_pointing_source(text, SOURCE_CANVAS)
    assert ans == PointingAnswer(present, point, True, reason)


def test_source_canvas_is_width_then_height() -> None:
    # (width, height) = (100, 50) px: x = 60 fits the width, y = 60 does not fit the height
    assert parse_pointing_source("[60, 10]", (100, 50)).point == (60, 10)
    assert parse_pointing_source("[10, 60]", (100, 50)).point is None
    text = '{"present": 1, "point_canvas": [60, 10]}'
    assert parse_pointing_source(text, (100, 50)).point == (60, 10)
    assert parse_pointing_source(text, (50, 100)).point is None


def test_point_that_is_a_number_is_malformed() -> None:
    ans = parse_pointing('{"present": 1, "point_canvas": 5}')
    assert ans == PointingAnswer(1, None, True, "json; point malformed")


@pytest.mark.parametrize(
    ("canvas", "error", "source_error"),
    [(None, "TypeError", "TypeError"), ((768,), "ValueError", "IndexError")],
)
def test_never_raises_on_a_bad_canvas(canvas, error: str, source_error: str) -> None:
    # the safety nets of parse_pointing and parse_pointing_source: a caller's bad canvas (None; a
    # 1-tuple that cannot unpack to (w, h) or index [1]) gives an answer naming the error
    ans = parse_pointing('{"present": 1, "point_canvas": [1, 2]}', canvas)
    assert ans == PointingAnswer(None, None, False, f"parser error: {error}")
    src = parse_pointing_source("[1, 2]", canvas)
    assert src == PointingAnswer(0, None, True, f"source; parser error: {source_error}")
