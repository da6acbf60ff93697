"""PGT phrases and modes, label extraction (property-tested: never raises) and majority voting."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.evaluations.pgt.answers import (
    AI,
    LABELS,
    REAL,
    UNPARSABLE,
    extract_prediction,
    majority_vote,
)
from support.evaluations.pgt.phrases import (
    MODES,
    PHRASES,
    QUESTION,
    Prompt,
    build_prompt,
    instruction_version,
    parse_phrase_specs,
)

COT = PHRASES["cot"]


# ---- phrases and modes ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("Let's think step by step", "Please think step by step."),
        ("Let's examine the style and the synthesis artifacts",
         "Please examine the style and the synthesis artifacts."),
        ("let’s look closely.", "Please look closely."),
        ("Look at the lighting", "Look at the lighting."),
        ("", ""),
    ],
)  # fmt: skip
def test_instruction_version(phrase, expected):
    assert instruction_version(phrase) == expected


def test_mode_routing_follows_the_source():
    start = 'Please start your response with "Let\'s think step by step"'
    assert build_prompt(COT, "prefill") == Prompt(None, QUESTION, COT)
    assert build_prompt(COT, "prefill-pseudo-system") == Prompt(start, QUESTION, None)
    assert build_prompt(COT, "prefill-pseudo-user") == Prompt(None, f"{QUESTION} {start}", None)
    assert build_prompt(COT, "prompt") == Prompt(
        None, f"{QUESTION} Please think step by step.", None
    )
    assert build_prompt(COT, "instruct") == Prompt("Please think step by step.", QUESTION, None)


@pytest.mark.parametrize("mode", MODES)
def test_the_empty_phrase_adds_nothing_in_any_mode(mode):
    assert build_prompt("", mode) == Prompt(None, QUESTION, None)


def test_unknown_mode_is_an_error():
    with pytest.raises(ValueError, match="unknown phrase mode 'prefil'"):
        build_prompt(COT, "prefil")


def test_phrase_specs_select_and_add_phrases():
    got = parse_phrase_specs(["baseline,cot", "o2=Let's look at the lighting, then decide"])
    assert got == {
        "baseline": "",
        "cot": COT,
        "o2": "Let's look at the lighting, then decide",
    }
    with pytest.raises(ValueError, match="unknown phrase"):
        parse_phrase_specs(["nope"])
    with pytest.raises(ValueError, match="empty phrase"):
        parse_phrase_specs(["baseline=something"])
    with pytest.raises(ValueError, match="phrase name"):
        parse_phrase_specs(["a b=text"])


# ---- extraction ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "label"),
    [
        (" ai-generated", AI),
        ("AI-Generated.", AI),
        (" real", REAL),
        ("Real", REAL),
        ("**Real**", REAL),
        ("The image is fake.", AI),
        ("synthetic", AI),
        ("AI generated image", AI),
        ("It is not real.", AI),
        ("Not real.", AI),  # a bare "not" negates (answers.py _NEGATION)
        ("not AI-generated", REAL),
        ("This image isn't AI-generated; it is a photo.", REAL),
        ("Is this image real or AI-generated? It is real", REAL),
        ("real or ai-generated: ai-generated", AI),
        ("I cannot tell.", None),
        ("", None),
    ],
)
def test_extract_prediction(text, label):
    assert extract_prediction(text) == label


# every negation form of answers.py's _NEGATION (not, isn't / isn’t / isnt, is not, never, no),
# then optionally "a"/"an" and one word, flips the label that follows
@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("this image is not real", AI),
        ("Not real: the lighting is inconsistent.", AI),
        ("The image does not look real.", AI),  # "not" + one word + label
        ("It's probably not a real photograph.", AI),  # "not" + "a" + label
        ("Not AI-generated; a real photo.", REAL),
        ("I would say not fake.", REAL),
        ("It isn't real.", AI),
        ("It isn’t real.", AI),
        ("it isnt fake", REAL),
        ("This is not an AI-generated image.", REAL),
        ("This could never be real.", AI),
        ("No AI was involved here.", REAL),
        ("It is no real photograph.", AI),
    ],
)
def test_every_negation_form_flips_the_label(text: str, label: str) -> None:
    assert extract_prediction(text) == label


@given(st.text(max_size=300))
def test_extraction_never_raises(text):
    assert extract_prediction(text) in (*LABELS, None)


@given(st.sampled_from(LABELS), st.sampled_from(["", " ", "\n", "Final answer: "]),
       st.sampled_from(["", ".", "!", " (confident)"]), st.booleans())  # fmt: skip
def test_a_stated_label_is_read_back(label, before, after, upper):
    text = before + (label.upper() if upper else label) + after
    assert extract_prediction(text) == label


def test_extraction_reads_non_strings_as_unparsable():
    assert extract_prediction(None) is None
    assert extract_prediction(3) is None


# ---- majority vote -------------------------------------------------------------------------------
def test_ties_go_to_real():
    assert majority_vote([AI, REAL]).prediction == REAL
    assert majority_vote([AI, REAL, AI, REAL, None]).prediction == REAL
    assert majority_vote([AI, AI, REAL]).prediction == AI


def test_vote_distribution_counts_labels_and_unparsable():
    vote = majority_vote([AI, None, AI, REAL, None])
    assert vote.prediction == AI
    assert vote.distribution == {REAL: 1, AI: 2, UNPARSABLE: 2}
    assert majority_vote([None, None]).prediction is None


@given(st.lists(st.sampled_from([REAL, AI, None]), min_size=1, max_size=25))
def test_the_winner_has_the_most_votes_and_order_does_not_matter(predictions):
    vote = majority_vote(predictions)
    counts = {label: predictions.count(label) for label in LABELS}
    if not any(counts.values()):
        assert vote.prediction is None
        return
    assert counts[vote.prediction] == max(counts.values())
    if counts[REAL] == counts[AI]:
        assert vote.prediction == REAL
    assert majority_vote(list(reversed(predictions))) == vote
    assert sum(vote.distribution.values()) == len(predictions)
