"""API backends without network: request translation, response parsing, keys, registry, prices.

The end-to-end tests at the bottom run each SDK against an in-process `httpx2.MockTransport` (no
socket): what goes on the wire, outer retries of malformed bodies, redaction of echoed keys.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
genai_types = pytest.importorskip("google.genai.types")
httpx2 = pytest.importorskip("httpx2")

from support import secrets as api_keys  # noqa: E402
from support.backends import retry  # noqa: E402
from support.backends.anthropic_messages import (  # noqa: E402
    AnthropicBackend,
    anthropic_params,
    anthropic_result,
    anthropic_retryable,
)
from support.backends.api_models import BY_ID, batch_cost_usd, cost_usd  # noqa: E402
from support.backends.base import BackendError, BackendUnavailable  # noqa: E402
from support.backends.gemini import (  # noqa: E402
    GeminiBackend,
    gemini_contents,
    gemini_result,
    gemini_retryable,
)
from support.backends.openai_chat import (  # noqa: E402
    IMAGE_SLOT,
    OpenAIChatBackend,
    OpenAICompatibleBackend,
    completion_json,
    openai_messages,
    openai_params,
    openai_result,
    openai_retryable,
)
from support.backends.registry import BackendOptions, create_backend, model_spec  # noqa: E402
from support.backends.retry import MalformedResponse, call_with_retry  # noqa: E402
from support.secrets import redact, register_secret  # noqa: E402
from support.types import Part, Request, Usage  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-test-KEY-0123456789abcdef"
PNG1 = b"\x89PNG\r\n\x1a\n" + b"one" * 8
PNG2 = b"\x89PNG\r\n\x1a\n" + b"two" * 8
JPEG = b"\xff\xd8\xff" + b"three" * 8
ENDPOINT_VARS = ["OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL"]
ENV_VARS = [*api_keys.key_variables(), *ENDPOINT_VARS]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def interleaved(**kw) -> Request:
    """text, image, text, image, image, text: order must survive every translation."""
    parts = (
        Part.of_text("t0"),
        Part.of_image(PNG1),
        Part.of_text("t1"),
        Part.of_image(JPEG),
        Part.of_image(PNG2),
        Part.of_text("t2"),
    )
    return Request(parts=parts, **kw)


# -- OpenAI ---------------------------------------------------------------------------------------


def test_openai_messages_keep_part_order_and_system():
    msgs = openai_messages(interleaved(system="be brief"))
    assert msgs[0] == {"role": "system", "content": "be brief"}
    assert [m["role"] for m in msgs] == ["system", "user"]
    content = msgs[1]["content"]
    assert [c["type"] for c in content] == [
        "text",
        "image_url",
        "text",
        "image_url",
        "image_url",
        "text",
    ]
    assert [c["text"] for c in content if c["type"] == "text"] == ["t0", "t1", "t2"]
    urls = [c["image_url"]["url"] for c in content if c["type"] == "image_url"]
    assert urls[0] == f"data:image/png;base64,{Part.of_image(PNG1).b64()}"
    assert urls[1].startswith("data:image/jpeg;base64,")
    assert urls[2] == f"data:image/png;base64,{Part.of_image(PNG2).b64()}"


def test_openai_params_sampling_and_prefill_modes():
    req = interleaved(prefill='{"answer": "', temperature=0.7, max_tokens=77, n=3, seed=11)
    native = openai_params(req, "served-model", native_prefill=True)
    assert native["model"] == "served-model"
    assert (native["temperature"], native["max_tokens"], native["n"], native["seed"]) == (
        0.7,
        77,
        3,
        11,
    )
    assert native["messages"][-1] == {"role": "assistant", "content": '{"answer": "'}
    assert native["extra_body"] == {"continue_final_message": True, "add_generation_prompt": False}
    fallback = openai_params(req, "gpt-4o-mini", native_prefill=False)
    assert fallback["messages"][-1] == {"role": "assistant", "content": '{"answer": "'}
    assert "extra_body" not in fallback
    plain = openai_params(interleaved(), "m", native_prefill=True)
    assert plain["messages"][-1]["role"] == "user" and "extra_body" not in plain
    assert "seed" not in plain and plain["n"] == 1 and plain["temperature"] == 0.0


def test_openai_result_orders_choices_and_reads_usage():
    completion = json.loads(
        json.dumps(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": i,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": c},
                    }
                    for i, c in [(1, "second"), (0, "first"), (2, None)]
                ],
                "usage": {"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129},
            }
        )
    )
    texts, usage, thinking, reasons = openai_result(completion)
    assert texts == ("first", "second", "")
    assert usage == Usage(120, 9)
    assert thinking == ("", "", "") and reasons == ("stop", "stop", "stop")


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        {"id": "x"},
        {"choices": []},
        {"choices": "yes"},
        {"choices": [None]},
        {"choices": [{"index": 0}]},
        {"choices": [{"message": "hi"}]},
        {"choices": [{"message": {"content": ["a", "b"]}}]},
        {"choices": [{"message": {"content": 7}}]},
        [1, 2],
        None,
    ],
)
def test_openai_result_malformed(body):
    """An untrusted body that is not a completion is MalformedResponse (retried), never another
    error."""
    with pytest.raises(MalformedResponse):
        openai_result(body)


@pytest.mark.parametrize("body", [b"<html>bad gateway</html>", b"\xff\xfe", b""])
def test_a_body_that_is_not_json_is_malformed(body):
    with pytest.raises(MalformedResponse, match="not JSON"):
        completion_json(body)


def test_odd_but_readable_completions_are_read():
    """Extra fields, a missing usage, odd indices and odd usage types do not fail the answer."""
    body = {
        "choices": [
            {"index": "1", "message": {"content": None, "reasoning": 5}, "finish_reason": None},
            {"message": {"content": "b", "extra": {"x": 1}}},
        ],
        "usage": {"prompt_tokens": "many", "completion_tokens": 2},
    }
    texts, usage, thinking, reasons = openai_result(body)
    assert texts == ("", "b") and thinking == ("", "") and reasons == ("", "")
    assert usage == Usage()  # an unusable count: unknown, not a crash


# -- Anthropic ------------------------------------------------------------------------------------


def test_anthropic_params():
    req = interleaved(system="sys", prefill="The answer is ", temperature=0.2, max_tokens=50, n=4)
    params = anthropic_params(req, "claude-x")
    assert params["model"] == "claude-x" and params["max_tokens"] == 50
    assert params["system"] == "sys"
    assert params["extra_body"] == {"temperature": 0.2}  # not a create() parameter in SDK 2.x
    assert "n" not in params and "seed" not in params
    user, assistant = params["messages"]
    assert [b["type"] for b in user["content"]] == [
        "text",
        "image",
        "text",
        "image",
        "image",
        "text",
    ]
    images = [b["source"] for b in user["content"] if b["type"] == "image"]
    assert [s["media_type"] for s in images] == ["image/png", "image/jpeg", "image/png"]
    assert images[0] == {
        "type": "base64",
        "media_type": "image/png",
        "data": Part.of_image(PNG1).b64(),
    }
    # the API rejects a final assistant turn ending in whitespace
    assert assistant == {"role": "assistant", "content": "The answer is"}
    bare = anthropic_params(interleaved(), "claude-x")
    assert "system" not in bare and len(bare["messages"]) == 1


def test_anthropic_result():
    message = anthropic.types.Message.model_validate(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [{"type": "text", "text": "B"}, {"type": "text", "text": ") done"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 30, "output_tokens": 4},
        }
    )
    assert anthropic_result(message) == (("B) done",), Usage(30, 4), ("",), ("end_turn",))
    with pytest.raises(MalformedResponse):
        anthropic_result("<html>bad gateway</html>")


# -- Gemini ---------------------------------------------------------------------------------------


def test_gemini_contents_and_config():
    req = interleaved(system="sys", prefill="Answer:", temperature=0.4, max_tokens=64, n=2, seed=5)
    contents, config = gemini_contents(req)
    assert [c.role for c in contents] == ["user", "model"]
    parts = contents[0].parts
    assert [p.text for p in parts] == ["t0", None, "t1", None, None, "t2"]
    blobs = [p.inline_data for p in parts if p.inline_data is not None]
    assert [(b.data, b.mime_type) for b in blobs] == [
        (PNG1, "image/png"),
        (JPEG, "image/jpeg"),
        (PNG2, "image/png"),
    ]
    assert contents[1].parts[0].text == "Answer:"
    assert config.system_instruction == "sys"
    assert (config.temperature, config.max_output_tokens) == (0.4, 64)
    assert (config.candidate_count, config.seed) == (2, 5)
    contents, config = gemini_contents(interleaved())
    assert len(contents) == 1 and config.system_instruction is None and config.seed is None


def test_gemini_result():
    response = genai_types.GenerateContentResponse.model_validate(
        {
            "candidates": [
                {"index": 1, "content": {"role": "model", "parts": [{"text": "two"}]}},
                {
                    "index": 0,
                    "content": {
                        "role": "model",
                        "parts": [{"text": "hmm", "thought": True}, {"text": "o"}, {"text": "ne"}],
                    },
                },
                {"index": 2, "finish_reason": "SAFETY"},
            ],
            "usage_metadata": {
                "prompt_token_count": 50,
                "candidates_token_count": 6,
                "thoughts_token_count": 3,
            },
        }
    )
    assert gemini_result(response) == (
        ("one", "two", ""),
        Usage(50, 9, reasoning_tokens=3),
        ("hmm", "", ""),
        ("", "", "SAFETY"),
    )
    with pytest.raises(MalformedResponse):
        gemini_result(genai_types.GenerateContentResponse.model_validate({}))
    blocked = genai_types.GenerateContentResponse.model_validate(
        {"prompt_feedback": {"block_reason": "SAFETY"}}
    )
    with pytest.raises(BackendError, match="blocked"):
        gemini_result(blocked)


# -- retries --------------------------------------------------------------------------------------


def test_retry_predicates():
    req = httpx2.Request("POST", "http://h.test")
    resp = httpx2.Response(429, request=req)
    decode = json.JSONDecodeError("x", "{", 1)
    assert all(f(decode) for f in (openai_retryable, anthropic_retryable, gemini_retryable))
    assert openai_retryable(openai.APIConnectionError(request=req))
    assert not openai_retryable(openai.APITimeoutError(request=req))
    assert not openai_retryable(openai.RateLimitError("slow down", response=resp, body=None))
    assert anthropic_retryable(anthropic.APIConnectionError(request=req))
    assert not anthropic_retryable(anthropic.APITimeoutError(request=req))
    assert gemini_retryable(httpx2.RemoteProtocolError("dropped", request=req))
    assert not gemini_retryable(httpx2.ReadTimeout("slow", request=req))
    assert not gemini_retryable(ValueError("a bug"))


def test_call_with_retry_retries_only_what_it_is_told():
    calls = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise MalformedResponse("truncated")
        return "ok"

    assert asyncio.run(call_with_retry(flaky, retry.is_malformed)) == "ok"
    assert len(calls) == 3
    calls.clear()

    async def broken() -> str:
        calls.append(1)
        raise RuntimeError("not retried")

    with pytest.raises(RuntimeError):
        asyncio.run(call_with_retry(broken, retry.is_malformed))
    assert len(calls) == 1

    async def always_malformed() -> str:
        calls.append(1)
        raise MalformedResponse("again")

    calls.clear()
    with pytest.raises(MalformedResponse):
        asyncio.run(call_with_retry(always_malformed, retry.is_malformed))
    assert len(calls) == retry.OUTER_ATTEMPTS


# -- keys -----------------------------------------------------------------------------------------


def test_a_missing_key_names_the_variable(monkeypatch):
    with pytest.raises(BackendUnavailable, match=r"^gpt-4o-mini: set OPENAI_API_KEY$"):
        create_backend("gpt-4o-mini")
    with pytest.raises(BackendUnavailable, match="set GEMINI_API_KEY or GOOGLE_API_KEY"):
        create_backend("gemini-2.0-flash")
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    assert create_backend("gemini-2.0-flash")._api_key == KEY
    monkeypatch.setenv("ANTHROPIC_API_KEY", "   ")
    with pytest.raises(BackendUnavailable, match="ANTHROPIC_API_KEY"):
        create_backend("claude-sonnet-4-20250514")


@pytest.mark.parametrize(
    ("name", "var"),
    [
        ("gpt-4o-mini", "OPENAI_API_KEY"),
        ("openai:gpt-4.1", "OPENAI_API_KEY"),
        ("claude-sonnet-4-20250514", "ANTHROPIC_API_KEY"),
        ("google:gemini-2.5-pro", "GEMINI_API_KEY"),
    ],
)
def test_missing_key_makes_backend_unavailable(name, var):
    with pytest.raises(BackendUnavailable, match=var):
        create_backend(name)


def test_redact_env_and_registered_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    # under 8 characters: redacted as a whole token only, kept inside a longer word
    monkeypatch.setenv("ANTHROPIC_API_KEY", "short")
    register_secret("passed-directly-9876")
    text = f"401: bad key {KEY} (also passed-directly-9876), key=short, shortly stays"
    want = "401: bad key [redacted] (also [redacted]), key=[redacted], shortly stays"
    assert redact(text) == want


def test_missing_sdk_is_unavailable(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(BackendUnavailable, match=r"^gpt-4o-mini: pip install 'vlmbench\[api\]'$"):
        create_backend("gpt-4o-mini")


def test_registry_imports_no_sdk():
    sdks = "{'openai', 'anthropic', 'google.genai', 'tenacity'}"
    code = f"import sys, support.backends.registry; print(sorted({sdks} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr


# -- registry -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cls", "model_id", "provider"),
    [
        ("gpt-4o-mini", OpenAIChatBackend, "gpt-4o-mini", "openai"),
        ("gpt-4o", OpenAIChatBackend, "gpt-4o", "openai"),
        ("openai:gpt-4.1", OpenAIChatBackend, "gpt-4.1", "openai"),
        ("claude-3-5-sonnet-20241022", AnthropicBackend, "claude-3-5-sonnet-20241022", "anthropic"),
        ("claude-sonnet-4-20250514", AnthropicBackend, "claude-sonnet-4-20250514", "anthropic"),
        ("anthropic:claude-x", AnthropicBackend, "claude-x", "anthropic"),
        ("gemini-2.0-flash", GeminiBackend, "gemini-2.0-flash", "google"),
        ("google:gemini-2.5-pro", GeminiBackend, "gemini-2.5-pro", "google"),
    ],
)
def test_registry_resolves(monkeypatch, name, cls, model_id, provider):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(var, KEY)
    spec = model_spec(name)
    assert (spec.kind, spec.provider, spec.model_id) == ("api", provider, model_id)
    backend = create_backend(name, BackendOptions(timeout_s=7.5, max_retries=2))
    assert type(backend) is cls
    assert (backend.name, backend.model_id) == (name, model_id)
    endpoint = {"openai": "chat.completions", "anthropic": "messages", "google": "generateContent"}
    assert backend.identity == {
        "provider": provider,
        "model": model_id,
        "endpoint": endpoint[provider],
    }
    assert (backend.timeout_s, backend.max_retries) == (7.5, 2)
    assert backend.default_concurrency == "auto" and backend.reads_hints is False
    assert KEY not in repr(backend) and KEY not in str(backend)


def test_openai_compatible(monkeypatch):
    with pytest.raises(BackendUnavailable, match=r"openai-compatible:x needs --api-base URL"):
        create_backend("openai-compatible:x")
    backend = create_backend(
        "openai-compatible:Qwen/Qwen2.5-VL-7B", BackendOptions(api_base="http://gpu:8000/v1")
    )
    assert backend.prefill == "native"
    assert backend.default_concurrency == 128  # a self-hosted server's batch kept full
    assert OpenAIChatBackend.default_concurrency == "auto"  # OpenAI's own API adapts to its 429s
    assert backend.identity == {
        "provider": "openai-compatible",
        "model": "Qwen/Qwen2.5-VL-7B",
        "endpoint": "chat.completions",
        "base_url": "http://gpu:8000/v1",
    }
    # the server, not how its URL was spelt, nor credentials in it
    spelt = create_backend(
        "openai-compatible:Qwen/Qwen2.5-VL-7B",
        BackendOptions(api_base="http://user:pa55word-secret@GPU:8000/v1/"),
    )
    assert spelt.identity == backend.identity
    assert "pa55word" not in repr(spelt) and "http://gpu:8000/v1" in repr(spelt)
    assert backend._api_key == api_keys.PLACEHOLDER_KEY  # no key needed
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert create_backend("openai:gpt-4o").prefill == "assistant-turn fallback"


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("openai:gpt-4o", "assistant-turn fallback"),
        ("anthropic:claude-sonnet-4-20250514", "native"),
        ("google:gemini-2.0-flash", "model-turn fallback"),
        ("openai-compatible:Qwen/Qwen2.5-VL-7B", "native"),
    ],
)
def test_prefill_is_a_model_trait_the_backend_follows(monkeypatch, name, mode):
    """ModelSpec.prefill (what an evaluation and the manifest read) is how the built backend
    sends a prefill: one trait, the provider class's `prefill`."""
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(variable, KEY)
    spec = model_spec(name)
    backend = create_backend(name, BackendOptions(api_base="http://127.0.0.1:9/v1"))
    assert spec.prefill == backend.prefill == mode
    assert spec.traits["prefill"] == mode
    assert spec.traits["box_convention"] == spec.box_convention


def test_gemini_http_options_turn_retries_on():
    backend = GeminiBackend("g", "gemini-2.0-flash", api_key=KEY, timeout_s=2.5, max_retries=4)
    opts = backend.http_options()
    assert opts.timeout == 2500  # milliseconds
    assert opts.retry_options.attempts == 5
    assert opts.retry_options.http_status_codes == [408, 429, 500, 502, 503, 504]


def test_gemini_retries_a_timed_out_attempt_with_aiohttp_importable(monkeypatch):
    """google-genai sends through aiohttp whenever it is importable, where a timed-out attempt
    ends the call; the backend's own transport keeps it on httpx2, which retries it. aiohttp is
    not a dependency, so the SDK is told it is there (its module flag; without the backend's
    transport the call would then go to aiohttp, which is missing or does not retry)."""
    from google.genai import _api_client

    from support.doubles.loopback import Faults, LoopbackServer

    monkeypatch.setattr(_api_client, "has_aiohttp", True)
    faults = Faults(rate=1.0, kinds=("slow",), attempts=1, slow_s=1.0)  # first attempt: too slow
    with LoopbackServer(lambda r: "yes", api_key=KEY, faults=faults, lifetime_s=60) as server:
        backend = GeminiBackend(
            "g", "loop-model", api_key=KEY, base_url=server.url, timeout_s=0.3, max_retries=2
        )

        async def go():
            try:
                return await backend.generate(Request(parts=(Part.of_text("hi"),)))
            finally:
                await backend.aclose()

        response = asyncio.run(go())
    assert response.text == "yes"
    assert server.stats.faults == {"slow": 1} and server.stats.attempts == 2


# -- prices ---------------------------------------------------------------------------------------


def test_prices():
    assert set(BY_ID) >= {
        "gpt-4o-mini",
        "gpt-4o",
        "claude-3-5-sonnet-20241022",
        "claude-sonnet-4-20250514",
        "gemini-2.0-flash",
    }
    assert cost_usd("gpt-4o-mini", Usage(1_000_000, 1_000_000)) == pytest.approx(0.75)
    assert cost_usd("claude-sonnet-4-20250514", Usage(2000, 100)) == pytest.approx(0.0075)
    assert cost_usd(model_spec("openai:gpt-4o").model_id, Usage(1000, 0)) == pytest.approx(0.0025)
    assert cost_usd("openai:gpt-4o", Usage(1000, 0)) is None  # a --model name is not a price key
    assert cost_usd("unknown-model", Usage(10, 10)) is None
    # thinking is billed as output: reasoning tokens are part of output_tokens, priced with them
    thought = Usage(0, 1_000_000, reasoning_tokens=900_000)
    assert cost_usd("gpt-6.2-sol", thought) == pytest.approx(10.0)
    assert batch_cost_usd("openai", "gpt-6.2-sol", thought) == pytest.approx(5.0)
    assert batch_cost_usd("anthropic", "gpt-6.2-sol", thought) is None  # not its provider


# -- end to end through a mock transport (no socket) ---------------------------------------------

OPENAI_BODY = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 1, "finish_reason": "stop", "message": {"role": "assistant", "content": "B"}},
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "A"}},
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
}
ANTHROPIC_BODY = {
    "id": "m",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "A"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 1},
}
GEMINI_BODY = {
    "candidates": [
        {"index": 0, "content": {"role": "model", "parts": [{"text": "A"}]}},
        {"index": 1, "content": {"role": "model", "parts": [{"text": "B"}]}},
    ],
    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2},
}
CASES = {
    "openai": (OpenAICompatibleBackend, OPENAI_BODY, {}),
    "anthropic": (AnthropicBackend, ANTHROPIC_BODY, {}),
    "gemini": (GeminiBackend, GEMINI_BODY, {}),
}


def run_mock(provider: str, request: Request, reply) -> tuple[object, list[dict]]:
    """Generate through the real SDK with `reply(attempt) -> httpx2.Response`; the sent bodies."""
    cls, _, kw = CASES[provider]
    sent: list[dict] = []

    def handler(http_request):
        sent.append(json.loads(http_request.content))
        return reply(len(sent))

    async def go():
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        backend = cls(
            "m",
            "mod",
            api_key=KEY,
            base_url="http://h.test",
            max_retries=0,
            http_client=client,
            **kw,
        )
        try:
            return await backend.generate(request)
        except BackendError as exc:
            return exc
        finally:
            await backend.aclose()

    return asyncio.run(go()), sent


@pytest.mark.parametrize("provider", list(CASES))
def test_end_to_end_retries_a_malformed_200(provider):
    good = CASES[provider][1]
    request = Request(parts=(Part.of_text("q"), Part.of_image(PNG1)), prefill="Answer:", n=2)

    def reply(attempt):
        if attempt == 1:
            return httpx2.Response(
                200, content=b'{"trunc', headers={"content-type": "application/json"}
            )
        return httpx2.Response(200, json=good)

    response, sent = run_mock(provider, request, reply)
    assert response.texts == (("A", "A") if provider == "anthropic" else ("A", "B"))
    assert response.usage.input_tokens == (20 if provider == "anthropic" else 10)
    body = sent[-1]
    if provider == "openai":
        assert body["continue_final_message"] is True and body["n"] == 2
        assert body["messages"][-1] == {"role": "assistant", "content": "Answer:"}
    elif provider == "anthropic":
        assert len(sent) == 3  # two samples, one retried
        assert body["temperature"] == 0.0 and body["messages"][-1]["role"] == "assistant"
    else:
        assert body["generationConfig"]["candidateCount"] == 2
        assert body["contents"][-1] == {"role": "model", "parts": [{"text": "Answer:"}]}


@pytest.mark.parametrize("provider", list(CASES))
def test_end_to_end_errors_never_show_the_key(provider):
    def reply(attempt):
        error = {"message": f"Incorrect API key provided: {KEY}", "code": 401}
        return httpx2.Response(401, json={"error": error})

    exc, sent = run_mock(provider, Request(parts=(Part.of_text("q"),)), reply)
    assert isinstance(exc, BackendError) and len(sent) == 1  # a 401 is not retried
    assert str(exc).startswith("m: ") and "[redacted]" in str(exc) and KEY not in str(exc)
    assert exc.__cause__ is None and exc.__suppress_context__


def _sent_by(send, n: int) -> tuple[dict, dict]:
    """The JSON body and headers of the one request `send(http_client)` posts (answered with
    `n` choices)."""
    seen: list = []
    reply = {**OPENAI_BODY, "choices": OPENAI_BODY["choices"][-n:]}

    def handler(http_request):
        seen.append(http_request)
        return httpx2.Response(200, json=reply)

    asyncio.run(send(httpx2.AsyncClient(transport=httpx2.MockTransport(handler))))
    (http_request,) = seen
    return json.loads(http_request.content), dict(http_request.headers)


@pytest.mark.parametrize(
    "request_",
    [
        interleaved(system="be brief", temperature=0.7, max_tokens=33),
        interleaved(prefill="Answer: {", n=2, seed=7),
        Request(parts=(Part.of_text('naïve «quoted» "text" \\ \n ✓'),), system="sys ✓"),
        Request(parts=(Part.of_image(PNG1), Part.of_image(PNG1))),  # one part twice
        Request(parts=(Part.of_text(f"holds the slot: {IMAGE_SLOT}"), Part.of_image(JPEG))),
    ],
    ids=["interleaved", "prefill-n-seed", "unicode-text", "repeated-image", "slot-in-text"],
)
@pytest.mark.parametrize("compatible", [True, False])
def test_openai_body_is_what_the_sdk_create_sends(request_, compatible):
    """The body the backend posts equals (as JSON) what the SDK's own chat.completions.create
    sends for openai_params(request), with the same content type."""
    native = compatible

    async def ours(http_client):
        backend_class = OpenAICompatibleBackend if compatible else OpenAIChatBackend
        backend = backend_class(
            "m", "mod", api_key=KEY, base_url="http://h.test",
            max_retries=0, http_client=http_client,
        )  # fmt: skip
        try:
            await backend.generate(request_)
        finally:
            await backend.aclose()

    async def sdk(http_client):
        client = openai.AsyncOpenAI(api_key=KEY, base_url="http://h.test", http_client=http_client)
        try:
            await client.chat.completions.create(**openai_params(request_, "mod", native))
        finally:
            await client.close()

    body, headers = _sent_by(ours, request_.n)
    expected, expected_headers = _sent_by(sdk, request_.n)
    assert body == expected
    assert headers["content-type"] == expected_headers["content-type"] == "application/json"
    assert body["messages"][-1 if not request_.prefill else -2]["role"] == "user"
    urls = [
        c["image_url"]["url"]
        for c in body["messages"][-1 if not request_.prefill else -2]["content"]
        if c["type"] == "image_url"
    ]
    assert urls == [f"data:{p.mime};base64,{p.b64()}" for p in request_.parts if p.is_image]
