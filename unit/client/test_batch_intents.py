"""Never paid twice under `--batch` (issue 34): a run killed after the provider created a batch
and before its record was written leaves an intent; the next run finds the batch in the
provider's list by the intent's nonce, collects it and sends nothing again (all three SDKs
against the loopback's batch endpoints, 127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import json

import pytest

from support.client import batch_queue as batches
from support.client.batch_queue import BatchRecords
from support.doubles.loopback_batches import BatchPlan
from unit.client.test_batches import (
    PROVIDERS,
    make_client,
    one_case,
    run_cases,
    server,
    synchronous,
)

COUNT = 4  # cases (one request each) of the killed round


class Killed(BaseException):
    """The process dying right after the provider created the batch (nothing after runs)."""


def killed_run(provider, s, tmp, monkeypatch) -> None:
    """A run whose round is submitted and that dies before the record is written."""

    def die(self, record):
        raise Killed

    async def scenario() -> None:
        client = make_client(provider, s, tmp, "wait", monkeypatch)
        tasks = [asyncio.ensure_future(one_case(client, i)) for i in range(COUNT)]
        for _ in range(1000):  # until the batch exists at the loopback (10 s at most)
            if s.batch_store.created:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # the save, the Killed
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.aclose()

    with monkeypatch.context() as m:
        m.setattr(BatchRecords, "save", die)
        asyncio.run(scenario())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batch_created_before_a_kill_is_collected_not_sent_again(provider, tmp_path, monkeypatch):
    with server(batches=BatchPlan(polls=1)) as s:
        killed_run(provider, s, tmp_path, monkeypatch)
        assert s.batch_store.created == 1
        assert not list((tmp_path / "cache" / "batches").glob("*/*.json"))  # no record
        # another session's batches, newer, so that the rerun's list has to page to find it
        run_cases(make_client(provider, s, tmp_path / "other", "wait", monkeypatch), 2)
        s.batch_store.page_cap = 1
        items = s.stats_json()["batch_items"]
        rerun = make_client(provider, s, tmp_path, "wait", monkeypatch)
        got = run_cases(rerun, COUNT)
        assert s.batch_store.created == 2  # the killed run's and the other session's: no third
        assert s.batch_store.lists >= 2  # paged
        assert s.stats_json()["attempts"] == 0  # nothing sent synchronously
        assert s.stats_json()["batch_items"] == items + COUNT  # each request answered once
        assert rerun.batches.submitted == [] and len(rerun.batches.collected) == 1
        assert got == synchronous(provider, s, tmp_path, monkeypatch, COUNT)
    (path,) = (tmp_path / "cache" / "batches").glob("*/*.json")
    record = json.loads(path.read_text())
    assert record["state"] == "collected" and record["answered"] == COUNT and record["nonce"]
    assert not list((tmp_path / "cache" / "batches").glob("*/intents/*.json"))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_intent_whose_batch_was_never_created_is_dropped_and_sent(
    provider, tmp_path, monkeypatch
):
    """A create that failed without an answer (a batch may exist) keeps its intent; the next
    run, not finding it in the list once LIST_LAG_S has passed, sends the requests once."""
    monkeypatch.setattr(batches, "LIST_LAG_S", 0.3)
    with server(batches=BatchPlan(polls=0)) as s:
        client = make_client(provider, s, tmp_path, "wait", monkeypatch)

        async def lost(items, nonce):
            raise ConnectionResetError("connection lost before the answer")

        monkeypatch.setattr(client.backend, "submit_batch", lost)
        first = run_cases(client, COUNT)
        assert all("batch not submitted" in r for r in first)
        assert len(list((tmp_path / "cache" / "batches").glob("*/intents/*.json"))) == 1
        got = run_cases(make_client(provider, s, tmp_path, "wait", monkeypatch), COUNT)
        assert s.batch_store.created == 1
        assert got == synchronous(provider, s, tmp_path, monkeypatch, COUNT)
    assert not list((tmp_path / "cache" / "batches").glob("*/intents/*.json"))


def test_an_unreadable_list_sends_nothing_of_the_intent(tmp_path, monkeypatch):
    """When the list cannot be read, the intent's requests are skipped (not sent), naming it."""
    with server(batches=BatchPlan(polls=0)) as s:
        killed_run("openai", s, tmp_path, monkeypatch)
        client = make_client("openai", s, tmp_path, "wait", monkeypatch)

        async def broken(since):
            raise RuntimeError("list unavailable")
            yield  # pragma: no cover

        monkeypatch.setattr(client.backend, "list_batches", broken)
        got = run_cases(client, COUNT)
        assert all("BatchPending" in r and "intents" in r and "unresolved" in r for r in got)
        assert s.batch_store.created == 1


def test_a_refused_create_leaves_no_intent(tmp_path, monkeypatch):
    with server() as s:
        client = make_client("anthropic", s, tmp_path, "wait", monkeypatch)
        client.backend._api_key = "wrong-key-0123456789"
        got = run_cases(client, 2)
        assert all("batch not submitted" in r for r in got)
        assert not list((tmp_path / "cache" / "batches").glob("*/intents/*.json"))
