"""`--max-cost`: the spending cap's bookkeeping (a run's cap and each model's).

A `Ledger` is one cap: the cost recorded from the answers received in this run (at the list
price, support/backends/api_models.py; a cached answer costs nothing, it is never sent) and the
estimated cost of the requests sent and not yet answered (in flight). A request is sent only when
recorded + in flight + its own estimate stays within the cap, so what is in flight can never
carry the recorded cost past it; when only what is in flight stands in the way, the request waits
for those answers (whose real cost is usually below their estimate) and checks again. A request
whose estimate would pass the cap on the recorded cost alone is refused with `SpendingCapReached`,
and the ledger closes: every later request is refused with the same reason (the numbers at the
stop), so a run stops sending at the first refusal and its skips share one reason.

A request's estimate: its input tokens as `--dry-run` counts them (support/backends/tokens.py:
each provider's image rule, text by its tokenizer or the 4-chars estimate) and its output at its
bound (max_tokens per sample). The text estimate can undercount a real provider's count, so the
recorded cost can pass the cap by what the in-flight requests' estimates missed; against the
loopback server (whose usage is below the estimate) it never does.

Everything here runs on the engine's one event loop: no locks.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

from support.backends.api_models import (
    PLAIN_RULES,
    RequestRules,
    batch_cost_usd,
    cost_usd,
    output_bound,
)
from support.backends.thinking import Thinking
from support.backends.tokens import request_tokens
from support.types import Request, Usage


class SpendingCapReached(Exception):
    """A request not sent: it would pass a `--max-cost` cap (its case is skipped)."""


@dataclass(frozen=True)
class MaxCost:
    """The parsed `--max-cost` values: the run's cap and per-model caps, in USD."""

    run: float | None = None
    models: dict[str, float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.run is not None or bool(self.models)


def parse_max_cost(values: list[str], models: tuple[str, ...]) -> MaxCost:
    """`--max-cost USD` and `--max-cost USD@MODEL` values -> MaxCost; ValueError naming the value
    for anything else (not a positive finite number, a model the run does not evaluate, a cap
    given twice)."""
    run: float | None = None
    per_model: dict[str, float] = {}
    for value in values:
        amount, at, model = value.strip().partition("@")
        try:
            usd = float(amount.strip().removeprefix("$"))
        except ValueError:
            usd = math.nan
        if not (usd > 0 and math.isfinite(usd)) or (at and not model.strip()):
            raise ValueError(
                f"--max-cost {value!r}: expected USD or USD@MODEL, a positive amount in US "
                "dollars, e.g. 20 or 20@gpt-4o"
            )
        model = model.strip()
        if at and model not in models:
            raise ValueError(
                f"--max-cost {value!r}: {model} is not a --model of this run ({', '.join(models)})"
            )
        if (model in per_model) if at else (run is not None):
            raise ValueError(f"--max-cost {value!r}: a cap for {model or 'the run'} given twice")
        if at:
            per_model[model] = usd
        else:
            run = usd
    return MaxCost(run, per_model)


class Ledger:
    """One cap: recorded cost, in-flight estimate, and the reason it stopped (once closed)."""

    def __init__(self, cap_usd: float, label: str) -> None:
        self.cap_usd = cap_usd
        self.label = label  # how the reason names the cap: "--max-cost 2.00 USD for gpt-4o"
        self.recorded_usd = 0.0
        self.in_flight_usd = 0.0
        self.stopped: str | None = None  # the reason of every refusal once closed
        self.at_stop: tuple[float, float, float] | None = None  # recorded, in flight, refused
        self.waiters: list[asyncio.Future[None]] = []  # requests waiting for in-flight answers

    def refuse(self, estimate_usd: float) -> SpendingCapReached:
        """Close the ledger (first refusal) and return the exception of a refused request."""
        if self.stopped is None:
            self.at_stop = (self.recorded_usd, self.in_flight_usd, estimate_usd)
            self.stopped = (
                f"{self.label} reached: {self.recorded_usd:.4f} USD recorded + "
                f"{self.in_flight_usd:.4f} in flight + {estimate_usd:.4f} for the next request"
            )
        return SpendingCapReached(self.stopped)

    def stats(self) -> dict[str, object]:
        """Plain JSON of the cap (for a report or a measurement)."""
        recorded, in_flight, refused = self.at_stop or (None, None, None)
        return {
            "cap": self.label,
            "cap_usd": self.cap_usd,
            "recorded_usd": round(self.recorded_usd, 6),
            "stopped": self.stopped is not None,
            "recorded_at_stop_usd": recorded,
            "in_flight_at_stop_usd": in_flight,
            "refused_estimate_usd": refused,
        }


class Spending:
    """A model client's caps (its own and the run's, shared by every client of the process):
    `reserve` before a request is sent, `settle` with its answer's usage (a failed request costs
    nothing here). `batch`: the model's requests go through its batch API (--batch), priced at
    the batch price, and a request that does not fit beside those in flight is refused rather
    than held: a batch's requests are all in flight until it ends."""

    def __init__(
        self,
        provider: str,
        model_id: str,
        ledgers: list[Ledger],
        batch: bool = False,
        rules: RequestRules = PLAIN_RULES,
        thinking: Thinking | None = None,
    ) -> None:
        self.provider = provider
        self.model_id = model_id
        self.ledgers = ledgers
        self.batch = batch
        self.rules = rules  # the model's: its thinking room is part of a request's bound
        self.thinking = thinking

    def estimate_usd(self, request: Request) -> float:
        """The request's cost if its input is as counted and its output at its bound (the
        answer's limit plus a thinking model's room: api_models.output_bound)."""
        count = request_tokens(self.provider, request, self.model_id)
        bound = output_bound(request, self.rules, self.thinking)
        return self.cost_usd(Usage(count.total, bound))

    def cost_usd(self, usage: Usage) -> float:
        if self.batch:
            return batch_cost_usd(self.provider, self.model_id, usage) or 0.0
        return cost_usd(self.model_id, usage) or 0.0

    async def reserve(self, request: Request) -> float:
        """Count the request in flight on every ledger (its estimate, returned), waiting while
        only in-flight estimates stand in the way (never under `batch`); SpendingCapReached
        when it cannot fit."""
        estimate = self.estimate_usd(request)
        while True:
            for ledger in self.ledgers:
                fits = ledger.recorded_usd + estimate
                if self.batch:
                    fits += ledger.in_flight_usd
                if ledger.stopped is not None or fits > ledger.cap_usd:
                    raise ledger.refuse(estimate)
            if all(
                ledger.recorded_usd + ledger.in_flight_usd + estimate <= ledger.cap_usd
                for ledger in self.ledgers
            ):
                for ledger in self.ledgers:
                    ledger.in_flight_usd += estimate
                return estimate
            waiter = asyncio.get_running_loop().create_future()
            for ledger in self.ledgers:
                ledger.waiters.append(waiter)
            await waiter

    def settle(self, estimate: float, usage: Usage | None, billed: bool = False) -> None:
        """The request answered (`usage`) or failed (None): its estimate leaves the in-flight sum,
        its real cost joins the recorded one; `billed`: not answered in this run but submitted
        in a batch, so its estimate is recorded."""
        cost = self.cost_usd(usage) if usage is not None else estimate if billed else 0.0
        for ledger in self.ledgers:
            ledger.in_flight_usd = max(0.0, ledger.in_flight_usd - estimate)
            ledger.recorded_usd += cost
            waiters, ledger.waiters = ledger.waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
