"""The vendors' documented request rules, as the loopback server enforces them.

Each protocol's check (`check_openai`, `check_anthropic`, `check_gemini`; `check` picks one) takes
the model id and the parsed request body and returns the `Refusal` the real API answers a request
the model would reject (the HTTP status and the vendor's error JSON, with the message texts the
vendors' pages and public issue threads quote), or None. `thinking_plan` says whether a compliant
request thinks, how much it may, and whether its thinking text comes back; `thinking_settings` is
the request's thinking settings in one normalized form, as a script sees them. OpenAI has two
protocols here: "openai" (Chat Completions) and "responses" (the Responses API, `check_responses`).

The rules are keyed by model-id patterns (the vendors' generations), parsed here from the id
alone, and deliberately independent of the suite's own model table (support/backends/api_models.py):
the loopback is the check on that table. An id no pattern knows (`loop-model`, `m`, `gpt-x`) gets
no rules, and thinks only when the request asks for it explicitly.

Sources: each rule cites a vendor page or an issue thread that quotes the API's error text, with
the date it was read (through stored copies, not the live pages): rules change with each model
generation, so re-read them when a new one ships. Where a detail was not found, the rule is left
out rather than guessed (see the module's "not enforced" notes at the end).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# ---- the error shapes --------------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    """An API's answer to a request the model rejects: the HTTP status and the error body."""

    status: int
    body: dict[str, Any]

    @property
    def message(self) -> str:
        return str(self.body["error"]["message"])


class Refused(Exception):
    """Raised where a refusal cannot be returned (a batch item): carries the refusal."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def openai_refusal(message: str, param: str | None, code: str | None) -> Refusal:
    """OpenAI's 400 body (platform.openai.com/docs/guides/error-codes; the shape quoted in
    tmc/langchaingo#1355, diffbot/code-gpt-docs#445)."""
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return Refusal(400, {"error": error})


def anthropic_refusal(message: str) -> Refusal:
    """Anthropic's 400 body (docs.anthropic.com/en/api/errors; the threads below)."""
    error = {"type": "invalid_request_error", "message": message}
    return Refusal(400, {"type": "error", "error": error})


def gemini_refusal(message: str) -> Refusal:
    """Gemini's 400 body (ai.google.dev/api/rest; RooCodeInc/Roo-Code#4399)."""
    return Refusal(400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}})


@dataclass(frozen=True)
class ThinkingPlan:
    """How a compliant request thinks: `budget` caps its thinking tokens (None: no cap; 0: it does
    not think, but its usage still reports reasoning tokens, as OpenAI's reasoning models do at
    effort "none"), `shown` says whether the thinking text comes back."""

    budget: int | None = None
    shown: bool = False


# ---- OpenAI Chat Completions -------------------------------------------------------------------

# Reasoning models: o-series and GPT-5/6. Chat variants (gpt-5-chat-latest) are not reasoning
# models and are left unknown.
_OPENAI_REASONING = re.compile(r"^(o1|o3|o4|gpt-5|gpt-6)(?!.*-chat)")
# Non-reasoning models: they take temperature and max_tokens, not reasoning_effort.
_OPENAI_PLAIN = re.compile(r"^(gpt-4o|gpt-4\.1|gpt-4-|gpt-4$|gpt-3\.5|chatgpt-4o)")

_O_SERIES = ("low", "medium", "high")
_GPT5 = ("minimal", "low", "medium", "high")
_GPT51 = ("none", "low", "medium", "high")
_GPT52 = ("none", "low", "medium", "high", "xhigh")
_GPT6_NO_NONE = ("low", "medium", "high", "xhigh", "max")
_GPT6 = ("none", "low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True)
class OpenAIGeneration:
    pattern: str
    levels: tuple[str, ...] | None  # reasoning_effort values accepted (None: not checked)
    default: str | None  # the effort of a request that names none (None: not "none")
    # "max" only through the Responses API: Chat Completions refuses it (GPT-6.x Astra and Sol)
    max_responses_only: bool = False


# First match wins. Sources:
# - o-series low/medium/high: platform.openai.com/docs/guides/reasoning (read 2026-11-26).
# - gpt-5 minimal..high, default medium; gpt-5-pro high only; gpt-5.1 none..high, default none:
#   openai/openai-agents-python#2089 quotes "Unsupported value: 'minimal' is not supported with
#   the 'gpt-5.1' model. Supported values are: 'none', 'low', 'medium', and 'high'."; gpt-5-pro
#   and gpt-5.1 in Kilo-Org/cloud#490's / ai-job-hunter-app#933's quoted OpenAI docs; the 5.1
#   default none in BerriAI/litellm#17011 and langchain-ai/langchain#35424 (read 2026-11-26).
# - gpt-5.2 and later 5.x none..xhigh ("'minimal' ... REJECTED"), default none: langchain#35424,
#   the Chat Completions message quoted in the research notes (Natively-AI-assistant #321);
#   gpt-5.x-pro medium/high/xhigh: langchain#35424's gpt-5.2-pro test (read 2026-11-26).
# - gpt-6.x: developers.openai.com/api/docs/models/gpt-6.2-sol ("The API rejects requests that
#   set reasoning effort to none"), the models page, dev.to/aihubmix GPT-6.1 Terra post; "No GPT-6
#   model defaults to none" (yologdev/yoagent v0.27.4) (read 2026-11-26, secondary sources).
# - codex variants: levels not gathered, not checked.
# - "max" on GPT-6.x Astra and Sol only through the Responses API: Chat Completions takes low to
#   xhigh ("Chat Completions accepts low, medium, high, and xhigh, Responses API adds max",
#   BerriAI/litellm-docs#1173 on gpt-6-astra, checked against the live API; "in Chat
#   Completions, gpt-6.1-sol goes up to xhigh; use Responses for max", docs.laozhang.ai GPT-6
#   notes, 2026-11-04) (read 2026-12-06). Not found for Terra and Luna: not enforced there.
OPENAI_GENERATIONS: tuple[OpenAIGeneration, ...] = (
    OpenAIGeneration(r"^gpt-5.*codex", None, None),
    OpenAIGeneration(r"^gpt-5-pro", ("high",), "high"),
    OpenAIGeneration(r"^gpt-5\.\d+-pro", ("medium", "high", "xhigh"), "medium"),
    OpenAIGeneration(r"^gpt-5(-mini|-nano)?(-\d{4}-\d{2}-\d{2})?$", _GPT5, "medium"),
    OpenAIGeneration(r"^gpt-5\.1(?!\d)", _GPT51, "none"),
    OpenAIGeneration(r"^gpt-5\.\d+", _GPT52, "none"),
    OpenAIGeneration(r"^gpt-6(\.2-(astra|sol)|-astra|\.1-sol)", _GPT6_NO_NONE, None, True),
    OpenAIGeneration(r"^gpt-6(\.1-terra|-luna|-sol)", _GPT6, None),
    OpenAIGeneration(r"^gpt-6", None, None),
    OpenAIGeneration(r"^o[134]", _O_SERIES, "medium"),
)


def openai_generation(model: str) -> OpenAIGeneration | None:
    """The reasoning generation of an OpenAI model id (None: not a reasoning model, or unknown)."""
    if not _OPENAI_REASONING.match(model):
        return None
    for gen in OPENAI_GENERATIONS:
        if re.match(gen.pattern, model):
            return gen
    return OpenAIGeneration(r".*", None, None)


def _listed(values: tuple[str, ...]) -> str:
    quoted = [f"'{v}'" for v in values]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}"


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, int | float) else str(value)


# the user content parts Chat Completions takes (platform.openai.com/docs/api-reference/chat/
# create: text, image, audio, file); a clip's `video_url`, vLLM's, is not one of them (the
# cookbook sends a video's frames as images: developers.openai.com/cookbook/examples/
# gpt_with_vision_for_video_understanding; read 2026-12-06)
OPENAI_CONTENT_PARTS = ("text", "image_url", "input_audio", "file")


def _openai_unknown_part(body: dict[str, Any]) -> Refusal | None:
    """A user content part of a type Chat Completions does not take: its 400 `invalid_value`
    (the shape of the API's other unsupported values; the exact text for `video_url` was not
    found quoted, so the wording follows theirs)."""
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in OPENAI_CONTENT_PARTS:
                return openai_refusal(
                    f"Invalid value: '{kind}'. Supported values are: "
                    f"{_listed(OPENAI_CONTENT_PARTS)}.",
                    f"messages[{i}].content[{j}].type",
                    "invalid_value",
                )
    return None


def check_openai(model: str, body: dict[str, Any]) -> Refusal | None:
    """A Chat Completions request's refusal, if the model rejects it."""
    if _OPENAI_PLAIN.match(model) or _OPENAI_REASONING.match(model):  # OpenAI's own models
        unknown = _openai_unknown_part(body)
        if unknown is not None:
            return unknown
    effort = body.get("reasoning_effort")
    if _OPENAI_PLAIN.match(model) and effort is not None:
        # a non-reasoning model: "Unsupported parameter: 'reasoning_effort' is not supported
        # with this model." (quoted in TypeWhisper, effort_scale and other clients' tests of
        # gpt-4o / gpt-4.1; read 2026-11-26)
        return openai_refusal(
            "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
            "reasoning_effort",
            "unsupported_parameter",
        )
    gen = openai_generation(model)
    if gen is None:
        return None
    if body.get("max_tokens") is not None:
        # platform.openai.com/docs/guides/reasoning; the body quoted in
        # griptape-ai/ComfyUI-Griptape#312, koosoli/ESPHomeDesigner#379 (read 2026-11-26)
        return openai_refusal(
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            "max_tokens",
            "unsupported_parameter",
        )
    if effort is not None and gen.levels is not None and effort not in gen.levels:
        # the Chat Completions wording (research notes, Natively-AI-assistant #321;
        # Kilo-Org/cloud#3807 quotes the same shape; read 2026-11-26)
        return openai_refusal(
            f"Unsupported value: 'reasoning_effort' does not support '{effort}' with this "
            f"model. Supported values are: {_listed(gen.levels)}.",
            "reasoning_effort",
            "unsupported_value",
        )
    if effort == "max" and gen.max_responses_only and gen.levels is not None:
        # the exact text was not found quoted: the wording follows the Chat Completions
        # refusals that send a client to /v1/responses ("Function tools with reasoning_effort are
        # not supported for gpt-6-sol in /v1/chat/completions. To use function tools, use
        # /v1/responses or set reasoning_effort to 'none'.", onyx-dot-app/onyx#15008)
        chat = tuple(level for level in gen.levels if level != "max")
        return openai_refusal(
            "Unsupported value: 'reasoning_effort' does not support 'max' with this model in "
            f"/v1/chat/completions. Supported values are: {_listed(chat)}. To use 'max', use "
            "/v1/responses.",
            "reasoning_effort",
            "unsupported_value",
        )
    temperature = body.get("temperature")
    effective = effort if effort is not None else gen.default
    if temperature is not None and temperature != 1 and effective != "none":
        # "Only the default (1) value is supported" (tmc/langchaingo#1355, johny-b/llmcomp#69 on
        # gpt-5.4, TypeWhisper#311 on gpt-5.4 at effort low..high); at effort "none" GPT-5.1+
        # accept it (developers.openai.com/api/docs/guides/deployment-checklist: "When reasoning
        # effort is not none, remove temperature, top_p, and top_logprobs"; vercel/ai#10942,
        # BerriAI/litellm#17011) (read 2026-11-26)
        return openai_refusal(
            f"Unsupported value: 'temperature' does not support {_number(temperature)} with "
            "this model. Only the default (1) value is supported.",
            "temperature",
            "unsupported_value",
        )
    return None


def _openai_plan(model: str, body: dict[str, Any]) -> ThinkingPlan | None:
    """Reasoning models always report reasoning tokens; they think unless the effort is "none".
    Chat Completions never returns the reasoning text (platform.openai.com/docs/guides/reasoning:
    "reasoning tokens are not visible via the API")."""
    effort = body.get("reasoning_effort")
    gen = openai_generation(model)
    if gen is None:
        if effort is None or effort == "none" or _OPENAI_PLAIN.match(model):
            return None
        return ThinkingPlan()  # an unknown model asked to reason
    effective = effort if effort is not None else gen.default
    return ThinkingPlan(budget=0 if effective == "none" else None)


# ---- OpenAI Responses --------------------------------------------------------------------------

# the request body's fields (platform.openai.com/docs/api-reference/responses/create, the SDK's
# ResponseCreateParams, openai 3.63; read 2026-12-06): any other is refused with OpenAI's
# "unknown_parameter" code (its exact text for the Responses API was not found quoted: the
# wording follows the Chat Completions refusals above)
RESPONSES_FIELDS = frozenset({
    "background", "conversation", "include", "input", "instructions", "max_output_tokens",
    "max_tool_calls", "metadata", "model", "parallel_tool_calls", "previous_response_id",
    "prompt", "prompt_cache_key", "prompt_cache_retention", "reasoning", "safety_identifier",
    "service_tier", "store", "stream", "stream_options", "temperature", "text", "tool_choice",
    "tools", "top_logprobs", "top_p", "truncation", "user",
})  # fmt: skip
# Chat Completions fields whose place in the Responses API is another (the API reference's
# max_output_tokens and reasoning.effort; the texts were not found quoted: "unsupported_parameter"
# with the field's new place, as the Chat Completions refusal names max_completion_tokens)
RESPONSES_MOVED = {
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
    "reasoning_effort": "reasoning.effort",
    "response_format": "text.format",
}
# input content parts (the API reference's input item content list; an assistant message's
# output_text and refusal parts as a conversation's earlier turns carry them)
RESPONSES_PARTS = ("input_text", "input_image", "input_file", "output_text", "refusal")
RESPONSES_SUMMARIES = ("auto", "concise", "detailed")  # reasoning.summary


def _responses_reasoning(body: dict[str, Any]) -> dict[str, Any]:
    reasoning = body.get("reasoning")
    return reasoning if isinstance(reasoning, dict) else {}


def _responses_unknown_part(body: dict[str, Any]) -> Refusal | None:
    items = body.get("input")
    for i, item in enumerate(items if isinstance(items, list) else []):
        content = item.get("content") if isinstance(item, dict) else None
        for j, part in enumerate(content if isinstance(content, list) else []):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in RESPONSES_PARTS:
                return openai_refusal(
                    f"Invalid value: '{kind}'. Supported values are: {_listed(RESPONSES_PARTS)}.",
                    f"input[{i}].content[{j}].type",
                    "invalid_value",
                )
    return None


def check_responses(model: str, body: dict[str, Any]) -> Refusal | None:
    """A Responses API request's refusal, if the API or the model rejects it: a field it does
    not have (`n`: the API has none; `max_tokens`: moved to `max_output_tokens`), an input part it
    does not take, `reasoning` on a model that does not reason, an effort the model does not
    take, a summary setting it does not know, or a temperature on a reasoning model that
    reasons (platform.openai.com/docs/guides/reasoning; developers.openai.com/api/docs/guides/
    deployment-checklist: "When reasoning effort is not none, remove temperature, top_p, and
    top_logprobs"; read 2026-12-06)."""
    for name in body:
        if name in RESPONSES_MOVED:
            return openai_refusal(
                f"Unsupported parameter: '{name}'. In the Responses API, this parameter has "
                f"moved to '{RESPONSES_MOVED[name]}'.",
                name,
                "unsupported_parameter",
            )
        if name not in RESPONSES_FIELDS:
            return openai_refusal(f"Unknown parameter: '{name}'.", name, "unknown_parameter")
    unknown = _responses_unknown_part(body)
    if unknown is not None:
        return unknown
    reasoning = _responses_reasoning(body)
    effort = reasoning.get("effort")
    summary = reasoning.get("summary")
    if summary is not None and summary not in RESPONSES_SUMMARIES:
        return openai_refusal(
            f"Invalid value: '{summary}'. Supported values are: {_listed(RESPONSES_SUMMARIES)}.",
            "reasoning.summary",
            "invalid_value",
        )
    if _OPENAI_PLAIN.match(model) and (effort is not None or summary is not None):
        # the Chat Completions text for a non-reasoning model, at the Responses field
        return openai_refusal(
            "Unsupported parameter: 'reasoning.effort' is not supported with this model.",
            "reasoning.effort",
            "unsupported_parameter",
        )
    gen = openai_generation(model)
    if gen is None:
        return None
    if effort is not None and gen.levels is not None and effort not in gen.levels:
        # the Chat Completions wording at the Responses field (every level the model takes,
        # "max" included)
        return openai_refusal(
            f"Unsupported value: 'reasoning.effort' does not support '{effort}' with this "
            f"model. Supported values are: {_listed(gen.levels)}.",
            "reasoning.effort",
            "unsupported_value",
        )
    temperature = body.get("temperature")
    effective = effort if effort is not None else gen.default
    if temperature is not None and temperature != 1 and effective != "none":
        # "Unsupported parameter: 'temperature' is not supported with this model." (the
        # Responses API's 400 on reasoning models, quoted in incidentfox/incidentfox#111)
        return openai_refusal(
            "Unsupported parameter: 'temperature' is not supported with this model.",
            "temperature",
            "unsupported_parameter",
        )
    return None


def _responses_plan(model: str, body: dict[str, Any]) -> ThinkingPlan | None:
    """Reasoning models report reasoning tokens and think unless the effort is "none"; the
    reasoning item carries a summary only when `reasoning.summary` asks for one (platform.openai.
    com/docs/guides/reasoning, "Reasoning summaries"; read 2026-12-06)."""
    reasoning = _responses_reasoning(body)
    effort = reasoning.get("effort")
    shown = reasoning.get("summary") in RESPONSES_SUMMARIES
    gen = openai_generation(model)
    if gen is None:
        if effort is None or effort == "none" or _OPENAI_PLAIN.match(model):
            return None
        return ThinkingPlan(shown=shown)  # an unknown model asked to reason
    effective = effort if effort is not None else gen.default
    return ThinkingPlan(budget=0 if effective == "none" else None, shown=shown)


# ---- Anthropic Messages ------------------------------------------------------------------------

_CLAUDE_NEW = re.compile(r"^claude-(opus|sonnet|haiku|fable|mythos)-(\d+)(?:-(\d{1,2})(?!\d))?")
_CLAUDE_OLD = re.compile(r"^claude-(\d+)(?:-(\d{1,2})(?!\d))?-(opus|sonnet|haiku)")
_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"

# the texts (each thread quotes the API's body; read 2026-11-26)
PREFILL_REMOVED = (  # strands-agents/sdk-python#1694, agenticloops-ai/agentic-ai-engineering#43
    "This model does not support assistant message prefill. "
    "The conversation must end with a user message."
)
TEMPERATURE_DEPRECATED = "`temperature` is deprecated for this model."  # crewAIInc/crewAI#5811
ENABLED_REMOVED = (  # earendil-works/pi#3297, anomalyco/opencode#23007 (claude-opus-4-7)
    '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" '
    'and "output_config.effort" to control thinking behavior.'
)
DISABLED_REMOVED = ENABLED_REMOVED.replace("thinking.type.enabled", "thinking.type.disabled")
ADAPTIVE_UNSUPPORTED = "adaptive thinking is not supported on this model"  # pensarai/apex#890
EFFORT_UNSUPPORTED = "This model does not support the effort parameter."  # haiku-4-5, probed
BUDGET_TOO_SMALL = (  # tingly-dev/tingly-box#569; clients' tests quoting the API
    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
)
BUDGET_NOT_BELOW_MAX = (  # liuw1535/antigravity2api-nodejs#149
    "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
    f"documentation at {_DOCS}#max-tokens-and-context-window-size"
)
TEMPERATURE_WITH_THINKING = (  # dotCipher/opencode-claude-bridge#1; a recorded 2026 response body
    "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode. Please "
    "consult our documentation at https://platform.claude.com/docs/en/build-with-claude/"
    "extended-thinking"
)
PREFILL_WITH_THINKING = (  # n8n-io/n8n#22550, router-for-me/CLIProxyAPI#1109
    "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`text`. When `thinking` is enabled, a final `assistant` message must start with a thinking "
    "block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend "
    "you include thinking blocks from previous turns. To avoid this requirement, disable "
    f"`thinking`. Please consult our documentation at {_DOCS}"
)
MIN_BUDGET = 1024
# user content blocks the Messages API takes (platform.claude.com/docs/en/api/messages); any other
# type is refused with the validator's union-tag text, as quoted from the API in AWS Bedrock's
# Claude troubleshooting table ("messages.0.content.1: Input tag 'document' found using 'type'
# does not match any of the expected tags: ...") (read 2026-12-06)
ANTHROPIC_BLOCKS = (
    "text", "image", "document", "search_result", "tool_use", "tool_result", "thinking",
    "redacted_thinking", "server_tool_use", "web_search_tool_result", "container_upload",
)  # fmt: skip
# images a request may hold: "100 per request on the API, for models with a 200k-token context
# window" (platform.claude.com/docs/en/build-with-claude/vision, "General limits"; 600 for the
# others, not enforced: see the end); the API's text quoted in anthropics/claude-code#19822
# ("Too much media: 0 document pages + 102 images > 100") (read 2026-12-06)
ANTHROPIC_MAX_IMAGES = 100


def _anthropic_media(body: dict[str, Any]) -> Refusal | None:
    """A content block of a type the Messages API does not take, or more images than
    ANTHROPIC_MAX_IMAGES."""
    images = 0
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for j, block in enumerate(content):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind not in ANTHROPIC_BLOCKS:
                tags = ", ".join(f"'{t}'" for t in ANTHROPIC_BLOCKS)
                return anthropic_refusal(
                    f"messages.{i}.content.{j}: Input tag '{kind}' found using 'type' does not "
                    f"match any of the expected tags: {tags}"
                )
            images += kind == "image"
    if images > ANTHROPIC_MAX_IMAGES:
        return anthropic_refusal(
            f"Too much media: 0 document pages + {images} images > {ANTHROPIC_MAX_IMAGES}"
        )
    return None


def claude_version(model: str) -> tuple[str, tuple[int, int]] | None:
    """(family, (major, minor)) of a Claude model id: `claude-opus-4-7` -> ("opus", (4, 7)),
    `claude-sonnet-4-20250514` -> ("sonnet", (4, 0)), `claude-3-5-sonnet-20241022` ->
    ("sonnet", (3, 5)); None for an id of neither form."""
    if m := _CLAUDE_NEW.match(model):
        return m[1], (int(m[2]), int(m[3] or 0))
    if m := _CLAUDE_OLD.match(model):
        return m[3], (int(m[1]), int(m[2] or 0))
    return None


def _thinking_type(body: dict[str, Any]) -> str | None:
    thinking = body.get("thinking")
    return thinking.get("type") if isinstance(thinking, dict) else None


def _claude_thinks_by_default(version: tuple[int, int]) -> bool:
    """Claude 5 models think when `thinking` is left out (platform.claude.com/docs/en/models/
    opus-5/migration-guide, read 2026-11-26)."""
    return version >= (5, 0)


def _final_assistant(body: dict[str, Any]) -> int | None:
    """The index of a final assistant message (a prefill), if the conversation ends with one."""
    messages = body.get("messages") or []
    if messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "assistant":
        return len(messages) - 1
    return None


def check_anthropic(model: str, body: dict[str, Any]) -> Refusal | None:
    """A Messages request's refusal, if the model rejects it."""
    parsed = claude_version(model)
    kind = _thinking_type(body)
    effort = (body.get("output_config") or {}).get("effort")
    prefill = _final_assistant(body)
    temperature = body.get("temperature")
    if parsed is None:
        return None
    media = _anthropic_media(body)
    if media is not None:
        return media
    family, version = parsed
    if version >= (4, 6) and prefill is not None:
        # platform.claude.com/docs/en/about-claude/models/whats-new-claude-4-6#breaking-changes
        return anthropic_refusal(PREFILL_REMOVED)
    if version >= (4, 7) and temperature is not None:
        # any value, 1 included: sampling parameters removed on 4.7+ (crewAIInc/crewAI#5811;
        # research notes: Opus 4.7/4.8, Opus 5/5.5, Sonnet 5/5.5, Haiku 5.5, Fable)
        return anthropic_refusal(TEMPERATURE_DEPRECATED)
    if version >= (4, 7) and kind == "enabled":
        # platform.claude.com/docs/en/build-with-claude/extended-thinking: "Claude 4.7 and later
        # models do not support it and reject requests that use it, returning a 400 error"
        return anthropic_refusal(ENABLED_REMOVED)
    no_disable = (family in ("opus", "sonnet") and version >= (5, 5)) or (
        family == "fable" and version >= (5, 1)
    )
    if no_disable and kind == "disabled":
        # thinking cannot be turned off on Opus 5.5 and Fable 5.1; Sonnet 5.5 takes
        # "between_tools" instead (platform.claude.com/docs/en/about-claude/models/
        # whats-new-opus-5-5, .../models/sonnet-5-5/whats-new-sonnet-5-5; the text reproduced
        # live in dev.to/persimmoq "Claude Opus 5.5 / Sonnet 5.5: 5 settings that return 400")
        return anthropic_refusal(DISABLED_REMOVED)
    if version < (4, 6) and kind == "adaptive":
        # adaptive thinking is 4.6+ (platform.claude.com/docs/en/build-with-claude/
        # adaptive-thinking); the text in pensarai/apex#890 (haiku-4-5)
        return anthropic_refusal(ADAPTIVE_UNSUPPORTED)
    if effort is not None and (version < (4, 5) or (version < (4, 6) and family != "opus")):
        # the effort parameter: Opus 4.5 and 4.6+ (platform.claude.com/docs/en/build-with-claude/
        # effort); haiku-4-5's 400 quoted in a client probed 2026-08-28
        return anthropic_refusal(EFFORT_UNSUPPORTED)
    if kind == "enabled":
        budget = (body.get("thinking") or {}).get("budget_tokens")
        if not isinstance(budget, int) or budget < MIN_BUDGET:
            # docs.anthropic.com/en/api/messages#body-thinking ("Must be ≥1024 and less than
            # max_tokens")
            return anthropic_refusal(BUDGET_TOO_SMALL)
        if budget >= int(body.get("max_tokens") or 0):
            return anthropic_refusal(BUDGET_NOT_BELOW_MAX)
    thinks = kind in ("enabled", "adaptive") or (
        kind is None and _claude_thinks_by_default(version)
    )
    if thinks and temperature is not None and temperature != 1:
        # "Thinking isn't compatible with temperature or top_k modifications" (extended-thinking,
        # important considerations)
        return anthropic_refusal(TEMPERATURE_WITH_THINKING)
    if thinks and prefill is not None:
        # a final assistant turn must start with a thinking block when thinking is on
        return anthropic_refusal(PREFILL_WITH_THINKING.format(index=prefill))
    return None


def anthropic_display(model: str, body: dict[str, Any]) -> str:
    """ "summarized" or "omitted": the thinking text comes back, or only an empty block with its
    signature. Opus 4.7+ (and Fable, Mythos) default to "omitted" (platform.claude.com/docs/en/
    about-claude/models/whats-new-claude-4-7#thinking-content-omitted-by-default;
    anthropics/claude-code#49268; read 2026-11-26), earlier models to "summarized"."""
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("display") in ("summarized", "omitted"):
        return str(thinking["display"])
    parsed = claude_version(model)
    if parsed is not None:
        family, version = parsed
        if family in ("fable", "mythos") or (family == "opus" and version >= (4, 7)):
            return "omitted"
    return "summarized"


def _anthropic_plan(model: str, body: dict[str, Any]) -> ThinkingPlan | None:
    """Thinking with `enabled` (capped at budget_tokens) or `adaptive`, and on Claude 5 by
    default; thinking tokens are output tokens counted against max_tokens
    (platform.claude.com/docs/build-with-claude/thinking)."""
    kind = _thinking_type(body)
    parsed = claude_version(model)
    shown = anthropic_display(model, body) != "omitted"
    if kind == "enabled":
        budget = (body.get("thinking") or {}).get("budget_tokens")
        return ThinkingPlan(budget if isinstance(budget, int) else None, shown)
    if kind == "adaptive" or (kind is None and parsed and _claude_thinks_by_default(parsed[1])):
        return ThinkingPlan(None, shown)
    return None


# ---- Gemini generateContent --------------------------------------------------------------------

NO_THINKING_CONFIG = "thinking_config is not supported."  # immersive-translate#2976 (2.0)
BUDGET_ZERO = "Budget 0 is invalid. This model only works in thinking mode."  # vercel/ai#8027
LEVEL_ON_25 = "Thinking level is not supported for this model."  # RooCodeInc/Roo-Code#10700
BOTH_SET = "You can only set only one of thinking budget and thinking level."  # eclipse-peon-ai#115


@dataclass(frozen=True)
class GeminiGeneration:
    pattern: str
    budget: tuple[int, int] | None  # thinkingBudget's range (-1, dynamic, always allowed)
    zero_ok: bool  # whether thinkingBudget 0 (thinking off) is accepted
    levels: tuple[str, ...] | None  # thinkingLevel values (None: levels refused, 2.5)
    thinks_by_default: bool
    level_checked: bool = True


_LEVELS_ALL = ("minimal", "low", "medium", "high")
# First match wins. Sources (read 2026-11-26):
# - 2.5 ranges: ai.google.dev/gemini-api/docs/thinking (the table quoted in
#   checkmarble/llmberjack#14 and snailyp/gemini-balance#195: Pro 128..32768, cannot turn
#   thinking off; Flash 0..24576; Flash-Lite 512..24576, does not think by default; -1 dynamic);
#   "If you use the thinking_level parameter with a model earlier than Gemini 3, the model returns
#   an error" (Vertex docs quoted in juspay/neurolink#1707).
# - 3.x levels: ai.google.dev/gemini-api/docs/gemini-3 (Gemini 3 Pro low/high, egoist/
#   chatwise-releases#1206 "Thinking level MEDIUM is not supported"); 3.1+ Pro low/medium/high, no
#   minimal (vellum-ai/vellum-assistant#32687); 3 Flash and Flash-Lite all four
#   (flachesis/gemini-rust#61); 3.7/3.8 Flash low/medium/high (can1357/oh-my-pi#10543,
#   earendil-works/pi#9455, which also says 3.8 Flash accepts thinkingBudget 0); Pro rejects
#   budget 0 ("Budget 0 is invalid", a 2.5 -> 3.1 Pro migration note).
# - 2.0 / 1.5: no thinking config at all (immersive-translate/immersive-translate#2976).
GEMINI_GENERATIONS: tuple[GeminiGeneration, ...] = (
    GeminiGeneration(r"^gemini-(1\.|2\.0)(?!.*thinking)", None, False, None, False),
    GeminiGeneration(r"^gemini-2\.5-pro", (128, 32768), False, None, True),
    GeminiGeneration(r"^gemini-2\.5-flash-lite", (512, 24576), True, None, False),
    GeminiGeneration(r"^gemini-2\.5-flash", (0, 24576), True, None, True),
    GeminiGeneration(r"^gemini-3-pro", None, False, ("low", "high"), True),
    GeminiGeneration(r"^gemini-3\.\d+-pro", None, False, ("low", "medium", "high"), True),
    GeminiGeneration(r"^gemini-3(\.\d+)?-flash-lite", None, True, _LEVELS_ALL, True),
    GeminiGeneration(r"^gemini-3-flash", None, True, _LEVELS_ALL, True),
    GeminiGeneration(r"^gemini-3\.[7-9]-flash", None, True, ("low", "medium", "high"), True),
    GeminiGeneration(r"^gemini-3", None, True, _LEVELS_ALL, True, level_checked=False),
)


def gemini_generation(model: str) -> GeminiGeneration | None:
    name = model.removeprefix("models/")
    for gen in GEMINI_GENERATIONS:
        if re.match(gen.pattern, name):
            return gen
    return None


def _gemini_thinking(body: dict[str, Any]) -> dict[str, Any] | None:
    """generationConfig.thinkingConfig (camelCase as the SDK sends it, or snake_case)."""
    cfg = body.get("generationConfig") or body.get("generation_config") or {}
    thinking = cfg.get("thinkingConfig", cfg.get("thinking_config"))
    return thinking if isinstance(thinking, dict) else None


def _get(d: dict[str, Any], camel: str, snake: str) -> Any:
    return d.get(camel, d.get(snake))


# Inline data: "Inline Data < 100MB" (ai.google.dev/gemini-api/docs/video-understanding and
# .../file-input-methods, raised from 20 MB on 2026-01-12); a request over it is answered with the
# API's payload text (google-gemini/deprecated-generative-ai-android#26: "Request payload size
# exceeds the limit: 4194304 bytes.", a 400 INVALID_ARGUMENT) at the new limit, counting the
# inline parts' base64 as sent. Video MIME types: the video-understanding page's "Supported video
# formats"; another is refused as the API refuses an unknown type ("Unsupported MIME type: ...")
# (read 2026-12-06)
GEMINI_INLINE_BYTES = 100 * 10**6
GEMINI_VIDEO_MIMES = (
    "video/mp4", "video/mpeg", "video/mov", "video/avi", "video/x-flv", "video/mpg",
    "video/webm", "video/wmv", "video/3gpp",
)  # fmt: skip


def _inline_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's inline data objects (inlineData, as the SDK sends it, or inline_data)."""
    found = []
    for content in body.get("contents") or []:
        for part in (content.get("parts") if isinstance(content, dict) else None) or []:
            blob = _get(part, "inlineData", "inline_data") if isinstance(part, dict) else None
            if isinstance(blob, dict):
                found.append(blob)
    return found


def _gemini_media(body: dict[str, Any]) -> Refusal | None:
    """An inline video of a type the API does not take, or inline data over the limit."""
    blobs = _inline_parts(body)
    for blob in blobs:
        mime = str(_get(blob, "mimeType", "mime_type") or "")
        if mime.startswith("video/") and mime not in GEMINI_VIDEO_MIMES:
            return gemini_refusal(f"Unsupported MIME type: {mime}")
    size = sum(len(str(blob.get("data") or "")) for blob in blobs)
    if size > GEMINI_INLINE_BYTES:
        return gemini_refusal(
            f"Request payload size exceeds the limit: {GEMINI_INLINE_BYTES} bytes."
        )
    return None


def check_gemini(model: str, body: dict[str, Any]) -> Refusal | None:
    """A generateContent request's refusal, if the model rejects it."""
    gen = gemini_generation(model)
    thinking = _gemini_thinking(body)
    media = _gemini_media(body) if gen is not None else None
    if media is not None:
        return media
    if gen is None or thinking is None:
        return None
    if gen.budget is None and gen.levels is None:
        return gemini_refusal(NO_THINKING_CONFIG)
    budget = _get(thinking, "thinkingBudget", "thinking_budget")
    level = _get(thinking, "thinkingLevel", "thinking_level")
    if budget is not None and level is not None:
        return gemini_refusal(BOTH_SET)
    if level is not None:
        if gen.levels is None:
            return gemini_refusal(LEVEL_ON_25)
        name = str(level).lower().removeprefix("thinking_level_")
        if gen.level_checked and name not in gen.levels:
            return gemini_refusal(
                f"Thinking level {name.upper()} is not supported for this model. "
                "Please retry with other thinking level."
            )
    if budget is not None and budget != -1:
        if budget == 0 and not gen.zero_ok:
            return gemini_refusal(BUDGET_ZERO)
        low, high = gen.budget or (0, 2**31 - 1)
        if (budget != 0 and not low <= budget <= high) or budget < -1:
            # "The thinking budget (52428) is invalid." (RooCodeInc/Roo-Code#4399, 2.5 Pro)
            return gemini_refusal(f"The thinking budget ({budget}) is invalid.")
    return None


def _gemini_plan(model: str, body: dict[str, Any]) -> ThinkingPlan | None:
    """Gemini 2.5 and 3 think by default (2.5 Flash-Lite only when given a budget), thinking
    budget 0 turns it off where allowed; thought tokens count against maxOutputTokens
    (googleapis/python-genai#811, #2062) and are reported as thoughtsTokenCount; thought parts
    come back only with includeThoughts (ai.google.dev/gemini-api/docs/thinking)."""
    gen = gemini_generation(model)
    thinking = _gemini_thinking(body) or {}
    budget = _get(thinking, "thinkingBudget", "thinking_budget")
    level = _get(thinking, "thinkingLevel", "thinking_level")
    shown = bool(_get(thinking, "includeThoughts", "include_thoughts"))
    cap = budget if isinstance(budget, int) and budget > 0 else None
    if budget == 0:
        return None
    if gen is None:  # an unknown model asked to think
        return ThinkingPlan(cap, shown) if (budget is not None or level is not None) else None
    if gen.budget is None and gen.levels is None:
        return None
    if gen.thinks_by_default or budget is not None or level is not None:
        return ThinkingPlan(cap, shown)
    return None


# ---- one entry for all three -------------------------------------------------------------------


def check(protocol: str, model: str, body: dict[str, Any]) -> Refusal | None:
    """The refusal the named model's API answers this request with, or None."""
    checks = {
        "openai": check_openai,
        "responses": check_responses,
        "anthropic": check_anthropic,
        "gemini": check_gemini,
    }
    return checks[protocol](model, body)


def thinking_plan(protocol: str, model: str, body: dict[str, Any]) -> ThinkingPlan | None:
    """How a compliant request thinks; None: it does not (and its answer renders as before)."""
    plans = {
        "openai": _openai_plan,
        "responses": _responses_plan,
        "anthropic": _anthropic_plan,
        "gemini": _gemini_plan,
    }
    return plans[protocol](model, body)


def thinking_settings(protocol: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The request's thinking settings, normalized (None: it sets none): `effort` (OpenAI
    reasoning_effort, the Responses API's reasoning.effort, Anthropic output_config.effort,
    Gemini thinkingLevel in lower case), `summary` (the Responses API's reasoning.summary),
    `budget` (Anthropic budget_tokens, Gemini thinkingBudget), `type` and `display` (Anthropic),
    `include_thoughts` (Gemini)."""
    out: dict[str, Any] = {}
    if protocol == "openai":
        out["effort"] = body.get("reasoning_effort")
    elif protocol == "responses":
        reasoning = _responses_reasoning(body)
        out["effort"] = reasoning.get("effort")
        out["summary"] = reasoning.get("summary")
    elif protocol == "anthropic":
        thinking = body.get("thinking") if isinstance(body.get("thinking"), dict) else {}
        out["type"] = thinking.get("type")
        out["budget"] = thinking.get("budget_tokens")
        out["display"] = thinking.get("display")
        out["effort"] = (body.get("output_config") or {}).get("effort")
    else:
        thinking = _gemini_thinking(body) or {}
        level = _get(thinking, "thinkingLevel", "thinking_level")
        out["effort"] = str(level).lower().removeprefix("thinking_level_") if level else None
        out["budget"] = _get(thinking, "thinkingBudget", "thinking_budget")
        out["include_thoughts"] = _get(thinking, "includeThoughts", "include_thoughts")
    out = {k: v for k, v in out.items() if v is not None}
    return out or None


# Not enforced (not found in the sources, or not needed by the suite): Anthropic's 600 images a
# request for models with a context window over 200k tokens (100 is enforced for every Claude id)
# and 2000 px a side when a request holds more than 20 images; Gemini's videoMetadata.fps range
# (0, 24] and its 10 videos a prompt; OpenAI top_p / logprobs on
# reasoning models, `n` > 1 on reasoning models, a trailing assistant message on OpenAI reasoning
# models (accepted here, as Chat Completions accepts it on other models); Anthropic top_p / top_k,
# effort levels per model (xhigh, max), thinking on Claude 3.5 and earlier; Gemini includeThoughts
# with thinking off (a Vertex-only text), candidateCount with thinking, unknown thinkingLevel names
# on Gemini 3.x models whose levels were not gathered.
