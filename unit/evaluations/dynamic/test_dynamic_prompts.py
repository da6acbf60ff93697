"""The dynamic evaluation's prompt, answer parsers and answer space
(support/evaluations/dynamic/prompts.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.evaluations.dynamic.prompts import (
    OptionSpace,
    parse_choice,
    parse_choice_source,
    prompt_text,
    source_prompt_text,
)
from support.evaluations.dynamic.render import CAMERA_TEXT

OPTIONS = ["chair", "table", "to the left of", "left"]


def test_source_prompt_is_the_originals_text() -> None:
    # AnyPoint models/base_qa_model.py make_options (letter format: "(A) text") and
    # models/point_qa_model.py _default_prompt_func: question, blank line, options one per line,
    # blank line, the instruction
    expected = (
        "Which is red?\n\n(A) chair\n(B) table\n(C) to the left of\n(D) left\n\n"
        "Please answer with the letter of the correct option."
    )
    assert source_prompt_text("Which is red?", OPTIONS) == expected
    assert prompt_text("Which is red?", OPTIONS) == f"{CAMERA_TEXT}\n\n{expected}"


@pytest.mark.parametrize(
    ("answer", "picked"),
    [
        ("B", "table"),  # the original's exact forms: letter, (letter), option, "(A) option"
        ("(B)", "table"),
        ("table", "table"),
        ("(A) chair", "chair"),
        ("  C  ", "to the left of"),
        ("Answer: C", "to the left of"),  # write-up additions
        ("The answer is (A).", "chair"),
        ("**B**", "table"),
        ("B. table", "table"),
        ("D)", "left"),
        ("I think it is the chair.", "chair"),
        ("A chair is the closest.", "chair"),  # "A" opening a sentence is not a letter
        ("It is to the left of the lamp.", "to the left of"),  # longest option text wins
        ("The correct option is D", "left"),
        ("", None),
        ("chair or table", None),  # two options named: no guess
        ("(A) or (B)", None),
        ("Answer: E", None),  # no such option
        ("I cannot tell from this image.", None),
    ],
)
def test_parse_choice(answer: str, picked: str | None) -> None:
    assert parse_choice(answer, OPTIONS) == picked


# list answers (AnyPoint: the values sorted, joined by ", "), mixed sizes as the frequency
# generators' scene-first distractors give them, and count answers
LISTS = ["metal, wood", "wood", "glass, metal", "fabric, metal, wood"]
COUNTS = ["1", "2", "3", "4"]


@pytest.mark.parametrize(
    ("answer", "options", "picked"),
    [
        ("metal, wood", LISTS, "metal, wood"),
        ("(C) glass, metal", LISTS, "glass, metal"),
        ("B", LISTS, "wood"),
        ("The materials are metal, wood.", LISTS, "metal, wood"),  # not "wood" inside it
        ("Only wood.", LISTS, "wood"),
        ("fabric, metal, wood", LISTS, "fabric, metal, wood"),
        ("It is made of glass, metal", LISTS, "glass, metal"),
        ("metal and glass", LISTS, None),  # no option's text
        ("2", COUNTS, "2"),
        ("There are 3 colors.", COUNTS, "3"),
        ("(D) 4", COUNTS, "4"),
        ("Answer: A", COUNTS, "1"),
        ("2 or 3", COUNTS, None),
    ],
)
def test_parse_choice_list_and_count_options(answer: str, options: list, picked) -> None:
    assert parse_choice(answer, options) == picked
    if picked is not None and answer in (picked, f"({'ABCD'[options.index(picked)]}) {picked}"):
        assert parse_choice_source(answer, options, _letters_encoder) == picked


@given(st.text(max_size=200))
def test_parsers_never_raise_and_pick_an_option_or_none(answer: str) -> None:
    assert parse_choice(answer, OPTIONS) in [*OPTIONS, None]
    assert parse_choice_source(answer, OPTIONS, _letters_encoder) in OPTIONS


def _letters_encoder(texts: list[str]) -> np.ndarray:
    """Unit rows of letter counts: a stand-in embedder whose nearest option is predictable."""
    rows = np.zeros((len(texts), 27))
    for i, text in enumerate(texts):
        for ch in text.lower():
            rows[i, ord(ch) - ord("a") if "a" <= ch <= "z" else 26] += 1
    rows[:, 26] += 1e-3  # no zero rows
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_source_parser_follows_the_originals_order_then_the_nearest_option() -> None:
    # base_qa_model.py multiple_choice_qa: choice, "(A) choice", letter, "(letter)", then
    # choice_search (nearest option by embedding; point_qa_model.py enables it)
    assert parse_choice_source(" table ", OPTIONS, _letters_encoder) == "table"
    assert parse_choice_source("(D) left", OPTIONS, _letters_encoder) == "left"
    assert parse_choice_source("C", OPTIONS, _letters_encoder) == "to the left of"
    assert parse_choice_source("(A)", OPTIONS, _letters_encoder) == "chair"
    # no exact form: the nearest option, even where the write-up parser reads a letter
    assert parse_choice_source("tablee", OPTIONS, _letters_encoder) == "table"
    for answer in ("Answer: C", "the chair, I think", "B) table"):
        vectors = _letters_encoder([answer, *OPTIONS])
        nearest = OPTIONS[int(np.argmax(vectors[1:] @ vectors[0]))]
        assert parse_choice_source(answer, OPTIONS, _letters_encoder) == nearest
    assert parse_choice_source("anything", [], _letters_encoder) is None


def test_option_space_wrong_is_never_the_answer_and_sample_covers_all() -> None:
    space = OptionSpace(4, "C", "where_distance_closest", "k1")
    rng = np.random.default_rng(0)
    wrong = {space.wrong(rng) for _ in range(200)}
    assert wrong == {"A", "B", "D"}
    assert {space.sample(rng) for _ in range(200)} == {"A", "B", "C", "D"}
    assert OptionSpace(1, "A", "x", "k").wrong(rng) == ""
