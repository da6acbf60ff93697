"""`openai:` reasoning models through the Responses API (support/backends/openai_responses.py),
through the real `openai` SDK against the loopback with OpenAI's rules on: the body (the SDK's
own JSON for `responses.create`, no `n`, no seed, `store: false`, never encrypted reasoning), the
answer apart from the reasoning summary (the Response's `thinking`), reasoning tokens, a cut
answer's "length", a call a sample, the cache identity, and batches of /v1/responses lines. The
Chat Completions models keep their bodies and identity."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest

from support.backends import api_models as am
from support.backends import openai_responses as resp
from support.backends.openai_chat import OpenAIChatBackend, OpenAICompatibleBackend, openai_body
from support.backends.retry import MalformedResponse
from support.backends.thinking import Thinking
from support.doubles.loopback import LoopbackServer, ScriptAnswer, ScriptRequest
from support.doubles.loopback_batches import BatchPlan
from support.types import Part, Request

openai = pytest.importorskip("openai")

KEY = "sk-responses-backend-test-9d2e"
THOUGHT = "The first option matches the picture. So: B."
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def script(request: ScriptRequest) -> ScriptAnswer:
    return ScriptAnswer("B", thinking=THOUGHT)


def request(**kw) -> Request:
    base = {
        "parts": (Part.of_text("Which one?"), Part.of_image(PNG)),
        "system": "Answer with a letter.",
        "max_tokens": 16,
    }
    return Request(**{**base, **kw})


def backend(url: str, model: str = "gpt-6.2-sol", effort: str | None = "max"):
    thinking = Thinking(effort=effort) if effort else None
    return OpenAIChatBackend(
        f"openai:{model}", model, api_key=KEY, base_url=url + "/v1", thinking=thinking
    )


def ask(b, req: Request):
    async def go():
        try:
            return await b.generate(req)
        finally:
            await b.aclose()

    return asyncio.run(go())


def bodies(folder: Path) -> list[dict]:
    return [json.loads(p.read_bytes()) for p in sorted(folder.glob("*.json"))]


def test_the_rule_sends_openais_reasoning_models_through_responses():
    for model in ("gpt-6.2-sol", "gpt-6.2-astra", "gpt-6-luna", "gpt-5.4", "o3"):
        assert am.rules_for("openai", model).api == am.RESPONSES, model
        assert any("responses" in s for s in am.rules_for("openai", model).sources)
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1"):
        assert am.rules_for("openai", model).api == am.CHAT, model
    assert am.rules_for("openai-compatible", "gpt-6.2-sol").api == am.CHAT
    assert am.rules_for("anthropic", "claude-opus-4-7").api == am.CHAT  # not OpenAI's: unread


def test_the_body_is_the_sdks_own(tmp_path):
    """responses_body's bytes parse to what `responses.create` sends for responses_params."""
    req = request(prefill="The answer is")
    rules = am.rules_for("openai", "gpt-6.2-sol")
    mine = json.loads(
        resp.responses_body(req, "gpt-6.2-sol", rules=rules, thinking=Thinking(effort="max"))
    )
    with LoopbackServer(script, api_key=KEY, record_dir=tmp_path) as server:
        client = openai.OpenAI(api_key=KEY, base_url=server.url + "/v1", max_retries=0)
        params = resp.responses_params(
            req, "gpt-6.2-sol", rules=rules, thinking=Thinking(effort="max")
        )
        client.responses.create(**params)
        client.close()
    (sdk,) = bodies(tmp_path)
    assert mine == sdk
    assert mine["instructions"] == "Answer with a letter."
    user, prefill = mine["input"]
    assert [p["type"] for p in user["content"]] == ["input_text", "input_image"]
    assert user["content"][1]["image_url"].startswith("data:image/png;base64,iVBOR")
    assert prefill == {"role": "assistant", "content": "The answer is"}
    assert mine["reasoning"] == {"effort": "max", "summary": "auto"}
    assert mine["max_output_tokens"] == 16 + am.OPENAI_REASONING_ROOM
    assert mine["store"] is False
    for absent in ("include", "n", "seed", "temperature", "max_tokens", "messages"):
        assert absent not in mine, absent


def test_max_effort_answers_with_the_summary_as_thinking(tmp_path):
    with LoopbackServer(script, api_key=KEY, record_dir=tmp_path) as server:
        response = ask(backend(server.url), request(seed=7, n=3, temperature=0.0))
        stats = server.stats
    assert stats.refused == 0, stats.refusals
    assert stats.protocols == {"responses": 3}  # a call a sample, none to Chat Completions
    assert response.texts == ("B", "B", "B")
    assert response.thinking == (THOUGHT,) * 3  # never the answer
    assert response.finish_reasons == ("stop",) * 3
    assert response.usage.reasoning_tokens == 3 * 11  # 44 characters: 11 tokens a sample
    assert response.usage.output_tokens == 3 * (11 + 1)
    assert resp.SEED_OMITTED in response.adapted
    assert am.TEMPERATURE_OMITTED in response.adapted
    for body in bodies(tmp_path):
        assert "reasoning.encrypted_content" not in json.dumps(body)
        assert body["reasoning"]["effort"] == "max"


def test_the_models_default_effort_is_not_named(tmp_path):
    with LoopbackServer(script, api_key=KEY, record_dir=tmp_path) as server:
        response = ask(backend(server.url, effort=None), request())
    (body,) = bodies(tmp_path)
    assert body["reasoning"] == {"summary": "auto"}
    assert response.thinking == (THOUGHT,) and response.texts == ("B",)


def test_effort_none_sends_temperature_and_thinks_not(tmp_path):
    with LoopbackServer(script, api_key=KEY, record_dir=tmp_path) as server:
        response = ask(backend(server.url, "gpt-5.4", effort="none"), request(temperature=0.2))
        assert server.stats.refused == 0, server.stats.refusals
    (body,) = bodies(tmp_path)
    assert body["temperature"] == 0.2 and body["max_output_tokens"] == 16
    assert response.thinking == () and response.usage.reasoning_tokens == 0


def long(request: ScriptRequest) -> ScriptAnswer:
    return ScriptAnswer("B because " * 40, thinking=THOUGHT)


def test_a_cut_answer_finishes_with_length():
    with LoopbackServer(long, api_key=KEY) as server:
        b = backend(server.url, effort="low")
        b.rules = am.dataclasses.replace(b.rules, allowance=4)  # 16 + 4 tokens: thought + cut
        response = ask(b, request())
    assert response.finish_reasons == ("length",)
    assert response.texts[0].startswith("B because") and len(response.texts[0]) < 40


def test_the_identity_tells_the_apis_apart():
    sol = backend("http://127.0.0.1:9")
    assert sol.identity["api"] == "responses"
    chat = backend("http://127.0.0.1:9", "gpt-4o", effort=None)
    assert chat.identity == {
        "provider": "openai",
        "model": "gpt-4o",
        "endpoint": "chat.completions",
        "base_url": "http://127.0.0.1:9/v1",
    }
    served = OpenAICompatibleBackend(
        "openai-compatible:gpt-6.2-sol", "gpt-6.2-sol", api_key=KEY, base_url="http://h:1/v1"
    )
    assert "api" not in served.identity and served.responses is False


# sha256 of the Chat Completions bodies of the test's request as the code before the Responses
# API sent them (commit 4494f6a, computed there)
GOLDEN = {
    "gpt-4o": "d53798da17c108553bd563ebbd379e490561b0634f43b0fbc59c741df2cf09cc",
    "gpt-4o-mini": "845b67c1b757685b1cd03188db17caa8695a03fcf5ce25721cd1c9f61b05bd99",
}


@pytest.mark.parametrize("model", sorted(GOLDEN))
def test_chat_bodies_are_those_sent_before(model):
    req = request(seed=3, n=2, temperature=0.5, prefill="The answer is")
    body = openai_body(req, model, False, rules=am.rules_for("openai", model))
    assert hashlib.sha256(body).hexdigest() == GOLDEN[model]


def test_chat_models_keep_their_bytes(tmp_path):
    req = request(seed=3, n=2, temperature=0.5)
    rules = am.rules_for("openai", "gpt-4o")
    with LoopbackServer(script, api_key=KEY, record_dir=tmp_path) as server:
        response = ask(backend(server.url, "gpt-4o", effort=None), req)
        assert server.stats.protocols == {"openai": 1}
    (sent,) = list(tmp_path.glob("*.json"))
    assert sent.read_bytes() == openai_body(req, "gpt-4o", False, rules=rules)
    assert json.loads(sent.read_bytes())["n"] == 2 and response.texts == ("B", "B")
    assert response.thinking == ()


@pytest.mark.parametrize(
    "body",
    [
        None, [], "text", {"output": "x"}, {"output": [None, 3, {"type": "message"}]},
        {"output": [{"type": "message", "content": [{"type": "output_text", "text": 5}]}],
         "usage": "many", "status": "incomplete", "incomplete_details": 7},
        {"output": [], "status": "failed", "error": {"message": "boom"}},
    ],
)  # fmt: skip
def test_an_untrusted_body_is_read_or_malformed(body):
    try:
        answer = resp.responses_result(body)
    except MalformedResponse:
        return
    assert answer.texts == ("",) and isinstance(answer.finish_reasons[0], str)


def test_a_batch_goes_through_v1_responses(tmp_path):
    items = [("a" * 64, request(n=2)), ("b" * 64, request(parts=(Part.of_text("Other?"),)))]

    async def go(url):
        b = backend(url, effort="high")
        try:
            batch_id = await b.submit_batch(items, "nonce1")
            for _ in range(20):
                state = await b.batch_state(batch_id)
                if state.ended:
                    break
            results = await b.batch_results(batch_id, [k for k, _ in items])
            return batch_id, state, results
        finally:
            await b.aclose()

    with LoopbackServer(script, api_key=KEY, batches=BatchPlan(polls=1)) as server:
        batch_id, state, results = asyncio.run(go(server.url))
        batch = server.batch_store.batches[batch_id]
        assert server.stats.refused == 0, server.stats.refusals
    assert batch.extra["endpoint"] == "/v1/responses" and len(batch.items) == 3
    assert state.ended == "completed" and state.done == state.total == 3
    first, second = results["a" * 64], results["b" * 64]
    assert first.texts == ("B", "B") and first.thinking == (THOUGHT, THOUGHT) and first.batch
    assert first.usage.reasoning_tokens == 22 and first.model == "openai:gpt-6.2-sol"
    assert second.texts == ("B",)
