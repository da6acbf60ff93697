"""The window of cases a model client lets evaluate at once (`ModelClient.admitted`).

A thousand submitted cases do not all build their requests (images decoded, encoded, base64-ed in
worker threads) before the first one is sent, which would hold the GIL away from the loop and keep
every image in memory at once: a case evaluates only while it holds one of `window` places (twice
the requests the model takes at once). A case waiting for an earlier round takes its place only
after that round is done.

The window opens after the first case's first cache lookup (`first_lookup`, told by the
`Caching` layer): when that request is not cached, the backend's `start` (an SDK's import, its
client) runs first, alone, instead of beside the other cases' image work; a fully cached run never
starts it. A first case that works longer than `alone_s` before its first lookup (a search planning
its first round) opens the window then, so the other cases are not held behind it; so does the
first case's end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager


class Admission:
    """`window` places for cases evaluating at once; the first case alone until its first lookup.

    `start`: the backend's start, awaited once at a first lookup that missed the cache (a failing
    start is ignored: the request after it fails). `is_open`: open from the first case on (the
    batch queue's cases wait in the queue, not at the backend). `evaluating`: a context each
    admitted case evaluates in (the batch queue's, which tracks the cases it waits on)."""

    def __init__(
        self,
        window: int,
        start: Callable[[], Awaitable[None]],
        is_open: bool = False,
        evaluating: Callable[[], AbstractContextManager[None]] | None = None,
    ) -> None:
        self.window = window
        self.start = start
        self.is_open = is_open
        self.evaluating = evaluating
        self.alone_s = 1.0  # seconds at most that the first case evaluates alone
        self.started_backend = False  # whether `start` ran (not in a cached run)
        self._places: asyncio.Semaphore | None = None

    @contextlib.asynccontextmanager
    async def admitted(self) -> AsyncIterator[None]:
        """Hold one of the window's places while a case evaluates."""
        if self._places is None:
            self._places = asyncio.Semaphore(self.window if self.is_open else 1)
            if not self.is_open:
                asyncio.get_running_loop().call_later(self.alone_s, self.open)
        async with self._places:
            try:
                if self.evaluating is not None:
                    with self.evaluating():
                        yield
                else:
                    yield
            finally:
                self.open()

    def open(self) -> None:
        """Let the window's other places be taken (once)."""
        if self.is_open:
            return
        self.is_open = True
        if self._places is not None:  # one place was given: the others now
            for _ in range(self.window - 1):
                self._places.release()

    async def first_lookup(self, cached: bool) -> None:
        """A lookup made while the window is closed (the run's first): start the backend when
        the answer was not `cached`, then open the window."""
        if not cached and not self.started_backend:
            self.started_backend = True
            with contextlib.suppress(Exception):  # a failing start fails the call after it
                await self.start()
        self.open()
