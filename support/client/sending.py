"""The `Sender` protocol of the model client's layers, the innermost layer (`BackendCall`) and
`Timed`.

`counting_sends()` counts, for one caller, the requests `BackendCall` sent on its behalf, answered
or not: a request that failed after it went out has no Response to count it, so the per-case log
(support.contract.runner.LoggedClient) counts it this way ("model calls: N sent" counts it). The
count lives in a context variable: each case runs in its own task, and every layer down to
`BackendCall` runs in the caller's task.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

from support.types import Request, Response


@dataclasses.dataclass(eq=False)  # compared by identity: each caller's count is its own
class SendCount:
    """Requests `BackendCall` sent for one caller (errors included)."""

    sent: int = 0


_SENDS: contextvars.ContextVar[SendCount | None] = contextvars.ContextVar(
    "vlmbench_sends", default=None
)


@contextlib.contextmanager
def counting_sends() -> Iterator[SendCount]:
    """A SendCount of the requests sent within the block (by this task)."""
    count = SendCount()
    token = _SENDS.set(count)
    try:
        yield count
    finally:
        _SENDS.reset(token)


class Sender(Protocol):
    """One layer of a model client: the answer to `request`, whose cache key is `key`."""

    def send(self, key: str, request: Request) -> Awaitable[Response]: ...


class BackendCall:
    """The innermost layer: `call(request)` (a backend's `generate`, or a micro-batcher's
    `submit`), counting the requests sent (errors included), those in flight now and their peak.
    `on_answer(latency_s, in_flight)` is told of each answer: its call's seconds and the requests
    in flight at its return, itself included (the AIMD controller's `on_success`)."""

    def __init__(
        self,
        call: Callable[[Request], Awaitable[Response]],
        on_answer: Callable[[float, int], None] | None = None,
    ) -> None:
        self.call = call
        self.on_answer = on_answer
        self.sent = 0
        self.in_flight = 0
        self.peak_in_flight = 0

    async def send(self, key: str, request: Request) -> Response:
        start = time.perf_counter()
        self.sent += 1
        caller = _SENDS.get()
        if caller is not None:
            caller.sent += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            response = await self.call(request)
        finally:
            self.in_flight -= 1
        if self.on_answer is not None:
            self.on_answer(time.perf_counter() - start, self.in_flight + 1)
        return response


class Timed:
    """An answer its backend did not time (`latency_s` 0) gets the seconds the request spent in
    this layer: its wait for a place under the limit and the caps included."""

    def __init__(self, inner: Sender) -> None:
        self.inner = inner

    async def send(self, key: str, request: Request) -> Response:
        start = time.perf_counter()
        response = await self.inner.send(key, request)
        if response.latency_s == 0.0:
            response = dataclasses.replace(response, latency_s=time.perf_counter() - start)
        return response
