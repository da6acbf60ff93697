"""The search's scoring: the utility of a candidate task, top-K selection, and never-seen filtering.

U(v) = max_{e in E} <v, v_e> - lam * max_{h in H} <v, v_h>, with E the failed tasks, H every tested
task, and all vectors unit rows (so a dot product is a cosine similarity). An empty set contributes
0, as in the original (AnyPoint dynamic_evaluation/utility.py at 2650ead).
"""

from __future__ import annotations

from collections.abc import Sequence, Set

import numpy as np


def _as_rows(name: str, array: np.ndarray, width: int | None) -> np.ndarray:
    """`array` as a float64 (k, d) matrix, or a ValueError naming the argument."""
    rows = np.asarray(array, dtype=np.float64)
    if rows.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array (rows, dim), got shape {rows.shape}")
    if width is not None and rows.shape[0] > 0 and rows.shape[1] != width:
        raise ValueError(f"{name}: rows have dimension {rows.shape[1]}, candidates have {width}")
    return rows


def max_similarity(candidates: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """(n,) largest dot product of each candidate with any reference row; 0 when none."""
    if reference.shape[0] == 0:
        return np.zeros(candidates.shape[0])
    return (candidates @ reference.T).max(axis=1)


def utility(
    candidates: np.ndarray, errors: np.ndarray, tested: np.ndarray, lam: float
) -> np.ndarray:
    """(n,) utilities of (n, d) candidate vectors given (e, d) failed and (h, d) tested vectors."""
    cand = _as_rows("candidates", candidates, None)
    err = _as_rows("errors", errors, cand.shape[1])
    hist = _as_rows("tested", tested, cand.shape[1])
    if not np.isfinite(lam):
        raise ValueError(f"lam: expected a finite number, got {lam!r}")
    return max_similarity(cand, err) - lam * max_similarity(cand, hist)


def top_k(utilities: np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    """Indices of the k largest utilities, best first; ties in an order drawn from `rng`.

    Fewer than k when there are fewer candidates. NaN utilities rank last.
    """
    if k < 0:
        raise ValueError(f"k: expected a non-negative count, got {k}")
    scores = np.asarray(utilities, dtype=np.float64)
    if scores.ndim != 1:
        raise ValueError(f"utilities: expected a 1-D array, got shape {scores.shape}")
    order = rng.permutation(scores.shape[0])
    keys = np.where(np.isnan(scores[order]), np.inf, -scores[order])
    ranked = order[np.argsort(keys, kind="stable")]
    return [int(i) for i in ranked[:k]]


def fresh(keys: Sequence[str], seen: Set[str]) -> list[int]:
    """Positions of candidates whose key is not in `seen`, the first occurrence of each key only."""
    taken = set(seen)
    positions: list[int] = []
    for position, key in enumerate(keys):
        if key not in taken:
            taken.add(key)
            positions.append(position)
    return positions
