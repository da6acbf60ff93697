"""Anthropic Messages backend (`anthropic:`, `claude-*`).

One `anthropic.AsyncAnthropic` per backend, created in the running loop on the first call. The SDK
retries 408/409/429/5xx, timeouts and connection errors (`max_retries`, exponential backoff
honouring Retry-After); each attempt times out after `timeout_s` seconds.

Endpoint: `--api-base` if given, else the SDK's `ANTHROPIC_BASE_URL`, else api.anthropic.com. The
base URL has no version path (`http://host:port`); the SDK appends `/v1/messages`.

Prefill is native: a trailing assistant turn, which the model continues; `texts` hold only the
continuation. The API rejects a final assistant turn that ends in whitespace, so the prefill is
sent right-stripped.

The Messages API takes images, not video: a clip goes as its sampled frames, each after a text
stating its time (api_models.plan, RequestRules.video FRAMES), 100 images a request at most.

The API has no `n`: a request for n samples makes n concurrent calls (asyncio.gather) and sums
their usage; the engine's concurrency limit counts it as one request. The API has no seed either:
`Request.seed` is ignored. anthropic 2.x dropped `temperature` from `messages.create`'s signature;
the API still takes it, so it travels in `extra_body`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from support.backends.api_backend import Answer, ApiBackend, each_sample, joined
from support.backends.api_models import PLAIN_RULES, RequestRules, plan
from support.backends.base import NATIVE_PREFILL, register_provider
from support.backends.batch_protocol import BatchLimits, BatchState, ListedBatch, creation_error
from support.backends.retry import MalformedResponse, call_with_retry, is_malformed
from support.backends.thinking import Thinking
from support.types import Request, Response, Usage

if TYPE_CHECKING:
    import anthropic

# the SDK is imported by the first call: a run whose answers are all cached never needs it

# Message Batches' limits (docs.anthropic.com/en/docs/build-with-claude/batch-processing, taken
# 2026-11-25): 100,000 requests (here: samples) and 256 MB a batch
ANTHROPIC_BATCH_LIMITS = BatchLimits(requests=100_000, bytes=256 * 2**20)


KEY_CHARS = 54  # of a cache key in a custom_id: 54 + "-" + 4 digits + "-" + 4 digits = 64
# with the intent's nonce in front (12 hex + "_"): 13 + 41 + 10 = 64
NONCE_KEY_CHARS = 41
# Message Batches carry no metadata (docs.anthropic.com/en/api/creating-message-batches: only
# `requests`), so the intent's nonce (support/client/batch_queue.py) rides in each item's custom_id;
# the list (docs.anthropic.com/en/api/listing-message-batches: "most recently created batches are
# returned first", up to 1,000 a page) shows it only through an ended batch's results
LIST_PAGE = 100  # batches a list page


def sample_id(key: str, sample: int, n: int, nonce: str | None = None) -> str:
    """A batch item's custom_id (at most 64 of [a-zA-Z0-9_-]): the intent's nonce, the request's
    cache key, cut, the sample's index and the request's samples (the API has no `n`: one item
    a sample). Without a nonce (records of earlier versions): the key's first 54 characters."""
    if nonce is None:
        return f"{key[:KEY_CHARS]}-{sample}-{n}"
    return f"{nonce}_{key[:NONCE_KEY_CHARS]}-{sample}-{n}"


def nonce_of(custom_id: str) -> str | None:
    """The intent nonce a custom_id carries (None: none)."""
    nonce, sep, _ = custom_id.rpartition("_")
    return nonce if sep else None


def anthropic_params(
    request: Request,
    model_id: str,
    *,
    rules: RequestRules = PLAIN_RULES,
    thinking: Thinking | None = None,
) -> dict[str, Any]:
    """Keyword arguments of `messages.create` for one sample of `request`, fitted to the
    model's `rules` and `thinking` setting (api_models.plan): a prefill only where the model
    takes one, temperature only where accepted, `thinking` (manual: a budget; adaptive: an
    effort in `output_config`) when a setting is chosen, `max_tokens` grown by its room."""
    sent = plan(request, rules, thinking)
    content: list[dict[str, Any]] = []
    for part in sent.request.parts:
        if part.is_image:
            source = {"type": "base64", "media_type": part.mime, "data": part.b64()}
            content.append({"type": "image", "source": source})
        elif part.video is not None:  # the Messages API takes no video: `plan` sends frames
            raise ValueError("a clip reaches Claude as its frames (RequestRules.video FRAMES)")
        else:
            content.append({"type": "text", "text": part.text or ""})
    messages: list[dict[str, Any]] = [{"role": "user", "content": content}]
    prefill = (sent.request.prefill or "").rstrip()
    if prefill:
        messages.append({"role": "assistant", "content": prefill})
    # the SDK's signature may lack newer fields: they travel in extra_body, as temperature does
    extra: dict[str, Any] = {}
    if sent.temperature is not None:
        extra["temperature"] = sent.temperature
    setting = sent.thinking
    if setting is not None and setting.budget is not None:
        extra["thinking"] = {"type": "enabled", "budget_tokens": setting.budget}
    elif setting is not None and setting.effort is not None:
        extra["thinking"] = {"type": "adaptive"}
        extra["output_config"] = {"effort": setting.effort}
    if "thinking" in extra and rules.thinking_display is not None:  # Opus 4.7+: the text back
        extra["thinking"]["display"] = rules.thinking_display
    params: dict[str, Any] = {
        "model": model_id,
        "max_tokens": sent.max_tokens,
        "messages": messages,
        "extra_body": extra,
    }
    if request.system:
        params["system"] = request.system
    return params


def anthropic_result(message: Any) -> Answer:
    """The concatenated text blocks, usage, thinking blocks (their text; a redacted block's
    is opaque and left out) and stop reason of one Message (one sample).

    Raises MalformedResponse when the body is not a message (the SDK returns the raw text of a
    non-JSON body and does not validate fields by default).
    """
    content = getattr(message, "content", None)
    if not isinstance(content, list):
        raise MalformedResponse(f"no content in the response ({type(message).__name__})")
    text = "".join(block.text or "" for block in content if getattr(block, "type", None) == "text")
    thought = "".join(
        getattr(block, "thinking", None) or ""
        for block in content
        if getattr(block, "type", None) == "thinking"
    )
    reason = getattr(message, "stop_reason", None)
    reasons = (str(reason),) if isinstance(reason, str) else ()
    usage = getattr(message, "usage", None)
    if usage is None:
        return Answer((text,), Usage(), (thought,), reasons)
    # thinking is billed as output and counted in output_tokens; no separate count is given
    return Answer(
        (text,), Usage.reported(usage.input_tokens, usage.output_tokens), (thought,), reasons
    )


def anthropic_retryable(exc: BaseException) -> bool:
    """Outer retry: malformed bodies, and connection errors the SDK's retries let through."""
    import anthropic

    if is_malformed(exc) or isinstance(exc, anthropic.APIResponseValidationError):
        return True
    return isinstance(exc, anthropic.APIConnectionError) and not isinstance(
        exc, anthropic.APITimeoutError
    )


@register_provider
class AnthropicBackend(ApiBackend):
    """Messages API through `anthropic.AsyncAnthropic`."""

    provider = "anthropic"
    key_env = ("ANTHROPIC_API_KEY",)
    needs = ("anthropic", "tenacity")
    prefill = NATIVE_PREFILL  # the final assistant turn is continued
    endpoint = "messages"
    # the SDK reads them in anthropic 2.x (_client.py)
    endpoint_variable = "ANTHROPIC_BASE_URL"
    base_url_form = (
        "the server's root, with no version path (http://host:port, not .../v1: the SDK "
        "appends /v1/messages)"
    )
    vendor_url = "https://api.anthropic.com"

    def _get_client(self) -> anthropic.AsyncAnthropic:
        import anthropic

        if self._client is None:
            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key,
                base_url=self.client_url,  # None: ANTHROPIC_BASE_URL, else api.anthropic.com
                default_headers=self.client_headers or None,
                # seconds, per attempt; an explicit timeout also stops the SDK from refusing
                # large non-streaming max_tokens
                timeout=self.timeout_s,  # per read (the guard's deadline: per attempt)
                max_retries=self.max_retries,
                # the SDK's own defaults (limits, timeouts, redirects) through the guard's
                # transport (http_guard.py), plus the 429 hook
                http_client=self.observed(self._http_client or self._default_http_client()),
            )
        return self._client

    def _default_http_client(self) -> Any:
        import anthropic

        args = self.guarded_client_args(anthropic.DEFAULT_CONNECTION_LIMITS)
        return anthropic.DefaultAsyncHttpxClient(**args)

    async def _once(self, params: dict[str, Any]) -> Answer:
        message = await self._get_client().messages.create(**params)
        return anthropic_result(message)

    async def _sample(self, params: dict[str, Any]) -> Answer:
        return await call_with_retry(lambda: self._once(params), anthropic_retryable)

    def params(self, request: Request) -> dict[str, Any]:
        """`messages.create`'s arguments for one sample, fitted to the model."""
        return anthropic_params(request, self.model_id, rules=self.rules, thinking=self.thinking)

    async def model_ids(self) -> list[str]:
        """The ids of `GET <base URL>/v1/models` (its first page)."""
        page = await self._get_client().models.list(limit=LIST_PAGE)
        return [str(m.id) for m in page.data]

    async def generate(self, request: Request) -> Response:
        adapted = self.plan(request).adapted
        params = self.params(request)
        # the Messages API has no `n`: a call a sample
        return await each_sample(self.name, request.n, lambda: self._sample(params), adapted)

    # ---- Message Batches (--batch, support/client/batch_queue.py) ----------------------------
    batch_limits = ANTHROPIC_BATCH_LIMITS

    async def submit_batch(self, items: Sequence[tuple[str, Request]], nonce: str) -> str:
        """One batch item per sample of each request (custom_id: `sample_id`, with `nonce`)."""
        requests = []
        for key, request in items:
            params = self.params(request)
            params = {k: v for k, v in params.items() if k != "extra_body"} | params["extra_body"]
            ids = [sample_id(key, j, request.n, nonce) for j in range(request.n)]
            requests += [{"custom_id": i, "params": params} for i in ids]
        client = self._get_client()
        try:
            # no SDK retry: a retry after a lost answer makes a second batch (the intent finds
            # the first when the next run lists them)
            once = client.with_options(max_retries=0)
            batch = await once.messages.batches.create(requests=requests)
        except Exception as exc:
            raise creation_error(self.name, exc) from None
        return str(batch.id)

    async def list_batches(self, since: float) -> AsyncIterator[ListedBatch]:
        """The workspace's batches, newest first, down to `since`; an ended one's nonce read from
        its first result, a running one's unreadable."""
        client = self._get_client()
        async for batch in client.messages.batches.list(limit=LIST_PAGE):
            created = batch.created_at.timestamp()
            if created < since:
                return
            c = batch.request_counts
            total = c.processing + c.succeeded + c.errored + c.canceled + c.expired
            if batch.processing_status != "ended":
                yield ListedBatch(str(batch.id), created, None, total, readable=False)
                continue
            nonce = None
            results = await client.messages.batches.results(batch.id)
            try:
                async for entry in results:
                    nonce = nonce_of(str(entry.custom_id))
                    break
            finally:
                await results.close()
            yield ListedBatch(str(batch.id), created, nonce, total)

    async def batch_state(self, batch_id: str) -> BatchState:
        client = self._get_client()
        batch = await self._sdk(lambda: client.messages.batches.retrieve(batch_id))
        c = batch.request_counts
        total = c.processing + c.succeeded + c.errored + c.canceled + c.expired
        ended = None
        if batch.processing_status == "ended":
            ended = "expired" if c.expired else "cancelled" if c.canceled else "completed"
        return BatchState(str(batch.processing_status), ended, total - c.processing, total)

    async def batch_results(
        self, batch_id: str, keys: Sequence[str], nonce: str | None = None
    ) -> dict[str, Response | str]:
        """Each request's samples joined into one Response (usage summed); a request with a
        failed sample is that failure; one with a sample missing (expired, cancelled) absent.
        With `nonce`, only the items carrying it count (a batch taken for an intent by its time
        and size is read only as far as it is that intent's)."""
        client = self._get_client()
        samples: dict[str, dict[int, Answer | str]] = {}
        wanted: dict[str, int] = {}  # key -> samples asked
        by_prefix = {key[:KEY_CHARS]: key for key in keys}
        by_prefix |= {key[:NONCE_KEY_CHARS]: key for key in keys}

        async def read() -> None:
            async for entry in await client.messages.batches.results(batch_id):
                custom_id = str(entry.custom_id)
                if nonce is not None and nonce_of(custom_id) != nonce:
                    continue
                rest = custom_id.rpartition("_")[2]
                prefix, index, n = [*rest.rsplit("-", 2), "", ""][:3]
                key = by_prefix.get(prefix)
                if key is None or not (index.isdigit() and n.isdigit()):
                    continue
                wanted[key] = int(n)
                result = entry.result
                if result.type == "succeeded":
                    try:
                        found: Answer | str = anthropic_result(result.message)
                    except MalformedResponse as exc:
                        found = f"malformed answer: {exc}"
                elif result.type == "errored":
                    error = getattr(getattr(result, "error", None), "error", None)
                    found = f"{getattr(error, 'type', 'error')}: {getattr(error, 'message', '')}"
                else:  # canceled, expired: not answered
                    continue
                samples.setdefault(key, {})[int(index)] = found

        await self._sdk(read)
        out: dict[str, Response | str] = {}
        for key, got in samples.items():
            failed = [v for v in got.values() if isinstance(v, str)]
            if failed:
                out[key] = failed[0][:500]
                continue
            if sorted(got) != list(range(wanted[key])):
                continue  # a sample left unanswered
            answers = [got[j] for j in sorted(got)]
            out[key] = joined(answers).response(self.name, batch=True)  # type: ignore[arg-type]
        return out

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()
