"""Binary metrics conventions, the cluster bootstrap, the cluster resampler, the summary helper."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from support.statistics.metrics import (
    binary_metrics,
    cluster_bootstrap,
    cluster_resample,
    counts_by_cluster,
    safe_ratio,
    summarize_groups,
)
from support.types import Outcome


def _reduce(s):
    return binary_metrics(s[..., 0], s[..., 1], s[..., 2], s[..., 3])


def independent_interval(
    counts: np.ndarray,
    metric: Callable[[np.ndarray], np.ndarray],
    n_resamples: int,
    seed: int,
) -> tuple[float, float]:
    """A 95% percentile interval computed apart from support.statistics.metrics:
    scipy.stats.bootstrap draws cluster indices from default_rng(seed) (the draws cluster_bootstrap
    documents), `metric` maps summed counts (..., k) to values; resamples where it is undefined
    (NaN) are dropped and the
    2.5th and 97.5th percentiles of the rest taken (NaN, NaN when none is defined)."""

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        return metric(counts[np.moveaxis(idx, axis, -1)].sum(axis=-2))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate resamples: scipy warns
        res = stats.bootstrap((np.arange(len(counts)),), statistic, vectorized=True,
                              n_resamples=n_resamples, method="percentile",
                              rng=np.random.default_rng(seed))  # fmt: skip
    dist = np.asarray(res.bootstrap_distribution, dtype=float)
    finite = dist[np.isfinite(dist)]
    if finite.size == 0:
        return np.nan, np.nan
    low, high = np.percentile(finite, [2.5, 97.5])
    return float(low), float(high)


def test_binary_metrics_known_values():
    m = binary_metrics(8, 2, 4, 6)
    assert m["accuracy"] == 14 / 20
    assert m["precision"] == 0.8
    assert m["recall"] == 8 / 12
    assert np.isclose(m["f1"], 2 * 0.8 * (8 / 12) / (0.8 + 8 / 12))


def test_empty_class_conventions():
    none_present = binary_metrics(0, 0, 0, 5)
    assert none_present["precision"] == none_present["recall"] == none_present["f1"] == 1.0
    all_missed = binary_metrics(0, 0, 3, 2)
    assert np.isnan(all_missed["precision"]) and all_missed["recall"] == 0 and all_missed["f1"] == 0


# zero counts drawn often: resamples where a metric is undefined (no positive predicted) and the
# interval comes from the defined ones
@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(*[st.just(0) | st.integers(0, 20)] * 4), min_size=2, max_size=12),
    st.integers(0, 99),
)
def test_bootstrap_interval_brackets_a_defined_estimate(rows, seed):
    counts = np.array(rows, dtype=float)
    est = cluster_bootstrap(counts, _reduce, n_resamples=200, seed=seed)
    for name, e in est.items():
        if np.isfinite(e.value) and np.isfinite(e.low):
            assert e.low <= e.high
            assert 0.0 <= e.low <= 1.0 and 0.0 <= e.high <= 1.0
        # the 2.5th and 97.5th percentiles of the defined resamples, computed apart
        low, high = independent_interval(counts, lambda s, name=name: _reduce(s)[name], 200, seed)
        assert (e.low, e.high) == pytest.approx((low, high), rel=1e-12, nan_ok=True), name


def exact_rate_cdf(x: Fraction) -> Fraction:
    """P(J / K <= x | K >= 1), by hand: 7 draws from the 7 clusters of
    test_fallback_interval_is_the_central_95_percent_of_the_defined_resamples, J the draws of
    the [1, 0] cluster, K those of the [0, 1] one (each 1/7 a draw), the rest [0, 0] (5/7)."""
    below = defined = Fraction(0)
    for k in range(1, 8):
        for j in range(8 - k):
            p = (
                comb(7, k)
                * comb(7 - k, j)
                * Fraction(1, 7) ** (k + j)
                * Fraction(5, 7) ** (7 - k - j)
            )
            defined += p
            below += p if Fraction(j, k) <= x else 0
    return below / defined


def test_fallback_interval_is_the_central_95_percent_of_the_defined_resamples():
    # rate = hits / answered; a resample without the answered cluster (P = (6/7)^7 = 0.34) has no
    # rate, so scipy's own percentiles are NaN and cluster_bootstrap falls back to those of the
    # defined resamples. Hand-computed (exact_rate_cdf): P(rate <= 0) = 0.371, P(rate <= 2) =
    # 0.9625, P(rate <= 3) = 0.9948, so the 2.5th percentile is 0 and the 97.5th is 3 (the 95th,
    # a 90% interval, would be 2)
    assert exact_rate_cdf(Fraction(0)) > Fraction(5, 100)
    assert exact_rate_cdf(Fraction(2)) < Fraction(975, 1000) < exact_rate_cdf(Fraction(3))
    assert exact_rate_cdf(Fraction(2)) > Fraction(95, 100) > exact_rate_cdf(Fraction(3, 2))
    counts = np.array([[0, 0]] * 5 + [[1, 0], [0, 1]], dtype=float)  # [hits, answered] a cluster

    def reduce(s):
        return {"rate": safe_ratio(s[..., 0], s[..., 1])}

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        return reduce(counts[np.moveaxis(idx, axis, -1)].sum(axis=-2))["rate"]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns of the NaN resamples
        scipy_ci = stats.bootstrap((np.arange(7),), statistic, vectorized=True, n_resamples=10_000,
                                   method="percentile", rng=np.random.default_rng(0))  # fmt: skip
    scipy_ci = scipy_ci.confidence_interval
    assert np.isnan(scipy_ci.low) and np.isnan(scipy_ci.high)  # the fallback is what is tested
    est = cluster_bootstrap(counts, reduce, n_resamples=10_000, seed=0)["rate"]
    assert est.value == 1.0  # the data itself: 1 hit, 1 answered
    assert (est.low, est.high) == (0.0, 3.0)


def test_bootstrap_is_deterministic_and_resamples_clusters():
    counts = np.array([[5, 0, 0, 5], [0, 5, 5, 0], [5, 0, 0, 5], [3, 1, 1, 3]], dtype=float)
    a = cluster_bootstrap(counts, _reduce, 500, seed=7)
    b = cluster_bootstrap(counts, _reduce, 500, seed=7)
    assert a == b
    assert a["accuracy"].low < a["accuracy"].value < a["accuracy"].high
    # one cluster: no interval
    one = cluster_bootstrap(counts[:1], _reduce, 500, seed=7)
    assert np.isnan(one["accuracy"].low) and one["accuracy"].value == 1.0


def test_counts_by_cluster_sums_and_sorts():
    names, c = counts_by_cluster(["v2", "v1", "v2"], [[1, 0], [0, 1], [2, 2]])
    assert names == ["v1", "v2"]
    assert c.tolist() == [[0, 1], [3, 2]]


def _mean_of(values):
    values = np.asarray(values, dtype=float)
    return lambda idx: {"mean": values[idx].mean(), "max": values[idx].max()}


def test_cluster_resample_equals_a_brute_force_loop_with_the_same_draws():
    rng = np.random.default_rng(2)
    clusters = [f"c{i}" for i in range(6) for _ in range(int(rng.integers(1, 5)))]
    values = rng.normal(size=len(clusters))
    est = cluster_resample(clusters, _mean_of(values), n_resamples=300, seed=4)
    names = sorted(set(clusters))
    draw = np.random.default_rng(4)
    means = []
    for start in range(0, 300, 256):  # the documented block structure of the draws
        for row in draw.integers(0, len(names), (min(256, 300 - start), len(names))):
            picked = np.concatenate([values[[c == names[k] for c in clusters]] for k in row])
            means.append(picked.mean())
    assert est["mean"].value == pytest.approx(values.mean())
    assert (est["mean"].low, est["mean"].high) == pytest.approx(
        tuple(np.quantile(means, [0.025, 0.975]))
    )


def test_cluster_resample_without_an_interval():
    values = [1.0, 2.0, 3.0]
    one = cluster_resample(["a"] * 3, _mean_of(values), 100, 0)["mean"]
    none = cluster_resample(["a", "b", "c"], _mean_of(values), 0, 0)["mean"]
    for e in (one, none):
        assert e.value == 2.0 and np.isnan(e.low) and np.isnan(e.high)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.floats(-5, 5)), min_size=1, max_size=20),
    st.integers(0, 9),
)
def test_cluster_resample_estimate_is_the_statistic_and_brackets(cases, seed):
    clusters = [f"c{c}" for c, _ in cases]
    values = [v for _, v in cases]
    a = cluster_resample(clusters, _mean_of(values), 60, seed)
    assert a == cluster_resample(clusters, _mean_of(values), 60, seed)  # deterministic
    assert a["max"].value == max(values)
    for e in a.values():
        if np.isfinite(e.low):
            assert e.low <= e.high


def _outcome(model, group, cluster, y, status="correct"):
    return Outcome(f"{model}-{group}-{cluster}-{y}", "toy", model, status, group={"g": group},
                   cluster=cluster, scores={"y": y})  # fmt: skip


def test_summarize_groups_counts_errors_and_bootstraps_each_group():
    outs = [_outcome("m", g, f"v{i % 3}", i % 2) for g in ("a", "b") for i in range(9)]
    outs.append(_outcome("m", "a", "v0", 0, status="error"))

    def keys(o):
        return [(o.model, o.group["g"]), (o.model, "ALL")]

    def counts(o):
        return [o.scores["y"], 1]

    def reduce(s):
        return {"rate": safe_ratio(s[..., 0], s[..., 1])}

    groups = summarize_groups(outs, keys, counts, reduce, n_resamples=100, seed=3)
    assert [g.key for g in groups] == [("m", "ALL"), ("m", "a"), ("m", "b")]
    every, a, _ = groups
    assert (every.n, every.n_error, a.n, a.n_error) == (18, 1, 9, 1)
    assert a.totals.tolist() == [4, 9]
    # group a by cluster, by hand (the error left out): v0 = i 0, 3, 6 -> y 0, 1, 0; v1 = 1, 0, 1;
    # v2 = 0, 1, 0. A resample of 3 clusters draws v1 J times (binomial, 3, 1/3): rate (3 + J) / 9,
    # 3/9 with P = 8/27, 4/9 12/27, 5/9 6/27, 6/9 1/27
    by_cluster = np.array([[1, 3], [2, 3], [1, 3]], dtype=float)
    rate = a.estimates["rate"]
    assert rate.value == 4 / 9
    assert rate.low == 3 / 9  # 30% of the resamples sit at the minimum: the 2.5th percentile
    assert 5 / 9 <= rate.high <= 6 / 9  # 26% at 5/9 or above
    assert (rate.low, rate.high) == pytest.approx(
        independent_interval(by_cluster, lambda s: reduce(s)["rate"], 100, seed=3), rel=1e-12
    )
    # ALL sums a and b (equal by cluster): [2, 6], [4, 6], [2, 6], the same rates, and each group
    # draws with the same seed: the same interval
    assert every.estimates["rate"] == rate
    row = a.row(["model", "g"], ["rate"])
    assert (row["rate"], row["rate_lo"], row["rate_hi"]) == (rate.value, rate.low, rate.high)
    empty = summarize_groups([outs[-1]], keys, counts, reduce)[0]
    assert empty.n == 0 and np.isnan(empty.row(["model", "g"], ["rate"])["rate"])
