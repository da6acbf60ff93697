"""`--concurrency auto`: the AIMD rules on a fake clock, the resizable semaphore, the loopback
server's rate limit, and one run through the OpenAI SDK against a rate-limited server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from api_runs import api_env, run_evaluation

from support.backends.base import Backend
from support.concurrency import (
    AdaptiveSemaphore,
    Aimd,
    AimdSettings,
    parse_concurrency,
    retry_after_s,
)
from support.engine import ModelClient
from support.testing.loopback import LoopbackServer, RateLimit, TokenBucket
from support.types import Request, Response

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-loopback-SECRET-aimd-4c1b"


class Clock:
    """A fake monotonic clock (seconds)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def saturated(aimd: Aimd, latency_s: float = 0.2) -> None:
    """One success while every place is taken."""
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


@pytest.mark.slow
def test_pointing_through_openai_against_a_rate_limited_server(synthetic_cholecseg8k, tmp_path):
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
        proc = run_evaluation("pointing", "openai:loop", tmp_path, "r", options, env=env)
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
