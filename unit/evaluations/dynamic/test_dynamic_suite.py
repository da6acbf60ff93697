"""`pytest evals/dynamic` end to end, through pytester subprocess runs of the real suite: budget
accounting in AnyPoint's results.json, the hard_data mapping checked against scenes rebuilt from
the seed alone, byte-identical files from the same seed, resuming a cut-off search from the
response cache, and option errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support.evaluations.dynamic.assets import read_assets
from support.evaluations.dynamic.scenes import assemble
from support.evaluations.dynamic.search import Search, SearchConfig

pytestmark = pytest.mark.slow  # every test here runs the suite in a subprocess

PLANTED = "planted:where_distance=0.9,*=0.05"
SMALL = ("--dynamic-budget=12", "--dynamic-batch=5", "--dynamic-pool=40")  # rounds of 5, 5, 2
B, K = 12, 5


@pytest.fixture
def run(run_suite):
    """run(*args, run_id=..., cache=...) -> (RunResult, results folder of the dynamic run)."""

    def _run(*args: str, run_id: str = "r1", cache: str = "cache"):
        result, results = run_suite("dynamic", *SMALL, *args, run_id=run_id, cache=cache)
        return result, results / "dynamic" / run_id

    return _run


def raw_rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "raw_results.jsonl").read_text().splitlines()]


def test_search_files_budget_and_hard_data(run, tmp_path):
    html = tmp_path / "report.html"
    result, out = run(
        f"--model={PLANTED},oracle",
        "--dynamic-lambda=0,1",
        f"--html={html}",
        "--self-contained-html",
        "--min-metric",
        f"dynamic.errors@{PLANTED}=1",  # a gate naming a model whose name holds "="
    )
    assert result.ret == 0, result.stdout.str()
    page = html.read_text()
    assert "random-round02-oracle" in page and "data:image/jpeg;base64" in page
    # 3 searches (dynamic lambda 0 and 1, random) x 3 rounds x 2 models
    result.assert_outcomes(passed=18)
    planted_dir = out / "planted_where_distance_0.9_0.05"
    assets = read_assets(tmp_path / "cache" / "synthetic" / "dynamic-assets-seed0-v1")
    raw = raw_rows(out)
    for search, lam in (("dynamic-lambda0", 0.0), ("dynamic-lambda1", 1.0), ("random", None)):
        doc = json.loads((planted_dir / search / "results.json").read_text())
        assert doc["config"] == {
            "budget": B,
            "batch_size": K,
            "pool_size": 40,
            "lambda_explore": 0.0 if lam is None else lam,  # random: the first lambda
            "seed": 42,
        }
        rows = doc["results"]
        assert [r["task_id"] for r in rows] == list(range(B))  # exactly B, in evaluation order
        assert all(r["utility"] is None for r in rows[:K])  # the cold start
        later = [r["utility"] for r in rows[K:]]
        assert (
            all(u is None for u in later)
            if lam is None
            else all(isinstance(u, float) for u in later)
        )
        failed = [r["task_id"] for r in rows if not r["is_correct"]]
        assert doc["stats"] == {
            "total": B,
            "errors": len(failed),
            "error_rate": len(failed) / B,
            "error_indices": failed,
        }
        if not failed:
            assert not (planted_dir / search / "hard_data").exists()
            continue
        hard = planted_dir / search / "hard_data"
        records = [json.loads(x) for x in (hard / "tasks.jsonl").read_text().splitlines()]
        assert [r["question_id"] for r in records] == list(range(len(failed)))
        # the scene of each hard task, rebuilt from the seed alone: the task's round pool
        config = SearchConfig(budget=B, batch=K, pool=40, seed=42)
        pools = Search(config, assets, embedder=None)
        by_id = {
            r["extra"]["task_id"]: r["extra"]
            for r in raw
            if r["model"] == PLANTED and r["group"]["search"] == search
        }
        for k, record in enumerate(records):
            row = rows[doc["stats"]["error_indices"][k]]
            for field in ("question", "options", "answer"):
                assert record[field] == row[field], field
            assert record["point"] == f"{k:06d}.npy"
            extra = by_id[row["task_id"]]
            assert record["category"] == extra["generator_category"]  # what_attribute_
            assert record["category"].rstrip("_") == row["category"]
            task = {t.key: t for t in pools.candidates(extra["round"])}[extra["task_key"]]
            scene = assemble(task.layout, {n: assets[i] for n, i in task.assignment.items()})
            saved = np.load(hard / "pcd" / record["point"])
            assert saved.dtype == np.float64 and saved.shape[1] == 6
            np.testing.assert_array_equal(saved, scene)
        info = json.loads((hard / "tasks_info.json").read_text())
        assert info["task_plan"] == {"generator_type": "mixed", "num_options": 4, "seed": 42}
        assert info["generation_stats"]["num_tasks_generated"] == len(failed)
    # the oracle fails nothing; the planted model's errors are where it was told to fail
    s = pd.read_csv(out / "summary.csv")
    allrows = s[s.subset == "all"].set_index(["model", "search"])
    assert (allrows.loc["oracle"]["errors"] == 0).all()
    planted = allrows.loc[PLANTED]
    assert planted.loc["dynamic-lambda0", "errors"] >= 1
    cats = s[(s.model == PLANTED) & (s.subset != "all") & (s.errors > 0)]
    assert cats.errors.sum() == planted.errors.sum()
    assert (out / "cumulative_errors.png").stat().st_size > 1000
    assert "## By category" in (out / "report.md").read_text()


def test_same_seed_same_files_and_a_cut_search_resumes_from_the_cache(run):
    # a search cut off after its second round (the first run selects only rounds 0 and 1) ...
    first, _ = run(f"--model={PLANTED}", "-k", "round00 or round01", run_id="cut", cache="c1")
    assert first.ret == 0, first.stdout.str()
    # ... then run whole with the same cache: rounds 0 and 1 come from the cache
    resumed, out = run(f"--model={PLANTED}", run_id="resumed", cache="c1")
    assert resumed.ret == 0, resumed.stdout.str()
    calls = pd.read_csv(out / "calls.csv").set_index("case_id")
    rows = raw_rows(out)
    early = {r["extra"]["task_key"] for r in rows if r["extra"]["round"] < 2}
    late = {r["extra"]["task_key"] for r in rows if r["extra"]["round"] >= 2}
    sent = 0
    for row in rows:
        call = calls.loc[row["case_id"]]
        if row["extra"]["round"] < 2:  # every early answer from the cache
            assert (call["cache_hits"], call["backend_calls"]) == (1, 0)
        else:  # a later task is asked once: the two searches may both pick it
            assert call["cache_hits"] + call["backend_calls"] == 1
            sent += call["backend_calls"]
    assert sent == len(late - early)  # only tasks never asked before went out
    # a fresh run with another cache writes the same bytes
    fresh, again = run(f"--model={PLANTED}", run_id="fresh", cache="c2")
    assert fresh.ret == 0, fresh.stdout.str()
    model = "planted_where_distance_0.9_0.05"
    paths = [Path(model, search, "results.json") for search in ("dynamic-lambda0.2", "random")]
    for path in [*paths, Path("raw_results.jsonl"), Path("summary.csv"), Path("comparisons.csv")]:
        assert (out / path).read_bytes() == (again / path).read_bytes(), path


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--dynamic-lambda=0.2,x", "'x' is not a number"),
        ("--dynamic-strategy=greedy", "'greedy': one of dynamic, random"),
        ("--dynamic-pool=3", "3 candidates cannot fill a batch of 5"),
        ("--dynamic-categories=where_colour", "unknown ['where_colour']"),
        ("--model=planted:where=2", "where=2"),
    ],
)
def test_bad_options_are_usage_errors(run, option, message):
    result, _ = run(option)
    assert result.ret == 4, result.stdout.str()
    assert message in result.stdout.str() + result.stderr.str()
