"""nyu_distance's delta ratio, max(pred/gt, gt/pred), the depth-estimation accuracy measure behind
the `correct` status and delta1 (delta < 1.25; Eigen et al. 2014, "Depth Map Prediction from a
Single Image using a Multi-Scale Deep Network", section 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from support.evaluations.nyu_distance.task import DELTA_THRESHOLD, delta_ratio


@pytest.mark.parametrize(
    ("pred", "gt", "expected"),
    [
        (2.0, 2.0, 1.0),  # perfect
        (3.0, 2.0, 1.5),  # over by half: 3/2
        (2.0, 3.0, 1.5),  # under by a third: 3/2 (symmetric in the log)
        (0.5, 2.0, 4.0),  # 2/0.5
        (8.0, 0.5, 16.0),  # 8/0.5
        (1.0, 0.8, 1.25),  # 1/0.8 = 1.25 exactly: the threshold itself
        (0.0, 2.0, math.inf),  # an answer of zero metres
        (-1.5, 2.0, math.inf),  # a negative answer
        (2.0, 0.0, math.inf),  # a zero truth cannot be scored as a ratio
        (2.0, -1.0, math.inf),
        (0.0, 0.0, math.inf),
    ],
)
def test_delta_ratio_by_hand(pred: float, gt: float, expected: float) -> None:
    assert delta_ratio(pred, gt) == pytest.approx(expected, rel=1e-15)


def test_delta_ratio_matches_numpy_and_is_at_least_one() -> None:
    rng = np.random.default_rng(7)
    pred = rng.uniform(0.05, 10.0, 200)  # m
    gt = rng.uniform(0.3, 8.0, 200)  # m
    expected = np.maximum(pred / gt, gt / pred)
    got = np.array([delta_ratio(float(p), float(g)) for p, g in zip(pred, gt, strict=True)])
    assert got == pytest.approx(expected, rel=1e-15)
    assert (got >= 1.0).all()


def test_the_threshold_is_1_25_strict() -> None:
    # `correct` when delta < 1.25 (Eigen et al.'s delta1): 1.25 itself is not within it
    assert DELTA_THRESHOLD == 1.25
    assert delta_ratio(1.24, 1.0) < DELTA_THRESHOLD
    assert not delta_ratio(1.0, 0.8) < DELTA_THRESHOLD
