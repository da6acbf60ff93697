"""What the vendor API backends share: settings, key handling, the lazily made SDK client, and
one timed, retried, error-converted call.

The cache identity of an API model is what the provider sees: provider, model id and endpoint
kind ("chat.completions", "messages", "generateContent"), plus the endpoint that answers
(`base_url`: `public_url`, so scheme, host, port and path, never credentials, query or fragment).
The endpoint is `--api-base`, else the variable the vendor's SDK reads (the class's
`endpoint_variable`: OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL), read once here
and handed to the SDK, so the identity names the URL the client sends to. A loopback's or a
proxy's answers are never served as the vendor's. The vendor's own endpoint is left out of the
identity, so a default run keys exactly as before and users' caches stay valid; any other
endpoint enters it (an `openai-compatible:` server always does: its model ids are its own).
Never the SDK version: an SDK upgrade sends the same requests to the same model, so cached
answers stay valid (bump support.client.response_cache.SCHEMA_VERSION to invalidate deliberately).

Every 429 the SDK's HTTP client receives, its own retries included, is told to
`rate_limit_listeners` (the model client's adaptive concurrency) through an httpx response hook
(`observed`), with the seconds its `retry-after` asks for and when that attempt was sent
(time.monotonic(), stamped by a request hook).
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from support.backends.api_models import FRAMES, Plan, plan, rules_for, sent_images
from support.backends.base import (
    DEFAULT_MODALITIES,
    Backend,
    BackendError,
    BackendOptions,
    BackendUnavailable,
    missing_module,
)
from support.backends.redacted_logs import install_log_redaction
from support.backends.retry import backend_error, call_with_retry, retry_after_s
from support.backends.thinking import Thinking
from support.secrets import PLACEHOLDER_KEY, register_secret, register_url, url_credentials
from support.types import Request, Response, Usage

SENT_AT = "vlmbench_sent_at"  # an httpx request extension: time.monotonic() when sent


class Answer(NamedTuple):
    """What one API call gave: texts (one a sample, the answer only), usage, thinking (one a
    sample where it came back) and finish reasons (one a sample, as the vendor spells them)."""

    texts: tuple[str, ...]
    usage: Usage
    thinking: tuple[str, ...] = ()
    finish_reasons: tuple[str, ...] = ()

    def response(self, model: str, **kw: Any) -> Response:
        """The Response of this answer (`kw`: latency_s, batch, adapted)."""
        thinking = self.thinking if any(self.thinking) else ()
        return Response(
            texts=self.texts,
            model=model,
            usage=self.usage,
            thinking=thinking,
            finish_reasons=self.finish_reasons,
            **kw,
        )


def joined(answers: Sequence[Answer]) -> Answer:
    """The answers of a call a sample (an API without `n`) as one Answer, in order, usage
    summed."""
    usage = Usage()
    for answer in answers:
        usage = usage + answer.usage
    return Answer(
        tuple(t for a in answers for t in a.texts),
        usage,
        tuple(t for a in answers for t in a.thinking),
        tuple(r for a in answers for r in a.finish_reasons),
    )


async def each_sample(
    name: str, n: int, sample: Callable[[], Awaitable[Answer]], adapted: tuple[str, ...] = ()
) -> Response:
    """`n` calls of `sample` at once (an API without `n`: a call a sample), joined into one
    Response; one that fails cancels the others, and the request fails with a BackendError
    naming `name` (retries are `sample`'s own)."""
    start = time.perf_counter()
    tasks = [asyncio.ensure_future(sample()) for _ in range(n)]
    try:
        results = await asyncio.gather(*tasks)
    except Exception as exc:
        for task in tasks:  # one sample failed: the others are not needed
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # reap them
        raise backend_error(name, exc) from None
    return joined(results).response(name, latency_s=time.perf_counter() - start, adapted=adapted)


class ApiBackend(Backend):
    """Base of OpenAIChatBackend, AnthropicBackend and GeminiBackend: a provider of kind "api",
    built by `create` from its key variables and the session's endpoint settings."""

    default_concurrency: int | str = "auto"  # support/client/concurrency.py: AIMD on 429s
    # a clip too: as the API's video input, or as its frames where the API takes none (`plan`)
    modalities = frozenset({*DEFAULT_MODALITIES, "video"})
    reads_hints = False
    kind: ClassVar[str] = "api"
    extra: ClassVar[str] = "api"
    endpoint: ClassVar[str] = ""  # the API method called: "chat.completions", "messages", ...
    # the variable its SDK reads for the endpoint, and the vendor's own endpoint
    endpoint_variable: ClassVar[str] = ""
    vendor_url: ClassVar[str] = ""
    # what the base URL is, as the preflight's 404 hint says it (the SDK appends the rest)
    base_url_form: ClassVar[str] = "the API's base URL, with nothing after it"

    @classmethod
    def unavailable(cls, name: str, model_id: str, opts: BackendOptions) -> str | None:
        """As Backend's, except in a dry run (`opts.keyless`), which builds no SDK client: it
        needs neither the SDK (the `api` extra) nor a key."""
        if opts.keyless:
            return None
        return super().unavailable(name, model_id, opts)

    @classmethod
    def create(cls, name: str, model_id: str, opts: BackendOptions) -> Backend:
        """The backend with the key of `key_env` (a placeholder in a dry run without one); a dry
        run's is never started, so it needs no SDK."""
        if not opts.keyless and missing_module(cls.needs) is not None:
            raise BackendUnavailable(f"{name}: pip install 'vlmbench[{cls.extra}]'")
        key = cls.env_key()
        if key is None and (opts.keyless or cls.key_optional):
            key = PLACEHOLDER_KEY
        elif key is None:
            raise BackendUnavailable(f"{name}: set {' or '.join(cls.key_env)}")
        register_secret(key)
        return cls(
            name,
            model_id,
            api_key=key,
            base_url=opts.base_for(cls.provider),
            timeout_s=opts.timeout_s,
            max_retries=opts.max_retries,
            thinking=opts.thinking,
        )

    def __init__(
        self,
        name: str,
        model_id: str,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 60.0,  # seconds, per attempt, end to end (http_guard.py)
        max_retries: int = 5,  # the SDK's own retries
        http_client: Any = None,  # an httpx2.AsyncClient (tests inject a mock transport)
        thinking: Thinking | None = None,  # the variant's setting; None: the model's default
    ) -> None:
        self.name = name
        self.model_id = model_id
        # None: the SDK's variable, read here once, so the identity names the URL the SDK is given
        base_url = base_url or sdk_base_url(self.endpoint_variable)
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._api_key = api_key
        register_secret(api_key)
        register_url(base_url)
        install_log_redaction()  # the SDK's DEBUG logs (also at configure: fixtures.run_settings)
        # what the SDK's client gets: the URL without credentials (the SDKs' HTTP client would
        # send them as Basic auth in place of the key header), and a header carrying them instead
        # only where there is no key
        self.client_url, self.client_headers = client_endpoint(name, base_url, api_key)
        self._http_client = http_client
        self._client: Any = None
        # called with the retry-after seconds (or None) of each 429 the SDK's client receives,
        # and the time.monotonic() its attempt was sent at (or None)
        self.rate_limit_listeners: list[Callable[[float | None, float | None], None]] = []
        self.identity = {"provider": self.provider, "model": model_id, "endpoint": self.endpoint}
        # what the model's API accepts (api_models.py), and the variant's thinking setting
        self.rules = rules_for(self.provider, model_id)
        self.thinking = thinking
        if thinking is not None:  # only then: a model's default setting keys as it always did
            self.identity["thinking"] = thinking.to_json()
        # the URL that answers (public_url); manifest.json names it (engine statistics)
        self.endpoint_url = answering_endpoint(self.vendor_url, base_url)
        if base_url and not is_vendor_endpoint(self.vendor_url, base_url):
            self.identity["base_url"] = public_url(base_url)

    def __repr__(self) -> str:  # never the key, nor credentials in the URL
        url = public_url(self.base_url) if self.base_url else None
        return f"{type(self).__name__}(name={self.name!r}, base_url={url!r})"

    __str__ = __repr__

    def _get_client(self) -> Any:
        """The SDK's client, made on first use (each provider's module)."""
        raise NotImplementedError

    async def _on_request(self, request: Any) -> None:
        """httpx request hook: when this attempt goes out (each retry is a new request)."""
        request.extensions[SENT_AT] = time.monotonic()

    async def _on_response(self, response: Any) -> None:
        """httpx response hook: a 429 goes to the listeners (headers only; the body unread)."""
        if response.status_code == 429:
            wait = retry_after_s(response.headers)
            sent_at = response.request.extensions.get(SENT_AT)
            for listener in self.rate_limit_listeners:
                listener(wait, sent_at)

    def event_hooks(self) -> dict[str, list[Callable[[Any], Awaitable[None]]]]:
        """The hooks an SDK's httpx client gets: send times, and 429s to the listeners."""
        return {"request": [self._on_request], "response": [self._on_response]}

    def observed(self, client: Any) -> Any:
        """`client` (an httpx2.AsyncClient) with the 429 hook added to its response hooks."""
        hooks = client.event_hooks
        if self._on_response in hooks.get("response", []):  # observed already
            return client
        ours = self.event_hooks()
        client.event_hooks = {k: [*hooks.get(k, []), *ours[k]] for k in ("request", "response")}
        return client

    def guarded_client_args(self, limits: Any = None) -> dict[str, Any]:
        """`transport` and `mounts` of the SDK's httpx2 client (`limits`: its pool's): every
        attempt through support/backends/http_guard.py, which ends it at the `timeout_s` deadline
        (headers and whole body), caps its body and keeps the key to its origin."""
        from support.backends.http_guard import guarded_client_args

        return guarded_client_args(self.timeout_s, limits)

    async def start(self) -> None:
        """The SDK imported and its client made before the first request (its import time:
        benchmarks/README.md)."""
        self._get_client()

    async def model_ids(self) -> list[str]:
        """The model ids of the endpoint's models list (its first page), read through the SDK
        (support/backends/preflight.py). Each provider's module implements it."""
        raise NotImplementedError

    async def _sdk(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """One SDK call outside the request path (a batch's upload, create, status, results),
        with the SDK's own retries; any escaping error becomes a redacted BackendError."""
        try:
            return await call()
        except Exception as exc:
            raise backend_error(self.name, exc) from None

    def plan(self, request: Request) -> Plan:
        """What is sent for `request` under the model's rules and thinking setting
        (api_models.plan); BackendError for a request the model cannot take at all (more
        images than its API allows, a clip's frames counted where they are sent as images)."""
        limit = self.rules.max_images
        images = sent_images(request, self.rules)
        if limit is not None and images > limit:
            clips = self.rules.video == FRAMES and request.videos
            frames = f" (a clip's frames sent as {images - len(request.images)} of them)"
            raise BackendError(
                f"{self.name}: {images} images in one request{frames if clips else ''}; "
                f"{self.model_id} takes at most {limit} a request"
            )
        return plan(request, self.rules, self.thinking)

    async def _call(
        self,
        request: Request,
        once: Callable[[], Awaitable[Answer]],
        retryable: Callable[[BaseException], bool],
        adapted: tuple[str, ...] = (),
    ) -> Response:
        """`once()` with the outer retry; any escaping SDK error becomes a redacted BackendError."""
        start = time.perf_counter()
        try:
            answer = await call_with_retry(once, retryable)
        except Exception as exc:
            # from None: the SDK's exception chain is not shown where the key could hide
            raise backend_error(self.name, exc) from None
        if len(answer.texts) != request.n:
            raise BackendError(
                f"{self.name}: asked for {request.n} samples, got {len(answer.texts)}"
            )
        return answer.response(self.name, latency_s=time.perf_counter() - start, adapted=adapted)


def client_endpoint(
    name: str, base_url: str | None, api_key: str
) -> tuple[str | None, dict[str, str]]:
    """The base URL an SDK client gets (`user:pass@` removed) and the headers it adds.

    The credentials of `--api-base http://user:pass@host` become an explicit
    `Authorization: Basic ...` header when there is no API key (an openai-compatible server behind
    a proxy that wants them); with a key they are dropped, with a warning, since the key's header
    is what the vendor checks.
    """
    creds = url_credentials(base_url)
    if base_url is None or creds is None:
        return base_url, {}
    parts = urlsplit(base_url.strip())
    netloc = parts.netloc.rpartition("@")[2]
    url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    if api_key and api_key != PLACEHOLDER_KEY:
        warnings.warn(
            f"{name}: the credentials in --api-base are dropped: the API key is sent instead",
            UserWarning,
            stacklevel=3,
        )
        return url, {}
    token = base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode("ascii")
    return url, {"Authorization": f"Basic {token}"}


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


def sdk_base_url(variable: str) -> str | None:
    """The endpoint an SDK would read from its `variable` (an ApiBackend's
    `endpoint_variable`); None when it is unset or blank, or there is none."""
    if not variable:
        return None
    return os.environ.get(variable, "").strip() or None


def answering_endpoint(vendor_url: str, base_url: str | None) -> str | None:
    """The endpoint that answers, as `public_url`: `base_url` if given, else the vendor's own
    (`vendor_url`); None when neither is known."""
    url = base_url or vendor_url
    return public_url(url) if url else None


def is_vendor_endpoint(vendor_url: str, url: str) -> bool:
    """Whether `url` is the vendor's own endpoint `vendor_url`, as `public_url` compares, a port
    its scheme implies ignored (`https://api.openai.com:443/v1/` is OpenAI's own)."""
    default = vendor_url
    if not default:
        return False
    parts = urlsplit(public_url(url))
    if (parts.scheme, parts.port) in (("https", 443), ("http", 80)):
        parts = parts._replace(netloc=parts.netloc.rsplit(":", 1)[0])
    return urlunsplit(parts) == public_url(default)
