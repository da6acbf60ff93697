"""COCO ground truth, detections and bbox evaluation for SurgVU tool detection (pycocotools).

pycocotools does all matching (`COCOeval.evaluate`) and all AP (`COCOeval.accumulate`); this module
only builds its inputs, guards its pitfalls and names its outputs. Boxes are COCO [x, y, w, h] in
pixels of the frame (origin top-left, x right, y down); category ids are the challenge's 0-13
(support.evaluations.surgvqa.tools.CATEGORY_ID).

Scores. A VLM states no confidence, but COCO AP ranks detections by score, and with one constant
score the AP depends on the order of images and of boxes (pycocotools' stable sort keeps input
order among ties; one small set scored 1.0, 0.667 or 0.835 by order alone). The only ranking a
model does give is the order it names its boxes, so the first box of an answer scores 1.0, the
next 0.99, then 0.98 ... down to a floor of 0.01. Boxes of the same rank in different frames
still tie (they are taken in image-id order), so `evaluate` also counts matches at IoU 0.5 per
frame (`tp50`, `n_dt`, `n_gt`), from which precision, recall and F1 follow whatever the order.

Pitfalls guarded (pycocotools 2.0.11): `loadRes([])` raises IndexError, so an empty result list
gets an empty results COCO built the way loadRes builds one; a result whose image is not in the
ground truth fails an assert, so it is a ValueError naming the image id here; a NaN coordinate
counts as a hit (NaN IoU passes the `<` test), so non-finite numbers are a ValueError; without
any ground-truth box pycocotools reports -1, which becomes NaN. Annotation ids start at 1:
pycocotools stores the matched truth's id as the match flag, so a truth with id 0 never counts.
`official_inputs` rebuilds one video's inputs the way the official category-1 evaluator does
(`--compat source`: truth frames only, ids from 0, score 0.5).

Time. COCOeval keeps only the MAX_DETS highest-scoring detections of each image and category (a
stable mergesort by score, then a cut), so the results are cut the same way before pycocotools
sees them (`top_detections`): the stats are identical and 200,000 boxes on one frame cost what
100 per class do. Its matching is a Python loop over detections x truths, so the truth of a frame
must be bounded by its reader (support.evaluations.surgvqa.dataset.MAX_BOXES_PER_FRAME).
"""

from __future__ import annotations

import contextlib
import copy
import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pycocotools.coco
import pycocotools.cocoeval
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from support.evaluations.surgvqa.boxes import Box
from support.evaluations.surgvqa.tools import CATEGORY_ID, TOOL_CLASSES
from support.statistics.metrics import Estimate, cluster_resample

STAT_NAMES = (
    "AP",
    "AP50",
    "AP75",
    "APs",
    "APm",
    "APl",
    "AR1",
    "AR10",
    "AR100",
    "ARs",
    "ARm",
    "ARl",
)
SCORE_STEP = 0.01  # score lost per rank in an answer
SCORE_FLOOR = 0.01  # the lowest score (rank 99 and later)
MAX_DETS = 100  # detections per image and category COCOeval ever looks at (params.maxDets[-1])
# the official category-1 evaluator's score for a box without "probability" (a VLM gives none):
# rgnespolo-intusurg/surgvu24-category-1-eval, gc_to_coco.py:86-89
OFFICIAL_SCORE = 0.5


@dataclass(frozen=True)
class FrameTruth:
    """One evaluated frame and its true boxes."""

    image_id: int
    width: int  # px
    height: int  # px
    file_name: str
    boxes: tuple[
        tuple[int, tuple[float, float, float, float]], ...
    ]  # (category_id, (x, y, w, h) px)


@dataclass(frozen=True)
class CocoScores:
    """COCOeval's results, named."""

    stats: dict[str, float]  # the 12 summarize stats (STAT_NAMES); NaN where pycocotools gives -1
    per_class_ap: dict[str, float]  # class -> AP@[.5:.95] (area all, maxDets 100); NaN: no truth
    per_class_ap50: dict[str, float]  # class -> AP@.5; NaN: no truth
    tp50: int  # detections matched at IoU 0.5 (area all, at most 100 per frame and class)
    n_dt: int  # detections evaluated (area all, at most 100 per frame and class)
    n_gt: int  # true boxes


def ground_truth(frames: Sequence[FrameTruth]) -> dict:
    """A COCO dataset dict: `images`, `annotations` (ids from 1, area = w*h, iscrowd 0) and all
    14 `categories` (ids 0-13, TOOL_CLASSES). Frames without boxes stay in `images` (their false
    positives count). Raises ValueError naming the frame on a bad id, category or box."""
    images, annotations, seen = [], [], set()
    for f in frames:
        where = f"ground truth frame {f.image_id} ({f.file_name})"
        if f.image_id in seen:
            raise ValueError(f"{where}: image_id appears twice")
        seen.add(f.image_id)
        images.append(
            {"id": f.image_id, "width": f.width, "height": f.height, "file_name": f.file_name}
        )
        for category_id, bbox in f.boxes:
            if category_id not in range(len(TOOL_CLASSES)):
                raise ValueError(f"{where}: category_id {category_id!r} is not 0-13")
            x, y, w, h = _finite_bbox(bbox, where)
            if w <= 0 or h <= 0:
                raise ValueError(f"{where}: box {list(bbox)} has no area")
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": f.image_id,
                    "category_id": category_id,
                    "bbox": [x, y, w, h],
                    "area": w * h,
                    "iscrowd": 0,
                }
            )
    categories = [{"id": i, "name": name} for i, name in enumerate(TOOL_CLASSES)]
    return {"images": images, "annotations": annotations, "categories": categories}


def detections(image_id: int, boxes: Sequence[Box]) -> list[dict]:
    """COCO results for one frame's answer: score 1.0, 0.99, 0.98 ... by answer order (floor
    0.01; see the module docstring)."""
    out = []
    for rank, b in enumerate(boxes):
        if b.label not in CATEGORY_ID:
            raise ValueError(f"detections for image {image_id}: unknown tool {b.label!r}")
        score = round(max(1.0 - SCORE_STEP * rank, SCORE_FLOOR), 2)
        out.append(
            {
                "image_id": image_id,
                "category_id": CATEGORY_ID[b.label],
                "bbox": b.xywh(),
                "score": score,
            }
        )
    return out


def official_inputs(gt: dict, results: Sequence[Mapping[str, Any]]) -> tuple[dict, list[dict]]:
    """One video's ground truth and results as the official category-1 evaluator scores them
    (`--compat source`; rgnespolo-intusurg/surgvu24-category-1-eval):

    - only frames with a true box count: `adjust_pred_gc_json` keeps the predictions on the
      frames its ground-truth file has a box on and drops the rest (evaluation.py:206-230), and
      the converter lists only those frames as images (gc_to_coco.py:111-119), so a box on a frame
      without truth is never a false positive;
    - truth annotation ids from 0, in the file's box order (gc_to_coco.py:114), here frame order
      then box order: pycocotools flags a match by the truth's id, so the detection that matches
      the id-0 box counts as a false positive and that box is never recalled;
    - every detection scores OFFICIAL_SCORE (gc_to_coco.py:86-89), ties kept in frame order then
      answer order (pycocotools' stable sorts), as a submission lists its boxes.
    """
    boxed = {a["image_id"] for a in gt["annotations"]}
    ordered = sorted(gt["annotations"], key=lambda a: (a["image_id"], a["id"]))
    out_gt = dict(
        gt,
        images=[img for img in gt["images"] if img["id"] in boxed],
        annotations=[a | {"id": n} for n, a in enumerate(ordered)],
    )
    kept = [dict(r, score=OFFICIAL_SCORE) for r in results if r.get("image_id") in boxed]
    return out_gt, kept


def top_detections(results: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The results COCOeval can count: per image and category the MAX_DETS highest scores (ties
    in input order, as its stable sort), kept in input order, so its own sort and cut are
    unchanged. Scores must be numbers (checked by the callers before)."""
    groups: dict[tuple[Any, Any], list[int]] = {}
    for n, r in enumerate(results):
        groups.setdefault((r.get("image_id"), r.get("category_id")), []).append(n)
    if all(len(g) <= MAX_DETS for g in groups.values()):
        return list(results)
    keep: list[int] = []
    for g in groups.values():
        keep += sorted(g, key=lambda n: -results[n]["score"])[:MAX_DETS]  # stable, as mergesort
    return [results[n] for n in sorted(keep)]


def evaluate(gt: dict, results: list[dict]) -> CocoScores:
    """The standard COCO bbox evaluation of `results` against `gt` (pycocotools, default params).

    An empty result list scores AP 0 where there is truth; no truth at all gives NaN. Raises
    ValueError naming the result for an unknown image or category and a non-finite box or score.
    """
    with _quiet():
        gt_coco = _gt_coco(gt)
        ev = COCOeval(gt_coco, _results_coco(gt_coco, results), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    stats = {name: _nan_if_negative(v) for name, v in zip(STAT_NAMES, ev.stats, strict=True)}
    p = ev.params
    precision = ev.eval["precision"]  # (T iou thresholds, R recall points, K, A areas, M maxDets)
    a_all, m_100 = p.areaRngLbl.index("all"), p.maxDets.index(100)
    t50 = _iou_index(p, 0.5)
    names = {c["id"]: c["name"] for c in gt["categories"]}
    per_class_ap, per_class_ap50 = {}, {}
    for k, cat in enumerate(p.catIds):
        per_class_ap[names[cat]] = _mean_valid(precision[:, :, k, a_all, m_100])
        per_class_ap50[names[cat]] = _mean_valid(precision[t50, :, k, a_all, m_100])
    tp50 = n_dt = n_gt = 0
    for e in ev.evalImgs:
        if e is None or list(e["aRng"]) != list(p.areaRng[a_all]):
            continue
        counted = np.logical_not(e["dtIgnore"][t50])
        tp50 += int(np.count_nonzero(np.logical_and(e["dtMatches"][t50] > 0, counted)))
        n_dt += int(np.count_nonzero(counted))
        n_gt += int(np.count_nonzero(np.asarray(e["gtIgnore"]) == 0))
    return CocoScores(stats, per_class_ap, per_class_ap50, tp50, n_dt, n_gt)


def map_bootstrap(
    gt: dict,
    results: list[dict],
    cluster_of: Mapping[int, str],
    n_resamples: int,
    seed: int,
    level: float = 0.95,
) -> dict[str, Estimate]:
    """mAP@[.5:.95], AP50 and AP75 with percentile intervals resampling whole clusters (videos)
    of frames (support.statistics.metrics.cluster_resample): {"map", "ap50", "ap75"}.

    cluster_of: image id -> cluster, for every image of `gt`. The values on all frames equal
    `evaluate`'s AP, AP50 and AP75. Intervals are NaN with one cluster.
    """
    missing = sorted(img["id"] for img in gt["images"] if img["id"] not in cluster_of)
    if missing:
        raise ValueError(f"map_bootstrap: no cluster for image ids {missing[:10]}")
    statistic = ResampledAP(gt, results)
    clusters = [cluster_of[i] for i in statistic.image_ids]
    with _quiet():
        return cluster_resample(clusters, statistic, n_resamples, seed, level)


class ResampledAP:
    """AP, AP50 and AP75 of any multiset of the ground truth's frames, for the bootstrap.

    Matching runs once, in __init__ (COCOeval with area "all", maxDets [100] and only the classes
    that have truth: the standard AP is unchanged, as classes without truth are left out of it
    anyway). A call lays the drawn frames' per-image results out as accumulate indexes them
    (category-major, frames in the order drawn, repeats allowed) and re-runs accumulate only.
    """

    def __init__(self, gt: dict, results: list[dict]) -> None:
        with _quiet():
            gt_coco = _gt_coco(gt)
            ev = COCOeval(gt_coco, _results_coco(gt_coco, results), "bbox")
            ev.params.areaRng = [ev.params.areaRng[ev.params.areaRngLbl.index("all")]]
            ev.params.areaRngLbl = ["all"]
            ev.params.maxDets = [100]
            with_truth = sorted({a["category_id"] for a in gt_coco.dataset["annotations"]})
            if with_truth:
                ev.params.catIds = with_truth
            ev.evaluate()
        self._ev = ev
        self._per_image = list(ev.evalImgs)  # index k * n_images + i (one area range)
        self.image_ids: list[int] = [int(i) for i in ev.params.imgIds]  # sorted: case i's frame
        self._position = {img: i for i, img in enumerate(self.image_ids)}
        self._t50, self._t75 = _iou_index(ev.params, 0.5), _iou_index(ev.params, 0.75)

    def __call__(self, cases: np.ndarray) -> dict[str, float]:
        """{"map", "ap50", "ap75"} of the frames image_ids[c] for c in cases (NaN: no truth)."""
        ev, n_images = self._ev, len(self.image_ids)
        drawn = [self.image_ids[c] for c in cases]
        at = [self._position[img] for img in drawn]
        ev.evalImgs = [
            self._per_image[k * n_images + i] for k in range(len(ev.params.catIds)) for i in at
        ]
        ev.params.imgIds = drawn  # accumulate reads positions in these lists
        ev._paramsEval.imgIds = drawn
        with _quiet():
            ev.accumulate()
        precision = ev.eval["precision"][:, :, :, 0, 0]  # (T iou thresholds, R recall points, K)
        return {
            "map": _mean_valid(precision),
            "ap50": _mean_valid(precision[self._t50]),
            "ap75": _mean_valid(precision[self._t75]),
        }


_QUIET_LOCK = threading.RLock()
_PRINTING = (pycocotools.coco, pycocotools.cocoeval)  # the modules that call print()


def _no_print(*args: object, **kwargs: object) -> None:
    pass


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence pycocotools' progress lines and tables: its modules' `print` is a no-op inside.

    Not contextlib.redirect_stdout: sys.stdout is process-global, and cases are scored in worker
    threads while pytest swaps sys.stdout for its capture between tests, so a redirection there
    leaked pycocotools lines into the terminal and could restore a stale capture stream. Only
    pycocotools' own name `print` is shadowed here, one thread at a time (re-entrant)."""
    with _QUIET_LOCK:
        saved = [m.__dict__.get("print") for m in _PRINTING]
        for m in _PRINTING:
            m.print = _no_print  # type: ignore[attr-defined]
        try:
            yield
        finally:
            for m, old in zip(_PRINTING, saved, strict=True):
                if old is None:
                    del m.print  # type: ignore[attr-defined]
                else:
                    m.print = old  # type: ignore[attr-defined]


def _gt_coco(gt: dict) -> COCO:
    coco = COCO()
    coco.dataset = copy.deepcopy(gt)
    coco.createIndex()
    return coco


def _results_coco(gt_coco: COCO, results: Sequence[Mapping[str, Any]]) -> COCO:
    """The results COCO: loadRes on a checked copy, or, for no results, the empty one loadRes
    would build (ground-truth images and categories, no annotations)."""
    image_ids = set(gt_coco.getImgIds())
    category_ids = set(gt_coco.getCatIds())
    for n, r in enumerate(results):
        where = f"result {n} (image_id {r.get('image_id')!r})"
        if r.get("image_id") not in image_ids:
            raise ValueError(f"{where}: image_id is not in the ground truth")
        if r.get("category_id") not in category_ids:
            raise ValueError(f"{where}: category_id {r.get('category_id')!r} is unknown")
        _, _, w, h = _finite_bbox(r.get("bbox"), where)
        if w < 0 or h < 0:
            raise ValueError(f"{where}: bbox {r.get('bbox')} has a negative size")
        score = r.get("score")
        if (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise ValueError(f"{where}: score {score!r} is not a finite number")
    if results:
        kept = top_detections(results)  # the same stats, in bounded time
        return gt_coco.loadRes(copy.deepcopy(kept))  # loadRes adds keys to its input
    res = COCO()
    res.dataset = {
        "images": list(gt_coco.dataset["images"]),
        "categories": copy.deepcopy(gt_coco.dataset["categories"]),
        "annotations": [],
    }
    res.createIndex()
    return res


def _finite_bbox(bbox: Any, where: str) -> tuple[float, float, float, float]:
    ok = isinstance(bbox, list | tuple) and len(bbox) == 4
    ok = ok and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in bbox
    )
    if not ok:
        raise ValueError(f"{where}: bbox {bbox!r} is not four finite numbers [x, y, w, h]")
    return bbox[0], bbox[1], bbox[2], bbox[3]


def _iou_index(params: Any, threshold: float) -> int:
    return int(np.flatnonzero(np.isclose(params.iouThrs, threshold))[0])


def _mean_valid(precision: np.ndarray) -> float:
    """Mean of the entries > -1 (as COCOeval.summarize), NaN when there are none."""
    valid = precision[precision > -1]
    return float(np.mean(valid)) if valid.size else math.nan


def _nan_if_negative(v: float) -> float:
    return math.nan if v < 0 else float(v)


def frame_truth(image_id: int, target: dict[str, Any]) -> FrameTruth:
    """A case's target (what `score_boxes` records) as pycocotools' ground truth of one image."""
    boxes = tuple(
        (int(b["category_id"]), tuple(float(v) for v in b["bbox"])) for b in target["boxes"]
    )
    return FrameTruth(
        image_id,
        int(target["width"]),
        int(target["height"]),
        str(target.get("file_name", "")),
        boxes,
    )
