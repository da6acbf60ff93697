"""Model names -> lazy backend factories, in one flat dict.

`--model` takes registered names (`oracle`, `chance`) or `provider:model-id`. Factories import their
SDKs only when called, so an uninstalled extra costs nothing until its model is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from support.backends.base import Backend, BackendUnavailable


@dataclass(frozen=True)
class BackendOptions:
    """Session settings a factory may read."""

    seed: int = 0
    api_base: str | None = None
    extra: tuple[tuple[str, Any], ...] = ()


def _oracle(name: str, model_id: str, opts: BackendOptions) -> Backend:
    from support.backends.reference import OracleBackend

    return OracleBackend(name)


def _chance(name: str, model_id: str, opts: BackendOptions) -> Backend:
    from support.backends.reference import ChanceBackend

    return ChanceBackend(name, seed=opts.seed)


Factory = Callable[[str, str, BackendOptions], Backend]

# registered name -> (factory, model id it stands for)
MODELS: dict[str, tuple[Factory, str]] = {
    "oracle": (_oracle, "oracle"),
    "chance": (_chance, "chance"),
}

# `provider:` prefixes -> factory taking the model id after the colon
PROVIDERS: dict[str, Factory] = {}

DEFAULT_MODELS: tuple[str, ...] = ("oracle", "chance")


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
