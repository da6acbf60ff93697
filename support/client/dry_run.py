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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

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
from support.client.response_cache import ResponseCache
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

    async def generate(self, request: Request) -> Response:
        count = request_tokens(self.provider, request, self.model_id)
        return Response(
            # a text of its own for each request and sample, so that a later stage built on the
            # answers is as many requests as the real answers make (none collide by chance)
            texts=tuple(f"{PLACEHOLDER} {request.digest()[:12]}.{i}" for i in range(request.n)),
            model=self.name,
            usage=Usage(count.total, output_bound(request, self.rules, self.thinking)),
        )

    async def aclose(self) -> None:
        """Nothing to close: the wrapped backend was never started."""


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
