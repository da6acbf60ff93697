"""Planted failures: a rule saying which requests a reference model answers wrongly, and the
`planted:RULE` backend that answers like the oracle except there.

A rule is a comma-separated list of `pattern=rate` parts, first match wins, e.g.
`where_distance=0.9,*=0.05`; a bare `pattern` means rate 1.0. Patterns are fnmatch patterns over a
category name (an evaluation's own, e.g. the dynamic evaluation's `where_distance_closest`); a
pattern without `*` matches as a prefix (`where_distance` covers both where_distance_*
categories). A category no part matches is never failed. Whether a request fails is a
deterministic draw from (seed, key), so the same request fails in every run and every process.

The backend reads two hints of a Request: `target` (what the oracle answers) and `answer_space`.
Its category is `answer_space.category` when the space has one, else "" (so only patterns that
match "" such as `*` fail requests of evaluations that declare no category); its key is
`answer_space.key` when that is a non-empty str, else the request's digest with hints.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from fnmatch import fnmatchcase

import numpy as np

from support.backends.base import (
    HINT_MODALITIES,
    Backend,
    BackendError,
    BackendOptions,
    register_provider,
)
from support.backends.reference import REFERENCE_VERSION
from support.types import Request, Response, Usage

WRONG_DRAWS = 64  # answer_space.sample draws tried for a text other than the target


def stable_uniform(*parts: object) -> float:
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

    @property
    def text(self) -> str:
        """The canonical form, every rate written out: `where_distance=0.9,*=0.05`."""
        return ",".join(f"{pattern}={rate!r}" for pattern, rate in self.rates)

    def rate(self, category: str) -> float:
        """The failure probability of a category: the first matching part's, else 0."""
        for pattern, rate in self.rates:
            full = pattern if "*" in pattern else pattern + "*"
            if fnmatchcase(category, full):
                return rate
        return 0.0

    def fails(self, category: str, key: str, seed: int = 0) -> bool:
        """Whether the task with this key fails: a draw from (seed, key) below the rate."""
        return stable_uniform("planted", seed, key) < self.rate(category)


def _differs(text: str, target: str) -> bool:
    return text.strip().casefold() != target.strip().casefold()


@register_provider
class PlantedBackend(Backend):
    """`planted:RULE`: the oracle's answer, except on requests the rule fails, which get a wrong
    answer: `answer_space.wrong(rng)` if the space has one, else the first of up to WRONG_DRAWS
    `answer_space.sample(rng)` draws that differs from the target (stripped, case-insensitive),
    else "" (an empty answer, which parsers call unparsable)."""

    provider = "planted"
    reads_hints = True
    modalities = HINT_MODALITIES
    default_concurrency = 64

    @classmethod
    def check_model_id(cls, name: str, model_id: str) -> None:
        """A bad rule is a ValueError naming the model."""
        try:
            PlantedRule.parse(model_id)
        except ValueError as exc:
            raise ValueError(f"model {name!r}: {exc}") from None

    @classmethod
    def create(cls, name: str, model_id: str, opts: BackendOptions) -> Backend:
        return cls(name, model_id, seed=opts.seed)

    def __init__(self, name: str, rule: PlantedRule | str, seed: int = 0) -> None:
        self.name = name
        self.rule = rule if isinstance(rule, PlantedRule) else PlantedRule.parse(rule)
        self.seed = seed
        self.identity = {
            "provider": "reference",
            "model": "planted",
            "rule": self.rule.text,
            "seed": seed,
            "version": REFERENCE_VERSION,
        }

    def fails(self, request: Request) -> bool:
        """Whether the rule fails this request (category and key as in the module docstring)."""
        space = request.answer_space
        category = getattr(space, "category", None)
        key = getattr(space, "key", None)
        if not (isinstance(key, str) and key):
            key = request.digest(with_hints=True)
        return self.rule.fails(category if isinstance(category, str) else "", key, self.seed)

    def _wrong(self, request: Request, target: str, sample: int) -> str:
        space = request.answer_space
        if space is None:
            return ""
        # one stream per (seed, request content, sample): the same answer in every process
        entropy = [self.seed, int(request.digest(with_hints=True)[:16], 16), sample]
        rng = np.random.default_rng(entropy)
        wrong = getattr(space, "wrong", None)
        if callable(wrong):
            return wrong(rng)
        for _ in range(WRONG_DRAWS):
            text = space.sample(rng)
            if _differs(text, target):
                return text
        return ""

    async def generate(self, request: Request) -> Response:
        target = request.target
        if target is None:
            raise BackendError(f"{self.name}: the evaluation gave this request no target answer")
        if not self.fails(request):
            texts = (target,) * request.n
        else:
            texts = tuple(self._wrong(request, target, i) for i in range(request.n))
        return Response(texts=texts, model=self.name, usage=Usage())
