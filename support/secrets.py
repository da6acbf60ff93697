"""The redaction of every secret of the run.

`redact` removes every secret of the run from text before it reaches an error, a log or a
report: the values of the key variables providers declare (`Backend.key_env`, watched here when
a provider class is defined), keys and URL credentials registered when read, of any length, and
their base64 and Basic-auth forms.
"""

from __future__ import annotations

import base64
import os
import re
from urllib.parse import unquote, urlsplit

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
_variables: dict[str, None] = {}  # key variables whose values are secrets (ordered set)
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


def watch_variables(names: tuple[str, ...]) -> None:
    """Have `redact` remove the values of the environment variables `names` (keys)."""
    _variables.update(dict.fromkeys(names))


def key_variables() -> tuple[str, ...]:
    """The watched key variables, in the order they were declared."""
    return tuple(_variables)


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
    for var in _variables:
        value = os.environ.get(var, "").strip()
        if value and value != PLACEHOLDER_KEY:
            values |= secret_forms(value)
    pattern = _pattern(frozenset(values))
    return text if pattern is None else pattern.sub(REDACTED, text)
