"""The distance parser's whole answer, not only its metres: the unit and the rule that picked the
number are recorded per outcome (prediction["parsed_by"], task.py), so each case below checks all
three. Expectations follow from the module docstring's rules; arithmetic in the comments."""

from __future__ import annotations

import re

import pytest

from support.evaluations.nyu_distance.parser import (
    _QUANTITY_RE,
    MAX_CHARS,
    MAX_METRES,
    MAX_QUANTITIES,
    DistanceAnswer,
    _quantity,
    parse_answer,
    parse_first_number,
)

UNIT = "first number with a unit"
BARE = "first number"
SOURCE = "first number (source)"
IMPLAUSIBLE = "implausible distance (above 1000 m)"  # MAX_METRES = 1e3 m


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.5", DistanceAnswer(2.5, None, BARE)),
        ("about 2.5 m", DistanceAnswer(2.5, "m", UNIT)),
        ("150 cm", DistanceAnswer(1.5, "cm", UNIT)),  # 150 x 0.01
        ("1,5 m", DistanceAnswer(1.5, "m", UNIT)),  # decimal comma
        ("12,25 m", DistanceAnswer(12.25, "m", UNIT)),
        ("1,234.5 mm", DistanceAnswer(1.2345, "mm", UNIT)),  # thousands: 1234.5 x 0.001
        ("1,000,000 mm", DistanceAnswer(1000.0, "mm", UNIT)),  # 1e6 x 0.001 = 1000 m: the limit
        ("1,234,567 mm", DistanceAnswer(None, "mm", IMPLAUSIBLE)),  # 1234.567 m
        ("5 ft 6.5 in", DistanceAnswer((5 + 6.5 / 12) * 0.3048, "ft", UNIT)),  # 1.6891 m
        ("2 m 30 in", DistanceAnswer(2.0, "m", UNIT)),  # inches only follow feet
        ("1.5-2", DistanceAnswer(1.75, None, BARE)),  # (1.5 + 2) / 2
        ("100 cm to 120", DistanceAnswer(1.1, "cm", UNIT)),  # the unit before covers both: 110 cm
        ("2 m - 150 cm", DistanceAnswer(1.75, "cm", UNIT)),  # (2 + 1.5) / 2, the last unit
        ("-1.5 m or 2 m", DistanceAnswer(2.0, "m", UNIT)),  # a negative number is skipped
        ("Sorry, roughly 2 m", DistanceAnswer(2.0, "m", UNIT)),  # a unit beats a hedge
        ("I cannot say; maybe 2", DistanceAnswer(None, None, "refusal")),
        ("no idea", DistanceAnswer(None, None, "no distance")),
        ("", DistanceAnswer(None, None, "no distance")),
        ("1000", DistanceAnswer(1000.0, None, BARE)),  # MAX_METRES itself is accepted
        ("1000.001 m", DistanceAnswer(None, "m", IMPLAUSIBLE)),
        ("1001", DistanceAnswer(None, None, IMPLAUSIBLE)),
        ("100000 cm", DistanceAnswer(1000.0, "cm", UNIT)),  # 1e5 x 0.01 = 1000 m
        ("1e308", DistanceAnswer(None, None, IMPLAUSIBLE)),  # the docstring's example
        # not finite: the docstring's "a 5,000-digit number", and "1e309" (float overflow), are
        # implausible too, not skipped in favour of a later number
        ("1" * 5000, DistanceAnswer(None, None, IMPLAUSIBLE)),
        ("1e309 m or 2 m", DistanceAnswer(None, "m", IMPLAUSIBLE)),
        ("1.5e308 - 1.7e308 m", DistanceAnswer(None, "m", IMPLAUSIBLE)),  # the sum overflows
    ],
)
def test_parse_answer_value_unit_and_rule(text: str, expected: DistanceAnswer) -> None:
    got = parse_answer(text)
    assert (got.unit, got.reason) == (expected.unit, expected.reason)
    if expected.metres is None:
        assert got.metres is None and not got.ok
    else:
        assert got.metres == pytest.approx(expected.metres, rel=1e-12) and got.ok


@pytest.mark.parametrize("value", [None, 2.5, b"2.5 m"])
def test_not_text(value) -> None:
    assert parse_answer(value) == DistanceAnswer(None, None, "not text", "none")
    assert parse_first_number(value) == DistanceAnswer(None, None, "not text", "source-none")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.5 m", DistanceAnswer(2.5, None, SOURCE, "source-number")),  # the source reads no unit
        ("-1.5", DistanceAnswer(1.5, None, SOURCE, "source-number")),
        ("1000", DistanceAnswer(1000.0, None, SOURCE, "source-number")),
        ("1001", DistanceAnswer(None, None, IMPLAUSIBLE, "source-implausible")),
        # float() gives inf
        ("1" * 400, DistanceAnswer(None, None, IMPLAUSIBLE, "source-implausible")),
        ("unknown", DistanceAnswer(None, None, "no number", "source-none")),
        ("", DistanceAnswer(None, None, "no number", "source-none")),
    ],
)
def test_parse_first_number_value_and_rule(text: str, expected: DistanceAnswer) -> None:
    assert parse_first_number(text) == expected


def test_only_the_first_max_chars_are_read() -> None:
    assert (MAX_CHARS, MAX_METRES) == (4000, 1e3)
    pad = MAX_CHARS - len("2 cm")
    # "2 cm" ends at character 4000: read with its unit, 0.02 m
    assert parse_answer(" " * pad + "2 cm") == DistanceAnswer(0.02, "cm", UNIT, "converted")
    # one character later the "m" is cut: "2 c" is a bare 2 m
    assert parse_answer(" " * (pad + 1) + "2 cm") == DistanceAnswer(2.0, None, BARE, "number")


def test_only_the_first_max_quantities_are_examined() -> None:
    assert MAX_QUANTITIES == 64
    # 63 bare numbers, then the 64th quantity has a unit: it wins
    assert parse_answer("1 " * 63 + "2 m") == DistanceAnswer(2.0, "m", UNIT, "metres")
    # 64 bare numbers fill the list: the unit after them is never seen
    assert parse_answer("1 " * 64 + "2 m") == DistanceAnswer(1.0, None, BARE, "number")


@pytest.mark.parametrize("i", [1, 2, 7])
def test_quantity_pattern_reads_number_unit_and_inches(i: int) -> None:
    # _QUANTITY_RE is built from _quantity(1..4) at import; each piece is checked on its own
    pattern = re.compile(_quantity(i), re.IGNORECASE)
    cases = {
        "150 cm": ("150", "cm", None),
        "1,500 mm": ("1,500", "mm", None),
        "3.5 metres": ("3.5", "m", None),
        "60 inches": ("60", "in", None),
        "5'6\"": ("5", "ft", "6"),
        "5 ft 6.5 in": ("5", "ft", "6.5"),
        "2.5": ("2.5", None, None),
    }
    for text, (number, unit, inch) in cases.items():
        m = pattern.fullmatch(text)
        assert m is not None, text
        assert m.group(f"num{i}") == number, text
        units = [u for u in ("mm", "cm", "m", "ft", "in") if m.group(f"{u}{i}")]
        assert units == ([unit] if unit else []), text
        assert m.group(f"inch{i}") == inch, text
    assert pattern.fullmatch("5 minutes") is None  # "m" followed by letters is no unit
    if i <= 4:
        assert _quantity(i) in _QUANTITY_RE.pattern
