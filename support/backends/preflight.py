"""The preflight: one request to each API endpoint of a run before anything is collected, so a
wrong key, a wrong `--api-base` or a server that is not running stops the run with one usage
error, not an error outcome per case.

Each endpoint the run's API models name (one per provider class and base URL, however many
models share it) is asked for its models list through the vendor's SDK (`ApiBackend.model_ids`:
OpenAI's and an OpenAI-compatible server's `GET /v1/models`, Anthropic's `GET /v1/models`,
Gemini's `GET /v1beta/models`), on the suite's HTTP transport (support/backends/http_guard.py),
with no retry and a deadline of PREFLIGHT_S seconds. A models list is free on all three vendors,
so the preflight costs nothing against `--max-cost`.

What stops the run (`Preflight.errors`): HTTP 401 or 403 (the key, naming its variable), 404
(the path: `--api-base` without its version path, e.g. `/v1`), a connection that could not be
made (refused, no such host), and an `openai-compatible:` model the server's list does not name
(when the list names any). What does not (`Preflight.warnings`): no answer within PREFLIGHT_S, and
any other failure (429, 5xx, a body the SDK cannot read): the run's own retries deal with those.
Every message names the endpoint by `public_url` and passes `support.secrets.redact`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from support.backends.api_backend import ApiBackend, public_url
from support.backends.base import BackendOptions, BackendUnavailable
from support.backends.registry import model_spec
from support.secrets import PLACEHOLDER_KEY, redact

PREFLIGHT_S = 5.0  # seconds: each endpoint's one attempt (no retry)
SHOWN_IDS = 10  # model ids of a server's list a message names


@dataclass
class Preflight:
    """What the preflight found: `errors` stop the run, `warnings` do not; `checked`: the
    endpoints asked (public URLs)."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)


@dataclass
class _Endpoint:
    backend: ApiBackend
    models: dict[str, str] = field(default_factory=dict)  # --model name -> model id


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and its causes / contexts, outermost first."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _status(exc: BaseException) -> int | None:
    """The HTTP status an SDK's error carries (openai, anthropic: status_code; google-genai:
    code), if any."""
    for e in _chain(exc):
        for attr in ("status_code", "code"):
            value = getattr(e, attr, None)
            if isinstance(value, int) and 100 <= value < 600:
                return value
    return None


def _named(exc: BaseException, *names: str) -> bool:
    """Whether an exception of the chain has a class (or base class) whose name holds one of
    `names` (the SDKs' and HTTP stacks' error classes, without importing them)."""
    return any(name in c.__name__ for e in _chain(exc) for c in type(e).__mro__ for name in names)


def _timed_out(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or _named(exc, "Timeout", "DeadlineExceeded")


def _unconnected(exc: BaseException) -> bool:
    return any(isinstance(e, ConnectionError) for e in _chain(exc)) or _named(
        exc, "ConnectError", "APIConnectionError"
    )


def _reason(exc: BaseException) -> str:
    """The innermost message of the chain (`[Errno 111] Connection refused`)."""
    texts = [str(e) for e in _chain(exc) if str(e)]
    return texts[-1] if texts else type(exc).__name__


def _url(exc: BaseException, fallback: str) -> str:
    """The URL the failed request went to (public_url: no credentials, no query), else
    `fallback`."""
    for e in _chain(exc):
        for holder in (e, getattr(e, "response", None)):
            request = getattr(holder, "request", None)
            url = getattr(request, "url", None)
            if url is not None:
                return public_url(str(url))
    return fallback


def _key_hint(backend: ApiBackend) -> str:
    """Which variable holds the key that was sent, and what to do."""
    variables = " or ".join(backend.key_env)
    if backend.key_optional:  # openai-compatible: never OPENAI_API_KEY
        sent = (
            f"${variables}"
            if backend._api_key != PLACEHOLDER_KEY
            else f"the placeholder {PLACEHOLDER_KEY!r}: ${variables} is not set"
        )
        return (
            f"{backend.provider}: sends {sent}, never $OPENAI_API_KEY; set {variables} to the key "
            "the server was started with (vllm serve --api-key)"
        )
    sent = next((v for v in backend.key_env if os.environ.get(v, "").strip()), backend.key_env[0])
    return f"the key sent is ${sent}: check it"


def _label(endpoint: _Endpoint) -> str:
    return ", ".join(f"--model {name}" for name in endpoint.models)


async def _check(endpoint: _Endpoint, found: Preflight) -> None:
    """Ask one endpoint for its models list; what fails goes to `found`."""
    backend = endpoint.backend
    where = backend.endpoint_url or "the endpoint"
    label = _label(endpoint)
    try:
        ids = await asyncio.wait_for(backend.model_ids(), PREFLIGHT_S)
    except NotImplementedError:  # a provider without a models list: not checked
        return
    except Exception as exc:
        url = _url(exc, where)
        status = _status(exc)
        if status in (401, 403):
            found.errors.append(
                f"{label}: {where} refused the key (HTTP {status} for GET {url}); "
                f"{_key_hint(backend)}"
            )
        elif status == 404:
            found.errors.append(
                f"{label}: {where} has no models list (HTTP 404 for GET {url}): is --api-base "
                f"{backend.base_url_form}? Several providers on their own endpoints: "
                f"--api-base {backend.provider}=URL for each. A server that has no models list: "
                "--no-preflight"
            )
        elif status is None and _timed_out(exc):
            found.warnings.append(
                f"{label}: {where} did not answer its models list within {PREFLIGHT_S:g} s "
                "(the preflight); the run goes on"
            )
        elif status is None and _unconnected(exc):
            found.errors.append(
                f"{label}: cannot connect to {where} ({_reason(exc)}): is the server running, "
                "and is --api-base its address? (a rerun whose answers are all cached needs no "
                "server: --no-preflight)"
            )
        else:
            kind = f"HTTP {status}" if status else f"{type(exc).__name__}: {_reason(exc)}"
            found.warnings.append(
                f"{label}: the preflight's GET {url} failed ({kind}); the run goes on"
            )
        return
    if not backend.key_optional or not ids:  # only a server's own list says what it serves
        return
    for name, model_id in endpoint.models.items():
        if model_id not in ids:
            shown = ", ".join(ids[:SHOWN_IDS]) + (" ..." if len(ids) > SHOWN_IDS else "")
            found.errors.append(
                f"--model {name}: {where} does not serve {model_id!r}; its models: {shown} "
                f"(--model {backend.provider}:<one of them>)"
            )


def _endpoints(models: Sequence[str], opts: BackendOptions) -> list[_Endpoint]:
    """The API endpoints of `models`, one per provider class and base URL (backends built with
    `opts`; a model that cannot be built is left to the run, which reports it)."""
    found: dict[tuple[type, str | None], _Endpoint] = {}
    for name in models:
        spec = model_spec(name)
        if spec.kind != "api":
            continue
        try:
            backend = spec.build(opts)
        except BackendUnavailable:
            continue
        if not isinstance(backend, ApiBackend):
            continue
        endpoint = found.setdefault((type(backend), backend.base_url), _Endpoint(backend))
        endpoint.models[name] = backend.model_id
    return list(found.values())


async def _run(endpoints: list[_Endpoint], found: Preflight) -> None:
    try:
        for endpoint in endpoints:  # the SDKs imported first: their import is not the deadline's
            await endpoint.backend.start()
        await asyncio.gather(*(_check(e, found) for e in endpoints))
    finally:
        for endpoint in endpoints:
            await endpoint.backend.aclose()


def preflight(models: Sequence[str], opts: BackendOptions) -> Preflight:
    """One models-list request to each API endpoint of `models` (module docstring), with no
    retry and a deadline of PREFLIGHT_S seconds (less if `opts.timeout_s` is); nothing at all
    when no model is an API model. Runs its own event loop: call it outside one."""
    opts = dataclasses.replace(opts, timeout_s=min(opts.timeout_s, PREFLIGHT_S), max_retries=0)
    endpoints = _endpoints(models, opts)
    found = Preflight(checked=[e.backend.endpoint_url or "" for e in endpoints])
    if endpoints:
        asyncio.run(_run(endpoints, found))
    found.errors = [redact(m) for m in found.errors]
    found.warnings = [redact(m) for m in found.warnings]
    return found
