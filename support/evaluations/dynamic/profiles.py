"""What differs between dynamic's two profiles, as values and functions: `WRITEUP` and `SOURCE`.

`configure` picks one (`DynamicSettings.profile`) from `--compat`; the task calls its fields instead
of branching on the profile. The functions themselves live beside each other in prompts.py; this
module only picks. It is imported at start-up (configure), so it imports nothing heavy: prompts.py
(the renderer's PIL, numpy) is imported when a rule is called.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from support.contract.provenance import ReadRule
from support.settings import Compat

# how an answer was read (support.contract.provenance): the code `DynamicProfile.read` gives with
# its option
READ_RULES = (
    ReadRule("exact", "primary", "the answer is an option, (A) option, A or (A) exactly"),
    ReadRule("letter", "fallback", "the one option letter the answer states (Answer: B)"),
    ReadRule("named", "fallback", "the one option whose text the answer names"),
    ReadRule("none", "unread", "no option: unparsable"),
    ReadRule("source-exact", "primary", "--compat source: an exact match, as the writeup's"),
    ReadRule("source-nearest", "fallback", "--compat source: the option nearest by embedding"),
    ReadRule("source-none", "unread", "--compat source: no options"),
)

Encode = Callable[[list[str]], np.ndarray]  # the run's embedder: texts -> unit rows


@dataclass(frozen=True)
class DynamicProfile:
    """One profile's rules (see `WRITEUP` and `SOURCE` for each value)."""

    compat: Compat  # the profile's name, as --compat spells it
    search: str  # SearchConfig.rules: how the search plans its rounds (search.py)
    prompt: Callable[[str, Sequence[str]], str]  # (question, options) -> the text after the image
    # (answer, options, the embedder's encode) -> (the option picked, None: unparsable; the
    # READ_RULES code of the rule that picked it)
    read: Callable[[str, Sequence[str], Encode], tuple[str | None, str]]


def _prompt(question: str, options: Sequence[str]) -> str:
    """prompts.prompt_text."""
    from support.evaluations.dynamic.prompts import prompt_text

    return prompt_text(question, options)


def _source_prompt(question: str, options: Sequence[str]) -> str:
    """prompts.source_prompt_text."""
    from support.evaluations.dynamic.prompts import source_prompt_text

    return source_prompt_text(question, options)


def _read(answer: str, options: Sequence[str], encode: Encode) -> tuple[str | None, str]:
    """prompts.read_choice (no embedder)."""
    from support.evaluations.dynamic.prompts import read_choice

    return read_choice(answer, options)


def _read_source(answer: str, options: Sequence[str], encode: Encode) -> tuple[str | None, str]:
    """prompts.read_choice_source."""
    from support.evaluations.dynamic.prompts import read_choice_source

    return read_choice_source(answer, options, encode)


WRITEUP = DynamicProfile(
    compat="writeup",
    search="writeup",  # a task already evaluated is never drawn again
    prompt=_prompt,  # the camera stated first (render.CAMERA_TEXT): ours sees a rendered scene
    read=_read,  # exact matches, a stated letter or the one option named; else unparsable
)

# AnyPoint's evaluator at 2650ead (models/point_qa_model.py, models/base_qa_model.py)
SOURCE = DynamicProfile(
    compat="source",
    search="source",  # its planning (search.py, `rules="source"`)
    prompt=_source_prompt,  # its text unchanged: question, `(A) option` lines, instruction
    read=_read_source,  # exact matches, else the nearest option by embedding (choice_search)
)

PROFILES: dict[Compat, DynamicProfile] = {"writeup": WRITEUP, "source": SOURCE}
