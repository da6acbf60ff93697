"""Engine, micro-batching, model client and cache behaviour."""

from __future__ import annotations

import asyncio
import multiprocessing

import pytest

from support.backends.base import Backend, BackendError
from support.backends.reference import ChanceBackend, OracleBackend
from support.backends.retry import MalformedResponse, backend_error, call_with_retry, is_malformed
from support.backends.scripted import ScriptedBackend
from support.client.engine import Engine, MicroBatcher, ModelClient
from support.client.response_cache import ResponseCache
from support.contract.runner import run_case
from support.types import Case, Part, Request, Response, Verdict


def req(text: str, **kw) -> Request:
    return Request(parts=(Part.of_text(text),), **kw)


def test_engine_runs_submissions_once_per_key():
    eng = Engine()
    runs = []

    async def work(x):
        runs.append(x)
        await asyncio.sleep(0.01)
        return x * 2

    try:
        futs = [eng.submit(f"k{i}", lambda i=i: work(i)) for i in range(20)]
        again = eng.submit("k3", lambda: work(99))
        assert [f.result(5) for f in futs] == [2 * i for i in range(20)]
        assert again is futs[3]
        assert sorted(runs) == list(range(20))
    finally:
        eng.close()


class SlowBackend(Backend):
    """Sleeps `delay` per request and records the number in flight as each starts, and the peak."""

    def __init__(self, delay: float) -> None:
        self.name, self.identity, self.delay = "slow", {"model": "slow"}, delay
        self.in_flight = self.peak = self.calls = 0
        self.starts: list[int] = []

    async def generate(self, request: Request) -> Response:
        self.calls += 1
        self.in_flight += 1
        self.starts.append(self.in_flight)
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(self.delay)
        self.in_flight -= 1
        return Response(texts=(request.parts[0].text or "",), model=self.name)


def test_concurrency_is_bounded_and_used():
    backend = SlowBackend(0.02)
    client = ModelClient(backend, cache=None, concurrency=8)

    async def main():
        return await asyncio.gather(*(client.generate(req(str(i))) for i in range(64)))

    out = asyncio.run(main())
    assert [r.text for r in out] == [str(i) for i in range(64)]
    assert backend.peak == 8
    # far from serial: the limit is filled again as slots free (8 waves of 8 here; at least half
    # asked); a serial client, a smaller limit or slots held after their requests never refill it
    assert backend.starts.count(8) >= 4, backend.starts


def test_micro_batcher_gathers_waiting_requests():
    backend = ScriptedBackend(lambda r: r.parts[0].text.upper(), max_batch=16)
    client = ModelClient(backend, cache=None, concurrency=1)

    async def two_stage(i):
        first = await client.generate(req(f"a{i}"))
        return await client.generate(req(first.text + "b"))

    async def main():
        return await asyncio.gather(*(two_stage(i) for i in range(100)))

    out = asyncio.run(main())
    assert [r.text for r in out] == [f"A{i}B" for i in range(100)]
    # 2 stages x 100 cases / batch 16: about 2 x 7 calls, nowhere near 200
    assert backend.batch_calls <= 2 * -(-100 // 16) + 1
    assert max(client.batcher.batch_sizes) == 16
    assert backend.calls == 0


def test_micro_batcher_failure_reaches_every_waiter():
    async def boom(requests):
        raise BackendError("engine crashed")

    batcher = MicroBatcher(boom, max_batch=4)

    async def main():
        return await asyncio.gather(
            *(batcher.submit(req(str(i))) for i in range(6)), return_exceptions=True
        )

    out = asyncio.run(main())
    assert all(isinstance(e, BackendError) for e in out)


def test_cache_serves_repeats_and_never_stores_errors(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    fail = {"on": True}

    def script(r):
        if fail["on"] and r.parts[0].text == "bad":
            raise RuntimeError("HTTP 500")
        return "ok:" + r.parts[0].text

    backend = ScriptedBackend(script)
    client = ModelClient(backend, cache=cache, concurrency=4)

    async def run(texts):
        return await asyncio.gather(
            *(client.generate(req(t)) for t in texts), return_exceptions=True
        )

    first = asyncio.run(run(["a", "b", "bad"]))
    assert isinstance(first[2], BackendError) and "HTTP 500" in str(first[2])
    assert len(cache) == 2 and backend.calls == 3
    fail["on"] = False
    second = asyncio.run(run(["a", "b", "bad"]))
    assert [r.text for r in second] == ["ok:a", "ok:b", "ok:bad"]
    assert [r.cached for r in second] == [True, True, False]
    assert backend.calls == 4  # only the failed one was sent again


def test_max_tokens_caps_each_request_before_its_cache_key(tmp_path):
    """--max-tokens: a request asking for more is sent (and cached) at the cap; one asking for
    less keeps its own limit; the capped answer is not the whole one's cache entry."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    backend = ScriptedBackend(lambda r: f"{r.parts[0].text}:{r.max_tokens}")
    capped = ModelClient(backend, cache=cache, concurrency=2, max_tokens=24)
    whole = ModelClient(backend, cache=cache, concurrency=2)

    async def ask(client, *requests):
        return [r.text for r in await asyncio.gather(*(client.generate(q) for q in requests))]

    long, short = req("long", max_tokens=512), req("short", max_tokens=16)
    assert asyncio.run(ask(capped, long, short)) == ["long:24", "short:16"]
    assert asyncio.run(ask(whole, long)) == ["long:512"]  # not the capped entry
    assert backend.calls == 3 and len(cache) == 3
    assert asyncio.run(ask(capped, long)) == ["long:24"] and backend.calls == 3  # cached


class MalformedApi(Backend):
    """An API backend's failure path (support/backends/api_backend.py, `generate`): every attempt
    gets a 200 without a usable body (MalformedResponse), the outer retry (call_with_retry, 3
    attempts) gives up and the error escapes as retry.backend_error's BackendError. With
    `failing` off it answers "yes"."""

    def __init__(self) -> None:
        self.name, self.identity = "api", {"provider": "test", "model": "api"}
        self.failing = True
        self.calls = self.attempts = 0

    async def generate(self, request: Request) -> Response:
        self.calls += 1

        async def once() -> Response:
            self.attempts += 1
            if self.failing:
                raise MalformedResponse("200 without choices")
            return Response(texts=("yes",) * request.n, model=self.name)

        try:
            return await call_with_retry(once, is_malformed)
        except Exception as exc:
            raise backend_error(self.name, exc) from None


class AskOnce:
    """One question; right when the answer is "yes"."""

    name = "toy"

    async def evaluate(self, case: Case, client) -> Verdict:
        answer = await client.generate(req("Is it?"))
        return Verdict("correct" if answer.text == "yes" else "wrong", prediction=answer.text)


def test_a_backend_error_after_retries_is_an_error_outcome_and_never_cached(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    backend = MalformedApi()
    case = Case("c1", "toy")
    first = asyncio.run(run_case(AskOnce(), case, ModelClient(backend, cache, concurrency=1)))
    (o,) = first.outcomes
    assert o.status == "error" and o.raw == "" and o.prediction is None
    assert o.error == "api: MalformedResponse: 200 without choices"
    assert isinstance(first.exception, BackendError)  # reported, not an empty answer
    assert (backend.calls, backend.attempts, len(cache)) == (1, 3, 0)  # nothing stored
    backend.failing = False  # the provider recovers: the next run sends the request again
    second = asyncio.run(run_case(AskOnce(), case, ModelClient(backend, cache, concurrency=1)))
    (again,) = second.outcomes
    assert again.status == "correct" and (again.backend_calls, again.cache_hits) == (1, 0)
    assert (backend.calls, len(cache)) == (2, 1)


def test_cache_key_covers_the_request_and_the_model():
    a, b = OracleBackend(), ChanceBackend(seed=1)
    ca, cb = ModelClient(a, None, 1), ModelClient(b, None, 1)
    base = req("x", target="t")
    keys = {
        ca.key(base),
        cb.key(base),
        ca.key(req("x", target="t", temperature=0.7)),
        ca.key(req("x", target="t", n=2)),
        ca.key(Request(parts=(Part.of_text("x"), Part.of_image(b"\x89PNG\r\n\x1a\n1")))),
        ca.key(Request(parts=(Part.of_text("x"), Part.of_image(b"\x89PNG\r\n\x1a\n2")))),
    }
    assert len(keys) == 6
    assert ModelClient(ChanceBackend(seed=2), None, 1).key(base) != cb.key(base)
    # real backends never see the reference hints, so the hints do not split their cache
    s1 = ModelClient(ScriptedBackend(str), None, 1)
    assert s1.key(req("x", target="t1")) == s1.key(req("x", target="t2"))


def run_in_processes(target, argsets) -> None:
    """Start one spawned process per argument tuple at once; each must exit cleanly."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=args) for args in argsets]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0


def _writer(path, start):
    cache = ResponseCache(path)
    for i in range(start, start + 200):
        cache.put(f"k{i}", Response(texts=(str(i),), model="m"))


def test_cache_is_shared_safely_by_processes(tmp_path):
    path = tmp_path / "shared.sqlite"
    ResponseCache(path)
    run_in_processes(_writer, [(path, k * 100) for k in range(3)])
    cache = ResponseCache(path)
    assert len(cache) == 400  # overlapping keys written twice stay one row
    assert cache.get("k250").text == "250"


def test_chance_is_deterministic_and_seeded():
    from support.evaluations.pointing.task import PointingAnswerSpace

    r = req("q", answer_space=PointingAnswerSpace("Liver"), n=3)

    async def answers(seed):
        return (await ChanceBackend(seed=seed).generate(r)).texts

    assert asyncio.run(answers(0)) == asyncio.run(answers(0))
    assert asyncio.run(answers(0)) != asyncio.run(answers(1))


def test_oracle_without_target_is_an_error():
    with pytest.raises(BackendError):
        asyncio.run(OracleBackend().generate(req("q")))


def _open_and_write(path, k):
    cache = ResponseCache(path)
    cache.put(f"p{k}", Response(texts=(str(k),), model="m"))


def test_cache_created_by_many_processes_at_once(tmp_path):
    """Workers starting together all create the same new cache file (the WAL switch races)."""
    path = tmp_path / "new.sqlite"
    run_in_processes(_open_and_write, [(path, k) for k in range(6)])
    cache = ResponseCache(path)
    assert len(cache) == 6
    assert cache._conn().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
