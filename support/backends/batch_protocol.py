"""The provider side of batch APIs (`--batch`): what a backend with one implements (`BatchApi`)
and the values it returns. The queue that sends through it is support/client/batch_queue.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from support.backends.base import BackendError
from support.backends.retry import backend_error
from support.types import Request, Response


class BatchNotCreated(BackendError):
    """The provider refused to create the batch (an HTTP 4xx answer, 408 aside): none exists."""


def creation_error(model: str, exc: BaseException) -> BackendError:
    """What an error of a batch's create call becomes: BatchNotCreated when the provider
    answered with a refusal (nothing to look up later), else a BackendError (a batch may exist:
    the intent stays, the next run looks for it)."""
    error = backend_error(model, exc)
    status = getattr(exc, "status_code", None) or getattr(exc, "code", None)
    if isinstance(status, int) and 400 <= status < 500 and status != 408:
        return BatchNotCreated(str(error))
    return error


@dataclass(frozen=True)
class BatchLimits:
    """The most one batch of a provider takes (its published limits)."""

    requests: int
    bytes: int  # of the requests' JSON, estimated (images as base64)


@dataclass(frozen=True)
class BatchState:
    """A batch's status read: `ended` is None while it runs, else "completed", "expired",
    "cancelled" or "failed" (the provider refused it as a whole); `done` of `total` items."""

    status: str  # the provider's own word
    ended: str | None
    done: int
    total: int


@dataclass(frozen=True)
class ListedBatch:
    """One batch of a provider's list: `nonce` is the intent nonce it carries (None: none, or
    not readable yet: `readable` False, Anthropic's running batches); `items` as the provider
    counts them (Anthropic: samples)."""

    batch_id: str
    created_at: float  # epoch seconds, the provider's clock
    nonce: str | None
    items: int
    readable: bool = True


class BatchApi(Protocol):
    """What a backend with a batch API implements (the three vendors' backends)."""

    name: str
    provider: str
    identity: Mapping[str, Any]
    batch_limits: BatchLimits

    async def start(self) -> None: ...

    async def submit_batch(self, items: Sequence[tuple[str, Request]], nonce: str) -> str:
        """Submit (cache key, request) pairs as one batch carrying `nonce`; its id. A refusal is
        BatchNotCreated (`creation_error`)."""
        ...

    def list_batches(self, since: float) -> AsyncIterator[ListedBatch]:
        """The provider's batches, newest first, down to those created at `since` (epoch s)."""
        ...

    async def batch_state(self, batch_id: str) -> BatchState: ...

    async def batch_results(
        self, batch_id: str, keys: Sequence[str], nonce: str | None = None
    ) -> dict[str, Response | str]:
        """Each answered key's Response (marked `batch`), or the item's error text; keys the
        batch left unanswered are absent. `nonce`: the batch's intent nonce (Anthropic reads
        only the items carrying it)."""
        ...


def has_batch_api(backend: object) -> bool:
    return callable(getattr(backend, "submit_batch", None))
