"""Read SurgVU's public data as published: the category-2 VQA sample and the category-1 test set.

Category 2 (`SURGVU25_cat_2_sample_set_public.zip`), one folder per case:
    caseNNN/caseNNN.mp4            the clip
    caseNNN/caseNNN_question.json  the question, a bare JSON string
    caseNNN/caseNNN.json           the five reference answers, a JSON array of strings
A question belongs to the clip with the same stem (the organisers' scorer opens
`<video stem>.json`).

Category 1 (`cat1_test_set_public.zip`), flat:
    N_fps1.mp4        a 1 fps video, 640x512
    N_fps1_coco.json  COCO ground truth: images (id = 0-based frame index, file_name "%010d.jpg"),
                      annotations (bbox [x, y, w, h] pixels), categories (the 14 tool classes)
    N_fps1_gc.json    the same boxes in grand-challenge form: {"boxes": [{"name":
                      "slice_nr_<n>_<tool_words_joined_by_underscores>", "corners": [[x1, y1, 0.5],
                      [x2, y1, 0.5], [x2, y2, 0.5], [x1, y2, 0.5]]}]}, n = frame index + 1

Both readers search `root` recursively and skip macOS archive debris (`__MACOSX/`, `._*`) and
vlmbench's cache folders (`.vlmbench-cache/`: the synthetic sample built there is no user's data;
support.contract.data_paths.files_below). Reading
never decodes a video; comparing the images' size with the video's is left to the evaluation.
Every bad file raises SurgvuDataError naming the file and the field, item or index.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from support.contract.data_paths import files_below
from support.evaluations.surgvqa.tools import TOOL_CLASSES, canonical_tool

N_ANSWERS = 5  # references per question (the write-up, and every public example)
GC_WIDTH, GC_HEIGHT = 640, 512  # pixels; the official gc_to_coco.py hard-codes the frame size
# True boxes one frame may have. A SurgVU clip has three robotic tools installed (four arms, one
# holds the camera; surgtoolloc.grand-challenge.org/data); pycocotools matches in a Python loop
# over detections x truths (a frame's time grows with their product), so more is a broken file.
MAX_BOXES_PER_FRAME = 1000
_SLICE = re.compile(r"^slice_nr_(\d+)_(.+)$")


class SurgvuDataError(ValueError):
    """A SurgVU file that does not have the published form; the message names file and field."""


@dataclass(frozen=True)
class VqaItem:
    """One category-2 question with its clip and references."""

    case: str  # "case122"
    video: Path
    question: str
    answers: tuple[str, ...]  # the five references, file order


@dataclass(frozen=True)
class ToolFrame:
    """One category-1 frame with ground truth (possibly no box, if the COCO file lists it so)."""

    video: str  # the video's name, e.g. "1" for 1_fps1.mp4
    frame: int  # 0-based frame index of the 1 fps video = the COCO image id
    file_name: str
    width: int  # pixels
    height: int
    boxes: tuple[tuple[str, tuple[float, float, float, float]], ...]  # (class, (x, y, w, h) px)


@dataclass(frozen=True)
class ToolVideo:
    """One category-1 video and its frames with ground truth, by frame index."""

    name: str
    video: Path
    frames: tuple[ToolFrame, ...]


def _files(root: Path, pattern: str) -> list[Path]:
    """Files under root matching pattern, sorted, without macOS archive debris and never inside
    a vlmbench cache folder (its synthetic sample is not the user's data)."""
    return sorted(files_below(root, pattern))


def _check_root(root: Path) -> Path:
    root = Path(root)
    if not root.is_dir():
        raise SurgvuDataError(f"{root}: not a folder")
    return root


def _load_json(path: Path) -> object:
    """The parsed file; errors name the file and the position of a syntax error."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM is tolerated
    except (OSError, UnicodeDecodeError) as exc:
        raise SurgvuDataError(f"{path}: cannot read the file ({exc})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SurgvuDataError(
            f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except RecursionError:
        raise SurgvuDataError(f"{path}: JSON nested too deeply") from None


# ---------------------------------------------------------------------------------------------
# Category 2: VQA


def _question(path: Path) -> str:
    value = _load_json(path)
    if not isinstance(value, str):
        raise SurgvuDataError(
            f"{path}: the question must be a JSON string, got {type(value).__name__}"
        )
    if not value.strip():
        raise SurgvuDataError(f"{path}: the question is empty")
    return value


def _answers(path: Path) -> tuple[str, ...]:
    value = _load_json(path)
    if not isinstance(value, list):
        raise SurgvuDataError(
            f"{path}: the answers must be a JSON array of {N_ANSWERS} strings, "
            f"got {type(value).__name__}"
        )
    if len(value) != N_ANSWERS:
        raise SurgvuDataError(
            f"{path}: the answers must be {N_ANSWERS} strings, the array has {len(value)}"
        )
    for i, a in enumerate(value):
        if not isinstance(a, str):
            raise SurgvuDataError(f"{path}: answer [{i}] must be a string, got {type(a).__name__}")
        if not a.strip():
            raise SurgvuDataError(f"{path}: answer [{i}] is empty")
    return tuple(value)


def read_vqa(root: Path) -> list[VqaItem]:
    """Every case under root (found by its `caseNNN_question.json`, at any depth), sorted by case;
    empty when there is none. The clip and the answers must lie beside the question file."""
    root = _check_root(root)
    items: dict[str, VqaItem] = {}
    for qpath in _files(root, "*_question.json"):
        case = qpath.name[: -len("_question.json")]
        apath, video = qpath.with_name(f"{case}.json"), qpath.with_name(f"{case}.mp4")
        if case in items:
            raise SurgvuDataError(
                f"{qpath}: case {case!r} appears twice (also {items[case].video.parent})"
            )
        if not apath.is_file():
            raise SurgvuDataError(f"{qpath}: the answers file {apath.name} is missing beside it")
        if not video.is_file():
            raise SurgvuDataError(f"{video}: missing: the clip of question {qpath.name}")
        items[case] = VqaItem(case, video, _question(qpath), _answers(apath))
    return [items[c] for c in sorted(items)]


# ---------------------------------------------------------------------------------------------
# Category 1: tool detection


def _tool(name: object, where: str) -> str:
    tool = canonical_tool(name)
    if tool is None:
        raise SurgvuDataError(f"{where}: unknown tool name {name!r}")
    return tool


def _number(value: object) -> float | None:
    """A finite JSON number as float, else None (bools are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def _xywh(value: object, where: str) -> tuple[float, float, float, float]:
    nums = [_number(v) for v in value] if isinstance(value, list) else []
    if len(nums) != 4 or any(v is None for v in nums):
        raise SurgvuDataError(f"{where}: bbox must be 4 finite numbers [x, y, w, h], got {value!r}")
    x, y, w, h = nums
    if w < 0 or h < 0:
        raise SurgvuDataError(f"{where}: bbox has a negative width or height: {value!r}")
    return (x, y, w, h)


def _int_field(obj: dict, key: str, where: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SurgvuDataError(f"{where}: {key} must be an integer, got {value!r}")
    return value


def _field_list(doc: object, key: str, path: Path) -> list:
    if not isinstance(doc, dict):
        raise SurgvuDataError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    value = doc.get(key)
    if not isinstance(value, list):
        raise SurgvuDataError(f"{path}: {key} must be a list, got {type(value).__name__}")
    return value


def _check_box_count(path: Path, frame: int, count: int) -> None:
    if count > MAX_BOXES_PER_FRAME:
        raise SurgvuDataError(
            f"{path}: frame {frame} has more than {MAX_BOXES_PER_FRAME} true boxes "
            "(a real frame has a handful): not a SurgVU annotation file"
        )


def _coco_frames(path: Path, name: str) -> list[ToolFrame]:
    """The frames of a `_coco.json` file: every image listed, with its annotations."""
    doc = _load_json(path)
    images, annotations = _field_list(doc, "images", path), _field_list(doc, "annotations", path)
    if "categories" in doc:
        classes: dict[int, str] = {}
        for i, cat in enumerate(_field_list(doc, "categories", path)):
            where = f"{path}: categories[{i}]"
            if not isinstance(cat, dict):
                raise SurgvuDataError(f"{where}: expected an object, got {cat!r}")
            classes[_int_field(cat, "id", where)] = _tool(cat.get("name"), where)
    else:  # assumed: the official ids 0-13 (gc_to_coco.py's order = TOOL_CLASSES)
        classes = dict(enumerate(TOOL_CLASSES))
    meta: dict[int, tuple[str, int, int]] = {}
    for i, img in enumerate(images):
        where = f"{path}: images[{i}]"
        if not isinstance(img, dict):
            raise SurgvuDataError(f"{where}: expected an object, got {img!r}")
        image_id = _int_field(img, "id", where)
        if image_id < 0:
            raise SurgvuDataError(f"{where}: id must be a frame index >= 0, got {image_id}")
        if image_id in meta:
            raise SurgvuDataError(f"{where}: id {image_id} is listed twice")
        width, height = _int_field(img, "width", where), _int_field(img, "height", where)
        file_name = img.get("file_name", f"{image_id:010d}.jpg")
        if not isinstance(file_name, str):
            raise SurgvuDataError(f"{where}: file_name must be a string, got {file_name!r}")
        meta[image_id] = (file_name, width, height)
    boxes: dict[int, list] = {k: [] for k in meta}
    for i, ann in enumerate(annotations):
        where = f"{path}: annotations[{i}]"
        if not isinstance(ann, dict):
            raise SurgvuDataError(f"{where}: expected an object, got {ann!r}")
        if "bbox" not in ann:
            raise SurgvuDataError(f"{where}: bbox is missing")
        image_id = _int_field(ann, "image_id", where)
        if image_id not in meta:
            raise SurgvuDataError(f"{where}: image_id {image_id} is not in images")
        cat = _int_field(ann, "category_id", where)
        if cat not in classes:
            raise SurgvuDataError(f"{where}: category_id {cat} is not a known category")
        boxes[image_id].append((classes[cat], _xywh(ann["bbox"], where)))
        _check_box_count(path, image_id, len(boxes[image_id]))
    return [ToolFrame(name, k, *meta[k], tuple(boxes[k])) for k in sorted(meta)]


def _gc_frames(path: Path, name: str) -> list[ToolFrame]:
    """The frames of a ground-truth `_gc.json`, converted as the official gc_to_coco.py does with
    set_index_0 (frame = slice number - 1; w = corners[1].x - x1, h = corners[2].y - y1; 640x512;
    only frames with a box)."""
    doc = _load_json(path)
    boxes: dict[int, list] = {}
    for i, box in enumerate(_field_list(doc, "boxes", path)):
        where = f"{path}: boxes[{i}]"
        if not isinstance(box, dict):
            raise SurgvuDataError(f"{where}: expected an object, got {box!r}")
        label = box.get("name")
        m = _SLICE.match(label) if isinstance(label, str) else None
        if m is None:
            raise SurgvuDataError(f"{where}: name must be 'slice_nr_<frame>_<tool>', got {label!r}")
        slice_nr = int(m.group(1))
        if slice_nr < 1:
            raise SurgvuDataError(f"{where}: name {label!r}: slice numbers start at 1")
        tool = _tool(m.group(2).replace("_", " "), f"{where}: name")
        corners = box.get("corners")
        pts = (
            [[_number(v) for v in c[:2]] for c in corners if isinstance(c, list) and len(c) >= 2]
            if isinstance(corners, list)
            else []
        )
        if len(pts) != 4 or len(corners) != 4 or any(v is None for p in pts for v in p):
            raise SurgvuDataError(
                f"{where}: corners must be 4 points [x, y, z] of finite numbers, got {corners!r}"
            )
        x1, y1 = pts[0]
        w, h = pts[1][0] - x1, pts[2][1] - y1
        if w < 0 or h < 0:
            raise SurgvuDataError(
                f"{where}: corners are not in the order top-left, top-right, bottom-right, "
                f"bottom-left (width {w}, height {h})"
            )
        boxes.setdefault(slice_nr - 1, []).append((tool, (x1, y1, w, h)))
        _check_box_count(path, slice_nr - 1, len(boxes[slice_nr - 1]))
    return [
        ToolFrame(name, k, f"{k:010d}.jpg", GC_WIDTH, GC_HEIGHT, tuple(boxes[k]))
        for k in sorted(boxes)
    ]


def read_tools(root: Path) -> list[ToolVideo]:
    """Every `N_fps1.mp4` under root with its ground truth, from `N_fps1_coco.json` when present,
    else from `N_fps1_gc.json`; sorted by name (numerically when the names are numbers). Empty when
    there is none; an annotation file without its video, or a video without one, is an error."""
    root = _check_root(root)
    videos = {p.with_suffix(""): p for p in _files(root, "*_fps1.mp4")}
    stems = {
        p.with_name(p.name[: -len(suffix)])
        for suffix in ("_coco.json", "_gc.json")
        for p in _files(root, f"*_fps1{suffix}")
    }
    orphans = sorted(stems - videos.keys())
    if orphans:
        raise SurgvuDataError(
            f"{orphans[0]}.mp4: missing: the video of {orphans[0].name}_coco/_gc.json"
        )
    out = []
    for stem, video in videos.items():
        name = stem.name[: -len("_fps1")]
        coco, gc = Path(f"{stem}_coco.json"), Path(f"{stem}_gc.json")
        if coco.is_file():
            frames = _coco_frames(coco, name)
        elif gc.is_file():
            frames = _gc_frames(gc, name)
        else:
            raise SurgvuDataError(f"{video}: no ground truth beside it ({coco.name} or {gc.name})")
        out.append(ToolVideo(name, video, tuple(frames)))
    names = [v.name for v in out]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise SurgvuDataError(f"{root}: video {dup}_fps1.mp4 appears in two folders")
    return sorted(out, key=_video_order)


def _video_order(video: ToolVideo) -> tuple[bool, int, str]:
    """Numeric names first, in number order ("2" before "10"), then the others by name."""
    digits = video.name.isdigit()
    return (not digits, int(video.name) if digits else 0, video.name)
