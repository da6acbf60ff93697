"""The model client's spending layer (`--max-cost`, support/client/spending.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from support.client.batch_queue import BatchPending
from support.client.spending import Spending
from support.types import Request, Response, Usage

if TYPE_CHECKING:
    from support.client.sending import Sender


class Capped:
    """A request goes to `inner` only within the caps: its estimate is reserved first (or
    SpendingCapReached is raised: nothing sent), then settled with its answer's usage; a request
    that failed costs nothing, one submitted in a batch and not answered in this run
    (`BatchPending.billed`) its estimate."""

    def __init__(self, inner: Sender, spending: Spending) -> None:
        self.inner = inner
        self.spending = spending

    async def send(self, key: str, request: Request) -> Response:
        spending = self.spending
        estimate = await spending.reserve(request)
        usage: Usage | None = None
        billed = False
        try:
            response = await self.inner.send(key, request)
            usage = response.usage
            return response
        except BatchPending as exc:
            billed = exc.billed
            raise
        finally:
            spending.settle(estimate, usage, billed)
