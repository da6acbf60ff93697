"""The redaction of every secret of the run.

`redact` removes every secret of the run from text before it reaches an error, a log or a
report: the values of the key variables providers declare (`Backend.key_env`, watched here when
a provider class is defined), keys and URL credentials registered when read, of any length, and
their base64 and Basic-auth forms.

The `--model-arg` pairs of `python:` models (fixtures.model_options) hold secrets too: an argument
whose name says so (`secret_arg`: key, token, secret, password, passwd, credential) or given by
`--model-arg-secret` has its value registered here in every process, written as `[redacted]`
where the suite records the arguments (`recorded_args`), and enters the cache identity only as
a keyed hash (`keyed_digest`, keyed by the cache folder's `identity_key`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import re
from collections.abc import Collection, Iterable
from pathlib import Path
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


# --- python: models' --model-arg values -----------------------------------------------------------

# an argument whose name holds one of these (case-insensitive) is secret
SECRET_ARG_WORDS = ("key", "token", "secret", "password", "passwd", "credential")
SECRET_ARGS = "secret_model_args"  # BackendOptions.extra key: the names --model-arg-secret gave
IDENTITY_KEY = "identity.key"  # in the cache folder: the key of secret arguments' identity hashes
IDENTITY_KEY_BYTES = 32
KEYED = "hmac-sha256:"  # a secret argument in a cache identity: KEYED + KEYED_HEX hex digits
KEYED_HEX = 16


# words that hold a SECRET_ARG_WORDS word but name no secret (`max_tokens=32`, a tokenizer path):
# left out of the name before the words are looked for
NOT_SECRET_WORDS = ("tokens", "tokenizer", "keyframe", "keypoint")
# a secret shorter than this is redacted where the suite records the arguments, but not searched
# for in other text (a 2-character value would be cut out of every number that holds it)
MIN_SEARCHED_CHARS = 4


def secret_arg(name: str, given: Collection[str] = ()) -> bool:
    """Whether the model argument `name` is secret: `--model-arg-secret` gave it (`given`), or its
    name holds one of SECRET_ARG_WORDS (`hf_token`, `apiKey`, `db_password`) outside the
    NOT_SECRET_WORDS (`max_tokens`, `tokenizer`)."""
    if name in given:
        return True
    lowered = name.lower()
    for word in NOT_SECRET_WORDS:
        lowered = lowered.replace(word, " ")
    return any(word in lowered for word in SECRET_ARG_WORDS)


def register_args(pairs: Iterable[tuple[str, str]], given: Collection[str] = ()) -> None:
    """Have `redact` remove the value of each secret argument among `pairs` (`secret_arg`)."""
    for name, value in pairs:
        if secret_arg(name, given) and len(value.strip()) >= MIN_SEARCHED_CHARS:
            register_secret(value)


def recorded_args(
    pairs: Iterable[tuple[str, str]], given: Collection[str] = ()
) -> tuple[tuple[str, str], ...]:
    """`pairs` as the suite records them: each secret argument's value `[redacted]`."""
    return tuple((k, REDACTED if secret_arg(k, given) else v) for k, v in pairs)


def identity_key(folder: str | Path) -> bytes:
    """The cache folder's key of secret arguments' identity hashes: IDENTITY_KEY_BYTES random
    bytes in `folder/identity.key` (mode 0600), made once: written to a file of this process's
    own, then linked into place, so a process racing this one (an xdist worker) reads the
    winner's whole key. OSError when it can be neither read nor made."""
    path = Path(folder) / IDENTITY_KEY
    for _ in range(3):
        with contextlib.suppress(FileNotFoundError):
            key = path.read_bytes()
            if len(key) == IDENTITY_KEY_BYTES:
                return key
            raise OSError(f"{path}: {len(key)} bytes, expected {IDENTITY_KEY_BYTES}")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{IDENTITY_KEY}.{os.getpid()}.{os.urandom(4).hex()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(IDENTITY_KEY_BYTES))
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(FileExistsError):  # another process's key won: read it
                os.link(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    raise OSError(f"{path}: could not be read or made")


_PROCESS_KEY = os.urandom(IDENTITY_KEY_BYTES)  # where the cache folder's cannot be had


def keyed_digest(value: str, folder: str | Path | None) -> str:
    """A secret argument's value as a cache identity holds it: `hmac-sha256:` and the first
    KEYED_HEX hex digits of its HMAC-SHA256 keyed by the cache folder's `identity_key`, so two
    secrets are two identities, the same secret the same one run after run, and the value is
    never stored. `[redacted]` without a cache folder (--no-cache: nothing is keyed); a key of
    this process alone when the folder's cannot be read or made (nothing is shared)."""
    if folder is None:
        return REDACTED
    try:
        key = identity_key(folder)
    except OSError:
        key = _PROCESS_KEY
    digest = hmac.new(key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
    return KEYED + digest[:KEYED_HEX]


MODEL_ARG_OPTIONS = ("--model-arg", "--model-arg-secret")


def redacted_command(args: Iterable[str]) -> list[str]:
    """A pytest command's arguments with each secret `--model-arg NAME=VALUE` value (by name,
    or any `--model-arg-secret`) written `[redacted]`: for a command read back from a run folder
    that an older vlmbench wrote in clear."""
    out: list[str] = []
    pending: str | None = None  # the option whose NAME=VALUE is the next argument
    for arg in args:
        option, eq, pair = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        if pending is None and option in MODEL_ARG_OPTIONS and eq:
            out.append(f"{option}={_redacted_pair(pair, option)}")
            continue
        if pending is not None:
            out.append(_redacted_pair(arg, pending))
            pending = None
            continue
        if arg in MODEL_ARG_OPTIONS:
            pending = arg
        out.append(arg)
    return out


def _redacted_pair(pair: str, option: str) -> str:
    name, eq, _ = pair.partition("=")
    if eq and (option == "--model-arg-secret" or secret_arg(name)):
        return f"{name}={REDACTED}"
    return pair
