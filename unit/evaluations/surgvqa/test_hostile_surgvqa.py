"""SurgVU under hostile input: box floods in answers and in ground truth, megabyte answers to
BLEU, and a frame id past the end of its video (issue 25, items 8 and 10)."""

from __future__ import annotations

import contextlib
import io
import json
import random
from pathlib import Path

import numpy as np
import pycocotools.coco
import pytest
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from support.evaluations.surgvqa import bleu
from support.evaluations.surgvqa.boxes import MAX_BOXES_PER_TOOL, Box, parse_boxes
from support.evaluations.surgvqa.coco import (
    MAX_DETS,
    FrameTruth,
    detections,
    evaluate,
    ground_truth,
    top_detections,
)
from support.evaluations.surgvqa.dataset import MAX_BOXES_PER_FRAME, SurgvuDataError, read_tools
from support.evaluations.surgvqa.tools import TOOL_CLASSES
from support.evaluations.surgvqa.video import write_video


def _box(rng: random.Random) -> list[float]:
    return [rng.uniform(0, 600), rng.uniform(0, 470), rng.uniform(5, 40), rng.uniform(5, 40)]


def _random_set(seed: int) -> tuple[dict, list[dict]]:
    """3 frames x 3 classes: ~8 truths and 120-250 detections each, many near a truth, scores
    from 10 values (ties across the cut)."""
    rng = random.Random(seed)
    frames, results = [], []
    for image_id in (1, 2, 3):
        truths = []
        for cat in (0, 4, 11):
            for _ in range(rng.randrange(3, 14)):
                truths.append((cat, tuple(_box(rng))))
            for _ in range(rng.randrange(120, 250)):
                if truths and rng.random() < 0.4:
                    x, y, w, h = rng.choice(truths)[1]
                    bbox = [x + rng.uniform(-4, 4), y + rng.uniform(-4, 4), w, h]
                else:
                    bbox = _box(rng)
                score = rng.randrange(1, 11) / 10
                results.append(
                    {"image_id": image_id, "category_id": cat, "bbox": bbox, "score": score}
                )
        frames.append(FrameTruth(image_id, 640, 512, f"{image_id:010d}.jpg", tuple(truths)))
    rng.shuffle(results)
    return ground_truth(frames), results


def _pycocotools(gt: dict, results: list) -> COCOeval:
    """COCOeval on the results exactly as given (the reference)."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = json.loads(json.dumps(gt))
        coco.createIndex()
        ev = COCOeval(coco, coco.loadRes(json.loads(json.dumps(results))), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


@pytest.mark.parametrize("seed", range(3))
def test_cutting_to_maxdets_keeps_pycocotools_stats_exactly(seed: int) -> None:
    gt, results = _random_set(seed)
    kept = top_detections(results)
    assert len(kept) < len(results)
    groups: dict[tuple[int, int], int] = {}
    for r in kept:
        key = (r["image_id"], r["category_id"])
        groups[key] = groups.get(key, 0) + 1
    assert max(groups.values()) == MAX_DETS
    full, cut = _pycocotools(gt, results), _pycocotools(gt, kept)
    assert full.stats.tobytes() == cut.stats.tobytes()
    for key in ("precision", "recall", "scores"):
        assert full.eval[key].tobytes() == cut.eval[key].tobytes()
    ours = evaluate(gt, results).stats
    reference = [np.nan if v < 0 else float(v) for v in full.stats]  # -1: no truth there
    np.testing.assert_array_equal(list(ours.values()), reference)


def test_a_box_flood_on_one_frame_reaches_pycocotools_cut(monkeypatch) -> None:
    rng = random.Random(0)
    gt = ground_truth([FrameTruth(1, 640, 512, "f", ((11, (10.0, 10.0, 50.0, 50.0)),))])
    flood = [
        {"image_id": 1, "category_id": rng.randrange(14), "bbox": _box(rng), "score": 0.01}
        for _ in range(20_000)
    ]
    seen: list[int] = []
    real = pycocotools.coco.COCO.loadRes

    def load_res(self, anns):
        seen.append(len(anns))
        return real(self, anns)

    monkeypatch.setattr(pycocotools.coco.COCO, "loadRes", load_res)
    scores = evaluate(gt, flood)
    assert seen == [14 * MAX_DETS] and scores.n_dt == 14 * MAX_DETS


def test_the_parser_keeps_100_boxes_per_tool_and_no_score_changes() -> None:
    items = [
        {"label": "needle driver", "bbox_2d": [i % 600, 5, i % 600 + 30, 40]} for i in range(150)
    ]
    items += [{"label": "stapler", "bbox_2d": [100, 100, 180, 160]}] * 3
    answer = parse_boxes(json.dumps(items), 640, 512)
    assert (len(answer.boxes), answer.over_cap, answer.dropped) == (MAX_BOXES_PER_TOOL + 3, 50, 0)
    every = [Box(i["label"], *i["bbox_2d"]) for i in items]
    gt = ground_truth(
        [
            FrameTruth(
                1, 640, 512, "f", ((11, (10.0, 5.0, 30.0, 35.0)), (5, (100.0, 100.0, 80.0, 60.0)))
            )
        ]
    )
    assert evaluate(gt, detections(1, answer.boxes)) == evaluate(gt, detections(1, every))


def test_a_box_flood_answer_never_raises() -> None:
    text = json.dumps([{"label": "stapler", "bbox_2d": [1, 1, 9, 9]}] * 200_000)
    answer = parse_boxes(text, 640, 512)
    assert len(answer.boxes) == MAX_BOXES_PER_TOOL and answer.over_cap > 0


def _coco_file(root: Path, n_boxes: int) -> Path:
    doc = {
        "images": [{"id": 2, "width": 640, "height": 512, "file_name": "0000000002.jpg"}],
        "annotations": [
            {"id": i + 1, "image_id": 2, "category_id": 11, "bbox": [1, 1, 5, 5]}
            for i in range(n_boxes)
        ],
        "categories": [{"id": i, "name": n} for i, n in enumerate(TOOL_CLASSES)],
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "1_fps1.mp4").write_bytes(b"\x00")
    path = root / "1_fps1_coco.json"
    path.write_text(json.dumps(doc))
    return path


def _gc_file(root: Path, n_boxes: int) -> Path:
    corners = [[1, 1, 0.5], [6, 1, 0.5], [6, 6, 0.5], [1, 6, 0.5]]
    doc = {"boxes": [{"name": "slice_nr_3_needle_driver", "corners": corners}] * n_boxes}
    root.mkdir(parents=True, exist_ok=True)
    (root / "1_fps1.mp4").write_bytes(b"\x00")
    path = root / "1_fps1_gc.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("write", [_coco_file, _gc_file])
def test_an_absurd_box_count_on_one_frame_is_named(tmp_path: Path, write) -> None:
    (video,) = read_tools(write(tmp_path / "ok", MAX_BOXES_PER_FRAME).parent)
    assert len(video.frames[0].boxes) == MAX_BOXES_PER_FRAME
    path = write(tmp_path / "bad", MAX_BOXES_PER_FRAME + 1)
    with pytest.raises(SurgvuDataError, match=rf"{path.name}: frame 2 has more than 1000"):
        read_tools(path.parent)


REFS = [
    "Yes, a needle driver was used in this clip.",
    "Yes.",
    "A needle driver was used.",
    "Yes, it was used.",
    "Yes the needle driver was used in the clip",
]


def test_bleu_of_a_huge_answer_scores_its_first_tokens_and_says_so(tmp_path: Path) -> None:
    from support.evaluations.surgvqa.spec import SurgvqaSettings
    from support.evaluations.surgvqa.task import SurgvqaEvaluation
    from support.types import Case

    words = ["yes", "the", "needle", "driver", "was", "used", "a", "in"]
    long = " ".join(words[i * 7 % 8] for i in range(bleu.MAX_CANDIDATE_TOKENS + 5000))
    head = " ".join(long.split()[: bleu.MAX_CANDIDATE_TOKENS])
    assert bleu.reference_scores(REFS, long) == bleu.reference_scores(REFS, head)
    short = "Yes, the needle driver was used."
    smooth = SmoothingFunction().method1
    expected = [
        sentence_bleu([bleu.tokens(r)], bleu.tokens(short), smoothing_function=smooth) for r in REFS
    ]
    assert bleu.reference_scores(REFS, short) == expected
    (tmp_path / "root").mkdir()
    ev = SurgvqaEvaluation([], [], SurgvqaSettings(root=str(tmp_path / "root")))
    params = {
        "category": "vqa",
        "case": "c",
        "question": "Was it?",
        "answers": REFS,
        "kind": "yes_no",
    }
    case = Case("vqa-c", "surgvqa", params, {}, cluster="video-c")
    assert ev.score_vqa(case, long).prediction["candidate_cut"] == 5000
    verdict = ev.score_vqa(case, short)
    assert "candidate_cut" not in verdict.prediction
    assert verdict.scores["bleu"] == max(expected)


def test_a_frame_past_the_end_of_its_video_errors_only_its_case(tmp_path: Path) -> None:
    from support.evaluations.surgvqa.spec import SurgvqaSettings
    from support.evaluations.surgvqa.task import SurgvqaEvaluation
    from support.settings import OutputSettings, RunSettings

    write_video(tmp_path / "1_fps1.mp4", [np.zeros((64, 64, 3), np.uint8)] * 3, fps=1)
    coco = {
        "images": [
            {"id": k, "width": 64, "height": 64, "file_name": f"{k:010d}.jpg"} for k in (1, 2, 9)
        ],
        "annotations": [
            {"id": k, "image_id": k, "category_id": 11, "bbox": [1, 1, 10, 10]} for k in (1, 2, 9)
        ],
        "categories": [{"id": i, "name": n} for i, n in enumerate(TOOL_CLASSES)],
    }
    (tmp_path / "1_fps1_coco.json").write_text(json.dumps(coco))
    ev = SurgvqaEvaluation.load(
        RunSettings(output=OutputSettings(cache_dir=tmp_path / "cache")),
        SurgvqaSettings(root=str(tmp_path)),
    )
    cases = {c.params["frame"]: c for c in ev.cases()}
    with pytest.raises(
        SurgvuDataError, match=r"1_fps1.mp4: frame 9 \(image id 9 .*past the end .*3 decodable"
    ):
        ev.request(cases[9])
    for k in (1, 2):
        assert ev.request(cases[k]).parts[0].image
