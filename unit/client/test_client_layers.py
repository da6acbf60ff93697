"""The model client's layers (support/client), each on its own: the cache and its paid-answer rule,
the window of cases, the concurrency limit, the spending caps, the counted call, micro-batching
and the batch-API layer; and how ModelClient assembles them."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import warnings
from collections.abc import AsyncIterator, Sequence

import pytest

from support.backends.base import Backend, BackendError
from support.backends.batch_protocol import BatchLimits, BatchState, ListedBatch
from support.client.admission import Admission
from support.client.batch_queue import BatchPending, BatchQueue, BatchRecord, BatchRecords
from support.client.caching import AnswerCache, CacheWriteWarning, Caching
from support.client.capping import Capped
from support.client.concurrency import AUTO, Aimd, AimdSettings
from support.client.engine import ModelClient
from support.client.limiting import Limited, concurrency_of
from support.client.micro_batching import MicroBatcher
from support.client.queueing import Queued
from support.client.response_cache import ResponseCache
from support.client.sending import BackendCall, Timed
from support.client.spending import Ledger, Spending, SpendingCapReached
from support.types import Part, Request, Response, Usage


def req(text: str) -> Request:
    return Request(parts=(Part.of_text(text),), max_tokens=16)


def answer(text: str, **kw) -> Response:
    return Response(texts=(text,), model="m", **kw)


class Echo:
    """An innermost sender: answers each request with its text, after `delay` seconds; counts
    its calls and the most at once; raises `fail` when set."""

    def __init__(self, delay: float = 0.0, fail: BaseException | None = None) -> None:
        self.delay, self.fail = delay, fail
        self.calls = self.now = self.peak = 0
        self.keys: list[str] = []

    async def send(self, key: str, request: Request) -> Response:
        self.calls += 1
        self.keys.append(key)
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.fail is not None:
                raise self.fail
            return answer(request.parts[0].text or "", usage=Usage(10, 5))
        finally:
            self.now -= 1


class FullDisk(ResponseCache):
    """Every write fails as sqlite does on a full disk."""

    puts = 0

    def put(self, key: str, response: Response) -> None:
        self.puts += 1
        raise sqlite3.OperationalError("database or disk is full")


# ---- AnswerCache: the paid-answer rule ----------------------------------------------------------
def test_answer_cache_stores_and_reads_back(tmp_path):
    answers = AnswerCache(ResponseCache(tmp_path / "c.sqlite"), "m")
    answers.put("k", answer("yes"))
    got = answers.get("k")
    assert got is not None and got.text == "yes" and got.cached
    assert answers.get("other") is None and answers.write_errors == 0


def test_a_failed_write_is_counted_warned_once_and_later_writes_are_tried(tmp_path):
    cache = FullDisk(tmp_path / "full.sqlite")
    answers = AnswerCache(cache, "model-x")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(3):
            answers.put(f"k{i}", answer(str(i)))  # never raises: the answer is the run's
    mine = [w for w in caught if issubclass(w.category, CacheWriteWarning)]
    assert len(mine) == 1 and cache.puts == 3 and answers.write_errors == 3
    text = str(mine[0].message)
    assert str(cache.path) in text and "answer of model-x not stored" in text
    assert "OperationalError: database or disk is full" in text


def test_other_write_errors_are_not_swallowed(tmp_path):
    class Broken(ResponseCache):
        def put(self, key: str, response: Response) -> None:
            raise TypeError("a bug")

    with pytest.raises(TypeError):
        AnswerCache(Broken(tmp_path / "b.sqlite"), "m").put("k", answer("x"))


# ---- Caching ------------------------------------------------------------------------------------
def test_caching_serves_a_hit_without_sending_and_stores_a_miss(tmp_path):
    inner = Echo()
    layer = Caching(inner, AnswerCache(ResponseCache(tmp_path / "c.sqlite"), "m"))
    first = asyncio.run(layer.send("k", req("a")))
    again = asyncio.run(layer.send("k", req("a")))
    assert (first.text, first.cached) == ("a", False)
    assert (again.text, again.cached) == ("a", True)
    assert inner.calls == 1 and layer.hits == 1 and inner.keys == ["k"]


def test_caching_without_a_cache_sends_every_request():
    inner = Echo()
    layer = Caching(inner, None)
    for _ in range(2):
        asyncio.run(layer.send("k", req("a")))
    assert inner.calls == 2 and layer.hits == 0


def test_caching_stores_nothing_where_the_inner_layer_stores(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    layer = Caching(Echo(), AnswerCache(cache, "m"), stores=False)
    asyncio.run(layer.send("k", req("a")))
    assert len(cache) == 0


def test_caching_keeps_an_answer_the_cache_refuses(tmp_path):
    layer = Caching(Echo(), AnswerCache(FullDisk(tmp_path / "f.sqlite"), "m"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWriteWarning)
        got = asyncio.run(layer.send("k", req("a")))
    assert got.text == "a" and layer.answers is not None and layer.answers.write_errors == 1


@pytest.mark.parametrize(
    "error",
    [BackendError("HTTP 500"), SpendingCapReached("cap"), BatchPending("in batch b1")],
)
def test_caching_lets_known_failures_through_and_stores_none(error, tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    layer = Caching(Echo(fail=error), AnswerCache(cache, "m"))
    with pytest.raises(type(error)) as raised:
        asyncio.run(layer.send("k", req("a")))
    assert raised.value is error and len(cache) == 0


def test_caching_turns_any_other_failure_into_a_redacted_backend_error(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    failure = KeyError("http://user:pw-SECRET@127.0.0.1:9/v1")  # a bug that quotes a URL
    layer = Caching(Echo(fail=failure), AnswerCache(cache, "m"))
    with pytest.raises(BackendError) as raised:
        asyncio.run(layer.send("k", req("a")))
    assert str(raised.value) == "KeyError: 'http://***@127.0.0.1:9/v1'"
    assert len(cache) == 0


def started_admission() -> tuple[Admission, list[str]]:
    starts: list[str] = []

    async def start() -> None:
        starts.append("start")

    return Admission(window=4, start=start), starts


def test_a_first_lookup_that_misses_starts_the_backend_once_then_opens_the_window():
    admission, starts = started_admission()
    inner = Echo()
    layer = Caching(inner, None, admission)

    async def main() -> None:
        await layer.send("k1", req("a"))
        await layer.send("k2", req("b"))

    asyncio.run(main())
    assert starts == ["start"] and admission.started_backend and admission.is_open


def test_a_first_lookup_that_hits_opens_the_window_without_starting(tmp_path):
    admission, starts = started_admission()
    answers = AnswerCache(ResponseCache(tmp_path / "c.sqlite"), "m")
    answers.put("k", answer("stored"))
    layer = Caching(Echo(), answers, admission)
    asyncio.run(layer.send("k", req("a")))
    assert starts == [] and not admission.started_backend and admission.is_open


def test_a_failing_start_is_ignored_and_the_request_still_goes():
    async def start() -> None:
        raise RuntimeError("no SDK")

    admission = Admission(window=2, start=start)
    inner = Echo()
    got = asyncio.run(Caching(inner, None, admission).send("k", req("a")))
    assert got.text == "a" and inner.calls == 1 and admission.is_open


# ---- Admission: the window ----------------------------------------------------------------------
async def nothing() -> None:
    pass


def peak_beside_the_first(admission: Admission, cases: int, open_after: int | None = None) -> int:
    """The most cases evaluating at once while the first of `cases` admitted together still
    evaluates; the first opens the window (as its first lookup would) after `open_after` turns
    of the loop inside."""
    inside = peak = 0
    first_inside = True

    async def case(i: int) -> None:
        nonlocal inside, peak, first_inside
        async with admission.admitted():
            inside += 1
            for turn in range(10):
                if i == 0 and open_after == turn:
                    admission.open()
                if first_inside:
                    peak = max(peak, inside)
                await asyncio.sleep(0)
            if i == 0:
                first_inside = False
            inside -= 1

    async def main() -> None:
        await asyncio.gather(*(case(i) for i in range(cases)))

    asyncio.run(main())
    return peak


def test_the_window_holds_its_places_once_open():
    assert peak_beside_the_first(Admission(window=3, start=nothing, is_open=True), 10) == 3


def test_the_first_case_is_alone_until_the_window_opens():
    assert peak_beside_the_first(Admission(window=3, start=nothing), 10) == 1
    assert peak_beside_the_first(Admission(window=3, start=nothing), 10, open_after=1) == 3


def test_a_slow_first_case_opens_the_window_after_alone_s():
    admission = Admission(window=5, start=nothing)
    admission.alone_s = 0.02
    others: list[int] = []

    async def case(i: int, first_done: asyncio.Event) -> None:
        async with admission.admitted():
            if i == 0:
                await asyncio.wait_for(first_done.wait(), 5)  # only once the others have run
            else:
                others.append(i)
                if len(others) == 3:
                    first_done.set()

    async def main() -> None:
        done = asyncio.Event()
        await asyncio.gather(*(case(i, done) for i in range(4)))

    asyncio.run(main())
    assert sorted(others) == [1, 2, 3] and admission.is_open


def test_each_admitted_case_evaluates_in_the_given_context():
    import contextlib

    entered: list[str] = []

    @contextlib.contextmanager
    def evaluating():
        entered.append("in")
        yield
        entered.append("out")

    admission = Admission(window=2, start=nothing, is_open=True, evaluating=evaluating)

    async def main() -> None:
        async with admission.admitted():
            assert entered == ["in"]

    asyncio.run(main())
    assert entered == ["in", "out"]


# ---- Timed --------------------------------------------------------------------------------------
def test_timed_fills_only_a_latency_the_backend_did_not_measure():
    class Fixed:
        def __init__(self, latency: float) -> None:
            self.latency = latency

        async def send(self, key: str, request: Request) -> Response:
            await asyncio.sleep(0.02)
            return answer("x", latency_s=self.latency)

    assert asyncio.run(Timed(Fixed(0.0)).send("k", req("a"))).latency_s >= 0.02
    assert asyncio.run(Timed(Fixed(7.5)).send("k", req("a"))).latency_s == 7.5


# ---- Limited and the controller -----------------------------------------------------------------
def run_many(sender, n: int) -> list[Response]:
    async def main() -> list[Response]:
        return await asyncio.gather(*(sender.send(f"k{i}", req(str(i))) for i in range(n)))

    return asyncio.run(main())


def test_a_fixed_limit_bounds_the_requests_in_flight_and_is_filled():
    inner = Echo(delay=0.01)
    out = run_many(Limited(inner, 3), 12)
    assert [r.text for r in out] == [str(i) for i in range(12)] and inner.peak == 3


def test_an_adaptive_limit_follows_the_controller():
    aimd = Aimd(AimdSettings(start=2, maximum=64, slow_start=False))
    inner = Echo(delay=0.01)
    run_many(Limited(inner, 64, aimd), 10)
    assert inner.peak == 2  # the controller's size, not the 64 it may reach


def test_a_429s_pause_holds_new_requests_until_it_passes():
    aimd = Aimd(AimdSettings(start=4))
    layer = Limited(Echo(), 64, aimd)

    async def main() -> float:
        await layer.send("warm", req("w"))  # the semaphore exists
        aimd.on_rate_limited(0.1)
        layer.changed()
        start = time.perf_counter()
        await layer.send("k", req("a"))
        return time.perf_counter() - start

    assert asyncio.run(main()) >= 0.08


def test_concurrency_of_each_setting():
    assert concurrency_of(5, adaptive=True, default=8, settings=None) == (5, None)
    assert concurrency_of(0, adaptive=False, default=8, settings=None) == (1, None)
    assert concurrency_of(AUTO, adaptive=False, default=3, settings=None) == (3, None)
    no_default = concurrency_of(AUTO, adaptive=False, default=AUTO, settings=None)
    assert no_default == (AimdSettings().start, None)
    most, aimd = concurrency_of(AUTO, adaptive=True, default=AUTO, settings=AimdSettings(start=2))
    assert aimd is not None and most == aimd.settings.maximum and aimd.size == 2


# ---- BackendCall --------------------------------------------------------------------------------
def test_backend_call_counts_what_reached_the_backend_and_tells_of_answers():
    told: list[tuple[float, int]] = []
    inner = Echo(delay=0.01)
    call = BackendCall(lambda request: inner.send("", request), lambda s, n: told.append((s, n)))
    run_many(call, 5)
    assert (call.sent, call.in_flight, call.peak_in_flight) == (5, 0, 5)
    assert len(told) == 5 and all(s >= 0.01 for s, _ in told)
    assert sorted(n for _, n in told) == [1, 2, 3, 4, 5]  # in flight at return, itself included


def test_backend_call_counts_a_failure_as_sent_and_tells_nothing():
    told: list[tuple[float, int]] = []
    inner = Echo(fail=BackendError("down"))
    call = BackendCall(lambda request: inner.send("", request), lambda s, n: told.append((s, n)))
    with pytest.raises(BackendError):
        asyncio.run(call.send("k", req("a")))
    assert (call.sent, call.in_flight, told) == (1, 0, [])


# ---- Capped -------------------------------------------------------------------------------------
PRICED = ("openai", "gpt-4o")  # a model with a list price


def test_capped_records_the_cost_of_an_answer_and_nothing_of_a_failure():
    ledger = Ledger(100.0, "--max-cost test")
    spending = Spending(*PRICED, [ledger])
    asyncio.run(Capped(Echo(), spending).send("k", req("a")))
    assert ledger.recorded_usd == pytest.approx(spending.cost_usd(Usage(10, 5)))
    assert ledger.in_flight_usd == 0
    with pytest.raises(BackendError):
        asyncio.run(Capped(Echo(fail=BackendError("x")), spending).send("k", req("b")))
    assert ledger.recorded_usd == pytest.approx(spending.cost_usd(Usage(10, 5)))
    assert ledger.in_flight_usd == 0


def test_capped_counts_a_request_submitted_in_a_batch_as_spent():
    ledger = Ledger(100.0, "--max-cost test")
    spending = Spending(*PRICED, [ledger], batch=True)
    estimate = spending.estimate_usd(req("a"))
    for billed, recorded in [(False, 0.0), (True, estimate)]:
        ledger.recorded_usd = 0.0
        layer = Capped(Echo(fail=BatchPending("in batch", billed=billed)), spending)
        with pytest.raises(BatchPending):
            asyncio.run(layer.send("k", req("a")))
        assert ledger.recorded_usd == pytest.approx(recorded)


def test_capped_refuses_past_the_cap_without_sending():
    spending = Spending(*PRICED, [])
    ledger = Ledger(0.5 * spending.estimate_usd(req("a")), "--max-cost tiny")
    inner = Echo()
    with pytest.raises(SpendingCapReached, match="--max-cost tiny reached"):
        asyncio.run(Capped(inner, Spending(*PRICED, [ledger])).send("k", req("a")))
    assert inner.calls == 0


def test_capped_holds_a_request_while_in_flight_estimates_stand_in_the_way():
    spending = Spending(*PRICED, [])
    each = spending.estimate_usd(req("a"))
    ledger = Ledger(1.5 * each, "--max-cost one-at-a-time")
    inner = Echo(delay=0.01)
    out = run_many(Capped(inner, Spending(*PRICED, [ledger])), 2)
    assert [r.text for r in out] == ["0", "1"] and inner.peak == 1  # the second waited


# ---- MicroBatcher -------------------------------------------------------------------------------
def test_micro_batcher_cuts_at_max_batch_and_keeps_order():
    seen: list[int] = []

    async def run_batch(requests: list[Request]) -> list[Response]:
        seen.append(len(requests))
        await asyncio.sleep(0)
        return [answer((r.parts[0].text or "").upper()) for r in requests]

    batcher = MicroBatcher(run_batch, max_batch=4)

    async def main() -> list[Response]:
        return await asyncio.gather(*(batcher.submit(req(f"q{i}")) for i in range(10)))

    out = asyncio.run(main())
    assert [r.text for r in out] == [f"Q{i}" for i in range(10)]
    assert seen == batcher.batch_sizes == [4, 4, 2]


def test_micro_batcher_fails_every_waiter_of_a_short_batch():
    async def short(requests: list[Request]) -> list[Response]:
        return [answer("only one")]

    batcher = MicroBatcher(short, max_batch=8)

    async def main() -> list:
        return await asyncio.gather(
            *(batcher.submit(req(str(i))) for i in range(3)), return_exceptions=True
        )

    out = asyncio.run(main())
    assert all(isinstance(e, BackendError) and "1 responses for 3" in str(e) for e in out)


# ---- the batch API: Queued and the queue's store ------------------------------------------------
class EndedBatches(Backend):
    """A BatchApi whose batches have all ended: each key answered with its own text."""

    name, provider = "batchy", "openai"
    batch_limits = BatchLimits(requests=100, bytes=2**30)

    def __init__(self) -> None:
        self.identity = {"provider": "openai", "model": "batchy"}

    async def submit_batch(self, items: Sequence[tuple[str, Request]], nonce: str) -> str:
        raise AssertionError("nothing is submitted here")

    async def list_batches(self, since: float) -> AsyncIterator[ListedBatch]:
        for batch in ():
            yield batch

    async def batch_state(self, batch_id: str) -> BatchState:
        return BatchState("completed", "completed", 2, 2)

    async def batch_results(
        self, batch_id: str, keys: Sequence[str], nonce: str | None = None
    ) -> dict[str, Response | str]:
        return {key: answer(f"answer {key}", batch=True) for key in keys}


def earlier_batch(tmp_path, backend: EndedBatches) -> BatchRecords:
    records = BatchRecords(tmp_path / "batches")
    records.save(
        BatchRecord("openai", backend.name, dict(backend.identity), "b1", ["k1", "k2"], 0.0)
    )
    return records


def test_the_queue_stores_every_answer_it_collects_through_the_store_it_was_built_with(tmp_path):
    """A batch of an earlier run is collected whole: the key no case of this run asks for is
    stored too (else its paid answer would be lost, its record being marked collected)."""
    backend = EndedBatches()
    cache = ResponseCache(tmp_path / "c.sqlite")
    answers = AnswerCache(cache, backend.name)
    queue = BatchQueue(backend, earlier_batch(tmp_path, backend), store=answers.put)
    layer = Queued(queue)
    got = asyncio.run(layer.send("k1", req("q1")))
    assert got.text == "answer k1" and layer.sent == 1
    assert {k: cache.get(k).text for k in ("k1", "k2")} == {"k1": "answer k1", "k2": "answer k2"}


def test_queued_counts_only_the_requests_answered():
    class Pending:
        async def answer(self, key: str, request: Request) -> Response:
            raise BatchPending("in openai batch b2")

    layer = Queued(Pending())  # type: ignore[arg-type]
    with pytest.raises(BatchPending):
        asyncio.run(layer.send("k", req("a")))
    assert layer.sent == 0


def test_a_client_refuses_a_queue_that_would_drop_what_it_collects(tmp_path):
    backend = EndedBatches()
    queue = BatchQueue(backend, earlier_batch(tmp_path, backend))  # no store
    with pytest.raises(ValueError, match="store"):
        ModelClient(backend, ResponseCache(tmp_path / "c.sqlite"), 4, batches=queue)


def test_a_batch_client_counts_the_write_errors_of_its_queue(tmp_path):
    backend = EndedBatches()
    answers = AnswerCache(FullDisk(tmp_path / "f.sqlite"), backend.name)
    records = earlier_batch(tmp_path, backend)
    queue = BatchQueue(backend, records, mode="collect", store=answers.put)
    client = ModelClient(backend, answers, 4, batches=queue)

    async def main() -> Response:
        async with client.admitted():
            return await client.generate(req("q"))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWriteWarning)
        with pytest.raises(BatchPending, match="collect submits nothing"):  # not in that batch
            asyncio.run(main())
    assert client.cache_write_errors == 2 and client.stats()["cache_write_errors"] == 2


# ---- ModelClient's assembly ---------------------------------------------------------------------
class Local(Backend):
    """A batching backend (as a local engine): answers each request with its text."""

    name, max_batch, default_concurrency = "local", 4, 1

    def __init__(self) -> None:
        self.identity = {"provider": "local"}
        self.batches: list[int] = []

    async def generate_batch(self, requests: list[Request]) -> list[Response]:
        self.batches.append(len(requests))
        return [answer(r.parts[0].text or "") for r in requests]


def test_a_local_engine_is_batched_not_limited_and_timed():
    client = ModelClient(Local(), None, concurrency=1)

    async def main() -> list[Response]:
        return await asyncio.gather(*(client.generate(req(str(i))) for i in range(9)))

    out = asyncio.run(main())
    assert [r.text for r in out] == [str(i) for i in range(9)]
    assert client.batcher is not None and client.batcher.batch_sizes == [4, 4, 1]
    assert all(r.latency_s > 0 for r in out)
    stats = client.stats()
    assert (stats["sent"], stats["peak_in_flight"], stats["batches"]) == (9, 9, 3)
