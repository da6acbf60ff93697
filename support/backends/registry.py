"""The model registry: every `--model` name, what it is (ModelSpec), and how its backend is built.

`--model` takes registered names (`oracle`, `chance`, `gpt-4o-mini`, `qwen25-vl-7b`, ...), names
added by installed packages (entry point group `vlmbench.models`, below), or `provider:model-id`:
`openai:`, `anthropic:`, `google:`, `openai-compatible:` (API), `vllm:` (local GPU), `hf:` (local
transformers), `scripted:<module>:<function>` (a reference model answering with a function of
the Request: a `str`, or one `str` per sample) and `planted:RULE` (a reference model answering like
the oracle except where the rule fails a request, e.g. `planted:where_distance=0.9,*=0.05`: fnmatch
patterns over the request's category, first match wins; support/backends/planted.py). A bad rule
is a ValueError when the name is checked, so a usage error before collection.

Providers: each `provider:` prefix is a Backend subclass that says what it is in class
attributes (support/backends/base.py: kind, key variables, needed modules and their extra,
prefill, box convention) and registers itself when its module is imported (the class decorator
`register_provider`: a second class claiming a prefix is a TypeError). This module imports
the suite's provider modules (one line each); a plugin's module registers its own when its entry
point loads. Provider modules import their SDKs only when a backend is built, so an uninstalled
extra costs nothing until its model is asked for. `availability(name)` asks the class, without
importing an SDK, why a model cannot run here (a missing package, key, model folder or
accelerator): at configure that is a usage error naming the variable or the install, or, with
`--skip-unavailable`, the reason its cases are skipped with (as is a BackendUnavailable that
building raises).

Kinds (`ModelSpec.kind`, `model_kind`), known from the name alone, without building anything:
"reference" (offline, reads the evaluation's hints), "api" (network and a key), "local-gpu"
(vLLM) and "local-cpu" (transformers; on a GPU with `--device cuda`).

Plugins: an installed distribution adds models without editing the suite by declaring

    [project.entry-points."vlmbench.models"]
    my-models = "my_package.vlm:SPECS"

where the object is a ModelSpec or an iterable of ModelSpecs (a spec without a factory is built
by its provider's class). Entry points are loaded once, on
the first registry lookup; one that fails to load, or gives something else, or a name already
taken, raises PluginError (a ValueError: a usage error at configure) naming the entry point.

API endpoints: the provider's own `--api-base PROVIDER=URL`, else `--api-base URL`
(BackendOptions.base_for), if given, else each SDK's own variable:
OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL (read once by the backend and given
to the SDK, so the endpoint in its cache identity is the one it sends to: api_backend.py).
`openai-compatible:` (vLLM and similar servers) requires `--api-base`, and reads its key from
VLMBENCH_API_KEY, never OPENAI_API_KEY (openai_chat.py).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# the suite's providers: importing a module defines its classes, and each provider class's
# decorator registers it (`@register_provider`, support/backends/base.py); a new provider is one
# module and one line here
from support.backends import (  # noqa: F401
    anthropic_messages,
    gemini,
    openai_chat,
    planted,
    python_model,
    scripted,
    transformers_local,
    vllm_local,
)
from support.backends.api_models import (
    ADAPTIVE,
    API_MODELS,
    BUDGET,
    EFFORT,
    LEVEL,
    RequestRules,
    describe,
    rules_for,
)
from support.backends.base import (
    HINT_MODALITIES,
    KINDS,
    UNSUPPORTED_PREFILL,
    Backend,
    BackendOptions,
    BackendUnavailable,
    provider_class,
    provider_names,
)
from support.backends.families import Family, family_modalities, family_of
from support.backends.thinking import VARIANT_SEP, Thinking, split_variant, variant_name
from support.settings import ModelSettings
from support.types import MODALITIES

ENTRY_POINT_GROUP = "vlmbench.models"


@dataclass(frozen=True)
class ModelSpec:
    """One model: its `--model` name, what it needs (`kind`), who serves it and how it is built.

    `factory(spec, opts)` builds the Backend (importing SDKs or engines only then); None: the
    provider's class does (`Backend.create`). `engine` holds engine settings beyond the defaults
    (vLLM's `vllm.LLM` keyword arguments, e.g. {"max_num_seqs": 100}), given to the provider's
    `create`.
    """

    name: str  # the --model name
    kind: str  # one of KINDS
    provider: str  # "openai", "anthropic", "google", "openai-compatible", "vllm", "hf", ...
    model_id: str  # hub id, API model id, or what the provider reads after `provider:`
    factory: Callable[[ModelSpec, BackendOptions], Backend] | None = field(default=None, repr=False)
    engine: Mapping[str, Any] = field(default_factory=dict, hash=False)
    description: str = ""
    # a local model's config.json architecture, for when its weights are not here yet (the
    # family's traits come from the config where it is: support.backends.families)
    architecture: str = ""
    # a variant's thinking setting (`name+effort-high`: support/backends/thinking.py); None:
    # the model's own default
    thinking: Thinking | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("ModelSpec needs a name")
        if self.kind not in KINDS:
            raise ValueError(f"ModelSpec {self.name!r}: kind {self.kind!r} is not one of {KINDS}")
        if self.factory is None and provider_class(self.provider) is None:
            raise ValueError(
                f"ModelSpec {self.name!r}: no factory, and provider {self.provider!r} is not a "
                f"registered one ({', '.join(provider_names())})"
            )
        if self.factory is not None and not callable(self.factory):
            raise ValueError(f"ModelSpec {self.name!r}: factory is not callable")
        object.__setattr__(self, "engine", MappingProxyType(dict(self.engine)))

    @property
    def backend_class(self) -> type[Backend]:
        """The provider's class, whose traits describe the model; `Backend` (no traits) for a
        provider no class registered (the reference doubles, a plugin's own factory)."""
        return provider_class(self.provider) or Backend

    @property
    def family(self) -> Family | None:
        """A local model's family (its config's architecture, else the declared one); None for
        API and reference models and unknown architectures."""
        if self.kind not in ("local-gpu", "local-cpu"):
            return None
        return family_of(self.model_id, self.architecture or None)

    @property
    def box_convention(self) -> str:
        """How the model writes a bounding box when asked for one: a local model's family's
        `box_frame`, else the provider's `Backend.box_convention`."""
        family = self.family
        if family is not None:
            return family.box_frame
        return self.backend_class.box_convention(self.model_id)

    @property
    def rules(self) -> RequestRules | None:
        """An API model's request rules (support/backends/api_models.py); None for others."""
        if self.kind != "api":
            return None
        return rules_for(self.provider, self.model_id)

    @property
    def prefill(self) -> str:
        """How a request's prefill reaches the model (`Backend.prefill`), or UNSUPPORTED_PREFILL
        where the model's API refuses one (it is then sent as a user-turn instruction)."""
        rules = self.rules
        if rules is not None and not rules.takes_prefill(self.thinking):
            return UNSUPPORTED_PREFILL
        return self.backend_class.prefill_of(self.model_id)

    @property
    def modalities(self) -> frozenset[str]:
        """What the model reads: "text", "image", "points" (support.types.Part.kind); an
        evaluation sends each model the parts it reads (dynamic: the rendered scene, the cloud,
        or both)."""
        found = self.backend_class.modalities_of(self.model_id)
        if self.kind in ("local-gpu", "local-cpu"):  # a local family that takes video
            return family_modalities(found, self.family)
        if self.kind == "reference":  # oracle and chance answer from hints, as planted: does
            return HINT_MODALITIES
        return found

    @property
    def traits(self) -> dict[str, str]:
        """What evaluations may ask of the model, as the run's manifest records it."""
        traits = {
            "box_convention": self.box_convention,
            "prefill": self.prefill,
            "modalities": ",".join(m for m in MODALITIES if m in self.modalities),
        }
        family = self.family
        if family is not None:
            traits["family"] = family.name
        rules = self.rules
        if rules is not None and rules != RequestRules():
            traits.update(describe(rules, self.thinking))
        elif self.thinking is not None:
            traits["thinking"] = self.thinking.label
        return traits

    def build(self, opts: BackendOptions | None = None) -> Backend:
        """The backend; BackendUnavailable when it cannot run here (an optional extra missing)."""
        opts = opts or BackendOptions()
        if self.thinking is not None:
            opts = dataclasses.replace(opts, thinking=self.thinking)
        try:
            if self.factory is not None:
                return self.factory(self, opts)
            if self.engine.keys() - {"device"}:
                return self.backend_class.create(self.name, self.model_id, opts, self.engine)
            return self.backend_class.create(self.name, self.model_id, engine_options(self, opts))
        except ImportError as exc:
            raise BackendUnavailable(f"{self.name}: {exc}") from exc


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


def _oracle(spec: ModelSpec, opts: BackendOptions) -> Backend:
    from support.backends.reference import OracleBackend

    return OracleBackend(spec.name)


def _chance(spec: ModelSpec, opts: BackendOptions) -> Backend:
    from support.backends.reference import ChanceBackend

    return ChanceBackend(spec.name, seed=opts.seed)


def _gpu(name: str, model_id: str, architecture: str, **engine: Any) -> ModelSpec:
    return ModelSpec(name, "local-gpu", "vllm", model_id, engine=engine, architecture=architecture)


_LLAVA_OV = "LlavaOnevisionForConditionalGeneration"
_BUILTIN: tuple[ModelSpec, ...] = (
    ModelSpec(
        "oracle", "reference", "reference", "oracle", _oracle,
        description="answers with the ground truth: every metric reads 1.0",
    ),
    ModelSpec(
        "chance", "reference", "reference", "chance", _chance,
        description="seeded random answers: the chance level",
    ),
    # the API models of support/backends/api_models.py's table, by their ids
    *(ModelSpec(m.model_id, "api", m.provider, m.model_id) for m in API_MODELS),
    _gpu("qwen25-vl-7b", "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen2_5_VLForConditionalGeneration"),
    _gpu("qwen3-vl-8b", "Qwen/Qwen3-VL-8B-Instruct", "Qwen3VLForConditionalGeneration"),
    _gpu("qwen3-vl-8b-thinking", "Qwen/Qwen3-VL-8B-Thinking", "Qwen3VLForConditionalGeneration"),
    _gpu("llava-onevision-7b", "llava-hf/llava-onevision-qwen2-7b-si-hf", _LLAVA_OV),
    # the PGT study's LLaVA-OneVision
    _gpu("llava-onevision-7b-ov-chat", "llava-hf/llava-onevision-qwen2-7b-ov-chat-hf", _LLAVA_OV),
    # Llama-3.2-Vision: transformers on a GPU (vLLM removed Mllama in 0.10.2); --device overrides
    ModelSpec(
        "llama32-vision-11b", "local-gpu", "hf", "meta-llama/Llama-3.2-11B-Vision-Instruct",
        engine={"device": "cuda"}, architecture="MllamaForConditionalGeneration",
        description="transformers on a GPU: vLLM no longer loads Llama-3.2-Vision",
    ),
)  # fmt: skip
# registered name -> spec: the suite's own models (plugins' models: plugin_models())
MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in _BUILTIN}

DEFAULT_MODELS: tuple[str, ...] = ModelSettings.names  # the offline reference models


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
    return sorted(_registered()) + [f"{p}:<model-id>" for p in provider_names()]


def model_spec(name: str) -> ModelSpec:
    """The spec of a registered name or of `provider:model-id`, or of a thinking variant of
    either (`gpt-5.4+effort-high`: `variant_spec`); ValueError for unknown names, for a model
    id its provider's class refuses (`check_model_id`: a bad planted rule) and for a thinking
    setting the model's API does not take."""
    if VARIANT_SEP in name and name not in _registered() and is_variant(name):
        return variant_spec(name)
    registered = _registered().get(name)
    if registered is not None:
        return registered
    provider, sep, model_id = name.partition(":")
    cls = provider_class(provider) if sep and model_id else None
    if cls is not None:
        cls.check_model_id(name, model_id)
        return ModelSpec(name, cls.kind, provider, model_id)
    raise ValueError(f"unknown model {name!r}; known: {', '.join(known_names())}")


def is_variant(name: str) -> bool:
    """Whether `name` ends in a thinking setting (`+effort-high`, `+budget-2048`)."""
    try:
        return split_variant(name)[1] is not None
    except ValueError:
        return False


def variant_spec(name: str) -> ModelSpec:
    """The spec of `MODEL+effort-LEVEL` / `MODEL+budget-TOKENS`: MODEL's, with the setting
    (checked against an API model's rules; a local model takes a budget only)."""
    base_name, thinking = split_variant(name)
    base = model_spec(base_name)
    if thinking is None:
        return base
    if base.thinking is not None:
        raise ValueError(f"model {name!r}: {base_name!r} has a thinking setting already")
    why = thinking_refusal(base, thinking)
    if why is not None:
        raise ValueError(f"model {name!r}: {why}")
    return dataclasses.replace(base, name=name, thinking=thinking)


def thinking_refusal(spec: ModelSpec, thinking: Thinking) -> str | None:
    """Why `spec`'s model cannot take `thinking` (None: it can): an API model's rules say;
    a local model takes a budget (room for its `<think>` span); reference models take none."""
    rules = spec.rules
    if rules is not None:
        why = rules.takes(thinking)
        return f"{spec.model_id}: {why}" if why else None
    if spec.kind in ("local-gpu", "local-cpu"):
        return None if thinking.budget is not None else "a local model takes a budget only"
    return f"{spec.name} has no thinking setting"


@dataclass(frozen=True)
class ThinkingAxis:
    """`--reasoning-effort` / `--thinking-budget` applied to a run's models (`thinking_variants`):
    the models with each variant in place of its model, those that run as they are with why,
    and one line a setting a model with that kind of thinking control refuses."""

    models: tuple[str, ...]
    as_is: tuple[tuple[str, str], ...] = ()  # (model, why it runs as it is)
    refused: tuple[str, ...] = ()  # a usage error's lines: the setting, the model, what it takes


def thinking_controls(spec: ModelSpec) -> tuple[str, ...]:
    """The kinds of thinking setting `spec`'s model has a control for: "effort" (an API's
    effort or level), "budget" (an API's token budget; a local model's room for `<think>`)."""
    rules = spec.rules
    if rules is not None:
        if rules.thinking in (EFFORT, ADAPTIVE, LEVEL):
            return ("effort",)
        return ("budget",) if rules.thinking == BUDGET and rules.budget_range else ()
    return ("budget",) if spec.kind in ("local-gpu", "local-cpu") else ()


def thinking_values(spec: ModelSpec, kind: str) -> str:
    """What `spec`'s model takes of a kind of thinking setting, as a usage error names it."""
    rules = spec.rules
    if rules is None:  # a local model: any budget
        return "a thinking budget of any number of tokens (--thinking-budget N)"
    if kind == "effort":
        return f"the effort levels {', '.join(rules.efforts)} (--reasoning-effort)"
    low, high = rules.budget_range or (0, 0)
    off = ", or 0 (off)" if rules.budget_off else ""
    return f"a thinking budget of {low}..{high} tokens{off} (--thinking-budget)"


FLAGS = {"effort": "--reasoning-effort", "budget": "--thinking-budget"}


def thinking_variants(names: list[str], efforts: list[str], budgets: list[int]) -> ThinkingAxis:
    """The thinking axes applied to the run's models. A model with a thinking control becomes
    one variant a value of the kinds it has a control for (`variant_name`); a value it refuses
    is a line of `refused` naming the values it takes, and so is an API model none of whose
    control's kind was given (Anthropic's budget models under --reasoning-effort alone). A
    model with no thinking control, a local model under --reasoning-effort alone, and a name
    that carries its own setting run as they are (`as_is`, with why)."""
    given = {"effort": [Thinking(effort=e) for e in efforts]}
    given["budget"] = [Thinking(budget=b) for b in budgets]
    if not efforts and not budgets:
        return ThinkingAxis(tuple(names))
    out: list[str] = []
    as_is: list[tuple[str, str]] = []
    refused: list[str] = []
    for name in names:
        spec = model_spec(name)
        controls = thinking_controls(spec)
        kinds = [k for k in controls if given[k]]
        if spec.thinking is not None or not controls or (not kinds and spec.rules is None):
            out.append(name)
            if spec.thinking is not None:
                why = "its name carries its own setting"
            elif not controls:
                why = "no thinking control"
            else:
                why = "a local model takes --thinking-budget only"
            as_is.append((name, why))
            continue
        if not kinds:
            wanted = " and ".join(FLAGS[k] for k in given if given[k])
            refused.append(
                f"{wanted}: {name} has no such control; it takes "
                f"{thinking_values(spec, controls[0])}"
            )
            out.append(name)
            continue
        for kind in kinds:
            for t in given[kind]:
                if thinking_refusal(spec, t) is None:
                    out.append(variant_name(name, t))
                else:
                    value = t.effort if kind == "effort" else t.budget
                    refused.append(
                        f"{FLAGS[kind]} {value}: {name} does not take it; it takes "
                        f"{thinking_values(spec, kind)}"
                    )
    return ThinkingAxis(tuple(dict.fromkeys(out)), tuple(as_is), tuple(refused))


def check_name(name: str) -> None:
    """Raise ValueError for a name no factory serves (checked at configure, before collection)."""
    model_spec(name)


def model_kind(name: str) -> str:
    """ "reference", "api", "local-gpu" (vLLM) or "local-cpu" (transformers): what a model needs,
    known from its name alone (marks, xdist grouping) without building it."""
    return model_spec(name).kind


def availability(name: str, opts: BackendOptions | None = None) -> str | None:
    """Why the model `name` cannot run here, with what to do about it, or None.

    Cheap and offline, so it runs at configure in every process: the provider's class says
    (`Backend.unavailable`: its packages looked up with importlib.util.find_spec, nothing
    imported; its key variable read, never printed; a local model's folder stat-ed; only an `hf:`
    model asked for an accelerator with `--device cuda` imports torch to see one). A model this
    check passes may still fail at build time (BackendUnavailable, e.g. a plugin's own
    requirement).
    """
    spec = model_spec(name)
    return spec.backend_class.unavailable(name, spec.model_id, engine_options(spec, opts))


def engine_options(spec: ModelSpec, opts: BackendOptions | None) -> BackendOptions:
    """`opts` with a registered model's default device (`engine["device"]`: Llama-3.2-Vision's
    "cuda") where the user gave no --device."""
    opts = opts or BackendOptions()
    device = spec.engine.get("device")
    extra = dict(opts.extra)
    if device and not extra.get("device"):
        extra["device"] = device
        return dataclasses.replace(opts, extra=tuple(extra.items()))
    return opts


def create_backend(name: str, opts: BackendOptions | None = None) -> Backend:
    """Build the backend for a `--model` name. Raises BackendUnavailable when it cannot run here."""
    return model_spec(name).build(opts)
