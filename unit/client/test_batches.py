"""`--batch` (support/client/batch_queue.py): model clients answering through each vendor's batch
API, by their real SDKs, against the loopback server's batch endpoints (127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from PIL import Image

from support.backends.base import BackendError
from support.backends.batch_protocol import BatchLimits
from support.backends.registry import BackendOptions, create_backend
from support.client.batch_queue import BatchPending, BatchQueue, BatchRecords, chunks
from support.client.caching import AnswerCache
from support.client.engine import ModelClient
from support.client.response_cache import ResponseCache
from support.client.spending import Ledger, Spending, SpendingCapReached
from support.doubles.loopback import Faults, LoopbackServer, ScriptRequest
from support.doubles.loopback_batches import BatchPlan
from support.types import Part, Request, Response

KEY = "k-batches-5f3e2a91"
ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "google": "GEMINI_API_KEY"}
PROVIDERS = ["openai", "anthropic", "google"]
POLL_S = 0.01  # seconds between status reads: the loopback batches end by poll count


def echo(r: ScriptRequest) -> str:
    return f"{r.model}|{'/'.join(r.texts)}|{r.n_images}"


def server(**kw) -> LoopbackServer:
    return LoopbackServer(echo, api_key=KEY, lifetime_s=60, **kw)


def base_url(provider: str, s: LoopbackServer) -> str:
    return s.url + "/v1" if provider == "openai" else s.url  # OpenAI's base holds the version


def make_client(
    provider: str,
    s: LoopbackServer,
    tmp: Path,
    mode: str | None = "wait",
    monkeypatch: pytest.MonkeyPatch | None = None,
    model: str = "m-x",
    spending: Spending | None = None,
) -> ModelClient:
    """A model client of `provider` on the loopback server; its cache and records in tmp."""
    assert monkeypatch is not None
    monkeypatch.setenv(ENV[provider], KEY)
    opts = BackendOptions(api_base=base_url(provider, s), max_retries=2, timeout_s=10)
    backend = create_backend(f"{provider}:{model}", opts)
    cache = AnswerCache(ResponseCache(tmp / "cache" / "responses.sqlite"), backend.name)
    queue = None
    if mode is not None:
        records = BatchRecords(tmp / "cache" / "batches")
        queue = BatchQueue(
            backend, records, mode=mode, poll_s=POLL_S, settle_s=0.05, store=cache.put
        )
    return ModelClient(backend, cache, concurrency=4, batches=queue, spending=spending)


def request(i: int, stage: str = "q", n: int = 1) -> Request:
    image = Part.of_image(Image.new("RGB", (8 + i % 7, 8), (i % 256, 0, 0)))
    return Request(parts=(Part.of_text(f"{stage}{i}"), image), max_tokens=9, n=n)


async def one_case(client: ModelClient, i: int, stages: int = 1, n: int = 1) -> list[str] | str:
    """A case of `stages` requests, each quoting the answer before it (as pgt's stage 2 does)."""
    texts: list[str] = []
    try:
        async with client.admitted():
            stage = "q"
            for _ in range(stages):
                response = await client.generate(request(i, stage, n))
                texts.append("+".join(response.texts))
                stage = f"after[{response.text}]"
    except (BackendError, BatchPending, SpendingCapReached) as exc:
        return f"{type(exc).__name__}: {exc}"
    return texts


def run_cases(client: ModelClient, count: int, stages: int = 1, n: int = 1) -> list:
    async def scenario() -> list:
        try:
            return await asyncio.wait_for(
                asyncio.gather(*(one_case(client, i, stages, n) for i in range(count))), 30
            )
        finally:
            await client.aclose()

    return asyncio.run(scenario())


def synchronous(provider: str, s, tmp, monkeypatch, count: int, stages: int = 1, n: int = 1):
    client = make_client(provider, s, tmp / "sync", None, monkeypatch)
    return run_cases(client, count, stages, n)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_round_is_one_batch_with_the_synchronous_answers(provider, tmp_path, monkeypatch):
    with server(batches=BatchPlan(polls=2)) as s:
        client = make_client(provider, s, tmp_path, "wait", monkeypatch)
        got = run_cases(client, 6)
        stats = s.stats_json()
        assert stats["attempts"] == 0  # no synchronous request
        assert s.batch_store.created == 1 and stats["batch_items"] == 6
        assert got == synchronous(provider, s, tmp_path, monkeypatch, 6)
    cache = ResponseCache(tmp_path / "cache" / "responses.sqlite")
    assert len(cache) == 6
    key = client.key(request(0))
    assert cache.get(key).batch and cache.get(key).usage.input_tokens > 0
    (record,) = client.batches.collected
    assert record["ended"] == "completed" and record["answered"] == 6


@pytest.mark.parametrize("provider", PROVIDERS)
def test_two_stage_cases_advance_one_stage_per_batch(provider, tmp_path, monkeypatch):
    with server(batches=BatchPlan(polls=1)) as s:
        got = run_cases(make_client(provider, s, tmp_path, "wait", monkeypatch), 5, stages=2)
        assert s.batch_store.created == 2  # stage 1 of every case, then stage 2 of every case
        assert [len(b.items) for b in s.batch_store.batches.values()] == [5, 5]
        assert s.stats_json()["attempts"] == 0
        assert got == synchronous(provider, s, tmp_path, monkeypatch, 5, stages=2)


def test_anthropic_samples_are_items_of_one_request(tmp_path, monkeypatch):
    """The Messages API has no `n`: each sample is an item; they come back as one Response."""
    with server() as s:
        got = run_cases(make_client("anthropic", s, tmp_path, "wait", monkeypatch), 3, n=3)
        assert s.stats_json()["batch_items"] == 9
        assert got == synchronous("anthropic", s, tmp_path, monkeypatch, 3, n=3)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_failed_items_are_errors_never_cached_and_sent_again(provider, tmp_path, monkeypatch):
    with server(faults=Faults(rate=0.3, seed=4), batches=BatchPlan(polls=0)) as s:
        first = run_cases(make_client(provider, s, tmp_path, "wait", monkeypatch), 12)
        failed = [i for i, r in enumerate(first) if isinstance(r, str)]
        assert 0 < len(failed) < 12
        assert all("failed in batch" in first[i] and "sends it again" in first[i] for i in failed)
        assert len(ResponseCache(tmp_path / "cache" / "responses.sqlite")) == 12 - len(failed)
        again = make_client(provider, s, tmp_path, "wait", monkeypatch)
        second = run_cases(again, 12)
        assert again.cache_hits == 12 - len(failed)
        assert [len(b.items) for b in s.batch_store.batches.values()][-1] == len(failed)
        assert not any(isinstance(r, str) for r in second)
        assert s.stats_json()["attempts"] == 0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_expired_batch_keeps_its_answers_and_its_rest_is_sent_again(
    provider, tmp_path, monkeypatch
):
    plans = [BatchPlan(polls=1, ends="expired", done_before_end=4), BatchPlan(polls=0)]
    with server(batches=plans) as s:
        first = run_cases(make_client(provider, s, tmp_path, "wait", monkeypatch), 10)
        lost = [r for r in first if isinstance(r, str)]
        expected = 10 if provider == "google" else 6  # Gemini returns nothing of an expired job
        assert len(lost) == expected and all("expired before answering" in r for r in lost)
        second = run_cases(make_client(provider, s, tmp_path, "wait", monkeypatch), 10)
        assert not any(isinstance(r, str) for r in second)
        assert len(list(s.batch_store.batches.values())[-1].items) == expected


@pytest.mark.parametrize("provider", PROVIDERS)
def test_submit_then_collect(provider, tmp_path, monkeypatch):
    with server(batches=BatchPlan(polls=1)) as s:
        submitted = run_cases(make_client(provider, s, tmp_path, "submit", monkeypatch), 4)
        assert all(r.startswith("BatchPending: in ") for r in submitted)
        assert s.batch_store.created == 1
        (path,) = (tmp_path / "cache" / "batches").glob("*/*.json")
        record = json.loads(path.read_text())
        assert record["state"] == "submitted" and len(record["keys"]) == 4
        # read once (in progress): still pending, nothing sent again
        early = run_cases(make_client(provider, s, tmp_path, "collect", monkeypatch), 4)
        assert all("rerun with --batch collect" in r for r in early)
        assert s.batch_store.created == 1
        done = run_cases(make_client(provider, s, tmp_path, "collect", monkeypatch), 4)
        assert done == synchronous(provider, s, tmp_path, monkeypatch, 4)
        assert json.loads(path.read_text())["state"] == "collected"
        assert s.stats_json()["batch_items"] == 4
        rerun = make_client(provider, s, tmp_path, "wait", monkeypatch)
        assert run_cases(rerun, 4) == done and rerun.cache_hits == 4 and rerun.sent == 0


def test_collect_submits_nothing_and_wait_joins_a_pending_batch(tmp_path, monkeypatch):
    with server(batches=BatchPlan(polls=3)) as s:
        nothing = run_cases(make_client("openai", s, tmp_path, "collect", monkeypatch), 3)
        assert all("--batch collect submits nothing" in r for r in nothing)
        assert s.batch_store.created == 0
        run_cases(make_client("openai", s, tmp_path, "submit", monkeypatch), 3)
        waited = run_cases(make_client("openai", s, tmp_path, "wait", monkeypatch), 3)
        assert s.batch_store.created == 1  # the pending batch was waited on, not sent again
        assert not any(isinstance(r, str) for r in waited)


def test_a_refused_batch_fails_its_requests_only(tmp_path, monkeypatch):
    """A batch the provider refuses whole (here: the key is wrong) is an error of its cases."""
    with server() as s:
        client = make_client("openai", s, tmp_path, "wait", monkeypatch)
        client.backend._api_key = "wrong-key-0123456789"
        got = run_cases(client, 3)
        assert all(r.startswith("BackendError") and "batch not submitted" in r for r in got)
        assert "wrong-key-0123456789" not in " ".join(got)
        assert not list((tmp_path / "cache" / "batches").glob("*/*.json"))


def test_chunks_keep_order_within_the_limits():
    reqs = [(str(i), request(i)) for i in range(7)]
    size = len(request(0).parts[1].image) * 3 + 2200  # about two requests
    cut = list(chunks(reqs, BatchLimits(requests=3, bytes=size * 10)))
    assert [[k for k, _ in c] for c in cut] == [["0", "1", "2"], ["3", "4", "5"], ["6"]]
    cut = list(chunks(reqs, BatchLimits(requests=100, bytes=size)))
    assert sum(len(c) for c in cut) == 7 and all(1 <= len(c) <= 2 for c in cut)


def test_response_json_marks_batch_answers_only():
    plain = Response(texts=("a",), model="m")
    assert "batch" not in plain.to_json()
    marked = Response(texts=("a",), model="m", batch=True)
    assert Response.from_json(marked.to_json()).batch


@pytest.mark.parametrize("mode", ["wait", "submit"])
def test_a_cap_prices_batches_at_the_batch_price_and_never_waits(mode, tmp_path, monkeypatch):
    """A cap of 2.5 requests at the batch price: two go in the batch, the rest are refused at
    once (a batch's requests stay in flight until it ends: waiting for them would stall the
    round); a submitted request counts as spent."""
    probe = Spending("openai", "gpt-4o", [], batch=True)
    each = probe.estimate_usd(request(0))
    assert each == pytest.approx(Spending("openai", "gpt-4o", []).estimate_usd(request(0)) / 2)
    ledger = Ledger(2.5 * each, "--max-cost test")
    spending = Spending("openai", "gpt-4o", [ledger], batch=True)
    with server() as s:
        client = make_client("openai", s, tmp_path, mode, monkeypatch, "gpt-4o", spending)
        got = run_cases(client, 5)
        assert sum(isinstance(r, str) and "SpendingCapReached" in r for r in got) == 3
        assert [len(b.items) for b in s.batch_store.batches.values()] == [2]
    if mode == "submit":
        assert ledger.recorded_usd == pytest.approx(2 * each)
    else:
        assert 0 < ledger.recorded_usd <= 2 * each and ledger.in_flight_usd == 0


def test_a_round_past_the_limits_goes_as_several_batches(tmp_path, monkeypatch):
    with server() as s:
        client = make_client("openai", s, tmp_path, "wait", monkeypatch)
        client.backend.batch_limits = BatchLimits(requests=2, bytes=2**30)
        got = run_cases(client, 5)
        assert sorted(len(b.items) for b in s.batch_store.batches.values()) == [1, 2, 2]
        assert got == synchronous("openai", s, tmp_path, monkeypatch, 5)
        assert len(client.batches.collected) == 3 and s.stats_json()["attempts"] == 5


def test_an_answer_collected_is_kept_when_the_cache_cannot_store_it(tmp_path, monkeypatch):
    """A batch of an earlier run collected at start: a failing cache write (a full disk) costs
    the cache entry only; the answer is served, warned once, never submitted again."""
    import sqlite3

    from support.client.engine import CacheWriteWarning

    with server(batches=BatchPlan(polls=0)) as s:
        run_cases(make_client("openai", s, tmp_path, "submit", monkeypatch), 3)
        client = make_client("openai", s, tmp_path, "wait", monkeypatch)

        def full(key, response):
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(client.cache, "put", full)
        with pytest.warns(CacheWriteWarning, match="not stored"):
            got = run_cases(client, 3)
        assert got == synchronous("openai", s, tmp_path, monkeypatch, 3)
        assert s.batch_store.created == 1 and client.cache_write_errors == 3
