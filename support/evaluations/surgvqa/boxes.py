"""A model's tool-detection answer -> labelled boxes in pixels of the frame.

The prompt asks for a JSON list of `{"label": <tool name>, "bbox_2d": [x1, y1, x2, y2]}` in pixels
of the image. Models answer in their own conventions, so `parse_boxes` also reads:

- the JSON inside code fences or surrounded by prose; a single object instead of a list; a
  `{"boxes": [...]}` / `{"detections": [...]}` wrapper; Python literals (single quotes);
- box keys `bbox_2d`, `bbox`, `box`, `box_2d`; label keys `label`, `name`, `tool`, `class`;
  numbers given as strings;
- an answer cut off by max_tokens: the complete items before the cut are kept ("truncated").

Box frames (`BoxFrame`), all turned into pixels of the frame (origin top-left, x right, y down):

- "pixels":   [x1, y1, x2, y2] absolute pixels (the prompt's own);
- "resized":  [x1, y1, x2, y2] absolute pixels of the image as the model's processor resized it
              (Qwen2.5-VL), `seen` = (rw, rh) px: x * width / rw, y * height / rh. The size comes
              from support.backends.model_frames.input_size; without it (None) read as "pixels";
- "norm1000": [x1, y1, x2, y2] relative, 0-1000 across the image (Qwen2-VL, Qwen3-VL);
- "gemini":   [ymin, xmin, ymax, xmax] relative, 0-1000 (Gemini's `box_2d`);
- "auto":     an item whose box key is `box_2d` is read as "gemini", any other as "pixels".

How the boxes were found (the form, `FORMS`) and the frame their numbers were read in make the
answer's `read_by` code (support.contract.provenance; surgvqa/read_rules.py), e.g.
`json-in-text@gemini`.

Corners given the wrong way round are swapped and boxes are clipped to the frame. Items that cannot
be used (unknown tool, not four finite numbers, no area left after clipping, not an object) are
dropped and counted. Model answers are untrusted text: `parse_boxes` never raises. At most
MAX_BOXES_PER_TOOL boxes of each tool are kept (the first ones, in answer order); the rest are
counted in `over_cap`. No score changes: answer order is score order
(support.evaluations.surgvqa.coco), and COCOeval never counts more than 100 detections of a class
per frame.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from support.evaluations.surgvqa.tools import canonical_tool

BoxFrame = Literal["auto", "pixels", "resized", "norm1000", "gemini"]

MAX_CHARS = 100_000  # only this many leading characters of an answer are looked at
MAX_STARTS = 64  # "[" / "{" positions tried as the start of the JSON value
MAX_LITERAL_STARTS = 4  # positions tried with ast.literal_eval (Python-literal answers)
MAX_BOXES_PER_TOOL = 100  # boxes kept per tool and answer (COCOeval's maxDets[-1])
NORM = 1000.0  # full extent of the 0-1000 relative frames

BOX_KEYS = ("bbox_2d", "bbox", "box", "box_2d")  # first present wins
LABEL_KEYS = ("label", "name", "tool", "class")
WRAPPER_KEYS = ("boxes", "detections")

# how the boxes were found (the first part of BoxAnswer.read_by): code, kind, what it means
FORMS = (
    ("json-list", "primary", "the whole answer is the JSON list the prompt asks for"),
    ("json-fenced", "primary", "that JSON list alone in a markdown code fence"),
    ("json-in-text", "fallback", "a JSON list inside prose"),
    ("wrapper", "fallback", 'a {"boxes": [...]} or {"detections": [...]} wrapper'),
    ("object", "fallback", "a single object instead of a list"),
    ("literal", "fallback", "a Python literal (single quotes)"),
    ("cut", "fallback", "an answer cut off: the complete items before the cut"),
)
# the frames an answer's numbers are read in, after @ in BoxAnswer.read_by (pixels: no suffix)
FRAMES_READ = ("pixels", "resized", "norm1000", "gemini")

_DECODER = json.JSONDecoder()
_FENCE_OPENING = re.compile(r"```[\w-]*")  # a markdown code fence's first line (```json)
_WHITESPACE = " \t\r\n"


@dataclass(frozen=True)
class Box:
    """One labelled box in pixels of the frame (origin top-left, x right, y down), x1<x2, y1<y2."""

    label: str  # canonical class name (support.evaluations.surgvqa.tools.TOOL_CLASSES)
    x1: float
    y1: float
    x2: float
    y2: float

    def xywh(self) -> list[float]:
        """COCO [x, y, width, height] in pixels."""
        return [self.x1, self.y1, self.x2 - self.x1, self.y2 - self.y1]


@dataclass(frozen=True)
class BoxAnswer:
    """A parsed answer: the usable boxes, in the model's order, and why there are no more."""

    boxes: tuple[Box, ...]
    reason: str  # "ok", "truncated", "empty list", "no usable box", "no JSON", "not a list"
    dropped: int = 0  # items present but unusable
    over_cap: int = 0  # usable boxes past MAX_BOXES_PER_TOOL of their tool, not kept
    read_by: str = "none"  # the READ_RULES code: the form found, then @frame when not pixels


def parse_boxes(
    text: str,
    width: int,
    height: int,
    frame: BoxFrame = "auto",
    seen: tuple[int, int] | None = None,
) -> BoxAnswer:
    """The boxes of an answer for a `width` x `height` px frame (never raises). `seen`: the
    (width, height) px the model saw the frame at, read by the "resized" frame only (None, or a
    size that is not two positive numbers: the frame's own size)."""
    scale = _seen_scale(seen, width, height) if frame == "resized" else (1.0, 1.0)
    try:
        value, how = _find_value(text if isinstance(text, str) else "")
    except Exception:  # belt and braces: a parser bug must not fail a case
        value, how = None, "none"
    if value is _NOTHING:
        return BoxAnswer((), "no JSON")
    items = _items(value)
    if items is None:
        return BoxAnswer((), "not a list")
    form = _form(value, how)
    if not items:
        return BoxAnswer((), "empty list", read_by=form)
    boxes: list[Box] = []
    per_tool: dict[str, int] = {}
    dropped = over_cap = 0
    for item in items:
        box = _box(item, width, height, frame, scale)
        if box is None:
            dropped += 1
        elif per_tool.get(box.label, 0) >= MAX_BOXES_PER_TOOL:
            over_cap += 1
        else:
            per_tool[box.label] = per_tool.get(box.label, 0) + 1
            boxes.append(box)
    if not boxes:
        return BoxAnswer((), "no usable box", dropped)
    read = _frame_read(items, frame, scale != (1.0, 1.0))
    return BoxAnswer(
        tuple(boxes),
        "truncated" if how == "cut" else "ok",
        dropped,
        over_cap,
        form if read == "pixels" else f"{form}@{read}",
    )


def _form(value: Any, how: str) -> str:
    """The FORMS code of a value found `how` (_find_value)."""
    if how in ("cut", "literal"):
        return how
    if isinstance(value, dict):
        return (
            "wrapper"
            if any(isinstance(value.get(k), list | tuple) for k in WRAPPER_KEYS)
            else "object"
        )
    return {"whole": "json-list", "fenced": "json-fenced"}.get(how, "json-in-text")


def _frame_read(items: Sequence[Any], frame: BoxFrame, resized: bool) -> str:
    """The frame an answer's numbers were read in: "auto" resolved by the first item's box key
    (box_2d: gemini); "resized" is pixels when `resized` is False (no size the model saw, or
    the frame's own size)."""
    if frame == "auto":
        for item in items:
            if isinstance(item, dict) and (key := _box_key(item)) is not None:
                return _auto_frame(key)
        return "pixels"
    if frame == "resized" and not resized:
        return "pixels"
    return frame


def boxes_json(
    boxes: Iterable[Box],
    frame: BoxFrame = "pixels",
    *,
    width: int | None = None,
    height: int | None = None,
    seen: tuple[int, int] | None = None,
) -> str:
    """The answer text for `boxes` in the prompt's format (what the oracle answers).

    "pixels" / "auto": `[{"label", "bbox_2d": [x1, y1, x2, y2]}]` in pixels; "resized": the same
    in pixels of the frame resized to `seen` = (rw, rh) px; "norm1000": the same keys in 0-1000;
    "gemini": `box_2d` = [ymin, xmin, ymax, xmax] in 0-1000. All but the first need the frame's
    `width` and `height` (px). Integral values are written as integers.
    """
    out = []
    for b in boxes:
        if frame in ("pixels", "auto"):
            out.append({"label": b.label, "bbox_2d": _numbers((b.x1, b.y1, b.x2, b.y2))})
            continue
        if not width or not height:
            raise ValueError(f"boxes_json: frame {frame!r} needs the frame's width and height")
        if frame == "resized":
            if seen is None:
                raise ValueError("boxes_json: frame 'resized' needs the size the model saw")
            sx, sy = seen[0] / width, seen[1] / height
            coords = (b.x1 * sx, b.y1 * sy, b.x2 * sx, b.y2 * sy)
            out.append({"label": b.label, "bbox_2d": _numbers(coords)})
            continue
        sx, sy = NORM / width, NORM / height
        x1, y1, x2, y2 = b.x1 * sx, b.y1 * sy, b.x2 * sx, b.y2 * sy
        if frame == "gemini":
            out.append({"label": b.label, "box_2d": _numbers((y1, x1, y2, x2))})
        else:
            out.append({"label": b.label, "bbox_2d": _numbers((x1, y1, x2, y2))})
    return json.dumps(out)


def _numbers(values: Sequence[float]) -> list[float | int]:
    return [int(v) if float(v).is_integer() else v for v in values]


class _Nothing:
    """No JSON value found (None itself is a JSON value: `null`)."""


_NOTHING: Any = _Nothing()


def _find_value(text: str) -> tuple[Any, str]:
    """The first JSON value in `text` that looks like boxes, and how it was found: "whole" (the
    whole answer), "fenced" (alone in a markdown code fence), "in-text", "cut" (cut short),
    "literal" (a Python literal) or "none" (a value that does not look like boxes, or nothing).

    Scans "[" and "{" positions in order. A value that decodes completely is taken if it is an
    object or a list that is empty or holds an object. A "[" that does not decode is read item by
    item: its complete objects before the cut are taken (a truncated answer). Then Python
    literals; other JSON values (e.g. "[1]" in prose) are the last resort.
    """
    text = text[:MAX_CHARS]
    fallback: Any = _NOTHING
    starts = [i for i, ch in enumerate(text) if ch in "[{"][:MAX_STARTS]
    for i in starts:
        try:
            value, end = _DECODER.raw_decode(text, i)
        except (ValueError, RecursionError):
            if text[i] == "[":
                items = _complete_items(text, i + 1)
                if items:
                    return items, "cut"
            continue
        if _looks_like_boxes(value):
            return value, _placed(text, i, end)
        if fallback is _NOTHING:
            fallback = value
    for i in starts[:MAX_LITERAL_STARTS]:
        end = text.rfind("]" if text[i] == "[" else "}")
        if end <= i:
            continue
        try:
            value = ast.literal_eval(text[i : end + 1])
        except Exception:  # SyntaxError, ValueError, RecursionError, MemoryError, ...
            continue
        if _looks_like_boxes(value):
            return value, "literal"
    return fallback, "none"


def _placed(text: str, start: int, end: int) -> str:
    """How the value at text[start:end] sits in the answer: "whole", "fenced" or "in-text"."""
    before, after = text[:start].strip(), text[end:].strip()
    if not before and not after:
        return "whole"
    if _FENCE_OPENING.fullmatch(before) and after == "```":
        return "fenced"
    return "in-text"


def _looks_like_boxes(value: Any) -> bool:
    if isinstance(value, dict):
        return True
    return isinstance(value, list | tuple) and (
        not value or any(isinstance(v, dict) for v in value)
    )


def _complete_items(text: str, pos: int) -> list[dict]:
    """The objects of a list starting at `pos` (just after its "["), up to the first item that
    does not decode: only objects count, and none when the list holds no object at all."""
    items: list[Any] = []
    while True:
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        try:
            item, pos = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            break
        items.append(item)
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= len(text) or text[pos] != ",":
            break
        pos += 1
    return items if any(isinstance(v, dict) for v in items) else []


def _items(value: Any) -> list[Any] | None:
    """The list of box items a decoded value holds, or None when it holds none."""
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, dict):
        for key in WRAPPER_KEYS:
            inner = value.get(key)
            if isinstance(inner, list | tuple):
                return list(inner)
        if any(key in value for key in (*BOX_KEYS, *LABEL_KEYS)):
            return [value]  # a single item instead of a list
    return None


def _seen_scale(seen: Any, width: int, height: int) -> tuple[float, float]:
    """(width / rw, height / rh): the factors from the model's resized pixels to the frame's;
    (1, 1) when `seen` is not two positive finite numbers (never raises)."""
    try:
        rw, rh = (float(v) for v in seen)
        sx, sy = float(width) / rw, float(height) / rh
    except Exception:  # None, not a pair, not numbers, a zero size
        return 1.0, 1.0
    ok = all(math.isfinite(v) and v > 0 for v in (rw, rh, sx, sy))
    return (sx, sy) if ok else (1.0, 1.0)


def _box(
    item: Any, width: int, height: int, frame: BoxFrame, scale: tuple[float, float] = (1.0, 1.0)
) -> Box | None:
    """One item as a Box in pixels, or None when unusable. `scale`: the "resized" frame's
    factors from the model's pixels to the frame's (x, y)."""
    if not isinstance(item, dict):
        return None
    label = next((canonical_tool(item[k]) for k in LABEL_KEYS if k in item), None)
    key = _box_key(item)
    if label is None or key is None:
        return None
    coords = _four_numbers(item[key])
    if coords is None:
        return None
    if frame == "auto":
        frame = _auto_frame(key)
    a, b, c, d = coords
    if frame == "gemini":  # [ymin, xmin, ymax, xmax] in 0-1000
        x1, y1, x2, y2 = b * width / NORM, a * height / NORM, d * width / NORM, c * height / NORM
    elif frame == "norm1000":
        x1, y1, x2, y2 = a * width / NORM, b * height / NORM, c * width / NORM, d * height / NORM
    elif frame == "resized":  # pixels of the image the model saw, resized to (rw, rh)
        (sx, sy) = scale
        x1, y1, x2, y2 = a * sx, b * sy, c * sx, d * sy
    else:
        x1, y1, x2, y2 = a, b, c, d
    x1, x2 = sorted((_clip(x1, width), _clip(x2, width)))
    y1, y2 = sorted((_clip(y1, height), _clip(y2, height)))
    if not (x2 > x1 and y2 > y1) or not all(map(math.isfinite, (x1, y1, x2, y2))):
        return None
    return Box(label, x1, y1, x2, y2)


def _box_key(item: dict) -> str | None:
    """The item's box key: the first of BOX_KEYS it has."""
    return next((k for k in BOX_KEYS if k in item), None)


def _auto_frame(key: str) -> BoxFrame:
    """The frame "auto" reads a box in: Gemini's for `box_2d`, pixels for any other key."""
    return "gemini" if key == "box_2d" else "pixels"


def _clip(v: float, size: int) -> float:
    return min(max(v, 0.0), float(max(size, 0)))


def _four_numbers(value: Any) -> tuple[float, float, float, float] | None:
    if not isinstance(value, list | tuple) or len(value) != 4:
        return None
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            return None
        try:
            f = float(v)
        except (ValueError, OverflowError):
            return None
        if not math.isfinite(f):
            return None
        out.append(f)
    return out[0], out[1], out[2], out[3]


def xywh_boxes(items: Sequence[dict[str, Any]]) -> list[Box]:
    """Boxes recorded as `{"label", "bbox": [x, y, w, h]}` (pixels), in order: a case's truth or
    an outcome's prediction."""
    out = []
    for b in items:
        x, y, w, h = b["bbox"]
        out.append(Box(b["label"], x, y, x + w, y + h))
    return out
