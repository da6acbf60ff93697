"""The backend protocol every model provider implements, what a provider is, and its errors.

A provider is a Backend subclass that sets `provider` (the prefix of `provider:model-id` names)
and registers itself with the `register_provider` class decorator; its class attributes say what
it is before anything is built: its kind, the variables holding its key, the modules it needs
and the extra installing them, how a prefill reaches its model, how its models write a box. The
model registry (registry.py) reads these traits from the class; nothing else keys on a
provider's name. Provider modules import their SDK only when a backend is made or sends, so a
class can be read on a machine without its extra.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from support.secrets import watch_variables
from support.settings import ApiSettings, RunSettings
from support.types import Request, Response

if TYPE_CHECKING:  # thinking.py reads model folders, whose module imports this one
    from support.backends.thinking import Thinking


class BackendError(RuntimeError):
    """A model call failed after the backend's own retries: the case becomes an `error` outcome."""


class BackendUnavailable(RuntimeError):
    """The backend cannot run here (missing key, package or accelerator): its cases are skipped."""


class BackendBuildError(RuntimeError):
    """The model's own code failed while it was being built (a `python:` factory that raised, a
    checkpoint it could not load): nothing about this machine to skip for, so its cases fail,
    each naming the error; the model is built once per process, failed or not."""


@dataclass(frozen=True)
class BackendOptions:
    """Session settings a factory may read."""

    seed: int = RunSettings.seed
    api_base: str | None = None  # endpoint of API models; None: the SDK's own setting
    # (provider, endpoint) pairs: one provider's endpoint in place of `api_base`
    # (`--api-base anthropic=URL`)
    api_bases: tuple[tuple[str, str], ...] = ()
    timeout_s: float = ApiSettings.timeout_s  # seconds per API request attempt
    # SDK retries of an API request (429, 5xx, timeouts, connection errors)
    max_retries: int = ApiSettings.retries
    # local engines: ("gpus", (0, 1)), ("max_batch", N), ("device", "cuda:1"), ...
    extra: tuple[tuple[str, Any], ...] = ()
    # the run's cache folder (local models memoise their weight hashes there); None: unknown
    cache_dir: str | None = None
    # a dry run (--dry-run) sends nothing, so an API model needs no key: a missing one is no
    # reason it cannot run, and its backend is built with a placeholder (never started)
    keyless: bool = False
    # the model variant's thinking setting (support/backends/thinking.py); None: the model's
    # own default
    thinking: Thinking | None = None
    # how an openai-compatible: server takes a clip (`--server-video`): "native" or "frames"
    server_video: str = ApiSettings.server_video

    def base_for(self, provider: str) -> str | None:
        """The endpoint of `provider`'s models: its own (`api_bases`), else `api_base`."""
        return dict(self.api_bases).get(provider, self.api_base)


def split_api_bases(
    values: Sequence[str], providers: Sequence[str]
) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """`--api-base` values, each `URL` (every API model) or `PROVIDER=URL` (that provider's):
    (the one for every model or None, the (provider, URL) pairs). A later value replaces an
    earlier one of the same kind, as a repeated option does. ValueError naming the option for
    an unknown provider."""
    every: str | None = None
    own: dict[str, str] = {}
    for value in values:
        head, sep, url = value.partition("=")
        if sep and "/" not in head:  # a URL's scheme or path has one before any "="
            if head not in providers:
                raise ValueError(
                    f"--api-base {value}: no provider {head!r}; the providers: "
                    f"{', '.join(providers)}"
                )
            own[head] = url
        else:
            every = value
    return every, tuple(own.items())


KINDS = ("reference", "api", "local-gpu", "local-cpu")
# what a model reads (support.types.Part.kind): the suite's vision-language models take text and
# images; a point-cloud model (a `python:` model declaring it) takes "points"
DEFAULT_MODALITIES: frozenset[str] = frozenset({"text", "image"})
# what the reference doubles read: they answer from the request's hints, whatever the parts; a
# clip is taken like an image (points are not: dynamic then sends the scene as it does today)
HINT_MODALITIES: frozenset[str] = DEFAULT_MODALITIES | {"video"}
# weights' dtypes a local engine runs in (`--dtype`); "auto": the engine's own choice
DTYPES = ("auto", "float32", "bfloat16", "float16")
# how a request's prefill (text the answer must continue) reaches the model: "native" (the model
# continues it: Anthropic's final assistant turn, a chat template rendered with the turn open, a
# server's continue_final_message), a fallback (a final assistant/model turn the API answers
# after rather than continues: OpenAI, Gemini), or "request" (the backend reads the Request as is)
NATIVE_PREFILL = "native"
REQUEST_PREFILL = "request"
# a model that refuses a prefill (Claude 4.6 and later; thinking on a manual-thinking Claude; a
# `python:` model declaring it): the prefill goes as a user-turn instruction
# (api_models.without_prefill)
UNSUPPORTED_PREFILL = "unsupported"
# model families whose boxes are [x1, y1, x2, y2] relative in 0-1000 (Qwen2-VL's and Qwen3-VL's
# grounding format; Qwen2.5-VL answers pixels)
NORM1000_TAGS = ("qwen2-vl", "qwen2_vl", "qwen3-vl", "qwen3_vl")

_providers: dict[str, type[Backend]] = {}


def missing_module(modules: tuple[str, ...]) -> str | None:
    """The first of `modules` that is not importable here (found without importing it)."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # a missing parent package (`google`)
            found = False
        if not found:
            return module
    return None


class Backend:
    """Base class of model backends.

    Subclasses set `name` (the `--model` name as the user wrote it) and `identity` (what makes two
    answers interchangeable: provider, model id, revision, backend version; it keys the cache), and
    implement `generate`. Backends that batch (local engines) set `max_batch` and implement
    `generate_batch`; the engine's micro-batcher then calls it with the requests waiting together.

    A provider also sets the traits below and implements `create`.
    """

    name: str = ""
    identity: Mapping[str, Any] = {}
    # True only for reference models, which read Request.target / Request.answer_space
    reads_hints: bool = False
    max_batch: int | None = None
    default_concurrency: int = 8
    # the modalities its model reads; a request holding another is refused, request by request
    # (support.client.engine.ModelClient), so no backend is ever handed a part it cannot send
    modalities: frozenset[str] = DEFAULT_MODALITIES

    # -- what the provider is (class traits, read without building anything) ---------------------
    provider: ClassVar[str] = ""  # the prefix of `provider:model-id` (register_provider)
    kind: ClassVar[str] = "reference"  # one of KINDS: what its models need
    key_env: ClassVar[tuple[str, ...]] = ()  # variables holding its key, in order of preference
    key_optional: ClassVar[bool] = False  # a missing key is no reason it cannot run
    needs: ClassVar[tuple[str, ...]] = ()  # modules it imports when built (found, not imported)
    extra: ClassVar[str] = ""  # the pyproject.toml extra that installs `needs`
    prefill: ClassVar[str] = REQUEST_PREFILL  # NATIVE_PREFILL, a fallback, or REQUEST_PREFILL

    @classmethod
    def box_convention(cls, model_id: str) -> str:
        """How the model writes a bounding box when asked for one: "norm1000" ([x1, y1, x2, y2]
        relative, 0-1000: Qwen2-VL, Qwen3-VL), "gemini" ([ymin, xmin, ymax, xmax] relative,
        0-1000: Gemini's `box_2d`) or "auto" (not known: read from the answer's keys). From the
        model id (case-insensitive), never the --model name a user chose."""
        model = model_id.lower()
        if "gemini" in model:
            return "gemini"
        if any(tag in model for tag in NORM1000_TAGS):
            return "norm1000"
        return "auto"

    @classmethod
    def modalities_of(cls, model_id: str) -> frozenset[str]:
        """What the model reads (Part kinds), known without building it: `modalities` by
        default; a provider whose models differ (`python:`) reads the model's own declaration."""
        return cls.modalities

    @classmethod
    def prefill_of(cls, model_id: str) -> str:
        """How a prefill reaches the model: `prefill` by default; a provider whose models
        differ (`python:`) reads the model's own declaration."""
        return cls.prefill

    @classmethod
    def check_model_id(cls, name: str, model_id: str) -> None:
        """ValueError naming `name` when `model_id` cannot be one of this provider's (run when
        the name is looked up, so a usage error before collection). Any id by default."""

    @classmethod
    def unavailable(cls, name: str, model_id: str, opts: BackendOptions) -> str | None:
        """Why `name` cannot run here, with what to do about it, or None; cheap and offline
        (registry.availability). By default: a module of `needs` missing, or a required key."""
        missing = missing_module(cls.needs)
        if missing is not None:
            return (
                f'{name}: the {missing} package is not installed: pip install -e ".[{cls.extra}]"'
            )
        if cls.key_env and not cls.key_optional and cls.env_key() is None and not opts.keyless:
            return f"{name}: {' or '.join(cls.key_env)} is not set"
        return None

    @classmethod
    def env_key(cls) -> str | None:
        """The first non-empty variable of `key_env`, stripped; None if none is set."""
        for var in cls.key_env:
            value = os.environ.get(var, "").strip()
            if value:
                return value
        return None

    @classmethod
    def create(cls, name: str, model_id: str, opts: BackendOptions) -> Backend:
        """The backend serving `name` (`provider:model_id`); BackendUnavailable when it cannot
        run here."""
        raise BackendUnavailable(f"{name}: {cls.__name__} makes no backend from a model id")

    async def start(self) -> None:
        """Work before the run's first request that is better done alone, such as importing an
        SDK and making its client. The engine awaits it once, before it lets the other cases
        build their requests, and only when the first request is not cached. Nothing by
        default."""

    async def generate(self, request: Request) -> Response:
        raise NotImplementedError

    async def generate_batch(self, requests: list[Request]) -> list[Response | BackendError]:
        """The answers to `requests`, in order; a BackendError in a request's place fails that
        request alone (the micro-batcher raises it to its caller only)."""
        return [await self.generate(r) for r in requests]

    async def aclose(self) -> None:
        """Release connections or engines; the default holds none."""


B = TypeVar("B", bound=type[Backend])


def register_provider(cls: B) -> B:
    """Class decorator: `cls` serves `provider:model-id` names (`cls.provider`), and `redact`
    watches its key variables. TypeError for a kind not in KINDS, a missing prefix, or a prefix
    another class holds (the same class defined again, a module imported anew, replaces it)."""
    if not cls.provider or ":" in cls.provider:
        raise TypeError(f"{cls.__name__}.provider must be a prefix without ':'")
    if cls.kind not in KINDS:
        raise TypeError(f"{cls.__name__}.kind {cls.kind!r} is not one of {KINDS}")
    held = _providers.get(cls.provider)
    if held is not None and _where(held) != _where(cls):
        raise TypeError(f"provider {cls.provider!r} is {_where(held)}'s already: {_where(cls)}")
    watch_variables(cls.key_env)  # redact() removes their values wherever they appear
    _providers[cls.provider] = cls
    return cls


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def provider_class(provider: str) -> type[Backend] | None:
    """The registered class of `provider` (a prefix), or None. Registration happens when the
    class is defined (`register_provider`): registry.py imports the suite's provider modules."""
    return _providers.get(provider)


def provider_names() -> list[str]:
    """The prefixes of every registered provider, sorted."""
    return sorted(_providers)
