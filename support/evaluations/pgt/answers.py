"""Reading a label from a model's answer, and the majority vote over n answers.

Answers are untrusted text: `extract_prediction` never raises and returns None when the answer
names neither label (or both without saying which it chose). Votes: the most common label wins;
a tie goes to `real`, as the source; unparsable answers cast no vote.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from support.contract.provenance import ReadRule

REAL = "real"
AI = "ai-generated"
LABELS: tuple[str, ...] = (REAL, AI)
UNPARSABLE = "unparsable"  # its key in a vote distribution
CUT = "cut"  # the code of an answer cut by the token limit (unparsable, whatever it holds)

# how an answer was read (support.contract.provenance); an outcome of n answers takes its answers'
# most common code (`outcome_rule`)
READ_RULES = (
    ReadRule("label", "primary", "the first label word is a label itself: real, AI-generated"),
    ReadRule("synonym", "fallback", "the first label word is a synonym: fake, synthetic, AI, ..."),
    ReadRule("negation", "fallback", "the first label word is negated: not real -> ai-generated"),
    ReadRule("none", "unread", "no label word: unparsable"),
    ReadRule(CUT, "unread", "cut by the token limit: unparsable"),
    ReadRule("source-real", "primary", "--compat source: real without ai-generated"),
    ReadRule("source-ai-term", "primary", "--compat source: an AI term (fake, ...) without real"),
    ReadRule("source-both", "fallback", "--compat source: real and an AI term, so real"),
    ReadRule("source-none", "unread", "--compat source: neither: None"),
)
_RANK = {rule.code: i for i, rule in enumerate(READ_RULES)}

_AI_WORDS = (
    r"ai[\s_-]*generated|ai[\s_-]*created|ai|fake|synthetic|artificial|generated"
    r"|computer[\s_-]*generated"
)
_REAL_WORDS = r"real|authentic|genuine"
_NEGATION = r"(?:not|isn['’]?t|is\s+not|never|no)\s+(?:an?\s+)?(?:\w+\s+)?"
_MENTION = re.compile(
    rf"(?P<neg>\b{_NEGATION})?\b(?:(?P<ai>{_AI_WORDS})|(?P<real>{_REAL_WORDS}))\b",
    flags=re.IGNORECASE,
)
_LABEL_WORD = re.compile(r"real|ai[\s_-]*generated")  # the labels' own words (lower case)
# "real or AI-generated" (the question echoed): names both labels without choosing
_ECHO = re.compile(rf"\b(?:{_REAL_WORDS})\s*(?:or|/|vs\.?|versus)\s*(?:{_AI_WORDS})\b", re.I)


def extract_prediction(text: object) -> str | None:
    """`real`, `ai-generated`, or None: the first label the answer commits to.

    "AI-generated", "fake", "synthetic" mean ai-generated; "real", "authentic", "genuine" mean real;
    a negation right before flips it ("not real" -> ai-generated). An echo of the question
    ("real or AI-generated") is skipped.
    """
    return read_label(text)[0]


def read_label(text: object) -> tuple[str | None, str]:
    """`extract_prediction`'s label and the READ_RULES code of the rule that read it: "label"
    (the label's own word), "synonym" (another word of it: fake, authentic, AI, ...),
    "negation" (a word negated: "not real") or "none"."""
    if not isinstance(text, str):
        return None, "none"
    cleaned = _ECHO.sub(" ", text[:2000])  # the label sits at the start of an extraction answer
    for match in _MENTION.finditer(cleaned):
        label = AI if match.group("ai") else REAL
        if match.group("neg"):
            return (REAL if label == AI else AI), "negation"
        word = (match.group("ai") or match.group("real")).lower()
        return label, "label" if _LABEL_WORD.fullmatch(word) else "synonym"
    return None, "none"


def outcome_rule(codes: Sequence[str]) -> str:
    """The code of an outcome of n answers: its answers' most common code; a tie goes to the one
    declared later in READ_RULES (the more lenient rule). "" without answers."""
    counts = Counter(codes)
    if not counts:
        return ""
    return max(counts, key=lambda c: (counts[c], _RANK.get(c, len(_RANK))))


@dataclass(frozen=True)
class Vote:
    """The aggregated prediction of n answers (None when none was parsable) and the counts."""

    prediction: str | None
    distribution: dict[str, int]


def majority_vote(predictions: Sequence[str | None]) -> Vote:
    """Most common label among the parsable predictions; ties go to `real`.

    The distribution counts each label that received votes (and `unparsable` when any answer was).
    """
    counts = Counter(p if p in LABELS else UNPARSABLE for p in predictions)
    votes = {label: counts[label] for label in LABELS if counts[label]}
    distribution = dict(votes)
    if counts[UNPARSABLE]:
        distribution[UNPARSABLE] = counts[UNPARSABLE]
    if not votes:
        return Vote(None, distribution)
    top = max(votes.values())
    winners = [label for label in LABELS if votes.get(label) == top]  # REAL first: ties -> real
    return Vote(winners[0], distribution)


# ---- `--compat source`: the original's rules (Zero-shot-PGT helpers.py, commit f42b715) --------
NULL_KEY = "null"  # None's key in a vote distribution, as json.dump writes a None key
_AI_TERMS_SOURCE = ("ai-generated", "artificial", "fake", "generated")


def extract_prediction_source(text: object) -> str | None:
    """The source's `_find_label_in_text` (helpers.py:519-538): plain substring tests on the
    lowercased, stripped answer, in this order: `real` without `ai-generated` -> real; any of
    ai-generated / artificial / fake / generated without `real` -> ai-generated; `real` anywhere
    (both present) -> real; else None. Substrings, so "unrealistic" reads as real and "AI" or
    "synthetic" alone as None. Non-text answers are None (the source would raise)."""
    return read_label_source(text)[0]


def read_label_source(text: object) -> tuple[str | None, str]:
    """`extract_prediction_source`'s label and the code of the source's branch that gave it:
    "source-real", "source-ai-term", "source-both" (both words: real) or "source-none"."""
    if not isinstance(text, str):
        return None, "source-none"
    t = text.lower().strip()
    if REAL in t and AI not in t:
        return REAL, "source-real"
    if any(term in t for term in _AI_TERMS_SOURCE) and REAL not in t:
        return AI, "source-ai-term"
    if REAL in t:
        return REAL, "source-both"
    return None, "source-none"


def majority_vote_source(predictions: Sequence[str | None]) -> Vote:
    """The source's `_aggregate_predictions` (helpers.py:498-509): a Counter over the predictions
    with None as a candidate like any label; when the two most common have equal counts the vote
    is `real` (whatever the two are); otherwise the most common, which may be None. The
    distribution keeps first-appearance order, None under the key "null" (as json.dump writes
    it). No predictions at all: prediction None, empty distribution (the source writes '')."""
    counts = Counter(predictions)
    if not counts:
        return Vote(None, {})
    top = counts.most_common(2)
    prediction = REAL if len(top) == 2 and top[0][1] == top[1][1] else top[0][0]
    distribution = {NULL_KEY if k is None else str(k): v for k, v in counts.items()}
    return Vote(prediction, distribution)
