"""Edges of support/evaluations/surgvqa/coco.py: the MAX_DETS cut, the match counts, per-class
AP at two thresholds, input checks naming the result, and pycocotools' silenced `print`.

Golden values come from pycocotools run directly (COCO on a dict, loadRes, COCOeval) or from the
IoU arithmetic in the comments."""

from __future__ import annotations

import contextlib
import copy
import io
import math

import numpy as np
import pycocotools.coco
import pycocotools.cocoeval
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from support.evaluations.surgvqa import coco
from support.evaluations.surgvqa.coco import FrameTruth, evaluate, ground_truth, top_detections
from support.evaluations.surgvqa.tools import CATEGORY_ID, TOOL_CLASSES

STAPLER, CLIP = CATEGORY_ID["stapler"], CATEGORY_ID["clip applier"]


def frame(image_id: int, *boxes: tuple[int, tuple[float, float, float, float]]) -> FrameTruth:
    return FrameTruth(image_id, 640, 512, f"{image_id}.jpg", tuple(boxes))


def det(image_id: int, category_id: int, bbox: list[float], score: float) -> dict:
    return {"image_id": image_id, "category_id": category_id, "bbox": bbox, "score": score}


def pycocotools_direct(gt: dict, results: list[dict]) -> COCOeval:
    """pycocotools alone (its README's calls), on copies."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = copy.deepcopy(gt)
        coco_gt.createIndex()
        ev = COCOeval(coco_gt, coco_gt.loadRes(copy.deepcopy(results)), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


# ---- the MAX_DETS cut -------------------------------------------------------------------------
def test_top_detections_keeps_the_100_best_per_image_and_class_in_input_order() -> None:
    scores = [(37 * k) % 105 / 105 for k in range(105)]  # 105 distinct scores, shuffled
    many = [det(1, STAPLER, [k, 0, 10, 10], sc) for k, sc in enumerate(scores)]
    other = [det(1, CLIP, [0, 0, 5, 5], 0.5), det(2, STAPLER, [0, 0, 5, 5], 0.0)]
    results = [other[0], *many, other[1]]
    kept = top_detections(results)
    lowest = sorted(scores)[:5]  # the five that COCOeval would never look at
    assert kept == [r for r in results if r["category_id"] != STAPLER or r["image_id"] != 1
                    or r["score"] not in lowest]  # fmt: skip
    assert len(kept) == 102


def test_top_detections_cuts_nothing_at_100_per_image_and_class() -> None:
    # 100 of a class on one frame, 60 + 60 of two classes, 60 + 60 on two frames: all counted
    hundred = [det(1, STAPLER, [k, 0, 5, 5], 0.5) for k in range(100)]
    assert top_detections(hundred) == hundred
    two_classes = [det(1, c, [k, 0, 5, 5], 0.5) for c in (STAPLER, CLIP) for k in range(60)]
    assert top_detections(two_classes) == two_classes
    two_frames = [det(i, STAPLER, [k, 0, 5, 5], 0.5) for i in (1, 2) for k in range(60)]
    assert top_detections(two_frames) == two_frames


def test_ties_at_the_cut_keep_the_earlier_boxes() -> None:
    # 101 boxes scored alike: the first 100 kept, as COCOeval's stable mergesort then [:100]
    tied = [det(1, STAPLER, [k, 0, 5, 5], 0.5) for k in range(101)]
    assert top_detections(tied) == tied[:100]


def test_over_100_boxes_score_as_pycocotools_alone() -> None:
    gt = ground_truth([frame(1, (STAPLER, (0, 0, 10, 10))), frame(2, (CLIP, (50, 50, 20, 20)))])
    # a hit ranked last of 103: pycocotools drops it (maxDets 100), so AP50 falls to 0
    results = [det(1, STAPLER, [300, 300, 10, 10], 1 - k / 200) for k in range(102)]
    results += [det(1, STAPLER, [0, 0, 10, 10], 0.1), det(2, CLIP, [50, 50, 20, 20], 0.9)]
    ours = evaluate(gt, results)
    theirs = pycocotools_direct(gt, results)
    for name, v in zip(coco.STAT_NAMES, theirs.stats, strict=True):
        assert (math.isnan(ours.stats[name]) and v == -1) or ours.stats[name] == pytest.approx(v)
    assert ours.per_class_ap50["stapler"] == 0.0 and ours.per_class_ap50[
        "clip applier"
    ] == pytest.approx(1)
    # counts over the 100 looked at of frame 1 (no hit) and the 1 of frame 2 (a hit)
    assert (ours.tp50, ours.n_dt, ours.n_gt) == (1, 101, 2)


# ---- match counts and per-class AP --------------------------------------------------------------
def test_match_counts_and_ap_at_two_thresholds() -> None:
    gt = ground_truth(
        [
            frame(1, (STAPLER, (0, 0, 100, 100))),
            frame(2, (CLIP, (0, 0, 100, 100)), (STAPLER, (200, 200, 50, 50))),
            frame(3),  # no truth: its box is a false positive
        ]
    )
    results = [
        # IoU = 100*60 / (100*100 + 100*60 - 100*60) = 0.6: a hit at 0.5, 0.55, 0.6 only
        det(1, STAPLER, [0, 0, 100, 60], 1.0),
        det(1, STAPLER, [0, 0, 100, 100], 0.5),  # a duplicate, exact: matches only if first fails
        det(2, CLIP, [0, 0, 100, 100], 1.0),  # exact
        det(3, CLIP, [0, 0, 10, 10], 0.9),  # on an empty frame
    ]
    ours = evaluate(gt, results)
    theirs = pycocotools_direct(gt, results)
    precision = theirs.eval["precision"][:, :, :, 0, 2]  # area all, maxDets 100
    for k, cat in enumerate(theirs.params.catIds):
        p = precision[:, :, k]
        want = float(np.mean(p[p > -1])) if (p > -1).any() else math.nan
        got = ours.per_class_ap[TOOL_CLASSES[cat]]
        assert (math.isnan(want) and math.isnan(got)) or got == pytest.approx(want)
        p50 = precision[0, :, k]
        want50 = float(np.mean(p50[p50 > -1])) if (p50 > -1).any() else math.nan
        got50 = ours.per_class_ap50[TOOL_CLASSES[cat]]
        assert (math.isnan(want50) and math.isnan(got50)) or got50 == pytest.approx(want50)
    assert set(ours.per_class_ap) == set(TOOL_CLASSES)
    # at IoU 0.5: stapler frame 1 matched by the first box (the duplicate is a false positive),
    # frame 2's stapler missed, clip found, the empty frame's clip a false positive
    assert (ours.tp50, ours.n_dt, ours.n_gt) == (2, 4, 3)
    assert ours.per_class_ap50["clip applier"] < 1.0  # its false positive on frame 3 ranks 2nd


def test_no_results_count_the_truth() -> None:
    gt = ground_truth([frame(1, (STAPLER, (0, 0, 10, 10)), (CLIP, (20, 20, 10, 10))), frame(2)])
    ours = evaluate(gt, [])
    assert (ours.tp50, ours.n_dt, ours.n_gt) == (0, 0, 2)
    assert ours.stats["AP"] == 0.0 and ours.stats["AR100"] == 0.0  # 0, not NaN
    assert ours.per_class_ap["stapler"] == 0.0 and math.isnan(ours.per_class_ap["vessel sealer"])


# ---- input checks: each error names the result --------------------------------------------------
GT = [frame(1, (STAPLER, (0, 0, 10, 10)))]


@pytest.mark.parametrize(
    ("result", "match"),
    [
        (det(2, 0, [0, 0, 1, 1], 1.0), r"result 0 \(image_id 2\): image_id is not in the ground"),
        (det(1, 14, [0, 0, 1, 1], 1.0), r"result 0 \(image_id 1\): category_id 14 is unknown"),
        (det(1, 0, [0, 0, -1, 1], 1.0), r"result 0 \(image_id 1\): bbox \[0, 0, -1, 1\] has a neg"),
        (det(1, 0, [0, 0, 1, -2], 1.0), r"negative size"),
        (det(1, 0, [0, 0, True, 1], 1.0), r"bbox \[0, 0, True, 1\] is not four finite numbers"),
        (det(1, 0, "0 0 1 1", 1.0), r"is not four finite numbers \[x, y, w, h\]"),
        (det(1, 0, [0, 0, 1, 1], True), r"result 0 \(image_id 1\): score True is not a finite"),
        (det(1, 0, [0, 0, 1, 1], "1"), r"score '1' is not a finite number"),
        (det(1, 0, [0, 0, 1, 1], math.inf), r"score inf"),
    ],
)
def test_bad_results_name_the_result(result: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        evaluate(ground_truth(GT), [det(1, 0, [0, 0, 1, 1], 1.0), result][1:])


def test_the_second_result_is_named_by_its_position() -> None:
    with pytest.raises(ValueError, match=r"^result 1 \(image_id 7\)"):
        evaluate(ground_truth(GT), [det(1, 0, [0, 0, 1, 1], 1.0), det(7, 0, [0, 0, 1, 1], 1.0)])


def test_zero_sized_boxes_and_integer_scores_are_valid() -> None:
    # a box of width 0 is legal COCO (it matches nothing); an int score is a number
    scores = evaluate(ground_truth(GT), [det(1, STAPLER, [0, 0, 0, 0], 1)])
    assert scores.stats["AP"] == 0.0 and (scores.tp50, scores.n_dt) == (0, 1)


@pytest.mark.parametrize(
    ("bbox", "match"),
    [
        ((0, 0, -1, 5), r"ground truth frame 1 \(1.jpg\): box \[0, 0, -1, 5\] has no area"),
        ((0, 0, 5, 0), "has no area"),
        ((0, 0, 5), r"ground truth frame 1 \(1.jpg\): bbox \(0, 0, 5\) is not four finite"),
        ((0, False, 5, 5), "is not four finite numbers"),
    ],
)
def test_ground_truth_box_errors(bbox: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ground_truth([frame(1, (STAPLER, bbox))])


def test_ground_truth_names_the_category_and_keeps_empty_frames() -> None:
    with pytest.raises(ValueError, match=r"ground truth frame 3 \(3.jpg\): category_id -1 is not"):
        ground_truth([frame(3, (-1, (0, 0, 1, 1)))])
    with pytest.raises(ValueError, match=r"frame 2 \(2.jpg\): image_id appears twice"):
        ground_truth([frame(2), frame(2)])
    gt = ground_truth([frame(5), frame(6, (13, (1.5, 2, 3, 4)))])
    assert [i["id"] for i in gt["images"]] == [5, 6]
    assert gt["annotations"] == [
        {"id": 1, "image_id": 6, "category_id": 13, "bbox": [1.5, 2, 3, 4], "area": 12,
         "iscrowd": 0}
    ]  # fmt: skip


def test_map_bootstrap_names_the_frames_without_a_cluster() -> None:
    gt = ground_truth([frame(i) for i in range(1, 15)])
    with pytest.raises(ValueError, match=r"no cluster for image ids \[3, 4, 5, 6, 7, 8, 9, 10"):
        coco.map_bootstrap(gt, [], {1: "a", 2: "b", 14: "c"}, 10, 0)


def test_map_bootstrap_level_narrows_the_interval() -> None:
    frames, results, cluster_of = [], [], {}
    for i in range(1, 9):  # frames 1-8, videos of two; odd frames found, even ones missed
        frames.append(frame(i, (STAPLER, (0, 0, 100, 100))))
        dx = 0 if i % 2 else 80
        results.append(det(i, STAPLER, [dx, 0, 100, 100], 1.0 - i / 100))
        cluster_of[i] = f"v{(i + 1) // 2}"
    gt = ground_truth(frames)
    wide = coco.map_bootstrap(gt, results, cluster_of, 60, 0)
    narrow = coco.map_bootstrap(gt, results, cluster_of, 60, 0, level=0.5)
    # AP is not additive: the percentile interval need not hold the pooled value, but a lower
    # level cuts the same resamples' distribution closer to its middle
    for name in ("map", "ap50", "ap75"):
        assert wide[name].value == narrow[name].value
        assert wide[name].low <= narrow[name].low <= narrow[name].high <= wide[name].high
    assert narrow["ap50"].high - narrow["ap50"].low < wide["ap50"].high - wide["ap50"].low
    assert wide["ap50"].value == pytest.approx(evaluate(gt, results).stats["AP50"])


# ---- pycocotools stays quiet, and its own `print` comes back ------------------------------------
def test_quiet_restores_a_print_the_modules_had(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[str] = []

    def mine(*args: object, **kwargs: object) -> None:
        seen.append(" ".join(map(str, args)))

    pycocotools.coco.print = mine  # type: ignore[attr-defined]
    try:
        evaluate(ground_truth(GT), [det(1, STAPLER, [0, 0, 10, 10], 1.0)])
        assert seen == [] and capsys.readouterr().out == ""
        assert pycocotools.coco.print is mine  # type: ignore[attr-defined]
        assert "print" not in vars(pycocotools.cocoeval)  # it had none: none after
    finally:
        del pycocotools.coco.print  # type: ignore[attr-defined]
