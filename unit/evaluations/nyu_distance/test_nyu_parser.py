"""The distance parser: never raises, units round-trip, refusals and non-answers give None."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.evaluations.nyu_distance.parser import (
    UNIT_METRES,
    format_distance,
    parse_answer,
    parse_distance,
)

metres = st.floats(0.01, 50.0, allow_nan=False)
SPELLINGS = {
    "m": ["m", " m", " meters", " metres", " meter", "m."],
    "cm": [" cm", "cm", " centimeters", " centimetres"],
    "mm": [" mm", " millimeters"],
    "ft": [" ft", " feet", " foot", "'", "ft"],
    "in": [" inches", " inch", '"', " in"],
}
unit_spellings = st.sampled_from([(u, s) for u, ss in SPELLINGS.items() for s in ss])
wrappers = st.sampled_from(
    ["{}", "{}.", "Approximately {}", "The distance is about {}.", "**{}**", "~{}", "≈ {}",
     "Distance: {}", "The 3D Euclidean distance between A and B is {}", "{}\n", "  {}  "]
)  # fmt: skip


def _ok(value: float | None) -> None:
    assert value is None or (isinstance(value, float) and math.isfinite(value) and value >= 0)


@settings(max_examples=400)
@given(st.text())
def test_never_raises_on_text(text: str) -> None:
    _ok(parse_distance(text))


@settings(max_examples=300)
@given(st.text(alphabet="0123456789.,-– mcftinesr'\"~bwaheo"))
def test_never_raises_on_number_soup(text: str) -> None:
    _ok(parse_distance(text))


@pytest.mark.parametrize("value", [None, 1.5, 3, b"1.5", ["1.5"], {"d": 1}])
def test_not_text_is_unparsable(value) -> None:
    assert parse_distance(value) is None


@given(metres, unit_spellings, wrappers)
def test_each_unit_round_trips(m: float, unit_spelling, wrapper: str) -> None:
    unit, spelling = unit_spelling
    value = m / UNIT_METRES[unit]
    text = wrapper.format(f"{value:.6g}{spelling}")
    got = parse_answer(text)
    assert got.unit == unit, text
    assert got.metres == pytest.approx(float(f"{value:.6g}") * UNIT_METRES[unit], rel=1e-12)


@given(metres, wrappers)
def test_bare_numbers_are_metres(m: float, wrapper: str) -> None:
    text = wrapper.format(f"{m:.4f}")
    assert parse_distance(text) == pytest.approx(float(f"{m:.4f}"), rel=1e-12), text


@given(st.floats(0.2, 1e3, allow_nan=False))
def test_oracle_format_is_exact(m: float) -> None:
    assert parse_distance(format_distance(m)) == m


@given(st.integers(1, 9), st.integers(0, 11))
def test_feet_and_inches(feet: int, inches: int) -> None:
    expected = (feet + inches / 12) * 0.3048
    for text in (f"{feet}'{inches}\"", f"{feet} ft {inches} in", f"{feet} feet {inches} inches"):
        assert parse_distance(text) == pytest.approx(expected), text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.5", 1.5),
        ("1.5 m", 1.5),
        ("1.5m", 1.5),
        ("150 cm", 1.5),
        ("1500 mm", 1.5),
        ("5 feet", 1.524),
        ("5 ft", 1.524),
        ("5'", 1.524),
        ("60 inches", 1.524),
        ("1.5-2 m", 1.75),  # a range: its midpoint
        ("1.5 – 2.0 meters", 1.75),
        ("1.5 to 2 m", 1.75),
        ("between 1.5 and 2 m", 1.75),
        ("100-200 cm", 1.5),
        ("150 cm - 2 m", 1.75),
        ("1,5 m", 1.5),
        ("1,500 mm", 1.5),
        ("Approximately 2.1 meters (about 7 feet)", 2.1),  # the first number with a unit
        ("The distance between 2 points is 1.5 m", 1.5),
        ("Points at (320,240) and (450,300): 1.2 m", 1.2),
        ("The 3D distance is about 2.5", 2.5),  # "3D" is not a number
        ("In this 640x480 image: 2", 2.0),
        ("I can't be sure, but roughly 2.5 meters.", 2.5),  # a hedge with a number and unit
        ("0", 0.0),
    ],
)
def test_examples(text: str, expected: float) -> None:
    assert parse_distance(text) == pytest.approx(expected), parse_answer(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "I cannot estimate distances from a single image.",
        "Sorry, I can't see 2 points clearly.",
        "I'm unable to determine this without a reference; I see 2 marks.",
        "Unknown",
        "N/A",
        "-1.5 m",  # not a distance
        "inf",
        "nan meters",
        "The 3D distance.",
        "1e999",
        "12D",
    ],
)
def test_refusals_and_non_answers_are_unparsable(text: str) -> None:
    assert parse_distance(text) is None, parse_answer(text)


# inputs that would backtrack catastrophically in a careless pattern; their parse time is
# benchmarks/test_nyu_speed.py's, here only what they parse to
BACKTRACKING = {"1," * 3000: 1.0, "1 " * 3000 + "x": 1.0, "1.1.1." * 1000: 1.1, "- " * 3000: None}
BACKTRACKING["5'" * 2000] = 5 * UNIT_METRES["ft"]


def test_long_answers_are_cut() -> None:
    text = "blah 3D " * 5000 + "1.5 m"
    assert parse_distance(text) is None  # beyond MAX_CHARS
    assert parse_distance("1" * 10_000) is None  # overflows to inf: not a distance
    for bad, metres in BACKTRACKING.items():
        assert parse_distance(bad) == pytest.approx(metres), bad[:12]
