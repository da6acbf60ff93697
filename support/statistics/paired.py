"""Paired comparisons of two conditions on the same cases: intervals, tests, Holm, power.

A comparison "B vs A" (few-shot vs zero-shot of one model, model B vs model A, ...) is a list of
`Pair`s: one case seen by both sides, its bootstrap cluster (the video, image, ... it belongs to;
shared by both sides) and each side's additive count row, as in support.statistics.metrics (`reduce`
maps summed counts, with any leading resample axes, to {metric: values}).

- `paired_bootstrap`: per metric A, B, B - A and a percentile interval of B - A where every
  resample draws clusters once and sums BOTH sides' rows of the drawn clusters, so what the two
  sides share (the difficulty of a video) cancels out of the difference; plus a bootstrap p-value.
- `mcnemar_exact`: exact McNemar test on binary per-case outcomes (statsmodels).
- `paired_permutation`: sign-flip test on continuous per-case scores, over clusters (scipy).
- `holm`, `holm_by_family`: Holm step-down adjustment within a family of comparisons, NaN-safe
  (written here and checked against statsmodels: its Holm calls gc.collect() on every call).
- `compare`: one row per metric (COLUMNS) for one comparison.
- `half_width`, `clusters_needed`, `clusters_for_half_width`: normal-approximation power and
  sample size from the paired bootstrap's standard error of the difference.

statsmodels is imported inside the functions that use it: importing it takes seconds, and summary
modules (which import this one) are loaded when pytest starts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from support.statistics.metrics import bootstrap_clusters, counts_by_cluster

Reduce = Callable[[np.ndarray], dict[str, np.ndarray]]
TestName = Literal["mcnemar-exact", "permutation", "paired-bootstrap"]
TESTS: tuple[str, ...] = ("mcnemar-exact", "permutation", "paired-bootstrap")
COLUMNS = (
    "metric",
    "a",
    "b",
    "n_pairs",
    "n_clusters",
    "a_value",
    "b_value",
    "diff",
    "diff_lo",
    "diff_hi",
    "p_value",
    "test",
    "diff_se",  # bootstrap standard error of diff (NaN without resamples), for the power helpers
)


@dataclass(frozen=True)
class Pair:
    """One case seen by both sides of a comparison.

    cluster: the bootstrap unit both sides share. counts_a / counts_b: each side's additive count
    row (the evaluation's `counts(outcome)`). scores_a / scores_b: per-case values for the per-case
    tests, keyed by the metric they test (e.g. {"accuracy": 1.0} right/wrong for McNemar,
    {"mae": 0.42} an absolute error in metres for the permutation test); NaN or missing = no value
    (e.g. an unparsable answer), and the pair is left out of that test.
    """

    cluster: str
    counts_a: Sequence[float]
    counts_b: Sequence[float]
    scores_a: Mapping[str, float] = field(default_factory=dict)
    scores_b: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PairedEstimate:
    """One metric of a paired comparison: both values, B - A, its interval, p and standard error
    (NaN where undefined)."""

    a: float
    b: float
    diff: float
    low: float
    high: float
    p_value: float
    se: float


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test: pairs used, discordant counts and the two-sided p."""

    n_pairs: int
    b_only: int  # pairs B got right and A wrong
    a_only: int  # pairs A got right and B wrong
    p_value: float


@dataclass(frozen=True)
class PermutationResult:
    """Paired sign-flip test over clusters: pairs and clusters used, the mean per-case difference
    B - A (in the scores' unit) and the two-sided p."""

    n_pairs: int
    n_clusters: int
    diff: float
    p_value: float


def bootstrap_p_value(diffs: np.ndarray) -> float:
    """Two-sided bootstrap p-value of "difference = 0" from resampled differences.

    With m finite resampled differences, k_le of them <= 0 and k_ge >= 0:
    p = min(1, 2 * (min(k_le, k_ge) + 1) / (m + 1)), the add-one form that never gives 0 (its
    floor is 2 / (m + 1)) and treats the observed sample as one of the resamples, as
    scipy.stats.permutation_test does. NaN when no resample is finite.
    """
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return np.nan
    k = min(int(np.count_nonzero(d <= 0)), int(np.count_nonzero(d >= 0)))
    return float(min(1.0, 2.0 * (k + 1) / (d.size + 1)))


def paired_bootstrap(
    clusters: Sequence[str],
    counts_a: Sequence[Sequence[float]],
    counts_b: Sequence[Sequence[float]],
    reduce: Reduce,
    metrics: Sequence[str] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, PairedEstimate]:
    """Paired cluster bootstrap of B - A for metrics of additive counts.

    clusters[i], counts_a[i], counts_b[i]: pair i's cluster and each side's count row.
    A resample draws n_clusters clusters with replacement (clusters sorted by name;
    scipy.stats.bootstrap with `np.random.default_rng(seed)`, as
    support.statistics.metrics.cluster_bootstrap), sums A's rows and B's rows of the SAME drawn
    clusters, reduces each and subtracts. The interval is the percentile interval of the finite
    resampled differences; p is `bootstrap_p_value` of them; se their standard deviation (ddof 1).
    Interval, p and se are NaN with no pairs, fewer than 2 clusters, n_resamples == 0, or an
    undefined difference on the full data (e.g. precision when one side predicted nothing).
    """
    if not (len(clusters) == len(counts_a) == len(counts_b)):
        raise ValueError(
            f"paired_bootstrap: {len(clusters)} clusters, {len(counts_a)} rows of A and "
            f"{len(counts_b)} rows of B; one each per pair"
        )
    if len(clusters) == 0:
        return {m: PairedEstimate(*[np.nan] * 7) for m in metrics or ()}
    _, a = counts_by_cluster(clusters, list(counts_a))
    names, b = counts_by_cluster(clusters, list(counts_b))
    if a.shape != b.shape:
        raise ValueError(
            f"paired_bootstrap: count rows of A have {a.shape[1]} fields, B {b.shape[1]}"
        )
    point_a, point_b = reduce(a.sum(axis=0)), reduce(b.sum(axis=0))
    metrics = list(point_a) if metrics is None else list(metrics)
    missing = [m for m in metrics if m not in point_a]
    if missing:
        raise ValueError(
            f"paired_bootstrap: reduce gives no metric {missing}; it gives {list(point_a)}"
        )
    values = {m: (float(point_a[m]), float(point_b[m])) for m in metrics}
    if len(names) < 2 or n_resamples <= 0 or not metrics:
        return {
            m: PairedEstimate(va, vb, vb - va, np.nan, np.nan, np.nan, np.nan)
            for m, (va, vb) in values.items()
        }

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.moveaxis(np.asarray(idx, dtype=np.intp), axis, -1)
        ra, rb = reduce(a[idx].sum(axis=-2)), reduce(b[idx].sum(axis=-2))
        with np.errstate(invalid="ignore"):
            return np.stack([np.asarray(rb[m], float) - np.asarray(ra[m], float) for m in metrics])

    res = bootstrap_clusters(len(names), statistic, n_resamples, seed, level)
    dist = np.asarray(res.bootstrap_distribution).reshape(len(metrics), -1)
    alpha = (1 - level) / 2
    out: dict[str, PairedEstimate] = {}
    for i, m in enumerate(metrics):
        va, vb = values[m]
        diff = vb - va
        finite = dist[i][np.isfinite(dist[i])]
        if not np.isfinite(diff) or finite.size == 0:
            out[m] = PairedEstimate(va, vb, diff, np.nan, np.nan, np.nan, np.nan)
            continue
        low, high = np.quantile(finite, [alpha, 1 - alpha])
        se = float(np.std(finite, ddof=1)) if finite.size > 1 else np.nan
        out[m] = PairedEstimate(
            va, vb, diff, float(low), float(high), bootstrap_p_value(finite), se
        )
    return out


def _binary(values: Sequence[float] | np.ndarray, side: str) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    if not np.all((v == 0) | (v == 1)):
        bad = v[(v != 0) & (v != 1)][0]
        raise ValueError(f"mcnemar_exact: outcomes of {side} must be 0/1 (right/wrong), got {bad}")
    return v.astype(bool)


def mcnemar_exact(
    a_correct: Sequence[float] | np.ndarray, b_correct: Sequence[float] | np.ndarray
) -> McNemarResult:
    """Exact two-sided McNemar test of "A and B are right equally often" on paired binary outcomes.

    a_correct[i], b_correct[i]: pair i right (1/True) or wrong (0/False) for each side. The test
    is the exact binomial test (p = 1/2) on the discordant pairs
    (statsmodels.stats.contingency_tables.mcnemar(exact=True)); no discordant pair gives p = 1.
    It treats pairs as independent: it ignores clustering, so with strongly clustered data its p
    is too small; the paired cluster bootstrap does not have that problem. NaN p with no pairs.
    """
    from statsmodels.stats.contingency_tables import mcnemar

    if len(a_correct) != len(b_correct):
        raise ValueError(f"mcnemar_exact: {len(a_correct)} outcomes of A, {len(b_correct)} of B")
    a, b = _binary(a_correct, "A"), _binary(b_correct, "B")
    b_only, a_only = int(np.sum(b & ~a)), int(np.sum(a & ~b))
    if a.size == 0:
        return McNemarResult(0, 0, 0, np.nan)
    table = [[int(np.sum(a & b)), a_only], [b_only, int(np.sum(~a & ~b))]]
    return McNemarResult(int(a.size), b_only, a_only, float(mcnemar(table, exact=True).pvalue))


def paired_permutation(
    clusters: Sequence[str],
    scores_a: Sequence[float],
    scores_b: Sequence[float],
    n_permutations: int = 9999,
    seed: int = 0,
) -> PermutationResult:
    """Two-sided paired permutation test of "B - A = 0" for continuous per-case scores.

    The unit exchanged is the cluster: per cluster, the pairs' summed scores of A and of B; a
    permutation swaps A and B in whole clusters (a sign flip of the cluster's summed difference),
    which is valid when A and B are exchangeable within each cluster under the null. The
    statistic is the total difference sum(B - A), i.e. the mean per-case difference up to the
    constant number of pairs. scipy.stats.permutation_test(permutation_type="samples"), exact when
    2**n_clusters <= n_permutations, else n_permutations random flips from
    `np.random.default_rng(seed)` (p then has scipy's add-one correction).
    Pairs with a NaN score on either side are left out. NaN p with fewer than 2 clusters.
    """
    if not (len(clusters) == len(scores_a) == len(scores_b)):
        raise ValueError(
            f"paired_permutation: {len(clusters)} clusters, {len(scores_a)} scores of A and "
            f"{len(scores_b)} of B; one each per pair"
        )
    sa, sb = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    keep = np.isfinite(sa) & np.isfinite(sb)
    kept = [c for c, k in zip(clusters, keep, strict=True) if k]
    n = len(kept)
    if n == 0:
        return PermutationResult(0, 0, np.nan, np.nan)
    rows = np.column_stack([sa[keep], sb[keep]])
    names, sums = counts_by_cluster(kept, list(rows))
    diff = float(np.sum(sb[keep] - sa[keep]) / n)
    if len(names) < 2:
        return PermutationResult(n, len(names), diff, np.nan)

    def total_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.sum(y - x, axis=axis)

    res = stats.permutation_test(
        (sums[:, 0], sums[:, 1]),
        total_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_permutations,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return PermutationResult(n, len(names), diff, float(res.pvalue))


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values, same order: sorted ascending, the i-th (from 0) of m is
    min(1, max over j <= i of (m - j) p_(j)). NaN p-values stay NaN and are not counted.

    Written here, not statsmodels' multipletests(method="holm"), whose Holm branch calls
    gc.collect() on every call (a full collection of the run's heap at every report); the unit
    tests check the two agree."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if ok.size:
        order = ok[np.argsort(p[ok], kind="stable")]
        steps = np.arange(ok.size, 0, -1)  # m, m - 1, ..., 1
        out[order] = np.minimum(np.maximum.accumulate(p[order] * steps), 1.0)
    return out


def holm_by_family(
    frame: pd.DataFrame, families: Sequence[str] = (), p_column: str = "p_value"
) -> pd.DataFrame:
    """A copy of `frame` with `p_holm`: `p_column` Holm-adjusted within each family, a family being
    the rows that share the values of the `families` columns (all rows when none are given)."""
    out = frame.copy()
    out["p_holm"] = np.nan
    if out.empty:
        return out
    if not families:
        out["p_holm"] = holm(out[p_column].to_numpy())
        return out
    for idx in out.groupby(list(families), dropna=False, sort=False).indices.values():
        out.iloc[idx, out.columns.get_loc("p_holm")] = holm(out[p_column].to_numpy()[idx])
    return out


def _scores(pairs: Sequence[Pair], metric: str) -> tuple[np.ndarray, np.ndarray]:
    def get(scores: Mapping[str, float]) -> float:
        v = scores.get(metric)
        return np.nan if v is None else float(v)

    return (
        np.array([get(p.scores_a) for p in pairs], dtype=float),
        np.array([get(p.scores_b) for p in pairs], dtype=float),
    )


def compare(
    pairs: Sequence[Pair],
    reduce: Reduce,
    metrics: Sequence[str],
    *,
    a: str,
    b: str,
    tests: Mapping[str, TestName] | None = None,
    n_resamples: int = 1000,
    n_permutations: int = 9999,
    seed: int = 0,
    level: float = 0.95,
    labels: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """One comparison "b vs a": one row per metric, columns `labels` then COLUMNS.

    Values, difference (b - a) and interval come from `paired_bootstrap`. p comes from
    `tests[metric]`: "mcnemar-exact" on the pairs' 0/1 `scores_*[metric]`, "permutation"
    (`paired_permutation`) on their continuous `scores_*[metric]`, or, for metrics not in `tests`,
    "paired-bootstrap" (the bootstrap p; NaN when n_resamples == 0). With fewer than 2 clusters
    nothing is tested (p NaN), whatever the test: one cluster says nothing about the population
    the clusters stand for. labels: constant columns put first (e.g. evaluation, model), which
    `holm_by_family` can group on.
    """
    tests = dict(tests or {})
    unknown = {m: t for m, t in tests.items() if t not in TESTS}
    if unknown:
        raise ValueError(f"compare: unknown tests {unknown}; known: {TESTS}")
    clusters = [p.cluster for p in pairs]
    n_clusters = len(set(clusters))
    boot = paired_bootstrap(
        clusters,
        [p.counts_a for p in pairs],
        [p.counts_b for p in pairs],
        reduce,
        metrics,
        n_resamples,
        seed,
        level,
    )
    rows = []
    for m in metrics:
        e = boot[m]
        test = tests.get(m, "paired-bootstrap")
        p_value = e.p_value
        if n_clusters < 2:
            p_value = np.nan
        elif test == "mcnemar-exact":
            sa, sb = _scores(pairs, m)
            keep = np.isfinite(sa) & np.isfinite(sb)
            p_value = mcnemar_exact(sa[keep], sb[keep]).p_value
        elif test == "permutation":
            sa, sb = _scores(pairs, m)
            p_value = paired_permutation(clusters, sa, sb, n_permutations, seed).p_value
        rows.append(
            dict(labels or {})
            | {
                "metric": m,
                "a": a,
                "b": b,
                "n_pairs": len(pairs),
                "n_clusters": n_clusters,
                "a_value": e.a,
                "b_value": e.b,
                "diff": e.diff,
                "diff_lo": e.low,
                "diff_hi": e.high,
                "p_value": p_value,
                "test": test,
                "diff_se": e.se,
            }
        )
    return pd.DataFrame(rows, columns=[*(labels or {}), *COLUMNS])


# ---- power and sample size ---------------------------------------------------------------------
# Normal approximation: the difference's estimator is treated as normal with standard error
# se * sqrt(n / n') at n' clusters, where se is the paired bootstrap's standard error at the
# observed n clusters (clusters independent and alike, so the variance falls as 1 / n'). Clusters,
# not cases, are the unit: with clusters of several cases, multiply by the mean cluster size for
# cases.


def half_width(se: float, level: float = 0.95) -> float:
    """Half-width of a normal-approximation interval at the observed n: z_{(1+level)/2} * se."""
    return float(stats.norm.ppf((1 + level) / 2) * se)


def clusters_needed(
    se: float, n_clusters: int, delta: float, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Clusters needed to detect a difference `delta` (same unit as the metric) with a two-sided
    test at `alpha` and the given power: n * ((z_{1-alpha/2} + z_power) * se / delta)**2, rounded
    up. NaN when se or delta is not finite, or delta == 0."""
    if not (np.isfinite(se) and np.isfinite(delta)) or delta == 0 or n_clusters <= 0:
        return np.nan
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    return float(math.ceil(n_clusters * (z * se / delta) ** 2))


def clusters_for_half_width(
    se: float, n_clusters: int, target: float, level: float = 0.95
) -> float:
    """Clusters needed for an interval of half-width `target`: n * (z * se / target)**2, rounded
    up. NaN when se or target is not finite, or target <= 0."""
    if not (np.isfinite(se) and np.isfinite(target)) or target <= 0 or n_clusters <= 0:
        return np.nan
    return float(math.ceil(n_clusters * (half_width(se, level) / target) ** 2))
