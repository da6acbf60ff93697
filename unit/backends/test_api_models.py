"""The API model table and request rules (support/backends/api_models.py), thinking variants
(support/backends/thinking.py, the registry), and the request bodies the three backends build
from them: nothing sent here (the loopback's refusals: unit/backends/test_api_thinking_runs.py)."""

from __future__ import annotations

import json

import pytest

from support.backends import api_models as am
from support.backends.registry import (
    MODELS,
    UNSUPPORTED_PREFILL,
    model_spec,
    thinking_variants,
)
from support.backends.thinking import Thinking, parse_label, split_variant, variant_name
from support.types import Outcome, Part, Request, Response, Usage

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

from support.backends.anthropic_messages import anthropic_params
from support.backends.gemini import gemini_contents
from support.backends.openai_chat import openai_params


def req(**kw) -> Request:
    base = {"parts": (Part.of_text("Is it real?"),), "max_tokens": 16, "temperature": 0.0}
    return Request(**{**base, **kw})


def openai(model: str, request: Request, thinking: Thinking | None = None) -> dict:
    rules = am.rules_for("openai", model)
    return openai_params(request, model, False, rules=rules, thinking=thinking)


def anthropic(model: str, request: Request, thinking: Thinking | None = None) -> dict:
    rules = am.rules_for("anthropic", model)
    return anthropic_params(request, model, rules=rules, thinking=thinking)


def gemini(model: str, request: Request, thinking: Thinking | None = None):
    rules = am.rules_for("google", model)
    return gemini_contents(request, rules=rules, thinking=thinking)


# -- the table ----------------------------------------------------------------------------------


def test_every_table_model_is_registered_with_prices_and_a_date():
    for row in am.API_MODELS:
        spec = MODELS[row.model_id]
        assert (spec.kind, spec.provider, spec.model_id) == ("api", row.provider, row.model_id)
        assert row.price[0] > 0 and row.price[1] > 0
        assert row.batch_price == (row.price[0] / 2, row.price[1] / 2)
        assert row.taken in ("2025-06-01", "2026-11-26")
        assert am.rules_for(row.provider, row.model_id).sources  # each rule has a source


def test_each_vendor_has_a_reasoning_model_of_today():
    thinking = {
        row.provider
        for row in am.API_MODELS
        if row.taken == "2026-11-26" and am.rules_for(row.provider, row.model_id).thinking != "none"
    }
    assert thinking == {"openai", "anthropic", "google"}


def test_old_names_keep_their_rules_and_requests():
    """The 2025 models are sent what they always were (their cache keys and answers hold)."""
    for model in ("gpt-4o-mini", "gpt-4o"):
        params = openai(model, req(prefill="Sure"))
        assert params["max_tokens"] == 16 and params["temperature"] == 0.0
        assert "reasoning_effort" not in params and "max_completion_tokens" not in params
        assert params["messages"][-1] == {"role": "assistant", "content": "Sure"}
    for model in ("claude-3-5-sonnet-20241022", "claude-sonnet-4-20250514"):
        params = anthropic(model, req(prefill="Sure "))
        assert params["extra_body"] == {"temperature": 0.0} and params["max_tokens"] == 16
        assert params["messages"][-1] == {"role": "assistant", "content": "Sure"}
    contents, config = gemini("gemini-2.0-flash", req(prefill="Sure"))
    assert config.thinking_config is None and config.max_output_tokens == 16
    assert contents[-1].role == "model"


@pytest.mark.parametrize(
    ("model_id", "version"),
    [
        ("claude-3-5-sonnet-20241022", (3, 5)),
        ("claude-sonnet-4-20250514", (4, 0)),
        ("claude-haiku-4-5", (4, 5)),
        ("claude-haiku-4-5-20251001", (4, 5)),
        ("claude-opus-4-7", (4, 7)),
        ("claude-fable-5-1", (5, 1)),
        ("claude-sonnet-5", (5, 0)),
        ("claude-3-7-sonnet-20250219", (3, 7)),
        ("not-claude", None),
    ],
)
def test_claude_versions_from_ids(model_id, version):
    assert am.claude_version(model_id) == version


# -- what is sent -------------------------------------------------------------------------------


def test_openai_reasoning_models_get_the_completion_field_and_no_temperature():
    params = openai("gpt-6.2-sol", req())
    assert "max_tokens" not in params and "temperature" not in params
    # the answer's 16 tokens plus the documented room for reasoning
    assert params["max_completion_tokens"] == 16 + am.OPENAI_REASONING_ROOM
    assert "reasoning_effort" not in params  # the model's default effort
    high = openai("gpt-6.2-sol", req(), Thinking(effort="high"))
    assert high["reasoning_effort"] == "high"


def test_temperature_only_at_effort_none():
    """GPT-5.1+ take temperature only at effort "none" (their default on 5.x)."""
    assert openai("gpt-5.4", req())["temperature"] == 0.0  # default effort: none
    assert openai("gpt-5.4", req())["max_completion_tokens"] == 16  # no reasoning: no room
    low = openai("gpt-5.4", req(), Thinking(effort="low"))
    assert "temperature" not in low and low["max_completion_tokens"] == 16 + 25_000
    none = openai("gpt-6.1-terra", req(), Thinking(effort="none"))
    assert none["temperature"] == 0.0 and none["reasoning_effort"] == "none"
    assert "temperature" not in openai("gpt-6.1-terra", req())  # default medium


def test_claude_46_takes_no_prefill_47_no_temperature():
    stage2 = req(
        prefill="Let's think step by step. It looks synthetic.\n\nFinal answer: the image is"
    )
    sonnet46 = anthropic("claude-sonnet-4-6", stage2)
    assert sonnet46["messages"][-1]["role"] == "user"  # the conversation ends with the user
    instruction = sonnet46["messages"][-1]["content"][-1]["text"]
    assert "Final answer: the image is" in instruction and "Continue it" in instruction
    assert sonnet46["extra_body"] == {"temperature": 0.0}
    opus47 = anthropic("claude-opus-4-7", stage2)
    assert opus47["messages"][-1]["role"] == "user" and "temperature" not in opus47["extra_body"]
    assert opus47["max_tokens"] == 16  # adaptive thinking is off unless asked on 4.x
    thinking = anthropic("claude-opus-4-7", req(), Thinking(effort="xhigh"))
    assert thinking["extra_body"] == {  # its default display hides the text: summarized asked
        "thinking": {"type": "adaptive", "display": "summarized"},
        "output_config": {"effort": "xhigh"},
    }
    assert thinking["max_tokens"] == 16 + am.ANTHROPIC_ROOM
    opus46 = anthropic("claude-opus-4-6", req(), Thinking(effort="high"))
    assert opus46["extra_body"]["thinking"] == {"type": "adaptive"}  # summarized by default
    five = anthropic("claude-sonnet-5-5", req())  # thinks by default: room left for it
    assert five["max_tokens"] == 16 + am.ANTHROPIC_ROOM and "thinking" not in five["extra_body"]


def test_manual_thinking_budget_below_max_tokens_and_no_prefill_or_temperature():
    params = anthropic("claude-haiku-4-5", req(prefill="Sure"), Thinking(budget=2048))
    assert params["extra_body"] == {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert params["max_tokens"] == 16 + 2048 > 2048  # budget_tokens < max_tokens
    assert params["messages"][-1]["role"] == "user"  # thinking refuses a prefill
    plain = anthropic("claude-haiku-4-5", req(prefill="Sure"))  # no thinking: a prefill
    assert plain["messages"][-1] == {"role": "assistant", "content": "Sure"}


def test_gemini_thinking_configs():
    _, flash = gemini("gemini-2.5-flash", req())
    assert flash.thinking_config.include_thoughts and flash.thinking_config.thinking_budget is None
    assert flash.max_output_tokens == 16 + 24_576  # dynamic thinking: up to the largest budget
    _, budget = gemini("gemini-2.5-flash", req(), Thinking(budget=1024))
    assert budget.thinking_config.thinking_budget == 1024 and budget.max_output_tokens == 1040
    _, off = gemini("gemini-2.5-flash", req(), Thinking(budget=0))
    assert off.thinking_config.thinking_budget == 0 and not off.thinking_config.include_thoughts
    assert off.max_output_tokens == 16
    _, level = gemini("gemini-3.6-flash", req(), Thinking(effort="low"))
    assert str(level.thinking_config.thinking_level.value) == "LOW"
    assert level.temperature == 0.0  # accepted (Google recommends 1.0 for Gemini 3)


def test_image_limits_are_checked_before_sending():
    from support.backends.anthropic_messages import AnthropicBackend
    from support.backends.base import BackendError

    backend = AnthropicBackend(
        "claude-sonnet-4-6", "claude-sonnet-4-6", api_key="sk-test-image-limit-7c1d"
    )
    many = req(parts=tuple(Part.of_image(b"\x89PNG\r\n\x1a\n" + bytes(8)) for _ in range(101)))
    with pytest.raises(BackendError, match="at most 100"):
        backend.plan(many)


def test_output_bound_counts_the_room_for_thinking():
    rules = am.rules_for("openai", "gpt-6.2-astra")
    assert am.output_bound(req(n=2), rules) == 2 * (16 + 25_000)
    assert am.output_bound(req(n=2)) == 32


# -- variants -----------------------------------------------------------------------------------


def test_variant_names_round_trip():
    assert split_variant("gpt-5.4+effort-high") == ("gpt-5.4", Thinking(effort="high"))
    assert split_variant("anthropic:claude-x+budget-2048") == (
        "anthropic:claude-x",
        Thinking(budget=2048),
    )
    assert split_variant("gpt-5.4") == ("gpt-5.4", None)
    assert variant_name("m", Thinking(budget=0)) == "m+budget-0"
    assert parse_label("effort-max") == Thinking(effort="max")
    for bad in ("effort-", "budget-x", "budget--1", "speed-high"):
        with pytest.raises(ValueError):
            parse_label(bad)


def test_variant_specs_are_checked_against_the_rules():
    spec = model_spec("gpt-6.2-sol+effort-max")
    assert spec.thinking == Thinking(effort="max") and spec.model_id == "gpt-6.2-sol"
    assert spec.traits["thinking"] == "effort-max"
    for bad, why in [
        ("gpt-6.2-sol+effort-none", "not one of"),  # 6.2 Sol refuses effort "none"
        ("gpt-4o+effort-low", "no effort level"),
        ("gemini-2.5-pro+budget-0", "outside 128..32768"),  # 2.5 Pro cannot turn thinking off
        ("claude-opus-4-7+budget-2048", "no thinking budget"),  # 4.7: adaptive only
        ("oracle+budget-10", "no thinking setting"),
        ("gpt-6.2-sol+effort-high+effort-low", "has a thinking setting already"),
    ]:
        with pytest.raises(ValueError, match=why):
            model_spec(bad)
    assert model_spec("claude-haiku-4-5+budget-1024").prefill == UNSUPPORTED_PREFILL
    assert model_spec("claude-haiku-4-5").prefill == "native"


def test_the_axis_expands_only_the_models_that_take_it():
    axis = thinking_variants(
        ["oracle", "gpt-4o", "gpt-6.2-sol", "gemini-2.5-flash", "claude-opus-4-7"],
        ["low", "max"],
        [0],
    )
    assert axis.models == (
        "oracle",
        "gpt-4o",
        "gpt-6.2-sol+effort-low",
        "gpt-6.2-sol+effort-max",
        "gemini-2.5-flash+budget-0",
        "claude-opus-4-7+effort-low",
        "claude-opus-4-7+effort-max",
    )
    assert axis.as_is == (("oracle", "no thinking control"), ("gpt-4o", "no thinking control"))
    assert axis.refused == ()


def test_a_level_a_model_with_that_control_refuses_is_named_with_what_it_takes():
    axis = thinking_variants(["gpt-5.4", "gpt-6.2-sol", "gemini-2.5-flash"], ["none"], [])
    assert axis.models[:1] == ("gpt-5.4+effort-none",)
    assert axis.refused == (
        "--reasoning-effort none: gpt-6.2-sol does not take it; it takes the effort levels "
        "low, medium, high, xhigh, max (--reasoning-effort)",
        "--reasoning-effort: gemini-2.5-flash has no such control; it takes a thinking budget "
        "of 1..24576 tokens, or 0 (off) (--thinking-budget)",
    )


# -- what comes back ----------------------------------------------------------------------------


def test_responses_and_outcomes_keep_thinking_apart_and_old_rows_unchanged():
    plain = Response(("A",), "m", Usage(3, 2))
    assert plain.to_json() == {
        "texts": ["A"],
        "model": "m",
        "usage": {"input_tokens": 3, "output_tokens": 2},
        "latency_s": 0.0,
        "prompt": None,
    }
    thought = Response(
        ("A",), "m", Usage(3, 9, 7), thinking=("B is it",), finish_reasons=("length",)
    )
    again = Response.from_json(json.loads(json.dumps(thought.to_json())))
    assert again == thought and again.truncated and again.usage.answer_tokens == 2
    row = Outcome("c-m", "e", "m", "wrong", thinking=("x",), finish_reasons=("length",))
    back = Outcome.from_json(json.loads(json.dumps(row.to_json())))
    assert back == row and back.truncated
    assert "thinking" not in Outcome("c-m", "e", "m", "wrong").to_json()


def test_reported_reasoning_tokens_stay_within_the_output():
    assert Usage.reported(10, 5, reasoning=9) == Usage(10, 5, 5)
    assert Usage.reported(10, 5, 4, reasoning=4) == Usage(10, 9, 4)
    assert Usage.reported(10, 5, reasoning=-1) == Usage()


def test_the_docs_hold_the_table():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "api-models.md").read_text()
    assert am.markdown_table() in page


def test_the_html_shows_thinking_collapsed_and_escaped():
    pytest.importorskip("pytest_html")
    from fixtures.case_extras import outcome_table

    o = Outcome(
        "c-m", "e", "m", "unparsable", raw="", thinking=("<b>real</b>",),
        finish_reasons=("MAX_TOKENS",), adapted=("temperature omitted",),
    )  # fmt: skip
    page = outcome_table(o)
    assert "<details><summary>1 span(s), not scored</summary><pre>&lt;b&gt;real" in page
    assert "<b>real</b>" not in page  # escaped
    assert "MAX_TOKENS" in page and "temperature omitted" in page
    plain = outcome_table(Outcome("c-m", "e", "m", "wrong", raw="A"))
    assert "details" not in plain and "finish reasons" not in plain


def test_max_cost_bounds_a_thinking_model_by_its_room():
    from support.client.spending import Spending

    rules = am.rules_for("openai", "gpt-6.2-sol")
    thinking = Spending("openai", "gpt-6.2-sol", [], rules=rules)
    plain = Spending("openai", "gpt-6.2-sol", [])  # as if it did not think
    request = req()
    per_output = am.BY_ID["gpt-6.2-sol"].price[1] / 1e6
    assert thinking.estimate_usd(request) - plain.estimate_usd(request) == pytest.approx(
        am.OPENAI_REASONING_ROOM * per_output
    )


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_a_served_models_reasoning_is_kept_apart(field):
    """vLLM served with a reasoning parser puts the <think> span in `reasoning` (older
    releases: `reasoning_content`); the answer is `content` alone."""
    from support.backends.openai_chat import openai_result

    completion = dict(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "qwen3-vl-thinking",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "length",
                    "message": {"role": "assistant", "content": "real", field: "It is fake."},
                }
            ],
            "usage": {
                "prompt_tokens": 9,
                "completion_tokens": 7,
                "total_tokens": 16,
                "completion_tokens_details": {"reasoning_tokens": 5},
            },
        }
    )
    answer = openai_result(completion)
    assert answer.texts == ("real",) and answer.thinking == ("It is fake.",)
    assert answer.usage == Usage(9, 7, 5) and answer.finish_reasons == ("length",)
    assert answer.response("m").truncated


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--model=oracle", "--reasoning-effort=high"], "none of the models takes high"),
        (["--model=gpt-6.2-sol", "--reasoning-effort=HIGH"], "--reasoning-effort 'HIGH'"),
        (["--model=gemini-2.5-pro", "--thinking-budget=lots"], "--thinking-budget 'lots'"),
        (["--model=gpt-6.2-sol+effort-none"], "is not one of low, medium, high, xhigh, max"),
        # a model with an effort control refuses a level: named with the levels it takes,
        # however many models the run has (gpt-5.4 takes "none")
        (
            ["--model=gpt-6.2-sol,gpt-5.4", "--reasoning-effort=none"],
            "--reasoning-effort none: gpt-6.2-sol does not take it; it takes the effort levels "
            "low, medium, high, xhigh, max",
        ),
        (
            ["--model=gpt-6.2-sol", "--reasoning-effort=none,low"],
            "--reasoning-effort none: gpt-6.2-sol does not take it",
        ),
        (
            ["--model=gemini-2.5-pro,gpt-5.4", "--reasoning-effort=low"],
            "--reasoning-effort: gemini-2.5-pro has no such control; it takes a thinking budget of",
        ),
    ],
)
def test_thinking_options_are_usage_errors_naming_the_option(options, says, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(repo / "evals" / "nyu_distance"), f"--rootdir={repo}",
         "--collect-only", "-q", "-p", "no:cacheprovider", f"--cache-dir={tmp_path}", *options],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 4 and says in proc.stderr, proc.stderr[-2000:]


def test_pgt_says_what_each_mode_sent():
    from support.evaluations.pgt.summary import modes_sent

    outs = [
        Outcome("a-m", "pgt", "claude-sonnet-4-6", "wrong", params={"mode": "prefill"}),
        Outcome("b-m", "pgt", "gpt-4o", "wrong", params={"mode": "prompt"}),
        Outcome("c-m", "pgt", "oracle", "correct", params={"mode": "prefill"}),
    ]
    table = modes_sent(outs).set_index("model")
    assert "oracle" not in table.index  # reference models read the request as it is
    assert table.loc["claude-sonnet-4-6", "stage_1"].startswith("prefill: unsupported")
    assert table.loc["gpt-4o", "stage_1"] == "user turn: the phrase as an instruction"
    assert table.loc["gpt-4o", "stage_2"].startswith("prefill as a final assistant turn")
