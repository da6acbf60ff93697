"""Runs case coroutines: a background asyncio loop, per-model concurrency limits, micro-batching.

Tests are synchronous; each evaluation's `evaluate(case, client)` is a coroutine. The `Engine`
owns one event loop in a daemon thread. Before the first test of a group runs, the fixtures
submit the coroutines of every selected case of that group; each test then blocks on its own
future. So API
backends see up to `concurrency` requests in flight, and local engines see whole batches.

`ModelClient.generate` is what evaluations await: cache lookup, then either a bounded call to the
backend (`Backend.generate`) or, for backends with `max_batch`, a `MicroBatcher` that gathers the
requests waiting at that moment into one `Backend.generate_batch` call.

Cases are admitted in a window (`ModelClient.admitted`, twice the requests the model takes at
once): a thousand submitted cases do not all build their requests (images decoded, encoded,
base64-ed in worker threads) before the first one is sent, which would hold the GIL away from the
loop and keep every image in memory at once. The window opens after the first case's first
cache lookup: when that request is not cached, the backend's `start` (an SDK's import, its
client) runs first, alone, instead of beside the other cases' image work. A first case that
works longer than `alone_s` before its first lookup (a search planning its first round) opens
the window then, so the other cases are not held behind it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import sqlite3
import threading
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from support.backends.base import Backend, BackendError
from support.backends.keys import redact
from support.batches import BatchPending, BatchQueue
from support.cache import ResponseCache, cache_key
from support.concurrency import AUTO, AdaptiveSemaphore, Aimd, AimdSettings
from support.spending import Spending, SpendingCapReached
from support.types import Request, Response, canonical_json

T = TypeVar("T")
log = logging.getLogger(__name__)


class CacheWriteWarning(UserWarning):
    """Warning category of an answer that could not be stored in the response cache."""


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

    def future(self, key: str) -> concurrent.futures.Future[Any]:
        """The future of an already submitted key (KeyError if none)."""
        with self._lock:
            return self._futures[key]

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


class MicroBatcher:
    """Gathers the requests waiting at one moment into one `generate_batch` call.

    One batch is in flight at a time (a local engine is one model); requests that arrive while it
    runs wait and go together in the next call, up to `max_batch`. `settle_ticks` loop iterations
    are yielded before a batch is cut so that coroutines released in the same tick can join it.
    """

    def __init__(
        self,
        run_batch: Callable[[list[Request]], Awaitable[list[Response]]],
        max_batch: int,
        settle_ticks: int = 3,
    ) -> None:
        self._run_batch = run_batch
        self.max_batch = max_batch
        self.settle_ticks = settle_ticks
        self._pending: list[tuple[Request, asyncio.Future[Response]]] = []
        self._worker: asyncio.Task[None] | None = None
        self.batch_sizes: list[int] = []  # one entry per generate_batch call

    async def submit(self, request: Request) -> Response:
        fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._pending.append((request, fut))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        while self._pending:
            for _ in range(self.settle_ticks):
                await asyncio.sleep(0)
            batch, self._pending = (
                self._pending[: self.max_batch],
                self._pending[self.max_batch :],
            )
            self.batch_sizes.append(len(batch))
            try:
                responses = await self._run_batch([r for r, _ in batch])
                if len(responses) != len(batch):
                    raise BackendError(
                        f"backend returned {len(responses)} responses for {len(batch)} requests"
                    )
            except BaseException as exc:  # every waiter learns of the failure
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            for (_, fut), resp in zip(batch, responses, strict=True):
                if not fut.done():
                    fut.set_result(resp)


class ModelClient:
    """What evaluations await: `await client.generate(request)`.

    Order: cache -> (batcher | semaphore) -> backend -> cache write. Errors propagate as
    `BackendError` and are never cached.

    `concurrency` is a fixed number of requests in flight, or "auto": an AIMD controller
    (support/concurrency.py) sets it from the 429s the backend reports (`rate_limit_listeners`,
    which API backends feed from their HTTP client's response hook) and the latency of answers.

    `spending` (--max-cost, support/spending.py): a request not cached is sent only within the
    caps; one that would pass a cap raises SpendingCapReached, and nothing is cached for it.

    `batches` (--batch, support/batches.py): a request not cached goes to the provider's batch
    API instead; every case is admitted at once (no window), so a batch round holds them all.
    """

    def __init__(
        self,
        backend: Backend,
        cache: ResponseCache | None,
        concurrency: int | str,
        max_batch: int | None = None,
        aimd: AimdSettings | None = None,
        spending: Spending | None = None,
        batches: BatchQueue | None = None,
    ) -> None:
        self.backend = backend
        self.spending = spending
        self.batches = batches
        if batches is not None and cache is not None:  # collected answers go to the cache
            batches.store = self._store
        self.name = backend.name
        self.cache = cache
        self.aimd: Aimd | None = None
        self.rate_limited = 0  # 429s the backend saw (its SDK's retries included)
        listeners = getattr(backend, "rate_limit_listeners", None)
        if listeners is not None:
            listeners.append(self._on_rate_limited)
        if concurrency == AUTO and listeners is None:  # no 429s to adapt to: a fixed limit
            default = backend.default_concurrency
            concurrency = default if isinstance(default, int) else AimdSettings().start
        if concurrency == AUTO:
            self.aimd = Aimd(aimd or AimdSettings())
            concurrency = self.aimd.settings.maximum  # the most it may reach (the window)
        self.concurrency = max(1, int(concurrency))
        self._sem: asyncio.Semaphore | AdaptiveSemaphore | None = None
        batch = max_batch if max_batch is not None else backend.max_batch
        self.batcher = MicroBatcher(backend.generate_batch, batch) if batch and batch > 1 else None
        # cases evaluating at once: twice what the backend takes at once, so the next requests
        # are built while these are in flight
        self.window = 2 * max(self.concurrency, batch or 1)
        if batches is not None:  # a batch round holds every case: all evaluate at once
            self.window = 2**30
        self._admit: asyncio.Semaphore | None = None
        # one case at a time until the first lookup (module docstring); not for batches, whose
        # cases wait in the queue, not at the backend
        self._window_open = batches is not None
        self.alone_s = 1.0  # seconds at most that the first case evaluates alone
        self.started_backend = False  # whether the backend's start ran (not in a cached run)
        self.sent = 0  # requests that reached the backend (errors included)
        self.cache_hits = 0
        self.cache_write_errors = 0  # answers kept in memory only: the cache refused them
        self.in_flight = 0  # requests at the backend now
        self.peak_in_flight = 0

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
        return {
            "model": self.name,
            "identity": json.loads(canonical_json(dict(self.backend.identity))),
            # the URL that answers an API model (no credentials); None for other backends
            "endpoint": getattr(self.backend, "endpoint_url", None),
            "sent": self.sent,
            "cache_hits": self.cache_hits,
            "cache_write_errors": self.cache_write_errors,
            "peak_in_flight": self.peak_in_flight,
            "concurrency": AUTO if self.aimd is not None else self.concurrency,
            "concurrency_reached": self.aimd.peak if self.aimd is not None else None,
            "concurrency_cuts": self.aimd.cuts if self.aimd is not None else None,
            "rate_limited": self.rate_limited,
            "batches": len(sizes),
            "mean_batch": round(sum(sizes) / len(sizes), 2) if sizes else None,
            "max_batch": max(sizes, default=None),
            "batch_api": batches,
        }

    @contextlib.asynccontextmanager
    async def admitted(self) -> AsyncIterator[None]:
        """Hold one of the window's places while a case evaluates (see the module docstring).
        A case waiting for an earlier round takes its place only after that round is done.
        The first case evaluates alone until its first cache lookup (or its end)."""
        if self._admit is None:
            self._admit = asyncio.Semaphore(self.window if self._window_open else 1)
            if not self._window_open:
                asyncio.get_running_loop().call_later(self.alone_s, self._open_window)
        async with self._admit:
            try:
                if self.batches is not None:
                    with self.batches.evaluating():
                        yield
                else:
                    yield
            finally:
                self._open_window()

    def _open_window(self) -> None:
        if self._window_open:
            return
        self._window_open = True
        if self._admit is not None:  # one place was given: the others now
            for _ in range(self.window - 1):
                self._admit.release()

    def key(self, request: Request) -> str:
        return cache_key(self.backend.identity, request, with_hints=self.backend.reads_hints)

    async def generate(self, request: Request) -> Response:
        key = self.key(request)
        hit = self.cache.get(key) if self.cache is not None else None
        if not self._window_open:  # the run's first lookup
            if hit is None and not self.started_backend:
                self.started_backend = True
                with contextlib.suppress(Exception):  # a failing start fails the call below
                    await self.backend.start()
            self._open_window()
        if hit is not None:
            self.cache_hits += 1
            return hit
        start = time.perf_counter()
        try:
            if self.batches is not None:  # answers collected into the cache by the queue
                async with self._spent(request) as answered:
                    response = answered(await self.batches.answer(key, request))
                self.sent += 1  # through a batch (this run's or an earlier one's)
                return response
            if self.batcher is not None:
                async with self._spent(request) as answered:
                    response = answered(await self._counted(self.batcher.submit(request)))
            else:
                response = await self._limited(request)
        except (BackendError, SpendingCapReached, BatchPending):
            raise
        except Exception as exc:  # a backend bug or an SDK error the backend did not wrap
            raise BackendError(redact(f"{type(exc).__name__}: {exc}")) from None
        if response.latency_s == 0.0:
            response = dataclasses.replace(response, latency_s=time.perf_counter() - start)
        if self.cache is not None:
            self._store(key, response)
        return response

    def _store(self, key: str, response: Response) -> None:
        """Write an answer to the cache; a failing write (disk full, I/O error) costs the cache
        entry only, never the answer. The first failure is logged and warned once, naming the
        cache file; later writes are still tried (a full disk may be freed, a lock released)."""
        assert self.cache is not None
        try:
            self.cache.put(key, response)
        except (sqlite3.Error, OSError) as exc:
            self.cache_write_errors += 1
            if self.cache_write_errors == 1:
                message = (
                    f"response cache {self.cache.path}: answer of {self.name} not stored "
                    f"({type(exc).__name__}: {redact(str(exc))}); the run keeps it, a rerun "
                    "asks again"
                )
                log.warning(message)
                warnings.warn(message, CacheWriteWarning, stacklevel=2)

    async def _limited(self, request: Request) -> Response:
        """The backend's call inside the concurrency limit; an answer feeds the controller."""
        if self._sem is None:
            self._sem = (
                AdaptiveSemaphore(self.aimd)
                if self.aimd is not None
                else asyncio.Semaphore(self.concurrency)
            )
        async with self._sem, self._spent(request) as answered:
            start = time.perf_counter()
            response = answered(await self._counted(self.backend.generate(request)))
            if self.aimd is not None:  # in flight at its return, itself included
                self.aimd.on_success(time.perf_counter() - start, self.in_flight + 1)
        return response

    @contextlib.asynccontextmanager
    async def _spent(self, request: Request) -> AsyncIterator[Callable[[Response], Response]]:
        """Within the spending caps (none: nothing to do): reserve the request's estimate before
        it is sent (or raise SpendingCapReached), settle it with the answer's usage, passed
        through the yielded function; a request that failed costs nothing."""
        if self.spending is None:
            yield lambda response: response
            return
        spending = self.spending
        estimate = await spending.reserve(request)
        answers: list[Response] = []
        billed = False  # submitted in a batch, not answered in this run

        def answered(response: Response) -> Response:
            answers.append(response)
            return response

        try:
            yield answered
        except BatchPending as exc:
            billed = exc.billed
            raise
        finally:
            spending.settle(estimate, answers[0].usage if answers else None, billed)

    def _on_rate_limited(self, retry_after_s: float | None, sent_at: float | None = None) -> None:
        """A 429 reached the backend's HTTP client (on the engine's loop); `sent_at`: when its
        attempt went out (time.monotonic(), the controller's clock)."""
        self.rate_limited += 1
        if self.aimd is not None:
            self.aimd.on_rate_limited(retry_after_s, sent_at)
            if isinstance(self._sem, AdaptiveSemaphore):
                self._sem.changed()

    async def _counted(self, call: Awaitable[Response]) -> Response:
        self.sent += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return await call
        finally:
            self.in_flight -= 1

    async def aclose(self) -> None:
        await self.backend.aclose()
