"""Micro-batching for local engines with `max_batch` (transformers): the model client's
`BackendCall` submits each request here instead of calling `Backend.generate`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from support.backends.base import BackendError
from support.types import Request, Response


class MicroBatcher:
    """Gathers the requests waiting at one moment into one `generate_batch` call.

    One batch is in flight at a time (a local engine is one model); requests that arrive while it
    runs wait and go together in the next call, up to `max_batch`. A BackendError in the place
    of a Response fails that request alone; an exception of the call fails the whole batch.
    `settle_ticks` loop iterations are yielded before a batch is cut so that coroutines released
    in the same tick can join it.
    """

    def __init__(
        self,
        run_batch: Callable[[list[Request]], Awaitable[list[Response | BackendError]]],
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
                if fut.done():
                    continue
                if isinstance(resp, BackendError):  # that request failed alone
                    fut.set_exception(resp)
                else:
                    fut.set_result(resp)
