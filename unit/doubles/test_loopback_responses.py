"""The loopback's Responses API (`POST /v1/responses`), through the real `openai` SDK: the
documented response shape (a reasoning item whose summary holds the thinking only when asked
for, the message's output_text, usage with reasoning tokens, "incomplete" at the output limit),
the documented refusals, Chat Completions refusing effort "max" for GPT-6.x Astra and Sol, and
batches whose lines name `/v1/responses`."""

from __future__ import annotations

import json
import time

import pytest

from support.doubles import loopback_validation as lv
from support.doubles.loopback import LoopbackServer, ScriptAnswer, ScriptRequest

openai = pytest.importorskip("openai")

KEY = "sk-loopback-responses-test"
USER = [{"role": "user", "content": [{"type": "input_text", "text": "Which one?"}]}]


def decoy(request: ScriptRequest) -> ScriptAnswer:
    """The answer names what the server saw; the thinking is its own text."""
    seen = f"{request.system}|{'/'.join(request.texts)}|{request.n_images}|{request.prefill}"
    return ScriptAnswer(f"B {seen}", thinking="I compare the two options. The answer is B.")


@pytest.fixture
def served():
    with LoopbackServer(decoy, api_key=KEY, lifetime_s=120) as server:
        client = openai.OpenAI(api_key=KEY, base_url=server.url + "/v1", max_retries=0)
        yield server, client
        client.close()


def test_a_reasoning_summary_comes_back_only_when_asked(served):
    server, client = served
    asked = client.responses.create(
        model="gpt-6.2-sol",
        instructions="Be brief.",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Which one?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA",
                     "detail": "auto"},
                ],
            }
        ],
        reasoning={"effort": "max", "summary": "auto"},
        max_output_tokens=1000,
        store=False,
    )  # fmt: skip
    assert asked.status == "completed" and asked.incomplete_details is None
    assert asked.output_text == "B Be brief.|Which one?|1|None"
    kinds = [item.type for item in asked.output]
    assert kinds == ["reasoning", "message"]
    summary = asked.output[0].summary
    assert [s.text for s in summary] == ["I compare the two options. The answer is B."]
    assert asked.usage.output_tokens_details.reasoning_tokens == 11  # 44 characters, 4 a token
    assert asked.usage.output_tokens > asked.usage.output_tokens_details.reasoning_tokens
    assert asked.usage.input_tokens_details.cached_tokens == 0
    silent = client.responses.create(model="gpt-6.2-sol", input=USER, max_output_tokens=1000)
    assert silent.output[0].type == "reasoning" and silent.output[0].summary == []
    assert silent.usage.output_tokens_details.reasoning_tokens == 11  # thought all the same
    assert server.stats.protocols["responses"] == 2 and not server.stats.protocols["openai"]


def test_the_output_limit_leaves_the_response_incomplete(served):
    _, client = served
    cut = client.responses.create(
        model="gpt-6.2-sol", input=USER, reasoning={"effort": "low", "summary": "auto"},
        max_output_tokens=5,
    )  # fmt: skip
    assert cut.status == "incomplete"
    assert (
        cut.incomplete_details is not None and cut.incomplete_details.reason == "max_output_tokens"
    )
    assert [item.type for item in cut.output] == ["reasoning"]  # thought to the limit: no text
    assert cut.output_text == ""
    assert cut.usage.output_tokens == 5


def test_a_plain_model_reasons_not(served):
    _, client = served
    plain = client.responses.create(model="gpt-4o", input=USER, temperature=0.0)
    assert [item.type for item in plain.output] == ["message"]
    assert plain.usage.output_tokens_details.reasoning_tokens == 0


@pytest.mark.parametrize(
    ("model", "fields", "param", "says"),
    [
        ("gpt-6.2-sol", {"temperature": 0.0}, "temperature", "is not supported with this model"),
        ("gpt-6.2-sol", {"reasoning": {"effort": "none"}}, "reasoning.effort",
         "does not support 'none'"),
        ("gpt-5.4", {"reasoning": {"effort": "max"}}, "reasoning.effort", "does not support 'max'"),
        ("gpt-6.2-sol", {"max_tokens": 16}, "max_tokens", "moved to 'max_output_tokens'"),
        ("gpt-6.2-sol", {"n": 2}, "n", "Unknown parameter: 'n'."),
        ("gpt-6.2-sol", {"seed": 1}, "seed", "Unknown parameter: 'seed'."),
        ("gpt-6.2-sol", {"reasoning_effort": "low"}, "reasoning_effort", "'reasoning.effort'"),
        ("gpt-6.2-sol", {"reasoning": {"summary": "always"}}, "reasoning.summary", "'always'"),
        ("gpt-4o", {"reasoning": {"effort": "low"}}, "reasoning.effort", "not supported"),
    ],
)  # fmt: skip
def test_what_a_model_refuses_is_its_documented_400(served, model, fields, param, says):
    server, client = served
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=model, input=USER, extra_body=fields)
    error = caught.value.body
    assert caught.value.status_code == 400 and error["type"] == "invalid_request_error"
    assert error["param"] == param and says in error["message"], error
    assert server.stats.refused == 1


def test_temperature_at_effort_none_is_taken(served):
    _, client = served
    done = client.responses.create(
        model="gpt-5.4", input=USER, temperature=0.0, reasoning={"effort": "none"}
    )
    assert done.status == "completed" and done.usage.output_tokens_details.reasoning_tokens == 0


def test_an_unknown_input_part_is_refused(served):
    _, client = served
    bad = [{"role": "user", "content": [{"type": "text", "text": "Chat's part"}]}]
    with pytest.raises(openai.BadRequestError, match="input_text"):
        client.responses.create(model="gpt-6.2-sol", input=bad)


@pytest.mark.parametrize("model", ["gpt-6.2-sol", "gpt-6.2-astra", "gpt-6-astra", "gpt-6.1-sol"])
def test_chat_completions_refuse_max_where_it_is_responses_only(served, model):
    _, client = served
    messages = [{"role": "user", "content": "Which one?"}]
    with pytest.raises(openai.BadRequestError, match="/v1/responses") as caught:
        client.chat.completions.create(model=model, messages=messages, reasoning_effort="max")
    assert caught.value.body["param"] == "reasoning_effort"
    taken = client.chat.completions.create(model=model, messages=messages, reasoning_effort="xhigh")
    assert taken.choices[0].message.content.startswith("B ")
    reply = client.responses.create(model=model, input=USER, reasoning={"effort": "max"})
    assert reply.status == "completed"


def test_chat_completions_keep_max_where_no_source_says_otherwise():
    assert lv.check_openai("gpt-6.1-terra", {"reasoning_effort": "max"}) is None
    assert lv.check_openai("gpt-6-luna", {"reasoning_effort": "max"}) is None


def test_a_batch_of_responses_lines(served):
    _, client = served
    body = {"model": "gpt-6.2-sol", "input": USER, "reasoning": {"effort": "high",
            "summary": "auto"}, "max_output_tokens": 1000, "store": False}  # fmt: skip
    lines = [
        {"custom_id": f"k{i}", "method": "POST", "url": "/v1/responses", "body": body}
        for i in range(2)
    ]
    refused = dict(body, temperature=0.5)
    lines.append({"custom_id": "bad", "method": "POST", "url": "/v1/responses", "body": refused})
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    upload = client.files.create(file=("b.jsonl", data), purpose="batch")
    batch = client.batches.create(
        input_file_id=upload.id, endpoint="/v1/responses", completion_window="24h"
    )
    for _ in range(50):
        batch = client.batches.retrieve(batch.id)
        if batch.status == "completed":
            break
        time.sleep(0.01)
    assert batch.status == "completed" and batch.output_file_id and batch.error_file_id
    out = [json.loads(x) for x in client.files.content(batch.output_file_id).text.splitlines()]
    assert sorted(r["custom_id"] for r in out) == ["k0", "k1"]
    answer = out[0]["response"]["body"]
    assert answer["object"] == "response" and answer["output"][0]["type"] == "reasoning"
    assert answer["output"][0]["summary"][0]["text"].startswith("I compare")
    errors = client.files.content(batch.error_file_id).text.splitlines()
    assert json.loads(errors[0])["response"]["body"]["error"]["param"] == "temperature"


def test_a_line_must_name_the_batch_endpoint(served):
    _, client = served
    line = {"custom_id": "k", "method": "POST", "url": "/v1/chat/completions", "body": {}}
    upload = client.files.create(file=("b.jsonl", json.dumps(line).encode()), purpose="batch")
    with pytest.raises(openai.BadRequestError):
        client.batches.create(
            input_file_id=upload.id, endpoint="/v1/responses", completion_window="24h"
        )
