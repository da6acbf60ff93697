"""SurgVU VQA scoring: the write-up's printed numbers, and BLEU's properties (hypothesis)."""

from __future__ import annotations

import json
import math
import string
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.evaluations.surgvqa.bleu import (
    is_yes_no_question,
    max_bleu,
    reference_scores,
    tokens,
    yes_no,
    yes_no_truth,
)
from support.evaluations.surgvqa.leaderboard import metrics_json
from unit.helpers.surgvu_writeup import (
    PRINTED_MAX,
    PRINTED_MEAN,
    PRINTED_SCORES,
    QUESTION,
    REFERENCES,
)

# the printed reference tokens: lower case, punctuation removed
PRINTED_TOKENS = [
    ["no"],
    ["no", "a", "large", "needle", "driver", "was", "not", "used"],
    ["a", "large", "needle", "driver", "was", "not", "used"],
    ["no", "large", "needle", "driver", "was", "utilized"],
    ["there", "is", "no", "indication", "a", "large", "needle", "driver", "was", "used"],
]


def official_tokens(text: str) -> list[str]:
    """The official scorer's tokens, copied from isi-challenges/surgvu26-category-2-eval-public
    (commit 9fb483e) evaluation/evaluate.py:244-246 (`normalize`: ASCII punctuation deleted, lower
    case, stripped) and :251 (`compute_bleu`: `.split()`)."""
    return text.translate(str.maketrans("", "", string.punctuation)).lower().strip().split()


def test_writeup_per_reference_scores_exactly() -> None:
    assert reference_scores(REFERENCES, "no") == PRINTED_SCORES  # exact floats, not approx
    assert (
        [tokens(r) for r in REFERENCES] == PRINTED_TOKENS == list(map(official_tokens, REFERENCES))
    )
    # the write-up's punctuation all sits before a space, so deleting and spacing it agree there;
    # inside a word they do not: the official scorer deletes it, so these spell "no" and score the
    # printed list exactly (spaced, "N.O." would be the two tokens "n o", "n-o" too)
    for candidate in ("N.O.", "n-o", "'no'"):
        assert tokens(candidate) == ["no"], candidate
        assert reference_scores(REFERENCES, candidate) == PRINTED_SCORES, candidate


# ../shared/research/surgvu.md:22-27, the official normalisation's edge cases [verified there
# against the official evaluator]: "-" and "/" deleted, not spaced; Unicode punctuation kept
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tip-up fenestrated grasper", ["tipup", "fenestrated", "grasper"]),  # surgvu.md:24
        ("permanent cautery hook/spatula", ["permanent", "cautery", "hookspatula"]),
        ("Needle-driver's tip.", ["needledrivers", "tip"]),
        ("No, it was not.", ["no", "it", "was", "not"]),
        ("“No”", ["“no”"]),  # U+201C/U+201D are not string.punctuation (surgvu.md:23)
        ("No—", ["no—"]),  # U+2014 neither
        ("...", []),
    ],
)
def test_official_normalisation_deletes_ascii_punctuation(text: str, expected: list[str]) -> None:
    assert official_tokens(text) == expected  # the golden list is the official code's
    assert tokens(text) == expected


def test_hyphenated_words_score_as_one_token_as_the_official_scorer() -> None:
    # exact-match ceilings with nltk's method1 smoothing (0.1 for each empty n-gram order):
    # 1 token 0.1 ** 0.75 = 0.1778, 2 tokens 0.1 ** 0.5 = 0.3162, 3 tokens 0.1 ** 0.25 = 0.5623
    # (surgvu.md:24-25; the 1-token value is the write-up's printed 0.1778279410038923)
    assert max_bleu(["tip-up"], "tipup")[0] == PRINTED_MAX  # one token each side, deleted
    assert max_bleu(["tip-up"], "tip up")[0] == 0.0  # "tip", "up" never match "tipup"
    assert max_bleu(["tip-up grasper"], "tipup grasper")[0] == pytest.approx(0.1**0.5, rel=1e-12)
    ref = "tip-up fenestrated grasper"
    assert max_bleu([ref], "Tip-up fenestrated grasper.")[0] == pytest.approx(0.1**0.25, rel=1e-12)
    # spaced, "tip up fenestrated grasper" would be a 4-token exact match scoring 1.0
    assert max_bleu([ref], "tip up fenestrated grasper")[0] < 0.2


@pytest.mark.parametrize(
    ("candidate", "golden"),
    [
        (" ".join(["no"] * 8), 0.0278),  # repeated tokens clipped (surgvu.md:25)
        ("No, a large needle driver was utilized.", 0.7014),  # max of singles (surgvu.md:26-27)
        ("No", PRINTED_MAX),
    ],
)
def test_research_edge_case_scores(candidate: str, golden: float) -> None:
    assert max_bleu(REFERENCES, candidate)[0] == pytest.approx(golden, abs=5e-5)  # 4 digits


@pytest.mark.parametrize("candidate", ["no", "No", "No.", "NO!", "  no  "])
def test_writeup_max_for_every_spelling_of_no(candidate: str) -> None:
    score, best = max_bleu(REFERENCES, candidate)
    assert score == PRINTED_MAX
    assert best == 0


def test_writeup_aggregate_json() -> None:
    # the write-up's example: three questions scoring 0, 0.1778..., 0.1778...
    rows = [(f"case{k}", {"bleu": s}) for k, s in enumerate((0.0, PRINTED_MAX, PRINTED_MAX))]
    out = metrics_json(rows, ["bleu"])
    assert out["aggregates"]["bleu_score"] == 0.11855196066926153 == PRINTED_MEAN
    assert json.loads(json.dumps(out)) == {
        "results": [
            {"case_id": "case0", "bleu_score": 0},
            {"case_id": "case1", "bleu_score": PRINTED_MAX},
            {"case_id": "case2", "bleu_score": PRINTED_MAX},
        ],
        "aggregates": {"bleu_score": PRINTED_MEAN},
    }
    # no aggregates without results, as the evaluator
    assert metrics_json([], ["bleu"]) == {"results": []}


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
