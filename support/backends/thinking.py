"""A model's thinking setting, and thinking text kept apart from the answer.

`Thinking` is what `--reasoning-effort` and `--thinking-budget` select for one model variant
(`gpt-5.4+effort-high`, `claude-sonnet-4-5+budget-2048`): an effort level of the model's own
scale, or a budget of thinking tokens. A variant's name is its model's name, `+`, and the
setting's `label`, so pytest ids, `-k` and comparisons.csv see each setting as a model of its own.

`split_think` takes a local thinking model's `<think>...</think>` span off its answer (the
markers Qwen3 and its kin write; the chat template may open the span itself, so the answer can
start inside it); `span_open` tells whether a rendered prompt leaves one open. Which local
model thinks, and its room: support/backends/local_thinking.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VARIANT_SEP = "+"  # between a model's name and its setting's label: allowed in pytest's -k
EFFORT_PREFIX = "effort-"
BUDGET_PREFIX = "budget-"
_LEVEL_RE = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Thinking:
    """One thinking setting: an `effort` level or a `budget` of tokens (exactly one)."""

    effort: str | None = None
    budget: int | None = None  # tokens of thinking

    def __post_init__(self) -> None:
        if (self.effort is None) == (self.budget is None):
            raise ValueError("a thinking setting is an effort level or a budget, not both")
        if self.effort is not None and not _LEVEL_RE.fullmatch(self.effort):
            raise ValueError(f"effort level {self.effort!r}: expected lowercase letters")
        if self.budget is not None and (isinstance(self.budget, bool) or self.budget < 0):
            raise ValueError(f"thinking budget {self.budget!r}: expected a whole number >= 0")

    @property
    def label(self) -> str:
        """`effort-high`, `budget-2048`: the variant suffix, and the manifest's words."""
        if self.effort is not None:
            return EFFORT_PREFIX + self.effort
        return f"{BUDGET_PREFIX}{self.budget}"

    def to_json(self) -> dict[str, str | int]:
        return {"effort": self.effort} if self.effort is not None else {"budget": self.budget}


def parse_label(label: str) -> Thinking:
    """`effort-high` or `budget-2048` -> Thinking; ValueError for anything else."""
    if label.startswith(EFFORT_PREFIX):
        return Thinking(effort=label[len(EFFORT_PREFIX) :])
    if label.startswith(BUDGET_PREFIX) and label[len(BUDGET_PREFIX) :].isdigit():
        return Thinking(budget=int(label[len(BUDGET_PREFIX) :]))
    raise ValueError(f"{label!r} is not a thinking setting (effort-LEVEL or budget-TOKENS)")


def split_variant(name: str) -> tuple[str, Thinking | None]:
    """`gpt-5.4+effort-high` -> ("gpt-5.4", Thinking(effort="high")); a name without a setting
    -> (name, None). ValueError for a `+` suffix that is not a setting."""
    base, sep, label = name.rpartition(VARIANT_SEP)
    if not sep:
        return name, None
    if not base:
        raise ValueError(f"model {name!r}: nothing before {VARIANT_SEP!r}")
    return base, parse_label(label)


def variant_name(name: str, thinking: Thinking | None) -> str:
    """The `--model` name of `name` with `thinking` (the name itself for None)."""
    return name if thinking is None else f"{name}{VARIANT_SEP}{thinking.label}"


THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def split_think(text: str, open_: str = THINK_OPEN, close: str = THINK_CLOSE) -> tuple[str, str]:
    """(thinking, answer) of a local model's output, both stripped; never raises.

    The span ends at the last `close`. It starts at the first `open_` before it, or at the start
    of the text where there is none or a `close` comes first (a template that opened the span
    itself: the output starts inside it). An `open_` after the last `close` (or in a text with
    no `close`) opens a span the token limit cut: everything after it is thinking too. The
    answer is the rest (text before the span, then text after it, on lines of their own), so it
    never holds a marker. Without markers the text is the answer, unchanged."""
    if open_ not in text and close not in text:
        return "", text
    before, thoughts, tail = "", [], text
    end = text.rfind(close)
    if end >= 0:
        head, tail = text[:end], text[end + len(close) :]
        start, first_close = head.find(open_), head.find(close)
        if start >= 0 and (first_close < 0 or start < first_close):
            before, head = head[:start], head[start + len(open_) :]
        thoughts.append(head)
    cut = tail.find(open_)
    if cut >= 0:  # a span never closed
        tail, rest = tail[:cut], tail[cut + len(open_) :]
        thoughts.append(rest)
    return _joined(thoughts), _joined([before, tail])


def _joined(parts: list[str]) -> str:
    return "\n".join(p.strip() for p in parts if p.strip())


def span_open(prompt: str) -> bool:
    """Whether `prompt` ends inside a `<think>` span (the template opened it): the output then
    starts with thinking and holds only the closing marker."""
    return prompt.rfind(THINK_OPEN) > prompt.rfind(THINK_CLOSE)
