"""API keys from the environment, their redaction, and the error conventions of the API backends.

Keys come from the variables the vendors' SDKs read (`KEY_ENV`); a missing key makes the factory
raise `BackendUnavailable`, whose message names the variable and never a value. `redact` removes
every secret of the run (keys from the environment or registered, of any length, URL credentials,
and their base64 and Basic-auth forms) from text before it reaches an error, a log or a report.

Errors: the SDKs retry 429s, 5xx, timeouts and connection failures themselves. What they do not
retry (a 200 with an unparseable or incomplete body, or a connection dropped on their last attempt)
gets a small outer retry here (`call_with_retry`); everything that still escapes becomes a
`BackendError` whose text is redacted (`backend_error`).
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import unquote, urlsplit

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
# secrets shorter than this are matched as whole tokens only (not inside a longer word), so a
# short password such as "pass" is redacted in "user:pass@" and kept in "password"
WHOLE_TOKEN_BELOW = 8  # characters
_TOKEN_CHAR = "A-Za-z0-9"
# scheme://userinfo@ -> scheme://***@ (userinfo greedy up to the last "@" before the host's end,
# so a password holding a raw "@" goes too)
URL_CREDENTIALS = "***"
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]*@")

OUTER_ATTEMPTS = 3
OUTER_WAIT_MIN_S = 0.05
OUTER_WAIT_MAX_S = 1.0

_secrets: set[str] = set()
_compiled: tuple[frozenset[str], re.Pattern[str] | None] = (frozenset(), None)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


def secret_forms(value: str) -> set[str]:
    """`value` and the forms it takes on the wire: base64 alone and as either half of a
    Basic-auth pair (`Bearer value` is covered by `value` itself)."""
    return {value, _b64(value), _b64(f"{value}:"), _b64(f":{value}")}


def register_secret(value: str | None) -> None:
    """Have `redact` remove `value` (any length but blank or the placeholder key) in every form."""
    value = (value or "").strip()
    if value and value != PLACEHOLDER_KEY:
        _secrets.update(secret_forms(value))


def url_credentials(url: str | None) -> tuple[str, str] | None:
    """The (user, password) of `url`'s userinfo, percent-decoded; None when it has none."""
    if not url:
        return None
    parts = urlsplit(url.strip())
    if parts.username is None and parts.password is None:
        return None
    return unquote(parts.username or ""), unquote(parts.password or "")


def register_url(url: str | None) -> None:
    """Have `redact` remove the credentials of `url`: the password (raw and percent-decoded) and
    the Basic-auth encoding of `user:password`. The user name alone stays (it is often a common
    word); any `scheme://user:pass@` is redacted as a whole anyway."""
    creds = url_credentials(url)
    if creds is None:
        return
    user, password = creds
    raw = urlsplit((url or "").strip()).password or ""
    for value in {password, raw} - {""}:
        _secrets.add(value)
    _secrets.add(_b64(f"{user}:{password}"))
    if password:
        _secrets.add(f"{user}:{password}")


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


def _pattern(values: frozenset[str]) -> re.Pattern[str] | None:
    """One regex for all `values`, longest first; short ones bounded as whole tokens."""
    global _compiled
    if _compiled[0] == values:
        return _compiled[1]
    alternatives = []
    for value in sorted(values, key=len, reverse=True):  # longest first: no partial leftovers
        escaped = re.escape(value)
        if len(value) < WHOLE_TOKEN_BELOW:
            escaped = f"(?<![{_TOKEN_CHAR}]){escaped}(?![{_TOKEN_CHAR}])"
        alternatives.append(escaped)
    pattern = re.compile("|".join(alternatives)) if alternatives else None
    _compiled = (values, pattern)
    return pattern


def redact(text: str) -> str:
    """`text` without secrets: URL credentials (`scheme://***@host`), then every key in the
    environment or registered and every registered URL password, in each of their forms
    (`secret_forms`), replaced by `[redacted]`."""
    text = _USERINFO.sub(rf"\g<scheme>{URL_CREDENTIALS}@", text)
    values = set(_secrets)
    for names in KEY_ENV.values():
        for var in names:
            value = os.environ.get(var, "").strip()
            if value and value != PLACEHOLDER_KEY:
                values |= secret_forms(value)
    pattern = _pattern(frozenset(values))
    return text if pattern is None else pattern.sub(REDACTED, text)


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
