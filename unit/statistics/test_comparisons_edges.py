"""support.statistics.paired at its edges: the bootstrap p-value's add-one rule, the paired
bootstrap against scipy.stats.bootstrap driven by hand (values, interval, p, standard error at a
non-default level), McNemar's and the permutation test's inputs, exact sign-flip enumeration,
and the power helpers at one cluster, none, and a non-default level."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from support.statistics.metrics import counts_by_cluster, safe_ratio
from support.statistics.paired import (
    COLUMNS,
    Pair,
    bootstrap_p_value,
    clusters_for_half_width,
    clusters_needed,
    compare,
    half_width,
    holm_by_family,
    mcnemar_exact,
    paired_bootstrap,
    paired_permutation,
)


def _accuracy(s: np.ndarray) -> dict[str, np.ndarray]:
    """count rows [right, cases] -> accuracy (any leading axes)."""
    return {"accuracy": safe_ratio(s[..., 0], s[..., 1])}


def _two(s: np.ndarray) -> dict[str, np.ndarray]:
    """count rows [right, cases, |error| m] -> accuracy and mean absolute error (m)."""
    return _accuracy(s) | {"mae": safe_ratio(s[..., 2], s[..., 1])}


# differences d; k = min(#d <= 0, #d >= 0); p = min(1, 2 (k + 1) / (m + 1)), m finite ones
P_VALUES = [
    ([1.0, 2.0, 3.0], 2 * 1 / 4),  # k 0: the floor 2 / (m + 1)
    ([5.0], 1.0),  # k 0, m 1: 2 * 1 / 2
    ([-1.0, 0.0, 1.0, 2.0, 3.0], 1.0),  # k = 2 (-1 and 0): 2 * 3 / 6
    ([0.0, 1.0, 2.0, 3.0, 4.0], 2 * 2 / 6),  # a zero counts on both sides: k 1
    ([-3.0, -2.0, -1.0, 4.0], 2 * 2 / 5),  # k = #d >= 0 = 1
    ([np.nan, np.inf, 1.0, 2.0, 3.0], 2 * 1 / 4),  # non-finite left out: m 3
    ([1.0] * 9 + [-1.0], 2 * 2 / 11),
]


@pytest.mark.parametrize(("diffs", "expected"), P_VALUES)
def test_bootstrap_p_value_by_hand(diffs: list[float], expected: float) -> None:
    assert bootstrap_p_value(np.array(diffs)) == pytest.approx(expected, rel=1e-12)


def test_bootstrap_p_value_of_nothing_finite_is_nan() -> None:
    assert np.isnan(bootstrap_p_value(np.array([])))
    assert np.isnan(bootstrap_p_value(np.array([np.nan, np.inf])))


# 6 clusters, per case (A right, B right, |error| of A, |error| of B) in metres
CASES = {
    "v0": [(1, 1, 0.2, 0.1), (0, 1, 0.9, 0.3)],
    "v1": [(0, 0, 1.5, 1.1)],
    "v2": [(1, 0, 0.4, 0.8), (1, 1, 0.1, 0.1), (0, 1, 0.7, 0.2)],
    "v3": [(0, 1, 1.2, 0.5)],
    "v4": [(1, 1, 0.3, 0.4), (0, 0, 2.0, 1.0)],
    "v5": [(1, 1, 0.2, 0.2)],
}


def _rows() -> tuple[list[str], list[list[float]], list[list[float]]]:
    clusters, rows_a, rows_b = [], [], []
    for c, cases in reversed(CASES.items()):  # listed out of order: the function sorts
        for ra, rb, ea, eb in cases:
            clusters.append(c)
            rows_a.append([ra, 1, ea])
            rows_b.append([rb, 1, eb])
    return clusters, rows_a, rows_b


def _cluster_sums(side: int) -> np.ndarray:
    """[right, cases, |error|] summed per cluster (sorted v0..v5) for side 0 (A) or 1 (B)."""
    return np.array(
        [[sum(c[side] for c in CASES[n]), len(CASES[n]), sum(c[2 + side] for c in CASES[n])]
         for n in sorted(CASES)]
    )  # fmt: skip


def _reference(column: int, n_resamples: int, seed: int, level: float) -> dict[str, float]:
    """The paired bootstrap written out on scipy.stats.bootstrap (the draws the module
    documents): B - A of metric `column` / cases; percentile interval, sd (ddof 1), add-one p."""
    a, b = _cluster_sums(0), _cluster_sums(1)

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        i = np.moveaxis(idx, axis, -1)
        sa, sb = a[i].sum(axis=-2), b[i].sum(axis=-2)
        return sb[..., column] / sb[..., 1] - sa[..., column] / sa[..., 1]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((np.arange(6),), statistic, vectorized=True,
                              n_resamples=n_resamples, method="percentile",
                              rng=np.random.default_rng(seed))  # fmt: skip
    dist = np.asarray(res.bootstrap_distribution)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(dist, [tail, 100 - tail])
    k = min(np.sum(dist <= 0), np.sum(dist >= 0))
    p = min(1.0, 2 * (k + 1) / (dist.size + 1))
    return {"low": low, "high": high, "se": np.std(dist, ddof=1), "p": p}


def test_paired_bootstrap_equals_scipy_bootstrap_driven_by_hand() -> None:
    clusters, rows_a, rows_b = _rows()
    level, n_resamples, seed = 0.8, 400, 3
    got = paired_bootstrap(clusters, rows_a, rows_b, _two, None, n_resamples, seed, level)
    assert list(got) == ["accuracy", "mae"]  # metrics=None: every metric reduce gives
    # point values by hand, 10 cases: A right 1 + 2 + 1 + 1 = 5, B 2 + 2 + 1 + 1 + 1 = 7;
    # errors A 0.2 + 0.9 + 1.5 + 0.4 + 0.1 + 0.7 + 1.2 + 0.3 + 2.0 + 0.2 = 7.5 m,
    # B 0.1 + 0.3 + 1.1 + 0.8 + 0.1 + 0.2 + 0.5 + 0.4 + 1.0 + 0.2 = 4.7 m
    assert (got["accuracy"].a, got["accuracy"].b) == pytest.approx((0.5, 0.7))
    assert (got["mae"].a, got["mae"].b) == pytest.approx((0.75, 0.47))
    assert got["mae"].diff == pytest.approx(0.47 - 0.75)
    for column, name in [(0, "accuracy"), (2, "mae")]:
        ref, e = _reference(column, n_resamples, seed, level), got[name]
        # level 0.8: the 10th and 90th percentiles
        assert (e.low, e.high) == pytest.approx((ref["low"], ref["high"]), rel=1e-12)
        assert e.se == pytest.approx(ref["se"], rel=1e-12)
        assert e.p_value == pytest.approx(ref["p"], rel=1e-12)


def test_compare_passes_its_settings_to_each_test() -> None:
    clusters, rows_a, rows_b = _rows()
    scores = [
        ({"accuracy": ra[0], "mae": ra[2]}, {"accuracy": rb[0], "mae": rb[2]})
        for ra, rb in zip(rows_a, rows_b, strict=True)
    ]
    # the first pair (v5) has no score of B: McNemar and the permutation test leave it out
    scores[0] = (scores[0][0], {})
    pairs = [
        Pair(c, ra, rb, sa, sb)
        for c, ra, rb, (sa, sb) in zip(clusters, rows_a, rows_b, scores, strict=True)
    ]
    tests: dict = {"accuracy": "mcnemar-exact", "mae": "permutation"}
    kw: dict = {"n_resamples": 300, "n_permutations": 20, "seed": 4, "level": 0.9}
    out = compare(pairs, _two, ["accuracy", "mae", "accuracy"], a="zero", b="few", tests=tests,
                  labels={"model": "m1"}, **kw)  # fmt: skip
    assert list(out.columns) == ["model", *COLUMNS]
    assert out["metric"].tolist() == ["accuracy", "mae", "accuracy"]
    assert out["test"].tolist() == ["mcnemar-exact", "permutation", "mcnemar-exact"]
    assert (out["n_pairs"] == 10).all() and (out["n_clusters"] == 6).all()
    assert (out["model"] == "m1").all() and (out["a"] == "zero").all() and (out["b"] == "few").all()
    for i, column in [(0, 0), (1, 2)]:
        ref, row = _reference(column, 300, 4, 0.9), out.iloc[i]
        assert (row["diff_lo"], row["diff_hi"]) == pytest.approx((ref["low"], ref["high"]))
        assert row["diff_se"] == pytest.approx(ref["se"])
    # McNemar on the 9 scored pairs (v5's dropped, right on both): A only v2, B only v0, v2, v3
    assert out.iloc[0]["p_value"] == pytest.approx(stats.binomtest(3, 4, 0.5).pvalue)
    # the permutation test: 2^5 = 32 sign flips > 20, so 20 random ones from default_rng(4) on
    # the clusters' summed errors (v5 dropped)
    kept = [i for i, (_, sb) in enumerate(scores) if sb]
    _, sums = counts_by_cluster(
        [clusters[i] for i in kept], [[rows_a[i][2], rows_b[i][2]] for i in kept]
    )
    ref_p = stats.permutation_test(
        (sums[:, 0], sums[:, 1]), lambda x, y, axis=-1: np.sum(y - x, axis=axis),
        permutation_type="samples", vectorized=True, n_resamples=20,
        rng=np.random.default_rng(4),
    ).pvalue  # fmt: skip
    assert out.iloc[1]["p_value"] == pytest.approx(ref_p)


def test_compare_tests_with_two_clusters_and_not_with_one() -> None:
    # two clusters: B right where A is wrong in both (counts [right, cases])
    pairs = [Pair(c, [0, 1], [1, 1], {"accuracy": 0}, {"accuracy": 1}) for c in ("u", "u", "v")]
    two = compare(pairs, _accuracy, ["accuracy"], a="A", b="B", n_resamples=50)
    # every resample's difference is 1 > 0: the add-one floor 2 / 51
    assert two.iloc[0]["p_value"] == pytest.approx(2 / 51)
    mc = compare(pairs, _accuracy, ["accuracy"], a="A", b="B", tests={"accuracy": "mcnemar-exact"})
    assert mc.iloc[0]["p_value"] == pytest.approx(stats.binomtest(3, 3, 0.5).pvalue)  # 0.25


def test_paired_bootstrap_metrics_subset_and_its_refusals() -> None:
    clusters, rows_a, rows_b = _rows()
    got = paired_bootstrap(clusters, rows_a, rows_b, _two, ["mae"], n_resamples=50)
    assert list(got) == ["mae"]
    assert paired_bootstrap([], [], [], _two) == {}  # no pairs, no metric asked
    empty = paired_bootstrap([], [], [], _two, ["accuracy"])["accuracy"]
    assert all(np.isnan(v) for v in vars(empty).values())
    with pytest.raises(ValueError, match="3 fields, B 2"):
        paired_bootstrap(["u", "v"], [[1, 1, 0], [0, 1, 0]], [[1, 1], [1, 1]], _two)
    with pytest.raises(ValueError, match=r"no metric \['f1'\]"):
        paired_bootstrap(clusters, rows_a, rows_b, _two, ["f1"])
    with pytest.raises(ValueError, match="1 clusters, 1 rows of A and 0 rows of B"):
        paired_bootstrap(["u"], [[1, 1, 0]], [], _two)


def test_paired_bootstrap_without_resamples_or_with_one_cluster() -> None:
    clusters, rows_a, rows_b = _rows()
    for got in (
        paired_bootstrap(clusters, rows_a, rows_b, _two, n_resamples=0),
        paired_bootstrap(["v0"] * len(clusters), rows_a, rows_b, _two, n_resamples=50),
    ):
        e = got["accuracy"]
        assert (e.a, e.b, e.diff) == pytest.approx((0.5, 0.7, 0.2))
        assert np.isnan([e.low, e.high, e.p_value, e.se]).all()


def test_mcnemar_refuses_non_binary_outcomes_naming_the_side() -> None:
    with pytest.raises(ValueError, match=r"outcomes of A must be 0/1.*got 2"):
        mcnemar_exact([1, 2], [1, 0])
    with pytest.raises(ValueError, match=r"outcomes of B must be 0/1.*got -1"):
        mcnemar_exact([1, 0], [1, -1])
    with pytest.raises(ValueError, match="3 outcomes of A, 2 of B"):
        mcnemar_exact([1, 0, 1], [1, 0])
    # booleans are right/wrong too: 2 pairs B only, 0 A only -> binomial 2 of 2, p = 2 * 1/4
    r = mcnemar_exact([True, False, False], [True, True, True])
    assert (r.n_pairs, r.b_only, r.a_only) == (3, 2, 0)
    assert r.p_value == pytest.approx(stats.binomtest(2, 2, 0.5).pvalue) == pytest.approx(0.5)


def _exact_sign_flip_p(cluster_diffs: list[float]) -> float:
    """Two-sided p of the total difference over every sign flip of the clusters' differences."""
    observed = abs(sum(cluster_diffs))
    totals = [
        abs(sum(s * d for s, d in zip(signs, cluster_diffs, strict=True)))
        for signs in itertools.product((1, -1), repeat=len(cluster_diffs))
    ]
    return float(np.mean([t >= observed - 1e-12 for t in totals]))


def test_permutation_drops_nan_pairs_and_is_exact_on_few_clusters() -> None:
    clusters = ["x", "x", "y", "z", "z", "w", "w"]
    a = [0.5, 1.0, 0.2, np.nan, 0.3, 0.4, 0.9]
    b = [0.9, 1.4, 0.1, 0.8, np.nan, 1.5, 1.0]
    # pair 4 (A NaN) and 5 (B NaN) leave: z is gone; cluster differences x +0.8, y -0.1, w +1.2
    r = paired_permutation(clusters, a, b, n_permutations=999, seed=0)
    assert (r.n_pairs, r.n_clusters) == (5, 3)
    assert r.diff == pytest.approx((0.4 + 0.4 - 0.1 + 1.1 + 0.1) / 5)
    # 2^3 = 8 flips <= 999: exact. |total| >= 1.9 for (+,+,+), (+,-,+) and their negatives
    assert r.p_value == pytest.approx(_exact_sign_flip_p([0.8, -0.1, 1.2])) == pytest.approx(0.5)


def test_permutation_without_enough_clusters_and_bad_lengths() -> None:
    one = paired_permutation(["x", "x"], [0.0, 1.0], [1.0, 1.5], n_permutations=99)
    assert (one.n_pairs, one.n_clusters, one.diff) == (2, 1, 0.75)
    assert np.isnan(one.p_value)
    none = paired_permutation(["x"], [np.nan], [1.0])
    assert (none.n_pairs, none.n_clusters) == (0, 0) and np.isnan(none.diff)
    with pytest.raises(ValueError, match="2 clusters, 2 scores of A and 1 of B"):
        paired_permutation(["x", "y"], [0.0, 1.0], [1.0])


def test_power_helpers_at_the_edges() -> None:
    z975, z80, z95 = stats.norm.ppf(0.975), stats.norm.ppf(0.8), stats.norm.ppf(0.95)
    # one cluster observed: 1 * ((1.959964 + 0.841621) * 0.1 / 0.1)^2 = 7.849 -> 8
    assert clusters_needed(0.1, 1, 0.1) == np.ceil((z975 + z80) ** 2) == 8
    # half-width 0.1 at se 0.1 from one cluster: 1.959964^2 = 3.84 -> 4
    assert clusters_for_half_width(0.1, 1, 0.1) == np.ceil(z975**2) == 4
    # none observed: no standard error to scale
    assert np.isnan(clusters_needed(0.05, 0, 0.1))
    assert np.isnan(clusters_for_half_width(0.05, 0, 0.05))
    # a standard error that is not finite gives no size, whatever the target
    assert np.isnan(clusters_for_half_width(np.nan, 40, 0.05))
    assert np.isnan(clusters_for_half_width(0.05, 40, np.inf))
    assert np.isnan(clusters_needed(0.05, 40, np.nan))
    # a 90% interval: z_0.95 = 1.644854; 40 * (1.644854 * 0.05 / 0.05)^2 = 108.2 -> 109
    assert half_width(0.05, level=0.9) == pytest.approx(z95 * 0.05)
    assert clusters_for_half_width(0.05, 40, 0.05, level=0.9) == np.ceil(40 * z95**2) == 109
    # alpha 0.01, power 0.9: (2.575829 + 1.281552)^2 = 14.88; 40 * 14.88 * (0.05 / 0.1)^2 = 148.8
    z = stats.norm.ppf(0.995) + stats.norm.ppf(0.9)
    assert clusters_needed(0.05, 40, 0.1, alpha=0.01, power=0.9) == np.ceil(40 * (z / 2) ** 2)
    assert clusters_needed(0.05, 40, 0.1, alpha=0.01, power=0.9) == 149


def test_holm_by_family_keeps_rows_without_a_family_value_and_a_float_column() -> None:
    # model missing on rows 1 and 2: they are a family of their own (m = 2), not dropped.
    # model a: 2 * 0.01 = 0.02, max(0.02, 0.04) = 0.04; missing: 2 * 0.02 = 0.04, max(0.04, 0.03)
    frame = pd.DataFrame({"model": ["a", None, None, "a"], "p_value": [0.01, 0.02, 0.03, 0.04]})
    out = holm_by_family(frame, ["model"])
    assert out["p_holm"].tolist() == pytest.approx([0.02, 0.04, 0.04, 0.04])
    assert out["p_holm"].dtype == np.float64
    # an empty table still has a numeric p_holm column (NaN-able, as comparisons.csv reads back)
    empty = holm_by_family(frame.iloc[:0], ["model"])
    assert list(empty.columns) == ["model", "p_value", "p_holm"]
    assert empty["p_holm"].dtype == np.float64


def test_compare_draws_9999_sign_flips_by_default() -> None:
    # comparisons.csv (support/statistics/pairing.py) leaves n_permutations at its default:
    # 16 clusters, 2^16 flips > 9999, so 9999 random flips from default_rng(0) and scipy's p
    rng = np.random.default_rng(3)
    a, b = rng.gamma(2.0, 0.5, 32), rng.gamma(2.0, 0.5, 32) + 0.1  # |error| (m), 2 per cluster
    clusters = [f"v{i // 2:02d}" for i in range(32)]
    pairs = [
        Pair(c, [x, 1], [y, 1], {"mae": x}, {"mae": y})
        for c, x, y in zip(clusters, a, b, strict=True)
    ]
    mae = {"mae": "permutation"}
    row = compare(pairs, _accuracy, ["accuracy"], a="A", b="B", tests={"accuracy": "permutation"})
    assert np.isnan(row.iloc[0]["p_value"])  # no "accuracy" score: no pair to test
    out = compare(pairs, _mae_only, ["mae"], a="A", b="B", tests=mae).iloc[0]
    sums = np.array([[a[2 * i] + a[2 * i + 1], b[2 * i] + b[2 * i + 1]] for i in range(16)])
    ref = stats.permutation_test(
        (sums[:, 0], sums[:, 1]), lambda x, y, axis=-1: np.sum(y - x, axis=axis),
        permutation_type="samples", vectorized=True, n_resamples=9999,
        rng=np.random.default_rng(0),
    ).pvalue  # fmt: skip
    assert out["p_value"] == pytest.approx(ref, rel=1e-12)


def _mae_only(s: np.ndarray) -> dict[str, np.ndarray]:
    """count rows [|error| m, answered] -> mean absolute error (m)."""
    return {"mae": safe_ratio(s[..., 0], s[..., 1])}
