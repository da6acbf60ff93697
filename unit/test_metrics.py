"""Binary metrics conventions and the cluster bootstrap."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from support.metrics import binary_metrics, cluster_bootstrap, counts_by_cluster


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
