"""Pointing loaded in the test process: the evaluation as a run of 2 samples with `chance` opens
it, over the given data and cache folder (`use_cache=False`: as under --no-cache)."""

from __future__ import annotations

from pathlib import Path

from support.evaluations.pointing.spec import PointingSettings
from support.evaluations.pointing.task import PointingEvaluation
from support.settings import ModelSettings, OutputSettings, RunSettings


def load(data: Path, cache: Path, use_cache: bool = True) -> PointingEvaluation:
    run = RunSettings(
        samples=2,
        models=ModelSettings(names=("chance",)),
        output=OutputSettings(cache_dir=cache, use_cache=use_cache),
    )
    return PointingEvaluation.load(run, PointingSettings(cholecseg8k=str(data)))
