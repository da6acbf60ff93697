"""Binary metrics from confusion counts, and cluster-bootstrap confidence intervals.

Metrics are reductions over the whole list of outcomes, not per-case averages. Intervals resample
clusters (e.g. the videos frames come from, whose frames are correlated), not single cases: each
cluster contributes a row of additive counts, a resample sums the rows of the clusters drawn, and
the metric is recomputed from the summed counts. Resampling: scipy.stats.bootstrap (percentile).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats


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

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate resamples are expected on tiny subsets
        res = stats.bootstrap(
            (np.arange(counts.shape[0]),),
            statistic,
            vectorized=True,
            n_resamples=n_resamples,
            confidence_level=level,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
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
