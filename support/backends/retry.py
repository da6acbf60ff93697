"""The error conventions of the API backends: the outer retry and the errors that escape.

The SDKs retry 429s, 5xx, timeouts and connection failures themselves. What they do not retry (a
200 with an unparseable or incomplete body, or a connection dropped on their last attempt) gets a
small outer retry here (`call_with_retry`, tenacity); everything that still escapes becomes a
`BackendError` whose text is redacted (`backend_error`). A response the HTTP guard stopped
(`GuardFailure`: past the deadline, past a body cap; support/backends/http_guard.py) is never
retried here (the SDK's retries had their turn) and names itself in the BackendError, however
deep in the SDK's exception chain it lies.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from support.backends.base import BackendError
from support.secrets import redact

T = TypeVar("T")

OUTER_ATTEMPTS = 3
OUTER_WAIT_MIN_S = 0.05  # seconds
OUTER_WAIT_MAX_S = 1.0  # seconds


class MalformedResponse(Exception):
    """A 200 response whose body lacks what the backend needs (retried by `call_with_retry`)."""


class GuardFailure(Exception):
    """A response support/backends/http_guard.py stopped; its text names the limit."""


def guard_failure(exc: BaseException) -> GuardFailure | None:
    """The GuardFailure `exc` is or was raised from (its cause / context chain), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, GuardFailure):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


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
    """The BackendError an escaped SDK exception becomes: type and message, keys redacted; the
    guard's failure in its place where the SDK wrapped one (openai's "Request timed out.")."""
    exc = guard_failure(exc) or exc
    message = str(exc) or repr(exc)
    return BackendError(redact(f"{model}: {type(exc).__name__}: {message}"))


async def call_with_retry(
    call: Callable[[], Awaitable[T]], retryable: Callable[[BaseException], bool]
) -> T:
    """Await `call()` up to 3 times while it raises what `retryable` accepts (never a
    GuardFailure).

    Waits 0.05 s, 0.1 s, ... (at most 1 s) between attempts; the last error is re-raised as is.
    The first attempt is awaited as it is: an answer that comes back at once (nearly all of them)
    costs no retry machinery; only a retryable failure starts tenacity, for the attempts left.
    """
    try:
        return await call()
    except Exception as exc:
        if not _retried(retryable, exc):
            raise
    await asyncio.sleep(OUTER_WAIT_MIN_S)  # before the second attempt
    import tenacity

    retrying = tenacity.AsyncRetrying(**_policy(retryable))

    async def attempt() -> T:  # a coroutine function: tenacity awaits only those
        return await call()

    return await retrying(attempt)


def _retried(retryable: Callable[[BaseException], bool], exc: BaseException) -> bool:
    return retryable(exc) and guard_failure(exc) is None


@functools.cache
def _policy(retryable: Callable[[BaseException], bool]) -> dict[str, Any]:
    """tenacity's stop, wait and retry for the attempts after the first, made once per
    predicate (a backend's): attempts 2..OUTER_ATTEMPTS, the waits 0.1 s, 0.2 s, ... (at most
    OUTER_WAIT_MAX_S) that follow the first one's OUTER_WAIT_MIN_S. AsyncRetrying itself is made
    per failed call: it keeps the state of its attempts."""
    import tenacity

    return {
        "stop": tenacity.stop_after_attempt(OUTER_ATTEMPTS - 1),
        "wait": tenacity.wait_exponential(
            multiplier=2 * OUTER_WAIT_MIN_S, min=OUTER_WAIT_MIN_S, max=OUTER_WAIT_MAX_S
        ),
        "retry": tenacity.retry_if_exception(functools.partial(_retried, retryable)),
        "reraise": True,
    }


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds a 429 asks the client to wait: `retry-after-ms`, else `retry-after` (seconds or
    an HTTP date); None when neither is there or readable."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
