"""Phrases, the five phrase modes, and how a phrase becomes a prompt (the source's mode routing).

A phrase is a short lead-in such as "Let's think step by step". A mode says where it goes:
after the opened assistant turn (prefill), as a system or user instruction to start with it
(prefill-pseudo-system, prefill-pseudo-user), or in its instruction form "Please X."
appended to the question (prompt) or as the system message (instruct). The `baseline`
phrase is empty and ignores the mode: one prompt, not five.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

QUESTION = "Is this image real or AI-generated?"
ANSWER_PHRASE = "Final Answer (real/ai-generated):"  # config.py:166
FINAL_ANSWER_CUE = "\n\n" + ANSWER_PHRASE  # stage 2 continues after it
FINAL_ANSWER_CUE_SOURCE = " " + ANSWER_PHRASE  # --compat source: helpers.py:432
BASELINE = "baseline"
# name -> phrase text: the source's 16 phrases, verbatim (Zero-shot-PGT config.py:142-159);
# `--pgt-phrase NAME=TEXT` adds more for a run
PHRASES: dict[str, str] = {
    BASELINE: "",
    "cot": "Let's think step by step",
    "artifacts": "Let's examine the synthesis artifacts",
    "style": "Let's examine the style",
    "o2": "Let's observe the style and the synthesis artifacts",
    "s2": "Let's examine the style and the synthesis artifacts",
    "s3": "Let's scrutinize the style and the synthesis artifacts",
    "s4": "Let's analyze the style and the synthesis artifacts",
    "s5": "Let's inspect the style and the synthesis artifacts",
    "s6": "Let's survey the style and the synthesis artifacts",
    "s7": "Let's examine the synthesis artifacts and the style",
    "details": "Let's examine the details",
    "flaws": "Let's examine the flaws",
    "pixel": "Let's examine pixel by pixel",
    "zoom": "Let's zoom in",
    "texture": "Let's examine the textures",
}
# what a run evaluates without --pgt-phrase: the three methods of the write-up's figures
DEFAULT_PHRASES: tuple[str, ...] = (BASELINE, "cot", "s2")
MODES: tuple[str, ...] = (
    "prefill",
    "prefill-pseudo-system",
    "prefill-pseudo-user",
    "prompt",
    "instruct",
)
PHRASE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def instruction_version(phrase: str) -> str:
    """ "Let's X" -> "Please X." (the prompt and instruct modes); "" stays ""; a phrase that does
    not start with "Let's" keeps its words, ending with a full stop."""
    text = phrase.strip()
    if not text:
        return ""
    match = re.match(r"^let['’]s\s+(.*)$", text, flags=re.IGNORECASE | re.DOTALL)
    if match:
        text = "Please " + match.group(1)
    return text.rstrip(" .!?") + "."


def instruction_version_source(phrase: str) -> str:
    """`--compat source`: every "Let's" (exact case, straight quote) becomes "Please", and a full
    stop is added unless the text ends with one (config.py `get_phrase_instruction_version`).
    The same as `instruction_version` for the 16 registered phrases."""
    if not phrase:
        return ""
    text = phrase.replace("Let's", "Please")
    return text if text.endswith(".") else text + "."


@dataclass(frozen=True)
class Prompt:
    """Where a phrase went: the system message (or None), the user text, the assistant prefill."""

    system: str | None
    user_text: str
    prefill: str | None


def build_prompt(
    phrase: str,
    mode: str,
    question: str = QUESTION,
    instruct: Callable[[str], str] = instruction_version,
) -> Prompt:
    """The source's `_build_single_prompt` routing for one phrase text and mode (`instruct`: how
    a phrase becomes an instruction, `instruction_version` or `instruction_version_source`)."""
    if mode not in MODES:
        raise ValueError(f"unknown phrase mode {mode!r}; known: {', '.join(MODES)}")
    start_with = f'Please start your response with "{phrase}"'
    if mode == "prompt":
        instruction = instruct(phrase)
        return Prompt(None, question + (" " + instruction if instruction else ""), None)
    if mode == "prefill-pseudo-user":
        return Prompt(None, question + (" " + start_with if phrase else ""), None)
    if mode == "instruct":
        return Prompt(instruct(phrase) or None, question, None)
    if mode == "prefill-pseudo-system":
        return Prompt(start_with if phrase else None, question, None)
    return Prompt(None, question, phrase or None)  # prefill: appended after the chat template


def parse_phrase_specs(specs: list[str]) -> dict[str, str]:
    """`--pgt-phrase` values -> {name: text} in the order given. A value is `NAME` (a known
    phrase), `NAME=TEXT` (a new or redefined phrase), or comma-separated known names."""
    out: dict[str, str] = {}
    for spec in specs:
        if "=" in spec:
            name, _, text = spec.partition("=")
            items = [(name.strip(), text.strip())]
        else:
            items = [(n.strip(), None) for n in spec.split(",") if n.strip()]
        for name, text in items:
            if not PHRASE_NAME_RE.match(name):
                raise ValueError(
                    f"--pgt-phrase {spec!r}: a phrase name is letters, digits, '_', '.' or '-'"
                )
            if text is None:
                if name not in PHRASES:
                    raise ValueError(
                        f"--pgt-phrase {name!r}: unknown phrase; known: {', '.join(PHRASES)}; "
                        "define a new one as NAME=TEXT"
                    )
                text = PHRASES[name]
            if name == BASELINE and text:
                raise ValueError("--pgt-phrase: `baseline` is the empty phrase")
            out[name] = text
    return out
