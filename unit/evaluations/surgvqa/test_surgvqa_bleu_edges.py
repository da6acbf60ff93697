"""Edges of surgvqa's BLEU (support/evaluations/surgvqa/bleu.py) against nltk's sentence_bleu
called as the official evaluator does (weights 0.25 x 4, method1 smoothing, one reference)."""

from __future__ import annotations

import pytest
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

from support.evaluations.surgvqa.bleu import (
    MAX_CANDIDATE_TOKENS,
    best_reference,
    candidate_cut,
    is_yes_no_question,
    max_bleu,
    reference_scores,
    tokens,
    yes_no,
    yes_no_truth,
)


def official(ref: str, cand: str) -> float:
    """evaluate.py's compute_bleu for one reference (its normalisation written out)."""
    norm = lambda t: "".join(c for c in t if c not in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")  # noqa: E731
    return float(sentence_bleu([norm(ref).lower().split()], norm(cand).lower().split(),
                               weights=(0.25,) * 4,
                               smoothing_function=SmoothingFunction().method1))  # fmt: skip


def test_reference_scores_and_the_best_one() -> None:
    refs = ["the stapler was used", "", "a needle driver was used here", "the stapler was used"]
    cand = "The stapler was used."
    got = reference_scores(refs, cand)
    assert got == pytest.approx([official(refs[0], cand), 0.0, official(refs[2], cand),
                                 official(refs[3], cand)])  # fmt: skip
    assert got[0] == pytest.approx(1.0) and type(got[1]) is float
    assert max_bleu(refs, cand) == (pytest.approx(1.0), 0)  # the first of equals
    assert reference_scores(refs[:1], "") == [0.0] and reference_scores([], cand) == []
    assert max_bleu([], cand) == (0.0, None)


@pytest.mark.parametrize(
    ("scores", "best"),
    [([], (0.0, None)), ([0.2], (0.2, 0)), ([0.1, 0.5, 0.5], (0.5, 1)), ([0.3, 0.1], (0.3, 0))],
)
def test_best_reference(scores: list[float], best: tuple) -> None:
    assert best_reference(scores) == best


def test_candidate_cut_at_max_tokens() -> None:
    assert MAX_CANDIDATE_TOKENS == 10_000
    assert candidate_cut("a " * MAX_CANDIDATE_TOKENS) == 0
    assert candidate_cut("a " * (MAX_CANDIDATE_TOKENS + 3)) == 3
    assert candidate_cut(None) == 0
    # only the first 10,000 tokens are scored: extra tokens after them change nothing
    ref = "the stapler was used"
    head = "the stapler was used " + "x " * (MAX_CANDIDATE_TOKENS - 4)
    assert reference_scores([ref], head + "the stapler") == reference_scores([ref], head)


def test_tokens_and_yes_no() -> None:
    assert tokens("Tip-up, grasper!") == ["tipup", "grasper"] and tokens(None) == []
    assert [yes_no(t) for t in ("Yes, it was.", "no", "Nope", "", None)] == [
        "yes", "no", None, None, None
    ]  # fmt: skip
    assert yes_no_truth(["It was used.", "No.", "Yes."]) == "no" and yes_no_truth(["x"]) is None
    assert is_yes_no_question("Was a stapler used?") and not is_yes_no_question("What tool?")
    assert not is_yes_no_question("") and is_yes_no_question("MUST it be?")
