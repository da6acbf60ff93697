"""The model client's concurrency layer: how many requests it lets in flight at once."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from support.client.concurrency import AUTO, AdaptiveSemaphore, Aimd, AimdSettings
from support.types import Request, Response

if TYPE_CHECKING:
    from support.client.sending import Sender


def concurrency_of(
    concurrency: int | str, adaptive: bool, default: int | str, settings: AimdSettings | None
) -> tuple[int, Aimd | None]:
    """`--concurrency` for one backend: (the most requests in flight, the AIMD controller or
    None). "auto" is the controller (its maximum the most) where the backend reports its 429s
    (`adaptive`), else the backend's `default` when that is a number (else AIMD's start)."""
    if concurrency == AUTO and not adaptive:  # no 429s to adapt to: a fixed limit
        concurrency = default if isinstance(default, int) else AimdSettings().start
    aimd = None
    if concurrency == AUTO:
        aimd = Aimd(settings or AimdSettings())
        concurrency = aimd.settings.maximum  # the most it may reach (sizes the window)
    return max(1, int(concurrency)), aimd


class Limited:
    """At most `concurrency` requests in `inner` at once, or, with `aimd`, what the controller
    allows now (an AdaptiveSemaphore: its size and its pauses after a 429's retry-after). Call
    `changed()` after feeding the controller a 429."""

    def __init__(self, inner: Sender, concurrency: int, aimd: Aimd | None = None) -> None:
        self.inner = inner
        self.concurrency = concurrency
        self.aimd = aimd
        self._places: asyncio.Semaphore | AdaptiveSemaphore | None = None

    async def send(self, key: str, request: Request) -> Response:
        places = self._places
        if places is None:
            places = self._places = (
                AdaptiveSemaphore(self.aimd)
                if self.aimd is not None
                else asyncio.Semaphore(self.concurrency)
            )
        async with places:
            return await self.inner.send(key, request)

    def changed(self) -> None:
        """The controller changed: wake the waiters a grown limit admits, or pause them."""
        if isinstance(self._places, AdaptiveSemaphore):
            self._places.changed()
