"""Every registered evaluation's intervals and raw rows, from real outcomes (issue 35).

Each evaluation of the registry is loaded on its synthetic data and its cases (the quick
subset, thinned, where there are more than MAX_CASES) run in process through
`support.contract.runner.run_case` for two models that answer right, at random, garbage or not at
all, by a deterministic draw per request: the statuses vary and the intervals have width. Then:

- summary.csv and the headline: every interval column (`m`, `m_lo`, `m_hi`) is ordered,
  lo <= m <= hi, and every metric's interval is wide (lo < hi) on some row, so a bound taken
  from the wrong side cannot hide behind a degenerate [x, x];
- raw_results.jsonl: each row holds every field of its schema (docs/reports.md, "The run
  folder") and none of those that differ between runs.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support import evaluations
from support.backends.base import Backend, BackendError
from support.backends.planted import stable_uniform
from support.backends.reference import ChanceBackend, OracleBackend
from support.contract.evaluation import SummaryContext
from support.settings import ModelSettings, OutputSettings, RunSettings, StatisticsSettings
from support.storage.files import write_jsonl
from support.types import OPTIONAL_FIELDS, OUTCOME_FIELDS, Outcome, Request, Response
from unit.contract.test_summary_matrix import run_cases  # the same in-process runner
from unit.helpers.suite_runs import cache_with_shared_data

MODELS = ("m-a", "m-b")
RESAMPLES = 100  # bootstrap resamples a summary draws
MAX_CASES = 80  # cases run at most (pointing: 60 of its 180 quick ones; pgt: its 66 quick ones)
# each evaluation's option values (dest -> value): small, fast configurations
VALUES: dict[str, dict[str, object]] = {
    "dynamic": {"dynamic_budget": 4, "dynamic_batch": 2, "dynamic_pool": 6},
}
# evaluations whose summary has no intervals, and where that is said
NO_INTERVALS = {"dynamic": "support/evaluations/dynamic/summary.py, its docstring: No intervals"}

# raw_results.jsonl's row. docs/reports.md ("The run folder", raw_results.jsonl) names the case and
# model ids, the case's parameters, prompt hash, raw response, parsed answer, ground truth,
# status and tokens; the rest of an Outcome (support/types.py) rides along
RAW_FIELDS = frozenset(
    {
        "case_id", "model", "params", "prompt_hash", "raw", "prediction", "target", "status",
        "usage",  # tokens
        "evaluation", "group", "cluster", "scores", "rendered_prompt", "error", "extra",
        "read_by",
    }
)  # fmt: skip
# kept out: what differs between two runs of the same inputs (docs/reports.md: calls.csv holds them)
# and how an answer was obtained (ARCHITECTURE.md, batches: raw_results.jsonl stays a
# synchronous run's)
NOT_RAW = frozenset({"latency_s", "backend_calls", "cache_hits", "cached", "batch_usage"})
# in the row only when not empty (a model's thinking, a cut answer's finish reasons, what was
# adapted of its requests): a run without them writes what it always wrote
WHEN_SET = frozenset(OPTIONAL_FIELDS)
GARBAGE = "Sorry, I can't help with that."


class MixedBackend(Backend):
    """Answers by a draw u in [0, 1) from (its name, the request's digest): u < 0.4 the oracle's
    answer, < 0.8 one drawn from the request's answer space, < 0.9 text no parser reads, else a
    BackendError (an API call failing after retries). The same request draws the same anywhere."""

    reads_hints = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.identity = {"provider": "test", "model": name}
        self.right = OracleBackend(name)
        self.chance = ChanceBackend(name)

    async def generate(self, request: Request) -> Response:
        u = stable_uniform(self.name, request.digest(with_hints=True))
        if u < 0.4:
            return await self.right.generate(request)
        if u < 0.8:
            return await self.chance.generate(request)
        if u < 0.9:
            return Response(texts=(GARBAGE,) * request.n, model=self.name)
        raise BackendError(f"{self.name}: HTTP 500 after retries")


@pytest.fixture(scope="module")
def base(
    tmp_path_factory: pytest.TempPathFactory, shared_cache: Path, synthetic_cholecseg8k: Path
) -> Path:
    """A cache folder whose synthetic/ is the session's shared one (built once per run; the
    largest, pointing's CholecSeg8k, by the session's fixture)."""
    root = tmp_path_factory.mktemp("registry")
    cache_with_shared_data(root, shared_cache)
    return root


@pytest.fixture(scope="module")
def outcomes(base: Path) -> Callable[[str], tuple[RunSettings, list[Outcome]]]:
    """outcomes(name) -> (the run's settings, both models' outcomes), computed once a module."""
    found: dict[str, tuple[RunSettings, list[Outcome]]] = {}

    def get(name: str) -> tuple[RunSettings, list[Outcome]]:
        if name not in found:
            run = RunSettings(
                seed=0,
                models=ModelSettings(names=MODELS),
                output=OutputSettings(
                    cache_dir=base / "cache", results_dir=base / "results", run_id="r"
                ),
                statistics=StatisticsSettings(bootstrap=RESAMPLES),
            )
            spec = evaluations.spec(name)
            settings = spec.configure(VALUES.get(name, {}), run)
            run = replace(run, evaluations={name: settings})
            ev = spec.evaluation_class().load(run, settings)
            cases = list(ev.cases())
            if len(cases) > MAX_CASES:  # the quick subset, evenly thinned to MAX_CASES at most
                quick = [c for c in cases if ev.is_quick(c)]
                cases = quick[:: math.ceil(len(quick) / MAX_CASES)]
            outs = [o for m in MODELS for o in run_cases(ev, cases, MixedBackend(m))]
            found[name] = (run, sorted(outs, key=lambda o: (o.model, o.case_id)))
        return found[name]

    return get


def interval_metrics(table: pd.DataFrame) -> list[str]:
    """The metrics with an interval (`m`, `m_lo`, `m_hi` all columns); no `_lo` or `_hi` alone."""
    columns = set(table.columns)
    lows = [c.removesuffix("_lo") for c in table.columns if c.endswith("_lo")]
    highs = {c.removesuffix("_hi") for c in columns if c.endswith("_hi")}
    assert set(lows) == highs, (sorted(lows), sorted(highs))
    assert all(m in columns for m in lows), lows
    return lows


def bounds(table: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, m, hi) of `metric` as float arrays (NaN where empty)."""
    return tuple(  # type: ignore[return-value]
        pd.to_numeric(table[c], errors="coerce").to_numpy(dtype=float)
        for c in (f"{metric}_lo", metric, f"{metric}_hi")
    )


@pytest.mark.parametrize("name", evaluations.names())
def test_every_summary_interval_is_ordered_and_not_degenerate(outcomes, name: str) -> None:
    run, outs = outcomes(name)
    assert len({o.status for o in outs}) >= 2, name  # answers that vary
    module = evaluations.spec(name).summary_module()
    summary = module.summarize(outs, SummaryContext(run, run.evaluations[name]))
    metrics = interval_metrics(summary)
    if name in NO_INTERVALS:
        assert not metrics, (name, NO_INTERVALS[name])
        return
    assert metrics, f"{name}: no interval columns in summary.csv"
    for table, where in ((summary, "summary"), (module.headline(summary), "headline")):
        for metric in interval_metrics(table):
            lo, m, hi = bounds(table, metric)
            label = f"{name} {where} {metric}"
            assert (np.isnan(lo) == np.isnan(hi)).all(), label  # both bounds or neither
            has = np.isfinite(lo)
            assert (lo[has] <= hi[has]).all(), (label, lo[has], hi[has])
            known = has & np.isfinite(m)
            assert ((lo[known] <= m[known]) & (m[known] <= hi[known])).all(), (
                label,
                table.loc[known & ~((lo <= m) & (m <= hi))],
            )
            if where == "summary":  # data that varies gives a wide interval somewhere
                assert (lo[has] < hi[has]).any(), f"{label}: every interval is degenerate"


@pytest.mark.parametrize("name", evaluations.names())
def test_raw_rows_hold_every_schema_field(outcomes, tmp_path: Path, name: str) -> None:
    every = {f.name for f in OUTCOME_FIELDS}
    # each field placed once
    assert every == RAW_FIELDS | NOT_RAW | WHEN_SET and not RAW_FIELDS & NOT_RAW
    _, outs = outcomes(name)
    path = write_jsonl(outs, tmp_path / "raw_results.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert rows and len(rows) == len(outs)
    for row, o in zip(rows, outs, strict=True):
        set_here = {f for f in WHEN_SET if getattr(o, f)}
        assert set(row) == RAW_FIELDS | set_here, (o.case_id, sorted(RAW_FIELDS ^ set(row)))
        expected = {k: v for k, v in o.to_json().items() if k in RAW_FIELDS | set_here}
        assert json.dumps(row, sort_keys=True) == json.dumps(expected, sort_keys=True)
        if o.backend_calls:  # the sha256 of the case's first request
            assert re.fullmatch(r"[0-9a-f]{64}", row["prompt_hash"]), (o.case_id, row)
