"""OpenAI's Responses API (`POST /v1/responses`): what `openai:` sends its reasoning models.

Which models: `RequestRules.api` RESPONSES (api_models.openai_rules: o-series, GPT-5, GPT-6).
"Reasoning models work better with the Responses API", and only there do reasoning summaries
come back (`reasoning.summary`; Chat Completions return their count alone); GPT-6.x's top effort,
"max", is the Responses API's (developers.openai.com/api/docs/guides/reasoning?api-mode=responses,
.../guides/deployment-checklist; read 2026-12-06). The other `openai:` models, and every
`openai-compatible:` server, keep Chat Completions (openai_chat.py, which sends through here).

The body (`responses_body`), built from the same `api_models.plan` as Chat Completions' (the
prefill, temperature, thinking and video rules alike), per the API reference
(platform.openai.com/docs/api-reference/responses/create, read 2026-12-06):

- `instructions`: the system text ("Inserts a system (or developer) message as the first item in
  the model's context");
- `input`: one user message of `input_text` and `input_image` parts (each image a data URL,
  `detail` "auto", the API's default), then the prefill as an assistant message where the model
  takes one (as Chat Completions is sent it: a turn the model answers after);
- `max_output_tokens`: the plan's limit (reasoning tokens count against it);
- `reasoning`: `{"effort": <level>, "summary": "auto"}` (the effort only when one is chosen: the
  model's default otherwise; "auto" is "the best available summary");
- `temperature` only where the plan keeps it; `store: false` (no response is kept at OpenAI);
  never `include: ["reasoning.encrypted_content"]` (encrypted reasoning is not to be stored);
- no `n` and no `seed` (the API has neither): a sample a call (openai_chat.py sends `n` calls at
  once, as anthropic_messages.py does), and a seed is recorded as omitted (`SEED_OMITTED`).

The answer (`responses_result`, from the body's JSON, no SDK model built): the text is the
`output_text` parts of the message items, the thinking the summary texts of the reasoning items
(never the answer), usage `input_tokens`, `output_tokens` and
`output_tokens_details.reasoning_tokens`, and the finish reason "stop", or "length" for status
"incomplete" with `incomplete_details.reason` "max_output_tokens" (another reason as it is spelt).

Batches (`--batch`): each line's `url` is RESPONSES_ENDPOINT, the batch's endpoint; a request of
n samples is n lines (`line_id`: the cache key, the sample's index and n), joined again when read.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from support.backends.api_backend import Answer
from support.backends.api_models import PLAIN_RULES, RequestRules, plan
from support.backends.retry import MalformedResponse
from support.backends.thinking import Thinking
from support.types import Part, Request, Usage

RESPONSES_PATH = "/responses"  # after the base URL's version path (the SDK's `post`)
RESPONSES_ENDPOINT = "/v1/responses"  # a batch's endpoint and each of its lines' `url`
SUMMARY = "auto"  # reasoning.summary: "the best available summary" (the reasoning guide)
IMAGE_DETAIL = "auto"  # input_image.detail: the API's default, stated (the SDK requires it)
SEED_OMITTED = "seed omitted (the Responses API takes none)"
# incomplete_details.reason -> the finish reason the suite records (support/types.py's
# TRUNCATED_REASONS: "length" is a cut answer)
INCOMPLETE_REASONS = {"max_output_tokens": "length"}
# stands for an image's data URL in a body's JSON skeleton (random per process: no prompt holds it)
IMAGE_SLOT = f"vlmbench-responses-image-{uuid.uuid4().hex}"


def data_url(part: Part) -> str:
    """`data:<mime>;base64,<image>`: an image part as `input_image.image_url` takes it."""
    return f"data:{part.mime};base64,{part.b64()}"


def responses_input(
    request: Request, image_url: Callable[[Part], str] = data_url
) -> list[dict[str, Any]]:
    """One user message with the parts in order, then the prefill (an assistant message)."""
    content: list[dict[str, Any]] = []
    for part in request.parts:
        if part.is_image:
            url = image_url(part)
            content.append({"type": "input_image", "image_url": url, "detail": IMAGE_DETAIL})
        elif part.video is not None:  # the API takes no video: `plan` sends its frames
            raise ValueError("a clip reaches OpenAI as its frames (RequestRules.video FRAMES)")
        else:
            content.append({"type": "input_text", "text": part.text or ""})
    items: list[dict[str, Any]] = [{"role": "user", "content": content}]
    if request.prefill:
        items.append({"role": "assistant", "content": request.prefill})
    return items


def responses_params(
    request: Request,
    model_id: str,
    image_url: Callable[[Part], str] = data_url,
    *,
    rules: RequestRules = PLAIN_RULES,
    thinking: Thinking | None = None,
) -> dict[str, Any]:
    """Keyword arguments of `responses.create` for one sample of `request`, fitted to the
    model's `rules` and `thinking` setting (api_models.plan; the module docstring)."""
    sent = plan(request, rules, thinking)
    params: dict[str, Any] = {"model": model_id}
    if sent.request.system:
        params["instructions"] = sent.request.system
    params["input"] = responses_input(sent.request, image_url)
    if sent.temperature is not None:
        params["temperature"] = sent.temperature
    params["max_output_tokens"] = sent.max_tokens
    reasoning: dict[str, str] = {}
    if sent.thinking is not None and sent.thinking.effort is not None:
        reasoning["effort"] = sent.thinking.effort
    reasoning["summary"] = SUMMARY
    params["reasoning"] = reasoning
    params["store"] = False
    return params


def _dumps(params: dict[str, Any]) -> bytes:
    """The JSON of `params` as the SDK sends it (openai._utils._json.openapi_dumps: UTF-8,
    compact, no NaN)."""
    return json.dumps(params, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def responses_body(
    request: Request,
    model_id: str,
    *,
    rules: RequestRules = PLAIN_RULES,
    thinking: Thinking | None = None,
) -> bytes:
    """The JSON body of one sample's call: what `responses.create(**responses_params(...))`
    sends, with each image's base64 copied in rather than JSON-encoded again (as
    openai_chat.openai_body does for Chat Completions)."""
    fit = {"rules": rules, "thinking": thinking}
    params = responses_params(request, model_id, lambda _: IMAGE_SLOT, **fit)
    images = plan(request, rules, thinking).request.images  # a clip's frames included
    pieces = _dumps(params).split(IMAGE_SLOT.encode())
    if len(pieces) != len(images) + 1:  # a text held the slot: encode everything
        return _dumps(responses_params(request, model_id, **fit))
    out = [pieces[0]]
    for part, rest in zip(images, pieces[1:], strict=True):
        out += [f"data:{part.mime};base64,".encode(), part.b64_ascii, rest]
    return b"".join(out)


def _texts(items: list[Any], kind: str, field: str, part_kind: str) -> list[str]:
    """The `part_kind` parts' texts of the `kind` items' `field` lists, in order (anything that
    is not text is skipped: the body is untrusted)."""
    found = []
    for item in items:
        if not isinstance(item, dict) or item.get("type") != kind:
            continue
        parts = item.get(field)
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and part.get("type") == part_kind:
                text = part.get("text")
                if isinstance(text, str):
                    found.append(text)
    return found


def responses_result(response: Any) -> Answer:
    """The answer (the message items' output_text), usage (reasoning tokens apart), thinking
    (the reasoning items' summary texts, joined by a blank line) and finish reason of one
    Response, read from its JSON (the parsed body) without building the SDK's models.

    The body is untrusted: one that is not a response (no `output` list) raises
    MalformedResponse, as does a response whose status is "failed"; nothing else escapes.
    """
    output = response.get("output") if isinstance(response, dict) else None
    if not isinstance(output, list):
        raise MalformedResponse(f"no output in the response ({type(response).__name__})")
    status = response.get("status")
    if status == "failed":
        error = response.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        raise MalformedResponse(f"the response failed: {str(message or '')[:300]}")
    text = "".join(_texts(output, "message", "content", "output_text"))
    thought = "\n\n".join(t for t in _texts(output, "reasoning", "summary", "summary_text") if t)
    reason = "stop"
    if status == "incomplete":
        details = response.get("incomplete_details")
        why = details.get("reason") if isinstance(details, dict) else None
        reason = INCOMPLETE_REASONS.get(str(why), str(why or "incomplete"))
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return Answer((text,), Usage(), (thought,), (reason,))
    details = usage.get("output_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    counted = Usage.reported(
        usage.get("input_tokens"), usage.get("output_tokens"), reasoning=reasoning
    )
    return Answer((text,), counted, (thought,), (reason,))


def line_id(key: str, sample: int, n: int) -> str:
    """A batch line's custom_id: the request's cache key, the sample's index and its samples."""
    return f"{key}-{sample}-{n}"


def parse_line_id(custom_id: str) -> tuple[str, int, int] | None:
    """(cache key, sample, samples) of a `line_id`; None for any other text."""
    key, index, n = [*custom_id.rsplit("-", 2), "", ""][:3]
    if not (key and index.isdigit() and n.isdigit()):
        return None
    return key, int(index), int(n)


def responses_batch_line(custom_id: str, body: bytes) -> bytes:
    """One line of a batch input file: a sample's body (`responses_body`) under `custom_id`."""
    head = {"custom_id": custom_id, "method": "POST", "url": RESPONSES_ENDPOINT}
    return json.dumps(head, separators=(",", ":")).encode()[:-1] + b',"body":' + body + b"}\n"
