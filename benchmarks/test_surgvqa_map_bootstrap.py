"""Cost of surgvqa's mAP interval: pycocotools' matching once, then `accumulate` per resample.

    pytest benchmarks/test_surgvqa_map_bootstrap.py --benchmark-only -s

A frame set the size of one real SurgVU test video (740 annotated 640x512 frames at 1 fps, two
truth boxes each over all 14 classes, one predicted box per truth shifted by 0-30 px, plus one
false positive in every fifth frame), split into 7 clusters; 100 resamples, timed per resample so
the cost of the default 1,000 follows by multiplication. Nearly all of it is inside
`COCOeval.accumulate`, which the suite does not rewrite.
"""

from __future__ import annotations

import numpy as np

from support.evaluations.surgvqa.boxes import Box
from support.evaluations.surgvqa.coco import FrameTruth, detections, ground_truth, map_bootstrap
from support.evaluations.surgvqa.tools import TOOL_CLASSES

N_FRAMES, N_CLUSTERS, RESAMPLES = 740, 7, 100


def frame_set(seed: int = 0) -> tuple[dict, list[dict], dict[int, str]]:
    rng = np.random.default_rng(seed)
    truths, results, cluster_of = [], [], {}
    for image_id in range(1, N_FRAMES + 1):
        boxes, predicted = [], []
        for _ in range(2):
            k = int(rng.integers(len(TOOL_CLASSES)))
            x, y = rng.uniform(0, 440), rng.uniform(0, 320)
            w, h = rng.uniform(80, 200), rng.uniform(60, 190)
            boxes.append((k, (x, y, w, h)))
            dx, dy = rng.uniform(-30, 30, 2)
            x1, y1 = max(x + dx, 0.0), max(y + dy, 0.0)
            predicted.append(Box(TOOL_CLASSES[k], x1, y1, min(x1 + w, 640), min(y1 + h, 512)))
        if image_id % 5 == 0:
            predicted.append(Box(TOOL_CLASSES[0], 10, 10, 90, 70))
        truths.append(FrameTruth(image_id, 640, 512, f"{image_id:010d}.jpg", tuple(boxes)))
        results += detections(image_id, predicted)
        cluster_of[image_id] = f"video-{image_id * N_CLUSTERS // (N_FRAMES + 1)}"
    return ground_truth(truths), results, cluster_of


def test_map_bootstrap_per_resample(benchmark) -> None:
    gt, results, cluster_of = frame_set()
    out = benchmark.pedantic(
        map_bootstrap, args=(gt, results, cluster_of, RESAMPLES, 0), rounds=1, iterations=1
    )
    seconds = benchmark.stats.stats.mean
    per = 1000 * seconds / RESAMPLES  # ms a resample
    print(f"\nmap_bootstrap: {N_FRAMES} frames, {RESAMPLES} resamples: {seconds:.2f} s")
    print(f"{per:.1f} ms a resample; the default 1,000 resamples: {per:.0f} s")
    assert out["map"].low <= out["map"].value <= out["map"].high
