"""The model client's cache layer: a request's stored answer, else the next layer's, stored.

`AnswerCache` holds the paid-answer rule: an answer received is the run's whatever the cache
does; a write that fails (disk full, I/O error) costs the cache entry only, is logged and warned
once (naming the cache file), and later writes are still tried (a full disk may be freed, a lock
released). The batch queue stores the answers it collects through the same `AnswerCache`
(support/client/batch_queue.py, built with its `put`).
"""

from __future__ import annotations

import logging
import sqlite3
import warnings
from typing import TYPE_CHECKING, Protocol

from support.backends.base import BackendError
from support.client.batch_queue import BatchPending
from support.client.spending import SpendingCapReached
from support.secrets import redact
from support.types import Request, Response

if TYPE_CHECKING:
    from support.client.admission import Admission
    from support.client.sending import Sender

log = logging.getLogger(__name__)


class CacheWriteWarning(UserWarning):
    """Warning category of an answer that could not be stored in the response cache."""


class ResponseStore(Protocol):
    """What `AnswerCache` reads and writes: support.client.response_cache.ResponseCache, or a dry
    run's support.client.dry_run.ReadOnlyCache."""

    @property
    def path(self) -> object: ...

    def get(self, key: str) -> Response | None: ...

    def put(self, key: str, response: Response) -> None: ...


class AnswerCache:
    """One model's answers in `cache`: `get`, and `put` under the paid-answer rule (module
    docstring); `write_errors` counts the answers kept in memory only."""

    def __init__(self, cache: ResponseStore, model: str) -> None:
        self.cache = cache
        self.model = model
        self.write_errors = 0

    def get(self, key: str) -> Response | None:
        return self.cache.get(key)

    def put(self, key: str, response: Response) -> None:
        """Store an answer; a failing write is counted, and the first one logged and warned."""
        try:
            self.cache.put(key, response)
        except (sqlite3.Error, OSError) as exc:
            self.write_errors += 1
            if self.write_errors == 1:
                message = (
                    f"response cache {self.cache.path}: answer of {self.model} not stored "
                    f"({type(exc).__name__}: {redact(str(exc))}); the run keeps it, a rerun "
                    "asks again"
                )
                log.warning(message)
                warnings.warn(message, CacheWriteWarning, stacklevel=2)


class Caching:
    """The outermost layer: the answer `answers` holds for the key (counted in `hits`), else
    `inner`'s, stored when `stores` (False where the inner layer stores its answers itself: the
    batch queue). A failure is never stored and reaches the caller as a BackendError (a backend
    bug or an SDK error the backend did not wrap, redacted), SpendingCapReached or BatchPending.
    While `admission`'s window is closed, each lookup is told to it (it may start the backend)."""

    def __init__(
        self,
        inner: Sender,
        answers: AnswerCache | None,
        admission: Admission | None = None,
        stores: bool = True,
    ) -> None:
        self.inner = inner
        self.answers = answers
        self.admission = admission
        self.stores = stores
        self.hits = 0

    async def send(self, key: str, request: Request) -> Response:
        answers = self.answers
        hit = answers.get(key) if answers is not None else None
        admission = self.admission
        if admission is not None and not admission.is_open:  # the run's first lookup
            await admission.first_lookup(cached=hit is not None)
        if hit is not None:
            self.hits += 1
            return hit
        try:
            response = await self.inner.send(key, request)
        except (BackendError, SpendingCapReached, BatchPending):
            raise
        except Exception as exc:  # a backend bug or an SDK error the backend did not wrap
            raise BackendError(redact(f"{type(exc).__name__}: {exc}")) from None
        if self.stores and answers is not None:
            answers.put(key, response)
        return response
