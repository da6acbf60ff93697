"""SurgVU data: PyAV frames, the readers of the published layouts, and the synthetic sample in
those layouts (offline, a few seconds)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.evaluations.surgvqa import synthetic as synth
from support.evaluations.surgvqa.dataset import (
    SurgvuDataError,
    ToolFrame,
    ToolVideo,
    read_tools,
    read_vqa,
)
from support.evaluations.surgvqa.tools import TOOL_CLASSES, canonical_tool
from support.evaluations.surgvqa.video import (
    evenly_spaced,
    frame_count,
    iter_frames,
    read_frames,
    write_video,
)

TOL = 3  # pixels: H.264 (yuv420p, crf 12) may smear a drawn edge by a pixel or two


@pytest.fixture(scope="session")
def sample(shared_cache: Path) -> Path:
    """The default synthetic sample, built once per run."""
    return synth.ensure_surgvu(shared_cache)


# ---------------------------------------------------------------------------------------------
# video.py


def _grey_video(path: Path, n: int = 6) -> Path:
    """n solid frames, frame i of grey level 40 * i, 64x48."""
    frames = [np.full((48, 64, 3), 40 * i, np.uint8) for i in range(n)]
    write_video(path, frames, fps=1)
    return path


def test_read_frames_gives_the_frames_asked_in_order(tmp_path: Path) -> None:
    video = _grey_video(tmp_path / "grey.mp4")
    assert frame_count(video) == 6
    frames = read_frames(video, [4, 0, 4, 2])
    assert [f.shape for f in frames] == [(48, 64, 3)] * 4
    assert all(f.dtype == np.uint8 for f in frames)
    np.testing.assert_allclose([f.mean() for f in frames], [160, 0, 160, 80], atol=3)
    assert read_frames(video, []) == []
    streamed = list(iter_frames(video, [3, 1, 3]))  # distinct, increasing
    assert [k for k, _ in streamed] == [1, 3]
    np.testing.assert_allclose([f.mean() for _, f in streamed], [40, 120], atol=3)


def test_read_frames_names_the_file_for_a_short_or_bad_video(tmp_path: Path) -> None:
    video = _grey_video(tmp_path / "grey.mp4")
    with pytest.raises(ValueError, match=r"grey\.mp4: frame 6 asked but the video has 6"):
        read_frames(video, [1, 6])
    with pytest.raises(ValueError, match=r"grey\.mp4: negative frame index"):
        read_frames(video, [-1])
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video at all" * 10)
    with pytest.raises(ValueError, match=r"junk\.mp4: cannot open"):
        read_frames(junk, [0])
    with pytest.raises(ValueError, match=r"junk\.mp4"):
        frame_count(junk)


def test_write_video_refuses_what_yuv420p_cannot_hold(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="even width and height"):
        write_video(tmp_path / "odd.mp4", [np.zeros((5, 8, 3), np.uint8)])
    with pytest.raises(ValueError, match=r"frame 1 is"):
        write_video(tmp_path / "mixed.mp4", [np.zeros((8, 8, 3), np.uint8)] * 1
                    + [np.zeros((8, 10, 3), np.uint8)])  # fmt: skip
    with pytest.raises(ValueError, match="no frames"):
        write_video(tmp_path / "none.mp4", [])


def test_evenly_spaced_takes_segment_centres() -> None:
    # centres of 3 equal segments of 10 frames: 1.67, 5.0, 8.33 -> floor
    assert evenly_spaced(10, 3) == [1, 5, 8]
    assert evenly_spaced(30, 2) == [7, 22]
    assert evenly_spaced(4, 10) == [0, 1, 2, 3]
    assert evenly_spaced(8, 8) == list(range(8))
    assert evenly_spaced(0, 3) == []
    with pytest.raises(ValueError):
        evenly_spaced(10, 0)


@given(st.integers(0, 5000), st.integers(1, 300))
def test_evenly_spaced_picks_one_frame_in_each_segment(n: int, k: int) -> None:
    picks = evenly_spaced(n, k)
    assert len(picks) == min(n, k)
    assert picks == sorted(set(picks))
    if n > k:  # frame p = [p, p + 1) holds the centre (i + 1/2) n / k of segment i
        for i, p in enumerate(picks):
            assert p * 2 * k <= (2 * i + 1) * n < (p + 1) * 2 * k


# ---------------------------------------------------------------------------------------------
# the synthetic sample, read back through the readers


def test_vqa_sample_reads_back(sample: Path) -> None:
    items = read_vqa(sample)
    assert [i.case for i in items] == [f"case{k:03d}" for k in range(1, 7)]
    for item in items:
        assert item.video == sample / synth.CAT2_DIR / item.case / f"{item.case}.mp4"
        assert len(item.answers) == 5 and all(a.strip() for a in item.answers)
        assert item.question.endswith("?")
    yes_no = [i for i in items if i.question.startswith("Was a ")]
    assert 0 < len(yes_no) < len(items)  # both kinds
    assert {i.answers[0] for i in yes_no} == {"Yes", "No"}
    # the write-up's example references, verbatim (seed 003, "may have the following list")
    assert read_vqa(sample)[1].answers == (
        "No",
        "No, a large needle driver was not used.",
        "A large needle driver was not used.",
        "No large needle driver was utilized.",
        "There is no indication a large needle driver was used.",
    )


def _jaw_pixels(frame: np.ndarray, tool: str) -> np.ndarray:
    """(H, W) bool: pixels within 60 (RGB distance) of the tool's jaw colour."""
    diff = frame.astype(np.int32) - np.array(synth.JAW_RGB[tool])
    return (diff**2).sum(axis=-1) < 60**2


def _not_tissue(frame: np.ndarray) -> np.ndarray:
    """(H, W) bool: pixels that are not the pink tissue (bright, with its G/R and B/R ratios,
    whatever the shading): a tool's shaft, its jaw, or the blend at their edges."""
    f = frame.astype(np.float32)
    r = np.maximum(f[..., 0], 1)
    base = synth.BACKGROUND_RGB
    return (
        (f[..., 0] < 150)
        | (np.abs(f[..., 1] / r - base[1] / base[0]) > 0.08)
        | (np.abs(f[..., 2] / r - base[2] / base[0]) > 0.08)
    )


def test_vqa_answers_follow_what_the_clip_shows(sample: Path) -> None:
    for item in read_vqa(sample):
        m = re.fullmatch(r"Was a (.+) used during the surgery\?", item.question)
        if m is None:
            continue
        tool = canonical_tool(m.group(1))
        frames = read_frames(item.video, evenly_spaced(frame_count(item.video), 4))
        shown = sum(int(_jaw_pixels(f, tool).sum()) for f in frames)
        assert (shown > 50) == (item.answers[0] == "Yes"), (item.case, tool, shown)


def test_tool_sample_reads_back(sample: Path) -> None:
    videos = read_tools(sample)
    assert [v.name for v in videos] == ["1", "2", "3"]
    classes = set()
    for v in videos:
        assert v.video.name == f"{v.name}_fps1.mp4"
        assert frame_count(v.video) == synth.N_FRAMES
        assert [f.frame for f in v.frames] == sorted(f.frame for f in v.frames)
        assert 0 < len(v.frames) < synth.N_FRAMES  # frames without a tool are not listed
        for f in v.frames:
            assert (f.width, f.height) == (640, 512) and f.file_name == f"{f.frame:010d}.jpg"
            assert 1 <= len(f.boxes) <= 3
            for tool, (x, y, w, h) in f.boxes:
                classes.add(tool)
                assert tool in TOOL_CLASSES
                assert x >= synth.MARGIN and y >= synth.MARGIN
                assert x + w <= 640 - synth.MARGIN and y + h <= 512 - synth.MARGIN
    assert len(classes) >= 5


def test_drawn_tools_lie_in_their_truth_boxes(sample: Path) -> None:
    for v in read_tools(sample):
        truth = {f.frame: f.boxes for f in v.frames}
        frames = read_frames(v.video, range(synth.N_FRAMES))
        for k, frame in enumerate(frames):
            assert frame.shape == (512, 640, 3)
            tool = _not_tissue(frame)
            inside = np.zeros_like(tool)
            for name, (x, y, w, h) in truth.get(k, ()):
                x0, y0, x1, y1 = int(x), int(y), int(x + w), int(y + h)  # x1, y1 exclusive
                inside[max(0, y0 - TOL) : y1 + TOL, max(0, x0 - TOL) : x1 + TOL] = True
                # the box is tight: the tool's pixels reach each of its sides
                rows, cols = np.nonzero(tool[y0:y1, x0:x1])
                assert abs(cols.min()) <= TOL and abs(rows.min()) <= TOL, (v.name, k, name)
                assert cols.max() >= x1 - x0 - 1 - TOL and rows.max() >= y1 - y0 - 1 - TOL
                # and its jaw has the colour of its class
                assert _jaw_pixels(frame[y0:y1, x0:x1], name).sum() > 20, (v.name, k, name)
            stray = tool & ~inside
            assert not stray.any(), (v.name, k, np.argwhere(stray)[:5])


def test_gc_json_converts_to_the_coco_json(sample: Path, tmp_path: Path) -> None:
    for v in read_tools(sample):
        gc = v.video.with_name(f"{v.name}_fps1_gc.json")
        shutil.copy(v.video, tmp_path / v.video.name)
        shutil.copy(gc, tmp_path / gc.name)
    from_gc = read_tools(tmp_path)
    assert from_gc == [
        ToolVideo(v.name, tmp_path / v.video.name, v.frames) for v in read_tools(sample)
    ]


def test_the_cli_build_equals_the_cached_build(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "again"
    assert synth.main(["--out", str(out)]) == 0
    jsons = sorted(p.relative_to(sample) for p in sample.rglob("*.json"))
    assert len(jsons) == 3 * 2 + 6 * 2
    for rel in jsons:
        assert (out / rel).read_bytes() == (sample / rel).read_bytes(), rel
    with pytest.raises(SystemExit):
        synth.main(["--out", str(out)])  # not empty


# ---------------------------------------------------------------------------------------------
# bad category-2 files: each error names the file and the field


def _case(root: Path, answers: object = None, question: object = "Was a stapler used?") -> Path:
    folder = root / "case001"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "case001.mp4").write_bytes(b"\x00")  # never decoded by the reader
    (folder / "case001_question.json").write_text(json.dumps(question))
    answers = ["No", "No, a stapler was not used.", "b", "c", "d"] if answers is None else answers
    (folder / "case001.json").write_text(json.dumps(answers))
    return folder


def test_a_valid_case_reads_and_macos_debris_is_skipped(tmp_path: Path) -> None:
    folder = _case(tmp_path / "sample")
    debris = tmp_path / "sample" / "__MACOSX" / "case001" / "._case001_question.json"
    debris.parent.mkdir(parents=True)
    debris.write_bytes(b"\x00\x05\x16\x07 AppleDouble")
    (folder / "._case001_question.json").write_bytes(b"\x00\x05\x16\x07")
    (item,) = read_vqa(tmp_path)
    assert (item.case, item.question, item.answers[1]) == (
        "case001", "Was a stapler used?", "No, a stapler was not used."
    )  # fmt: skip
    assert read_vqa(tmp_path / "sample" / "__MACOSX") == []


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"a": "No"}, r"case001\.json: the answers must be a JSON array of 5 strings, got dict"),
        (["No", "No.", "a", "b"], r"case001\.json: the answers must be 5 strings, .* has 4"),
        (["No", "", "a", "b", "c"], r"case001\.json: answer \[1\] is empty"),
        (["No", "a", "b", "c", 5], r"case001\.json: answer \[4\] must be a string, got int"),
    ],
)
def test_bad_answers_are_named(tmp_path: Path, answers: object, message: str) -> None:
    _case(tmp_path, answers=answers)
    with pytest.raises(SurgvuDataError, match=message):
        read_vqa(tmp_path)


def test_bad_question_and_json_are_named(tmp_path: Path) -> None:
    folder = _case(tmp_path, question={"question": "Was a stapler used?"})
    with pytest.raises(SurgvuDataError, match=r"case001_question\.json: the question must be a "
                                              r"JSON string, got dict"):  # fmt: skip
        read_vqa(tmp_path)
    (folder / "case001_question.json").write_text('"   "')
    with pytest.raises(SurgvuDataError, match=r"case001_question\.json: the question is empty"):
        read_vqa(tmp_path)
    (folder / "case001_question.json").write_text('"ok?"')
    (folder / "case001.json").write_text('[\n"No",\n"No, not used."\n"x"]')
    with pytest.raises(SurgvuDataError, match=r"case001\.json: not valid JSON: Expecting ',' "
                                              r"delimiter at line 4 column 1"):  # fmt: skip
        read_vqa(tmp_path)


def test_missing_clip_answers_and_twin_cases_are_named(tmp_path: Path) -> None:
    folder = _case(tmp_path / "a")
    (folder / "case001.mp4").unlink()
    with pytest.raises(SurgvuDataError, match=r"case001\.mp4: missing: the clip of question"):
        read_vqa(tmp_path)
    (folder / "case001.mp4").write_bytes(b"\x00")
    (folder / "case001.json").unlink()
    with pytest.raises(SurgvuDataError, match=r"case001_question\.json: the answers file "
                                              r"case001\.json is missing"):  # fmt: skip
        read_vqa(tmp_path)
    _case(tmp_path / "a")
    _case(tmp_path / "b")
    with pytest.raises(SurgvuDataError, match="case 'case001' appears twice"):
        read_vqa(tmp_path)
    with pytest.raises(SurgvuDataError, match="not a folder"):
        read_vqa(tmp_path / "nowhere")


# ---------------------------------------------------------------------------------------------
# category-1 files: conversion and errors


def _coco(root: Path, mutate=None, name: str = "1") -> Path:
    """A small valid N_fps1_coco.json (two frames, three boxes) beside a stand-in mp4."""
    doc = {
        "images": [
            {"id": 2, "width": 640, "height": 512, "file_name": "0000000002.jpg"},
            {"id": 5, "width": 640, "height": 512, "file_name": "0000000005.jpg"},
        ],
        "annotations": [
            {"id": 0, "image_id": 2, "category_id": 11, "bbox": [10, 20, 50, 30], "area": 1500,
             "iscrowd": 0},
            {"id": 1, "image_id": 5, "category_id": 1, "bbox": [100.5, 20, 5, 6], "area": 30,
             "iscrowd": 0},
            {"id": 2, "image_id": 2, "category_id": 7, "bbox": [300, 200, 40, 40], "area": 1600,
             "iscrowd": 0},
        ],
        "categories": [{"id": i, "name": n} for i, n in enumerate(TOOL_CLASSES)],
    }  # fmt: skip
    if mutate:
        mutate(doc)
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{name}_fps1.mp4").write_bytes(b"\x00")
    path = root / f"{name}_fps1_coco.json"
    path.write_text(json.dumps(doc))  # NaN is written as NaN, which json reads back
    return path


def test_coco_json_reads_as_frames(tmp_path: Path) -> None:
    _coco(tmp_path)
    (video,) = read_tools(tmp_path)
    assert (video.name, video.video) == ("1", tmp_path / "1_fps1.mp4")
    assert video.frames == (
        ToolFrame("1", 2, "0000000002.jpg", 640, 512, (
            ("needle driver", (10.0, 20.0, 50.0, 30.0)),
            ("monopolar curved scissor", (300.0, 200.0, 40.0, 40.0)),
        )),
        ToolFrame("1", 5, "0000000005.jpg", 640, 512,
                  (("cadiere forceps", (100.5, 20.0, 5.0, 6.0)),)),
    )  # fmt: skip


def test_coco_category_names_are_normalised(tmp_path: Path) -> None:
    def rename(doc: dict) -> None:
        doc["categories"][7]["name"] = "Monopolar Curved Scissors"
        doc["categories"][1]["name"] = "cadiere_forceps"

    _coco(tmp_path, rename)
    (video,) = read_tools(tmp_path)
    assert [b[0] for f in video.frames for b in f.boxes] == [
        "needle driver", "monopolar curved scissor", "cadiere forceps"
    ]  # fmt: skip


def _set(path: list, value: object):
    def mutate(doc: dict) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return mutate


_DELETE = object()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_set(["annotations", 1, "bbox"], _DELETE), r"annotations\[1\]: bbox is missing"),
        (_set(["annotations", 0, "category_id"], 99),
         r"annotations\[0\]: category_id 99 is not a known category"),
        (_set(["annotations", 2, "bbox"], [1, 2, 3]),
         r"annotations\[2\]: bbox must be 4 finite numbers"),
        (_set(["annotations", 2, "bbox"], [1, float("nan"), 3, 4]),
         r"annotations\[2\]: bbox must be 4 finite numbers"),
        (_set(["annotations", 2, "bbox"], [1, 2, "3", 4]),
         r"annotations\[2\]: bbox must be 4 finite numbers"),
        (_set(["annotations", 0, "bbox"], [1, 2, -3, 4]),
         r"annotations\[0\]: bbox has a negative width"),
        (_set(["annotations", 1, "image_id"], 7), r"annotations\[1\]: image_id 7 is not in images"),
        (_set(["categories", 3, "name"], "laser sword"),
         r"categories\[3\]: unknown tool name 'laser sword'"),
        (_set(["images", 1, "width"], "640"), r"images\[1\]: width must be an integer"),
        (_set(["images", 1, "id"], 2), r"images\[1\]: id 2 is listed twice"),
        (_set(["images"], {"id": 2}), r"images must be a list, got dict"),
    ],
)  # fmt: skip
def test_bad_coco_fields_are_named(tmp_path: Path, mutate, message: str) -> None:
    _coco(tmp_path, mutate)
    with pytest.raises(SurgvuDataError, match=r"1_fps1_coco\.json: " + message):
        read_tools(tmp_path)


def _gc(root: Path, boxes: list, name: str = "1") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{name}_fps1.mp4").write_bytes(b"\x00")
    path = root / f"{name}_fps1_gc.json"
    doc = {
        "type": "Multiple 2D bounding boxes",
        "boxes": boxes,
        "version": {"major": 1, "minor": 0},
    }
    path.write_text(json.dumps(doc))
    return path


def _corners(x1: float, y1: float, x2: float, y2: float) -> list:
    return [[x1, y1, 0.5], [x2, y1, 0.5], [x2, y2, 0.5], [x1, y2, 0.5]]


def test_gc_json_converts_as_the_official_converter(tmp_path: Path) -> None:
    _gc(tmp_path, [
        {"name": "slice_nr_3_needle_driver", "corners": _corners(10, 20, 60, 50)},
        {"name": "slice_nr_1_tip_up_fenestrated_grasper", "corners": _corners(5, 6, 7.5, 9)},
        {"name": "slice_nr_3_permanent_cautery_hook_spatula", "corners": _corners(0, 0, 1, 1)},
    ])  # fmt: skip
    (video,) = read_tools(tmp_path)
    # surgvu24-category-1-eval gc_to_coco.py:65-68: id = slice number (- 1 with set_index_0, as
    # evaluation.py:209 does for the ground truth), file name zfill(10); :28-30 tool = words after
    # "slice_nr_<n>_"; :72-75 x1, y1 = corners[0], w = corners[1].x - x1, h = corners[2].y - y1;
    # :11 frame 640x512; :117 only frames with a box
    assert video.frames == (
        ToolFrame("1", 0, "0000000000.jpg", 640, 512,
                  (("tip up fenestrated grasper", (5.0, 6.0, 2.5, 3.0)),)),
        ToolFrame("1", 2, "0000000002.jpg", 640, 512, (
            ("needle driver", (10.0, 20.0, 50.0, 30.0)),
            ("permanent cautery hook spatula", (0.0, 0.0, 1.0, 1.0)),
        )),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("box", "message"),
    [
        ({"name": "slice_nr_3_laser_sword", "corners": _corners(1, 2, 3, 4)},
         r"boxes\[0\]: name: unknown tool name 'laser sword'"),
        ({"name": "frame_3_needle_driver", "corners": _corners(1, 2, 3, 4)},
         r"boxes\[0\]: name must be 'slice_nr_<frame>_<tool>'"),
        ({"name": "slice_nr_0_needle_driver", "corners": _corners(1, 2, 3, 4)},
         r"boxes\[0\]: name 'slice_nr_0_needle_driver': slice numbers start at 1"),
        ({"name": "slice_nr_3_needle_driver", "corners": _corners(1, 2, 3, 4)[:3]},
         r"boxes\[0\]: corners must be 4 points"),
        ({"name": "slice_nr_3_needle_driver", "corners": _corners(1, 2, float("inf"), 4)},
         r"boxes\[0\]: corners must be 4 points"),
        ({"name": "slice_nr_3_needle_driver", "corners": _corners(1, 2, 3, 4)[::-1]},
         r"boxes\[0\]: corners are not in the order top-left"),
    ],
)  # fmt: skip
def test_bad_gc_fields_are_named(tmp_path: Path, box: dict, message: str) -> None:
    _gc(tmp_path, [box])
    with pytest.raises(SurgvuDataError, match=r"1_fps1_gc\.json: " + message):
        read_tools(tmp_path)


def test_coco_is_preferred_and_missing_files_are_named(tmp_path: Path) -> None:
    _gc(tmp_path, [{"name": "slice_nr_9_stapler", "corners": _corners(1, 2, 3, 4)}])
    _coco(tmp_path)
    (video,) = read_tools(tmp_path)
    assert [f.frame for f in video.frames] == [2, 5]  # from the coco file, not the gc file
    (tmp_path / "1_fps1.mp4").unlink()
    with pytest.raises(SurgvuDataError, match=r"1_fps1\.mp4: missing: the video of 1_fps1"):
        read_tools(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "4_fps1.mp4").write_bytes(b"\x00")
    with pytest.raises(SurgvuDataError, match=r"4_fps1\.mp4: no ground truth beside it"):
        read_tools(other)


def test_videos_are_found_at_any_depth_and_sort_by_number(tmp_path: Path) -> None:
    for name in ("10", "2", "1"):
        _coco(tmp_path / "unzipped" / "cat1_test_set_public", name=name)
    assert [v.name for v in read_tools(tmp_path)] == ["1", "2", "10"]
    assert read_tools(tmp_path / "unzipped") == read_tools(tmp_path)
    assert read_vqa(tmp_path) == []  # no category-2 case here
