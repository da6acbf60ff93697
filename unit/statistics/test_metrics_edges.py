"""support.statistics.metrics at its edges: safe_ratio and binary_metrics against sklearn, two
clusters (the fewest that give an interval), a single resample, statistics undefined on every
resample, the summary helper's groups, seed and level, and GroupSummary.row's columns."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from support.statistics.metrics import (
    GroupSummary,
    binary_metrics,
    cluster_bootstrap,
    cluster_resample,
    counts_by_cluster,
    safe_ratio,
    summarize_groups,
)
from support.types import Outcome


def _rate(s: np.ndarray) -> dict[str, np.ndarray]:
    """count rows [right, cases] -> accuracy (any leading axes)."""
    return {"accuracy": safe_ratio(s[..., 0], s[..., 1])}


def test_safe_ratio_divides_by_any_positive_denominator() -> None:
    # 3/4, one case 1/1, a fractional denominator 2/0.5 = 4, and 0/0 undefined
    got = safe_ratio([3, 1, 2, 0], [4, 1, 0.5, 0])
    assert got[:3].tolist() == [0.75, 1.0, 4.0]
    assert np.isnan(got[3])


def test_safe_ratio_is_silent_on_undefined_ratios() -> None:
    # inf / inf (a summed error that overflowed) is undefined: NaN, and no RuntimeWarning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = safe_ratio([np.inf, 1.0], [np.inf, 0.0])
    assert np.isnan(got).all()


# (tp, fp, fn, tn), every denominator positive; tp == fn, tp == fp, 2 tp + fp == fn and
# 2 tp + fn == fp are the cases where a sign slip in the empty-class conventions would show
COUNTS = [
    (2, 0, 2, 1),
    (1, 1, 0, 3),
    (3, 1, 2, 4),
    (0, 2, 3, 1),
    (5, 5, 5, 5),
    (4, 0, 1, 0),
    (0, 1, 1, 2),
    (1, 3, 1, 0),
]


def _sklearn(tp: int, fp: int, fn: int, tn: int) -> dict[str, float]:
    # imported here: only binary_metrics' tests pay for sklearn
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

    y_true = [1] * tp + [0] * fp + [1] * fn + [0] * tn
    y_pred = [1] * tp + [1] * fp + [0] * fn + [0] * tn
    return {
        "accuracy": accuracy_score(y_true, y_pred),
        "precision": precision_score(y_true, y_pred, zero_division=np.nan),
        "recall": recall_score(y_true, y_pred, zero_division=np.nan),
        "f1": f1_score(y_true, y_pred, zero_division=np.nan),
    }


@pytest.mark.parametrize("counts", COUNTS)
def test_binary_metrics_agree_with_sklearn(counts: tuple[int, int, int, int]) -> None:
    got = binary_metrics(*counts)
    expected = _sklearn(*counts)
    for name, value in expected.items():
        assert float(got[name]) == pytest.approx(value, rel=1e-12), name


def test_binary_metrics_broadcast_and_accept_narrow_integer_counts() -> None:
    # one call over a leading axis gives each row's metrics
    tp, fp, fn, tn = (np.array(c) for c in zip(*COUNTS, strict=True))
    many = binary_metrics(tp, fp, fn, tn)
    for i, counts in enumerate(COUNTS):
        for name, value in _sklearn(*counts).items():
            assert many[name][i] == pytest.approx(value, rel=1e-12)
    # uint8 counts (summed mask pixels): 200 + 100 would wrap to 44 in uint8, 2 * 200 to 144.
    # precision 200/300, recall 200/250, F1 400/(400 + 100 + 50), accuracy 210/360
    u8 = [np.array([v], dtype=np.uint8) for v in (200, 100, 50, 10)]
    m = binary_metrics(*u8)
    assert m["precision"][0] == pytest.approx(200 / 300)
    assert m["recall"][0] == pytest.approx(200 / 250)
    assert m["f1"][0] == pytest.approx(400 / 550)
    assert m["accuracy"][0] == pytest.approx(210 / 360)


# two clusters, one right of one case, one wrong: a resample draws (a, a), (a, b), (b, a) or
# (b, b), accuracy 1, 0.5, 0.5, 0 with P 1/4, 1/2, 1/4; 25% sit at each end, so the 2.5th
# percentile is 0 and the 97.5th is 1
TWO_CLUSTERS = np.array([[1, 1], [0, 1]], dtype=float)


def test_two_clusters_are_enough_for_a_bootstrap_interval() -> None:
    e = cluster_bootstrap(TWO_CLUSTERS, _rate, n_resamples=400, seed=0)["accuracy"]
    assert (e.value, e.low, e.high) == (0.5, 0.0, 1.0)


def test_two_clusters_are_enough_for_a_resampled_interval() -> None:
    values = np.array([1.0, 0.0])
    e = cluster_resample(["a", "b"], lambda idx: {"mean": values[idx].mean()}, 400, 0)["mean"]
    assert (e.value, e.low, e.high) == (0.5, 0.0, 1.0)


def _draws(n_clusters: int, n_resamples: int, seed: int) -> np.ndarray:
    """cluster_resample's documented draws (one block: n_resamples <= 256)."""
    return np.random.default_rng(seed).integers(0, n_clusters, (n_resamples, n_clusters))


def test_cluster_resample_passes_case_indices_and_one_resample_is_an_interval() -> None:
    # clusters a: cases 0, 2 (values 1, 3); b: case 1 (value 10); c: case 3 (value 20)
    clusters = ["a", "b", "a", "c"]
    values = np.array([1.0, 10.0, 3.0, 20.0])
    members = {0: [0, 2], 1: [1], 2: [3]}  # sorted cluster index -> its cases

    def statistic(idx: np.ndarray) -> dict[str, float]:
        return {"mean": values[idx].mean(), "cases": float(idx.size)}

    est = cluster_resample(clusters, statistic, n_resamples=1, seed=5)
    assert est["mean"].value == 34 / 4 and est["cases"].value == 4
    # a single finite resample: both percentiles are its value
    (draw,) = _draws(3, 1, 5)
    picked = [i for k in draw for i in members[int(k)]]
    assert est["mean"].low == est["mean"].high == pytest.approx(values[picked].mean())
    assert est["cases"].low == est["cases"].high == len(picked)


def test_a_statistic_undefined_on_every_resample_keeps_its_value() -> None:
    # a macro average needing every cluster present: NaN on a resample that misses one. With 8
    # clusters P(all present) = 8!/8^8 = 0.24% a resample; the 30 draws here miss one each
    clusters = [f"c{i}" for i in range(8)]
    values = np.arange(8, dtype=float)

    def macro(idx: np.ndarray) -> dict[str, float]:
        full = len(set(idx.tolist())) == 8
        return {"macro": values[idx].mean() if full else np.nan, "max": values[idx].max()}

    draws = _draws(8, 30, 1)
    assert all(len(set(d.tolist())) < 8 for d in draws)
    est = cluster_resample(clusters, macro, n_resamples=30, seed=1)
    e = est["macro"]
    assert e.value == 3.5  # (0 + ... + 7) / 8
    assert np.isnan(e.low) and np.isnan(e.high)
    # the next statistic still gets its interval: one case a cluster, so a resample's max is
    # its largest drawn cluster index
    maxima = draws.max(axis=1).astype(float)
    assert (est["max"].low, est["max"].high) == pytest.approx(
        tuple(np.quantile(maxima, [0.025, 0.975]))
    )


def test_counts_by_cluster_of_no_case() -> None:
    names, counts = counts_by_cluster([], [])
    assert names == [] and counts.shape == (0, 0)  # no cluster, and no count field known


def test_counts_by_cluster_and_row_refuse_mismatched_lengths() -> None:
    with pytest.raises(ValueError):
        counts_by_cluster(["a", "b", "c"], [[1, 1], [0, 1]])  # a count row missing
    group = GroupSummary(("m", "zero_shot"), [], [], np.zeros(0))
    with pytest.raises(ValueError):
        group.row(["model"], ["accuracy"])  # two key values, one column name


def _outcome(model: str, g: str, cluster: str, right: int, status: str = "correct") -> Outcome:
    return Outcome(f"{model}-{g}-{cluster}-{right}", "toy", model, status, group={"g": g},
                   cluster=cluster, scores={"right": right})  # fmt: skip


def test_an_all_error_group_is_reported_and_does_not_end_the_list() -> None:
    # group "a" (sorted first) has only backend errors; "b" 3 right of 4 in 2 clusters
    outs = [_outcome("m", "a", "v0", 0, status="error")] * 2
    outs += [_outcome("m", "b", c, r) for c, r in [("v0", 1), ("v0", 1), ("v1", 1), ("v1", 0)]]
    groups = summarize_groups(
        outs, lambda o: [(o.model, o.group["g"])], lambda o: [o.scores["right"], 1], _rate, 50, 0
    )
    assert [g.key for g in groups] == [("m", "a"), ("m", "b")]
    a, b = groups
    assert (a.n, a.n_error, a.estimates) == (0, 2, {})
    assert a.totals.size == 0  # no scored case, no counts
    row = a.row(["model", "g"], ["accuracy"])
    assert list(row) == ["model", "g", "n", "n_error", "accuracy"]  # no interval columns
    assert np.isnan(row["accuracy"])
    assert (b.n, b.n_error, b.totals.tolist()) == (4, 0, [3, 4])
    row = b.row(["model", "g"], ["accuracy"])
    assert list(row) == ["model", "g", "n", "n_error", "accuracy", "accuracy_lo", "accuracy_hi"]
    assert (row["model"], row["g"], row["n"], row["n_error"], row["accuracy"]) == (
        "m", "b", 4, 0, 0.75
    )  # fmt: skip


def test_summarize_groups_uses_its_seed_and_level() -> None:
    # 12 clusters of unequal size: the interval depends on the draws and on the level
    rng = np.random.default_rng(11)
    outs = [
        _outcome("m", "all", f"v{c:02d}", int(rng.random() < 0.3 + 0.04 * c))
        for c in range(12)
        for _ in range(1 + c % 4)
    ]
    by_cluster = np.zeros((12, 2))
    for o in outs:
        by_cluster[int(o.cluster[1:])] += [o.scores["right"], 1]

    def reference(seed: int, level: float) -> tuple[float, float]:
        def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
            s = by_cluster[np.moveaxis(idx, axis, -1)].sum(axis=-2)
            return s[..., 0] / s[..., 1]

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stats.bootstrap((np.arange(12),), statistic, vectorized=True, n_resamples=300,
                                  confidence_level=level, method="percentile",
                                  rng=np.random.default_rng(seed))  # fmt: skip
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    def interval(seed: int, level: float) -> tuple[float, float]:
        (g,) = summarize_groups(
            outs, lambda o: [(o.model,)], lambda o: [o.scores["right"], 1], _rate, 300, seed, level
        )
        return g.estimates["accuracy"].low, g.estimates["accuracy"].high

    for seed, level in [(5, 0.8), (6, 0.95)]:
        assert interval(seed, level) == pytest.approx(reference(seed, level), rel=1e-12)
    assert reference(5, 0.8) != reference(6, 0.8)  # the seed matters on these data
    assert reference(5, 0.8) != reference(5, 0.95)  # and so does the level


def test_cluster_bootstrap_with_no_resample_and_with_one() -> None:
    counts = np.array([[1, 1], [0, 1], [1, 2]], dtype=float)  # [right, cases], 2 of 4 right
    none = cluster_bootstrap(counts, _rate, n_resamples=0, seed=0)["accuracy"]
    assert none.value == 0.5 and np.isnan(none.low) and np.isnan(none.high)
    # one resample: both percentiles are its value, scipy.stats.bootstrap's single draw

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        s = counts[np.moveaxis(idx, axis, -1)].sum(axis=-2)
        return s[..., 0] / s[..., 1]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((np.arange(3),), statistic, vectorized=True, n_resamples=1,
                              method="percentile", rng=np.random.default_rng(4))  # fmt: skip
    (only,) = np.asarray(res.bootstrap_distribution).ravel()
    one = cluster_bootstrap(counts, _rate, n_resamples=1, seed=4)["accuracy"]
    assert one.low == one.high == pytest.approx(only)
