"""OpenAI Chat Completions backend (`openai:`, `gpt-4o*`) and OpenAI-compatible servers (vLLM).

One `openai.AsyncOpenAI` per backend, created in the running loop on the first call. The SDK
retries 408/409/429/5xx, timeouts and connection errors (`max_retries`, exponential backoff
honouring Retry-After); each attempt times out after `timeout_s` seconds.

Endpoint: `--api-base` if given, else the SDK's `OPENAI_BASE_URL`, else api.openai.com. The base
URL includes the version path (`http://host:8000/v1`); the SDK appends `/chat/completions`.

Prefill (the class's `prefill`):
- "native" (`openai-compatible:`): a trailing assistant message plus vLLM's
  `continue_final_message=True, add_generation_prompt=False`: the server continues the prefill.
- "assistant-turn fallback" (`openai:`): the official API cannot continue a message. The same
  trailing assistant message is sent without continuation, so the model sees it as its own previous
  turn and answers after it. Answers may differ from a true continuation.
Either way `Response.texts` holds only the generated text, never the prefill.

A clip: `openai:` models take no video (api_models.openai_rules: its frames, each after a text
stating its time, spliced as images like any other); an `openai-compatible:` server gets the
file as its `video_url` (vLLM's chat API decodes and samples it itself).

`n` samples come from one call (`n=`); `seed` is sent when set (best effort on OpenAI's side).

OpenAI's reasoning models (`RequestRules.api` RESPONSES: o-series, GPT-5, GPT-6) are sent through
the Responses API instead (`POST /responses`, support/backends/openai_responses.py: its body, its
answer with the reasoning summary as the thinking, a call a sample, batches of /v1/responses
lines); their cache identity says so (`api`: "responses"). Every other model, and every
`openai-compatible:` server, is sent Chat Completions as before, byte for byte.

The body is built here (`openai_body`) and posted through the SDK's own `post` (its auth, retries,
timeouts and error types; the body comes back as bytes, read as JSON by `openai_result`, with no
pydantic model built for it): `chat.completions.create` would
JSON-encode every image's base64 again on each request (a 1-2 MB string escaped and copied per
call, most of the client's CPU on a frame shared by dozens of questions), where `openai_body`
splices each part's base64, encoded once (`Part.b64_ascii`), into a JSON skeleton. The bytes are
the JSON `create` sends for the same `openai_params` (unit/backends/test_api_backends.py checks
both).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from support.backends.api_backend import Answer, ApiBackend, each_sample, joined, public_url
from support.backends.api_models import FRAMES, PLAIN_RULES, RESPONSES, RequestRules, plan
from support.backends.base import (
    NATIVE_PREFILL,
    Backend,
    BackendError,
    BackendOptions,
    BackendUnavailable,
    register_provider,
)
from support.backends.batch_protocol import BatchLimits, BatchState, ListedBatch, creation_error
from support.backends.openai_responses import (
    RESPONSES_ENDPOINT,
    RESPONSES_PATH,
    SEED_OMITTED,
    line_id,
    parse_line_id,
    responses_batch_line,
    responses_body,
    responses_result,
)
from support.backends.retry import MalformedResponse, call_with_retry, is_malformed
from support.backends.thinking import Thinking
from support.types import Part, Request, Response, Usage

if TYPE_CHECKING:
    import openai

# the SDK (a costly import: benchmarks/README.md) is imported by the first call: a run whose
# answers are all cached never needs it

COMPATIBLE_CONCURRENCY = 128  # requests in flight to an openai-compatible: server by default
# vLLM chat-template switches that make the server continue the trailing assistant message
CONTINUE_BODY = {"continue_final_message": True, "add_generation_prompt": False}


# stands for an image's data URL in a body's JSON skeleton; random per process, so no prompt text
# holds it (openai_body checks the count and encodes plainly if one ever did)
IMAGE_SLOT = f"vlmbench-image-{uuid.uuid4().hex}"


def data_url(part: Part) -> str:
    """`data:<mime>;base64,<image>`: an image part as the Chat Completions API takes it."""
    return f"data:{part.mime};base64,{part.b64()}"


def video_url(part: Part) -> str:
    """`data:<mime>;base64,<file>`: a clip's file as an OpenAI-compatible server's `video_url`
    takes it (vLLM's chat API decodes and samples it itself)."""
    assert part.video is not None
    return f"data:{part.video.mime};base64,{base64.b64encode(part.video.data).decode('ascii')}"


def openai_messages(
    request: Request, image_url: Callable[[Part], str] = data_url
) -> list[dict[str, Any]]:
    """System message, one user message with the parts in order, then the prefill if any."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    content: list[dict[str, Any]] = []
    for part in request.parts:
        if part.is_image:
            content.append({"type": "image_url", "image_url": {"url": image_url(part)}})
        elif part.video is not None:  # a server's own video input (vLLM's `video_url`)
            content.append({"type": "video_url", "video_url": {"url": video_url(part)}})
        else:
            content.append({"type": "text", "text": part.text or ""})
    messages.append({"role": "user", "content": content})
    if request.prefill:
        messages.append({"role": "assistant", "content": request.prefill})
    return messages


def openai_params(
    request: Request,
    model_id: str,
    native_prefill: bool,
    image_url: Callable[[Part], str] = data_url,
    *,
    rules: RequestRules = PLAIN_RULES,
    thinking: Thinking | None = None,
) -> dict[str, Any]:
    """Keyword arguments of `chat.completions.create` for `request`, fitted to the model's
    `rules` and `thinking` setting (api_models.plan): the token limit in the field the model
    takes (`max_completion_tokens` for reasoning models), temperature only where accepted,
    `reasoning_effort` when a level is chosen."""
    sent = plan(request, rules, thinking)
    params: dict[str, Any] = {
        "model": model_id,
        "messages": openai_messages(sent.request, image_url),
    }
    if sent.temperature is not None:
        params["temperature"] = sent.temperature
    # `max_tokens`: what the chat models here and every OpenAI-compatible server take;
    # reasoning models refuse it for `max_completion_tokens` (api_models.openai_rules)
    params[rules.token_field] = sent.max_tokens
    params["n"] = request.n
    if sent.thinking is not None and sent.thinking.effort is not None:
        params["reasoning_effort"] = sent.thinking.effort
    if request.seed is not None:
        params["seed"] = request.seed
    if sent.request.prefill and native_prefill:
        params["extra_body"] = dict(CONTINUE_BODY)
    return params


def _dumps(params: dict[str, Any]) -> bytes:
    """The JSON of `params` as the SDK sends it (`extra_body` merged at the top level; the
    settings of openai._utils._json.openapi_dumps: UTF-8, compact, no NaN)."""
    extra = params.get("extra_body", {})
    body = {k: v for k, v in params.items() if k != "extra_body"} | extra
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def openai_body(
    request: Request,
    model_id: str,
    native_prefill: bool,
    *,
    rules: RequestRules = PLAIN_RULES,
    thinking: Thinking | None = None,
) -> bytes:
    """The JSON body of the Chat Completions call for `request`: what `chat.completions.create(
    **openai_params(...))` sends (`extra_body` merged at the top level), with each image's
    base64 copied in rather than JSON-encoded again."""
    fit = {"rules": rules, "thinking": thinking}
    params = openai_params(request, model_id, native_prefill, lambda _: IMAGE_SLOT, **fit)
    # the images sent: the request's own, and a clip's frames where the model takes no video
    sent = plan(request, rules, thinking).request if request.videos else request
    images = sent.images
    pieces = _dumps(params).split(IMAGE_SLOT.encode())
    if len(pieces) != len(images) + 1:  # a text held the slot: encode everything
        return _dumps(openai_params(request, model_id, native_prefill, **fit))
    out = [pieces[0]]
    for part, rest in zip(images, pieces[1:], strict=True):
        out += [f"data:{part.mime};base64,".encode(), part.b64_ascii, rest]
    return b"".join(out)


def openai_result(completion: Any) -> Answer:
    """Texts (one per choice, in index order), usage (reasoning tokens apart:
    `completion_tokens_details.reasoning_tokens`), thinking (an OpenAI-compatible server's
    `reasoning`, or its older `reasoning_content`, with a reasoning parser; the OpenAI API
    returns none on Chat Completions) and finish reasons of a Chat Completion, read from its
    JSON (the parsed body, a dict) without building the SDK's models.

    The body is untrusted: anything that is not a completion (no choices, a choice without a
    message, a content that is not text) raises MalformedResponse, and nothing else escapes.
    """
    choices = completion.get("choices") if isinstance(completion, dict) else None
    if not isinstance(choices, list) or not choices:
        raise MalformedResponse(f"no choices in the response ({type(completion).__name__})")
    indexed = []
    for i, choice in enumerate(choices):
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise MalformedResponse(f"malformed choice {i}: no message object")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise MalformedResponse(f"malformed choice {i}: content is {type(content).__name__}")
        index = choice.get("index")
        indexed.append((index if type(index) is int else i, i, message, choice))
    indexed.sort(key=lambda t: (t[0], t[1]))
    texts = tuple(m.get("content") or "" for _, _, m, _ in indexed)
    thinking = tuple(_reasoning_text(m) for _, _, m, _ in indexed)
    reasons = tuple(str(c.get("finish_reason") or "") for _, _, _, c in indexed)
    usage = completion.get("usage")
    if not isinstance(usage, dict):  # some compatible servers omit it
        return Answer(texts, Usage(), thinking, reasons)
    details = usage.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    counted = Usage.reported(
        usage.get("prompt_tokens"), usage.get("completion_tokens"), reasoning=reasoning
    )
    return Answer(texts, counted, thinking, reasons)


def _reasoning_text(message: dict[str, Any]) -> str:
    """A message's reasoning text: vLLM's `reasoning` (its older `reasoning_content`); "" when
    there is none or it is not text."""
    for name in ("reasoning", "reasoning_content"):
        value = message.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def completion_json(body: bytes) -> Any:
    """A 200 response's body as JSON; MalformedResponse when it is not JSON."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise MalformedResponse(f"the response is not JSON ({exc})") from None


# the Batch API's limits (platform.openai.com/docs/guides/batch, taken 2026-11-25): 50,000
# requests and 200 MB of input file a batch
OPENAI_BATCH_LIMITS = BatchLimits(requests=50_000, bytes=200 * 2**20)
BATCH_ENDPOINT = "/v1/chat/completions"
# a batch's status -> how it ended (None: running); "failed" is a batch refused whole
OPENAI_ENDINGS = {
    "completed": "completed",
    "expired": "expired",
    "cancelled": "cancelled",
    "failed": "failed",
}


# the batch's metadata key carrying its intent's nonce (support/client/batch_queue.py): `metadata`
# on batches.create, up to 16 string pairs, returned by retrieve and list
# (platform.openai.com/docs/api-reference/batch/create)
NONCE_METADATA = "vlmbench_intent"
# batches a list page (the API's most: platform.openai.com/docs/api-reference/batch/list)
LIST_PAGE = 100


# the error codes of items a batch left unanswered when it expired or was cancelled
UNANSWERED_CODES = ("batch_expired", "batch_cancelled")


def openai_batch_line(key: str, body: bytes) -> bytes:
    """One line of a batch input file: the request `body` (openai_body's bytes) under `key`."""
    head = {"custom_id": key, "method": "POST", "url": BATCH_ENDPOINT}
    return json.dumps(head, separators=(",", ":")).encode()[:-1] + b',"body":' + body + b"}\n"


def openai_batch_row(row: Any) -> Response | str | None:
    """A line of a batch's output or error file -> the answer, the item's error text, or None
    (no outcome: the batch expired or was cancelled before it, or the row is not one)."""
    found = batch_row_answer(row, openai_result)
    return found.response("", batch=True) if isinstance(found, Answer) else found


def batch_row_answer(row: Any, read: Callable[[Any], Answer]) -> Answer | str | None:
    """A line of a batch's output or error file -> its body read by `read` (openai_result,
    or openai_responses.responses_result), the item's error text, or None (no outcome)."""
    if not isinstance(row, dict):
        return None
    response = row.get("response")
    if isinstance(response, dict) and response.get("status_code") == 200:
        try:
            return read(response.get("body"))
        except Exception as exc:  # a malformed answer is the item's failure
            return f"malformed answer: {type(exc).__name__}: {exc}"[:500]
    error = row.get("error")
    if error is None and isinstance(response, dict) and isinstance(response.get("body"), dict):
        error = response["body"].get("error")
    if isinstance(error, dict):
        kind = error.get("code") or error.get("type") or "error"
        if kind in UNANSWERED_CODES:  # the batch ended before it: not the item's failure
            return None
        return f"{kind}: {error.get('message', '')}"[:500]
    status = response.get("status_code") if isinstance(response, dict) else None
    return f"HTTP {status}" if status else "failed"


def openai_retryable(exc: BaseException) -> bool:
    """Outer retry: malformed bodies, and connection errors the SDK's retries let through."""
    import openai

    if is_malformed(exc) or isinstance(exc, openai.APIResponseValidationError):
        return True
    return isinstance(exc, openai.APIConnectionError) and not isinstance(
        exc, openai.APITimeoutError
    )


def compatible_key_hint(error: str) -> str:
    """A 401 of an openai-compatible: server, with what the suite sent: $VLMBENCH_API_KEY (or a
    placeholder without it), never $OPENAI_API_KEY (a user's OpenAI key stays with OpenAI)."""
    sent = (
        "$VLMBENCH_API_KEY"
        if os.environ.get("VLMBENCH_API_KEY", "").strip()
        else ("a placeholder key: $VLMBENCH_API_KEY is not set")
    )
    return (
        f"{error} (the server refused the key: openai-compatible: sends {sent}; it never sends "
        "$OPENAI_API_KEY. Set VLMBENCH_API_KEY to the key the server was started with)"
    )


@register_provider
class OpenAIChatBackend(ApiBackend):
    """Chat Completions through `openai.AsyncOpenAI`."""

    provider = "openai"
    key_env = ("OPENAI_API_KEY",)
    needs = ("openai", "tenacity")
    prefill = "assistant-turn fallback"
    endpoint = "chat.completions"
    # the SDK reads them in openai 3.x (lib/_client_auth.py)
    endpoint_variable = "OPENAI_BASE_URL"
    base_url_form = (
        "the API's base URL, with its version path and nothing after it (http://host:8000/v1 "
        "for vLLM, not .../v1/chat/completions)"
    )
    vendor_url = "https://api.openai.com/v1"

    def __init__(self, name: str, model_id: str, **kw: Any) -> None:
        super().__init__(name, model_id, **kw)
        # a model sent through the Responses API (api_models.openai_rules): other requests than
        # Chat Completions', so other answers (a Chat Completions model keys as it always did)
        self.responses = self.rules.api == RESPONSES
        if self.responses:
            self.identity["api"] = RESPONSES

    def _get_client(self) -> openai.AsyncOpenAI:
        import openai

        if self._client is None:
            self._client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self.client_url,  # None: OPENAI_BASE_URL, else api.openai.com
                default_headers=self.client_headers or None,
                timeout=self.timeout_s,  # seconds, per read (the guard's deadline: per attempt)
                max_retries=self.max_retries,
                # the SDK's own defaults (limits, timeouts, redirects) through the guard's
                # transport (http_guard.py), plus the 429 hook
                http_client=self.observed(self._http_client or self._default_http_client()),
            )
        return self._client

    def _default_http_client(self) -> Any:
        import openai

        args = self.guarded_client_args(openai.DEFAULT_CONNECTION_LIMITS)
        return openai.DefaultAsyncHttpxClient(**args)

    async def _once(self, body: bytes) -> Answer:
        import openai

        # the SDK's generic POST (the client's JSON content type, auth, retries, timeouts and
        # error types), its body read as bytes (`cast_to=bytes`, a documented cast) and parsed
        # here: the SDK's pydantic models are never built for an answer
        try:
            raw = await self._get_client().post("/chat/completions", cast_to=bytes, content=body)
        except openai.AuthenticationError as exc:
            if not isinstance(self, OpenAICompatibleBackend):
                raise
            raise BackendError(compatible_key_hint(str(exc))) from None
        return openai_result(completion_json(raw))

    async def model_ids(self) -> list[str]:
        """The ids of `GET <base URL>/models` (its first page)."""
        page = await self._get_client().models.list()
        return [str(m.id) for m in page.data]

    def body(self, request: Request) -> bytes:
        """The request's JSON body, fitted to the model: Chat Completions' (`openai_body`), or
        one sample's Responses API body (`responses_body`) for a model sent through it."""
        if self.responses:
            return responses_body(request, self.model_id, rules=self.rules, thinking=self.thinking)
        native = self.prefill == NATIVE_PREFILL
        return openai_body(request, self.model_id, native, rules=self.rules, thinking=self.thinking)

    async def _once_responses(self, body: bytes) -> Answer:
        """One sample through `POST /responses` (the SDK's generic POST, as `_once`)."""
        raw = await self._get_client().post(RESPONSES_PATH, cast_to=bytes, content=body)
        return responses_result(completion_json(raw))

    def adapted(self, request: Request) -> tuple[str, ...]:
        """What the suite changed of `request` for the model (api_models.plan), and a seed the
        Responses API does not take."""
        adapted = self.plan(request).adapted
        if self.responses and request.seed is not None:
            adapted += (SEED_OMITTED,)
        return adapted

    async def generate(self, request: Request) -> Response:
        adapted = self.adapted(request)
        body = self.body(request)
        if not self.responses:
            return await self._call(request, lambda: self._once(body), openai_retryable, adapted)

        # the Responses API has no `n`: a call a sample, at once, each with the outer retry
        def sample() -> Awaitable[Answer]:
            return call_with_retry(lambda: self._once_responses(body), openai_retryable)

        return await each_sample(self.name, request.n, sample, adapted)

    # ---- the Batch API (--batch, support/client/batch_queue.py) ------------------------------
    batch_limits = OPENAI_BATCH_LIMITS

    async def submit_batch(self, items: Sequence[tuple[str, Request]], nonce: str) -> str:
        """Upload the requests as a JSONL file (purpose "batch") and create a batch of it, the
        intent's `nonce` in its metadata. A model sent through the Responses API: a line a
        sample (`line_id`), each line's `url` and the batch's endpoint /v1/responses."""
        if self.responses:
            lines = [
                responses_batch_line(line_id(key, j, request.n), self.body(request))
                for key, request in items
                for j in range(request.n)
            ]
            data, endpoint = b"".join(lines), RESPONSES_ENDPOINT
        else:
            data = b"".join(openai_batch_line(key, self.body(request)) for key, request in items)
            endpoint = BATCH_ENDPOINT
        client = self._get_client()
        try:  # a failed upload or a refused create leaves no batch
            upload = await client.files.create(file=("vlmbench-batch.jsonl", data), purpose="batch")
            # no SDK retry of the create: a retry after a lost answer makes a second batch
            # (the intent finds the first when the next run lists them)
            batch = await client.with_options(max_retries=0).batches.create(
                input_file_id=upload.id,
                endpoint=endpoint,
                completion_window="24h",
                metadata={NONCE_METADATA: nonce},
            )
        except Exception as exc:
            raise creation_error(self.name, exc) from None
        return str(batch.id)

    async def list_batches(self, since: float) -> AsyncIterator[ListedBatch]:
        """The organization's batches, newest first (as the API returns them), down to `since`."""
        async for batch in self._get_client().batches.list(limit=LIST_PAGE):
            if batch.created_at < since:
                return
            counts = batch.request_counts
            nonce = (batch.metadata or {}).get(NONCE_METADATA)
            total = counts.total if counts is not None else 0
            yield ListedBatch(str(batch.id), float(batch.created_at), nonce, total)

    async def batch_state(self, batch_id: str) -> BatchState:
        client = self._get_client()
        batch = await self._sdk(lambda: client.batches.retrieve(batch_id))
        counts = batch.request_counts
        done = (counts.completed + counts.failed) if counts is not None else 0
        total = counts.total if counts is not None else 0
        return BatchState(str(batch.status), OPENAI_ENDINGS.get(batch.status), done, total)

    async def batch_results(
        self, batch_id: str, keys: Sequence[str], nonce: str | None = None
    ) -> dict[str, Response | str]:
        """The output file's answers and the error file's failures, by custom_id (= cache key;
        through the Responses API a sample's `line_id`, the samples joined again)."""
        client = self._get_client()
        batch = await self._sdk(lambda: client.batches.retrieve(batch_id))
        rows = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            content = await self._sdk(lambda file_id=file_id: client.files.content(file_id))
            for line in content.text.splitlines():
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    continue
        if self.responses:
            return self._responses_batch_results(rows, set(keys))
        wanted = set(keys)
        found: dict[str, Response | str] = {}
        for row in rows:
            key = row.get("custom_id") if isinstance(row, dict) else None
            result = openai_batch_row(row)
            if key in wanted and result is not None:
                if isinstance(result, Response):
                    result = dataclasses.replace(result, model=self.name)
                found.setdefault(key, result)
        return found

    def _responses_batch_results(
        self, rows: list[Any], wanted: set[str]
    ) -> dict[str, Response | str]:
        """Each request's samples joined into one Response; a request with a failed sample is
        that failure; one with a sample missing (expired, cancelled) absent."""
        samples: dict[str, dict[int, Answer | str]] = {}
        asked: dict[str, int] = {}
        for row in rows:
            custom_id = row.get("custom_id") if isinstance(row, dict) else None
            parsed = parse_line_id(custom_id) if isinstance(custom_id, str) else None
            result = batch_row_answer(row, responses_result)
            if parsed is None or parsed[0] not in wanted or result is None:
                continue
            key, index, n = parsed
            asked[key] = n
            samples.setdefault(key, {}).setdefault(index, result)
        out: dict[str, Response | str] = {}
        for key, got in samples.items():
            failed = [v for v in got.values() if isinstance(v, str)]
            if failed:
                out[key] = failed[0][:500]
            elif sorted(got) == list(range(asked[key])):
                answers = [got[j] for j in sorted(got)]
                out[key] = joined(answers).response(self.name, batch=True)  # type: ignore[arg-type]
        return out

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()


@register_provider
class OpenAICompatibleBackend(OpenAIChatBackend):
    """An OpenAI-compatible server (`openai-compatible:`, e.g. `vllm serve`) at `--api-base`.

    Its key is its own variable, VLMBENCH_API_KEY (the server's `--api-key`), never
    OPENAI_API_KEY: `--api-base` may name any server, and OpenAI's key is for OpenAI; servers
    started without `--api-key` accept any key, so a missing one sends the placeholder.
    """

    provider = "openai-compatible"
    key_env = ("VLMBENCH_API_KEY",)
    key_optional = True
    prefill = NATIVE_PREFILL
    # a self-hosted server batches what it is sent: keep its batch full (docs/local-models.md,
    # "Past one machine": throughput against vLLM's CPU server stopped growing at 128)
    default_concurrency = COMPATIBLE_CONCURRENCY

    @classmethod
    def unavailable(cls, name: str, model_id: str, opts: BackendOptions) -> str | None:
        if not opts.base_for(cls.provider):
            return (
                f"{name}: needs --api-base URL (the server's endpoint, e.g. "
                "http://127.0.0.1:8000/v1; --api-base openai-compatible=URL for its alone)"
            )
        return super().unavailable(name, model_id, opts)

    @classmethod
    def create(cls, name: str, model_id: str, opts: BackendOptions) -> Backend:
        if not opts.base_for(cls.provider):
            raise BackendUnavailable(f"openai-compatible:{model_id} needs --api-base URL")
        backend = super().create(name, model_id, opts)
        if opts.server_video == FRAMES:  # a server that takes no video: a clip as its frames
            assert isinstance(backend, OpenAICompatibleBackend)
            backend.rules = dataclasses.replace(backend.rules, video=FRAMES)
            backend.identity["video"] = FRAMES  # other requests than native's: other answers
        return backend

    def __init__(self, name: str, model_id: str, **kw: Any) -> None:
        super().__init__(name, model_id, **kw)
        # a server's model ids are its own: the server is part of the identity
        self.identity["base_url"] = public_url(self.base_url) if self.base_url else None
