"""support/evaluations/surgvqa/coco.py against pycocotools run directly on the same files.

Each golden test writes the ground truth and the results to tmp_path and runs pycocotools as its
README does (COCO(file), loadRes(file), COCOeval, evaluate/accumulate/summarize); our `evaluate`
must give the same numbers, and the hand arithmetic in the comments must agree with both.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pycocotools.cocoeval
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from support.evaluations.surgvqa.boxes import Box
from support.evaluations.surgvqa.coco import (
    STAT_NAMES,
    FrameTruth,
    ResampledAP,
    detections,
    evaluate,
    ground_truth,
    map_bootstrap,
)
from support.evaluations.surgvqa.tools import CATEGORY_ID, TOOL_CLASSES

STAPLER, CLIP, NEEDLE = CATEGORY_ID["stapler"], CATEGORY_ID["clip applier"], 11


def frame(image_id: int, *boxes: tuple[int, tuple[float, float, float, float]]) -> FrameTruth:
    return FrameTruth(image_id, 640, 512, f"{image_id:010d}.jpg", tuple(boxes))


def box(category_id: int, x: float, y: float, w: float, h: float) -> Box:
    return Box(TOOL_CLASSES[category_id], x, y, x + w, y + h)


def direct(tmp_path, gt: dict, results: list[dict]) -> COCOeval:
    """pycocotools on files, nothing of ours in between."""
    gt_file, res_file = tmp_path / "gt.json", tmp_path / "results.json"
    gt_file.write_text(json.dumps(gt))
    res_file.write_text(json.dumps(results))
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO(str(gt_file))
        ev = COCOeval(coco_gt, coco_gt.loadRes(str(res_file)), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


def same_stats(ours: dict[str, float], theirs: np.ndarray) -> None:
    """Our named stats are pycocotools' 12, with -1 (nothing to score) as NaN."""
    assert list(ours) == list(STAT_NAMES)
    for name, v in zip(STAT_NAMES, theirs, strict=True):
        if v == -1:
            assert math.isnan(ours[name]), name
        else:
            assert ours[name] == pytest.approx(v, abs=1e-12), name


TRUTH = [
    frame(1, (STAPLER, (100, 100, 100, 100)), (CLIP, (300, 200, 50, 80))),
    frame(2, (STAPLER, (10, 20, 200, 150))),
    frame(3, (NEEDLE, (400, 300, 120, 60)), (CLIP, (0, 0, 40, 40))),
]


def test_ground_truth_dict():
    gt = ground_truth(TRUTH)
    assert [c["id"] for c in gt["categories"]] == list(range(14))
    assert [c["name"] for c in gt["categories"]] == list(TOOL_CLASSES)
    assert [a["id"] for a in gt["annotations"]] == [1, 2, 3, 4, 5]  # never 0: see coco.py
    assert gt["annotations"][1] == {
        "id": 2,
        "image_id": 1,
        "category_id": CLIP,
        "bbox": [300, 200, 50, 80],
        "area": 4000,
        "iscrowd": 0,
    }
    assert gt["images"][0] == {"id": 1, "width": 640, "height": 512, "file_name": "0000000001.jpg"}


@pytest.mark.parametrize(
    "bad, match",
    [
        ([frame(1), frame(1)], "appears twice"),
        ([frame(1, (14, (0, 0, 1, 1)))], "category_id 14"),
        ([frame(1, (0, (0, 0, math.nan, 1)))], "four finite numbers"),
        ([frame(1, (0, (0, 0, 0, 1)))], "no area"),
    ],
)
def test_ground_truth_rejects_bad_frames_naming_them(bad, match):
    with pytest.raises(ValueError, match=f"frame 1 .*{match}"):
        ground_truth(bad)


def test_detections_score_by_answer_order():
    boxes = [box(STAPLER, 0, 0, 10, 10)] * 102
    dets = detections(7, boxes)
    # 1.0 for the first box named, 0.01 less per rank, floor 0.01 from rank 99 on
    assert [d["score"] for d in dets[:3]] == [1.0, 0.99, 0.98]
    assert [d["score"] for d in dets[98:]] == [0.02, 0.01, 0.01, 0.01]
    assert dets[0] == {"image_id": 7, "category_id": STAPLER, "bbox": [0, 0, 10, 10], "score": 1.0}
    with pytest.raises(ValueError, match="unknown tool"):
        detections(7, [Box("scalpel", 0, 0, 1, 1)])


def perfect_results() -> list[dict]:
    return [
        d for f in TRUTH for d in detections(f.image_id, [box(c, *xywh) for c, xywh in f.boxes])
    ]


def test_perfect_detections(tmp_path):
    gt = ground_truth(TRUTH)
    scores = evaluate(gt, perfect_results())
    same_stats(scores.stats, direct(tmp_path, gt, perfect_results()).stats)
    assert scores.stats["AP"] == pytest.approx(1.0)
    for name in ("stapler", "clip applier", "needle driver"):
        assert scores.per_class_ap[name] == pytest.approx(1.0)
        assert scores.per_class_ap50[name] == pytest.approx(1.0)
    assert math.isnan(scores.per_class_ap["vessel sealer"])  # no truth of that class
    assert (scores.tp50, scores.n_dt, scores.n_gt) == (5, 5, 5)


@pytest.mark.parametrize(
    "dx, ap",
    [
        # 100x100 box shifted 25 px in x: IoU = 75*100 / (100*100 + 100*100 - 75*100) = 0.6,
        # a hit at the thresholds .50, .55, .60 (pycocotools skips only IoU < threshold) and a
        # miss at .65 ... .95: AP50 = 1, AP75 = 0, AP = 3/10
        (25, 0.3),
        # shifted 20 px: IoU = 80/120 = 0.667: hits at .50 ... .65, AP = 4/10
        (20, 0.4),
        # shifted 60 px: IoU = 40/160 = 0.25: a miss at every threshold
        (60, 0.0),
    ],
)
def test_shifted_box_gives_the_iou_implied_ap(tmp_path, dx, ap):
    gt = ground_truth([frame(1, (STAPLER, (100, 100, 100, 100)))])
    results = detections(1, [box(STAPLER, 100 + dx, 100, 100, 100)])
    scores = evaluate(gt, results)
    same_stats(scores.stats, direct(tmp_path, gt, results).stats)
    assert scores.stats["AP"] == pytest.approx(ap)
    assert scores.stats["AP50"] == pytest.approx(1.0 if ap else 0.0)
    assert scores.stats["AP75"] == pytest.approx(0.0)
    assert scores.tp50 == (1 if ap else 0)


def test_a_box_of_another_class_is_a_false_positive_and_a_miss(tmp_path):
    gt = ground_truth([frame(1, (STAPLER, (100, 100, 100, 100)))])
    results = detections(1, [box(CLIP, 100, 100, 100, 100)])  # right place, wrong tool
    scores = evaluate(gt, results)
    same_stats(scores.stats, direct(tmp_path, gt, results).stats)
    assert scores.stats["AP"] == 0.0
    assert scores.per_class_ap["stapler"] == 0.0
    assert math.isnan(scores.per_class_ap["clip applier"])  # no truth: not in the mean
    assert (scores.tp50, scores.n_dt, scores.n_gt) == (0, 1, 1)


def test_a_false_positive_named_first_halves_the_precision(tmp_path):
    gt = ground_truth([frame(1, (STAPLER, (100, 100, 100, 100)))])
    results = detections(1, [box(STAPLER, 400, 300, 50, 50), box(STAPLER, 100, 100, 100, 100)])
    # ranked FP (1.0) then TP (0.99): precision 0, then 1/2 at recall 1; interpolated (the max
    # to the right) 0.5 at all 101 recall points: AP = 0.5 at every threshold
    scores = evaluate(gt, results)
    same_stats(scores.stats, direct(tmp_path, gt, results).stats)
    assert scores.stats["AP"] == pytest.approx(0.5)
    assert (scores.tp50, scores.n_dt, scores.n_gt) == (1, 2, 1)


def test_empty_results_score_zero_without_crashing(tmp_path):
    gt = ground_truth(TRUTH)
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    with pytest.raises(IndexError), contextlib.redirect_stdout(io.StringIO()):
        COCO(str(tmp_path / "gt.json")).loadRes([])  # the pitfall evaluate() avoids
    scores = evaluate(gt, [])
    # pycocotools ignores a result of a category that is not in the truth, so one such result
    # is an empty result list that loadRes accepts
    ignored = [{"image_id": 1, "category_id": 99, "bbox": [0, 0, 10, 10], "score": 1.0}]
    same_stats(scores.stats, direct(tmp_path, gt, ignored).stats)
    assert scores.stats["AP"] == 0.0 and scores.stats["AR100"] == 0.0
    assert scores.per_class_ap["stapler"] == 0.0
    assert (scores.tp50, scores.n_dt, scores.n_gt) == (0, 0, 5)


def test_no_truth_is_nan_not_minus_one(tmp_path):
    gt = ground_truth([frame(1), frame(2)])
    results = detections(1, [box(STAPLER, 0, 0, 10, 10)])
    assert direct(tmp_path, gt, results).stats[0] == -1
    for res in (results, []):
        scores = evaluate(gt, res)
        assert all(math.isnan(v) for v in scores.stats.values())
        assert all(math.isnan(v) for v in scores.per_class_ap.values())


def test_image_order_does_not_change_the_result_for_distinct_scores():
    results = [
        *perfect_results()[:-1],  # the last truth box missed
        {"image_id": 2, "category_id": NEEDLE, "bbox": [0, 0, 50, 50], "score": 0.5},
        {"image_id": 3, "category_id": STAPLER, "bbox": [5, 25, 190, 140], "score": 0.45},
    ]
    for n, r in enumerate(results):  # distinct scores across frames
        r["score"] = round(r["score"] - n * 0.013, 4)
    base = evaluate(ground_truth(TRUTH), results)
    assert 0 < base.stats["AP"] < 1
    rng = random.Random(0)
    for _ in range(5):
        frames, shuffled = TRUTH[:], results[:]
        rng.shuffle(frames)
        rng.shuffle(shuffled)
        again = evaluate(ground_truth(frames), shuffled)
        assert again.stats == pytest.approx(base.stats, nan_ok=True)
        assert again.per_class_ap == pytest.approx(base.per_class_ap, nan_ok=True)


@pytest.mark.parametrize(
    "result, match",
    [
        ({"image_id": 99, "category_id": 0, "bbox": [0, 0, 1, 1], "score": 1.0}, "image_id 99"),
        ({"image_id": 1, "category_id": 0, "bbox": [math.nan, 0, 1, 1], "score": 1}, "finite"),
        ({"image_id": 1, "category_id": 0, "bbox": [0, 0, math.inf, 1], "score": 1}, "finite"),
        ({"image_id": 1, "category_id": 0, "bbox": [0, 0, 1], "score": 1.0}, "finite"),
        ({"image_id": 1, "category_id": 0, "bbox": [0, 0, 1, 1], "score": math.nan}, "score"),
        ({"image_id": 1, "category_id": 0, "bbox": [0, 0, 1, 1]}, "score"),
        ({"image_id": 1, "category_id": 42, "bbox": [0, 0, 1, 1], "score": 1.0}, "category_id"),
    ],
)
def test_bad_results_are_value_errors(result, match):
    with pytest.raises(ValueError, match=match):
        evaluate(ground_truth(TRUTH), [result])


def test_nan_box_would_be_a_hit_in_pycocotools(tmp_path):
    # why non-finite boxes are rejected: pycocotools counts a NaN box as a true positive
    gt = ground_truth([frame(1, (STAPLER, (100, 100, 100, 100)))])
    nan_box = [{"image_id": 1, "category_id": STAPLER, "bbox": [math.nan] * 4, "score": 1.0}]
    assert direct(tmp_path, gt, nan_box).stats[0] == pytest.approx(1.0)


def mixed_set() -> tuple[dict, list[dict], dict[int, str]]:
    """Four videos of three frames: good, poor and missing answers, ties across frames."""
    frames, results, cluster_of = [], [], {}
    rng = np.random.default_rng(3)
    for v in range(4):
        for j in range(3):
            image_id = 10 * v + j + 1
            truth = [(int(c), (float(x), float(y), 120.0, 90.0)) for c, x, y in
                     zip(rng.integers(0, 4, 2), rng.integers(0, 500, 2), rng.integers(0, 400, 2),
                         strict=True)]  # fmt: skip
            frames.append(frame(image_id, *truth))
            shift = [0, 15, 35, 200][(v + j) % 4]  # px: IoU 1, 0.78, 0.55, 0
            answer = [box(c, x + shift, y, w, h) for c, (x, y, w, h) in truth[: 1 + v % 2]]
            answer.append(box(STAPLER, 5, 5, 30, 30))  # a false positive, or a hit by chance
            results += detections(image_id, answer)
            cluster_of[image_id] = f"video{v}"
    return ground_truth(frames), results, cluster_of


def test_bootstrap_value_is_evaluates_ap():
    gt, results, cluster_of = mixed_set()
    scores = evaluate(gt, results)
    boot = map_bootstrap(gt, results, cluster_of, n_resamples=50, seed=0)
    assert 0.1 < scores.stats["AP"] < 0.9  # a mixed set
    assert boot["map"].value == pytest.approx(scores.stats["AP"], abs=1e-12)
    assert boot["ap50"].value == pytest.approx(scores.stats["AP50"], abs=1e-12)
    assert boot["ap75"].value == pytest.approx(scores.stats["AP75"], abs=1e-12)


def test_resampled_frames_equal_evaluate_on_the_same_frames_copied():
    """A resample with repeats == evaluate() on a truth where the repeats are new frames."""
    gt, results, _ = mixed_set()
    statistic = ResampledAP(gt, results)
    ids = statistic.image_ids
    drawn = [0, 1, 2, 0, 1, 2, 6, 7, 8]  # video0 twice, then video2 (case = position in ids)
    copies, copied_results = [], []
    for n, c in enumerate(drawn):  # new ids in draw order, so ties across frames break alike
        new_id = 1000 + n
        img = next(i for i in gt["images"] if i["id"] == ids[c])
        boxes = [(a["category_id"], tuple(a["bbox"])) for a in gt["annotations"]
                 if a["image_id"] == ids[c]]  # fmt: skip
        copies.append(FrameTruth(new_id, img["width"], img["height"], img["file_name"],
                                 tuple(boxes)))  # fmt: skip
        copied_results += [r | {"image_id": new_id} for r in results if r["image_id"] == ids[c]]
    expected = evaluate(ground_truth(copies), copied_results).stats
    got = statistic(np.asarray(drawn))
    assert got["map"] == pytest.approx(expected["AP"], abs=1e-12)
    assert got["ap50"] == pytest.approx(expected["AP50"], abs=1e-12)
    assert got["ap75"] == pytest.approx(expected["AP75"], abs=1e-12)


def test_bootstrap_is_deterministic_and_its_interval_holds_the_value():
    gt, results, cluster_of = mixed_set()
    first = map_bootstrap(gt, results, cluster_of, n_resamples=200, seed=5)
    assert first == map_bootstrap(gt, results, cluster_of, n_resamples=200, seed=5)
    assert first != map_bootstrap(gt, results, cluster_of, n_resamples=200, seed=6)
    for name, e in first.items():
        assert e.low <= e.value <= e.high, name
        assert e.low < e.high, name


def test_bootstrap_with_one_cluster_has_no_interval():
    gt, results, cluster_of = mixed_set()
    boot = map_bootstrap(gt, results, dict.fromkeys(cluster_of, "one video"), 100, 0)
    assert not math.isnan(boot["map"].value)
    assert all(math.isnan(e.low) and math.isnan(e.high) for e in boot.values())


def test_bootstrap_needs_every_frames_cluster():
    gt, results, cluster_of = mixed_set()
    del cluster_of[1]
    with pytest.raises(ValueError, match=r"no cluster for image ids \[1\]"):
        map_bootstrap(gt, results, cluster_of, 10, 0)


def test_bootstrap_of_empty_results_and_of_no_truth():
    gt, _, cluster_of = mixed_set()
    boot = map_bootstrap(gt, [], cluster_of, 20, 0)
    assert (boot["map"].value, boot["map"].low, boot["map"].high) == (0.0, 0.0, 0.0)
    empty_gt = ground_truth([frame(1), frame(2)])
    boot = map_bootstrap(empty_gt, [], {1: "a", 2: "b"}, 20, 0)
    assert all(math.isnan(v) for e in boot.values() for v in (e.value, e.low, e.high))


def test_pycocotools_is_silent_even_from_threads(capsys):
    gt, results, cluster_of = mixed_set()
    with ThreadPoolExecutor(4) as pool:  # cases are scored in worker threads
        aps = list(pool.map(lambda _: evaluate(gt, results).stats["AP"], range(8)))
    map_bootstrap(gt, results, cluster_of, 5, 0)
    assert len(set(aps)) == 1
    assert capsys.readouterr().out == ""
    assert "print" not in vars(pycocotools.cocoeval)  # pycocotools' own print is back
