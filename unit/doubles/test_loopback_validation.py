"""The loopback server enforces each vendor's documented request rules and thinks as the models
do (issue 38), seen through each vendor's real SDK (127.0.0.1 only; one server for the module)."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as gerrors
from google.genai import types as gtypes

from support.doubles import loopback_validation as rules
from support.doubles.loopback import (
    DEFAULT_THINKING_TOKENS,
    LoopbackServer,
    ScriptAnswer,
    ScriptRequest,
    default_thinking,
)
from support.doubles.loopback_batches import BatchPlan

KEY = "k-rules-123456"
THINK = DEFAULT_THINKING_TOKENS  # 64
DECOY = "The answer is A. " * 4  # thinking that holds a wrong answer
SEEN: list[ScriptRequest] = []


def script(r: ScriptRequest) -> str | ScriptAnswer:
    SEEN.append(r)
    text = r.texts[-1] if r.texts else ""
    if "decoy" in text:
        return ScriptAnswer("B", thinking=DECOY)
    if "long" in text:
        return "B" * 400  # 101 tokens
    return "B"


@pytest.fixture(scope="module")
def server():
    with LoopbackServer(script, api_key=KEY, lifetime_s=120, batches=BatchPlan(polls=0)) as s:
        yield s


@pytest.fixture(scope="module")
def oai(server) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=server.url + "/v1", max_retries=0, timeout=10)


@pytest.fixture(scope="module")
def ant(server) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=server.url, max_retries=0, timeout=10)


@pytest.fixture(scope="module")
def gem(server) -> genai.Client:
    return genai.Client(api_key=KEY, http_options=gtypes.HttpOptions(base_url=server.url))


USER = [{"role": "user", "content": "q"}]
PREFILLED = [*USER, {"role": "assistant", "content": "Answer:"}]


# ---- OpenAI ------------------------------------------------------------------------------------
def chat(oai: openai.OpenAI, model: str, **kw):
    return oai.chat.completions.create(model=model, messages=kw.pop("messages", USER), **kw)


def refused_openai(oai, model: str, param: str, code: str, **kw) -> str:
    with pytest.raises(openai.BadRequestError) as e:
        chat(oai, model, **kw)
    assert e.value.status_code == 400 and e.value.param == param and e.value.code == code
    assert e.value.type == "invalid_request_error"
    return e.value.body["message"]


@pytest.mark.parametrize("model", ["o3", "o4-mini", "gpt-5", "gpt-5-mini", "gpt-5.4", "gpt-6-luna"])
def test_openai_reasoning_models_refuse_max_tokens(oai, model):
    message = refused_openai(oai, model, "max_tokens", "unsupported_parameter", max_tokens=100)
    assert message == (
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead."
    )


@pytest.mark.parametrize("model", ["o3", "gpt-5-mini", "gpt-5.2-pro"])
def test_openai_reasoning_models_refuse_temperature_but_the_default(oai, model):
    message = refused_openai(oai, model, "temperature", "unsupported_value", temperature=0)
    assert message == (
        "Unsupported value: 'temperature' does not support 0 with this model. "
        "Only the default (1) value is supported."
    )
    assert chat(oai, model, temperature=1).choices[0].message.content == "B"


def test_openai_temperature_only_at_effort_none_from_gpt_5_1(oai):
    # gpt-5.1+ default to effort "none": temperature is taken there, and with "none" named
    assert chat(oai, "gpt-5.1", temperature=0).choices[0].message.content == "B"
    assert chat(oai, "gpt-5.4", temperature=0.2, reasoning_effort="none").choices
    message = refused_openai(
        oai, "gpt-5.4", "temperature", "unsupported_value", temperature=0.2, reasoning_effort="high"
    )
    assert "does not support 0.2 with this model" in message


@pytest.mark.parametrize(
    ("model", "effort", "levels"),
    [
        ("gpt-5.2", "minimal", "'none', 'low', 'medium', 'high', and 'xhigh'"),
        ("gpt-5", "none", "'minimal', 'low', 'medium', and 'high'"),
        ("gpt-5.1", "xhigh", "'none', 'low', 'medium', and 'high'"),
        ("o4-mini", "minimal", "'low', 'medium', and 'high'"),
        ("gpt-5-pro", "medium", "'high'"),
    ],
)
def test_openai_reasoning_effort_outside_the_models_levels(oai, model, effort, levels):
    kw = {"reasoning_effort": effort}
    message = refused_openai(oai, model, "reasoning_effort", "unsupported_value", **kw)
    assert message == (
        f"Unsupported value: 'reasoning_effort' does not support '{effort}' with this model. "
        f"Supported values are: {levels}."
    )


def test_openai_non_reasoning_models_take_what_they_took_and_refuse_effort(oai):
    done = chat(oai, "gpt-4o-mini", max_tokens=3, temperature=0, messages=PREFILLED)
    assert done.choices[0].message.content == "B" and done.choices[0].finish_reason == "stop"
    assert done.usage.completion_tokens_details is None  # no reasoning usage, as before
    message = refused_openai(
        oai, "gpt-4o", "reasoning_effort", "unsupported_parameter", reasoning_effort="low"
    )
    assert message == "Unsupported parameter: 'reasoning_effort' is not supported with this model."


def test_openai_reasoning_tokens_count_against_max_completion_tokens(oai):
    done = chat(oai, "gpt-5-mini", max_completion_tokens=1000)
    usage = done.usage
    assert usage.completion_tokens_details.reasoning_tokens == THINK
    assert usage.completion_tokens == THINK + 1 and done.choices[0].finish_reason == "stop"
    assert done.choices[0].message.content == "B"  # Chat Completions returns no reasoning text
    assert "reasoning" not in done.choices[0].message.model_dump(exclude_none=True)
    # the limit spent on thinking: an empty answer, cut
    empty = chat(oai, "gpt-5-mini", max_completion_tokens=THINK)
    assert empty.choices[0].message.content == "" and empty.choices[0].finish_reason == "length"
    assert empty.usage.completion_tokens == empty.usage.completion_tokens_details.reasoning_tokens
    # room for part of the answer: cut to it
    part = chat(
        oai, "o3", max_completion_tokens=THINK + 2, messages=[USER[0] | {"content": "long"}]
    )
    assert part.choices[0].message.content == "B" * 8 and part.choices[0].finish_reason == "length"
    assert part.usage.completion_tokens == THINK + 2


def test_openai_effort_none_reports_no_reasoning_and_a_trailing_assistant_turn_passes(oai):
    done = chat(oai, "gpt-5.1", max_completion_tokens=5)  # default effort none: no thinking
    assert done.usage.completion_tokens_details.reasoning_tokens == 0
    assert done.choices[0].message.content == "B"
    assert chat(oai, "gpt-5", messages=PREFILLED).choices[0].message.content == "B"
    request = SEEN[-1]
    assert request.prefill == "Answer:" and request.thinks and request.thinking is None
    chat(oai, "gpt-5", reasoning_effort="low")
    assert SEEN[-1].thinking == {"effort": "low"} and SEEN[-1].thinks


# ---- Anthropic ---------------------------------------------------------------------------------
def message(ant: anthropic.Anthropic, model: str, **kw):
    kw.setdefault("max_tokens", 2000)
    if "temperature" in kw:  # this SDK no longer takes it as an argument: sent as it is
        kw["extra_body"] = {"temperature": kw.pop("temperature")}
    return ant.messages.create(model=model, messages=kw.pop("messages", USER), **kw)


def refused_anthropic(ant, model: str, **kw) -> str:
    with pytest.raises(anthropic.BadRequestError) as e:
        message(ant, model, **kw)
    assert e.value.status_code == 400 and e.value.body["type"] == "error"
    assert e.value.body["error"]["type"] == "invalid_request_error"
    return e.value.body["error"]["message"]


@pytest.mark.parametrize("model", ["claude-opus-4-6", "claude-sonnet-4-6", "claude-opus-4-7"])
def test_anthropic_4_6_and_later_refuse_a_prefill(ant, model):
    assert refused_anthropic(ant, model, messages=PREFILLED) == rules.PREFILL_REMOVED


@pytest.mark.parametrize(
    "model",
    ["claude-3-5-sonnet-20241022", "claude-sonnet-4-20250514", "claude-haiku-4-5", "claude-x"],
)
def test_anthropic_older_models_take_a_prefill_and_temperature(ant, model):
    done = message(ant, model, messages=PREFILLED, temperature=0, max_tokens=5)
    assert [b.type for b in done.content] == ["text"] and done.stop_reason == "end_turn"


def test_anthropic_4_7_and_later_refuse_temperature_and_manual_thinking(ant):
    for model in ("claude-opus-4-7", "claude-sonnet-5"):
        assert refused_anthropic(ant, model, temperature=1) == rules.TEMPERATURE_DEPRECATED
    enabled = {"type": "enabled", "budget_tokens": 1024}
    assert refused_anthropic(ant, "claude-opus-4-7", thinking=enabled) == rules.ENABLED_REMOVED
    assert refused_anthropic(ant, "claude-opus-5-5", thinking={"type": "disabled"}) == (
        rules.DISABLED_REMOVED
    )


def test_anthropic_adaptive_thinking_and_effort_are_4_6_features(ant):
    adaptive = {"type": "adaptive"}
    assert refused_anthropic(ant, "claude-haiku-4-5", thinking=adaptive) == (
        rules.ADAPTIVE_UNSUPPORTED
    )
    effort = {"effort": "low"}
    assert refused_anthropic(ant, "claude-haiku-4-5", output_config=effort) == (
        rules.EFFORT_UNSUPPORTED
    )
    done = message(ant, "claude-sonnet-4-6", thinking=adaptive, output_config=effort)
    assert [b.type for b in done.content] == ["thinking", "text"]
    assert SEEN[-1].thinking == {"type": "adaptive", "effort": "low"}


def test_anthropic_manual_thinking_budget_rules(ant):
    model = "claude-haiku-4-5"
    small = {"type": "enabled", "budget_tokens": 512}
    assert refused_anthropic(ant, model, thinking=small) == rules.BUDGET_TOO_SMALL
    full = {"type": "enabled", "budget_tokens": 2048}
    assert refused_anthropic(ant, model, thinking=full, max_tokens=2048) == (
        rules.BUDGET_NOT_BELOW_MAX
    )
    ok = {"type": "enabled", "budget_tokens": 1024}
    assert refused_anthropic(ant, model, thinking=ok, temperature=0.5) == (
        rules.TEMPERATURE_WITH_THINKING
    )
    expected = rules.PREFILL_WITH_THINKING.format(index=1)
    assert refused_anthropic(ant, model, thinking=ok, messages=PREFILLED) == expected
    assert expected.startswith("messages.1.content.0.type: Expected `thinking`")


def test_anthropic_thinking_block_before_the_text_and_in_output_tokens(ant):
    done = message(ant, "claude-haiku-4-5", thinking={"type": "enabled", "budget_tokens": 1024})
    thinking, text = done.content
    assert thinking.type == "thinking" and thinking.thinking == default_thinking(THINK)
    assert thinking.signature and text.type == "text" and text.text == "B"
    assert done.usage.output_tokens == THINK + 1 and done.stop_reason == "end_turn"
    assert SEEN[-1].thinking == {"type": "enabled", "budget": 1024} and SEEN[-1].thinks


def test_anthropic_decoy_thinking_display_and_truncation(ant):
    decoy = [{"role": "user", "content": "decoy"}]
    shown = message(ant, "claude-sonnet-4-6", thinking={"type": "adaptive"}, messages=decoy)
    assert shown.content[0].thinking == DECOY and shown.content[1].text == "B"
    # Opus 4.7 omits the thinking text by default: an empty block with its signature
    hidden = message(ant, "claude-opus-4-7", thinking={"type": "adaptive"}, messages=decoy)
    assert hidden.content[0].thinking == "" and hidden.content[0].signature
    assert hidden.usage.output_tokens == len(DECOY) // 4 + 1
    summarized = {"type": "adaptive", "display": "summarized"}
    assert message(ant, "claude-opus-4-7", thinking=summarized, messages=decoy).content[0].thinking
    # Claude 5 thinks without being asked; a limit the thinking spends leaves no text block
    cut = message(ant, "claude-opus-5", max_tokens=THINK // 2)
    assert [b.type for b in cut.content] == ["thinking"] and cut.stop_reason == "max_tokens"
    assert cut.usage.output_tokens == THINK // 2


# ---- Gemini ------------------------------------------------------------------------------------
def generate(gem: genai.Client, model: str, text: str = "q", **config):
    cfg = gtypes.GenerateContentConfig(**config) if config else None
    return gem.models.generate_content(model=model, contents=text, config=cfg)


def thinking(**kw) -> gtypes.ThinkingConfig:
    return gtypes.ThinkingConfig(**kw)


def refused_gemini(gem, model: str, **config) -> str:
    with pytest.raises(gerrors.ClientError) as e:
        generate(gem, model, **config)
    assert e.value.code == 400 and e.value.status == "INVALID_ARGUMENT"
    return e.value.message


@pytest.mark.parametrize(
    ("model", "config", "expected"),
    [
        ("gemini-2.5-pro", {"thinking_budget": 0}, rules.BUDGET_ZERO),
        ("gemini-2.5-pro", {"thinking_budget": 40000}, "The thinking budget (40000) is invalid."),
        ("gemini-2.5-flash", {"thinking_budget": 30000}, "The thinking budget (30000) is invalid."),
        (
            "gemini-2.5-flash-lite",
            {"thinking_budget": 100},
            "The thinking budget (100) is invalid.",
        ),
        ("gemini-2.5-flash", {"thinking_level": "LOW"}, rules.LEVEL_ON_25),
        ("gemini-2.0-flash", {"include_thoughts": True}, rules.NO_THINKING_CONFIG),
        (
            "gemini-3-flash-preview",
            {"thinking_level": "LOW", "thinking_budget": 128},
            rules.BOTH_SET,
        ),
        ("gemini-3.1-pro-preview", {"thinking_budget": 0}, rules.BUDGET_ZERO),
        (
            "gemini-3-pro-preview",
            {"thinking_level": "MEDIUM"},
            "Thinking level MEDIUM is not supported for this model. "
            "Please retry with other thinking level.",
        ),
        ("gemini-3.8-flash", {"thinking_level": "MINIMAL"}, "Thinking level MINIMAL is not"),
    ],
)
def test_gemini_thinking_config_rules(gem, model, config, expected):
    assert refused_gemini(gem, model, thinking_config=thinking(**config)).startswith(expected)


def test_gemini_compliant_thinking_configs_pass(gem):
    for model, config in [
        ("gemini-2.5-pro", {"thinking_budget": 128}),
        ("gemini-2.5-pro", {"thinking_budget": -1}),
        ("gemini-2.5-flash", {"thinking_budget": 0}),
        ("gemini-2.5-flash-lite", {"thinking_budget": 0}),
        ("gemini-3-flash-preview", {"thinking_level": "MINIMAL"}),
        ("gemini-3-pro-preview", {"thinking_level": "LOW"}),
        ("gemini-3.8-flash", {"thinking_budget": 0}),
    ]:
        assert generate(gem, model, thinking_config=thinking(**config)).text == "B"
    old = generate(gem, "gemini-2.0-flash", max_output_tokens=1, temperature=0)
    assert old.text == "B" and old.usage_metadata.thoughts_token_count is None


def test_gemini_thoughts_in_usage_and_parts_only_when_asked(gem):
    plain = generate(gem, "gemini-2.5-flash")
    meta = plain.usage_metadata
    assert meta.thoughts_token_count == THINK and meta.candidates_token_count == 1
    assert meta.total_token_count == meta.prompt_token_count + THINK + 1
    assert [p.thought for p in plain.candidates[0].content.parts] == [None]
    shown = generate(
        gem, "gemini-2.5-pro", "decoy", thinking_config=thinking(include_thoughts=True)
    )
    first, answer = shown.candidates[0].content.parts
    assert first.thought and first.text == DECOY and answer.text == "B" and shown.text == "B"
    assert SEEN[-1].thinking == {"include_thoughts": True} and SEEN[-1].thinks
    off = generate(gem, "gemini-2.5-flash", thinking_config=thinking(thinking_budget=0))
    assert off.usage_metadata.thoughts_token_count is None and not SEEN[-1].thinks
    capped = generate(gem, "gemini-2.5-flash", thinking_config=thinking(thinking_budget=16))
    assert capped.usage_metadata.thoughts_token_count == 16
    assert generate(gem, "gemini-2.5-flash-lite").usage_metadata.thoughts_token_count is None


def test_gemini_thinking_spends_max_output_tokens(gem):
    cut = generate(gem, "gemini-3-pro-preview", max_output_tokens=THINK // 2)
    candidate = cut.candidates[0]
    assert candidate.finish_reason == gtypes.FinishReason.MAX_TOKENS
    assert candidate.content.parts is None and cut.text is None
    assert cut.usage_metadata.thoughts_token_count == THINK // 2
    part = generate(gem, "gemini-2.5-flash", "long", max_output_tokens=THINK + 3)
    assert part.text == "B" * 12 and part.candidates[0].finish_reason == "MAX_TOKENS"


# ---- the server --------------------------------------------------------------------------------
def test_refusals_are_counted_and_kept_and_rules_can_be_turned_off(server, oai):
    before = server.stats.refused
    with pytest.raises(openai.BadRequestError):
        chat(oai, "gpt-5", max_tokens=9)
    stats = server.stats_json()
    assert stats["refused"] == before + 1
    assert stats["refusals"][-1].startswith("openai gpt-5: Unsupported parameter: 'max_tokens'")
    server.rules = False
    try:
        assert chat(oai, "gpt-5", max_tokens=9, temperature=0).choices[0].message.content == ""
    finally:
        server.rules = True
    assert server.stats.refused == before + 1


def test_a_refused_openai_batch_item_is_an_item_error(server, oai):
    rows = [
        {"custom_id": "ok", "body": {"model": "gpt-5", "max_completion_tokens": 999}},
        {"custom_id": "no", "body": {"model": "gpt-5", "max_tokens": 999}},
    ]
    lines = [
        row | {"method": "POST", "url": "/v1/chat/completions"}
        for row in ({**r, "body": r["body"] | {"messages": USER}} for r in rows)
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    upload = oai.files.create(file=("requests.jsonl", data), purpose="batch")
    batch = oai.batches.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    done = oai.batches.retrieve(batch.id)
    assert done.status == "completed" and done.request_counts.failed == 1
    (error_row,) = map(json.loads, oai.files.content(done.error_file_id).text.splitlines())
    assert error_row["custom_id"] == "no" and error_row["response"]["status_code"] == 400
    assert error_row["response"]["body"]["error"]["param"] == "max_tokens"
    (out_row,) = map(json.loads, oai.files.content(done.output_file_id).text.splitlines())
    usage = out_row["response"]["body"]["usage"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] == THINK


def test_a_refused_anthropic_batch_item_is_an_item_error(server, ant):
    requests = [
        {"custom_id": "no", "params": {"model": "claude-opus-4-6", "max_tokens": 9,
                                       "messages": PREFILLED}},
    ]  # fmt: skip
    batch = ant.messages.batches.create(requests=requests)
    assert ant.messages.batches.retrieve(batch.id).processing_status == "ended"
    (result,) = ant.messages.batches.results(batch.id)
    assert result.result.type == "errored"
    assert result.result.error.error.message == rules.PREFILL_REMOVED
