"""What the vendor API backends share: settings, key handling, the lazily made SDK client, and
one timed, retried, error-converted call.

The cache identity of an API model is what the provider sees: provider, model id and endpoint
kind ("chat.completions", "messages", "generateContent"), plus the base URL for
`openai-compatible:` servers (whose model ids are not globally unique). Never the SDK version: an
SDK upgrade sends the same requests to the same model, so cached answers stay valid (bump
support.cache.SCHEMA_VERSION to invalidate deliberately).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from support.backends.api_keys import backend_error, call_with_retry, register_secret
from support.backends.base import Backend, BackendError
from support.types import Request, Response, Usage


class ApiBackend(Backend):
    """Base of OpenAIChatBackend, AnthropicBackend and GeminiBackend."""

    default_concurrency = 8
    reads_hints = False
    provider: ClassVar[str] = ""
    endpoint: ClassVar[str] = ""  # the API method called: "chat.completions", "messages", ...

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
        self.identity = {"provider": self.provider, "model": model_id, "endpoint": self.endpoint}

    def __repr__(self) -> str:  # never the key, nor credentials in the URL
        url = public_url(self.base_url) if self.base_url else None
        return f"{type(self).__name__}(name={self.name!r}, base_url={url!r})"

    __str__ = __repr__

    def _get_client(self) -> Any:
        """The SDK's client, made on first use (each provider's module)."""
        raise NotImplementedError

    async def start(self) -> None:
        """The SDK imported and its client made before the first request (the openai SDK takes
        ~0.4 s to import alone, three times that beside the cases' image work)."""
        self._get_client()

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


def public_url(url: str) -> str:
    """`url` without credentials, query or fragment, and without a trailing slash: the endpoint
    as it enters a cache identity or a repr (`http://user:pw@Host:8000/v1/?k=x` ->
    `http://host:8000/v1`)."""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))
