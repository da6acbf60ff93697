"""The backend protocol every model provider implements, and its errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from support.types import Request, Response


class BackendError(RuntimeError):
    """A model call failed after the backend's own retries: the case becomes an `error` outcome."""


class BackendUnavailable(RuntimeError):
    """The backend cannot run here (missing key, package or accelerator): its cases are skipped."""


class Backend:
    """Base class of model backends.

    Subclasses set `name` (the `--model` name as the user wrote it) and `identity` (what makes two
    answers interchangeable: provider, model id, revision, backend version; it keys the cache), and
    implement `generate`. Backends that batch (local engines) set `max_batch` and implement
    `generate_batch`; the engine's micro-batcher then calls it with the requests waiting together.
    """

    name: str = ""
    identity: Mapping[str, Any] = {}
    # True only for reference models, which read Request.target / Request.answer_space
    reads_hints: bool = False
    max_batch: int | None = None
    default_concurrency: int = 8

    async def start(self) -> None:
        """Work before the run's first request that is better done alone, such as importing an
        SDK and making its client. The engine awaits it once, before it lets the other cases
        build their requests, and only when the first request is not cached. Nothing by
        default."""

    async def generate(self, request: Request) -> Response:
        raise NotImplementedError

    async def generate_batch(self, requests: list[Request]) -> list[Response]:
        return [await self.generate(r) for r in requests]

    async def aclose(self) -> None:
        """Release connections or engines; the default holds none."""
