"""The model client's batch-API layer (`--batch`, support/client/batch_queue.py)."""

from __future__ import annotations

from support.client.batch_queue import BatchQueue
from support.types import Request, Response


class Queued:
    """A request the cache lacked is answered through `queue`: a batch collected now, a pending
    one, or the next round's (BatchPending when not in this run). The queue stores the answers it
    collects itself (every answer of a batch, asked in this run or not), through the store it was
    built with. `sent` counts the requests answered through a batch (this run's or an earlier
    one's)."""

    def __init__(self, queue: BatchQueue) -> None:
        self.queue = queue
        self.sent = 0

    async def send(self, key: str, request: Request) -> Response:
        response = await self.queue.answer(key, request)
        self.sent += 1
        return response
