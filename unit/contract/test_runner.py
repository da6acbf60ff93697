"""support.contract.runner: the core's bookkeeping around an evaluation's verdicts, in process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from support.backends.base import BackendError
from support.backends.scripted import ScriptedBackend
from support.client.engine import ModelClient
from support.client.response_cache import ResponseCache
from support.contract.runner import CaseResult, run_case
from support.types import Case, Part, Request, Usage, Verdict


def ask(text: str) -> Request:
    return Request(parts=(Part.of_text(text),))


class TwoCalls:
    """Asks twice and returns one verdict: the core must count both calls."""

    name = "toy"

    async def evaluate(self, case: Case, client) -> Verdict:
        await client.generate(ask(f"{case.id} first"))
        second = await client.generate(ask(f"{case.id} second"))
        return Verdict("correct" if second.text == "yes" else "wrong", scores={"x": 1})


class Forked:
    """One outcome per question, each with its own forked client."""

    name = "toy"

    async def evaluate(self, case: Case, client) -> list[Verdict]:
        await client.generate(ask("shared"))  # on the item's client: goes to the first verdict
        verdicts = []
        for q in ("a", "b"):
            fork = client.fork()
            r = await fork.generate(ask(q))
            verdicts.append(Verdict("correct", prediction=r.text, case_id=f"{case.id}-{q}",
                                    calls=fork.log))  # fmt: skip
        verdicts.append(Verdict("wrong", case_id=f"{case.id}-none"))
        return verdicts


class Broken:
    name = "toy"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def evaluate(self, case: Case, client):
        await client.generate(ask("before the failure"))
        raise self.exc


def client(tmp_path: Path | None = None) -> ModelClient:
    backend = ScriptedBackend(lambda r: "yes", name="m")
    cache = ResponseCache(tmp_path / "c.sqlite") if tmp_path else None
    return ModelClient(backend, cache, concurrency=2)


CASE = Case("c1", "toy", {"k": 1}, group={"g": "G"}, cluster="v1")


def run(ev, model: ModelClient, case: Case = CASE) -> CaseResult:
    return asyncio.run(run_case(ev, case, model))  # type: ignore[arg-type]


def test_the_core_fills_in_ids_counters_and_the_case(tmp_path):
    first = run(TwoCalls(), client(tmp_path))
    (o,) = first.outcomes
    assert (o.case_id, o.model, o.evaluation, o.status) == ("c1-m", "m", "toy", "correct")
    assert (o.group, o.cluster, o.params) == ({"g": "G"}, "v1", {"k": 1})
    assert (o.backend_calls, o.cache_hits, o.cached) == (2, 0, False)
    assert o.raw == "yes" and o.prompt_hash == ask("c1 first").digest()
    assert o.usage == Usage() and o.latency_s >= 0
    (again,) = run(TwoCalls(), client(tmp_path)).outcomes  # same cache file: all hits
    assert (again.backend_calls, again.cache_hits, again.cached) == (0, 2, True)


def test_many_outcomes_split_the_calls_by_fork():
    outs = run(Forked(), client()).outcomes
    assert [o.case_id for o in outs] == ["c1-a-m", "c1-b-m", "c1-none-m"]
    assert [o.backend_calls for o in outs] == [1, 1, 1]  # a, b, and the shared call
    assert outs[2].prompt_hash == ask("shared").digest() and outs[0].prediction == "yes"
    assert all(o.cluster == "v1" for o in outs)


def test_repeated_outcome_ids_are_a_bug_recorded_as_an_error():
    class Twice(Forked):
        async def evaluate(self, case, client):
            return [Verdict("correct"), Verdict("wrong")]

    result = run(Twice(), client())
    (o,) = result.outcomes
    assert o.status == "error" and "repeat" in (o.error or "")
    assert isinstance(result.exception, ValueError)


@pytest.mark.parametrize("exc", [BackendError("HTTP 503 after retries"), KeyError("x")])
def test_failures_become_error_outcomes_with_the_calls_made(exc):
    result = run(Broken(exc), client())
    (o,) = result.outcomes
    assert o.status == "error" and o.case_id == "c1-m" and o.group == {"g": "G"}
    assert o.backend_calls == 1 and o.params == {"k": 1}
    assert result.exception is exc  # the test re-raises a bug, and only reports a BackendError
    expected = "HTTP 503 after retries" if isinstance(exc, BackendError) else "KeyError: 'x'"
    assert o.error == expected


def test_a_round_sees_the_outcomes_before_it():
    seen = []

    class Remember(TwoCalls):
        async def evaluate(self, case, client):
            seen.append([o.case_id for o in client.history])
            return Verdict("correct")

    model = client()
    r0 = Case("r0", "toy")
    r1 = Case("r1", "toy", after="r0")
    r2 = Case("r2", "toy", after="r1")

    async def main():
        ev = Remember()
        first = asyncio.ensure_future(run_case(ev, r0, model))  # type: ignore[arg-type]

        async def wait_first():
            return await first

        second = asyncio.ensure_future(run_case(ev, r1, model, wait_first))  # type: ignore[arg-type]

        async def wait_second():
            return await second

        return await run_case(ev, r2, model, wait_second)  # type: ignore[arg-type]

    last = asyncio.run(main())
    assert seen == [[], ["r0-m"], ["r0-m", "r1-m"]]
    assert [o.case_id for o in last.history] == ["r0-m", "r1-m"]


class Counted:
    """Counts the cases inside evaluate at once; each waits for `release`, before its request
    (`wait_first`) or after it."""

    name = "toy"

    def __init__(self, wait_first: bool = False) -> None:
        self.inside = self.peak = 0
        self.release = asyncio.Event()
        self.wait_first = wait_first

    async def evaluate(self, case: Case, client) -> Verdict:
        self.inside += 1
        self.peak = max(self.peak, self.inside)
        if self.wait_first:
            await self.release.wait()
        await client.generate(ask(case.id))
        await self.release.wait()
        self.inside -= 1
        return Verdict("correct")


class Started(ScriptedBackend):
    """A scripted backend that counts its `start` calls."""

    starts = 0

    async def start(self) -> None:
        self.starts += 1


def admit(ev: Counted, model: ModelClient, n: int = 50) -> tuple[int, list[CaseResult]]:
    """Submit `n` cases; the peak inside evaluate before `release`, and the results."""
    cases = [Case(f"c{i}", "toy") for i in range(n)]

    async def go():
        tasks = [asyncio.create_task(run_case(ev, c, model)) for c in cases]  # type: ignore[arg-type]
        for _ in range(20):
            await asyncio.sleep(0)
        seen = ev.peak
        ev.release.set()
        return seen, await asyncio.gather(*tasks)

    return asyncio.run(go())


def test_cases_are_admitted_in_a_window_of_twice_the_concurrency():
    """50 submitted cases, concurrency 2: once the first request is looked up, at most 4 cases
    build their requests at once, and all finish (a place is given back when a case ends)."""
    ev, model = Counted(), client()
    seen, results = admit(ev, model)
    assert model.window == 4 and seen == 4 and ev.peak == 4
    assert all(r.outcomes[0].status == "correct" for r in results)


def test_the_first_case_runs_alone_until_its_first_lookup():
    """The other cases wait while the first builds its first request; then the window opens."""
    ev, model = Counted(wait_first=True), client()
    seen, results = admit(ev, model)
    assert seen == 1  # the test above sees 4 at the same point, once the lookup is done
    assert all(r.outcomes[0].status == "correct" for r in results)


def test_a_slow_first_case_holds_the_others_back_at_most_alone_s():
    """A first case that works before its first request longer than `alone_s` (here: until the
    others have run) does not keep them waiting: the window opens after `alone_s`."""
    model = client()
    model.alone_s = 0.05
    first_done = asyncio.Event()
    others: list[str] = []

    class Slow:
        name = "toy"

        async def evaluate(self, case: Case, cl) -> Verdict:
            if case.id == "c0":
                await first_done.wait()  # set only once the others have run
            else:
                others.append(case.id)
                if len(others) == 5:
                    first_done.set()
            await cl.generate(ask(case.id))
            return Verdict("correct")

    async def go():
        cases = [Case(f"c{i}", "toy") for i in range(6)]
        tasks = [asyncio.create_task(run_case(Slow(), c, model)) for c in cases]  # type: ignore[arg-type]
        return await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)

    results = asyncio.run(go())
    assert all(r.outcomes[0].status == "correct" for r in results) and len(others) == 5


def test_the_backend_starts_once_before_a_first_request_that_is_not_cached(tmp_path):
    backend = Started(lambda r: "yes", name="m")
    model = ModelClient(backend, ResponseCache(tmp_path / "c.sqlite"), concurrency=2)
    admit(Counted(), model, n=6)
    assert backend.starts == 1 and model.started_backend and model.sent == 6

    again = Started(lambda r: "yes", name="m")  # a rerun on the same cache: every answer stored
    cached = ModelClient(again, ResponseCache(tmp_path / "c.sqlite"), concurrency=2)
    admit(Counted(), cached, n=6)
    assert again.starts == 0 and not cached.started_backend and cached.cache_hits == 6


def test_outcome_json_equals_asdict_and_round_trips():
    """Outcome.to_json (field by field) gives what dataclasses.asdict gives, less what is
    written only when set (no reasoning tokens, no thinking, finish reasons or adaptations),
    and from_json rebuilds the same outcome."""
    from dataclasses import asdict, replace

    from support.types import OPTIONAL_FIELDS, Outcome

    def as_written(o: Outcome) -> dict:
        d = {k: v for k, v in asdict(o).items() if k not in OPTIONAL_FIELDS or v}
        for k in ("usage", "batch_usage"):
            d[k] = {name: n for name, n in d[k].items() if name != "reasoning_tokens" or n}
        return {k: list(v) if k in OPTIONAL_FIELDS else v for k, v in d.items()}

    o = Outcome(
        "c-m", "toy", "m", "wrong", group={"g": "G"}, cluster="v", scores={"hit": None},
        prediction={"point": [1, 2]}, target={"present": 1}, usage=Usage(3, 4),
        params={"row": 7}, extra={"k": [1]}, error=None,
    )  # fmt: skip
    d = o.to_json()
    assert d == as_written(o) and list(d) == list(as_written(o))
    assert Outcome.from_json(d) == o and Outcome.from_json(d).usage == Usage(3, 4)
    thought = replace(o, usage=Usage(3, 4, 2), thinking=("hmm",), finish_reasons=("length",))
    d = thought.to_json()
    assert d == as_written(thought) and d["usage"]["reasoning_tokens"] == 2
    assert Outcome.from_json(d) == thought
