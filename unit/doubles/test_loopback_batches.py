"""The loopback server's batch endpoints, through each vendor's real SDK (127.0.0.1 only)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as gtypes
from openai.types.chat import ChatCompletion

from support.doubles import loopback_batches
from support.doubles.loopback import (
    Faults,
    LoopbackServer,
    RateLimit,
    ScriptRequest,
    TokenBucket,
    main,
)
from support.doubles.loopback_batches import BatchPlan, BatchStore, plans_of

KEY = "k-batch-123456"
N = 10  # requests a batch
REPO = Path(__file__).resolve().parents[2]


def echo(r: ScriptRequest) -> str:
    return f"{r.protocol}|{r.model}|{r.system}|{'/'.join(r.texts)}|{r.max_tokens}"


def server(**kw) -> LoopbackServer:
    return LoopbackServer(echo, api_key=KEY, lifetime_s=60, **kw)


# ---- OpenAI ------------------------------------------------------------------------------------
def oai(s: LoopbackServer) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=s.url + "/v1", max_retries=0, timeout=10)


def oai_body(i: int) -> dict:
    return {"model": "gpt-x", "max_tokens": 7, "messages": [{"role": "user", "content": f"q{i}"}]}


def oai_submit(client: openai.OpenAI, ids: list[int]):
    lines = [
        {"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions", "body": oai_body(i)}
        for i in ids
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    upload = client.files.create(file=("requests.jsonl", data), purpose="batch")
    assert upload.purpose == "batch" and upload.bytes == len(data)
    return client.batches.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
    )


def oai_lines(client: openai.OpenAI, file_id: str | None) -> dict[str, dict]:
    if file_id is None:
        return {}
    text = client.files.content(file_id).text
    return {row["custom_id"]: row for row in map(json.loads, text.splitlines())}


def test_openai_batch_completes_with_the_synchronous_answers():
    with server(batches=BatchPlan(polls=2)) as s:
        client = oai(s)
        batch = oai_submit(client, list(range(N)))
        assert batch.status == "validating" and batch.request_counts.total == N
        statuses = [client.batches.retrieve(batch.id).status for _ in range(3)]
        assert statuses == ["in_progress", "in_progress", "completed"]
        done = client.batches.retrieve(batch.id)
        assert done.request_counts.completed == N and done.request_counts.failed == 0
        assert done.error_file_id is None
        out = oai_lines(client, done.output_file_id)
        assert sorted(out) == sorted(f"c{i}" for i in range(N))
        for i in range(N):
            sync = client.chat.completions.create(**oai_body(i))
            row = out[f"c{i}"]["response"]
            assert row["status_code"] == 200
            answer = ChatCompletion.model_validate(row["body"])
            assert answer.choices == sync.choices and answer.usage == sync.usage


def test_openai_failed_items_are_item_errors_and_succeed_when_resent():
    with server(faults=Faults(rate=0.2, seed=3), batches=BatchPlan(polls=0)) as s:
        client = oai(s)
        done = client.batches.retrieve(oai_submit(client, list(range(N))).id)
        assert done.status == "completed"
        errors = oai_lines(client, done.error_file_id)
        assert 0 < len(errors) < N / 2 and done.request_counts.failed == len(errors)
        assert all(row["response"]["status_code"] == 500 for row in errors.values())
        assert len(oai_lines(client, done.output_file_id)) == N - len(errors)
        assert s.stats_json()["batch_item_errors"] == len(errors)
        again = [int(key[1:]) for key in errors]
        retry = client.batches.retrieve(oai_submit(client, again).id)
        assert retry.request_counts.completed == len(again) and retry.error_file_id is None


def test_openai_expired_and_cancelled_batches():
    plans = [BatchPlan(polls=0, ends="expired", done_before_end=3), BatchPlan(polls=5)]
    with server(batches=plans) as s:
        client = oai(s)
        expired = client.batches.retrieve(oai_submit(client, list(range(N))).id)
        assert expired.status == "expired" and expired.expired_at is not None
        assert len(oai_lines(client, expired.output_file_id)) == 3
        errors = oai_lines(client, expired.error_file_id)
        assert {row["error"]["code"] for row in errors.values()} == {"batch_expired"}
        assert len(errors) == N - 3
        batch = oai_submit(client, list(range(N)))
        assert client.batches.cancel(batch.id).status == "cancelling"
        cancelled = client.batches.retrieve(batch.id)
        assert cancelled.status == "cancelled" and cancelled.output_file_id is None
        assert len(oai_lines(client, cancelled.error_file_id)) == N


# ---- Anthropic ---------------------------------------------------------------------------------
def ant(s: LoopbackServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=s.url, max_retries=0, timeout=10)


def ant_params(i: int) -> dict:
    messages = [{"role": "user", "content": f"q{i}"}]
    return {"model": "claude-x", "max_tokens": 9, "messages": messages}


def ant_submit(client: anthropic.Anthropic, ids: list[int]):
    requests = [{"custom_id": f"c{i}", "params": ant_params(i)} for i in ids]
    return client.messages.batches.create(requests=requests)


def ant_results(client: anthropic.Anthropic, batch_id: str) -> dict[str, object]:
    return {r.custom_id: r.result for r in client.messages.batches.results(batch_id)}


def test_anthropic_batch_completes_with_the_synchronous_answers():
    with server(batches=BatchPlan(polls=1)) as s:
        client = ant(s)
        batch = ant_submit(client, list(range(N)))
        assert batch.processing_status == "in_progress" and batch.results_url is None
        assert client.messages.batches.retrieve(batch.id).request_counts.processing == N
        done = client.messages.batches.retrieve(batch.id)
        assert done.processing_status == "ended" and done.request_counts.succeeded == N
        results = ant_results(client, batch.id)
        assert sorted(results) == sorted(f"c{i}" for i in range(N))
        for i in range(N):
            sync = client.messages.create(**ant_params(i))
            result = results[f"c{i}"]
            assert result.type == "succeeded"
            assert result.message.content == sync.content and result.message.usage == sync.usage


def test_anthropic_failed_items_are_item_errors():
    with server(faults=Faults(rate=0.2, seed=3), batches=BatchPlan(polls=0)) as s:
        client = ant(s)
        batch = ant_submit(client, list(range(N)))
        counts = client.messages.batches.retrieve(batch.id).request_counts
        results = ant_results(client, batch.id)
        errored = [k for k, r in results.items() if r.type == "errored"]
        assert 0 < len(errored) < N / 2 and counts.errored == len(errored)
        assert counts.succeeded == N - len(errored)
        assert all(results[k].error.error.type == "api_error" for k in errored)
        retry = ant_submit(client, [int(k[1:]) for k in errored])
        assert client.messages.batches.retrieve(retry.id).request_counts.errored == 0


def test_anthropic_expired_and_cancelled_batches():
    plans = [BatchPlan(polls=0, ends="expired", done_before_end=4), BatchPlan(polls=5)]
    with server(batches=plans) as s:
        client = ant(s)
        batch = ant_submit(client, list(range(N)))
        counts = client.messages.batches.retrieve(batch.id).request_counts
        assert (counts.succeeded, counts.expired) == (4, N - 4)
        types = sorted(r.type for r in ant_results(client, batch.id).values())
        assert types == ["expired"] * (N - 4) + ["succeeded"] * 4
        batch = ant_submit(client, list(range(N)))
        assert client.messages.batches.cancel(batch.id).processing_status == "canceling"
        ended = client.messages.batches.retrieve(batch.id)
        assert ended.processing_status == "ended" and ended.request_counts.canceled == N
        assert {r.type for r in ant_results(client, batch.id).values()} == {"canceled"}


# ---- Gemini ------------------------------------------------------------------------------------
def gem(s: LoopbackServer) -> genai.Client:
    opts = gtypes.HttpOptions(base_url=s.url, timeout=10_000)  # ms
    return genai.Client(api_key=KEY, http_options=opts)


def gem_request(i: int) -> dict:
    return {
        "contents": [{"role": "user", "parts": [{"text": f"q{i}"}]}],
        "config": {"max_output_tokens": 11},
        "metadata": {"key": f"c{i}"},
    }


def gem_submit(client: genai.Client, ids: list[int]):
    return client.batches.create(model="gem-x", src=[gem_request(i) for i in ids])


def test_gemini_batch_completes_with_the_synchronous_answers():
    with server(batches=BatchPlan(polls=1)) as s:
        client = gem(s)
        job = gem_submit(client, list(range(N)))
        assert job.state == gtypes.JobState.JOB_STATE_PENDING and job.name.startswith("batches/")
        assert client.batches.get(name=job.name).state == gtypes.JobState.JOB_STATE_RUNNING
        done = client.batches.get(name=job.name)
        assert done.state == gtypes.JobState.JOB_STATE_SUCCEEDED
        responses = done.dest.inlined_responses
        assert [r.metadata for r in responses] == [{"key": f"c{i}"} for i in range(N)]
        for i, r in enumerate(responses):
            sync = client.models.generate_content(
                model="gem-x", contents=f"q{i}", config={"max_output_tokens": 11}
            )
            assert r.error is None and r.response.text == sync.text
            assert r.response.usage_metadata == sync.usage_metadata


def test_gemini_failed_items_expired_and_cancelled():
    plans = [BatchPlan(polls=0), BatchPlan(polls=0, ends="expired"), BatchPlan(polls=5)]
    with server(faults=Faults(rate=0.2, seed=3), batches=plans) as s:
        client = gem(s)
        done = client.batches.get(name=gem_submit(client, list(range(N))).name)
        errors = [r for r in done.dest.inlined_responses if r.error is not None]
        assert 0 < len(errors) < N / 2 and all(r.response is None for r in errors)
        assert s.stats_json()["batch_item_errors"] == len(errors)
        expired = client.batches.get(name=gem_submit(client, list(range(N))).name)
        assert expired.state == gtypes.JobState.JOB_STATE_EXPIRED
        job = gem_submit(client, list(range(N)))
        client.batches.cancel(name=job.name)
        assert client.batches.get(name=job.name).state == gtypes.JobState.JOB_STATE_CANCELLED


# ---- the lists (issue 34: a killed run's batch found by its nonce) -----------------------------
def test_each_sdk_pages_through_its_list_newest_first_with_the_nonce():
    """Each vendor's list, paged by its SDK (pages of 2 here), newest first, across protocols
    on one server (OpenAI's and Gemini's lists share /v1/batches); OpenAI's metadata and
    Gemini's display name come back as sent."""
    with server(batches=BatchPlan(polls=5)) as s:
        s.batch_store.page_cap = 2
        o, a, g = oai(s), ant(s), gem(s)
        made = {"o": [], "a": [], "g": []}
        for i in range(3):
            upload = o.files.create(file=("r.jsonl", _oai_line(i)), purpose="batch")
            made["o"].append(
                o.batches.create(
                    input_file_id=upload.id,
                    endpoint="/v1/chat/completions",
                    completion_window="24h",
                    metadata={"vlmbench_intent": f"n{i}"},
                ).id
            )
            made["a"].append(ant_submit(a, [i]).id)
            config = gtypes.CreateBatchJobConfig(display_name=f"vlmbench-intent-n{i}")
            job = g.batches.create(model="gem-x", src=[gem_request(i)], config=config)
            made["g"].append(job.name)
        listed = list(o.batches.list(limit=100))
        assert [b.id for b in listed] == made["o"][::-1]
        assert [b.metadata for b in listed] == [{"vlmbench_intent": f"n{i}"} for i in (2, 1, 0)]
        assert [b.id for b in a.messages.batches.list(limit=100)] == made["a"][::-1]
        jobs = list(g.batches.list(config=gtypes.ListBatchJobsConfig(page_size=100)))
        assert [j.name for j in jobs] == made["g"][::-1]
        assert [j.display_name for j in jobs] == [f"vlmbench-intent-n{i}" for i in (2, 1, 0)]
        assert s.batch_store.lists == 3 * 2  # 3 batches, pages of 2: two pages a list


def _oai_line(i: int) -> bytes:
    line = {"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions"}
    return (json.dumps(line | {"body": oai_body(i)}) + "\n").encode()


# ---- the store ---------------------------------------------------------------------------------
def test_batch_routes_check_the_key_and_unknown_batches_are_404():
    with server() as s:
        for path, headers in [
            ("/v1/batches/batch_x", {"Authorization": "Bearer wrong"}),
            ("/v1/messages/batches/msgbatch_x", {"x-api-key": "wrong"}),
            ("/v1beta/batches/gbx", {"x-goog-api-key": "wrong"}),
        ]:
            req = urllib.request.Request(s.url + path, headers=headers)
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(req, timeout=10)
            assert err.value.code == 401
        with pytest.raises(openai.NotFoundError):
            oai(s).batches.retrieve("batch_missing")


def test_store_is_bounded_and_plans_are_checked(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(loopback_batches, "MAX_BATCHES", 3)
    store = BatchStore(lambda p, m, b: {}, lambda d: False)
    body = {"requests": [{"custom_id": "a", "params": {"messages": []}}]}
    ids = [store._create_anthropic(body).id for _ in range(5)]
    assert list(store.batches) == ids[-3:]
    with pytest.raises(ValueError):
        BatchPlan(ends="lost")


# ---- the rate limit on batch routes ------------------------------------------------------------
def every_other_over_the_rate(s: LoopbackServer) -> None:
    """Give the server a real token bucket whose clock moves half a token's time (0.5 ms) a read:
    every other request finds it empty and gets a 429 saying 1 ms."""
    reads = itertools.count(1)
    s.bucket = TokenBucket(RateLimit(per_s=1000.0, burst=1), clock=lambda: next(reads) * 0.0005)


def test_openai_batch_calls_are_rate_limited_and_the_sdk_retries():
    with server(batches=BatchPlan(polls=1)) as s:
        every_other_over_the_rate(s)
        client = openai.OpenAI(api_key=KEY, base_url=s.url + "/v1", max_retries=2, timeout=10)
        batch = oai_submit(client, list(range(3)))
        assert client.batches.retrieve(batch.id).status == "in_progress"
        done = client.batches.retrieve(batch.id)
        assert done.status == "completed" and len(oai_lines(client, done.output_file_id)) == 3
        stats = s.stats_json()
    # upload, create, 2 reads, content: each call after the first answered 429 once, then retried
    assert stats["batch_rate_limited"] == 4 and stats["rate_limited"] == 0


def test_anthropic_batch_calls_are_rate_limited_and_the_sdk_retries():
    with server(batches=BatchPlan(polls=1)) as s:
        every_other_over_the_rate(s)
        client = anthropic.Anthropic(api_key=KEY, base_url=s.url, max_retries=2, timeout=10)
        batch = ant_submit(client, list(range(3)))
        assert client.messages.batches.retrieve(batch.id).processing_status == "in_progress"
        assert client.messages.batches.retrieve(batch.id).processing_status == "ended"
        results = ant_results(client, batch.id)
        assert sorted(r.type for r in results.values()) == ["succeeded"] * 3
        stats = s.stats_json()
    # create, 2 reads, results (a read for its URL, then the JSONL): 429 once each after the first
    assert stats["batch_rate_limited"] == 4 and stats["rate_limited"] == 0


def test_gemini_batch_calls_are_rate_limited_and_the_sdk_retries():
    with server(batches=BatchPlan(polls=1)) as s:
        every_other_over_the_rate(s)
        retry = gtypes.HttpRetryOptions(attempts=3, initial_delay=0.001, max_delay=0.01, jitter=0)
        opts = gtypes.HttpOptions(base_url=s.url, timeout=10_000, retry_options=retry)  # ms
        client = genai.Client(api_key=KEY, http_options=opts)
        job = gem_submit(client, list(range(3)))
        assert client.batches.get(name=job.name).state == gtypes.JobState.JOB_STATE_RUNNING
        done = client.batches.get(name=job.name)
        assert done.state == gtypes.JobState.JOB_STATE_SUCCEEDED
        assert all(r.error is None for r in done.dest.inlined_responses)
        stats = s.stats_json()
    assert stats["batch_rate_limited"] == 2 and stats["rate_limited"] == 0  # create, 2 reads


# ---- the command line --------------------------------------------------------------------------
def test_command_line_plans_end_the_nth_batch_through_the_openai_sdk():
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "support.doubles.loopback", "--answer", "ok", "--api-key", KEY),
            *("--batch-polls", "1", "--batch-polls", "0", "--batch-ends", "expired,completed"),
            *("--batch-done-before-end", "1", "--lifetime", "30"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        client = oai_url(proc.stdout.readline().strip())
        first = oai_submit(client, list(range(3)))
        assert client.batches.retrieve(first.id).status == "in_progress"
        expired = client.batches.retrieve(first.id)
        assert expired.status == "expired"
        assert list(oai_lines(client, expired.output_file_id)) == ["c0"]  # done before the end
        second = client.batches.retrieve(oai_submit(client, list(range(3))).id)
        assert second.status == "completed" and second.request_counts.completed == 3
    finally:
        proc.kill()
        proc.wait(timeout=10)


def oai_url(url: str) -> openai.OpenAI:
    assert url.startswith("http://127.0.0.1:"), url
    return openai.OpenAI(api_key=KEY, base_url=url + "/v1", max_retries=0, timeout=10)


@pytest.mark.parametrize(
    "option, value",
    [("--batch-ends", "expired,lost"), ("--batch-polls", "-1"), ("--batch-done-before-end", "x")],
)
def test_command_line_bad_batch_values_are_usage_errors(option, value, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--answer", "a", "--api-key", KEY, option, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}:" in err and repr(value.split(",")[-1]) in err


def test_plans_take_each_lists_nth_value_and_repeat_the_last():
    assert plans_of([], [], []) == [BatchPlan()]
    assert plans_of([2, 0], ["expired"], [1, 2, 3]) == [
        BatchPlan(2, "expired", 1),
        BatchPlan(0, "expired", 2),
        BatchPlan(0, "expired", 3),
    ]
