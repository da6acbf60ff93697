"""The dynamic evaluation's prompt, its answer parsers and its answer space (for reference models).

Options are shown as AnyPoint shows them (models/base_qa_model.py `make_options`, letter format):
`(A) first`, `(B) second`, ... after the question, then "Please answer with the letter of the
correct option." (models/point_qa_model.py `_default_prompt_func`). The original's model sees a
point cloud; ours sees the rendered scene, so the write-up prompt first states the camera
(render.CAMERA_TEXT). `--compat source` sends the original's text unchanged after the image.

Parsing (answers are untrusted text; nothing here raises on them):
- both profiles first try the original's exact matches, in its order: the whole answer is an
  option's text, an `(A) text` line, a letter `A`, or `(A)`;
- writeup then reads a stated letter ("Answer: B", "**B**", "B. the chair", "(B)" alone in the
  text) or the one option whose text appears in the answer; else the answer is unparsable;
- source then takes the option nearest to the answer in embedding space (the original's
  `choice_search`, with all-mpnet-base-v2 there and the run's embedder here), so every answer
  becomes some option.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from support.evaluations.dynamic.render import CAMERA_TEXT

INSTRUCTION = "Please answer with the letter of the correct option."


def letters(n: int) -> list[str]:
    """["A", "B", ...] for n options."""
    return [chr(ord("A") + i) for i in range(n)]


def option_lines(options: Sequence[str]) -> list[str]:
    """["(A) first", "(B) second", ...]."""
    return [
        f"({letter}) {text}" for letter, text in zip(letters(len(options)), options, strict=True)
    ]


def source_prompt_text(question: str, options: Sequence[str]) -> str:
    """The original's text after the image: question, lettered options, instruction."""
    return f"{question}\n\n" + "\n".join(option_lines(options)) + f"\n\n{INSTRUCTION}"


def prompt_text(question: str, options: Sequence[str]) -> str:
    """The write-up's text after the image: the camera, then the original's text."""
    return f"{CAMERA_TEXT}\n\n{source_prompt_text(question, options)}"


def _exact(answer: str, options: Sequence[str]) -> int | None:
    """The original's exact matches (choice, "(A) choice", "A", "(A)"), in its order."""
    marks = letters(len(options))
    for forms in (list(options), option_lines(options), marks, [f"({m})" for m in marks]):
        if answer in forms:
            return forms.index(answer)
    return None


_STATED = (
    # "Answer: B", "the answer is (B)", "correct option is **B**"
    re.compile(r"(?i:\b(?:answer|option|choice))\s*(?:is|:)?\s*[:\-]?\s*[\(\[*]*([A-Z])\b"),
    # the answer opens with a letter: "B", "B.", "B)", "(B) chair", "**B**" (not "A chair")
    re.compile(r"^[\s*\(\[]*([A-Z])(?:[\)\].:]|\*\*|$)"),
)
_BRACKETED = re.compile(r"\(([A-Z])\)")


def _letter(answer: str, n: int) -> int | None:
    """The option letter an answer states, or None when it states none or several."""
    found = {m for pattern in (*_STATED, _BRACKETED) for m in pattern.findall(answer)}
    if len(found) != 1:
        return None
    index = ord(found.pop()) - ord("A")
    return index if index < n else None


def _named(answer: str, options: Sequence[str]) -> int | None:
    """The one option whose text appears in the answer (whole words, any case), else None."""
    low = answer.lower()
    hits = [
        i
        for i, text in enumerate(options)
        if text.strip() and re.search(rf"(?<!\w){re.escape(text.strip().lower())}(?!\w)", low)
    ]
    if len(hits) == 1:
        return hits[0]
    # "to the left of" also contains "left": keep only hits not inside another hit's text
    longest = [i for i in hits if not any(options[i] in options[j] for j in hits if j != i)]
    return longest[0] if len(longest) == 1 else None


def parse_choice(answer: str, options: Sequence[str]) -> str | None:
    """The option an answer picks (writeup rules, module docstring), or None."""
    return read_choice(answer, options)[0]


def read_choice(answer: str, options: Sequence[str]) -> tuple[str | None, str]:
    """`parse_choice`'s option and the READ_RULES code of the rule that picked it."""
    if not isinstance(answer, str) or not options:
        return None, "none"
    text = answer.strip()
    rules = (
        ("exact", _exact),
        ("letter", lambda a, o: _letter(a, len(o))),
        ("named", _named),
    )
    for code, rule in rules:
        index = rule(text, options)
        if index is not None:
            return options[index], code
    return None, "none"


def parse_choice_source(
    answer: str, options: Sequence[str], encode: Callable[[list[str]], np.ndarray]
) -> str | None:
    """The option the original picks: its exact matches, else the nearest option by the
    embedder `encode` (unit rows; the first of equally near options). None only without options."""
    return read_choice_source(answer, options, encode)[0]


def read_choice_source(
    answer: str, options: Sequence[str], encode: Callable[[list[str]], np.ndarray]
) -> tuple[str | None, str]:
    """`parse_choice_source`'s option and the code of the original's branch that picked it."""
    if not options:
        return None, "source-none"
    text = answer.strip() if isinstance(answer, str) else ""
    index = _exact(text, options)
    if index is not None:
        return options[index], "source-exact"
    vectors = encode([text, *options])
    return options[int(np.argmax(vectors[1:] @ vectors[0]))], "source-nearest"


@dataclass(frozen=True)
class OptionSpace:
    """What reference models may answer: a letter. `category` and `key` let `planted:RULE` decide
    which tasks fail; `wrong` gives a letter that is not the answer."""

    n_options: int
    answer_letter: str
    category: str
    key: str

    def sample(self, rng: np.random.Generator) -> str:
        return letters(self.n_options)[int(rng.integers(self.n_options))]

    def wrong(self, rng: np.random.Generator) -> str:
        others = [m for m in letters(self.n_options) if m != self.answer_letter]
        return others[int(rng.integers(len(others)))] if others else ""
