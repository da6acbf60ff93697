"""`--dry-run`: what a run would send, and what it would cost, without sending anything.

Each model's backend is wrapped in a `DryRunBackend`, which answers every request with a
placeholder and never calls the real backend (nor starts it: no SDK client, no connection). Its
cache is wrapped in a `ReadOnlyCache`: reads still hit, so an answer the cache holds is not counted
as one to send, and nothing is ever written. A request made twice within the dry run is counted
twice: the engine sends a request again when the cache does not hold it yet (dynamic's quick
run sends 40 requests, 30 distinct), and a dry run's placeholder answers come back at once, so
counting only the first would undercount (30 counted that way).

The placeholder's usage carries the estimate, so it reaches the controller on the outcomes, as
real usage does (across xdist workers too): input tokens by support.backends.tokens, output tokens
at their bound, the limit a request is sent with per sample: its `max_tokens` plus, for a
thinking model, the room its thinking is given (support.backends.api_models.output_bound: the
budget chosen, else the model's documented or assumed room at its effort; dry_run.csv's
`thinking_room` column). A cached answer counts no tokens in a dry run.

Multi-stage cases (pgt's stage 2, dynamic's later rounds) cannot know their later requests
without the answers: they are counted from what the placeholder answers lead to. The count is
exact where the number of stages does not depend on the answers (pgt's stage 2 always follows
stage 1); the tokens of a later stage's prompt that quotes an answer are not.

`--pilot N` (API models): the first N requests a process sends a model go for real, through
the wrapped backend. Each pilot answer goes to the real response cache under the real run's key
(so the run does not pay for it again), its outcome keeps the estimate's usage (the table's
counts stay the bound's), and one line a call (`PilotCall`: the output bound, the output tokens
written, the cost) goes to the run's pilot file, which every process appends to. The pilot stops
at the first request the --max-cost caps refuse: the real run's ledgers (support/client/
spending.py; the run's cap shared by every model), each request reserved at its bound's cost and
settled at its answer's. The
controller reads the file (`read_pilots`) and expects each model's output to be its bound times
the pilot's mean share of the bound (output tokens / bound, a ratio estimator), with a 95%
t-interval from the pilot's spread (`expectation`); a thinking model's share is what its
thinking spends of the room, so two effort levels of one model expect different costs.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from support.backends.api_models import (
    PLAIN_RULES,
    RequestRules,
    batch_cost_usd,
    cost_usd,
    output_bound,
)
from support.backends.base import Backend
from support.backends.registry import model_spec
from support.backends.thinking import Thinking
from support.backends.tokens import request_tokens, text_method
from support.client.response_cache import ResponseCache, cache_key
from support.client.spending import Spending, SpendingCapReached
from support.types import Outcome, Request, Response, Usage

PLACEHOLDER = "(dry run: no answer)"  # the text of every answer in a dry run
NOTE = (
    "dry run: nothing sent; later stages of multi-stage cases (pgt stage 2, dynamic rounds) are "
    "counted from placeholder answers; output tokens at their bound (max_tokens, plus a thinking "
    "model's room for thinking: thinking_room, tokens a request)"
)


class DryRunBackend(Backend):
    """Answers every request with PLACEHOLDER and the request's estimated usage; sends nothing.

    It keeps the wrapped backend's name and identity, so cache keys are the real run's."""

    def __init__(
        self,
        inner: Backend,
        provider: str,
        model_id: str = "",
        rules: RequestRules = PLAIN_RULES,
        thinking: Thinking | None = None,
        *,
        pilot: int = 0,
        store: ResponseCache | None = None,
        record: Path | None = None,
        spending: Spending | None = None,
    ) -> None:
        self.inner = inner
        self.provider = provider
        self.model_id = model_id
        self.rules = rules
        self.thinking = thinking
        self.name = inner.name
        self.identity = inner.identity
        self.reads_hints = inner.reads_hints
        self.default_concurrency = inner.default_concurrency
        self.modalities = inner.modalities
        self.max_batch = None  # no micro-batcher: each request is answered at once
        self.pilot_left = pilot  # requests still to send for real (--pilot)
        self.store = store  # the real response cache: where a pilot answer goes
        self.record = record  # the run's pilot file (pilot_file)
        # the pilot's --max-cost caps: the real run's ledgers (the model's and the run's, shared
        # by every model of the process), reserved and settled as the spending layer does
        self.spending = spending
        self.piloted = 0

    async def generate(self, request: Request) -> Response:
        count = request_tokens(self.provider, request, self.model_id)
        estimate = Usage(count.total, output_bound(request, self.rules, self.thinking))
        if self.pilot_left > 0:
            self.pilot_left -= 1  # before the await: one event loop, no other request takes it
            sent = await self._pilot(request, estimate)
            if sent is not None:
                return sent
        return Response(
            # a text of its own for each request and sample, so that a later stage built on the
            # answers is as many requests as the real answers make (none collide by chance)
            texts=tuple(f"{PLACEHOLDER} {request.digest()[:12]}.{i}" for i in range(request.n)),
            model=self.name,
            usage=estimate,
        )

    async def _pilot(self, request: Request, estimate: Usage) -> Response | None:
        """`request` sent for real: its answer stored for the real run and recorded for the
        estimate; the outcome keeps the estimate's usage (module docstring). None, and the pilot
        over, where a --max-cost cap refuses it."""
        reserved = 0.0
        if self.spending is not None:
            try:
                reserved = await self.spending.reserve(request)
            except SpendingCapReached:
                self.pilot_left = 0
                return None
        real = None
        try:
            real = await self.inner.generate(request)
        finally:
            if self.spending is not None:
                self.spending.settle(reserved, real.usage if real is not None else None)
        self.piloted += 1
        cost = cost_usd(self.model_id, real.usage)
        if self.store is not None:
            key = cache_key(self.identity, request, with_hints=self.reads_hints)
            self.store.put(key, real)
        if self.record is not None:
            call = PilotCall(self.name, estimate.output_tokens, real.usage.output_tokens, cost)
            append_pilot(self.record, call)
        return dataclasses.replace(real, usage=estimate)

    async def aclose(self) -> None:
        """The wrapped backend, where the pilot started it; else nothing (never started)."""
        if self.piloted:
            await self.inner.aclose()


@dataclass(frozen=True)
class PilotCall:
    """One request the pilot sent: the model, its output bound and the output tokens it wrote
    (thinking included, all samples), and its cost at the list price (None: no price)."""

    model: str
    bound: int
    output_tokens: int
    cost_usd: float | None


def pilot_file(results_dir: Path, run_id: str) -> Path:
    """The run's pilot file, which each process appends its pilot calls to (one JSON line a
    call); the controller reads it when the dry run ends, then removes it."""
    return Path(results_dir) / f".pilot-{run_id}.jsonl"


def append_pilot(path: Path, call: PilotCall) -> None:
    """One line of `call`, appended whole (O_APPEND: lines of several processes do not mix)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(dataclasses.asdict(call), separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_pilots(path: Path) -> dict[str, list[PilotCall]]:
    """The pilot calls of the run by model (a line that is not one is skipped)."""
    found: dict[str, list[PilotCall]] = {}
    if not path.is_file():
        return found
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            call = PilotCall(**json.loads(line))
        except (ValueError, TypeError):
            continue
        found.setdefault(call.model, []).append(call)
    return found


@dataclass(frozen=True)
class Expectation:
    """A model's expected share of its output bound: the pilot's mean of output tokens / bound
    over `n` calls, with its 95% interval (t, n - 1 degrees of freedom; None for one call)."""

    n: int
    share: float
    low: float | None
    high: float | None
    pilot_usd: float | None  # what the pilot cost (None: the model has no price)


def expectation(calls: list[PilotCall]) -> Expectation | None:
    """The expected share of the bound from the pilot's calls (None: no call with a bound)."""
    shares = [c.output_tokens / c.bound for c in calls if c.bound > 0]
    if not shares:
        return None
    n = len(shares)
    mean = sum(shares) / n
    low = high = None
    if n > 1:
        from scipy.stats import t

        sd = math.sqrt(sum((s - mean) ** 2 for s in shares) / (n - 1))
        half = float(t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
        low, high = max(0.0, mean - half), min(1.0, mean + half)
    costs = [c.cost_usd for c in calls if c.cost_usd is not None]
    return Expectation(n, mean, low, high, sum(costs) if costs else None)


# the columns a pilot adds to dry_run.csv (additive: a total row sums them)
EXPECTED = (
    "expected_output_tokens",
    "expected_cost_usd",
    "expected_cost_low",
    "expected_cost_high",
)


def with_expectations(table: pd.DataFrame, pilots: dict[str, list[PilotCall]]) -> pd.DataFrame:
    """`table` (estimate_table) with the pilot's expectations beside each bound (EXPECTED): the
    output tokens expected (the bound times the model's share) and the list-price cost of the
    input and that output, with its 95% interval; empty for a model the pilot did not send."""
    out = table.copy()
    for column in EXPECTED:
        out[column] = None
    for i, row in out.iterrows():
        found = expectation(pilots.get(str(row["model"]), []))
        if found is None:
            continue
        model_id = model_spec(str(row["model"])).model_id
        tokens_in, bound = int(row["input_tokens"]), int(row["max_output_tokens"])
        out.at[i, "expected_output_tokens"] = round(bound * found.share)
        for column, share in (("expected_cost_usd", found.share), ("expected_cost_low", found.low),
                              ("expected_cost_high", found.high)):  # fmt: skip
            if share is not None:
                usage = Usage(tokens_in, round(bound * share))
                out.at[i, column] = cost_usd(model_id, usage)
    return out


class ReadOnlyCache:
    """A response cache that serves hits (marked, with no usage) and stores nothing."""

    def __init__(self, cache: ResponseCache | None) -> None:
        self._cache = cache
        self.path = cache.path if cache is not None else None

    def get(self, key: str) -> Response | None:
        hit = self._cache.get(key) if self._cache is not None else None
        if hit is None:
            return None
        return dataclasses.replace(hit, usage=Usage(), cached=True)

    def put(self, key: str, response: Response) -> None:
        """Stores nothing: a placeholder is no answer."""

    def close(self) -> None:
        """The wrapped cache is closed by its owner."""


def estimate_table(outcomes: Iterable[Outcome]) -> pd.DataFrame:
    """One row a model: requests to send (cache misses), cached answers, input tokens (and how
    text was counted), the output tokens' bound, and USD at the list and the batch price (empty
    for a model without a price)."""
    totals: dict[str, list[int]] = {}
    for o in outcomes:
        t = totals.setdefault(o.model, [0, 0, 0, 0])
        t[0] += o.backend_calls
        t[1] += o.cache_hits
        t[2] += o.usage.input_tokens
        t[3] += o.usage.output_tokens
    rows = []
    for model, (sent, hits, tokens_in, tokens_out) in sorted(totals.items()):
        spec = model_spec(model)
        usage = Usage(tokens_in, tokens_out)
        rows.append(
            {
                "model": model,
                "requests_to_send": sent,
                "cached": hits,
                "input_tokens": tokens_in,
                "text_counted_by": text_method(spec.provider),
                "max_output_tokens": tokens_out,
                "thinking_room": (spec.rules or PLAIN_RULES).room(spec.thinking),
                "cost_usd": cost_usd(spec.model_id, usage),
                "batch_cost_usd": batch_cost_usd(spec.provider, spec.model_id, usage),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "model",
            "requests_to_send",
            "cached",
            "input_tokens",
            "text_counted_by",
            "max_output_tokens",
            "thinking_room",
            "cost_usd",
            "batch_cost_usd",
        ],
    )


TOTAL = "total"  # dry_run.csv's row of its evaluation's models together
GRAND_TOTAL = "total, all evaluations"  # its row of the session's evaluations and models
COUNTS = ("requests_to_send", "cached", "input_tokens", "max_output_tokens")
COSTS = ("cost_usd", "batch_cost_usd")


def total_row(tables: Iterable[pd.DataFrame], label: str) -> dict[str, object]:
    """The models' rows of `tables` summed: requests, cached answers, tokens and USD (over the
    models with a price; None when none has one)."""
    models = [t[~t["model"].isin((TOTAL, GRAND_TOTAL))] for t in tables]
    rows = pd.concat(models) if models else pd.DataFrame(columns=[*COUNTS, *COSTS])
    row: dict[str, object] = {"model": label, "text_counted_by": "", "thinking_room": ""}
    for column in COUNTS:
        row[column] = int(rows[column].sum())
    for column in COSTS:
        priced = rows[column].dropna()
        row[column] = float(priced.sum()) if len(priced) else None
    for column in EXPECTED:  # a pilot's: the models' expectations summed (intervals: their ends)
        if column in rows:
            found = rows[column].dropna()
            row[column] = float(found.sum()) if len(found) else None
    return row


def with_totals(table: pd.DataFrame, grand: dict[str, object] | None = None) -> pd.DataFrame:
    """An evaluation's estimate with its total row, then the session's grand total row when the
    session has more than one evaluation (`grand`)."""
    rows = [total_row([table], TOTAL), *([grand] if grand is not None else [])]
    return pd.concat([table, pd.DataFrame(rows, columns=table.columns)], ignore_index=True)


def unpriced(tables: Iterable[pd.DataFrame]) -> list[str]:
    """The models of `tables` without a price (left out of the USD totals)."""
    found = [m for t in tables for m in t.loc[t["cost_usd"].isna(), "model"]]
    return sorted({m for m in found if m not in (TOTAL, GRAND_TOTAL)})


def pilot_lines(pilots: dict[str, list[PilotCall]]) -> list[str]:
    """The terminal's lines on the pilot: per model, the requests sent for real, their cost and
    the share of the bound they wrote, with its 95% interval."""
    lines = []
    for model, calls in sorted(pilots.items()):
        found = expectation(calls)
        if found is None:
            continue
        cost = "no price" if found.pilot_usd is None else f"${found.pilot_usd:,.4g}"
        spread = f" [{found.low:.3f}, {found.high:.3f}]" if found.low is not None else " (one call)"
        lines.append(
            f"pilot: {model}: {found.n} request(s) sent for real, {cost} (answers cached for the "
            f"real run); output {found.share:.3f}{spread} of its bound"
        )
    return lines
