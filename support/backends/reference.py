"""Offline reference models: `oracle` (answers from ground truth) and `chance` (seeded random).

Neither needs a key, network or GPU. `oracle` checks the whole pipeline: every metric must read 1.0.
`chance` gives the chance level an evaluation's metrics should be compared against. Both read the
hints that evaluations put on a Request (`target`, `answer_space`), which real backends never see.
"""

from __future__ import annotations

import numpy as np

from support.backends.base import HINT_MODALITIES, Backend, BackendError
from support.types import Request, Response, Usage

REFERENCE_VERSION = "1"


class OracleBackend(Backend):
    """Answers each request with its `target`: the answer a perfect model would give."""

    reads_hints = True
    default_concurrency = 64
    modalities = HINT_MODALITIES

    def __init__(self, name: str = "oracle") -> None:
        self.name = name
        self.identity = {"provider": "reference", "model": "oracle", "version": REFERENCE_VERSION}

    async def generate(self, request: Request) -> Response:
        if request.target is None:
            raise BackendError("oracle: the evaluation gave this request no target answer")
        return Response(texts=(request.target,) * request.n, model=self.name, usage=Usage())


class ChanceBackend(Backend):
    """Draws answers from the request's `answer_space`, seeded by (seed, request digest, sample)."""

    reads_hints = True
    default_concurrency = 64
    modalities = HINT_MODALITIES

    def __init__(self, name: str = "chance", seed: int = 0) -> None:
        self.name = name
        self.seed = seed
        self.identity = {
            "provider": "reference",
            "model": "chance",
            "seed": seed,
            "version": REFERENCE_VERSION,
        }

    async def generate(self, request: Request) -> Response:
        if request.answer_space is None:
            raise BackendError("chance: the evaluation gave this request no answer space")
        # one stream per request content and seed: the same request draws the same answers anywhere
        entropy = [self.seed, int(request.digest(with_hints=True)[:16], 16)]
        rng = np.random.default_rng(entropy)
        texts = tuple(request.answer_space.sample(rng) for _ in range(request.n))
        return Response(texts=texts, model=self.name, usage=Usage())
