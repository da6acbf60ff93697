"""Parse a distance answer into metres. Model answers are untrusted text: this never raises.

Accepted: a bare number ("1.5", ".8", "1.5e0"), a number with a unit ("1.5 m", "1.5 meters",
"150 cm", "1500 mm", "5 feet", "5 ft", "5'", "60 inches", '60"'), feet and inches together
("5'6\"", "5 ft 6 in"), a decimal comma before a unit ("1,5 m") and thousands separators before a
unit ("1,500 mm"). Without a unit a number is metres, as the prompt asks.

Which number, when there are several:
  1. the first quantity with a unit ("Approximately 2.1 meters (about 7 feet)" -> 2.1 m);
  2. else, unless the answer reads as a refusal ("I can't...", "unable", "sorry"), the first bare
     number ("2.5", "The 3D distance is 2.5").
A range ("1.5-2 m", "1.5 to 2 meters", "between 1.5 and 2 m") gives its midpoint. Numbers glued
to letters ("3D", "640x480", "A2") are not quantities. A negative number ("-1.5 m") is not a
distance and is skipped. No number, or a refusal without a number with a unit -> None
("unparsable"). A distance above MAX_METRES (or not finite: "1e308", a 5,000-digit number) is not
an indoor distance: None with the reason "implausible distance", under both rules, so the error
metrics stay finite.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from support.contract.provenance import ReadRule

MAX_CHARS = 4_000  # only this many leading characters of an answer are looked at
MAX_QUANTITIES = 64  # quantities examined per answer
MAX_METRES = 1e3  # m; a larger answer (NYU rooms are under 10 m deep) is unparsable

UNIT_METRES = {"m": 1.0, "cm": 0.01, "mm": 0.001, "ft": 0.3048, "in": 0.0254}
_UNIT_ALTERNATIVES = (
    ("mm", r"mm|millimet(?:er|re)s?"),
    ("cm", r"cm|centimet(?:er|re)s?"),
    ("m", r"m|met(?:er|re)s?"),
    ("ft", r"ft|foot|feet|'(?!')|’|′"),
    ("in", r"inch(?:es)?|in(?=\s*(?:$|[.,;:!?)\]*_`'\"]))|\"|”|″|''"),
)
_UNIT = "|".join(f"(?P<{name}{{i}}>{alt})" for name, alt in _UNIT_ALTERNATIVES)
_WORD_END = r"(?![^\W\d_])"  # not followed by a letter: "5 minutes" has no unit, "3D" no number
# a number: digits with an optional fraction and exponent (atomic: "12D" must not match "1");
# the comma forms (thousands "1,500", decimal comma "1,5") only right before a unit
_PLAIN = r"(?>\d+(?:\.\d+)?|\.\d+)(?>[eE][+-]?\d{1,3}(?!\d))?"
_COMMA = r"(?>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+,\d{1,2})"
_UNIT_AHEAD = r"(?=\s?(?:" + "|".join(alt for _, alt in _UNIT_ALTERNATIVES) + r")" + _WORD_END + ")"


def _quantity(i: int) -> str:
    """Quantity i: a number, then a unit (with inches after feet: 5'6") or no letter at all."""
    unit = _UNIT.replace("{i}", str(i))
    inches = rf"(?:\s?(?P<inch{i}>\d{{1,2}}(?:\.\d{{1,6}})?)\s?(?:inch(?:es)?|in\b|\"|”|″|''))?"
    number = rf"(?P<num{i}>{_COMMA}{_UNIT_AHEAD}|{_PLAIN})"
    return rf"{number}(?:\s?(?:{unit}){_WORD_END}{inches}|(?![^\W\d_]))"


_RANGE_SEP = r"\s*(?:-|–|—|to|~)\s*"
_QUANTITY_RE = re.compile(
    rf"(?<![\w.,])(?P<neg>[-−]\s?)?"
    rf"(?:between\s+{_quantity(3)}\s+and\s+{_quantity(4)}"
    rf"|{_quantity(1)}(?:{_RANGE_SEP}{_quantity(2)})?)",
    re.IGNORECASE,
)
_REFUSAL_RE = re.compile(
    r"\b(?:can(?:'|’)?t|cannot|can not|unable|not able|sorry|impossible|refuse|"
    r"(?:don(?:'|’)?t|do not) know|not possible|as an ai|n/a|unknown)\b",
    re.IGNORECASE,
)


# how an answer was read (support.contract.provenance): DistanceAnswer.rule
READ_RULES = (
    ReadRule("number", "primary", "a bare number, in metres as the prompt asks"),
    ReadRule("metres", "primary", "a number with a metre unit"),
    ReadRule("converted", "fallback", "a number in another unit (cm, mm, ft, in), converted"),
    ReadRule("range", "fallback", "a range (1.5-2 m): its midpoint"),
    ReadRule("refusal", "unread", "no number with a unit in a refusal: unparsable"),
    ReadRule("none", "unread", "no distance: unparsable"),
    ReadRule("implausible", "unread", f"above {MAX_METRES:g} m or not finite: unparsable"),
    ReadRule("source-number", "primary", "--compat source: the first number in the text"),
    ReadRule("source-none", "unread", "--compat source: no number: None"),
    ReadRule("source-implausible", "unread", f"--compat source, and above {MAX_METRES:g} m"),
)


@dataclass(frozen=True)
class DistanceAnswer:
    """A parsed answer: `metres` is None when unparsable; `unit` as written; `reason` says how;
    `rule` is the READ_RULES code of the rule that read it."""

    metres: float | None
    unit: str | None = None
    reason: str = ""
    rule: str = "none"

    @property
    def ok(self) -> bool:
        return self.metres is not None


@dataclass(frozen=True)
class _Quantity:
    metres: float
    unit: str | None
    range: bool = False  # the midpoint of a range


def parse_distance(text: Any) -> float | None:
    """The distance in metres an answer states, or None (see the module docstring)."""
    return parse_answer(text).metres


def parse_answer(text: Any) -> DistanceAnswer:
    """parse_distance with the unit found and the rule that picked the number."""
    if not isinstance(text, str):
        return DistanceAnswer(None, reason="not text", rule="none")
    text = text[:MAX_CHARS]
    quantities = []
    for match in _QUANTITY_RE.finditer(text):
        q = _to_quantity(match)
        if q is not None:
            quantities.append(q)
        if len(quantities) >= MAX_QUANTITIES:
            break
    if not quantities:
        return DistanceAnswer(None, reason="no distance", rule="none")
    with_unit = [q for q in quantities if q.unit is not None]
    if with_unit:
        q = with_unit[0]
        rule = "range" if q.range else ("metres" if q.unit == "m" else "converted")
        return _plausible(DistanceAnswer(q.metres, q.unit, "first number with a unit", rule))
    if _REFUSAL_RE.search(text):
        return DistanceAnswer(None, reason="refusal", rule="refusal")
    q = quantities[0]
    return _plausible(
        DistanceAnswer(q.metres, None, "first number", "range" if q.range else "number")
    )


def _plausible(answer: DistanceAnswer) -> DistanceAnswer:
    """`answer`, or unparsable when its distance is not finite or above MAX_METRES."""
    m = answer.metres
    if m is None or (math.isfinite(m) and m <= MAX_METRES):
        return answer
    rule = "source-implausible" if answer.rule.startswith("source-") else "implausible"
    return DistanceAnswer(None, answer.unit, f"implausible distance (above {MAX_METRES:g} m)", rule)


_FIRST_NUMBER_RE = re.compile(r"\d+\.?\d*")  # the original's pattern (Unicode digits included)


def parse_first_number(text: Any) -> DistanceAnswer:
    """`--compat source`: the original's rule (eval_nyu_distance.py, `query_vlm_distance`): the
    first run of digits with an optional point and fraction, in metres, whatever surrounds it
    ("-1.5" -> 1.5, "1,5" -> 1.0, ".8" -> 8.0, "3D: 2 m" -> 3.0); no digit -> None. Unlike the
    original, a number above MAX_METRES (or one too long to be finite) is None too."""
    if not isinstance(text, str):
        return DistanceAnswer(None, reason="not text", rule="source-none")
    found = _FIRST_NUMBER_RE.search(text.strip())
    if found is None:
        return DistanceAnswer(None, reason="no number", rule="source-none")
    try:
        value = float(found.group())
    except ValueError:  # the original catches the same and answers None
        return DistanceAnswer(None, reason="no number", rule="source-none")
    return _plausible(DistanceAnswer(value, None, "first number (source)", "source-number"))


def _to_quantity(m: re.Match) -> _Quantity | None:
    if m.group("neg"):
        return None  # a negative number is not a distance
    a, b = (3, 4) if m.group("num3") else (1, 2)
    first = _value(m, a)
    second = _value(m, b) if m.group(f"num{b}") else None
    if first is None or (m.group(f"num{b}") and second is None):
        return None
    v1, u1 = first
    if second is None:
        metres, unit = v1 * UNIT_METRES[u1 or "m"], u1
    else:
        v2, u2 = second
        unit = u2 or u1  # "1.5-2 m": the unit after the range applies to both ends
        metres = (v1 * UNIT_METRES[u1 or unit or "m"] + v2 * UNIT_METRES[u2 or unit or "m"]) / 2
    if metres < 0:  # an infinite one is kept: parse_answer rejects it as implausible
        return None
    return _Quantity(metres, unit, range=second is not None)


def _value(m: re.Match, i: int) -> tuple[float, str | None] | None:
    """(value in its unit, unit name or None) of quantity i of the match."""
    raw = m.group(f"num{i}")
    if "," in raw:
        head, _, tail = raw.rpartition(",")
        raw = raw.replace(",", "") if len(tail.split(".")[0]) == 3 else f"{head}.{tail}"
    try:
        value = float(raw)
    except ValueError:
        return None
    unit = next((name for name, _ in _UNIT_ALTERNATIVES if m.group(f"{name}{i}")), None)
    inch = m.group(f"inch{i}")
    if inch is not None:
        if unit != "ft":
            return value, unit  # "2 m 30 in": keep the first unit's number
        value += float(inch) / 12  # feet and inches, in feet
    return value, unit


def format_distance(metres: float) -> str:
    """The answer a perfect model gives: the number in metres, exactly (repr round-trips)."""
    return repr(float(metres))
