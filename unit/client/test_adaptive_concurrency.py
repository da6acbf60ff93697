"""`--concurrency auto`: the AIMD rules on a fake clock, the resizable semaphore, a simulated
server (a token bucket, an in-flight cap, both) on that clock, the loopback server's limits, and
one run through the OpenAI SDK against a rate-limited server."""

from __future__ import annotations

import asyncio
import heapq
import json
import random
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from support.backends.base import Backend
from support.backends.retry import retry_after_s
from support.client.concurrency import (
    AdaptiveSemaphore,
    Aimd,
    AimdSettings,
    parse_concurrency,
)
from support.client.engine import ModelClient
from support.doubles.loopback import InFlightCap, LoopbackServer, RateLimit, TokenBucket
from support.types import Request, Response
from unit.helpers.api_runs import api_env, run_evaluation

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-loopback-SECRET-aimd-4c1b"


class Clock:
    """A fake monotonic clock (seconds)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def saturated(aimd: Aimd, latency_s: float = 0.2) -> None:
    """One success while every place is taken; a fake clock moves on by `latency_s`, so that
    paced growth (one step per round trip / size) is due at the next answer."""
    if isinstance(aimd.clock, Clock):
        aimd.clock.now += latency_s
    aimd.on_success(latency_s, aimd.size)


def test_slow_start_doubles_per_window_until_the_first_429():
    aimd = Aimd(AimdSettings(start=4, decrease=0.5), clock=Clock())
    for _ in range(4 + 8):  # a window of 4, then one of 8
        saturated(aimd)
    assert aimd.size == 16
    aimd.on_rate_limited(None)
    assert aimd.size == 8
    for _ in range(8):  # after a cut: additive, one per window
        saturated(aimd)
    assert aimd.size == 9 and aimd.peak == 16


def test_grows_by_one_per_window_of_successes_while_in_use():
    aimd = Aimd(AimdSettings(start=4, maximum=64, slow_start=False), clock=Clock())
    for _ in range(4):  # a full window of 4 answers: +1
        saturated(aimd)
    assert aimd.size == 5
    for _ in range(5):
        saturated(aimd)
    assert aimd.size == 6 and aimd.peak == 6


def test_grows_slowly_back_towards_the_size_that_was_cut():
    aimd = Aimd(AimdSettings(start=10, decrease=0.5, probe_windows=3), clock=Clock())
    aimd.on_rate_limited(None)  # cut at 10, to 5
    for _ in range(5 + 6 + 7 + 8):  # one window each: 5 -> 9
        saturated(aimd)
    assert aimd.size == 9
    for _ in range(2 * 9):  # two windows of 9: not yet
        saturated(aimd)
    assert aimd.size == 9
    for _ in range(9):  # the third
        saturated(aimd)
    assert aimd.size == 10


def test_does_not_grow_when_demand_is_below_the_limit_or_latency_rises():
    aimd = Aimd(AimdSettings(start=4), clock=Clock())
    for _ in range(50):
        aimd.on_success(0.2, in_flight=2)  # two requests at a limit of four: nothing learnt
    assert aimd.size == 4
    saturated(aimd, 0.2)  # the fastest seen: 0.2 s
    before = aimd.limit
    for _ in range(50):
        saturated(aimd, 0.5)  # 2.5x the fastest: the server queues
    assert aimd.limit == before


def test_stops_at_the_maximum():
    aimd = Aimd(AimdSettings(start=4, maximum=6), clock=Clock())
    for _ in range(200):
        saturated(aimd)
    assert aimd.size == 6


def test_a_429_cuts_multiplicatively_and_pauses_for_retry_after():
    clock = Clock()
    aimd = Aimd(AimdSettings(start=16, decrease=0.5), clock=clock)
    aimd.on_rate_limited(1.5)
    assert (aimd.size, aimd.cuts, aimd.rate_limited) == (8, 1, 1)
    assert aimd.pause_left() == 1.5
    clock.now += 1.0
    assert aimd.pause_left() == 0.5
    clock.now += 0.5
    assert aimd.pause_left() == 0.0


def test_429s_within_a_round_trip_of_a_cut_cut_once():
    clock = Clock()
    aimd = Aimd(AimdSettings(start=16, decrease=0.5), clock=clock)
    saturated(aimd, 0.4)  # round trip 0.4 s
    aimd.on_rate_limited(None)
    clock.now += 0.1
    aimd.on_rate_limited(None)  # sent before the cut took effect
    aimd.on_rate_limited(0.05)
    assert (aimd.size, aimd.cuts, aimd.rate_limited) == (8, 1, 3)
    clock.now += 0.5  # a round trip later: a new 429 is news
    aimd.on_rate_limited(None)
    assert (aimd.size, aimd.cuts) == (4, 2)


def test_a_429_of_a_request_sent_before_the_last_cut_does_not_cut_again():
    clock = Clock()
    aimd = Aimd(AimdSettings(start=16, decrease=0.5), clock=clock)
    sent = clock.now
    clock.now += 1.0
    aimd.on_rate_limited(None, sent_at=sent)
    clock.now += 5.0  # long after: still sent before that cut
    aimd.on_rate_limited(None, sent_at=sent + 0.5)
    assert (aimd.size, aimd.cuts, aimd.rate_limited) == (8, 1, 2)
    aimd.on_rate_limited(None, sent_at=clock.now - 0.1)  # sent after the cut: news
    assert (aimd.size, aimd.cuts) == (4, 2)


def test_before_any_answer_a_retry_refused_again_does_not_cut_again():
    clock = Clock()
    aimd = Aimd(AimdSettings(start=8, decrease=0.5), clock=clock)  # no round trip known yet
    aimd.on_rate_limited(0.05, sent_at=clock.now)
    clock.now += 0.06  # the SDK's retry, after retry-after, is refused too
    aimd.on_rate_limited(0.05, sent_at=clock.now - 0.005)
    assert (aimd.size, aimd.cuts) == (4, 1)


def test_a_cut_removes_one_at_least():
    aimd = Aimd(AimdSettings(start=3, decrease=0.9), clock=Clock())
    aimd.on_rate_limited(None)
    assert aimd.size == 2


def test_never_below_the_minimum_and_a_long_retry_after_is_capped():
    clock = Clock()
    aimd = Aimd(AimdSettings(start=2, minimum=1, max_pause_s=30.0), clock=clock)
    for _ in range(10):
        aimd.on_rate_limited(3600.0)
        clock.now += 10.0
    assert aimd.size == 1
    assert aimd.pause_left() <= 30.0


def test_retry_after_headers():
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_s({"retry-after": "2"}) == 2.0
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # past
    assert retry_after_s({"retry-after": "soon"}) is None
    assert retry_after_s({}) is None


def test_parse_concurrency():
    assert parse_concurrency("auto") == "auto" and parse_concurrency(" 12 ") == 12
    for bad in ("0", "-3", "many", "2.5"):
        with pytest.raises(ValueError, match="--concurrency"):
            parse_concurrency(bad)


def test_semaphore_follows_the_limit_and_the_pause():
    async def main() -> list[int]:
        aimd = Aimd(AimdSettings(start=2, decrease=0.3), clock=Clock())
        sem = AdaptiveSemaphore(aimd)
        await sem.acquire()
        await sem.acquire()
        third = asyncio.ensure_future(sem.acquire())
        await asyncio.sleep(0)
        held = [sem.held, int(third.done())]  # full: the third waits
        aimd.limit = 3.0
        sem.changed()  # grown: admitted
        await asyncio.sleep(0)
        held += [sem.held, int(third.done())]
        aimd.on_rate_limited(None)  # cut to 1 (3 * 0.3): nobody new until two leave
        sem.release()
        sem.release()
        fourth = asyncio.ensure_future(sem.acquire())
        await asyncio.sleep(0)
        held += [sem.held, int(fourth.done())]
        sem.release()
        await asyncio.sleep(0)
        held += [sem.held, int(fourth.done())]
        return held

    assert asyncio.run(main()) == [2, 0, 3, 1, 1, 0, 1, 1]


def test_semaphore_waits_out_a_pause():
    async def main() -> bool:
        aimd = Aimd(AimdSettings(start=4))  # the real clock: a pause of 10 ms
        sem = AdaptiveSemaphore(aimd)
        aimd.on_rate_limited(0.01)
        waiting = asyncio.ensure_future(sem.acquire())
        await asyncio.sleep(0)
        paused = not waiting.done()
        await asyncio.wait_for(waiting, timeout=10)
        return paused

    assert asyncio.run(main())


def test_semaphore_adds_paced_growth_when_it_is_due():
    async def main() -> tuple[bool, bool, int]:
        aimd = Aimd(AimdSettings(start=3))  # the real clock
        sem = AdaptiveSemaphore(aimd)
        for _ in range(3):
            await sem.acquire()
        fourth = asyncio.ensure_future(sem.acquire())
        fifth = asyncio.ensure_future(sem.acquire())
        await asyncio.sleep(0)
        aimd.on_success(0.02, 3)  # slow start: a place now (the first step is due at once) ...
        aimd.on_success(0.02, 4)  # ... and one more, due a round trip / size (5 ms) later
        sem.changed()
        await asyncio.sleep(0)
        first = fourth.done() and not fifth.done()
        await asyncio.wait_for(fifth, timeout=10)  # the semaphore looks again when it is due
        return first, aimd.step_due_in() is None, sem.held

    assert asyncio.run(main()) == (True, True, 5)


def capped(aimd: Aimd, count: int, retry_after_s: float = 1.0) -> None:
    """`count` requests at the server and one more, refused by a cap on them: a 429 whose
    `retry-after` is longer than an answer (the fastest so far took 0.5 s)."""
    aimd.in_flight = count + 1
    aimd.on_rate_limited(retry_after_s, sent_at=aimd.clock())


def answered(aimd: Aimd, clock: Clock, latency_s: float = 0.5) -> None:
    """One answer while every place is taken, the clock on by a round trip / size (a full
    window of answers spread over a round trip)."""
    clock.now += latency_s / aimd.size
    aimd.in_flight = aimd.size
    aimd.on_success(latency_s, aimd.size)


def test_a_429_under_a_cap_pauses_until_an_answer_is_due_not_for_its_retry_after():
    clock = Clock()
    aimd = Aimd(AimdSettings(start=24), clock=clock)
    aimd.on_success(0.5, 0)  # a round trip of 0.5 s (no growth: nothing else in flight)
    capped(aimd, 24)
    assert aimd.pause_left() == pytest.approx(0.5 / 24)  # one of the 24 answered, on average
    alone = Aimd(AimdSettings(start=24), clock=clock)
    alone.on_success(0.5, 0)
    capped(alone, 0)  # nothing else at the server: nothing frees a place before retry-after
    assert alone.pause_left() == 1.0


def test_a_burst_of_429s_past_a_cap_ends_one_below_it():
    """32 in flight against a cap of 24: 8 refused at once. The first cuts by `decrease`; each
    next one counts those already waiting to retry out of the requests at the server, and the
    last leaves the limit at the cap (the 8 waiting hold places until they retry)."""
    clock = Clock()
    aimd = Aimd(AimdSettings(start=32), clock=clock)
    aimd.on_success(0.5, 0)
    aimd.in_flight = 32
    sizes = []
    for _ in range(8):
        aimd.on_rate_limited(1.0, sent_at=clock.now)
        sizes.append(aimd.size)
    assert sizes == [27, 27, 27, 27, 27, 26, 25, 24]  # 32 x 0.85, then counts 28, 27, 26, 25
    assert (aimd.cut_size, aimd.cuts, aimd.rate_limited) == (25, 1, 8)
    clock.now += 1.01  # the 8 retried: at the server again
    aimd.on_rate_limited(1.0, sent_at=clock.now - 2.0)  # sent before the cut: no news
    assert (aimd.size, aimd.cut_size, aimd.cuts) == (24, 25, 1)


def test_after_a_caps_cut_growth_is_paced_back_to_one_below_its_count_then_probes():
    clock = Clock()
    aimd = Aimd(AimdSettings(start=24, probe_windows=4), clock=clock)
    aimd.on_success(0.5, 0)
    capped(aimd, 24)  # refused at 25: 24 x 0.85 = 20
    assert (aimd.size, aimd.cut_size) == (20, 25)
    clock.now += 1.5  # the refused one retried
    for _ in range(6):  # a burst of answers: a place each, added one per round trip / size
        aimd.in_flight = aimd.size
        aimd.on_success(0.5, aimd.size)
    assert aimd.size == 21 and aimd.step_due_in() == pytest.approx(0.5 / 21)
    clock.now += 0.5 / 21
    assert aimd.size == 22  # due: paid
    answers = 0
    while aimd.size < 24 and answers < 100:
        answered(aimd, clock)
        answers += 1
    assert aimd.size == 24 and answers <= 4  # one below the count the cap refused at
    answers = 0
    while aimd.size == 24 and answers < 1000:  # then a probe past it
        answered(aimd, clock)
        answers += 1
    assert aimd.size == 25 and abs(answers - 4 * 24) <= 1  # after probe_windows round trips


def test_a_probe_that_fails_where_the_last_cut_was_waits_twice_as_long_next_time():
    clock = Clock()
    aimd = Aimd(AimdSettings(start=24, probe_windows=2), clock=clock)
    aimd.on_success(0.5, 0)
    capped(aimd, 24)
    clock.now += 1.5
    while aimd.size < 24:
        answered(aimd, clock)

    def answers_to_grow() -> int:
        size, n = aimd.size, 0
        while aimd.size == size and n < 1000:
            answered(aimd, clock)
            n += 1
        return n

    assert answers_to_grow() == 2 * 24  # 2 round trips: a probe, to 25
    capped(aimd, 24)  # it failed where the last cut was: back to 24, no deeper
    assert (aimd.size, aimd.cut_size, aimd.cuts) == (24, 25, 2)
    clock.now += 1.5
    assert answers_to_grow() == 4 * 24  # twice as long
    assert answers_to_grow() == 2 * 25  # it held: the next after half as many


def test_a_rates_429_that_ends_slow_start_halves_and_grows_back_a_place_a_round_trip():
    clock = Clock()
    aimd = Aimd(AimdSettings(start=16), clock=clock)
    aimd.on_success(0.3, 0)  # the fastest answer: 0.3 s
    aimd.in_flight = 16
    aimd.on_rate_limited(0.05, sent_at=clock.now)  # a bucket's next token, sooner than an answer
    assert (aimd.size, aimd.cut_size) == (8, 16)  # slow start doubled: half, and no count
    assert aimd.pause_left() == pytest.approx(0.3 / 15)  # one of 15 others answered, on average
    for _ in range(8):
        saturated(aimd, 0.3)
    assert aimd.size == 9  # a round trip (a window of 8 answers): one more


class SimulatedServer:
    """A server on a fake clock, and a model client before it: `concurrency` requests in flight
    (a number, or "auto": an Aimd on that clock, its size, pauses and paced growth as
    AdaptiveSemaphore follows them), each 429 retried by the SDK after its `retry-after` in the
    same place, each answer `latency_s` x (1 to 1.1) later (seeded). The server refuses past its
    token bucket (`rate`, `burst`; retry-after: the next token, in whole ms) and then past `cap`
    requests being served (retry-after: `cap_retry_after_s`). Deterministic."""

    def __init__(self, concurrency: int | str, latency_s: float, cap: int | None = None,
                 cap_retry_after_s: float = 1.0, rate: float | None = None, burst: int = 1,
                 ) -> None:  # fmt: skip
        self.clock = Clock()
        self.aimd = Aimd(clock=self.clock) if concurrency == "auto" else None
        self.fixed = concurrency if isinstance(concurrency, int) else 0
        self.latency_s, self.cap, self.cap_retry_after_s = latency_s, cap, cap_retry_after_s
        self.bucket = TokenBucket(RateLimit(rate, burst), self.clock) if rate else None
        self.rng = random.Random(0)
        self.events: list[tuple[float, int, object, tuple]] = []
        self.seq = self.pending = self.held = self.serving = 0
        self.attempts = self.refused = self.answered = 0
        self.waking = False
        self.last_answer_at = 0.0

    def run(self, n: int) -> tuple[float, float]:
        """`n` requests at once: (answers a second, share of requests answered 429)."""
        self.pending = n
        start = self.clock.now
        self._admit()
        while self.events:
            self.clock.now, _, action, args = heapq.heappop(self.events)
            action(*args)  # type: ignore[operator]
        assert self.answered == n
        return n / (self.last_answer_at - start), self.refused / self.attempts

    def _at(self, when: float, action: object, *args: object) -> None:
        self.seq += 1
        heapq.heappush(self.events, (when, self.seq, action, args))

    def _size(self) -> int:
        return self.aimd.size if self.aimd is not None else self.fixed

    def _admit(self) -> None:
        aimd, now = self.aimd, self.clock.now
        wait = aimd.pause_left() if aimd is not None else 0.0
        if not wait:
            while self.pending and self.held < self._size():
                self.pending -= 1
                self.held += 1
                if aimd is not None:
                    aimd.in_flight = self.held
                self._at(now + 0.002, self._arrive, now)  # 2 ms to the server
            wait = aimd.step_due_in() if aimd is not None else None
        if wait is not None and self.pending and not self.waking:
            self.waking = True
            self._at(now + max(wait, 1e-6), self._wake)

    def _wake(self) -> None:
        self.waking = False
        self._admit()

    def _arrive(self, started: float) -> None:
        now = self.clock.now
        self.attempts += 1
        wait = self.bucket.take() if self.bucket is not None else 0.0
        if wait <= 0.0 and self.cap is not None and self.serving >= self.cap:
            wait = self.cap_retry_after_s
        if wait > 0.0:
            wait = max(0.001, round(wait, 3))
            self.refused += 1
            if self.aimd is not None:
                self.aimd.on_rate_limited(wait, sent_at=now)
            self._admit()
            self._at(now + wait, self._arrive, started)  # the SDK's retry, in the same place
            return
        self.serving += 1
        self._at(now + self.latency_s * (1 + 0.1 * self.rng.random()), self._answer, started)

    def _answer(self, started: float) -> None:
        self.serving -= 1
        if self.aimd is not None:
            self.aimd.on_success(self.clock.now - started, self.held)
        self.held -= 1
        if self.aimd is not None:
            self.aimd.in_flight = self.held
        self.answered += 1
        self.last_answer_at = self.clock.now
        self._admit()


def against_the_best_fixed(fixed: tuple[int, ...], n: int, **server: object) -> tuple:
    """(auto's answers a second over the best fixed setting's, auto's share answered 429, the
    controller's size at the end)."""
    sim = SimulatedServer("auto", **server)  # type: ignore[arg-type]
    auto, share = sim.run(n)
    best = max(SimulatedServer(c, **server).run(n)[0] for c in fixed)  # type: ignore[arg-type]
    assert sim.aimd is not None
    return auto / best, share, sim.aimd.size


def test_simulated_in_flight_cap_auto_settles_just_under_it():
    """The issue's server: 24 served at once at 0.5 s, 429 with retry-after 1 s past them, 360
    requests. Pausing every send for the retry-after, and regrowing slowly, reached 0.77 of a
    fixed 24 here (0.86 over 1,440 requests). Here a fixed 24 pays nothing for the client's own
    work, so auto's slow start from 8 (a round trip at 8, one at 16) alone costs ~6% of 360;
    over 1,440 it is amortized."""
    server = {"latency_s": 0.5, "cap": 24, "cap_retry_after_s": 1.0}
    ratio, share, size = against_the_best_fixed((16, 20, 22, 24), 360, **server)
    assert ratio >= 0.88 and share < 0.05
    assert size in (23, 24, 25)  # where the cap is (25: probing past it)
    ratio, share, size = against_the_best_fixed((16, 20, 22, 24), 1440, **server)
    assert ratio >= 0.95 and share < 0.01 and size in (23, 24, 25)


def test_simulated_token_bucket_auto_stays_near_the_best_fixed():
    """The benchmark's bucket: 20 requests/s, burst 5, 0.3 s an answer (6 in flight saturate).
    The old rules: 0.97 of the best fixed, 5.1% answered 429."""
    ratio, share, size = against_the_best_fixed((6, 7, 8), 300, latency_s=0.3, rate=20, burst=5)
    assert ratio >= 0.9 and share < 0.05
    assert 5 <= size <= 8


def test_simulated_bucket_and_cap_auto_stays_near_the_best_fixed():
    """A bucket of 40 requests/s (burst 24) before a cap of 24 at 0.5 s (48/s): the bucket binds
    on average, the cap on bursts. The old rules: 0.84 of the best fixed, 14% answered 429."""
    ratio, share, _ = against_the_best_fixed(
        (16, 20, 24), 360, latency_s=0.5, cap=24, rate=40, burst=24
    )
    assert ratio >= 0.9 and share < 0.05


class RateLimitedBackend(Backend):
    """Reports a 429 on its first call, then answers."""

    name = "fake"
    default_concurrency = "auto"

    def __init__(self) -> None:
        self.identity = {"provider": "fake"}
        self.rate_limit_listeners: list = []
        self.calls = 0

    async def generate(self, request: Request) -> Response:
        self.calls += 1
        if self.calls == 1:
            for listener in self.rate_limit_listeners:
                listener(0.0)
        return Response(texts=("ok",), model=self.name)


def test_model_client_counts_429s_and_reports_them():
    backend = RateLimitedBackend()
    client = ModelClient(backend, None, concurrency="auto", aimd=AimdSettings(start=8))
    for i in range(3):
        asyncio.run(client.generate(Request(parts=(), system=f"q{i}")))
    stats = client.stats()
    assert stats["concurrency"] == "auto" and stats["rate_limited"] == 1
    assert stats["concurrency_cuts"] == 1 and stats["concurrency_reached"] == 8
    fixed = ModelClient(RateLimitedBackend(), None, concurrency=5)
    asyncio.run(fixed.generate(Request(parts=())))
    assert fixed.stats()["concurrency"] == 5 and fixed.stats()["rate_limited"] == 1


def test_auto_without_429_reports_is_the_backends_fixed_default():
    class Local(Backend):
        name = "local"
        default_concurrency = 3

        def __init__(self) -> None:
            self.identity = {"provider": "local"}

    assert ModelClient(Local(), None, concurrency="auto").aimd is None
    assert ModelClient(Local(), None, concurrency="auto").concurrency == 3


def test_token_bucket_on_a_fake_clock():
    clock = Clock()
    bucket = TokenBucket(RateLimit(per_s=10.0, burst=2), clock=clock)
    assert bucket.take() == 0.0 and bucket.take() == 0.0
    assert bucket.take() == pytest.approx(0.1)  # empty: a token in 0.1 s
    clock.now += 0.05
    assert bucket.take() == pytest.approx(0.05)
    clock.now += 0.06
    assert bucket.take() == 0.0
    with pytest.raises(ValueError):
        TokenBucket(RateLimit(per_s=0.0))


def test_loopback_answers_429_with_retry_after_past_its_rate():
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    limit = RateLimit(per_s=0.5, burst=1)  # one now, the next in 2 s
    with LoopbackServer(lambda r: "a", api_key=KEY, rate_limit=limit, lifetime_s=30) as server:
        codes, headers = [], []
        for _ in range(2):
            req = urllib.request.Request(
                server.url + "/v1/chat/completions",
                data=body,
                headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    codes.append(resp.status)
            except urllib.error.HTTPError as exc:
                codes.append(exc.code)
                headers.append(exc.headers)
        stats = server.stats_json()
    assert codes == [200, 429]
    assert 0 < float(headers[0]["retry-after"]) <= 2.0
    assert 0 < int(headers[0]["retry-after-ms"]) <= 2000
    assert stats["rate_limited"] == 1 and stats["answered"] == 1


def post_chat(url: str) -> tuple[int, Any]:
    """One chat completion posted to the loopback at `url`: (status, the headers of an error)."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = urllib.request.Request(
        url + "/v1/chat/completions",
        data=body,
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers


def given_back(server: LoopbackServer, timeout_s: float = 30) -> None:
    """Until the server has given back every place under its in-flight cap: it does so after
    writing the answer (do_POST's finally), so a client can read its answer first."""
    deadline = time.monotonic() + timeout_s
    while server.serving and time.monotonic() < deadline:
        time.sleep(0.01)


def test_loopback_answers_429_past_its_in_flight_cap():
    cap = InFlightCap(2, retry_after_s=1.5)

    def post(url: str, out: list) -> None:
        out.append(post_chat(url))

    with LoopbackServer(
        lambda r: "a", api_key=KEY, latency_s=0.5, in_flight_cap=cap, lifetime_s=30
    ) as server:
        served: list = []
        threads = [threading.Thread(target=post, args=(server.url, served)) for _ in range(2)]
        for t in threads:
            t.start()
        for _ in range(500):  # until both are being served
            if server.serving == 2:
                break
            time.sleep(0.01)
        third: list = []
        post(server.url, third)  # a third while the two are served: refused at once
        for t in threads:
            t.join()
        given_back(server)
        post(server.url, third)  # their places given back: answered
        given_back(server)
        stats = server.stats_json()
    assert sorted(code for code, _ in served) == [200, 200]
    assert [code for code, _ in third] == [429, 200]
    headers = third[0][1]
    assert headers["retry-after"] == "1.5" and headers["retry-after-ms"] == "1500"
    assert stats["in_flight_limited"] == 1 and stats["rate_limited"] == 0
    assert stats["answered"] == 3 and stats["attempts"] == 4 and server.serving == 0


def test_loopback_command_line_in_flight_cap():
    """`--in-flight-cap N --in-flight-retry-after S`, as the benchmark starts it."""
    from support.doubles.loopback import server_process

    options = ("--latency", "0.5", "--in-flight-cap", "1", "--in-flight-retry-after", "0.25")
    with server_process("ok", KEY, *options, lifetime_s=60) as url:

        def post() -> int | str:
            status, headers = post_chat(url)
            return status if headers is None else f"{status} {headers['retry-after']}"

        first: list = []
        thread = threading.Thread(target=lambda: first.append(post()))
        thread.start()
        time.sleep(0.2)  # the first is being served (0.5 s)
        second = post()
        thread.join()
        with urllib.request.urlopen(f"{url}/_loopback/stats", timeout=10) as resp:
            stats = json.loads(resp.read())
    assert first == [200] and second == "429 0.25"
    assert stats["in_flight_limited"] == 1


@pytest.mark.slow
def test_pointing_through_openai_against_a_rate_limited_server(
    synthetic_cholecseg8k, shared_cache, tmp_path
):
    """60 requests, 8 at first, against 40 requests/s: 429s come back through the SDK's own
    retries, the limit is cut, and every case is scored."""
    pytest.importorskip("openai")
    limit = RateLimit(per_s=40.0, burst=2)
    with LoopbackServer(
        lambda r: "no answer", api_key=KEY, latency_s=0.05, rate_limit=limit, lifetime_s=240
    ) as server:
        options = [
            f"--api-base={server.url}",
            "--api-retries=20",
            f"--cholecseg8k={synthetic_cholecseg8k}",
            "-k",
            "zero_shot",
            "-v",
        ]
        env = api_env({"OPENAI_API_KEY": KEY})
        proc = run_evaluation(
            "pointing", "openai:loop", tmp_path, "r", options, env=env, shared_cache=shared_cache
        )
        seen = server.stats_json()
    assert proc.returncode == 0, proc.stdout[-3000:]
    rows = (tmp_path / "results" / "pointing" / "r" / "raw_results.jsonl").read_text()
    outcomes = [json.loads(line) for line in rows.splitlines()]
    assert len(outcomes) == 60 and all(o["status"] != "error" for o in outcomes)
    assert seen["answered"] == 60 and seen["rate_limited"] > 0
    manifest = json.loads((tmp_path / "results" / "pointing" / "r" / "manifest.json").read_text())
    model = manifest["models"]["openai:loop"]
    assert model["rate_limited"] == seen["rate_limited"]  # every 429 the SDK retried was seen
    assert model["concurrency_reached"] >= 8
    assert engine_cell(proc.stdout, "concurrency") == "auto"
    assert int(engine_cell(proc.stdout, "concurrency_cuts")) >= 1  # it reacted
    assert KEY not in proc.stdout


def engine_cell(stdout: str, column: str) -> str:
    """A cell of the engine table (`-v`) of the run's one model."""
    lines = stdout.split("vlmbench: engine (per process and model)", 1)[1].splitlines()
    table = [line for line in lines if line.startswith("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    row = [c.strip() for c in table[2].strip("|").split("|")]
    return row[header.index(column)]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "google"])
def test_each_sdk_reports_every_429_it_retries(provider):
    """The SDK retries a 429 itself; its HTTP client's hook tells the client of each one."""
    from support.backends.anthropic_messages import AnthropicBackend
    from support.backends.gemini import GeminiBackend
    from support.backends.openai_chat import OpenAIChatBackend

    made = {"openai": OpenAIChatBackend, "anthropic": AnthropicBackend, "google": GeminiBackend}
    limit = RateLimit(per_s=20.0, burst=1)
    with LoopbackServer(lambda r: "a", api_key=KEY, rate_limit=limit, lifetime_s=60) as server:
        url = server.url + "/v1" if provider == "openai" else server.url
        backend = made[provider]("m", "loop-model", api_key=KEY, base_url=url, max_retries=20)
        client = ModelClient(backend, None, concurrency="auto")

        async def main() -> list[Response]:
            try:
                requests = [Request(parts=(), system=f"q{i}") for i in range(12)]
                return await asyncio.gather(*(client.generate(r) for r in requests))
            finally:
                await client.aclose()

        answers = asyncio.run(main())
        seen = server.stats_json()
    assert [a.texts for a in answers] == [("a",)] * 12
    assert seen["rate_limited"] > 0 and client.rate_limited == seen["rate_limited"]
    assert client.aimd is not None and client.aimd.cuts >= 1


@pytest.mark.slow
def test_a_bad_concurrency_is_a_usage_error_naming_the_option(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "evals" / "pointing"), f"--rootdir={REPO}",
         "--concurrency=lots", "--collect-only", "-p", "no:cacheprovider",
         f"--cache-dir={tmp_path}", f"--results-dir={tmp_path}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 4
    assert "--concurrency 'lots': expected a positive integer or 'auto'" in proc.stderr
