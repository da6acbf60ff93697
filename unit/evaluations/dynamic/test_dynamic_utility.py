"""The dynamic search's utility, top-K selection and fresh-candidate filter (hand-made vectors)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from support.evaluations.dynamic.utility import fresh, top_k, utility


def unit(*rows: tuple[float, ...]) -> np.ndarray:
    array = np.asarray(rows, dtype=np.float64)
    return array / np.linalg.norm(array, axis=1, keepdims=True)


def none(dim: int = 2) -> np.ndarray:
    return np.zeros((0, dim))


CANDIDATES = unit((1, 0), (0, 1), (1, 1), (-1, 0))


def test_empty_sets_contribute_zero() -> None:
    # AnyPoint dynamic_evaluation/utility.py (2650ead) _max_sim: an empty set gives zeros.
    assert utility(CANDIDATES, none(), none(), lam=0.2).tolist() == [0.0, 0.0, 0.0, 0.0]


def test_lambda_zero_is_the_max_over_errors() -> None:
    errors = unit((1, 0), (0, 1))
    tested = unit((1, 0), (0, 1), (1, 1))
    expected = (CANDIDATES @ errors.T).max(axis=1)
    assert utility(CANDIDATES, errors, tested, lam=0.0) == pytest.approx(expected)


def test_a_candidate_equal_to_a_tested_error_scores_one_minus_lambda() -> None:
    error = unit((0.6, 0.8))
    for lam in (0.0, 0.2, 1.0):
        assert utility(error, error, error, lam=lam)[0] == pytest.approx(1.0 - lam)


def test_known_answers_on_the_plane() -> None:
    errors = unit((1, 0))  # the one failure points along +x
    tested = unit((1, 0), (0, 1))  # tested: +x (failed) and +y (passed)
    lam = 0.5
    got = utility(CANDIDATES, errors, tested, lam=lam)
    s = np.sqrt(0.5)
    # (1,0): 1 - 0.5*1; (0,1): 0 - 0.5*1; (1,1)/sqrt2: s - 0.5*s; (-1,0): -1 - 0.5*0 (max over H
    # of -1 and 0 is 0)
    assert got == pytest.approx([0.5, -0.5, s - 0.5 * s, -1.0])
    # Only errors, nothing else tested (not a state of the loop, but the formula allows it).
    assert utility(CANDIDATES, errors, none(), lam=lam) == pytest.approx([1.0, 0.0, s, -1.0])


def test_shapes_are_checked_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="errors: rows have dimension 3"):
        utility(CANDIDATES, np.ones((1, 3)), none(), lam=0.2)
    with pytest.raises(ValueError, match="candidates: expected a 2-D array"):
        utility(np.ones(2), none(), none(), lam=0.2)
    with pytest.raises(ValueError, match="lam"):
        utility(CANDIDATES, none(), none(), lam=float("nan"))


def test_top_k_picks_the_largest_best_first() -> None:
    scores = np.array([0.1, 0.9, -0.3, 0.5, 0.7])
    assert top_k(scores, 3, np.random.default_rng(0)) == [1, 4, 3]
    assert top_k(scores, 10, np.random.default_rng(0)) == [1, 4, 3, 0, 2]  # fewer than k
    assert top_k(np.array([]), 3, np.random.default_rng(0)) == []
    assert top_k(np.array([np.nan, 0.2, -1.0]), 3, np.random.default_rng(0)) == [1, 2, 0]


def test_top_k_ties_follow_the_seed() -> None:
    # lambda=0 before any error: every candidate scores 0, so the order is all tie-breaking.
    scores = np.zeros(50)
    picks = {seed: top_k(scores, 10, np.random.default_rng(seed)) for seed in range(5)}
    assert top_k(scores, 10, np.random.default_rng(3)) == picks[3]
    assert len({tuple(p) for p in picks.values()}) == 5
    # A strict winner still comes first whatever the seed.
    scores[17] = 0.1
    assert {top_k(scores, 1, np.random.default_rng(s))[0] for s in range(5)} == {17}


@given(
    scores=arrays(np.float64, st.integers(0, 40), elements=st.sampled_from([-1.0, 0.0, 0.5, 1.0])),
    k=st.integers(0, 50),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=200, deadline=None)
def test_top_k_never_repeats_and_is_sorted(scores: np.ndarray, k: int, seed: int) -> None:
    picked = top_k(scores, k, np.random.default_rng(seed))
    assert len(picked) == min(k, len(scores)) == len(set(picked))
    assert all(scores[a] >= scores[b] for a, b in itertools.pairwise(picked))
    rest = set(range(len(scores))) - set(picked)
    assert all(scores[p] >= scores[r] for p in picked for r in rest)


def test_fresh_drops_seen_keys_and_duplicates() -> None:
    keys = ["a", "b", "a", "c", "b", "d", "c"]
    assert fresh(keys, {"c"}) == [0, 1, 5]
    assert fresh(keys, set()) == [0, 1, 3, 5]
    assert fresh([], {"a"}) == []


def unit_rows(dim: int) -> st.SearchStrategy[np.ndarray]:
    finite = st.floats(-10, 10, allow_nan=False, allow_infinity=False)
    rows = arrays(np.float64, st.tuples(st.integers(0, 6), st.just(dim)), elements=finite)
    return rows.filter(lambda a: bool((np.linalg.norm(a, axis=1) > 1e-3).all())).map(
        lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)
    )


@pytest.mark.slow
@given(
    data=st.data(),
    dim=st.integers(1, 5),
    lam=st.floats(0, 2, allow_nan=False),
)
@settings(max_examples=200, deadline=None)
def test_utility_is_bounded_for_unit_vectors(data: st.DataObject, dim: int, lam: float) -> None:
    candidates = data.draw(unit_rows(dim))
    errors = data.draw(unit_rows(dim))
    tested = data.draw(unit_rows(dim))
    got = utility(candidates, errors, tested, lam)
    assert got.shape == (len(candidates),)
    assert np.all(got >= -1 - lam - 1e-9) and np.all(got <= 1 + lam + 1e-9)
