"""Planted failures: a rule saying which tasks a reference model answers wrongly, and that answer.

A rule is a comma-separated list of `pattern=rate` parts, first match wins, e.g.
`where_distance=0.9,*=0.05`; a bare `pattern` means rate 1.0. Patterns are fnmatch patterns over the
category name (questions.CATEGORIES, e.g. `where_distance_closest`); a pattern without `*` matches
as a prefix (`where_distance` covers both where_distance_* categories). A category no part matches
is never failed. Whether a task fails is a deterministic draw from (seed, task key), so the same
task fails in every run and under every strategy of a search.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from fnmatch import fnmatchcase

from support.dynamic.questions import Task


def _uniform(*parts: object) -> float:
    """A uniform draw in [0, 1) from the sha256 of the parts (stable across processes)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


@dataclass(frozen=True)
class PlantedRule:
    """(category pattern, failure probability) pairs; the first matching pattern wins."""

    rates: tuple[tuple[str, float], ...]

    @classmethod
    def parse(cls, text: str) -> PlantedRule:
        """A rule from `pattern[=rate],...` (module docstring); ValueError naming the bad part."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"planted rule: empty rule {text!r}; e.g. 'where_distance=0.9,*=0.05'")
        rates: list[tuple[str, float]] = []
        for part in text.split(","):
            piece = part.strip()
            pattern, sep, rate_text = piece.partition("=")
            pattern = pattern.strip()
            if not pattern:
                raise ValueError(f"planted rule {text!r}: part {part!r} has no category pattern")
            if not sep:
                rates.append((pattern, 1.0))
                continue
            try:
                rate = float(rate_text)
            except ValueError:
                raise ValueError(
                    f"planted rule {text!r}: part {part!r}: rate {rate_text.strip()!r} is not a "
                    "number"
                ) from None
            if not (math.isfinite(rate) and 0.0 <= rate <= 1.0):
                raise ValueError(
                    f"planted rule {text!r}: part {part!r}: rate {rate} is not within [0, 1]"
                )
            rates.append((pattern, rate))
        return cls(tuple(rates))

    def rate(self, category: str) -> float:
        """The failure probability of a category: the first matching part's, else 0."""
        for pattern, rate in self.rates:
            full = pattern if "*" in pattern else pattern + "*"
            if fnmatchcase(category, full):
                return rate
        return 0.0

    def fails(self, category: str, key: str, seed: int = 0) -> bool:
        """Whether the task with this key fails: a draw from (seed, key) below the rate."""
        return _uniform("planted", seed, key) < self.rate(category)


def planted_answer(task: Task, rule: PlantedRule, seed: int = 0) -> str:
    """The correct option, or, when the rule fails the task, a wrong option picked from
    (seed, key). A task with no wrong option gets a text that is none of its options."""
    if not rule.fails(task.category, task.key, seed):
        return task.answer
    wrong = [option for option in task.options if option != task.answer]
    if not wrong:
        return "none of the options"
    return wrong[int(_uniform("wrong", seed, task.key) * len(wrong))]
