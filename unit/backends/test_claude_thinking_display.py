"""Claude's thinking comes back with its text where the suite turns thinking on.

From Opus 4.7 the Messages API's thinking display defaults to "omitted" (thinking blocks with an
empty text, platform.claude.com's "What's new in Claude 4.7"); the suite asks for "summarized"
there, through the real `anthropic` SDK against the loopback (which omits the text unless asked,
support/doubles/loopback_validation.py `anthropic_display`). Earlier models summarize by default
and are sent what they always were; the manifest's traits say which display was asked for.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("anthropic")

from support.backends.anthropic_messages import AnthropicBackend
from support.backends.registry import model_spec
from support.backends.thinking import Thinking
from support.doubles.loopback import LoopbackServer, ScriptAnswer, ScriptRequest
from support.types import Part, Request

KEY = "sk-ant-loopback-display-SECRET-7d21"
THOUGHT = "The frame shows a liver, so the answer is yes."
seen: list[ScriptRequest] = []


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def script(request: ScriptRequest) -> ScriptAnswer:
    seen.append(request)
    return ScriptAnswer("Yes", thinking=THOUGHT)


def answer(model_id: str, thinking: Thinking | None):
    """(the Response, the thinking settings the loopback saw) of one request to `model_id`."""
    seen.clear()
    request = Request(parts=(Part.of_text("Is the liver visible?"),), max_tokens=16)
    with LoopbackServer(script, api_key=KEY) as server:
        backend = AnthropicBackend(
            f"anthropic:{model_id}", model_id, api_key=KEY, base_url=server.url, thinking=thinking
        )

        async def go():
            try:
                return await backend.generate(request)
            finally:
                await backend.aclose()

        response = asyncio.run(go())
        assert server.stats.refused == 0, server.stats.refusals
    return response, seen[-1].thinking


@pytest.mark.parametrize("model_id", ["claude-opus-4-7", "claude-opus-4-6"])
def test_thinking_turned_on_comes_back_with_its_text(model_id):
    response, settings = answer(model_id, Thinking(effort="high"))
    assert response.text == "Yes" and response.thinking == (THOUGHT,)
    assert settings["type"] == "adaptive"


def test_the_display_is_asked_for_only_where_the_default_hides_the_text():
    _, on_47 = answer("claude-opus-4-7", Thinking(effort="high"))
    _, on_46 = answer("claude-opus-4-6", Thinking(effort="high"))
    assert on_47.get("display") == "summarized" and "display" not in on_46
    plain, _ = answer("claude-opus-4-7", None)  # thinking not turned on: nothing asked
    assert plain.thinking == ()
    traits = model_spec("anthropic:claude-opus-4-7+effort-high").traits
    assert traits["thinking_display"] == "summarized"
    assert "thinking_display" not in model_spec("anthropic:claude-opus-4-6+effort-high").traits
