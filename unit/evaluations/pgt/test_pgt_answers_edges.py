"""Edges of pgt's answer reading and vote (support/evaluations/pgt/answers.py): the 2,000
characters read, non-text answers, and the vote's distribution and tie rule, by hand."""

from __future__ import annotations

import pytest

from support.evaluations.pgt.answers import (
    AI,
    REAL,
    UNPARSABLE,
    Vote,
    extract_prediction,
    majority_vote,
)


@pytest.mark.parametrize(
    ("text", "label"),
    [
        (" " * 1996 + "real", REAL),  # ends at character 2,000: read
        (" " * 1997 + "real", None),  # its last letter is character 2,001: cut to "rea"
        (" " * 1996 + "fake", AI),
        (None, None),
        (3, None),
        (["real"], None),
        ("Not fake.", REAL),  # a negation flips the label
        ("Real or AI-generated? Fake.", AI),  # the echoed question is skipped
    ],
)
def test_extract_prediction_edges(text: object, label: str | None) -> None:
    assert extract_prediction(text) == label


@pytest.mark.parametrize(
    ("predictions", "vote"),
    [
        ([], Vote(None, {})),
        ([None], Vote(None, {UNPARSABLE: 1})),
        ([None, "maybe"], Vote(None, {UNPARSABLE: 2})),  # a non-label is unparsable too
        ([AI, None, None], Vote(AI, {AI: 1, UNPARSABLE: 2})),  # no vote for None
        ([AI, REAL], Vote(REAL, {REAL: 1, AI: 1})),  # a tie goes to real
        ([AI, AI, REAL, None], Vote(AI, {REAL: 1, AI: 2, UNPARSABLE: 1})),
        ([REAL, REAL, AI, AI, AI], Vote(AI, {REAL: 2, AI: 3})),
        ([AI], Vote(AI, {AI: 1})),
    ],
)
def test_majority_vote_table(predictions: list, vote: Vote) -> None:
    got = majority_vote(predictions)
    assert got == vote
    assert list(got.distribution) == list(vote.distribution)  # real, ai-generated, unparsable
