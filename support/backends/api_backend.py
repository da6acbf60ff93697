"""What the vendor API backends share: settings, key handling, the lazily made SDK client, and
one timed, retried, error-converted call."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from support.backends.api_keys import backend_error, call_with_retry, register_secret
from support.backends.base import Backend, BackendError
from support.types import Request, Response, Usage


class ApiBackend(Backend):
    """Base of OpenAIChatBackend, AnthropicBackend and GeminiBackend."""

    default_concurrency = 8
    reads_hints = False
    provider: ClassVar[str] = ""
    sdk_version: ClassVar[str] = ""

    def __init__(
        self,
        name: str,
        model_id: str,
        *,
        api_key: str,
        prefill_mode: str,
        base_url: str | None = None,
        timeout_s: float = 60.0,  # seconds, per attempt
        max_retries: int = 5,  # the SDK's own retries
        http_client: Any = None,  # an httpx2.AsyncClient (tests inject a mock transport)
    ) -> None:
        self.name = name
        self.model_id = model_id
        self.base_url = base_url
        self.prefill_mode = prefill_mode
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._api_key = api_key
        register_secret(api_key)
        self._http_client = http_client
        self._client: Any = None
        self.identity = {
            "provider": self.provider,
            "model": model_id,
            "backend_version": self.sdk_version,
        }

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"

    __str__ = __repr__

    async def _call(
        self,
        request: Request,
        once: Callable[[], Awaitable[tuple[tuple[str, ...], Usage]]],
        retryable: Callable[[BaseException], bool],
    ) -> Response:
        """`once()` with the outer retry; any escaping SDK error becomes a redacted BackendError."""
        start = time.perf_counter()
        try:
            texts, usage = await call_with_retry(once, retryable)
        except Exception as exc:
            # from None: the SDK's exception chain is not shown where the key could hide
            raise backend_error(self.name, exc) from None
        if len(texts) != request.n:
            raise BackendError(f"{self.name}: asked for {request.n} samples, got {len(texts)}")
        return Response(
            texts=texts, model=self.name, usage=usage, latency_s=time.perf_counter() - start
        )
