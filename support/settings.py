"""Run settings: what the command line decided, as one plain object the library can read.

`RunSettings` holds the run-wide fields (samples, seed, compat, dry run, each evaluation's own
settings) and five groups, each filled by the plugin that owns its options (fixtures/): the
models (`run.models.names`), the API (`run.api.timeout_s`), the local engines (`run.local.gpus`),
the statistics (`run.statistics.bootstrap`) and the output (`run.output.results_dir`). Each
field's default here is the option's default: the option declarations and
support.backends.base.BackendOptions read it from these classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

# `--compat`: "writeup" follows the seed write-ups with the original scripts' bugs fixed; "source"
# reproduces what the original scripts compute. Each evaluation reads `run.compat` in `configure`.
Compat = Literal["writeup", "source"]
COMPAT_PROFILES: tuple[Compat, ...] = ("writeup", "source")


@dataclass(frozen=True)
class ModelSettings:
    """The models a run asks and how (`--model`, the thinking axes, `--max-tokens`,
    `--model-arg`, `--skip-unavailable`)."""

    # `--model`, in order, each thinking variant a name of its own (default: the offline
    # reference models)
    names: tuple[str, ...] = ("oracle", "chance")
    # `--reasoning-effort` / `--thinking-budget`: the thinking settings `names` were expanded by
    # (each a variant MODEL+effort-LEVEL / MODEL+budget-N, support/backends/thinking.py)
    reasoning_efforts: tuple[str, ...] = ()
    thinking_budgets: tuple[int, ...] = ()
    max_tokens: int | None = None  # `--max-tokens`: every request's output tokens at most
    # `--model-arg KEY=VALUE` pairs, in order: keyword arguments of `python:` models' factories
    # (a `--model-arg-secret` value [redacted])
    model_args: tuple[tuple[str, str], ...] = ()
    # model -> why it cannot run here (registry.availability); only under --skip-unavailable,
    # which skips its cases with that reason (without it such a model stops the run)
    unavailable: Mapping[str, str] = field(default_factory=dict)
    # the API and local models a thinking axis left as they are, each "model (why)": no thinking
    # control, a local model under --reasoning-effort, a name with its own setting
    thinking_as_is: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApiSettings:
    """How API requests are sent (`--api-base`, `--api-timeout`, `--api-retries`,
    `--concurrency`, `--batch`, `--batch-poll`)."""

    base: str | None = None  # `--api-base URL`: the endpoint of every API model
    # `--api-base PROVIDER=URL`: (provider, endpoint) pairs, each in place of `base` for its
    # provider's models
    bases: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 60.0  # `--api-timeout`: seconds before an API request times out
    retries: int = 5  # `--api-retries`: retries of an API request (429, 5xx, timeouts)
    concurrency: int | str | None = None  # N, "auto" (adaptive) or None: each backend's default
    batch: str | None = None  # `--batch` mode (wait, submit, collect); None: synchronous
    batch_poll_s: float = 30.0  # `--batch-poll`: seconds between status reads of a batch
    # `--server-video`: how an openai-compatible: server is sent a clip: "native" (its
    # `video_url`) or "frames" (timestamped images, for a server that takes no video)
    server_video: str = "native"


@dataclass(frozen=True)
class LocalSettings:
    """How local engines are built (`--gpus`, `--max-batch`, `--max-images`, `--device`,
    `--dtype`)."""

    gpus: str = ""  # `--gpus` as given ("0,1"), read when a local engine is built
    max_batch: int | None = None  # `--max-batch`: a local engine's largest batch
    max_images: int | None = None  # `--max-images`: images per prompt a local engine accepts
    device: str | None = None  # `--device`: torch device of hf: models
    dtype: str | None = None  # `--dtype`: weights' dtype in local engines (None: auto)


@dataclass(frozen=True)
class StatisticsSettings:
    """The intervals and comparisons of the summaries (`--bootstrap`, `--compare`, `--power`)."""

    bootstrap: int = 1000  # bootstrap resamples per interval (0: no intervals)
    # `--compare A,B`: explicit comparisons (two models, or two labels of one field), in order;
    # empty: each evaluation's default contrasts and every pair of models
    compare: tuple[tuple[str, str], ...] = ()
    power: bool = False  # `--power`: print sample sizes for `power_delta` and `target_halfwidth`
    power_delta: float = 0.05  # a difference to detect at 80% power (metric units: 0.05 = 5 points)
    target_halfwidth: float = 0.05  # a wanted half-width of a comparison's 95% interval


@dataclass(frozen=True)
class OutputSettings:
    """Where a run keeps what it writes (`--results-dir`, `--run-id`, `--cache-dir`,
    `--no-cache`, `--override`)."""

    results_dir: Path = Path("results")
    run_id: str = ""
    cache_dir: Path = Path(".vlmbench-cache")
    use_cache: bool = True
    override: bool = False  # re-run cases whose results exist (evaluations that keep them)


@dataclass(frozen=True)
class RunSettings:
    """Options of one run (pytest options map onto these; the library never imports pytest)."""

    models: ModelSettings = field(default_factory=ModelSettings)
    samples: int | None = None  # evenly spaced subset of each evaluation's test set
    seed: int = 0  # seeds `chance`, the bootstrap and what evaluations sample; never the data
    compat: Compat = "writeup"  # which profile: the write-ups' rules or the original scripts'
    dry_run: bool = False  # `--dry-run`: send nothing, store nothing; estimate the requests
    # `--pilot N` (with --dry-run): N real requests per API model in each process, their answers
    # cached, to expect the whole run's cost beside its bound (support/client/dry_run.py)
    pilot: int = 0
    api: ApiSettings = field(default_factory=ApiSettings)
    local: LocalSettings = field(default_factory=LocalSettings)
    statistics: StatisticsSettings = field(default_factory=StatisticsSettings)
    output: OutputSettings = field(default_factory=OutputSettings)
    # evaluation name -> its own settings object (what its spec's `configure` built)
    evaluations: Mapping[str, Any] = field(default_factory=dict)


# manifest.json's `run` section: each setting under the flat name it is recorded by, in that
# order -> where it lives in RunSettings
RECORDED: Mapping[str, str] = MappingProxyType(
    {
        "models": "models.names",
        "reasoning_efforts": "models.reasoning_efforts",
        "thinking_budgets": "models.thinking_budgets",
        "samples": "samples",
        "seed": "seed",
        "cache_dir": "output.cache_dir",
        "use_cache": "output.use_cache",
        "results_dir": "output.results_dir",
        "run_id": "output.run_id",
        "concurrency": "api.concurrency",
        "bootstrap": "statistics.bootstrap",
        "override": "output.override",
        "compat": "compat",
        "compare": "statistics.compare",
        "power": "statistics.power",
        "power_delta": "statistics.power_delta",
        "target_halfwidth": "statistics.target_halfwidth",
        "unavailable": "models.unavailable",
        "evaluations": "evaluations",
        "dry_run": "dry_run",
        "pilot": "pilot",
        "batch": "api.batch",
        "batch_poll_s": "api.batch_poll_s",
        "api_base": "api.base",
        "api_bases": "api.bases",
        "api_timeout_s": "api.timeout_s",
        "api_retries": "api.retries",
        "server_video": "api.server_video",
        "gpus": "local.gpus",
        "max_batch": "local.max_batch",
        "max_images": "local.max_images",
        "max_tokens": "models.max_tokens",
        "device": "local.device",
        "dtype": "local.dtype",
        "model_args": "models.model_args",
        "thinking_as_is": "models.thinking_as_is",
    }
)


def recorded_settings(run: RunSettings) -> dict[str, Any]:
    """Every setting of `run` under its recorded name (RECORDED), in order."""
    out = {}
    for name, path in RECORDED.items():
        value: Any = run
        for attr in path.split("."):
            value = getattr(value, attr)
        out[name] = value
    return out
