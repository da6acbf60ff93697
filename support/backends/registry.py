"""Model names -> lazy backend factories, in one flat dict.

`--model` takes registered names (`oracle`, `chance`, `gpt-4o-mini`, ...) or `provider:model-id`
(`openai:`, `anthropic:`, `google:`, `openai-compatible:`). Factories import their SDKs only when
called, so an uninstalled extra costs nothing until its model is asked for; a missing SDK or key
raises BackendUnavailable (the model's cases are skipped with that reason).

API endpoints: `--api-base` (BackendOptions.api_base) if given, else each SDK's own setting:
OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL (all read by the SDKs themselves).
`openai-compatible:` (vLLM and similar servers) requires `--api-base`.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from support.backends.base import Backend, BackendUnavailable


@dataclass(frozen=True)
class BackendOptions:
    """Session settings a factory may read."""

    seed: int = 0
    api_base: str | None = None  # endpoint of API models; None: the SDK's own setting
    timeout_s: float = 60.0  # seconds per API request attempt
    max_retries: int = 5  # SDK retries of an API request (429, 5xx, timeouts, connection errors)
    extra: tuple[tuple[str, Any], ...] = ()


def _oracle(name: str, model_id: str, opts: BackendOptions) -> Backend:
    from support.backends.reference import OracleBackend

    return OracleBackend(name)


def _chance(name: str, model_id: str, opts: BackendOptions) -> Backend:
    from support.backends.reference import ChanceBackend

    return ChanceBackend(name, seed=opts.seed)


def _require_sdk(name: str, *modules: str) -> None:
    """BackendUnavailable unless the `api` extra's modules are importable."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # a missing parent package (`google`)
            found = False
        if not found:
            raise BackendUnavailable(f"{name}: pip install 'vlmbench[api]'")


def _api_kwargs(opts: BackendOptions) -> dict[str, Any]:
    return {"base_url": opts.api_base, "timeout_s": opts.timeout_s, "max_retries": opts.max_retries}


def _openai(name: str, model_id: str, opts: BackendOptions) -> Backend:
    _require_sdk(name, "openai", "tenacity")
    from support.backends.api_keys import require_key
    from support.backends.openai_chat import OpenAIChatBackend

    key = require_key("openai", name)
    return OpenAIChatBackend(name, model_id, api_key=key, **_api_kwargs(opts))


def _openai_compatible(name: str, model_id: str, opts: BackendOptions) -> Backend:
    if not opts.api_base:
        raise BackendUnavailable(f"openai-compatible:{model_id} needs --api-base URL")
    _require_sdk(name, "openai", "tenacity")
    from support.backends.api_keys import PLACEHOLDER_KEY
    from support.backends.openai_chat import OpenAIChatBackend

    # servers started without --api-key accept any key; OPENAI_API_KEY is used when set
    key = os.environ.get("OPENAI_API_KEY", "").strip() or PLACEHOLDER_KEY
    return OpenAIChatBackend(name, model_id, api_key=key, compatible=True, **_api_kwargs(opts))


def _anthropic(name: str, model_id: str, opts: BackendOptions) -> Backend:
    _require_sdk(name, "anthropic", "tenacity")
    from support.backends.anthropic_messages import AnthropicBackend
    from support.backends.api_keys import require_key

    key = require_key("anthropic", name)
    return AnthropicBackend(name, model_id, api_key=key, **_api_kwargs(opts))


def _google(name: str, model_id: str, opts: BackendOptions) -> Backend:
    _require_sdk(name, "google.genai", "tenacity")
    from support.backends.api_keys import require_key
    from support.backends.gemini import GeminiBackend

    key = require_key("google", name)
    return GeminiBackend(name, model_id, api_key=key, **_api_kwargs(opts))


Factory = Callable[[str, str, BackendOptions], Backend]


# registered name -> (factory, model id it stands for)
def _vllm(name: str, model_id: str, opts: BackendOptions) -> Backend:
    from support.backends.vllm_local import make_vllm_backend

    return make_vllm_backend(name, model_id, opts)


def _hf(name: str, model_id: str, opts: BackendOptions) -> Backend:
    try:
        from support.backends.transformers_local import make_transformers_backend
    except ImportError as exc:
        raise BackendUnavailable(f"{name}: pip install 'vlmbench[hf]' ({exc})") from None
    return make_transformers_backend(name, model_id, opts)


MODELS: dict[str, tuple[Factory, str]] = {
    "oracle": (_oracle, "oracle"),
    "chance": (_chance, "chance"),
    "gpt-4o-mini": (_openai, "gpt-4o-mini"),
    "gpt-4o": (_openai, "gpt-4o"),
    "claude-3-5-sonnet-20241022": (_anthropic, "claude-3-5-sonnet-20241022"),
    "claude-sonnet-4-20250514": (_anthropic, "claude-sonnet-4-20250514"),
    "gemini-2.0-flash": (_google, "gemini-2.0-flash"),
    "qwen25-vl-7b": (_vllm, "Qwen/Qwen2.5-VL-7B-Instruct"),
    "llava-onevision-7b": (_vllm, "llava-hf/llava-onevision-qwen2-7b-si-hf"),
    "llama32-vision-11b": (_vllm, "meta-llama/Llama-3.2-11B-Vision-Instruct"),
}

# `provider:` prefixes -> factory taking the model id after the colon
PROVIDERS: dict[str, Factory] = {
    "vllm": _vllm,
    "hf": _hf,
    "openai": _openai,
    "anthropic": _anthropic,
    "google": _google,
    "openai-compatible": _openai_compatible,
}

DEFAULT_MODELS: tuple[str, ...] = ("oracle", "chance")


def model_kind(name: str) -> str:
    """ "reference" (oracle, chance), "gpu" (vLLM), "local" (transformers) or "api" (the rest):
    what a model needs, known from its name alone (marks, xdist grouping) without building it."""
    factory = MODELS[name][0] if name in MODELS else PROVIDERS.get(name.partition(":")[0])
    if factory in (_oracle, _chance):
        return "reference"
    if factory is _vllm:
        return "gpu"
    if factory is _hf:
        return "local"
    return "api"


def known_names() -> list[str]:
    return sorted(MODELS) + [f"{p}:<model-id>" for p in sorted(PROVIDERS)]


def check_name(name: str) -> None:
    """Raise ValueError for a name no factory serves (checked at configure, before collection)."""
    if name in MODELS:
        return
    provider, sep, model_id = name.partition(":")
    if sep and provider in PROVIDERS and model_id:
        return
    raise ValueError(f"unknown model {name!r}; known: {', '.join(known_names())}")


def create_backend(name: str, opts: BackendOptions | None = None) -> Backend:
    """Build the backend for a `--model` name. Raises BackendUnavailable when it cannot run here."""
    opts = opts or BackendOptions()
    check_name(name)
    if name in MODELS:
        factory, model_id = MODELS[name]
        return factory(name, model_id, opts)
    provider, _, model_id = name.partition(":")
    try:
        return PROVIDERS[provider](name, model_id, opts)
    except ImportError as exc:  # an optional extra is not installed
        raise BackendUnavailable(f"{name}: {exc}") from exc
