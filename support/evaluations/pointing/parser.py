"""Parse the pointing answer `{"name":"<organ>", "present":0|1, "point_canvas":[x,y] or null}`.

Model answers are untrusted text: `parse_pointing` never raises. It tries, in order:
  1. "json":         the whole stripped text is a JSON object;
  2. "json-in-text": the first JSON object inside the text (code fences, prose around it);
  3. "regex":        `"present": ...` and `"point_canvas": [x, y] | null` key/value pairs.
A source counts only if it yields a valid `present`; otherwise the next one is tried, except that
the regex is not tried once a well-formed JSON object had a "present" key with an unusable value.
Points are canvas px (x right, y down, origin top-left of the canvas), integers in [0, w-1] x
[0, h-1]; float coordinates must already lie in that range and are rounded half up.

`parse_pointing_source` is the original's rule (`--compat source`; eval/parser.py:35-78 of
fallcat/llm_cholec_organ): the whole text as JSON, else the first `[x,y]` means present, else
absent. It never gives "unparsable".

A model that writes points in its own frame (`--pointing-point-frame model`; the family's
`box_frame`, support.backends.families) is read by `parse_in_frame`: the profile's parser reads the
point on the model's grid (`PointFrame.grid`, with that parser's bounds and rounding), and the grid
position is then mapped onto the canvas (`PointFrame.to_canvas`):
  - "resized":  pixels of the canvas as the model's processor resized it, (rw, rh) px (Qwen2.5-VL;
                support.backends.model_frames.input_size): pixel i is the canvas pixel under its
                centre, floor((i + 0.5) * w / rw);
  - "norm1000": 0-1000 across the canvas (Qwen2-VL, Qwen3-VL): n -> floor(n * w / 1000), 1000 ->
                the last pixel.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from support.contract.provenance import ReadRule

MAX_CHARS = 20_000  # only this many leading characters of an answer are looked at
MAX_OBJECT_STARTS = 64  # "{" positions tried as the start of an embedded JSON object

_NUM = r"(-?\d{1,32}(?:\.\d{1,32})?)"
_PRESENT_RE = re.compile(
    r"[\"']present[\"']\s*:\s*[\"']?(0|1|true|false|yes|no)(?![\w.])", re.IGNORECASE
)
_POINT_KEY_RE = re.compile(r"[\"']point_canvas[\"']\s*:", re.IGNORECASE)
_POINT_RE = re.compile(
    r"[\"']point_canvas[\"']\s*:\s*(?:\[\s*"
    + _NUM
    + r"\s*,\s*"
    + _NUM
    + r"\s*\]|(null|none)(?!\w))",
    re.IGNORECASE,
)
_PRESENT_WORDS = {"0": 0, "1": 1, "true": 1, "false": 0, "yes": 1, "no": 0}
# one markdown code fence around the whole answer (```json ... ```)
_FENCED = re.compile(r"\A```[\w-]*[ \t]*\n?(.*?)\n?[ \t]*```\Z", re.DOTALL)

# how an answer was read (support.contract.provenance): `read_rule` gives the code of a parsed
# answer
READ_RULES = (
    ReadRule("json", "primary", "the whole answer is the JSON object the prompt asks for"),
    ReadRule("json-fenced", "primary", "that JSON object alone in a markdown code fence"),
    ReadRule("json-in-text", "fallback", "the first JSON object with a usable present in prose"),
    ReadRule("key-regex", "fallback", "present / point_canvas pairs of malformed JSON, by regex"),
    ReadRule("none", "unread", "no usable present: unparsable"),
    ReadRule("source-json", "primary", "--compat source: json.loads of the whole answer"),
    ReadRule("source-pair", "fallback", "--compat source: the first [x,y] pair means present"),
    ReadRule("source-absent", "unread", "--compat source: nothing read, so absent"),
)


@dataclass(frozen=True)
class PointingAnswer:
    """A parsed answer. `ok=False` means the outcome is "unparsable" (then present is None)."""

    present: int | None  # 0/1, None when unparsable
    # (x, y) canvas px, origin top-left; only when present == 1, except from the source parser,
    # which keeps a JSON point beside present 0 as the original does (never scored then)
    point: tuple[int, int] | None
    ok: bool
    reason: str = ""  # source used ("json", "json-in-text", "regex") and notes, or why unparsable

    def to_json(self) -> dict[str, Any]:
        return {
            "present": self.present,
            "point": list(self.point) if self.point is not None else None,
            "ok": self.ok,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PointingAnswer:
        point = d.get("point")
        return cls(
            present=d.get("present"),
            point=(int(point[0]), int(point[1])) if point is not None else None,
            ok=bool(d["ok"]),
            reason=d.get("reason", ""),
        )


def read_rule(answer: PointingAnswer, text: Any) -> str:
    """The READ_RULES code of `answer`, parsed from `text` by `parse_pointing` or
    `parse_pointing_source` (told apart by the reason, whose first word is the source used)."""
    reason = answer.reason
    if reason.startswith("source;"):
        if reason.startswith("source; json"):
            return "source-json"
        return "source-pair" if reason.startswith("source; coordinates") else "source-absent"
    if not answer.ok:
        return "none"
    head = reason.split(";")[0]
    if head == "json-in-text" and isinstance(text, str):
        fenced = _FENCED.match(text[:MAX_CHARS].strip())
        obj = _loads(fenced.group(1)) if fenced is not None else None
        if isinstance(obj, dict) and _present(obj.get("present")) is not None:
            return "json-fenced"  # the object read is the fence's whole content
    return {"json": "json", "json-in-text": "json-in-text", "regex": "key-regex"}.get(head, "none")


def format_pointing(name: str, present: int, point: tuple[int, int] | None) -> str:
    """The canonical compact answer, e.g. `{"name":"Liver","present":1,"point_canvas":[384,400]}`.

    The point is written only when present == 1 (else null). Used for few-shot example answers and
    by the oracle model; `parse_pointing` reads it back unchanged.
    """
    if present not in (0, 1):
        raise ValueError(f"present must be 0 or 1, got {present!r}")
    pc = [int(point[0]), int(point[1])] if present == 1 and point is not None else None
    answer = {"name": name, "present": int(present), "point_canvas": pc}
    return json.dumps(answer, separators=(",", ":"), ensure_ascii=False)


def parse_pointing(text: Any, canvas: tuple[int, int] = (768, 768)) -> PointingAnswer:
    """Parse a model's answer text; never raises (anything unusable gives ok=False)."""
    try:
        return _parse(text, canvas)
    except Exception as exc:  # a safety net: the steps below are written not to raise
        return _unparsable(f"parser error: {type(exc).__name__}")


def _unparsable(reason: str) -> PointingAnswer:
    return PointingAnswer(present=None, point=None, ok=False, reason=reason)


def _parse(text: Any, canvas: tuple[int, int]) -> PointingAnswer:
    if not isinstance(text, str):
        return _unparsable(f"not text: {type(text).__name__}")
    s = text[:MAX_CHARS].strip()
    if not s:
        return _unparsable("empty")

    # 1. the whole text is one JSON object
    obj = _loads(s)
    if isinstance(obj, dict) and (ans := _from_mapping(obj, canvas, "json")) is not None:
        return ans

    # 2. the first JSON object embedded in the text whose "present" is usable
    bad_present = isinstance(obj, dict) and "present" in obj
    decoder = json.JSONDecoder()
    start = s.find("{")
    tries = 0
    while start != -1 and tries < MAX_OBJECT_STARTS:
        tries += 1
        try:
            obj, _end = decoder.raw_decode(s, start)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            if (ans := _from_mapping(obj, canvas, "json-in-text")) is not None:
                return ans
            bad_present = bad_present or "present" in obj
        start = s.find("{", start + 1)

    # a well-formed object said "present" with an unusable value: the regex must not second-guess it
    if bad_present:
        return _unparsable("invalid present value")

    # 3. regex over JSON-ish key/value pairs (malformed JSON)
    return _from_regex(s, canvas)


def _loads(s: str) -> Any:
    try:
        return json.loads(s)
    except (ValueError, RecursionError):
        return None


def _from_mapping(
    obj: Mapping[str, Any], canvas: tuple[int, int], source: str
) -> PointingAnswer | None:
    """An answer from a decoded JSON object, or None when it has no usable "present"."""
    present = _present(obj.get("present"))
    if present is None:
        return None
    if present == 0:
        return PointingAnswer(present=0, point=None, ok=True, reason=source)
    if "point_canvas" not in obj or obj["point_canvas"] is None:
        return PointingAnswer(1, None, True, f"{source}; point missing")
    point, note = _point(obj["point_canvas"], canvas)
    return PointingAnswer(1, point, True, source if point is not None else f"{source}; {note}")


def _from_regex(s: str, canvas: tuple[int, int]) -> PointingAnswer:
    m = _PRESENT_RE.search(s)
    if m is None:
        return _unparsable("no present field")
    present = _PRESENT_WORDS[m.group(1).lower()]
    if present == 0:
        return PointingAnswer(0, None, True, "regex")
    pm = _POINT_RE.search(s)
    if pm is None:
        note = "point malformed" if _POINT_KEY_RE.search(s) else "point missing"
        return PointingAnswer(1, None, True, f"regex; {note}")
    if pm.group(3) is not None:  # null
        return PointingAnswer(1, None, True, "regex; point missing")
    point, note = _point([float(pm.group(1)), float(pm.group(2))], canvas)
    return PointingAnswer(1, point, True, "regex" if point is not None else f"regex; {note}")


def _present(v: Any) -> int | None:
    """0/1 from 0/1, true/false, 0.0/1.0 or the strings "0"/"1"/"true"/"false"/"yes"/"no"."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int | float) and v in (0, 1):
        return int(v)
    if isinstance(v, str):
        return _PRESENT_WORDS.get(v.strip().lower())
    return None


def _point(v: Any, canvas: tuple[int, int]) -> tuple[tuple[int, int] | None, str]:
    """((x, y) canvas px, "") for a valid point, else (None, why). Floats round half up."""
    if not isinstance(v, list | tuple) or len(v) != 2:
        return None, "point malformed"
    coords = []
    for c in v:
        if isinstance(c, bool) or not isinstance(c, int | float):
            return None, "point malformed"
        if isinstance(c, float) and not math.isfinite(c):
            return None, "point malformed"
        coords.append(c)
    (x, y), (w, h) = coords, canvas
    if not (0 <= x <= w - 1 and 0 <= y <= h - 1):
        return None, "point out of bounds"
    return (math.floor(x + 0.5), math.floor(y + 0.5)), ""


# ---- points in the model's own frame (`--pointing-point-frame model`) ----------------------------
NORM = 1000  # full extent of the 0-1000 relative frame


@dataclass(frozen=True)
class PointFrame:
    """The frame a model writes its points in, other than the prompt's canvas pixels.

    "resized": pixel indices of the canvas resized to `size` = (rw, rh) px by the model's
    processor; "norm1000": 0-1000 across the canvas (`size` is (1000, 1000)).
    """

    name: Literal["resized", "norm1000"]
    size: tuple[int, int]  # (width, height) of the canvas in the model's units

    def __post_init__(self) -> None:
        if self.name not in ("resized", "norm1000"):
            raise ValueError(f"PointFrame: {self.name!r} is not 'resized' or 'norm1000'")
        if len(self.size) != 2 or not all(isinstance(v, int) and v >= 1 for v in self.size):
            raise ValueError(f"PointFrame: size {self.size!r} is not two positive integers")

    @classmethod
    def norm1000(cls) -> PointFrame:
        return cls("norm1000", (NORM, NORM))

    @property
    def grid(self) -> tuple[int, int]:
        """The "canvas" the profile's parser reads the point on: every value the model may write
        is on it (pixel indices 0..rw-1; 0..1000 both included for norm1000)."""
        w, h = self.size
        return (w + 1, h + 1) if self.name == "norm1000" else (w, h)

    def to_canvas(self, point: tuple[int, int], canvas: tuple[int, int]) -> tuple[int, int]:
        """The canvas pixel (x, y) of a point read on the grid."""
        centre = 0.5 if self.name == "resized" else 0.0  # a pixel index stands for its centre
        return (
            _onto(point[0], centre, self.size[0], canvas[0]),
            _onto(point[1], centre, self.size[1], canvas[1]),
        )

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "size": list(self.size)}


def _onto(v: int, centre: float, extent: int, size: int) -> int:
    return min(max(math.floor((v + centre) * size / extent), 0), size - 1)


def parse_in_frame(
    parse: Callable[[Any, tuple[int, int]], PointingAnswer],
    text: Any,
    canvas: tuple[int, int],
    frame: PointFrame | None,
) -> tuple[PointingAnswer, tuple[int, int] | None]:
    """`parse(text, canvas)` where the model writes points in `frame` (None: the canvas itself):
    the answer with its point on the canvas, and the point as the model wrote it on the frame's
    grid (None without a frame or a point). Never raises where `parse` does not."""
    if frame is None:
        return parse(text, canvas), None
    answer = parse(text, frame.grid)
    if answer.point is None:
        return answer, None
    return replace(answer, point=frame.to_canvas(answer.point, canvas)), answer.point


# ---- the original's parser (`--compat source`) ---------------------------------------------------
# an integer pair in brackets, as the original's fallback regex; `\d` is any Unicode digit there too
_SOURCE_PAIR_RE = re.compile(r"\[\s*(-?\d+)\s*,\s*(-?\d+)\s*\]")
_SOURCE_YES = ("1", "yes", "true")


class _FallBack(Exception):
    """The JSON branch failed the way the original's outer `except Exception` catches."""


def parse_pointing_source(text: Any, canvas: tuple[int, int]) -> PointingAnswer:
    """The original's reading of an answer; never raises and never "unparsable" (absent instead).

    1. `json.loads` of the whole text gives a dict: present from "present" (bool; a number whose
       int() is 1; a string "1"/"yes"/"true" after strip/lower; anything else 0), and the point
       from a two-item "point_canvas" list, each item `int(round(v))`, kept if it lies in
       [0, w) x [0, h) (a point beside present 0 is kept but never scored);
    2. otherwise (not JSON, not a dict, or a number that int()/round() overflow on) the first
       `[x,y]` integer pair in the text: present = 1 with that point if it lies on the canvas;
    3. otherwise absent. Failed model calls ("" in the original) land here too.
    canvas: (width, height) px of the canvas the coordinates refer to.
    """
    try:
        return _parse_source(text, canvas)
    except Exception as exc:  # a safety net: the steps below are written not to raise
        return PointingAnswer(0, None, True, f"source; parser error: {type(exc).__name__}")


def _parse_source(text: Any, canvas: tuple[int, int]) -> PointingAnswer:
    present, point = 0, None
    try:
        obj = json.loads(text)
    except Exception:  # not JSON, not text, too deep, a number too long for int(): the fallback
        obj = None
    if isinstance(obj, dict):
        try:
            present = _source_present(obj.get("present", 0))
            point = _source_point(obj.get("point_canvas"), canvas)
            return PointingAnswer(present, point, True, "source; json")
        except _FallBack:
            pass  # `present` keeps what was read before the failure, as in the original
    if isinstance(text, str):
        m = _SOURCE_PAIR_RE.search(text)
        if m is not None:
            try:
                x, y = int(m.group(1)), int(m.group(2))
            except ValueError:  # more digits than int() accepts
                x, y = -1, -1
            if _on_canvas(x, y, canvas):
                return PointingAnswer(1, (x, y), True, "source; coordinates in text")
    return PointingAnswer(present, point, True, "source; no point in text")


def _source_present(v: Any) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int | float):
        try:
            return int(int(v) == 1)  # 1.7 -> 1; NaN and infinities fall back to the regex
        except (ValueError, OverflowError) as exc:
            raise _FallBack from exc
    if isinstance(v, str):
        return int(v.strip().lower() in _SOURCE_YES)
    return 0


def _source_point(v: Any, canvas: tuple[int, int]) -> tuple[int, int] | None:
    if not isinstance(v, list) or len(v) != 2:
        return None
    try:
        x, y = round(v[0]), round(v[1])  # Python's round: half to even, to int
    except (ValueError, TypeError):  # a string, null, NaN: no point
        return None
    except OverflowError as exc:  # an infinity escapes to the original's outer handler
        raise _FallBack from exc
    return (x, y) if _on_canvas(x, y, canvas) else None


def _on_canvas(x: int, y: int, canvas: tuple[int, int]) -> bool:
    return 0 <= x < canvas[0] and 0 <= y < canvas[1]
