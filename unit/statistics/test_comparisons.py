"""Paired comparisons: bootstrap against exact enumeration, McNemar against scipy, Holm by hand,
planted and null differences, the permutation test, degenerate inputs, power helpers."""

from __future__ import annotations

import gc
import itertools
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from support.statistics.metrics import binary_metrics, safe_ratio
from support.statistics.paired import (
    COLUMNS,
    Pair,
    bootstrap_p_value,
    clusters_for_half_width,
    clusters_needed,
    compare,
    half_width,
    holm,
    holm_by_family,
    mcnemar_exact,
    paired_bootstrap,
    paired_permutation,
)


def _accuracy(s: np.ndarray) -> dict[str, np.ndarray]:
    """count rows [right, cases] -> accuracy (any leading axes)."""
    return {"accuracy": safe_ratio(s[..., 0], s[..., 1])}


def _binary(s: np.ndarray) -> dict[str, np.ndarray]:
    """count rows [tp, fp, fn, tn] -> accuracy, precision, recall, F1."""
    return binary_metrics(s[..., 0], s[..., 1], s[..., 2], s[..., 3])


def _mae(s: np.ndarray) -> dict[str, np.ndarray]:
    """count rows [|error| (m), answered] -> mean absolute error (m)."""
    return {"mae": safe_ratio(s[..., 0], s[..., 1])}


def _cases(per_cluster: dict[str, list[tuple[int, int]]]):
    """{cluster: [(A right, B right) per case]} -> clusters, count rows of A and of B."""
    clusters, rows_a, rows_b = [], [], []
    for c, cases in per_cluster.items():
        for ra, rb in cases:
            clusters.append(c)
            rows_a.append([ra, 1])
            rows_b.append([rb, 1])
    return clusters, rows_a, rows_b


def _exact_paired(per_cluster, draws_of=None):
    """Every ordered resample of the clusters (equal weight): the exact distribution of
    acc(B) - acc(A) when both sides use the same draw."""
    names = list(per_cluster)
    right_a = np.array([sum(a for a, _ in per_cluster[c]) for c in names], dtype=float)
    right_b = np.array([sum(b for _, b in per_cluster[c]) for c in names], dtype=float)
    size = np.array([len(per_cluster[c]) for c in names], dtype=float)
    draws = np.array(list(itertools.product(range(len(names)), repeat=len(names))))
    n = size[draws].sum(axis=1)
    return right_b[draws].sum(axis=1) / n - right_a[draws].sum(axis=1) / n


def _exact_unpaired(per_cluster):
    """The same with A and B drawn independently (every pair of ordered resamples)."""
    names = list(per_cluster)
    right_a = np.array([sum(a for a, _ in per_cluster[c]) for c in names], dtype=float)
    right_b = np.array([sum(b for _, b in per_cluster[c]) for c in names], dtype=float)
    size = np.array([len(per_cluster[c]) for c in names], dtype=float)
    draws = np.array(list(itertools.product(range(len(names)), repeat=len(names))))
    acc_a = right_a[draws].sum(axis=1) / size[draws].sum(axis=1)
    acc_b = right_b[draws].sum(axis=1) / size[draws].sum(axis=1)
    return (acc_b[:, None] - acc_a[None, :]).ravel()


def _quantile(values: np.ndarray, q: float) -> float:
    """Exact lower quantile of an equal-weight discrete distribution: min{x : F(x) >= q}."""
    v = np.sort(values)
    return float(v[max(int(np.ceil(q * v.size)) - 1, 0)])


# 4 clusters of unequal size; per case (A right, B right). B is better on c1 and c2, worse on c3.
FOUR = {
    "c0": [(1, 1)] * 3 + [(0, 0)] * 2,
    "c1": [(0, 1)] * 3 + [(1, 1)] * 1 + [(0, 0)] * 4,
    "c2": [(0, 1)] * 2 + [(1, 0)] * 1 + [(1, 1)] * 3,
    "c3": [(1, 0)] * 2 + [(0, 0)] * 1,
}


def test_paired_bootstrap_matches_exact_enumeration():
    clusters, rows_a, rows_b = _cases(FOUR)
    est = paired_bootstrap(clusters, rows_a, rows_b, _accuracy, n_resamples=40_000, seed=3)
    e = est["accuracy"]
    # point values by hand: A right 3+1+4+2 = 10 of 22, B right 3+4+5+0 = 12 of 22
    assert e.a == 10 / 22 and e.b == 12 / 22 and e.diff == 12 / 22 - 10 / 22
    exact = _exact_paired(FOUR)  # 4**4 = 256 ordered resamples
    # percentiles of the resampled differences fall where the exact distribution puts 2.5% / 97.5%
    # (band of +-0.5 points of probability; the exact distribution is discrete and both ends of
    # each band fall in one atom here: -1/3 holds 1.95%-3.52% of the mass, 0.3103 96.48%-98.05%)
    assert _quantile(exact, 0.02) <= e.low <= _quantile(exact, 0.03)
    assert _quantile(exact, 0.97) <= e.high <= _quantile(exact, 0.98)
    assert e.low == pytest.approx(-1 / 3) and e.high == pytest.approx(9 / 29)
    assert e.se == pytest.approx(exact.std(), rel=0.03)
    exact_p = min(1.0, 2 * min(np.mean(exact <= 0), np.mean(exact >= 0)))
    assert 0.05 < exact_p < 0.9  # the data leave the sign open: p is a real check
    assert e.p_value == pytest.approx(exact_p, abs=0.015)


def test_pairing_matters():
    # B is right on every case A is right on, plus one case per cluster; the clusters differ a lot
    # in difficulty, which moves both sides together
    data = {
        "easy": [(1, 1)] * 8 + [(0, 1)] + [(0, 0)],
        "hard": [(1, 1)] * 1 + [(0, 1)] + [(0, 0)] * 8,
        "mid": [(1, 1)] * 4 + [(0, 1)] + [(0, 0)] * 5,
    }
    unpaired = _exact_unpaired(data)  # A and B resampled independently: 27 * 27 resamples
    assert _quantile(unpaired, 0.025) < 0 < _quantile(unpaired, 0.975)
    paired = _exact_paired(data)  # every paired resample moves B up by 1 case in 10
    assert np.allclose(paired, 0.1)
    clusters, rows_a, rows_b = _cases(data)
    e = paired_bootstrap(clusters, rows_a, rows_b, _accuracy, n_resamples=2000, seed=0)["accuracy"]
    assert e.low == pytest.approx(0.1) and e.high == pytest.approx(0.1)
    assert e.p_value == pytest.approx(2 / 2001)  # no resample <= 0: the add-one floor


def test_bootstrap_is_deterministic_and_order_free():
    clusters, rows_a, rows_b = _cases(FOUR)
    one = paired_bootstrap(clusters, rows_a, rows_b, _accuracy, n_resamples=500, seed=9)
    order = np.random.default_rng(0).permutation(len(clusters))
    two = paired_bootstrap(
        [clusters[i] for i in order],
        [rows_a[i] for i in order],
        [rows_b[i] for i in order],
        _accuracy,
        n_resamples=500,
        seed=9,
    )
    assert one == two


def test_bootstrap_p_value_definition():
    assert bootstrap_p_value(np.array([1.0, 2.0, 3.0])) == pytest.approx(2 / 4)  # floor 2/(m+1)
    assert bootstrap_p_value(np.array([-1.0, 1.0, 2.0, 3.0])) == pytest.approx(4 / 5)
    assert bootstrap_p_value(np.zeros(10)) == 1.0
    assert np.isnan(bootstrap_p_value(np.array([np.nan])))


@pytest.mark.parametrize(
    ("both", "a_only", "b_only", "neither"),
    [(10, 3, 7, 5), (0, 0, 12, 0), (5, 9, 1, 30), (2, 1, 1, 2), (40, 14, 30, 16)],
)
def test_mcnemar_matches_exact_binomial(both, a_only, b_only, neither):
    a = [1] * both + [1] * a_only + [0] * b_only + [0] * neither
    b = [1] * both + [0] * a_only + [1] * b_only + [0] * neither
    order = np.random.default_rng(both).permutation(len(a))
    r = mcnemar_exact(np.array(a)[order], np.array(b)[order])
    assert (r.n_pairs, r.a_only, r.b_only) == (len(a), a_only, b_only)
    expected = stats.binomtest(b_only, a_only + b_only, 0.5).pvalue
    assert r.p_value == pytest.approx(expected, rel=1e-9)


def test_mcnemar_without_discordant_pairs_and_bad_input():
    # no discordant pair: binomtest is undefined on 0 trials; nothing speaks for a difference
    r = mcnemar_exact([1, 1, 0, 0], [1, 1, 0, 0])
    assert (r.a_only, r.b_only, r.p_value) == (0, 0, 1.0)
    assert np.isnan(mcnemar_exact([], []).p_value)
    with pytest.raises(ValueError, match="0/1"):
        mcnemar_exact([1, 0.5], [1, 0])
    with pytest.raises(ValueError, match="outcomes of A"):
        mcnemar_exact([1, 0], [1])


def test_holm_hand_computed():
    # p = 0.01, 0.04, 0.03, 0.005 (m = 4). Sorted: 0.005, 0.01, 0.03, 0.04.
    # step-down: 4 * 0.005 = 0.02; 3 * 0.01 = 0.03; 2 * 0.03 = 0.06; 1 * 0.04 = 0.04 -> running max
    # 0.04 < 0.06 so 0.06. Back in input order: 0.03, 0.06, 0.06, 0.02.
    assert np.allclose(holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    # NaN stays NaN and is not in the family (m = 2): 2 * 0.01 = 0.02; max(0.02, 1 * 0.04) = 0.04
    out = holm([0.01, np.nan, 0.04])
    assert np.allclose(out[[0, 2]], [0.02, 0.04]) and np.isnan(out[1])
    # capped at 1: 3 * 0.5 = 1.5 -> 1
    assert np.allclose(holm([0.5, 0.6, 0.7]), [1.0, 1.0, 1.0])
    assert holm([]).size == 0 and np.isnan(holm([np.nan])).all()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(0, 1), st.just(float("nan")), st.sampled_from([0.01, 0.05])),
                max_size=30))  # fmt: skip
def test_holm_agrees_with_statsmodels(p):
    """holm (written here: statsmodels' Holm calls gc.collect() every time) == statsmodels'
    multipletests(method="holm") on the finite p-values, ties and NaNs included. The reference's
    gc.collect() is made a no-op while it runs: on a test worker's heap it took 0.5-1.3 s a call
    (157-266 s for this test under xdist), and it changes no number."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p, dtype=float)
    ok = np.isfinite(p)
    out = holm(p)
    assert np.isnan(out[~ok]).all()
    if ok.any():
        with mock.patch.object(gc, "collect", lambda *args, **kwargs: 0):
            reference = multipletests(p[ok], method="holm")[1]
        assert np.allclose(out[ok], reference, rtol=0, atol=1e-12)


def test_holm_by_family():
    frame = pd.DataFrame(
        {
            "model": ["m1", "m1", "m1", "m2", "m2"],
            "metric": ["f1", "accuracy", "recall", "f1", "accuracy"],
            "p_value": [0.01, 0.02, np.nan, 0.04, 0.03],
        }
    )
    out = holm_by_family(frame, ["model"])
    # m1 (m = 2): 2 * 0.01 = 0.02, max(0.02, 1 * 0.02) = 0.02; m2 (m = 2): 2 * 0.03 = 0.06, 0.06
    assert np.allclose(out["p_holm"].to_numpy()[[0, 1, 3, 4]], [0.02, 0.02, 0.06, 0.06])
    assert np.isnan(out["p_holm"].iloc[2])
    assert "p_holm" not in frame  # a copy
    # one family over all rows (m = 4): 4 * 0.01, 3 * 0.02, 2 * 0.03, max(0.06, 0.04)
    assert np.allclose(
        holm_by_family(frame)["p_holm"].to_numpy()[[0, 1, 4, 3]], [0.04, 0.06] + [0.06] * 2
    )


def _binary_pairs(right_a, right_b, clusters) -> list[Pair]:
    """Pairs of right/wrong outcomes, count rows [right, cases], per-case score `accuracy`."""
    return [
        Pair(c, [float(x), 1.0], [float(y), 1.0], {"accuracy": float(x)}, {"accuracy": float(y)})
        for c, x, y in zip(clusters, right_a, right_b, strict=True)
    ]


def _clusters(n_cases: int = 200, n_clusters: int = 40) -> list[str]:
    return [f"v{i * n_clusters // n_cases:03d}" for i in range(n_cases)]


def test_planted_difference_is_detected():
    # a reference model right 90% against one right 60%, the same 200 cases in 40 clusters of 5
    rng = np.random.default_rng(14)
    clusters = _clusters()
    right_a, right_b = rng.random(200) < 0.6, rng.random(200) < 0.9
    pairs = _binary_pairs(right_a, right_b, clusters)
    mc = compare(
        pairs, _accuracy, ["accuracy"], a="60%", b="90%", tests={"accuracy": "mcnemar-exact"}
    )
    boot = compare(pairs, _accuracy, ["accuracy"], a="60%", b="90%", n_resamples=2000)
    assert list(mc.columns) == list(COLUMNS)
    for row in (mc.iloc[0], boot.iloc[0]):
        assert row["p_value"] < 0.01
        assert 0 < row["diff_lo"] < 0.3 < row["diff_hi"]
        assert (row["n_pairs"], row["n_clusters"]) == (200, 40)
    assert (mc.iloc[0]["test"], boot.iloc[0]["test"]) == ("mcnemar-exact", "paired-bootstrap")


def test_null_comparison_rejects_at_about_the_nominal_rate(capsys):
    # two "chance" models at the same rate on the same cases; each cluster (5 cases) has its own
    # difficulty, shared by both, so the clusters matter. 200 repetitions.
    rng = np.random.default_rng(2024)
    clusters = _clusters()
    rejected = {"mcnemar-exact": 0, "paired-bootstrap": 0}
    reps = 200
    for rep in range(reps):
        rate = np.repeat(rng.beta(6, 4, 40), 5)  # mean 0.6
        right_a, right_b = rng.random(200) < rate, rng.random(200) < rate
        c, ra, rb = clusters, [[x, 1] for x in right_a], [[y, 1] for y in right_b]
        e = paired_bootstrap(c, ra, rb, _accuracy, n_resamples=500, seed=rep)["accuracy"]
        rejected["paired-bootstrap"] += e.p_value < 0.05
        rejected["mcnemar-exact"] += mcnemar_exact(right_a, right_b).p_value < 0.05
    rates = {k: v / reps for k, v in rejected.items()}
    with capsys.disabled():
        print(f"\nfalse-positive rate at alpha 0.05 over {reps} null comparisons: {rates}")
    for rate in rates.values():
        assert 0.01 <= rate <= 0.10


def _errors(rng, shift: float, n_cases: int = 200, n_clusters: int = 40):
    """Absolute errors (m) of A and B on the same pairs: a per-cluster level both share, a
    per-cluster offset of each side's own (so differences are correlated within a cluster and the
    cluster, not the case, is the unit to exchange), and each case's noise; B's errors are
    `shift` metres larger."""
    size = n_cases // n_clusters
    level = np.repeat(rng.gamma(2.0, 0.5, n_clusters), size)
    own_a, own_b = (np.repeat(rng.normal(0, 0.15, n_clusters), size) for _ in "ab")
    a = np.abs(level + own_a + rng.normal(0, 0.3, n_cases))
    b = np.abs(level + own_b + rng.normal(0, 0.3, n_cases)) + shift
    return a, b


def test_permutation_detects_a_planted_shift_and_not_zero_shift(capsys):
    rng = np.random.default_rng(5)
    clusters = _clusters()
    a, b = _errors(rng, shift=0.25)
    r = paired_permutation(clusters, a, b, n_permutations=2000, seed=0)
    assert r.p_value < 0.01 and r.diff == pytest.approx(np.mean(b - a))
    assert (r.n_pairs, r.n_clusters) == (200, 40)
    a, b = _errors(rng, shift=0.0)
    assert paired_permutation(clusters, a, b, n_permutations=2000, seed=0).p_value > 0.05
    # over repetitions the null is rejected at about the nominal rate
    reps = 100
    hits = sum(
        paired_permutation(clusters, *_errors(rng, 0.0), n_permutations=500, seed=s).p_value < 0.05
        for s in range(reps)
    )
    with capsys.disabled():
        print(
            f"\nfalse-positive rate at alpha 0.05 over {reps} null permutation tests: {hits / reps}"
        )
    assert 0.01 <= hits / reps <= 0.10


def test_permutation_is_exact_on_few_clusters():
    # 3 clusters, summed differences +1, +2, +3: the 8 sign flips give totals
    # +-1 +-2 +-3 in {-6, -4, -2, 0, 0, 2, 4, 6}; two-sided p = 2 * P(total >= 6) = 2 / 8
    r = paired_permutation(["x", "y", "y", "z"], [0, 0, 0, 0], [1, 1, 1, 3], n_permutations=999)
    assert r.p_value == pytest.approx(0.25)


def test_compare_with_permutation_on_a_continuous_metric():
    rng = np.random.default_rng(8)
    clusters = _clusters()
    a, b = _errors(rng, shift=0.2)
    b[0] = np.nan  # an unparsable answer of B: left out of its count row and of the test
    pairs = [
        Pair(
            c,
            [x, 1.0],
            [0.0, 0.0] if np.isnan(y) else [y, 1.0],
            {"mae": x},
            {"mae": y},
        )
        for c, x, y in zip(clusters, a, b, strict=True)
    ]
    row = compare(pairs, _mae, ["mae"], a="A", b="B", tests={"mae": "permutation"}).iloc[0]
    assert row["test"] == "permutation" and row["p_value"] < 0.01
    assert row["a_value"] == pytest.approx(a.mean()) and row["b_value"] == pytest.approx(
        np.nanmean(b)
    )
    assert row["diff_lo"] < row["diff"] < row["diff_hi"]


def test_degenerate_inputs_give_nan_without_exceptions():
    # no pairs
    empty = compare([], _accuracy, ["accuracy"], a="A", b="B", tests={"accuracy": "mcnemar-exact"})
    assert empty.shape[0] == 1 and empty[["a_value", "diff", "diff_lo", "p_value"]].isna().all(
        axis=None
    )
    # one cluster: values, but neither interval nor p, whatever the test
    pairs = _binary_pairs([1, 0, 0, 0], [1, 1, 1, 0], ["v"] * 4)
    for test in ("mcnemar-exact", "permutation", "paired-bootstrap"):
        row = compare(pairs, _accuracy, ["accuracy"], a="A", b="B", tests={"accuracy": test}).iloc[
            0
        ]
        assert row["diff"] == 0.5
        assert np.isnan(row["diff_lo"]) and np.isnan(row["diff_hi"]) and np.isnan(row["p_value"])
    # NaN metric: A predicts nothing positive but positives exist -> precision undefined for A
    rows_a = [[0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 1, 0], [0, 0, 0, 1]]  # tp, fp, fn, tn
    rows_b = [[1, 0, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1]]
    pairs = [Pair(c, x, y) for c, x, y in zip("wxyz", rows_a, rows_b, strict=True)]
    out = compare(pairs, _binary, ["precision", "accuracy"], a="A", b="B").set_index("metric")
    assert np.isnan(
        out.loc["precision", ["a_value", "diff", "diff_lo", "diff_hi", "p_value"]]
    ).all()
    assert out.loc["precision", "b_value"] == 2 / 3
    assert out.loc["accuracy", "diff"] == 0.75 - 0.5 and np.isfinite(out.loc["accuracy", "diff_lo"])
    # no resamples: no interval and no bootstrap p, but the per-case test still gives one
    pairs = _binary_pairs(np.arange(40) % 2, np.ones(40), _clusters(40, 10))
    t = {"accuracy": "mcnemar-exact"}
    out = compare(pairs, _accuracy, ["accuracy"], a="A", b="B", n_resamples=0, tests=t)
    assert np.isnan(out.iloc[0]["diff_lo"]) and out.iloc[0]["p_value"] < 0.001
    out = compare(pairs, _accuracy, ["accuracy"], a="A", b="B", n_resamples=0)
    assert np.isnan(out.iloc[0]["p_value"])


def test_all_ties_give_zero_difference_and_p_one():
    # A and B right on exactly the same cases: the difference is 0 in every resample and every
    # sign flip, there is no discordant pair, so nothing speaks against "no difference"
    right = np.random.default_rng(1).random(60) < 0.5
    pairs = _binary_pairs(right, right, _clusters(60, 12))
    for test in ("mcnemar-exact", "permutation", "paired-bootstrap"):
        row = compare(pairs, _accuracy, ["accuracy"], a="A", b="B", tests={"accuracy": test}).iloc[
            0
        ]
        assert (row["diff"], row["diff_lo"], row["diff_hi"], row["p_value"]) == (0, 0, 0, 1)


def test_compare_checks_its_inputs_and_labels_come_first():
    pairs = _binary_pairs([1, 0], [1, 1], ["u", "v"])
    with pytest.raises(ValueError, match="unknown tests"):
        compare(pairs, _accuracy, ["accuracy"], a="A", b="B", tests={"accuracy": "t-test"})
    with pytest.raises(ValueError, match="no metric"):
        compare(pairs, _accuracy, ["f1"], a="A", b="B")
    with pytest.raises(ValueError, match="one each per pair"):
        paired_bootstrap(["u"], [[1, 1]], [], _accuracy)
    out = compare(pairs, _accuracy, ["accuracy"], a="A", b="B", labels={"model": "m1"})
    assert list(out.columns) == ["model", *COLUMNS] and out.iloc[0]["model"] == "m1"


# ---- power --------------------------------------------------------------------------------------


def test_power_helpers_by_hand():
    # z_0.975 = 1.959964, z_0.8 = 0.841621, sum 2.801585
    # se 0.05 at 40 clusters, delta 0.1:
    # 40 * (2.801585 * 0.05 / 0.1)^2 = 40 * 1.962220 = 78.49 -> 79
    assert clusters_needed(0.05, 40, 0.1) == 79
    assert clusters_needed(0.05, 40, -0.1) == 79  # the sign of the difference does not matter
    assert half_width(0.05) == pytest.approx(1.959964 * 0.05, rel=1e-6)
    # half-width 0.05 wanted: 40 * (1.959964 * 0.05 / 0.05)^2 = 153.66 -> 154
    assert clusters_for_half_width(0.05, 40, 0.05) == 154
    assert np.isnan(clusters_needed(np.nan, 40, 0.1)) and np.isnan(clusters_needed(0.05, 40, 0))
    assert np.isnan(clusters_for_half_width(0.05, 40, 0))


def test_clusters_needed_agrees_with_statsmodels_power():
    from statsmodels.stats.power import NormalIndPower

    # per-cluster standard deviation sigma = se * sqrt(n); a one-sample normal test (ratio 0)
    # on effect size delta / sigma needs n = ((z_a + z_b) / d)^2 (statsmodels also counts the
    # far tail, which is negligible here)
    se, n, delta = 0.04, 50, 0.06
    d = delta / (se * np.sqrt(n))
    expected = NormalIndPower().solve_power(effect_size=d, alpha=0.05, power=0.8, ratio=0)
    assert clusters_needed(se, n, delta) == np.ceil(expected)


def test_bootstrap_standard_error_scales_like_the_normal_approximation():
    # single-case clusters of paired right/wrong outcomes: the difference of two paired
    # proportions has se^2 = (p01 + p10 - (p10 - p01)^2) / n. Here A is right with 0.6; B copies A
    # with 0.7, else is right with 0.75: p10 = P(B only) = 0.4 * 0.3 * 0.75 = 0.09,
    # p01 = P(A only) = 0.6 * 0.3 * 0.25 = 0.045, so se * sqrt(n) = sqrt(0.135 - 0.045^2) = 0.3647
    # at every n, which is what clusters_needed assumes
    def se_at(n: int, seed: int) -> float:
        rng = np.random.default_rng(seed)
        right_a = rng.random(n) < 0.6
        right_b = np.where(rng.random(n) < 0.7, right_a, rng.random(n) < 0.75)
        c, ra, rb = [str(i) for i in range(n)], [[x, 1] for x in right_a], [[y, 1] for y in right_b]
        e = paired_bootstrap(c, ra, rb, _accuracy, n_resamples=3000, seed=seed)["accuracy"]
        p10, p01 = np.mean(right_b & ~right_a), np.mean(right_a & ~right_b)  # this sample's
        assert e.se == pytest.approx(np.sqrt((p10 + p01 - (p10 - p01) ** 2) / n), rel=0.1)
        return e.se

    population = np.sqrt(0.09 + 0.045 - 0.045**2)
    for n in (200, 800):
        scaled = np.mean([se_at(n, seed) * np.sqrt(n) for seed in range(6)])
        assert scaled == pytest.approx(population, rel=0.08)
