"""The API models: what each one's API accepts, what it costs, and how a request is fitted to it.

One table (`API_MODELS`): each registered API model with its list and batch prices (USD per 1M
tokens, the date taken) and its request rules (`RequestRules`). A model id the table does not hold
(`anthropic:claude-opus-4-9`) gets the rules of its generation, read from the id
(`rules_for`): the vendors name their generations in their ids, and the rules change by
generation (docs/api-models.md gives each rule's source and the date it was read).

`RequestRules` say what a model's API takes: temperature (any; none: refused, so omitted and the
provider's default used; or only at effort "none"), which token-limit field, whether a final
assistant turn (a prefill) is continued, its thinking control (none, an effort level, a token
budget, Anthropic's adaptive thinking with an effort, Gemini 3's thinking level) with the values
accepted, whether it thinks when asked nothing, whether thinking counts against the token limit
and how much room to leave for it, how many images a request may hold (the Anthropic API
has no `n`: anthropic_messages.py sends a call a sample), and how a clip is taken (`video`: the
API's own video input, or its sampled frames as images, each after a text stating its time).

`plan(request, rules, thinking)` fits one Request to a model: a `Plan` of what is sent (the
request with each clip as its frames where the model takes no video, a prefill moved into the
user turn where the model takes none, the temperature or
None, the token limit grown by the thinking allowance, the thinking setting) and what was adapted
(recorded in the Response, the outcome and the manifest). The backends build their bodies from a
Plan only, so no request a documented rule refuses is sent (support/doubles/loopback_validation.py
refuses them as the vendors do, and the tests send every evaluation through it).
"""

from __future__ import annotations

import dataclasses
import re
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from support.backends.thinking import Thinking
from support.types import Part, Request, Usage

if TYPE_CHECKING:
    from support.videos import Clip

# temperature rules
ANY = "any"
REFUSED = "refused"  # any value but the default is a 400: omitted, the provider's default used
AT_EFFORT_NONE = "at-effort-none"  # accepted only with reasoning effort "none" (GPT-5.1+)
# thinking controls
NO_THINKING = "none"
EFFORT = "effort"  # OpenAI's reasoning_effort
BUDGET = "budget"  # a token budget: Anthropic's manual thinking, Gemini 2.5's thinking_budget
ADAPTIVE = "adaptive"  # Anthropic 4.6+: thinking {type: adaptive}, output_config {effort}
LEVEL = "level"  # Gemini 3's thinking_level

# what a prefill becomes on a model that continues none: the continuation instruction, last in
# the user turn (Anthropic's migration away from prefill recommends instructions instead)
CONTINUE_INSTRUCTION = (
    "\n\nYour response so far is between the markers below. Continue it from exactly where it "
    "stops: write only what comes next, without repeating it.\n"
    "<response-so-far>\n{prefill}\n</response-so-far>"
)
PREFILL_AS_INSTRUCTION = "prefill sent as a user-turn instruction (the model takes no prefill)"
TEMPERATURE_OMITTED = "temperature omitted: the provider's default (the model refuses it)"
TEMPERATURE_OMITTED_THINKING = "temperature omitted: the provider's default (refused with thinking)"
SUMMARIZED = "summarized"  # Anthropic's thinking display that returns the thinking's text
# how a model takes a clip (Part.video)
NATIVE = "native"  # as the API's own video input (Gemini's inline video, a server's video_url)
FRAMES = "frames"  # its sampled frames as images, each after a text stating its time
VIDEO_AS_FRAMES = "video sent as {frames} frames with their timestamps (the API takes no video)"
FRAME_LABEL = "Frame at {seconds:.1f} s:"  # the text before each frame sent as an image
FRAME_JPEG_QUALITY = 95  # a frame sent as an image: JPEG at surgvqa's quality (from H.264)
# which OpenAI API a model is sent through (RequestRules.api)
CHAT = "chat"  # Chat Completions (POST /v1/chat/completions): every other vendor's is its own
RESPONSES = "responses"  # the Responses API (POST /v1/responses): OpenAI's reasoning models


@dataclass(frozen=True)
class RequestRules:
    """What one model's API accepts (the module docstring)."""

    temperature: str = ANY  # ANY, REFUSED or AT_EFFORT_NONE
    token_field: str = "max_tokens"  # OpenAI: "max_tokens" or "max_completion_tokens"
    prefill: bool = True  # a final assistant turn is accepted (continued or answered after)
    thinking: str = NO_THINKING  # NO_THINKING, EFFORT, BUDGET, ADAPTIVE or LEVEL
    efforts: tuple[str, ...] = ()  # EFFORT / ADAPTIVE / LEVEL: the levels accepted
    default_effort: str | None = None  # what the API uses when none is sent
    budget_range: tuple[int, int] | None = None  # BUDGET: tokens accepted, inclusive
    budget_off: bool = False  # BUDGET: a budget of 0 turns thinking off
    thinks_by_default: bool = False  # thinks when no thinking setting is sent
    # thinking tokens count against the token limit (so the limit grows by the allowance)
    thinking_in_limit: bool = True
    # tokens of room left for thinking at an effort level or by default (a budget's own size
    # where a budget is given); 0 for a model that does not think
    allowance: int = 0
    no_prefill_with_thinking: bool = False  # thinking on: a prefill is refused (Anthropic)
    no_temperature_with_thinking: bool = False  # thinking on: temperature != 1 refused
    max_images: int | None = None  # images a request may hold; None: not documented here
    # NATIVE: a clip goes as the API's video input; FRAMES: as its frames (the API takes none)
    video: str = NATIVE
    # the thinking display asked for when the suite turns thinking on (Anthropic's
    # `thinking.display`): "summarized" where the model's default hides the text; None: the
    # model's default already shows it, or its API has no such field
    thinking_display: str | None = None
    # CHAT or RESPONSES: the OpenAI API the model is sent through (openai_chat.py,
    # openai_responses.py); the Responses API returns reasoning summaries, Chat Completions
    # only their count. Other providers' APIs are their own: CHAT, unread
    api: str = CHAT
    sources: tuple[str, ...] = ()  # where each rule was read (docs/api-models.md)

    def takes(self, thinking: Thinking) -> str | None:
        """Why this model cannot take `thinking` (None: it can)."""
        if thinking.effort is not None:
            if self.thinking not in (EFFORT, ADAPTIVE, LEVEL):
                return "its API takes no effort level (--thinking-budget may apply)"
            if thinking.effort not in self.efforts:
                return f"effort {thinking.effort!r} is not one of {', '.join(self.efforts)}"
            return None
        if self.thinking != BUDGET or self.budget_range is None:
            return "its API takes no thinking budget (--reasoning-effort may apply)"
        low, high = self.budget_range
        budget = thinking.budget or 0
        if budget == 0 and self.budget_off:
            return None
        if not low <= budget <= high:
            off = ", or 0 (off)" if self.budget_off else ""
            return f"budget {budget} is outside {low}..{high}{off}"
        return None

    def thinks(self, thinking: Thinking | None) -> bool:
        """Whether a request with `thinking` (None: the model's default) makes it think."""
        if thinking is None:
            return self.thinks_by_default
        if thinking.budget is not None:
            return thinking.budget > 0
        return thinking.effort != "none"

    def takes_prefill(self, thinking: Thinking | None) -> bool:
        """Whether a request with `thinking` (None: the model's default) may end with a
        prefill: the model takes one, and thinking, where it is on, does not refuse it."""
        return self.prefill and not (self.no_prefill_with_thinking and self.thinks(thinking))

    def room(self, thinking: Thinking | None) -> int:
        """Tokens added to an answer's limit for thinking (0 where thinking is off or does not
        count against the limit)."""
        if not self.thinking_in_limit or not self.thinks(thinking):
            return 0
        if thinking is not None and thinking.budget is not None:
            return thinking.budget
        return self.allowance


PLAIN_RULES = RequestRules()  # a model that takes everything and does not think


@dataclass(frozen=True)
class ApiModel:
    """One registered API model: its id, provider, prices and, where its generation's rules
    (`rules_for`) are not its own, its rules."""

    model_id: str
    provider: str  # "openai", "anthropic", "google"
    price: tuple[float, float]  # USD per 1M (input, output) tokens, standard tier
    batch_price: tuple[float, float] | None  # USD per 1M through the batch API; None: none
    taken: str  # the date the prices were read
    rules: RequestRules | None = None  # None: its generation's
    note: str = ""


@dataclass(frozen=True)
class Plan:
    """What is sent for one Request (`plan`)."""

    request: Request  # a prefill moved into the user turn where it is not taken
    temperature: float | None  # None: omitted (the provider's default)
    max_tokens: int  # the answer's limit plus the room for thinking
    thinking: Thinking | None  # the setting to send; None: none (the model's default)
    adapted: tuple[str, ...] = ()


def plan(request: Request, rules: RequestRules, thinking: Thinking | None = None) -> Plan:
    """Fit `request` to a model with `rules` (module docstring)."""
    adapted: list[str] = []
    thinks = rules.thinks(thinking)
    if rules.video == FRAMES and request.videos:
        request, frames = with_frames(request)
        adapted.append(VIDEO_AS_FRAMES.format(frames=frames))
    if request.prefill and not rules.takes_prefill(thinking):
        request = without_prefill(request)
        adapted.append(PREFILL_AS_INSTRUCTION)
    temperature: float | None = request.temperature
    effort = thinking.effort if thinking is not None else rules.default_effort
    effort_none = effort == "none"
    if rules.temperature == REFUSED or (rules.temperature == AT_EFFORT_NONE and not effort_none):
        temperature = None
        adapted.append(TEMPERATURE_OMITTED)
    elif thinks and rules.no_temperature_with_thinking and request.temperature != 1.0:
        temperature = None
        adapted.append(TEMPERATURE_OMITTED_THINKING)
    room = rules.room(thinking)
    return Plan(request, temperature, request.max_tokens + room, thinking, tuple(adapted))


def output_bound(
    request: Request, rules: RequestRules = PLAIN_RULES, thinking: Thinking | None = None
) -> int:
    """The most output tokens `request` can be billed for: its limit as sent (the answer's
    plus the room for thinking, `plan`) for each sample. What --dry-run and --max-cost count."""
    return plan(request, rules, thinking).max_tokens * request.n


def without_prefill(request: Request) -> Request:
    """`request` with its prefill as the continuation instruction at the end of the user turn."""
    text = CONTINUE_INSTRUCTION.format(prefill=request.prefill or "")
    parts = (*request.parts, Part.of_text(text.lstrip("\n")))
    return dataclasses.replace(request, parts=parts, prefill=None)


def frame_parts(clip: Clip) -> tuple[Part, ...]:
    """A clip as a model that takes no video is sent it: for each sampled frame, a text stating
    its time (FRAME_LABEL, seconds from the clip's start) and the frame as a JPEG image
    (FRAME_JPEG_QUALITY). Encoded once per clip (the same clip goes to several models)."""
    with _frames_lock:
        found = _frame_parts.get(clip)
    if found is not None:
        return found
    from PIL import Image

    from support.images import encode_image

    parts: list[Part] = []
    for seconds, frame in zip(clip.timestamps, clip.frames, strict=True):
        jpeg = encode_image(Image.fromarray(frame), "JPEG", quality=FRAME_JPEG_QUALITY)
        parts += [Part.of_text(FRAME_LABEL.format(seconds=seconds)), Part.of_image(jpeg)]
    made = tuple(parts)
    with _frames_lock:
        return _frame_parts.setdefault(clip, made)


# each clip's frame parts, kept while the clip lives (a Clip compares by identity)
_frame_parts: weakref.WeakKeyDictionary[Clip, tuple[Part, ...]] = weakref.WeakKeyDictionary()
_frames_lock = threading.Lock()


def with_frames(request: Request) -> tuple[Request, int]:
    """`request` with each video part replaced, in place, by its `frame_parts`, and the number
    of frames sent."""
    parts: list[Part] = []
    frames = 0
    for part in request.parts:
        if part.video is None:
            parts.append(part)
            continue
        parts += frame_parts(part.video)
        frames += len(part.video.frames)
    return dataclasses.replace(request, parts=tuple(parts)), frames


def sent_images(request: Request, rules: RequestRules) -> int:
    """The images `request` is sent with under `rules`: its own, and each clip's frames where
    the model takes them as images (counted before any frame is encoded)."""
    frames = sum(len(clip.frames) for clip in request.clips)
    return len(request.images) + (frames if rules.video == FRAMES else 0)


# -- rules by generation ---------------------------------------------------------------------------
# Sources, read 2026-11-26 (docs/api-models.md has the table with each rule's source).

OPENAI_REASONING = re.compile(r"^(o\d|gpt-5|gpt-6)")
# "reserve at least 25,000 tokens for reasoning and outputs when you start experimenting"
# (platform.openai.com/docs/guides/reasoning, "Allocating space for reasoning")
OPENAI_REASONING_ROOM = 25_000
OPENAI_SOURCES = (
    "https://platform.openai.com/docs/api-reference/chat/create",
    "https://platform.openai.com/docs/guides/reasoning",
    "https://developers.openai.com/api/docs/guides/deployment-checklist",
    "https://developers.openai.com/api/docs/models",
)
GPT6_EFFORTS = ("low", "medium", "high", "xhigh", "max")
# no OpenAI API takes a video: the cookbook sends a clip's sampled frames as images
OPENAI_VIDEO_SOURCE = (
    "https://developers.openai.com/cookbook/examples/gpt_with_vision_for_video_understanding"
)
# reasoning models through the Responses API: "Reasoning models work better with the Responses
# API" and reasoning summaries (`reasoning.summary`) come back only there (the reasoning guide);
# "Always start with the Responses API" and GPT-6.x's effort "max" is the Responses API's (the
# deployment checklist; Chat Completions takes low to xhigh on GPT-6 Astra and Sol:
# BerriAI/litellm-docs#1173) (read 2026-12-06)
OPENAI_RESPONSES_SOURCES = (
    "https://developers.openai.com/api/docs/guides/reasoning?api-mode=responses",
    "https://platform.openai.com/docs/api-reference/responses/create",
    "https://developers.openai.com/api/docs/guides/deployment-checklist",
)


def openai_rules(model_id: str) -> RequestRules:
    """RequestRules of an OpenAI model id by its generation: reasoning models (o-series, GPT-5,
    GPT-6) go through the Responses API (`api` RESPONSES: `max_output_tokens`, `reasoning.effort`
    and its summary; `token_field` is what Chat Completions would take, `max_completion_tokens`),
    and take temperature only at effort "none" where they have it; the others Chat Completions."""
    model = model_id.lower()
    if not OPENAI_REASONING.match(model):
        sources = (OPENAI_SOURCES[0], OPENAI_VIDEO_SOURCE)
        return RequestRules(max_images=500, video=FRAMES, sources=sources)
    base = RequestRules(
        temperature=REFUSED,
        token_field="max_completion_tokens",
        thinking=EFFORT,
        efforts=("low", "medium", "high"),
        default_effort="medium",
        thinks_by_default=True,
        allowance=OPENAI_REASONING_ROOM,
        max_images=500,
        video=FRAMES,
        api=RESPONSES,
        sources=(*OPENAI_SOURCES, OPENAI_VIDEO_SOURCE, *OPENAI_RESPONSES_SOURCES),
    )
    if model.startswith("gpt-6"):  # effort up to max; "none" only on the rows that say so
        return dataclasses.replace(base, efforts=GPT6_EFFORTS)
    version = re.match(r"^gpt-5(?:\.(\d+))?", model)
    if version is None:  # o-series
        return base
    minor = int(version.group(1) or 0)
    if minor == 0:  # gpt-5, gpt-5-mini, gpt-5-nano: minimal .. high, medium by default
        return dataclasses.replace(base, efforts=("minimal", "low", "medium", "high"))
    # gpt-5.1 and later: "none" (the default) .. high, xhigh from 5.2; temperature only at
    # effort "none"
    return with_effort_none(base, ("low", "medium", "high") + (("xhigh",) if minor >= 2 else ()))


def with_effort_none(
    rules: RequestRules, efforts: tuple[str, ...], default: str = "none"
) -> RequestRules:
    """`rules` of a reasoning model that also takes effort "none" (no reasoning), where and
    only where temperature is accepted."""
    return dataclasses.replace(
        rules,
        temperature=AT_EFFORT_NONE,
        efforts=("none", *efforts),
        default_effort=default,
        thinks_by_default=default != "none",
    )


ANTHROPIC_SOURCES = (
    "https://platform.claude.com/docs/en/build-with-claude/extended-thinking",
    "https://platform.claude.com/docs/en/build-with-claude/effort",
    "https://platform.claude.com/docs/en/about-claude/models/whats-new-claude-4-6",
    "https://platform.claude.com/docs/en/build-with-claude/vision",
    # thinking.display defaults to "omitted" from Opus 4.7 on: "thinking content omitted by
    # default" (read 2026-12-06)
    "https://platform.claude.com/docs/en/about-claude/models/whats-new-claude-4-7",
)
# adaptive thinking: tokens of room beside the answer (the suite's choice: the vendor documents
# no size; thinking counts toward max_tokens)
ANTHROPIC_ROOM = 16_000


def claude_version(model_id: str) -> tuple[int, int] | None:
    """(major, minor) of a Claude id: claude-opus-4-7 -> (4, 7), claude-sonnet-4-20250514 ->
    (4, 0), claude-3-5-sonnet-20241022 -> (3, 5), claude-fable-5-1 -> (5, 1); None when the id
    names none."""
    m = re.match(r"^claude-(?:[a-z]+-)?(\d+)(?:-(\d)(?!\d))?", model_id.lower())
    return (int(m.group(1)), int(m.group(2) or 0)) if m else None


def anthropic_rules(model_id: str) -> RequestRules:
    """RequestRules of a Claude id by its version: manual thinking from 3.7 to 4.5; from 4.6 no
    prefill and adaptive thinking with an effort; from 4.7 no temperature; from 5 thinking on
    by default, and from 4.7 the summarized thinking display asked for where thinking is turned
    on (the default there is "omitted": thinking blocks with an empty text). Every one: up to 100
    images a request, a clip as its frames (the vision page: images only, "100 per request on the
    API" for a 200k-token context window; 600 for the others, not used here)."""
    version = claude_version(model_id) or (0, 0)
    plain = RequestRules(max_images=100, video=FRAMES, sources=ANTHROPIC_SOURCES[3:4])
    if version < (3, 7):  # no extended thinking
        return plain
    manual = dataclasses.replace(
        plain,
        thinking=BUDGET,
        budget_range=(1024, 128_000),  # >= 1024 and below max_tokens (checked when sent)
        no_prefill_with_thinking=True,
        no_temperature_with_thinking=True,
        sources=(ANTHROPIC_SOURCES[0], ANTHROPIC_SOURCES[3]),
    )
    if version < (4, 6):
        return manual
    efforts = ("low", "medium", "high", "max")
    if version >= (4, 7):
        efforts = ("low", "medium", "high", "xhigh", "max")
    adaptive = dataclasses.replace(
        manual,
        prefill=False,
        thinking=ADAPTIVE,
        efforts=efforts,
        default_effort="high",
        budget_range=None,
        allowance=ANTHROPIC_ROOM,
        sources=ANTHROPIC_SOURCES[:4],
    )
    if version < (4, 7):
        return adaptive
    adaptive = dataclasses.replace(
        adaptive, temperature=REFUSED, thinking_display=SUMMARIZED, sources=ANTHROPIC_SOURCES
    )
    if version < (5, 0):
        return adaptive
    return dataclasses.replace(adaptive, thinks_by_default=True)


GEMINI_SOURCES = (
    "https://ai.google.dev/gemini-api/docs/thinking",
    "https://ai.google.dev/gemini-api/docs/models",
    "https://ai.google.dev/gemini-api/docs/video-understanding",  # a clip as inline video
)
GEMINI_ROOM = 32_768  # a thinking level's room: the largest 2.5 budget (the suite's choice)


def gemini_rules(model_id: str) -> RequestRules:
    """RequestRules of a Gemini id by its generation: 2.5 thinks within a budget (dynamic by
    default), 3 at a level; both count thinking against maxOutputTokens."""
    model = model_id.lower()
    plain = RequestRules(token_field="max_output_tokens", max_images=3000, sources=GEMINI_SOURCES)
    if re.match(r"^gemini-[3-9]", model):
        levels = ("low", "high") if "pro" in model else ("low", "medium", "high")
        return dataclasses.replace(
            plain,
            thinking=LEVEL,
            efforts=levels,
            default_effort="high",
            thinks_by_default=True,
            allowance=GEMINI_ROOM,
        )
    if model.startswith("gemini-2.5"):
        if "pro" in model:
            budget, off = (128, 32_768), False  # thinking cannot be turned off
        elif "lite" in model:
            budget, off = (512, 24_576), True
        else:
            budget, off = (1, 24_576), True
        return dataclasses.replace(
            plain,
            thinking=BUDGET,
            budget_range=budget,
            budget_off=off,
            thinks_by_default="lite" not in model,
            allowance=budget[1],  # dynamic thinking: up to the largest budget
        )
    return plain


RULES_OF = {"openai": openai_rules, "anthropic": anthropic_rules, "google": gemini_rules}


# -- the registered models -------------------------------------------------------------------------
# USD per 1M tokens (input, output), standard tier, the shortest-context tier; batch: the batch
# API's price (half the list price at all three vendors). Sources: docs/api-models.md.

_OLD = "2025-06-01"
_NOW = "2026-11-26"


def _half(price: tuple[float, float]) -> tuple[float, float]:
    return (price[0] / 2, price[1] / 2)


def _row(model_id: str, provider: str, price: tuple[float, float], taken: str = _NOW,
         rules: RequestRules | None = None, note: str = "") -> ApiModel:  # fmt: skip
    return ApiModel(model_id, provider, price, _half(price), taken, rules, note)


# GPT-6.1 Terra and GPT-6 Luna also take effort "none" (the others refuse it); the default is
# not documented for them: "medium" assumed (no GPT-6 model defaults to "none")
_GPT6_NONE = with_effort_none(openai_rules("gpt-6"), GPT6_EFFORTS, "medium")
API_MODELS: tuple[ApiModel, ...] = (
    _row("gpt-4o-mini", "openai", (0.15, 0.60), _OLD),
    _row("gpt-4o", "openai", (2.50, 10.00), _OLD),
    _row("gpt-5.4", "openai", (2.50, 15.00)),
    _row("gpt-5.4-mini", "openai", (0.75, 4.50)),
    _row("gpt-6.2-astra", "openai", (8.00, 40.00)),
    _row("gpt-6.2-sol", "openai", (2.00, 10.00)),
    _row("gpt-6.1-terra", "openai", (1.00, 5.00), rules=_GPT6_NONE),
    _row("gpt-6-luna", "openai", (0.10, 0.50), rules=_GPT6_NONE),
    _row("claude-3-5-sonnet-20241022", "anthropic", (3.00, 15.00), _OLD),
    _row("claude-sonnet-4-20250514", "anthropic", (3.00, 15.00), _OLD),
    _row("claude-haiku-4-5", "anthropic", (1.00, 5.00)),
    _row("claude-sonnet-4-6", "anthropic", (3.00, 15.00)),
    _row("claude-opus-4-7", "anthropic", (5.00, 25.00)),
    _row("claude-sonnet-5-5", "anthropic", (2.00, 10.00)),
    _row("claude-opus-5-5", "anthropic", (4.00, 20.00),
         rules=dataclasses.replace(anthropic_rules("claude-opus-5-5"), default_effort="medium")),
    _row("claude-haiku-5-5", "anthropic", (0.10, 0.50),
         rules=dataclasses.replace(anthropic_rules("claude-haiku-5-5"), default_effort="medium"),
         note="prompts up to 100K tokens; 0.50 / 2.50 above"),
    _row("gemini-2.0-flash", "google", (0.10, 0.40), _OLD),
    _row("gemini-2.5-flash", "google", (0.30, 2.50)),
    _row("gemini-2.5-pro", "google", (1.25, 10.00), note="prompts up to 200K tokens"),
    _row("gemini-3.5-flash-lite", "google", (0.30, 2.50),
         rules=dataclasses.replace(gemini_rules("gemini-3.5-flash-lite"),
                                   efforts=("minimal", "low", "medium", "high"),
                                   default_effort="minimal")),
    _row("gemini-3.6-flash", "google", (1.50, 7.50),
         rules=dataclasses.replace(gemini_rules("gemini-3.6-flash"),
                                   efforts=("minimal", "low", "medium", "high"),
                                   default_effort="medium")),
)  # fmt: skip
BY_ID: dict[str, ApiModel] = {m.model_id: m for m in API_MODELS}


def rules_for(provider: str, model_id: str) -> RequestRules:
    """A model's rules: its table row's own, else its generation's (RULES_OF), else the
    default (no thinking, everything accepted) for a provider without rules
    (openai-compatible: servers, whose models are their own)."""
    row = BY_ID.get(model_id)
    if row is not None and row.provider == provider and row.rules is not None:
        return row.rules
    rules = RULES_OF.get(provider)
    return rules(model_id) if rules is not None else PLAIN_RULES


# -- prices ------------------------------------------------------------------------------------
# A cost is an estimate at the list price, not a bill (no cache discounts, no long-context
# tiers); thinking tokens are billed as output tokens by all three vendors.
TOKENS_PER_PRICE_UNIT = 1_000_000


def _priced(price: tuple[float, float] | None, usage: Usage) -> float | None:
    if price is None:
        return None
    per_input, per_output = price
    return (
        usage.input_tokens * per_input + usage.output_tokens * per_output
    ) / TOKENS_PER_PRICE_UNIT


def cost_usd(model_id: str, usage: Usage) -> float | None:
    """USD for `usage` at `model_id`'s list price (`ModelSpec.model_id`: `gpt-4o` for
    `--model openai:gpt-4o`); None for a model without a price."""
    row = BY_ID.get(model_id)
    return _priced(row.price if row else None, usage)


def batch_cost_usd(provider: str, model_id: str, usage: Usage) -> float | None:
    """USD for `usage` at `model_id`'s batch price; None for a model without one."""
    row = BY_ID.get(model_id)
    return _priced(row.batch_price if row and row.provider == provider else None, usage)


def describe(rules: RequestRules, thinking: Thinking | None) -> Mapping[str, str]:
    """The manifest's words for a model's rules and thinking setting."""
    out = {
        "temperature": rules.temperature,
        "token_field": rules.token_field,
        "prefill_accepted": str(rules.prefill).lower(),
        "thinking_control": rules.thinking,
    }
    if rules.thinking != NO_THINKING:
        out["thinking"] = thinking.label if thinking is not None else "provider default"
        out["thinking_room_tokens"] = str(rules.room(thinking))
    if rules.thinking_display is not None and thinking is not None:
        out["thinking_display"] = rules.thinking_display  # asked for (anthropic_messages.py)
    if rules.api == RESPONSES:  # OpenAI's Responses API (a Chat Completions model: as before)
        out["api"] = RESPONSES
        out["token_field"] = "max_output_tokens"
    return out


def sent_fields(rules: RequestRules, thinking: Thinking | None = None) -> str:
    """The request fields a model is sent, in words (docs/api-models.md's table)."""
    if rules.api == RESPONSES:
        return responses_fields(rules)
    fields = [f"`{rules.token_field}`"]
    if rules.temperature == ANY:
        fields.append("`temperature`")
    elif rules.temperature == AT_EFFORT_NONE:
        fields.append('`temperature` at effort "none" only')
    control = {
        EFFORT: "`reasoning_effort`",
        ADAPTIVE: "`thinking: adaptive` + `output_config.effort`",
        BUDGET: "`thinking` budget",
        LEVEL: "`thinking_level`",
    }.get(rules.thinking)
    if control:
        fields.append(f"{control} when chosen")
    return ", ".join(fields)


def responses_fields(rules: RequestRules) -> str:
    """The Responses API fields a model is sent, in words (openai_responses.py)."""
    fields = ["`max_output_tokens`"]
    if rules.temperature == ANY:
        fields.append("`temperature`")
    elif rules.temperature == AT_EFFORT_NONE:
        fields.append('`temperature` at effort "none" only')
    fields += ["`reasoning.effort` when chosen", '`reasoning.summary: "auto"`', "`store: false`"]
    return ", ".join(fields)


def api_words(provider: str, rules: RequestRules) -> str:
    """The API a model is sent through, in words (docs/api-models.md's table)."""
    if provider == "openai":
        return "Responses" if rules.api == RESPONSES else "Chat Completions"
    return {"anthropic": "Messages", "google": "generateContent"}.get(provider, provider)


def thinking_text(provider: str, rules: RequestRules) -> str:
    """Whether the thinking's text comes back (kept as the outcome's `thinking`), in words."""
    if rules.thinking == NO_THINKING:
        return "-"
    if provider == "openai":
        return "summary" if rules.api == RESPONSES else "no (a count only)"
    if provider == "anthropic":
        return "summary"  # summarized by default; asked for where the default omits it
    return "summary (include_thoughts)" if provider == "google" else "-"


def adaptations(rules: RequestRules) -> str:
    """What the suite changes of a request for a model, in words (docs/api-models.md)."""
    out = []
    if not rules.prefill:
        out.append("prefill -> user-turn instruction")
    elif rules.no_prefill_with_thinking:
        out.append("prefill -> user-turn instruction when thinking")
    if rules.temperature == REFUSED:
        out.append("temperature omitted")
    elif rules.temperature == AT_EFFORT_NONE:
        out.append('temperature omitted unless effort "none"')
    elif rules.no_temperature_with_thinking:
        out.append("temperature omitted when thinking")
    if rules.thinking == BUDGET and rules.thinking_in_limit:
        default = f", {rules.allowance:,} by default" if rules.thinks_by_default else ""
        out.append(f"limit + the budget{default}")
    elif rules.thinking != NO_THINKING and rules.thinking_in_limit:
        out.append(f"limit + {rules.allowance:,} when thinking")
    return "; ".join(out) or "none"


def thinking_values(rules: RequestRules) -> str:
    """The thinking values a model takes and its default, in words."""
    if rules.thinking == NO_THINKING:
        return "none"
    if rules.thinking == BUDGET and rules.budget_range is not None:
        low, high = rules.budget_range
        off = " or 0 (off)" if rules.budget_off else ""
        on = "thinks" if rules.thinks_by_default else "off"
        return f"budget {low:,}..{high:,}{off}; default: {on}"
    default = rules.default_effort or "?"
    on = "" if rules.thinks_by_default or default == "none" else ", thinking off unless asked"
    return f"{rules.thinking} {'/'.join(rules.efforts)}; default {default}{on}"


def markdown_table() -> str:
    """The registered API models as docs/api-models.md shows them (unit/backends/test_api_models.py
    checks the page holds exactly this)."""
    lines = [
        "| model | USD / 1M in, out (batch) | taken | API | sent | thinking | thinking text "
        "| adapted |",
        "|:--|:--|:--|:--|:--|:--|:--|:--|",
    ]
    for row in API_MODELS:
        rules = rules_for(row.provider, row.model_id)
        batch = f" ({row.batch_price[0]:g}, {row.batch_price[1]:g})" if row.batch_price else ""
        note = f"; {row.note}" if row.note else ""
        lines.append(
            f"| `{row.model_id}` | {row.price[0]:g}, {row.price[1]:g}{batch}{note} | {row.taken} "
            f"| {api_words(row.provider, rules)} | {sent_fields(rules)} | "
            f"{thinking_values(rules)} | {thinking_text(row.provider, rules)} | "
            f"{adaptations(rules)} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m support.backends.api_models: the docs' table
    print(markdown_table(), end="")
