"""The search's utility and top-K at their edges: float32 embeddings scored in float64, empty sets
of any width, the messages naming the bad argument, integer scores, and ties broken exactly in
the order of the seeded permutation. Expectations computed with numpy directly."""

from __future__ import annotations

import re

import numpy as np
import pytest

from support.evaluations.dynamic.utility import top_k, utility


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    rows = rng.normal(size=(n, dim))
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def reference(cand: np.ndarray, err: np.ndarray, hist: np.ndarray, lam: float) -> np.ndarray:
    """U(v) = max_e <v, v_e> - lam max_h <v, v_h>, an empty set giving 0, in float64."""
    c, e, h = (np.asarray(a, dtype=np.float64) for a in (cand, err, hist))
    best_e = (c @ e.T).max(axis=1) if len(e) else np.zeros(len(c))
    best_h = (c @ h.T).max(axis=1) if len(h) else np.zeros(len(c))
    return best_e - lam * best_h


def test_float32_embeddings_are_scored_in_float64() -> None:
    # embedders return float32; the utilities (and so the top-K order) are float64 dot products
    rng = np.random.default_rng(11)
    cand, err, hist = (unit_rows(rng, n, 384).astype(np.float32) for n in (20, 5, 9))
    got = utility(cand, err, hist, lam=0.3)
    assert got.dtype == np.float64
    assert got == pytest.approx(reference(cand, err, hist, 0.3), rel=1e-13, abs=1e-15)


def test_an_empty_set_of_any_width_contributes_zero() -> None:
    # (0, d) arrays of another width are still "no vectors": nothing to compare, no error
    cand = np.array([[1.0, 0.0], [0.6, 0.8]])
    tested = np.array([[0.0, 1.0]])
    got = utility(cand, np.zeros((0, 5)), tested, lam=0.5)
    assert got.tolist() == pytest.approx([0.0 - 0.5 * 0.0, 0.0 - 0.5 * 0.8])
    got = utility(cand, np.array([[1.0, 0.0]]), np.zeros((0, 7)), lam=0.5)
    assert got.tolist() == pytest.approx([1.0, 0.6])


@pytest.mark.parametrize(
    ("errors", "tested", "message"),
    [
        (np.ones((1, 3)), np.zeros((0, 2)), "errors: rows have dimension 3, candidates have 2"),
        (np.zeros((0, 2)), np.ones((2, 3)), "tested: rows have dimension 3, candidates have 2"),
        (np.zeros((0, 2)), np.ones(2), "tested: expected a 2-D array (rows, dim), got shape (2,)"),
    ],
)
def test_bad_shapes_name_the_argument(errors, tested, message: str) -> None:
    cand = np.array([[1.0, 0.0]])
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        utility(cand, errors, tested, lam=0.2)


def test_top_k_bad_arguments_name_themselves() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"^k: expected a non-negative count, got -1$"):
        top_k(np.zeros(3), -1, rng)
    with pytest.raises(ValueError, match=r"^utilities: expected a 1-D array, got shape \(2, 2\)$"):
        top_k(np.zeros((2, 2)), 1, rng)
    assert top_k(np.array([0.3, 0.9]), 0, rng) == []


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.int64, np.float32])
def test_top_k_ranks_any_numeric_dtype_by_value(dtype) -> None:
    # integer scores (e.g. counts) rank like floats: 0 is the lowest, not wrapped around
    scores = np.array([0, 7, 3, 250, 1], dtype=dtype)
    expected = sorted(range(5), key=lambda i: -float(scores[i]))  # all distinct: no ties
    assert expected == [3, 1, 2, 4, 0]
    assert top_k(scores, 5, np.random.default_rng(0)) == expected


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ties_follow_the_seeded_permutation_exactly(seed: int) -> None:
    # the documented rule: ties in an order drawn from rng, i.e. within a score, the order of
    # rng.permutation(n) (a stable sort keeps it)
    scores = np.array([0.5] * 25 + [0.2] * 20 + [np.nan] * 5)
    perm = np.random.default_rng(seed).permutation(len(scores))
    expected = [int(i) for i in perm if scores[i] == 0.5]
    expected += [int(i) for i in perm if scores[i] == 0.2]
    expected += [int(i) for i in perm if np.isnan(scores[i])]  # NaN last
    assert top_k(scores, len(scores), np.random.default_rng(seed)) == expected
    assert top_k(scores, 10, np.random.default_rng(seed)) == expected[:10]
