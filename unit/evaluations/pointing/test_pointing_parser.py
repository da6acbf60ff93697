"""The pointing answer parser: never raises, round-trips the canonical format, fallback paths."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.evaluations.pointing.parser import (
    PointFrame,
    PointingAnswer,
    format_pointing,
    parse_in_frame,
    parse_pointing,
    parse_pointing_source,
)

W = H = 768
xs, ys = st.integers(0, W - 1), st.integers(0, H - 1)  # canvas px
names = st.sampled_from(["Liver", "Gallbladder", "L-hook Electrocautery", "Fat", "Ünïcode"])
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


def _check_invariants(ans: PointingAnswer, canvas: tuple[int, int] = (W, H)) -> None:
    assert isinstance(ans, PointingAnswer)
    if ans.ok:
        assert ans.present in (0, 1)
    else:
        assert ans.present is None and ans.point is None and ans.reason
    if ans.point is not None:
        assert ans.present == 1
        x, y = ans.point
        assert type(x) is int and type(y) is int
        assert 0 <= x < canvas[0] and 0 <= y < canvas[1]
    json.dumps(ans.to_json())
    assert PointingAnswer.from_json(ans.to_json()) == ans


@settings(max_examples=300)
@given(st.text())
def test_never_raises_on_text(text: str) -> None:
    _check_invariants(parse_pointing(text))


@settings(max_examples=200)
@given(json_values)
def test_never_raises_on_json_values(value) -> None:
    text = json.dumps(value)
    _check_invariants(parse_pointing(text))
    _check_invariants(parse_pointing(f"Answer: {text} done"))
    _check_invariants(parse_pointing(value))  # not even a string


@settings(max_examples=300)
@given(json_values, json_values, st.sampled_from(["", "```json\n", "Sure! "]))
def test_never_raises_on_answer_shaped_json(present, point, prefix: str) -> None:
    text = prefix + json.dumps({"name": "Liver", "present": present, "point_canvas": point})
    ans = parse_pointing(text)
    _check_invariants(ans)
    _check_invariants(parse_pointing(text.replace("{", "", 1)))  # broken JSON -> regex path


@given(names, st.sampled_from([0, 1]), xs, ys)
def test_round_trip(name: str, present: int, x: int, y: int) -> None:
    ans = parse_pointing(format_pointing(name, present, (x, y)))
    assert ans == PointingAnswer(present, (x, y) if present else None, True, "json")


@given(
    names,
    st.sampled_from([0, 1]),
    xs,
    ys,
    st.sampled_from(
        [
            "```json\n{}\n```",
            "```\n{}\n```",
            "Here is my answer: {} Hope that helps.",
            "The liver is visible.\n\n{}",
            '{{"wrapper": 1}} then {}',
        ]
    ),
)
def test_round_trip_embedded(name: str, present: int, x: int, y: int, template: str) -> None:
    ans = parse_pointing(template.format(format_pointing(name, present, (x, y))))
    assert (ans.ok, ans.present, ans.point) == (True, present, (x, y) if present else None)
    assert ans.reason == "json-in-text"


@given(xs, ys, st.floats(-0.49, 0.49))
def test_round_trip_float_coordinates(x: int, y: int, jitter: float) -> None:
    fx, fy = min(max(x + jitter, 0.0), W - 1.0), min(max(y - jitter, 0.0), H - 1.0)
    text = json.dumps({"name": "Fat", "present": 1, "point_canvas": [fx, fy]})
    assert parse_pointing(text).point == (round(fx), round(fy)) == (x, y)


@given(xs, ys)
def test_regex_round_trip(x: int, y: int) -> None:
    broken = format_pointing("Liver", 1, (x, y))[:-1]  # missing closing brace: not JSON
    ans = parse_pointing(broken)
    assert (ans.ok, ans.present, ans.point, ans.reason) == (True, 1, (x, y), "regex")


@given(
    st.one_of(st.integers(-(10**6), -1), st.integers(W, 10**9)),
    ys,
    st.booleans(),
    st.sampled_from(["json", "regex"]),
)
def test_out_of_bounds_rejected(bad: int, good: int, swap: bool, path: str) -> None:
    point = [good, bad] if swap else [bad, good]
    text = json.dumps({"name": "Liver", "present": 1, "point_canvas": point})
    if path == "regex":
        text = text[:-1]
    ans = parse_pointing(text)
    assert (ans.ok, ans.present, ans.point) == (True, 1, None)
    assert "out of bounds" in ans.reason


def test_canvas_argument() -> None:
    text = format_pointing("Liver", 1, (300, 100))
    assert parse_pointing(text, canvas=(400, 200)).point == (300, 100)
    assert parse_pointing(text, canvas=(300, 200)).point is None
    assert parse_pointing(text, canvas=(400, 100)).point is None


def test_resized_frame_is_the_pixel_under_the_centre() -> None:
    # Qwen2.5-VL at the hub's limits sees the 768x768 canvas as 756x756 px: pixel i of it covers
    # canvas [i * 768/756, (i + 1) * 768/756); the canvas pixel of its centre is
    # floor((i + .5) * 768/756)
    frame = PointFrame("resized", (756, 756))
    assert frame.grid == (756, 756)
    text = format_pointing("Liver", 1, (378, 0))
    answer, written = parse_in_frame(parse_pointing, text, (W, H), frame)
    assert written == (378, 0) and answer.point == (384, 0)  # 378.5 * 768/756 = 384.5
    last = format_pointing("Liver", 1, (755, 755))
    assert parse_in_frame(parse_pointing, last, (W, H), frame)[0].point == (767, 767)
    beyond = format_pointing("Liver", 1, (756, 10))  # off the model's image
    answer, written = parse_in_frame(parse_pointing, beyond, (W, H), frame)
    assert answer.point is None and "out of bounds" in answer.reason and written is None


def test_norm1000_frame_is_per_mille_of_the_canvas() -> None:
    frame = PointFrame.norm1000()
    assert frame.grid == (1001, 1001)  # 0..1000 both included
    for said, canvas_px in (((500, 0), (384, 0)), ((1000, 1000), (767, 767)), ((1, 999), (0, 767))):
        text = format_pointing("Liver", 1, said)
        answer, written = parse_in_frame(parse_pointing, text, (W, H), frame)
        assert (answer.point, written) == (canvas_px, said)
    absent = format_pointing("Liver", 0, None)
    assert parse_in_frame(parse_pointing, absent, (W, H), frame) == (parse_pointing(absent), None)


def test_no_frame_is_the_parser_itself() -> None:
    for text in ('{"present":1,"point_canvas":[700,20]}', "garbage", "[3, 4]"):
        for parse in (parse_pointing, parse_pointing_source):
            assert parse_in_frame(parse, text, (W, H), None) == (parse(text, (W, H)), None)


def test_point_frame_refuses_a_bad_frame() -> None:
    with pytest.raises(ValueError):
        PointFrame("pixels", (10, 10))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        PointFrame("resized", (0, 10))


@settings(max_examples=200)
@given(
    json_values,
    json_values,
    st.sampled_from(["resized", "norm1000"]),
    st.integers(1, 4000),
    st.integers(1, 4000),
)
def test_frames_never_raise_and_land_on_the_canvas(present, point, name, rw, rh) -> None:
    frame = PointFrame(name, (rw, rh)) if name == "resized" else PointFrame.norm1000()
    text = json.dumps({"present": present, "point_canvas": point})
    for parse in (parse_pointing, parse_pointing_source):
        answer, _ = parse_in_frame(parse, text, (854, 480), frame)
        if answer.point is not None:
            x, y = answer.point
            assert 0 <= x < 854 and 0 <= y < 480


def test_format_pointing() -> None:
    assert format_pointing("Liver", 1, (384, 400)) == (
        '{"name":"Liver","present":1,"point_canvas":[384,400]}'
    )
    assert format_pointing("Liver", 0, None) == '{"name":"Liver","present":0,"point_canvas":null}'
    assert format_pointing("Liver", 0, (1, 2)).endswith('"point_canvas":null}')
    with pytest.raises(ValueError):
        format_pointing("Liver", 2, None)


@pytest.mark.parametrize(
    ("text", "present", "point", "reason"),
    [
        # 1. strict JSON
        ('{"name":"Liver","present":1,"point_canvas":[384,400]}', 1, (384, 400), "json"),
        ('  {"present": 0, "point_canvas": null}\n', 0, None, "json"),
        ('{"present": 0, "point_canvas": [5, 5]}', 0, None, "json"),  # point ignored
        ('{"present": true, "point_canvas": [0, 767]}', 1, (0, 767), "json"),
        ('{"present": false}', 0, None, "json"),
        ('{"present": "0"}', 0, None, "json"),
        ('{"present": " YES ", "point_canvas": [1, 2]}', 1, (1, 2), "json"),
        ('{"present": "no"}', 0, None, "json"),
        ('{"present": 1.0, "point_canvas": [766.6, 0.2]}', 1, (767, 0), "json"),
        ('{"present": "yes", "point_canvas": [10.6, 20.2]}', 1, (11, 20), "json"),
        ('{"present": 1, "point_canvas": [10.5, 20.5]}', 1, (11, 21), "json"),  # halves round up
        ('{"present": 1}', 1, None, "json; point missing"),
        ('{"present": 1, "point_canvas": null}', 1, None, "json; point missing"),
        ('{"present": 1, "point_canvas": [1]}', 1, None, "json; point malformed"),
        ('{"present": 1, "point_canvas": [1, 2, 3]}', 1, None, "json; point malformed"),
        ('{"present": 1, "point_canvas": ["1", "2"]}', 1, None, "json; point malformed"),
        ('{"present": 1, "point_canvas": [true, 2]}', 1, None, "json; point malformed"),
        ('{"present": 1, "point_canvas": {"x": 1, "y": 2}}', 1, None, "json; point malformed"),
        ('{"present": 1, "point_canvas": [NaN, 2]}', 1, None, "json; point malformed"),
        ('{"present": 1, "point_canvas": [Infinity, 2]}', 1, None, "json; point malformed"),
        ('{"present": 1, "point_canvas": [1e400, 2]}', 1, None, "json; point malformed"),
        ('{"present": 1, "point_canvas": [768, 2]}', 1, None, "json; point out of bounds"),
        ('{"present": 1, "point_canvas": [767.4, 2]}', 1, None, "json; point out of bounds"),
        ('{"present": 1, "point_canvas": [-1, 2]}', 1, None, "json; point out of bounds"),
        ('{"present": 1, "point_canvas": [-0.2, 2]}', 1, None, "json; point out of bounds"),
        ('{"present": 1, "point_canvas": [1e300, 2]}', 1, None, "json; point out of bounds"),
        (
            '{"present": 1, "point_canvas": [' + "9" * 200 + ", 2]}",
            1,
            None,
            "json; point out of bounds",
        ),
        # 2. first JSON object in the text
        (
            '```json\n{"name":"Liver","present":1,"point_canvas":[384,400]}\n```',
            1,
            (384, 400),
            "json-in-text",
        ),
        ('Answer: {"present": 0, "point_canvas": null}.', 0, None, "json-in-text"),
        ('{"note": {"x": 1}} {"present": 1, "point_canvas": [3, 4]}', 1, (3, 4), "json-in-text"),
        ('[{"present": 1, "point_canvas": [3, 4]}]', 1, (3, 4), "json-in-text"),
        ('{"answer": {"present": 1, "point_canvas": [3, 4]}}', 1, (3, 4), "json-in-text"),
        # 3. regex over JSON-ish key/value pairs
        ('{"present": 1, "point_canvas": [12, 34],}', 1, (12, 34), "regex"),  # trailing comma
        ("{'present': 1, 'point_canvas': [12.7, 34]}", 1, (13, 34), "regex"),  # Python dict
        ('"present": true, "point_canvas": [ 5 , 6 ]', 1, (5, 6), "regex"),
        ('"present": "no", "point_canvas": [5, 6]', 0, None, "regex"),
        ('"present": 1, "point_canvas": null', 1, None, "regex; point missing"),
        ('"present": 1 and no point', 1, None, "regex; point missing"),
        ('"present": 1, "point_canvas": [x, y]', 1, None, "regex; point malformed"),
        ('"present": 1, "point_canvas": [800, 6]', 1, None, "regex; point out of bounds"),
        ('"present": 1, "point_canvas": [-3, 6]', 1, None, "regex; point out of bounds"),
    ],
)
def test_parsed_examples(text: str, present: int, point, reason: str) -> None:
    assert parse_pointing(text) == PointingAnswer(present, point, True, reason)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\t",
        "I cannot tell",
        "present: 1",  # no JSON-ish key
        "Present: yes, at (100, 200)",
        "{}",
        "{",
        "}{",
        "null",
        "[1, 2]",
        '{"present": 2, "point_canvas": [1, 2]}',
        '{"present": 10}',
        '{"present": 1.5}',
        '{"present": "maybe"}',
        '{"present": null}',
        '{"present": NaN}',
        '{"present": [1]}',
        '{"name": "Liver", "point_canvas": [1, 2]}',
        '"present": maybe',
        '{"present": "true story", "point_canvas": [1, 2]}',  # JSON said it: no regex rescue
        '{"present": "1.0"}',
        "[" * 100_000,
        "{" * 100_000,
        '{"a":' * 5_000 + "1" + "}" * 5_000,
        "x" * 1_000_000,
        "9" * 5_000,
        "\x00\ud800",
    ],
)
def test_unparsable(text: str) -> None:
    ans = parse_pointing(text)
    _check_invariants(ans)
    assert (ans.ok, ans.present, ans.point) == (False, None, None)
    assert ans.reason


@pytest.mark.parametrize("value", [None, 1, 1.0, b'{"present": 1}', ["x"], {"present": 1}])
def test_non_string_input(value) -> None:
    ans = parse_pointing(value)
    assert not ans.ok and ans.reason.startswith("not text")


def test_only_first_20k_characters_are_read() -> None:
    answer = format_pointing("Liver", 1, (1, 2))
    assert parse_pointing(" " * 100 + answer).ok
    assert not parse_pointing("x" * 20_000 + answer).ok


def test_to_json() -> None:
    ans = parse_pointing('{"present": 1, "point_canvas": [3, 4]}')
    assert ans.to_json() == {"present": 1, "point": [3, 4], "ok": True, "reason": "json"}


# ---- the original's parser (`--compat source`; golden cases in test_pointing_source.py) ---------
SOURCE_CANVAS = (854, 480)  # (width, height) px: the frame is the canvas there


def _check_source(ans: PointingAnswer) -> None:
    """Always an answer: present 0/1, never unparsable; a point lies on the canvas (it may sit
    beside present 0, as the original keeps it)."""
    assert isinstance(ans, PointingAnswer) and ans.ok and ans.present in (0, 1)
    if ans.point is not None:
        x, y = ans.point
        assert type(x) is int and type(y) is int
        assert 0 <= x < SOURCE_CANVAS[0] and 0 <= y < SOURCE_CANVAS[1]
    assert PointingAnswer.from_json(json.loads(json.dumps(ans.to_json()))) == ans


@settings(max_examples=300)
@given(st.text())
def test_source_never_raises_on_text(text: str) -> None:
    _check_source(parse_pointing_source(text, SOURCE_CANVAS))


@settings(max_examples=300)
@given(json_values, json_values, st.sampled_from(["", "```json\n", "Sure! "]))
def test_source_never_raises_on_answer_shaped_json(present, point, prefix: str) -> None:
    text = prefix + json.dumps({"name": "Liver", "present": present, "point_canvas": point})
    _check_source(parse_pointing_source(text, SOURCE_CANVAS))
    _check_source(parse_pointing_source(json.loads(json.dumps(present)), SOURCE_CANVAS))


@given(names, st.sampled_from([0, 1]), st.integers(0, 853), st.integers(0, 479))
def test_source_reads_the_canonical_answer(name: str, present: int, x: int, y: int) -> None:
    ans = parse_pointing_source(format_pointing(name, present, (x, y)), SOURCE_CANVAS)
    assert (ans.present, ans.point) == (present, (x, y) if present else None)
