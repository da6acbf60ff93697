"""Anthropic Messages backend (`anthropic:`, `claude-*`).

One `anthropic.AsyncAnthropic` per backend, created in the running loop on the first call. The SDK
retries 408/409/429/5xx, timeouts and connection errors (`max_retries`, exponential backoff
honouring Retry-After); each attempt times out after `timeout_s` seconds.

Endpoint: `--api-base` if given, else the SDK's `ANTHROPIC_BASE_URL`, else api.anthropic.com. The
base URL has no version path (`http://host:port`); the SDK appends `/v1/messages`.

Prefill is native: a trailing assistant turn, which the model continues; `texts` hold only the
continuation. The API rejects a final assistant turn that ends in whitespace, so the prefill is
sent right-stripped.

The API has no `n`: a request for n samples makes n concurrent calls (asyncio.gather) and sums
their usage; the engine's concurrency limit counts it as one request. The API has no seed either:
`Request.seed` is ignored. anthropic 2.x dropped `temperature` from `messages.create`'s signature;
the API still takes it, so it travels in `extra_body`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anthropic

from support.backends.api_backend import ApiBackend
from support.backends.api_keys import (
    MalformedResponse,
    backend_error,
    call_with_retry,
    is_malformed,
)
from support.types import Request, Response, Usage


def anthropic_params(request: Request, model_id: str) -> dict[str, Any]:
    """Keyword arguments of `messages.create` for one sample of `request`."""
    content: list[dict[str, Any]] = []
    for part in request.parts:
        if part.is_image:
            source = {"type": "base64", "media_type": part.mime, "data": part.b64()}
            content.append({"type": "image", "source": source})
        else:
            content.append({"type": "text", "text": part.text or ""})
    messages: list[dict[str, Any]] = [{"role": "user", "content": content}]
    prefill = (request.prefill or "").rstrip()
    if prefill:
        messages.append({"role": "assistant", "content": prefill})
    params: dict[str, Any] = {
        "model": model_id,
        "max_tokens": request.max_tokens,
        "messages": messages,
        "extra_body": {"temperature": request.temperature},
    }
    if request.system:
        params["system"] = request.system
    return params


def anthropic_result(message: Any) -> tuple[str, Usage]:
    """The concatenated text blocks and the usage of one Message.

    Raises MalformedResponse when the body is not a message (the SDK returns the raw text of a
    non-JSON body and does not validate fields by default).
    """
    content = getattr(message, "content", None)
    if not isinstance(content, list):
        raise MalformedResponse(f"no content in the response ({type(message).__name__})")
    text = "".join(block.text or "" for block in content if getattr(block, "type", None) == "text")
    usage = getattr(message, "usage", None)
    if usage is None:
        return text, Usage()
    return text, Usage.reported(usage.input_tokens, usage.output_tokens)


def anthropic_retryable(exc: BaseException) -> bool:
    """Outer retry: malformed bodies, and connection errors the SDK's retries let through."""
    if is_malformed(exc) or isinstance(exc, anthropic.APIResponseValidationError):
        return True
    return isinstance(exc, anthropic.APIConnectionError) and not isinstance(
        exc, anthropic.APITimeoutError
    )


class AnthropicBackend(ApiBackend):
    """Messages API through `anthropic.AsyncAnthropic`."""

    provider = "anthropic"
    endpoint = "messages"

    def __init__(self, name: str, model_id: str, **kw: Any) -> None:
        super().__init__(name, model_id, prefill_mode="native", **kw)

    def _get_client(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key,
                base_url=self.client_url,  # None: ANTHROPIC_BASE_URL, else api.anthropic.com
                default_headers=self.client_headers or None,
                # seconds, per attempt; an explicit timeout also stops the SDK from refusing
                # large non-streaming max_tokens
                timeout=self.timeout_s,
                max_retries=self.max_retries,
                # the SDK's own defaults (limits, timeouts), plus the 429 hook
                http_client=self.observed(self._http_client or anthropic.DefaultAsyncHttpxClient()),
            )
        return self._client

    async def _once(self, params: dict[str, Any]) -> tuple[str, Usage]:
        message = await self._get_client().messages.create(**params)
        return anthropic_result(message)

    async def _sample(self, params: dict[str, Any]) -> tuple[str, Usage]:
        return await call_with_retry(lambda: self._once(params), anthropic_retryable)

    async def generate(self, request: Request) -> Response:
        params = anthropic_params(request, self.model_id)
        start = time.perf_counter()
        tasks = [asyncio.ensure_future(self._sample(params)) for _ in range(request.n)]
        try:
            results = await asyncio.gather(*tasks)
        except Exception as exc:
            for task in tasks:  # one sample failed: the others are not needed
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)  # reap them
            raise backend_error(self.name, exc) from None
        usage = Usage()
        for _, u in results:
            usage = usage + u
        return Response(
            texts=tuple(text for text, _ in results),
            model=self.name,
            usage=usage,
            latency_s=time.perf_counter() - start,
        )

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()
