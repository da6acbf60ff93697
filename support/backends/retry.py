"""The error conventions of the API backends: the outer retry and the errors that escape.

The SDKs retry 429s, 5xx, timeouts and connection failures themselves. What they do not retry (a
200 with an unparseable or incomplete body, or a connection dropped on their last attempt) gets a
small outer retry here (`call_with_retry`, tenacity); everything that still escapes becomes a
`BackendError` whose text is redacted (`backend_error`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TypeVar

from support.backends.base import BackendError
from support.backends.keys import redact

T = TypeVar("T")

OUTER_ATTEMPTS = 3
OUTER_WAIT_MIN_S = 0.05  # seconds
OUTER_WAIT_MAX_S = 1.0  # seconds


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
