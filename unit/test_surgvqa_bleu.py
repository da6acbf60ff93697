"""SurgVU VQA scoring: the write-up's printed numbers, and BLEU's properties (hypothesis)."""

from __future__ import annotations

import json
import math
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from surgvu_writeup import PRINTED_MAX, PRINTED_MEAN, PRINTED_SCORES, QUESTION, REFERENCES

from support.evaluations.surgvqa.bleu import (
    is_yes_no_question,
    max_bleu,
    metrics_json,
    reference_scores,
    tokens,
    yes_no,
    yes_no_truth,
)

# the printed reference tokens: lower case, punctuation removed
PRINTED_TOKENS = [
    ["no"],
    ["no", "a", "large", "needle", "driver", "was", "not", "used"],
    ["a", "large", "needle", "driver", "was", "not", "used"],
    ["no", "large", "needle", "driver", "was", "utilized"],
    ["there", "is", "no", "indication", "a", "large", "needle", "driver", "was", "used"],
]


def test_writeup_per_reference_scores_exactly() -> None:
    assert reference_scores(REFERENCES, "no") == PRINTED_SCORES  # exact floats, not approx
    assert [tokens(r) for r in REFERENCES] == PRINTED_TOKENS


@pytest.mark.parametrize("candidate", ["no", "No", "No.", "NO!", "  no  "])
def test_writeup_max_for_every_spelling_of_no(candidate: str) -> None:
    score, best = max_bleu(REFERENCES, candidate)
    assert score == PRINTED_MAX
    assert best == 0


def test_writeup_aggregate_json() -> None:
    # the write-up's example: three questions scoring 0, 0.1778..., 0.1778...
    out = metrics_json([0.0, PRINTED_MAX, PRINTED_MAX])
    assert out["aggregates"]["bleu_score"] == 0.11855196066926153 == PRINTED_MEAN
    assert json.loads(json.dumps(out)) == {
        "results": [{"bleu_score": 0}, {"bleu_score": PRINTED_MAX}, {"bleu_score": PRINTED_MAX}],
        "aggregates": {"bleu_score": PRINTED_MEAN},
    }
    assert metrics_json([]) == {"results": []}  # no aggregates without results, as the evaluator


@pytest.mark.parametrize("candidate", ["", "   ", "...", "?!", None, 42, "“No”"])
def test_empty_refusal_and_junk_score_zero_without_raising(candidate) -> None:
    score, _ = max_bleu(REFERENCES, candidate)
    assert score == 0.0
    assert all(isinstance(s, float) for s in reference_scores(REFERENCES, candidate))


def test_refusal_scores_low_but_defined() -> None:
    score, _ = max_bleu(REFERENCES, "I'm sorry, I can't help with that request.")
    assert 0.0 <= score < 0.05


def test_no_nltk_warnings_on_short_answers() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reference_scores(REFERENCES, "no")
        reference_scores(REFERENCES, "a b")


def test_yes_no_helpers() -> None:
    assert is_yes_no_question(QUESTION)
    assert not is_yes_no_question("What tools are used in this clip?")
    assert yes_no("No, it was not.") == "no"
    assert yes_no("Yes.") == "yes"
    assert yes_no("There is no needle driver.") is None
    assert yes_no_truth(REFERENCES) == "no"
    assert yes_no_truth([REFERENCES[2], REFERENCES[4]]) is None


words = st.sampled_from(
    ["no", "yes", "a", "large", "needle", "driver", "was", "used", "the", "tool"]
)
sentences = st.lists(words, min_size=0, max_size=12).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(refs=st.lists(sentences, min_size=1, max_size=5), cand=sentences)
def test_scores_lie_in_unit_interval_and_max_dominates(refs: list[str], cand: str) -> None:
    scores = reference_scores(refs, cand)
    assert all(0.0 <= s <= 1.0 for s in scores)
    best, index = max_bleu(refs, cand)
    assert all(best >= s for s in scores)
    assert scores[index] == best


@settings(max_examples=100, deadline=None)
@given(ref=st.lists(words, min_size=4, max_size=12).map(" ".join))
def test_identical_candidate_scores_one_with_four_or_more_tokens(ref: str) -> None:
    assert math.isclose(max_bleu([ref], ref)[0], 1.0)


@settings(max_examples=100, deadline=None)
@given(refs=st.lists(sentences, min_size=1, max_size=5), cand=sentences, data=st.data())
def test_max_is_invariant_to_reference_order(refs: list[str], cand: str, data) -> None:
    shuffled = data.draw(st.permutations(refs))
    assert max_bleu(shuffled, cand)[0] == max_bleu(refs, cand)[0]
