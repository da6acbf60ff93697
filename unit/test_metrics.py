"""Binary metrics conventions, the cluster bootstrap, the cluster resampler, the summary helper."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.metrics import (
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


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(*[st.integers(0, 20)] * 4), min_size=2, max_size=12), st.integers(0, 99))
def test_bootstrap_interval_brackets_a_defined_estimate(rows, seed):
    counts = np.array(rows, dtype=float)
    est = cluster_bootstrap(counts, _reduce, n_resamples=200, seed=seed)
    for e in est.values():
        if np.isfinite(e.value) and np.isfinite(e.low):
            assert e.low <= e.high
            assert 0.0 <= e.low <= 1.0 and 0.0 <= e.high <= 1.0


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
    _, by_cluster = counts_by_cluster([o.cluster for o in a.scored], [counts(o) for o in a.scored])
    assert a.estimates == cluster_bootstrap(by_cluster, reduce, 100, seed=3)
    row = a.row(["model", "g"], ["rate"])
    assert row["rate"] == 4 / 9 and row["rate_lo"] <= row["rate"] <= row["rate_hi"]
    empty = summarize_groups([outs[-1]], keys, counts, reduce)[0]
    assert empty.n == 0 and np.isnan(empty.row(["model", "g"], ["rate"])["rate"])
