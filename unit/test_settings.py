"""RunSettings (support/settings.py): its groups, the names manifest.json records them by, and the
defaults the options take from it."""

from __future__ import annotations

import dataclasses

from support.backends.base import BackendOptions
from support.settings import (
    RECORDED,
    ApiSettings,
    LocalSettings,
    ModelSettings,
    OutputSettings,
    RunSettings,
    StatisticsSettings,
    recorded_settings,
)

# the keys of manifest.json's `run` section, in order (what earlier runs' manifests hold too)
RECORDED_NAMES = [
    "models",
    "reasoning_efforts",
    "thinking_budgets",
    "samples",
    "seed",
    "cache_dir",
    "use_cache",
    "results_dir",
    "run_id",
    "concurrency",
    "bootstrap",
    "override",
    "compat",
    "compare",
    "power",
    "power_delta",
    "target_halfwidth",
    "unavailable",
    "evaluations",
    "dry_run",
    "pilot",
    "batch",
    "batch_poll_s",
    "api_base",
    "api_bases",
    "api_timeout_s",
    "api_retries",
    "server_video",
    "gpus",
    "max_batch",
    "max_images",
    "max_tokens",
    "device",
    "dtype",
    "model_args",
    "thinking_as_is",
]


def test_every_setting_has_one_recorded_name_in_the_manifests_order():
    paths = set()
    for f in dataclasses.fields(RunSettings):
        if dataclasses.is_dataclass(f.default_factory):
            paths |= {f"{f.name}.{g.name}" for g in dataclasses.fields(f.default_factory)}
        else:
            paths.add(f.name)
    assert sorted(RECORDED.values()) == sorted(paths)
    assert list(RECORDED) == RECORDED_NAMES
    found = recorded_settings(RunSettings())
    assert list(found) == RECORDED_NAMES
    assert found["models"] == ("oracle", "chance") and found["api_timeout_s"] == 60.0


def test_no_arguments_give_a_default_run():
    run = RunSettings()
    assert run.models == ModelSettings() and run.models.names == ("oracle", "chance")
    assert (run.api, run.local, run.output) == (ApiSettings(), LocalSettings(), OutputSettings())
    assert run.statistics == StatisticsSettings() and run.statistics.bootstrap == 1000


def test_the_backends_options_default_to_the_runs():
    opts = BackendOptions()
    assert (opts.seed, opts.timeout_s, opts.max_retries) == (0, 60.0, 5)
    assert (opts.timeout_s, opts.max_retries) == (ApiSettings.timeout_s, ApiSettings.retries)


def test_the_options_defaults_are_the_settings(pytester, monkeypatch):
    """A run configured from no option holds each group's defaults (the paths made absolute, a
    new run id)."""
    from fixtures.run_settings import settings

    monkeypatch.delenv("VLMBENCH_CACHE_DIR", raising=False)
    pytester.makeconftest('pytest_plugins = ["fixtures.suite"]')
    run = settings(pytester.parseconfigure("-p", "no:cacheprovider"))
    assert (run.models, run.api, run.local) == (ModelSettings(), ApiSettings(), LocalSettings())
    assert run.statistics == StatisticsSettings()
    assert (run.samples, run.seed, run.compat, run.dry_run) == (None, 0, "writeup", False)
    output = run.output
    assert output.results_dir.name == OutputSettings.results_dir.name == "results"
    assert output.cache_dir.name == OutputSettings.cache_dir.name
    assert (output.use_cache, output.override) == (True, False) and output.run_id
