"""The `Sender` protocol of the model client's layers, the innermost layer (`BackendCall`) and
`Timed`."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from support.types import Request, Response


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
