"""The model registry: every `--model` name, what it is (ModelSpec), and how its backend is built.

`--model` takes registered names (`oracle`, `chance`, `gpt-4o-mini`, `qwen25-vl-7b`, ...), names
added by installed packages (entry point group `vlmbench.models`, below), or `provider:model-id`:
`openai:`, `anthropic:`, `google:`, `openai-compatible:` (API), `vllm:` (local GPU), `hf:` (local
transformers), `scripted:<module>:<function>` (a reference model answering with a function of
the Request: a `str`, or one `str` per sample) and `planted:RULE` (a reference model answering like
the oracle except where the rule fails a request, e.g. `planted:where_distance=0.9,*=0.05`: fnmatch
patterns over the request's category, first match wins; support/backends/planted.py). A bad rule
is a ValueError when the name is checked, so a usage error before collection. Factories import
their SDKs only when called, so an uninstalled extra costs nothing until its model is asked for.
`availability(name)` says, without importing an SDK, why a model cannot run here (a missing
package, key, model folder or accelerator): at configure that is a usage error naming the
variable or the install, or, with `--skip-unavailable`, the reason its cases are skipped with (as
is a BackendUnavailable a factory raises).

Kinds (`ModelSpec.kind`, `model_kind`), known from the name alone, without building anything:
"reference" (offline, reads the evaluation's hints), "api" (network and a key), "local-gpu"
(vLLM) and "local-cpu" (transformers; on a GPU with `--device cuda`).

Plugins: an installed distribution adds models without editing the suite by declaring

    [project.entry-points."vlmbench.models"]
    my-models = "my_package.vlm:SPECS"

where the object is a ModelSpec or an iterable of ModelSpecs. Entry points are loaded once, on
the first registry lookup; one that fails to load, or gives something else, or a name already
taken, raises PluginError (a ValueError: a usage error at configure) naming the entry point.

API endpoints: `--api-base` (BackendOptions.api_base) if given, else each SDK's own variable:
OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL (read once by the backend and given
to the SDK, so the endpoint in its cache identity is the one it sends to: api_backend.py).
`openai-compatible:` (vLLM and similar servers) requires `--api-base`, and reads its key from
VLMBENCH_API_KEY, never OPENAI_API_KEY (keys.py).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from support.backends.base import Backend, BackendUnavailable
from support.backends.keys import KEY_ENV, OPTIONAL_KEY, env_key

KINDS = ("reference", "api", "local-gpu", "local-cpu")
ENTRY_POINT_GROUP = "vlmbench.models"


@dataclass(frozen=True)
class BackendOptions:
    """Session settings a factory may read."""

    seed: int = 0
    api_base: str | None = None  # endpoint of API models; None: the SDK's own setting
    timeout_s: float = 60.0  # seconds per API request attempt
    max_retries: int = 5  # SDK retries of an API request (429, 5xx, timeouts, connection errors)
    # local engines: ("gpus", (0, 1)), ("max_batch", N), ("device", "cuda:1"), ...
    extra: tuple[tuple[str, Any], ...] = ()
    # the run's cache folder (local models memoise their weight hashes there); None: unknown
    cache_dir: str | None = None
    # a dry run (--dry-run) sends nothing, so an API model needs no key: a missing one is no
    # reason it cannot run, and its backend is built with a placeholder (never started)
    keyless: bool = False


@dataclass(frozen=True)
class ModelSpec:
    """One model: its `--model` name, what it needs (`kind`), who serves it and how it is built.

    `factory(spec, opts)` builds the Backend (importing SDKs or engines only then); `engine` holds
    engine settings beyond the defaults (vLLM's `vllm.LLM` keyword arguments, e.g.
    {"max_num_seqs": 100}), read by the factory.
    """

    name: str  # the --model name
    kind: str  # one of KINDS
    provider: str  # "openai", "anthropic", "google", "openai-compatible", "vllm", "hf", ...
    model_id: str  # hub id, API model id, or what the provider reads after `provider:`
    factory: Callable[[ModelSpec, BackendOptions], Backend] = field(repr=False)
    engine: Mapping[str, Any] = field(default_factory=dict, hash=False)
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("ModelSpec needs a name")
        if self.kind not in KINDS:
            raise ValueError(f"ModelSpec {self.name!r}: kind {self.kind!r} is not one of {KINDS}")
        if not callable(self.factory):
            raise ValueError(f"ModelSpec {self.name!r}: factory is not callable")
        object.__setattr__(self, "engine", MappingProxyType(dict(self.engine)))

    @property
    def box_convention(self) -> str:
        """How the model writes a bounding box when asked for one (`box_convention_of`)."""
        return box_convention_of(self.provider, self.model_id)

    @property
    def prefill(self) -> str:
        """How a request's prefill reaches the model (`prefill_mode_of`)."""
        return prefill_mode_of(self.provider)

    @property
    def traits(self) -> dict[str, str]:
        """What evaluations may ask of the model, as the run's manifest records it."""
        return {"box_convention": self.box_convention, "prefill": self.prefill}

    def build(self, opts: BackendOptions | None = None) -> Backend:
        """The backend; BackendUnavailable when it cannot run here (an optional extra missing)."""
        try:
            return self.factory(self, opts or BackendOptions())
        except ImportError as exc:
            raise BackendUnavailable(f"{self.name}: {exc}") from exc


# model families whose boxes are [x1, y1, x2, y2] relative in 0-1000 (Qwen2-VL's and Qwen3-VL's
# grounding format; Qwen2.5-VL answers pixels)
NORM1000_TAGS = ("qwen2-vl", "qwen2_vl", "qwen3-vl", "qwen3_vl")


def box_convention_of(provider: str, model_id: str) -> str:
    """How a model writes a bounding box: "gemini" ([ymin, xmin, ymax, xmax] relative, 0-1000:
    Gemini's `box_2d`), "norm1000" (Qwen2-VL, Qwen3-VL), or "auto" (not known: read from the
    answer's keys). From the provider and the model id (case-insensitive), never the --model
    name a user chose."""
    model = model_id.lower()
    if provider == "google" or "gemini" in model:
        return "gemini"
    if any(tag in model for tag in NORM1000_TAGS):
        return "norm1000"
    return "auto"


# provider -> how a request's prefill (text the answer must continue) reaches the model: "native"
# (the model continues it: Anthropic's final assistant turn, a chat template rendered with the
# turn open, a server's continue_final_message) or a fallback, a final assistant/model turn the
# API answers after rather than continues (OpenAI, Gemini). Providers not listed (the reference
# doubles) are handed the request itself.
NATIVE_PREFILL = "native"
PREFILL_MODES: dict[str, str] = {
    "anthropic": NATIVE_PREFILL,
    "vllm": NATIVE_PREFILL,
    "hf": NATIVE_PREFILL,
    "openai-compatible": NATIVE_PREFILL,
    "openai": "assistant-turn fallback",
    "google": "model-turn fallback",
}


def prefill_mode_of(provider: str) -> str:
    """`PREFILL_MODES[provider]`; "request" for a provider that reads the Request as is."""
    return PREFILL_MODES.get(provider, "request")


def spec_or_unregistered(name: str) -> ModelSpec:
    """`model_spec(name)`, or `unregistered_spec(name)` for a name the registry does not know."""
    try:
        return model_spec(name)
    except ValueError:
        return unregistered_spec(name)


def unregistered_spec(name: str) -> ModelSpec:
    """A spec for a client whose name the registry does not know (a test double's backend):
    no provider, no traits; building it is an error."""

    def refuse(spec: ModelSpec, opts: BackendOptions) -> Backend:
        raise BackendUnavailable(f"{name}: not a registered model")

    return ModelSpec(name, "reference", "", name, refuse)


class PluginError(ValueError):
    """A `vlmbench.models` entry point that does not give usable ModelSpecs."""


# -- provider factories: (name, model id, options) -> Backend --------------------------------------

ProviderFactory = Callable[[str, str, BackendOptions], Backend]


def _oracle(name: str, model_id: str, opts: BackendOptions) -> Backend:
    from support.backends.reference import OracleBackend

    return OracleBackend(name)


def _chance(name: str, model_id: str, opts: BackendOptions) -> Backend:
    from support.backends.reference import ChanceBackend

    return ChanceBackend(name, seed=opts.seed)


def _missing_module(modules: tuple[str, ...]) -> str | None:
    """The first of `modules` that is not importable here (found without importing it)."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # a missing parent package (`google`)
            found = False
        if not found:
            return module
    return None


def _require_sdk(name: str, *modules: str) -> None:
    """BackendUnavailable unless the `api` extra's modules are importable."""
    if _missing_module(modules) is not None:
        raise BackendUnavailable(f"{name}: pip install 'vlmbench[api]'")


def _api_kwargs(opts: BackendOptions) -> dict[str, Any]:
    return {"base_url": opts.api_base, "timeout_s": opts.timeout_s, "max_retries": opts.max_retries}


def _key(provider: str, name: str, opts: BackendOptions) -> str:
    """The provider's key from its variables; a placeholder in a dry run without one."""
    from support.backends.keys import PLACEHOLDER_KEY, env_key, require_key

    if opts.keyless and env_key(provider) is None:
        return PLACEHOLDER_KEY
    return require_key(provider, name)


def _openai(name: str, model_id: str, opts: BackendOptions) -> Backend:
    _require_sdk(name, "openai", "tenacity")
    from support.backends.openai_chat import OpenAIChatBackend

    key = _key("openai", name, opts)
    return OpenAIChatBackend(name, model_id, api_key=key, **_api_kwargs(opts))


def _openai_compatible(name: str, model_id: str, opts: BackendOptions) -> Backend:
    if not opts.api_base:
        raise BackendUnavailable(f"openai-compatible:{model_id} needs --api-base URL")
    _require_sdk(name, "openai", "tenacity")
    from support.backends.keys import PLACEHOLDER_KEY
    from support.backends.openai_chat import OpenAIChatBackend

    # VLMBENCH_API_KEY (the server's --api-key), never OPENAI_API_KEY: --api-base may name any
    # server, and OpenAI's key is for OpenAI; servers started without --api-key accept any key
    key = env_key("openai-compatible") or PLACEHOLDER_KEY
    return OpenAIChatBackend(name, model_id, api_key=key, compatible=True, **_api_kwargs(opts))


def _anthropic(name: str, model_id: str, opts: BackendOptions) -> Backend:
    _require_sdk(name, "anthropic", "tenacity")
    from support.backends.anthropic_messages import AnthropicBackend

    key = _key("anthropic", name, opts)
    return AnthropicBackend(name, model_id, api_key=key, **_api_kwargs(opts))


def _google(name: str, model_id: str, opts: BackendOptions) -> Backend:
    _require_sdk(name, "google.genai", "tenacity")
    from support.backends.gemini import GeminiBackend

    key = _key("google", name, opts)
    return GeminiBackend(name, model_id, api_key=key, **_api_kwargs(opts))


def _vllm(name: str, model_id: str, opts: BackendOptions) -> Backend:
    from support.backends.vllm_local import make_vllm_backend

    return make_vllm_backend(name, model_id, opts)


def _hf(name: str, model_id: str, opts: BackendOptions) -> Backend:
    try:
        from support.backends.transformers_local import make_transformers_backend
    except ImportError as exc:
        raise BackendUnavailable(f"{name}: pip install 'vlmbench[hf]' ({exc})") from None
    return make_transformers_backend(name, model_id, opts)


def _scripted(name: str, model_id: str, opts: BackendOptions) -> Backend:
    from support.backends.scripted import make_scripted_backend

    return make_scripted_backend(name, model_id)


def _planted(name: str, model_id: str, opts: BackendOptions) -> Backend:
    from support.backends.planted import PlantedBackend

    return PlantedBackend(name, model_id, seed=opts.seed)


def _check_planted(name: str, model_id: str) -> None:
    from support.backends.planted import PlantedRule

    try:
        PlantedRule.parse(model_id)
    except ValueError as exc:
        raise ValueError(f"model {name!r}: {exc}") from None


# `provider:` prefixes -> factory taking the model id after the colon (tests may add their own)
PROVIDERS: dict[str, ProviderFactory] = {
    "vllm": _vllm,
    "hf": _hf,
    "openai": _openai,
    "anthropic": _anthropic,
    "google": _google,
    "openai-compatible": _openai_compatible,
    "scripted": _scripted,
    "planted": _planted,
}
# provider -> kind of its models; a provider missing here is "api"
PROVIDER_KINDS: dict[str, str] = {
    "scripted": "reference",
    "planted": "reference",
    "vllm": "local-gpu",
    "hf": "local-cpu",
}
# provider -> check of the model id, run whenever the name is looked up (ValueError naming it)
PROVIDER_CHECKS: dict[str, Callable[[str, str], None]] = {
    "planted": _check_planted,
}


# -- model factories: (spec, options) -> Backend ---------------------------------------------------


def provider_factory(spec: ModelSpec, opts: BackendOptions) -> Backend:
    """Build through `PROVIDERS[spec.provider]` (looked up at call time)."""
    return PROVIDERS[spec.provider](spec.name, spec.model_id, opts)


def vllm_factory(spec: ModelSpec, opts: BackendOptions) -> Backend:
    """A vLLM engine for `spec.model_id` with `spec.engine` as extra `vllm.LLM` arguments."""
    from support.backends.vllm_local import make_vllm_backend

    return make_vllm_backend(spec.name, spec.model_id, opts, engine=spec.engine)


def _reference(name: str, factory: ProviderFactory, description: str) -> ModelSpec:
    return ModelSpec(
        name,
        "reference",
        "reference",
        name,
        lambda spec, opts: factory(spec.name, spec.model_id, opts),
        description=description,
    )


def _api(name: str, provider: str) -> ModelSpec:
    return ModelSpec(name, "api", provider, name, provider_factory)


def _gpu(name: str, model_id: str, **engine: Any) -> ModelSpec:
    return ModelSpec(name, "local-gpu", "vllm", model_id, vllm_factory, engine=engine)


_BUILTIN: tuple[ModelSpec, ...] = (
    _reference("oracle", _oracle, "answers with the ground truth: every metric reads 1.0"),
    _reference("chance", _chance, "seeded random answers: the chance level"),
    _api("gpt-4o-mini", "openai"),
    _api("gpt-4o", "openai"),
    _api("claude-3-5-sonnet-20241022", "anthropic"),
    _api("claude-sonnet-4-20250514", "anthropic"),
    _api("gemini-2.0-flash", "google"),
    _gpu("qwen25-vl-7b", "Qwen/Qwen2.5-VL-7B-Instruct"),
    _gpu("llava-onevision-7b", "llava-hf/llava-onevision-qwen2-7b-si-hf"),
    _gpu("llava-onevision-7b-ov-chat", "llava-hf/llava-onevision-qwen2-7b-ov-chat-hf"),  # PGT src
    _gpu("llama32-vision-11b", "meta-llama/Llama-3.2-11B-Vision-Instruct", max_num_seqs=100),
)
# registered name -> spec: the suite's own models (plugins' models: plugin_models())
MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in _BUILTIN}

DEFAULT_MODELS: tuple[str, ...] = ("oracle", "chance")


# -- plugins ---------------------------------------------------------------------------------------


def _entry_point_specs(ep: importlib.metadata.EntryPoint) -> list[ModelSpec]:
    where = f"{ENTRY_POINT_GROUP} entry point {ep.name!r} ({ep.value})"
    try:
        loaded = ep.load()
    except Exception as exc:
        raise PluginError(f"{where} failed to load: {type(exc).__name__}: {exc}") from exc
    items = [loaded] if isinstance(loaded, ModelSpec) else loaded
    try:
        specs = list(items)
    except TypeError:
        specs = [items]
    for spec in specs:
        if not isinstance(spec, ModelSpec):
            raise PluginError(
                f"{where} must give a ModelSpec or an iterable of ModelSpecs, "
                f"not {type(spec).__name__}"
            )
        if ":" in spec.name:
            raise PluginError(f"{where}: model name {spec.name!r} may not contain ':'")
    return specs


@functools.cache
def plugin_models() -> Mapping[str, ModelSpec]:
    """Models of the installed `vlmbench.models` entry points, loaded once (cache_clear() to
    load them again). PluginError naming the entry point when one is broken or clashes."""
    found: dict[str, ModelSpec] = {}
    seen: set[tuple[str, str]] = set()
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if (ep.name, ep.value) in seen:  # the same distribution found twice on sys.path
            continue
        seen.add((ep.name, ep.value))
        for spec in _entry_point_specs(ep):
            taken = MODELS.get(spec.name) or found.get(spec.name)
            if taken is not None and taken != spec:
                raise PluginError(
                    f"{ENTRY_POINT_GROUP} entry point {ep.name!r} ({ep.value}): model name "
                    f"{spec.name!r} is already registered"
                )
            found[spec.name] = spec
    return MappingProxyType(found)


def _registered() -> Mapping[str, ModelSpec]:
    plugins = plugin_models()
    return {**MODELS, **plugins} if plugins else MODELS


# -- lookups ---------------------------------------------------------------------------------------


def known_names() -> list[str]:
    return sorted(_registered()) + [f"{p}:<model-id>" for p in sorted(PROVIDERS)]


def model_spec(name: str) -> ModelSpec:
    """The spec of a registered name or of `provider:model-id`; ValueError for unknown names
    and for a model id its provider's check refuses (PROVIDER_CHECKS: a bad planted rule)."""
    registered = _registered().get(name)
    if registered is not None:
        return registered
    provider, sep, model_id = name.partition(":")
    if sep and provider in PROVIDERS and model_id:
        check = PROVIDER_CHECKS.get(provider)
        if check is not None:
            check(name, model_id)
        kind = PROVIDER_KINDS.get(provider, "api")
        return ModelSpec(name, kind, provider, model_id, provider_factory)
    raise ValueError(f"unknown model {name!r}; known: {', '.join(known_names())}")


def check_name(name: str) -> None:
    """Raise ValueError for a name no factory serves (checked at configure, before collection)."""
    model_spec(name)


def model_kind(name: str) -> str:
    """ "reference", "api", "local-gpu" (vLLM) or "local-cpu" (transformers): what a model needs,
    known from its name alone (marks, xdist grouping) without building it."""
    return model_spec(name).kind


# provider -> (modules its backend needs, the extra of pyproject.toml that installs them)
NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "openai": (("openai", "tenacity"), "api"),
    "openai-compatible": (("openai", "tenacity"), "api"),
    "anthropic": (("anthropic", "tenacity"), "api"),
    "google": (("google.genai", "tenacity"), "api"),
    "vllm": (("vllm",), "vllm"),
    "hf": (("torch", "transformers"), "hf"),
}


def availability(name: str, opts: BackendOptions | None = None) -> str | None:
    """Why the model `name` cannot run here, with what to do about it, or None.

    Cheap and offline, so it runs at configure in every process: the provider's packages are
    looked up (importlib.util.find_spec, nothing imported), its key variable read (never
    printed), a local model's folder stat-ed; only an `hf:` model asked for an accelerator
    (`--device cuda`) imports torch to see one. vLLM's own platform decides between a GPU and
    its CPU build, so a `local-gpu` model needs vLLM installed, not a GPU. A model this check
    passes may still fail at build time (BackendUnavailable, e.g. a plugin's own requirement).
    """
    spec = model_spec(name)
    opts = opts or BackendOptions()
    if spec.provider == "openai-compatible" and not opts.api_base:
        return (
            f"{name}: needs --api-base URL (the server's endpoint, e.g. http://127.0.0.1:8000/v1)"
        )
    modules, extra = NEEDS.get(spec.provider, ((), ""))
    missing = _missing_module(modules)
    if missing is not None:
        return f'{name}: the {missing} package is not installed: pip install -e ".[{extra}]"'
    needs_key = spec.provider in KEY_ENV and spec.provider not in OPTIONAL_KEY
    if needs_key and env_key(spec.provider) is None and not opts.keyless:
        return f"{name}: {' or '.join(KEY_ENV[spec.provider])} is not set"
    if spec.provider in ("vllm", "hf"):
        from support.backends.model_folder import checked_folder

        try:
            checked_folder(name, spec.model_id)
        except BackendUnavailable as exc:
            return str(exc)
    device = dict(opts.extra).get("device")
    if spec.provider == "hf" and device not in (None, "", "auto", "cpu"):
        from support.backends.transformers_local import resolve_device

        try:
            resolve_device(name, device)
        except (BackendUnavailable, ValueError) as exc:
            return str(exc)
    return None


def create_backend(name: str, opts: BackendOptions | None = None) -> Backend:
    """Build the backend for a `--model` name. Raises BackendUnavailable when it cannot run here."""
    return model_spec(name).build(opts)
