"""Running one case: the per-case client that logs its calls, and the core's outcome bookkeeping.

An evaluation's `evaluate(case, client)` awaits `client.generate(request)` as often as it needs
and returns the domain part of its outcome(s) (a `Verdict`, or a list of them). `run_case` hands
it a `LoggedClient` that logs every call, then builds the full `Outcome`s: ids, model, usage,
latency, prompt hash, cache counters. A failure becomes one `error` outcome built here, so no
evaluation writes bookkeeping or error outcomes of its own.

A case whose results exist, and which its evaluation keeps (`Evaluation.reused`), is read back
instead of evaluated: its outcomes are built the same way, marked `extra["reused"]`.

A case may name another case that must finish first (`Case.after`, a sequence of rounds): it
then starts only when that one is done and sees the outcomes of every earlier round as
`client.history`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from support.backends.base import BackendError
from support.client.engine import ModelClient
from support.client.sending import SendCount, counting_sends
from support.secrets import redact
from support.types import Case, Outcome, Request, Response, Usage, Verdict, outcome_id

if TYPE_CHECKING:
    from support.backends.registry import ModelSpec
    from support.contract.evaluation import Evaluation


@dataclass
class CallLog:
    """The model calls of one outcome, in the order they were made; `unanswered`: the sends of
    the calls without an answer (failed, or still in flight when a sibling's failure ended the
    case); `forks`: the logs of the clients forked from this one (`LoggedClient.fork`)."""

    requests: list[Request] = field(default_factory=list)
    responses: list[Response] = field(default_factory=list)
    unanswered: list[SendCount] = field(default_factory=list)
    forks: list[CallLog] = field(default_factory=list)
    first: Request | None = None  # the first request asked, answered or not

    @property
    def failed(self) -> int:
        """Requests that went out and have no answer (yet)."""
        return sum(count.sent for count in self.unanswered)

    def record(self, request: Request, response: Response) -> None:
        self.requests.append(request)
        self.responses.append(response)

    def whole(self) -> CallLog:
        """This log with its forks' calls (recursively): all that a case which broke sent."""
        out = CallLog(list(self.requests), list(self.responses), list(self.unanswered))
        out.first = self.first
        for fork in self.forks:
            found = fork.whole()
            out.requests += found.requests
            out.responses += found.responses
            out.unanswered += found.unanswered
            out.first = out.first or found.first
        return out

    def bookkeeping(self) -> dict[str, object]:
        """The Outcome fields the core fills in from these calls."""
        rs = self.responses
        # the first answered request, else (a case whose requests all failed) the first asked
        first = self.requests[0] if self.requests else self.first
        return {
            "prompt_hash": first.digest() if first else "",
            "latency_s": sum(r.latency_s for r in rs),  # model seconds, summed over calls
            "cached": bool(rs) and all(r.cached for r in rs),
            "usage": sum((r.usage for r in rs), Usage()),
            "batch_usage": sum((r.usage for r in rs if r.batch), Usage()),
            "backend_calls": sum(not r.cached for r in rs) + self.failed,
            "cache_hits": sum(r.cached for r in rs),
            "rendered_prompt": next((r.prompt for r in rs if r.prompt), None),
            "thinking": tuple(t for r in rs for t in r.thinking if t),
            # all of them when one answer was cut, so the row says which call and sample
            "finish_reasons": (
                tuple(f for r in rs for f in r.finish_reasons)
                if any(r.truncated for r in rs)
                else ()
            ),
            "adapted": tuple(dict.fromkeys(a for r in rs for a in r.adapted)),
        }


class LoggedClient:
    """What `evaluate` awaits (the support.contract.evaluation.CaseClient protocol): the model
    client of this case, logging each call.

    `name` is the model's `--model` name, `model` its registry entry; `history` the outcomes of
    the earlier rounds of a sequence (empty for a case without `after`); `fork()` a client whose
    calls go to a log of their own, for items that yield many outcomes.
    """

    def __init__(self, client: ModelClient, history: Sequence[Outcome] = ()) -> None:
        self._client = client
        self.name = client.name
        self.history: tuple[Outcome, ...] = tuple(history)
        self.log = CallLog()

    async def generate(self, request: Request) -> Response:
        if self.log.first is None:
            self.log.first = request
        with counting_sends() as count:
            # counted until answered: a request that went out counts as sent, failed or not
            self.log.unanswered.append(count)
            response = await self._client.generate(request)
        self.log.unanswered.remove(count)
        self.log.record(request, response)
        return response

    @property
    def model(self) -> ModelSpec:
        """The model's registry entry (provider, model id, traits); a client of a backend the
        registry does not know (a test double) gets one without provider or traits."""
        from support.backends.registry import spec_or_unregistered

        return spec_or_unregistered(self.name)

    def fork(self) -> LoggedClient:
        child = LoggedClient(self._client, self.history)
        self.log.forks.append(child.log)  # a case that breaks counts its forks' calls
        return child


@dataclass(frozen=True)
class CaseResult:
    """A case's outcomes, the history after it (for the next round), and the exception of a
    pipeline failure (kept for the test's traceback; a BackendError is only recorded)."""

    outcomes: tuple[Outcome, ...]
    history: tuple[Outcome, ...] = ()
    exception: BaseException | None = None


def outcomes_of(
    case: Case, model: str, verdicts: Verdict | Sequence[Verdict], log: CallLog
) -> tuple[Outcome, ...]:
    """Full outcomes from an evaluation's verdicts and the item's call log."""
    if isinstance(verdicts, Verdict):
        verdicts = [verdicts]
    if not verdicts:
        raise ValueError(f"{case.evaluation}: evaluate() returned no verdict for {case.id}")
    out = []
    unattributed: CallLog | None = log
    for v in verdicts:
        if not isinstance(v, Verdict):
            raise TypeError(f"{case.evaluation}: evaluate() must return Verdicts, got {v!r:.80}")
        calls = v.calls
        if calls is None:
            calls, unattributed = unattributed or CallLog(), None
        books = calls.bookkeeping()
        raw = v.raw if v.raw is not None else (calls.responses[-1].text if calls.responses else "")
        out.append(
            Outcome(
                case_id=outcome_id(v.case_id or case.id, model),
                evaluation=case.evaluation,
                model=model,
                status=v.status,
                group=dict(case.group if v.group is None else v.group),
                cluster=case.cluster if v.cluster is None else v.cluster,
                scores=dict(v.scores),
                prediction=v.prediction,
                target=v.target,
                raw=raw,
                params=dict(case.params),
                extra=dict(v.extra),
                read_by=v.read_by,
                **books,  # type: ignore[arg-type]
            )
        )
    ids = [o.case_id for o in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{case.evaluation}: outcome ids repeat within {case.id}: {ids}")
    return tuple(out)


def error_outcome(case: Case, model: str, message: str, log: CallLog) -> Outcome:
    """The outcome recorded when the pipeline broke for this case; its bookkeeping counts every
    call the case made, its forks' included."""
    books = log.whole().bookkeeping()
    return Outcome(
        case_id=outcome_id(case.id, model),
        evaluation=case.evaluation,
        model=model,
        status="error",
        group=dict(case.group),
        cluster=case.cluster,
        raw=log.responses[-1].text if log.responses else "",
        error=message,
        params=dict(case.params),
        **books,  # type: ignore[arg-type]
    )


async def run_case(
    ev: Evaluation,
    case: Case,
    client: ModelClient,
    before: Callable[[], Awaitable[CaseResult]] | None = None,
) -> CaseResult:
    """Evaluate one case (after `before`, the case it waits for); never raises: a failure
    becomes an `error` outcome, the exception kept in the result."""
    history: tuple[Outcome, ...] = ()
    if before is not None:
        prior = await before()
        history = prior.history + prior.outcomes
    cc = LoggedClient(client, history)
    try:
        reused = getattr(ev, "reused", None)  # optional: an evaluation that keeps results
        kept = await reused(case, client.name) if reused is not None else None
        if kept is not None:  # results that exist, read back: no model call
            return CaseResult(outcomes_of(case, client.name, kept.marked(), cc.log), history)
        async with client.admitted():
            verdicts = await ev.evaluate(case, cc)
        outcomes = outcomes_of(case, client.name, verdicts, cc.log)
    except BackendError as exc:
        # a model's own error may quote its secrets (a python: model's --model-arg token)
        return CaseResult(
            (error_outcome(case, client.name, redact(str(exc)), cc.log),), history, exc
        )
    except Exception as exc:  # a bug: recorded, and re-raised in the test for its traceback
        message = redact(f"{type(exc).__name__}: {exc}")
        return CaseResult((error_outcome(case, client.name, message, cc.log),), history, exc)
    return CaseResult(outcomes, history)
