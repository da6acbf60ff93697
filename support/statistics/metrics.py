"""Binary metrics from confusion counts, cluster-bootstrap intervals, and the summary helper.

Metrics are reductions over the whole list of outcomes, not per-case averages. Intervals resample
clusters (e.g. the videos frames come from, whose frames are correlated), not single cases. Two
resamplers:

- `cluster_bootstrap`, for metrics that are functions of additive counts (precision, F1, MAE):
  each cluster contributes a row of counts, a resample sums the rows of the clusters drawn, and
  the metrics are recomputed from the sums, vectorised (scipy.stats.bootstrap, percentile);
- `cluster_resample`, for any other statistic (a median, a corpus BLEU, a COCO mAP): a resample
  is the cases of the clusters drawn (with multiplicity), and the statistic is recomputed from
  them, one resample at a time.

`summarize_groups` is the skeleton every evaluation's summary shares: group the outcomes, leave
backend errors out (counted in `n_error`), sum per-case counts by cluster, reduce, bootstrap.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from support.types import Outcome

RESAMPLE_BLOCK = 256  # resamples drawn at once by cluster_resample (bounds memory)


def safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den elementwise, NaN where den == 0."""
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def binary_metrics(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray) -> dict:
    """accuracy, precision, recall, F1 from counts (arrays broadcast; any leading shape).

    Conventions for empty denominators: precision is 1.0 when nothing was predicted positive and
    nothing was positive (no error was possible or made), NaN when positives were all missed; recall
    likewise; F1 = 2TP / (2TP + FP + FN), 1.0 when all three are 0.
    """
    tp, fp, fn, tn = (np.asarray(a, dtype=float) for a in (tp, fp, fn, tn))
    n = tp + fp + fn + tn
    precision = safe_ratio(tp, tp + fp)
    precision = np.where((tp + fp == 0) & (fn == 0), 1.0, precision)
    recall = safe_ratio(tp, tp + fn)
    recall = np.where((tp + fn == 0) & (fp == 0), 1.0, recall)
    f1 = safe_ratio(2 * tp, 2 * tp + fp + fn)
    f1 = np.where(2 * tp + fp + fn == 0, 1.0, f1)
    return {
        "accuracy": safe_ratio(tp + tn, n),
        "precision": precision,
        "recall": recall,
        "f1": f1,
    }


@dataclass(frozen=True)
class Estimate:
    """A metric's value on the full data and its bootstrap interval (NaN where undefined)."""

    value: float
    low: float
    high: float


def bootstrap_clusters(
    n_clusters: int,
    statistic: Callable[..., np.ndarray],
    n_resamples: int,
    seed: int,
    level: float = 0.95,
) -> Any:
    """scipy.stats.bootstrap (percentile, vectorised) over cluster indices 0..n_clusters-1:
    `statistic(idx, axis)` gets resampled index arrays. Warnings of degenerate resamples (all
    equal, NaN), expected on tiny subsets, are silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return stats.bootstrap(
            (np.arange(n_clusters),),
            statistic,
            vectorized=True,
            n_resamples=n_resamples,
            confidence_level=level,
            method="percentile",
            rng=np.random.default_rng(seed),
        )


def cluster_bootstrap(
    counts: np.ndarray,
    reduce: Callable[[np.ndarray], dict[str, np.ndarray]],
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Estimate]:
    """Point estimates and percentile intervals of metrics computed from summed cluster counts.

    counts: (n_clusters, k) additive counts, one row per cluster (order must be deterministic,
      e.g. clusters sorted by name, so the same data and seed give the same interval anywhere).
    reduce: maps (..., k) summed counts to {metric: (...) values}.
    Returns {metric: Estimate}; intervals are NaN with fewer than 2 clusters or n_resamples == 0.
    """
    counts = np.asarray(counts, dtype=float)
    point = {k: float(v) for k, v in reduce(counts.sum(axis=0)).items()}
    names = list(point)
    if counts.shape[0] < 2 or n_resamples <= 0:
        return {k: Estimate(v, np.nan, np.nan) for k, v in point.items()}

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.moveaxis(np.asarray(idx, dtype=np.intp), axis, -1)
        summed = counts[idx].sum(axis=-2)  # (..., k)
        values = reduce(summed)
        return np.stack([np.asarray(values[k], dtype=float) for k in names])

    res = bootstrap_clusters(counts.shape[0], statistic, n_resamples, seed, level)
    dist = np.asarray(res.bootstrap_distribution)  # (n_metrics, n_resamples)
    low = np.asarray(res.confidence_interval.low, dtype=float)
    high = np.asarray(res.confidence_interval.high, dtype=float)
    alpha = (1 - level) / 2
    out: dict[str, Estimate] = {}
    for i, k in enumerate(names):
        lo, hi = low[i], high[i]
        if not (np.isfinite(lo) and np.isfinite(hi)):  # some resamples undefined: ignore those
            finite = dist[i][np.isfinite(dist[i])]
            if finite.size:
                lo, hi = np.quantile(finite, [alpha, 1 - alpha])
        out[k] = Estimate(point[k], float(lo), float(hi))
    return out


def counts_by_cluster(
    clusters: Sequence[str], rows: Sequence[Sequence[float]]
) -> tuple[list[str], np.ndarray]:
    """Sum per-case count rows into one row per cluster; clusters come back sorted."""
    names = sorted(set(clusters))
    index = {c: i for i, c in enumerate(names)}
    k = len(rows[0]) if rows else 0
    out = np.zeros((len(names), k))
    for c, r in zip(clusters, rows, strict=True):
        out[index[c]] += np.asarray(r, dtype=float)
    return names, out


def cluster_resample(
    clusters: Sequence[str],
    statistic: Callable[[np.ndarray], Mapping[str, float]],
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Estimate]:
    """Point estimates and percentile intervals of any statistic of the cases, resampling whole
    clusters with replacement.

    clusters: the cluster of each case (case i belongs to clusters[i]).
    statistic: maps an array of case indices (with repeats, in case order within each drawn
      cluster) to {name: value}; called once on every case, then once per resample.
    Draws: clusters sorted by name, `rng.integers(0, n_clusters, (block, n_clusters))` in blocks of
    RESAMPLE_BLOCK resamples from `np.random.default_rng(seed)`, so the same data and seed give the
    same interval anywhere. Intervals are NaN with fewer than 2 clusters or n_resamples == 0;
    non-finite resample values are left out of the percentiles.
    """
    point = {k: float(v) for k, v in statistic(np.arange(len(clusters))).items()}
    names = sorted(set(clusters))
    if len(names) < 2 or n_resamples <= 0:
        return {k: Estimate(v, np.nan, np.nan) for k, v in point.items()}
    members: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(clusters):
        members[c].append(i)
    cases = [np.asarray(members[c], dtype=np.intp) for c in names]
    rng = np.random.default_rng(seed)
    values: dict[str, list[float]] = {k: [] for k in point}
    for start in range(0, n_resamples, RESAMPLE_BLOCK):
        draws = rng.integers(0, len(names), (min(RESAMPLE_BLOCK, n_resamples - start), len(names)))
        for draw in draws:
            result = statistic(np.concatenate([cases[k] for k in draw]))
            for k in point:
                values[k].append(float(result[k]))
    alpha = (1 - level) / 2
    out = {}
    for k, v in point.items():
        finite = np.asarray(values[k])[np.isfinite(values[k])]
        if finite.size == 0:
            out[k] = Estimate(v, np.nan, np.nan)
            continue
        low, high = np.quantile(finite, [alpha, 1 - alpha])
        out[k] = Estimate(v, float(low), float(high))
    return out


@dataclass(frozen=True)
class GroupSummary:
    """One reporting group: its key, counts, summed counts and metric estimates."""

    key: tuple
    outcomes: list[Outcome]  # every outcome of the group, errors included
    scored: list[Outcome]  # those with a score (status != "error")
    totals: np.ndarray  # (k,) summed counts of the scored outcomes
    estimates: dict[str, Estimate] = field(default_factory=dict)  # empty when nothing scored

    @property
    def n(self) -> int:
        return len(self.scored)

    @property
    def n_error(self) -> int:
        return len(self.outcomes) - len(self.scored)

    def row(self, columns: Sequence[str], metrics: Sequence[str]) -> dict:
        """{key columns, n, n_error, m, m_lo, m_hi per metric} (NaN metrics when nothing scored)."""
        row: dict = dict(zip(columns, self.key, strict=True))
        row |= {"n": self.n, "n_error": self.n_error}
        for m in metrics:
            e = self.estimates.get(m)
            row |= {m: np.nan} if e is None else {m: e.value, f"{m}_lo": e.low, f"{m}_hi": e.high}
        return row


def summarize_groups(
    outcomes: Iterable[Outcome],
    keys: Callable[[Outcome], Iterable[Hashable]],
    case_counts: Callable[[Outcome], Sequence[float]],
    reduce: Callable[[np.ndarray], dict[str, np.ndarray]],
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> list[GroupSummary]:
    """Group outcomes, count, reduce and bootstrap by cluster: one GroupSummary per key.

    keys(o): the groups an outcome belongs to (e.g. its organ's row and the `ALL` row);
    case_counts(o): a scored outcome's additive counts; reduce: summed counts -> metrics, as for
    cluster_bootstrap. Groups come back sorted by key; every group uses the same seed.
    """
    grouped: dict[Hashable, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        for key in keys(o):
            grouped[key].append(o)
    out = []
    for key in sorted(grouped):
        group = grouped[key]
        scored = [o for o in group if o.status != "error"]
        if not scored:
            out.append(GroupSummary(key, group, scored, np.zeros(0)))
            continue
        _, counts = counts_by_cluster([o.cluster for o in scored], [case_counts(o) for o in scored])
        estimates = cluster_bootstrap(counts, reduce, n_resamples, seed, level)
        out.append(GroupSummary(key, group, scored, counts.sum(axis=0), estimates))
    return out
