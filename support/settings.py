"""Run settings: what the command line decided, as one plain object the library can read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# `--compat`: "writeup" follows the seed write-ups with the original scripts' bugs fixed; "source"
# reproduces what the original scripts compute. Each evaluation reads `run.compat` in `configure`.
Compat = Literal["writeup", "source"]
COMPAT_PROFILES: tuple[Compat, ...] = ("writeup", "source")


@dataclass(frozen=True)
class RunSettings:
    """Options of one run (pytest options map onto these; the library never imports pytest)."""

    models: tuple[str, ...] = ("oracle", "chance")
    # `--reasoning-effort` / `--thinking-budget`: the thinking settings `models` were expanded
    # by (each a variant MODEL+effort-LEVEL / MODEL+budget-N, support/backends/thinking.py)
    reasoning_efforts: tuple[str, ...] = ()
    thinking_budgets: tuple[int, ...] = ()
    samples: int | None = None  # evenly spaced subset of each evaluation's test set
    seed: int = 0  # seeds `chance`, the bootstrap and what evaluations sample; never the data
    cache_dir: Path = Path(".vlmbench-cache")
    use_cache: bool = True
    results_dir: Path = Path("results")
    run_id: str = ""
    concurrency: int | str | None = None  # N, "auto" (adaptive) or None: each backend's default
    bootstrap: int = 1000  # bootstrap resamples per interval (0: no intervals)
    override: bool = False  # re-run cases whose results exist (evaluations that keep them)
    compat: Compat = "writeup"  # which profile: the write-ups' rules or the original scripts'
    # `--compare A,B`: explicit comparisons (two models, or two labels of one field), in order;
    # empty: each evaluation's default contrasts and every pair of models
    compare: tuple[tuple[str, str], ...] = ()
    power: bool = False  # `--power`: print sample sizes for `power_delta` and `target_halfwidth`
    power_delta: float = 0.05  # a difference to detect at 80% power (metric units: 0.05 = 5 points)
    target_halfwidth: float = 0.05  # a wanted half-width of a comparison's 95% interval
    # model -> why it cannot run here (registry.availability); only under --skip-unavailable,
    # which skips its cases with that reason (without it such a model stops the run)
    unavailable: Mapping[str, str] = field(default_factory=dict)
    # evaluation name -> its own settings object (what its spec's `configure` built)
    evaluations: Mapping[str, Any] = field(default_factory=dict)
    # how the models are built and asked (fixtures.models)
    dry_run: bool = False  # `--dry-run`: send nothing, store nothing; estimate the requests
    batch: str | None = None  # `--batch` mode (wait, submit, collect); None: synchronous
    batch_poll_s: float = 30.0  # `--batch-poll`: seconds between status reads of a batch
    api_base: str | None = None  # `--api-base`: the endpoint of every API model
    api_timeout_s: float = 60.0  # `--api-timeout`: seconds before an API request times out
    api_retries: int = 5  # `--api-retries`: retries of an API request (429, 5xx, timeouts)
    gpus: str = ""  # `--gpus` as given ("0,1"), read when a local engine is built
    max_batch: int | None = None  # `--max-batch`: a local engine's largest batch
    max_images: int | None = None  # `--max-images`: images per prompt a local engine accepts
    max_tokens: int | None = None  # `--max-tokens`: every request's output tokens at most
    device: str | None = None  # `--device`: torch device of hf: models
    dtype: str | None = None  # `--dtype`: weights' dtype in local engines (None: auto)
    # `--model-arg KEY=VALUE` pairs, in order: keyword arguments of `python:` models' factories
    model_args: tuple[tuple[str, str], ...] = ()
