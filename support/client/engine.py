"""Runs case coroutines on a background asyncio loop, and assembles each model's client.

Tests are synchronous; each evaluation's `evaluate(case, client)` is a coroutine. The `Engine`
owns one event loop in a daemon thread. Before the first test of a group runs, the fixtures
submit the coroutines of every selected case of that group; each test then blocks on its own
future. So API backends see up to `concurrency` requests in flight, and local engines see whole
batches.

`ModelClient.generate` is what evaluations await: one send path through the layers of
support/client (cache, spending caps, concurrency limit, micro-batching or the batch API; see
that package's docstring), which `ModelClient` assembles for its backend and run settings. Cases
evaluate in a window (`ModelClient.admitted`, support/client/admission.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import threading
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from support.backends.base import Backend, BackendError
from support.client.admission import Admission
from support.client.batch_queue import BatchQueue
from support.client.caching import AnswerCache, CacheWriteWarning, Caching, ResponseStore
from support.client.capping import Capped
from support.client.concurrency import AUTO, AimdSettings
from support.client.limiting import Limited, concurrency_of
from support.client.micro_batching import MicroBatcher
from support.client.queueing import Queued
from support.client.response_cache import cache_key
from support.client.sending import BackendCall, Sender, Timed
from support.client.spending import Spending
from support.types import Request, Response, canonical_json

__all__ = ["CacheWriteWarning", "Engine", "MicroBatcher", "ModelClient"]

T = TypeVar("T")


class Engine:
    """One asyncio loop in a background thread; futures for the synchronous test side."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._futures: dict[str, concurrent.futures.Future[Any]] = {}
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="vlmbench-engine", daemon=True
                )
                self._thread.start()
            return self._loop

    def submit(
        self, key: str, factory: Callable[[], Coroutine[Any, Any, T]]
    ) -> concurrent.futures.Future[T]:
        """Start `factory()` on the loop once per key; later calls return the same future."""
        with self._lock:
            fut = self._futures.get(key)
        if fut is not None:
            return fut
        fut = asyncio.run_coroutine_threadsafe(factory(), self.loop)
        with self._lock:
            return self._futures.setdefault(key, fut)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run one coroutine on the loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def forget(self, key: str) -> None:
        with self._lock:
            self._futures.pop(key, None)

    def close(self) -> None:
        """Cancel what is still pending and stop the loop thread."""
        with self._lock:
            loop, self._loop = self._loop, None
            futures, self._futures = list(self._futures.values()), {}
        for fut in futures:
            fut.cancel()
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=10)
            with contextlib.suppress(RuntimeError):
                loop.close()


class ModelClient:
    """What evaluations await: `await client.generate(request)`, through one model's layers
    (support/client), outermost first:

    - API and reference backends: Caching -> Timed -> Limited -> Capped -> BackendCall(generate)
    - local engines with `max_batch`: Caching -> Timed -> Capped -> BackendCall(MicroBatcher)
    - `batches` (--batch, support/client/batch_queue.py): Caching -> Capped -> Queued(BatchQueue);
    every
      case is admitted at once (no window), so a batch round holds them all

    Capped only with `spending` (--max-cost, support/client/spending.py): a request not cached is
    sent only within the caps; one that would pass a cap raises SpendingCapReached, and nothing is
    cached for it. Errors propagate as `BackendError` and are never cached.

    `cache`: a ResponseCache (or a dry run's ReadOnlyCache), or the AnswerCache whose `put` the
    batch queue was built with (its store), so the queue's writes and the client's share one
    count of failed writes and one warning.

    `max_tokens` (--max-tokens) caps each request's output tokens before its cache key is made,
    so a capped answer is cached apart from a whole one.

    `concurrency` is a fixed number of requests in flight, or "auto": an AIMD controller
    (support/client/concurrency.py) sets it from the 429s the backend reports
    (`rate_limit_listeners`, which API backends feed from their HTTP client's response hook) and the
    latency of answers.
    """

    def __init__(
        self,
        backend: Backend,
        cache: ResponseStore | AnswerCache | None,
        concurrency: int | str,
        max_batch: int | None = None,
        aimd: AimdSettings | None = None,
        spending: Spending | None = None,
        batches: BatchQueue | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.backend = backend
        self.max_tokens = max_tokens  # `--max-tokens`: a cap on every request's own limit
        self.name = backend.name
        self.spending = spending
        self.batches = batches
        if cache is None or isinstance(cache, AnswerCache):
            self.answers = cache
        else:
            self.answers = AnswerCache(cache, backend.name)
        self.cache = self.answers.cache if self.answers is not None else None
        if batches is not None and self.answers is not None and batches.store is None:
            raise ValueError("a BatchQueue beside a cache needs its store (AnswerCache.put)")
        self.rate_limited = 0  # 429s the backend saw (its SDK's retries included)
        # requests asked of this model holding each modality (cached ones included): what the
        # run's manifest records the model was given
        self.requests_with: dict[str, int] = {}
        listeners = getattr(backend, "rate_limit_listeners", None)
        if listeners is not None:
            listeners.append(self._on_rate_limited)
        self.concurrency, self.aimd = concurrency_of(
            concurrency, listeners is not None, backend.default_concurrency, aimd
        )
        batch = max_batch if max_batch is not None else backend.max_batch
        self.batcher = MicroBatcher(backend.generate_batch, batch) if batch and batch > 1 else None
        # cases evaluating at once: twice what the backend takes at once, so the next requests
        # are built while these are in flight; a batch round holds every case
        self.admission = Admission(
            2**30 if batches is not None else 2 * max(self.concurrency, batch or 1),
            backend.start,
            is_open=batches is not None,  # the queue's cases wait in it, not at the backend
            evaluating=batches.evaluating if batches is not None else None,
        )
        self._calls: BackendCall | None = None
        self._queued: Queued | None = None
        self._limited: Limited | None = None
        sender: Sender
        if batches is not None:  # the queue stores what it collects: no store, no timing here
            self._queued = Queued(batches)
            sender = self._capped(self._queued)
        elif self.batcher is not None:  # one batch at a time: no limit
            self._calls = BackendCall(self.batcher.submit)
            sender = Timed(self._capped(self._calls))
        else:
            on_answer = self.aimd.on_success if self.aimd is not None else None
            self._calls = BackendCall(backend.generate, on_answer)
            self._limited = Limited(self._capped(self._calls), self.concurrency, self.aimd)
            sender = Timed(self._limited)
        self._front = Caching(sender, self.answers, self.admission, stores=batches is None)

    def _capped(self, sender: Sender) -> Sender:
        return Capped(sender, self.spending) if self.spending is not None else sender

    # ---- what callers read ----------------------------------------------------------------
    @property
    def window(self) -> int:
        """Cases evaluating at once (support/client/admission.py)."""
        return self.admission.window

    @property
    def alone_s(self) -> float:
        """Seconds at most that the first case evaluates alone."""
        return self.admission.alone_s

    @alone_s.setter
    def alone_s(self, value: float) -> None:
        self.admission.alone_s = value

    @property
    def started_backend(self) -> bool:
        """Whether the backend's start ran (not in a cached run)."""
        return self.admission.started_backend

    @property
    def sent(self) -> int:
        """Requests that reached the backend (errors included), or answered through a batch."""
        layer = self._queued if self._queued is not None else self._calls
        return layer.sent if layer is not None else 0

    @property
    def cache_hits(self) -> int:
        return self._front.hits

    @cache_hits.setter
    def cache_hits(self, value: int) -> None:
        self._front.hits = value

    @property
    def cache_write_errors(self) -> int:
        """Answers kept in memory only: the cache refused them."""
        return self.answers.write_errors if self.answers is not None else 0

    def stats(self) -> dict[str, object]:
        """What this client did in this process: requests, cache hits, peak requests in flight
        and the local engine's batches (empty when it did nothing), with the backend's identity
        as the cache keys it and the URL that answers it (plain JSON, for the run's manifest;
        never a key)."""
        batches = self.batches.stats() if self.batches is not None else None
        if not (
            self.sent
            or self.cache_hits
            or (batches and (batches["submitted"] or batches["collected"]))
        ):
            return {}
        sizes = self.batcher.batch_sizes if self.batcher is not None else []
        aimd = self.aimd
        return {
            "model": self.name,
            "identity": json.loads(canonical_json(dict(self.backend.identity))),
            # the URL that answers an API model (no credentials); None for other backends
            "endpoint": getattr(self.backend, "endpoint_url", None),
            "sent": self.sent,
            "cache_hits": self.cache_hits,
            "cache_write_errors": self.cache_write_errors,
            "peak_in_flight": self._calls.peak_in_flight if self._calls is not None else 0,
            "concurrency": AUTO if aimd is not None else self.concurrency,
            "concurrency_reached": aimd.peak if aimd is not None else None,
            "concurrency_cuts": aimd.cuts if aimd is not None else None,
            "rate_limited": self.rate_limited,
            "batches": len(sizes),
            "mean_batch": round(sum(sizes) / len(sizes), 2) if sizes else None,
            "max_batch": max(sizes, default=None),
            "batch_api": batches,
            "requests_with": dict(sorted(self.requests_with.items())),
        }

    # ---- what evaluations and the runner call -----------------------------------------------
    def admitted(self) -> AbstractAsyncContextManager[None]:
        """Hold one of the window's places while a case evaluates (support/client/admission.py).
        A case waiting for an earlier round takes its place only after that round is done.
        The first case evaluates alone until its first cache lookup (or its end)."""
        return self.admission.admitted()

    def key(self, request: Request) -> str:
        """The request's response-cache key (support/client/response_cache.py)."""
        return cache_key(self.backend.identity, request, with_hints=self.backend.reads_hints)

    async def generate(self, request: Request) -> Response:
        """The answer to `request`: cached, else sent through the layers (class docstring).
        BackendError, for this request only, when it holds a modality the model does not read
        (a cloud to a VLM, an image to a point-cloud model)."""
        kinds = request.modalities
        for kind in kinds:
            self.requests_with[kind] = self.requests_with.get(kind, 0) + 1
        unread = kinds - self.backend.modalities
        if unread:
            raise BackendError(
                f"{self.name} reads {', '.join(sorted(self.backend.modalities))}; this request "
                f"holds {', '.join(sorted(unread))} (an evaluation sends a model only the parts "
                "its `modalities` name)"
            )
        if self.max_tokens is not None and request.max_tokens > self.max_tokens:
            request = dataclasses.replace(request, max_tokens=self.max_tokens)  # keyed as sent
        return await self._front.send(self.key(request), request)

    def _on_rate_limited(self, retry_after_s: float | None, sent_at: float | None = None) -> None:
        """A 429 reached the backend's HTTP client (on the engine's loop); `sent_at`: when its
        attempt went out (time.monotonic(), the controller's clock)."""
        self.rate_limited += 1
        if self.aimd is not None:
            self.aimd.on_rate_limited(retry_after_s, sent_at)
            if self._limited is not None:
                self._limited.changed()

    async def aclose(self) -> None:
        await self.backend.aclose()
