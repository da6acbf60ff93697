"""API keys from the environment, and the redaction of every secret of the run.

Keys come from the variables the vendors' SDKs read (`KEY_ENV`); a missing key makes the factory
raise `BackendUnavailable`, whose message names the variable and never a value. `openai-compatible:`
reads a variable of its own, `VLMBENCH_API_KEY` (a server's `--api-key`), never `OPENAI_API_KEY`:
the server is whatever `--api-base` names, and the user's OpenAI key must not reach it. Its key is
optional (`OPTIONAL_KEY`): a server started without `--api-key` gets a placeholder. `redact` removes
every secret of the run (keys from the environment or registered, of any length, URL credentials,
and their base64 and Basic-auth forms) from text before it reaches an error, a log or a report.
"""

from __future__ import annotations

import base64
import os
import re
from urllib.parse import unquote, urlsplit

from support.backends.base import BackendUnavailable

# provider -> environment variables holding its key, in order of preference
KEY_ENV: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    # a self-hosted server's key (`vllm serve --api-key X`): its own variable, never OpenAI's
    "openai-compatible": ("VLMBENCH_API_KEY",),
}
# providers whose key may be missing: the placeholder is sent instead
OPTIONAL_KEY: frozenset[str] = frozenset({"openai-compatible"})
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
