"""The dynamic evaluation's files read back with AnyPoint's own field rules (issue 26, item 2).

AnyPoint (github.com/shijian2001/AnyPoint, commit 2650ead; the random baseline from the later
scripts/eval/compare_eval_strategies.py) reads and writes these files as follows; the checks
below restate its rules, they do not use its code:

results.json (dynamic_evaluation/evaluator.py:208-223, `_save`)
- three keys: `config`, `stats`, `results`.
- `config` is `EvalConfig.to_dict()` (config.py:7-25): budget, batch_size, pool_size (ints),
  lambda_explore (a float), seed (an int); `EvalConfig(**config)` rebuilds it, and the evaluator
  hands `lambda_explore` to `UtilityCalculator` (evaluator.py:49), which multiplies by it
  (utility.py:59): null there is a TypeError. The random baseline records its run's
  `--lambda-explore` like any other strategy (compare_eval_strategies.py `main`, `common_cfg`).
- `stats`: total, errors (ints), error_rate (a float), error_indices (the task_ids of the wrong
  answers, in order) (evaluator.py:212-217).
- each `results` row is `TaskResult.to_dict()` (config.py:28-42): exactly task_id (int), question,
  answer, model_answer (str), is_correct (bool), utility (float or null), category (str or null),
  options (list of str or null), layout_description (str or null); `TaskResult(**row)` rebuilds it,
  so a missing or extra key fails.
- a row's category is the evaluator's: generator type, then `_` and the distance type only when
  there is one (evaluator.py:282-291): `what_attribute`, `where_distance_closest`.

hard_data/ (evaluator.py:232-280, `_save_hard_data`, "standard generator format" :233)
- tasks.jsonl: one JSON object a line with exactly question_id (k, from 0), point
  (f"{k:06d}.npy"), category, question, options, answer (the generator's record,
  point_qa_generator/generator.py:246-253); question_id k is results' error_indices[k].
- category as the generator spells it: f"{generator_type}_{distance_type or ''}"
  (generator.py:249), so `what_attribute_`; distance generators take closest or farthest
  (distance.py:17-20), the others no distance type.
- tasks_info.json: task_plan {generator_type "mixed", num_options 4, seed}, generation_stats
  {num_tasks_requested, num_tasks_generated, output_directory} (evaluator.py:263-274).
- pcd/NNNNNN.npy: read by `np.load` without pickles (point_qa_generator/metadata.py:89); the
  scene as the generator builds it, (N, 6) float64 (base.py:91-154: float64 sizes and positions
  promote the coordinates, and the stack promotes the colours).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from support.evaluations.dynamic.questions import CATEGORIES, evaluator_category
from support.evaluations.dynamic.spec import DynamicSettings
from support.evaluations.dynamic.summary import generator_category, results_json
from support.types import Outcome

CONFIG_KEYS = {"budget": int, "batch_size": int, "pool_size": int, "seed": int}
STATS_KEYS = {"total", "errors", "error_rate", "error_indices"}
ROW_KEYS = {  # TaskResult's fields: name -> allowed types (None: null allowed)
    "task_id": (int,),
    "question": (str,),
    "answer": (str,),
    "model_answer": (str,),
    "is_correct": (bool,),
    "utility": (float, type(None)),
    "category": (str, type(None)),
    "options": (list, type(None)),
    "layout_description": (str, type(None)),
}
HARD_KEYS = ["question_id", "point", "category", "question", "options", "answer"]
# AnyPoint's 15 generator types (point_qa_generator/generator.py's registry)
GENERATOR_TYPES = (
    "what_distance",
    "where_distance",
    "list_attribute_distance",
    "count_attribute_distance",
    "what_attribute",
    "list_attribute",
    "count_attribute",
    "count_object",
    "frequent_object",
    "list_attribute_frequent",
    "count_attribute_frequent",
    "what_size",
    "list_attribute_size",
    "count_attribute_size",
    "where_size",
)


def generator_spellings() -> set[str]:
    """Every category the generator can write in tasks.jsonl (generator.py:249)."""
    out = set()
    for gtype in GENERATOR_TYPES:
        kinds = ("closest", "farthest") if gtype.endswith("_distance") else ("",)
        out |= {f"{gtype}_{kind}" for kind in kinds}
    return out


def evaluator_spelling(gtype_category: str) -> str:
    """evaluator.py:291: the distance type appended only when there is one."""
    return gtype_category[:-1] if gtype_category.endswith("_") else gtype_category


def check_results(doc: dict) -> None:
    """AnyPoint's rules for results.json (module docstring); AssertionError naming the field."""
    assert set(doc) == {"config", "stats", "results"}, sorted(doc)
    config = doc["config"]
    assert set(config) == {*CONFIG_KEYS, "lambda_explore"}, sorted(config)
    for key, kind in CONFIG_KEYS.items():
        assert type(config[key]) is kind, (key, config[key])
    lam = config["lambda_explore"]
    assert isinstance(lam, float), f"config.lambda_explore: {lam!r} is not a number"
    # UtilityCalculator.compute: exploit - lambda * explore, over (n,) arrays
    assert np.isfinite(np.zeros(3) - lam * np.ones(3)).all()
    stats = doc["stats"]
    assert set(stats) == STATS_KEYS, sorted(stats)
    rows = doc["results"]
    for row in rows:
        assert set(row) == set(ROW_KEYS), sorted(set(row) ^ set(ROW_KEYS))
        for key, kinds in ROW_KEYS.items():
            assert type(row[key]) in kinds, (row["task_id"], key, row[key])
        assert all(isinstance(o, str) for o in row["options"] or [])
        assert row["category"] in {evaluator_spelling(c) for c in generator_spellings()}
    wrong = [r["task_id"] for r in rows if not r["is_correct"]]
    assert stats["error_indices"] == wrong
    assert stats["total"] == len(rows) and stats["errors"] == len(wrong)
    assert isinstance(stats["error_rate"], float)


def check_hard_data(folder: Path, doc: dict) -> int:
    """AnyPoint's rules for hard_data/ (module docstring); the number of hard tasks read."""
    lines = (folder / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    rows = {r["task_id"]: r for r in doc["results"]}
    assert len(records) == len(doc["stats"]["error_indices"])
    for k, record in enumerate(records):
        assert list(record) == HARD_KEYS, list(record)
        assert record["question_id"] == k and record["point"] == f"{k:06d}.npy"
        assert record["category"] in generator_spellings(), record["category"]
        row = rows[doc["stats"]["error_indices"][k]]
        assert evaluator_spelling(record["category"]) == row["category"]
        for key in ("question", "options", "answer"):
            assert record[key] == row[key], key
        cloud = np.load(folder / "pcd" / record["point"], allow_pickle=False)
        assert cloud.dtype == np.float64, (record["point"], cloud.dtype)
        assert cloud.ndim == 2 and cloud.shape[1] == 6 and np.isfinite(cloud).all()
    info = json.loads((folder / "tasks_info.json").read_text(encoding="utf-8"))
    assert info["task_plan"] == {
        "generator_type": "mixed",
        "num_options": 4,
        "seed": doc["config"]["seed"],
    }
    assert set(info["generation_stats"]) == {
        "num_tasks_requested",
        "num_tasks_generated",
        "output_directory",
    }
    assert info["generation_stats"]["num_tasks_generated"] == len(records)
    return len(records)


@pytest.mark.slow
def test_a_dynamic_run_reads_back_with_anypoints_rules(run_suite):
    """A real run (a model failing about half of every category, two lambdas and random):
    every results.json and hard_data folder passes AnyPoint's rules."""
    result, results = run_suite(
        "dynamic",
        "--model=planted:*=0.5",
        "--dynamic-budget=12",
        "--dynamic-batch=6",
        "--dynamic-pool=40",
        "--dynamic-lambda=0.5,0",
    )
    assert result.ret == 0, result.stdout.str()
    model_dir = results / "dynamic" / "r1" / "planted_0.5"
    searched = {}
    hard = 0
    for search in ("dynamic-lambda0.5", "dynamic-lambda0", "random"):
        doc = json.loads((model_dir / search / "results.json").read_text())
        check_results(doc)
        searched[search] = doc["config"]["lambda_explore"]
        assert doc["stats"]["errors"] > 0, search
        hard += check_hard_data(model_dir / search / "hard_data", doc)
    # the random search records the run's first lambda, as AnyPoint's random baseline does
    assert searched == {"dynamic-lambda0.5": 0.5, "dynamic-lambda0": 0.0, "random": 0.5}
    assert hard > 3


def _outcome(task_id: int, category: str, correct: bool, **extra: object) -> Outcome:
    return Outcome(
        case_id=f"c-t{task_id:03d}",
        evaluation="dynamic",
        model="m",
        status="correct" if correct else "wrong",
        extra={
            "task_id": task_id,
            "question": "q?",
            "answer": "a",
            "model_answer": "a" if correct else "b",
            "utility": None,
            "category": category,
            "options": ["a", "b", "c", "d"],
            "layout_description": "The lamp is on the table.",
            **extra,
        },
    )


def test_random_baseline_records_a_number_for_lambda():
    settings = DynamicSettings(lambdas=(0.3, 1.0))
    doc = results_json([_outcome(0, "what_attribute", False)], settings, None)
    assert doc["config"]["lambda_explore"] == 0.3
    check_results(doc)
    assert results_json([], DynamicSettings(), 1)["config"]["lambda_explore"] == 1.0


@pytest.mark.parametrize("category", CATEGORIES)
def test_generator_spelling_of_every_category(category):
    """From the outcome's own field, and mapped back from the evaluator's name when an older
    outcome lacks it."""
    short = evaluator_category(category)
    assert generator_category({"category": short, "generator_category": category}) == category
    assert generator_category({"category": short}) == category
    assert category in generator_spellings()


def test_every_generator_spelling_is_a_category():
    """All fifteen generator types, each distance one twice: nineteen categories."""
    assert set(CATEGORIES) == generator_spellings() and len(CATEGORIES) == 19
