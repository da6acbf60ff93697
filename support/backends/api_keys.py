"""API keys from the environment, their redaction, and the error conventions of the API backends.

Keys come from the variables the vendors' SDKs read (`KEY_ENV`); a missing key makes the factory
raise `BackendUnavailable`, whose message names the variable and never a value. `redact` removes
every key value (environment or registered) from text before it reaches an error or a report.

Errors: the SDKs retry 429s, 5xx, timeouts and connection failures themselves. What they do not
retry (a 200 with an unparseable or incomplete body, or a connection dropped on their last attempt)
gets a small outer retry here (`call_with_retry`); everything that still escapes becomes a
`BackendError` whose text is redacted (`backend_error`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from typing import TypeVar

from support.backends.base import BackendError, BackendUnavailable

T = TypeVar("T")

# provider -> environment variables holding its key, in order of preference
KEY_ENV: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
# what openai-compatible servers get without a key (vLLM accepts any key unless --api-key is set)
PLACEHOLDER_KEY = "EMPTY"
REDACTED = "[redacted]"
MIN_SECRET_LEN = 8  # shorter values are too likely to occur in ordinary text

OUTER_ATTEMPTS = 3
OUTER_WAIT_MIN_S = 0.05
OUTER_WAIT_MAX_S = 1.0

_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """Have `redact` remove `value` too (keys passed to a backend directly)."""
    if value and len(value) >= MIN_SECRET_LEN:
        _secrets.add(value)


def env_key(provider: str) -> str | None:
    """The first non-empty key variable of `provider`, stripped; None if none is set."""
    for var in KEY_ENV[provider]:
        value = os.environ.get(var, "").strip()
        if value:
            return value
    return None


def require_key(provider: str, model_name: str) -> str:
    """The provider's key, or BackendUnavailable naming the variable(s) to set."""
    key = env_key(provider)
    if key is None:
        names = " or ".join(KEY_ENV[provider])
        raise BackendUnavailable(f"{model_name}: set {names}")
    register_secret(key)
    return key


def redact(text: str) -> str:
    """`text` with every known key value (>= 8 characters) replaced by `[redacted]`."""
    values = set(_secrets)
    for names in KEY_ENV.values():
        for var in names:
            value = os.environ.get(var, "").strip()
            if len(value) >= MIN_SECRET_LEN:
                values.add(value)
    for value in sorted(values, key=len, reverse=True):  # longest first: no partial leftovers
        text = text.replace(value, REDACTED)
    return text


class MalformedResponse(Exception):
    """A 200 response whose body lacks what the backend needs (retried by `call_with_retry`)."""


def is_malformed(exc: BaseException) -> bool:
    """Decode and validation errors of a response body: the SDKs do not retry these."""
    if isinstance(exc, MalformedResponse | json.JSONDecodeError | UnicodeDecodeError):
        return True
    try:
        import pydantic
    except ImportError:  # pragma: no cover - every SDK depends on pydantic
        return False
    return isinstance(exc, pydantic.ValidationError)


def backend_error(model: str, exc: BaseException) -> BackendError:
    """The BackendError an escaped SDK exception becomes: type and message, keys redacted."""
    message = str(exc) or repr(exc)
    return BackendError(redact(f"{model}: {type(exc).__name__}: {message}"))


async def call_with_retry(
    call: Callable[[], Awaitable[T]], retryable: Callable[[BaseException], bool]
) -> T:
    """Await `call()` up to 3 times while it raises what `retryable` accepts.

    Waits 0.05 s, 0.1 s, ... (at most 1 s) between attempts; the last error is re-raised as is.
    """
    import tenacity

    retrying = tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(OUTER_ATTEMPTS),
        wait=tenacity.wait_exponential(
            multiplier=OUTER_WAIT_MIN_S, min=OUTER_WAIT_MIN_S, max=OUTER_WAIT_MAX_S
        ),
        retry=tenacity.retry_if_exception(retryable),
        reraise=True,
    )

    async def attempt() -> T:  # a coroutine function: tenacity awaits only those
        return await call()

    return await retrying(attempt)
