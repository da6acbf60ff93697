"""A scripted model that any test can use: answers come from a function of the request."""

from __future__ import annotations

from collections.abc import Callable

from support.backends.base import Backend
from support.types import Request, Response


class ScriptedBackend(Backend):
    """Answers with `script(request)` (a string, or one string per sample); counts its calls.

    `max_batch` makes it a batching backend, so tests can count `generate_batch` calls.
    """

    def __init__(
        self,
        script: Callable[[Request], str | list[str]],
        name: str = "scripted",
        max_batch: int | None = None,
    ) -> None:
        self.name = name
        self.script = script
        self.max_batch = max_batch
        self.identity = {"provider": "scripted", "model": name}
        self.calls = 0
        self.batch_calls = 0

    def _answer(self, request: Request) -> Response:
        out = self.script(request)
        texts = (out,) * request.n if isinstance(out, str) else tuple(out)
        return Response(texts=texts, model=self.name)

    async def generate(self, request: Request) -> Response:
        self.calls += 1
        return self._answer(request)

    async def generate_batch(self, requests: list[Request]) -> list[Response]:
        self.batch_calls += 1
        return [self._answer(r) for r in requests]
