"""dynamic's tables (support.evaluations.dynamic.summary) on a small hand-made run: summary.csv's
columns, counts and rates per search and category, the gain over random, the headline,
comparisons.csv against scipy's Fisher test and statsmodels' Holm, results.json's stats, the
cumulative errors and report.md. Every expected number is counted by hand in the comments."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from scipy.stats import fisher_exact
from statsmodels.stats.multitest import multipletests

from support.contract.evaluation import SummaryContext
from support.evaluations.dynamic.spec import DynamicSettings
from support.evaluations.dynamic.summary import (
    COLUMNS,
    comparisons,
    cumulative_errors,
    generator_category,
    headline,
    report_text,
    results_json,
    scored,
    summarize,
)
from support.types import Outcome

A, B = "what_attribute", "where_distance_closest"  # AnyPoint's evaluator spellings
DYN = "dynamic-lambda0.2"


def task(model: str, search: str, task_id: int, category: str, status: str) -> Outcome:
    strategy = "random" if search == "random" else "dynamic"
    lam = "" if search == "random" else 0.2
    return Outcome(
        case_id=f"{model}-{search}-t{task_id:03d}",
        evaluation="dynamic",
        model=model,
        status=status,
        group={"search": search, "strategy": strategy, "lambda": lam},
        params={"lambda": None if search == "random" else 0.2},
        extra={
            "task_id": task_id,
            "question": f"q{task_id}?",
            "answer": "a",
            "model_answer": "a" if status == "correct" else "b",
            "utility": None if search == "random" else 0.1 * task_id,
            "category": category,
            "options": ["a", "b", "c", "d"],
            "layout_description": "The lamp is on the table.",
        },
    )


def round_error(model: str, search: str) -> Outcome:
    """A later round's error outcome after a backend failure: no task."""
    return Outcome(
        case_id=f"{model}-{search}-r9",
        evaluation="dynamic",
        model=model,
        status="error",
        group={"search": search, "strategy": "dynamic", "lambda": 0.2},
    )


# model m, dynamic search: tasks 0..5, errors at 1 (wrong), 2 (unparsable), 4 (wrong)
M_DYN = [(0, A, "correct"), (1, A, "wrong"), (2, B, "unparsable"), (3, B, "correct"),
         (4, A, "wrong"), (5, B, "correct")]  # fmt: skip
# model m, random search: two errors, at 2 and 4
M_RANDOM = [(0, A, "correct"), (1, A, "correct"), (2, A, "wrong"), (3, B, "correct"),
            (4, B, "wrong"), (5, B, "correct")]  # fmt: skip
# model n: a dynamic search only, 4 tasks, 4 errors; and random over 3 tasks, 1 error
N_DYN = [(0, A, "wrong"), (1, A, "wrong"), (2, B, "wrong"), (3, B, "wrong")]
N_RANDOM = [(0, A, "correct"), (1, B, "wrong"), (2, B, "correct")]


def run() -> list[Outcome]:
    outs = [task("m", DYN, *t) for t in M_DYN] + [task("m", "random", *t) for t in M_RANDOM]
    outs += [task("n", DYN, *t) for t in N_DYN] + [task("n", "random", *t) for t in N_RANDOM]
    outs.append(round_error("m", DYN))
    return outs[::-1]  # evaluation order must come from task_id, not from the list


# function scope: mutmut maps a test to the code its own setup calls
@pytest.fixture
def summary() -> pd.DataFrame:
    return summarize(run(), SummaryContext.of(n_resamples=10))


def test_columns_and_row_order(summary: pd.DataFrame) -> None:
    assert list(summary.columns) == [
        "model", "search", "strategy", "lambda", "subset", "tasks", "errors", "error_rate",
        "first_error", "errors_vs_random", "n_error",
    ]  # fmt: skip
    assert tuple(summary.columns) == COLUMNS
    keys = list(zip(summary.model, summary.search, summary.subset, strict=True))
    assert keys == [
        ("m", DYN, "all"), ("m", DYN, A), ("m", DYN, B),
        ("m", "random", "all"), ("m", "random", A), ("m", "random", B),
        ("n", DYN, "all"), ("n", DYN, A), ("n", DYN, B),
        ("n", "random", "all"), ("n", "random", A), ("n", "random", B),
    ]  # fmt: skip


def _row(summary: pd.DataFrame, model: str, search: str, subset: str) -> pd.Series:
    hit = summary[
        (summary.model == model) & (summary.search == search) & (summary.subset == subset)
    ]
    assert len(hit) == 1
    return hit.iloc[0]


# (model, search, subset): tasks, errors, first_error, errors_vs_random, n_error
EXPECTED = {
    # m dynamic: 3 errors of 6 (ids 1, 2, 4); random found 2 of 6: gain 3 / 2
    ("m", DYN, "all"): (6, 3, 1, 1.5, 1),
    ("m", DYN, A): (3, 2, 1, 2.0, 0),  # A: ids 0, 1, 4; random's A: 1 error of 3
    ("m", DYN, B): (3, 1, 2, 1.0, 0),  # B: ids 2, 3, 5; 1 error vs random's 1 (id 4)
    ("m", "random", "all"): (6, 2, 2, math.nan, 0),  # random is not compared with itself
    ("m", "random", A): (3, 1, 2, math.nan, 0),
    ("m", "random", B): (3, 1, 4, math.nan, 0),
    # n dynamic: 4 tasks vs random's 3: different budgets, no ratio
    ("n", DYN, "all"): (4, 4, 0, math.nan, 0),
    ("n", DYN, A): (2, 2, 0, math.nan, 0),  # random's A has 1 task
    ("n", DYN, B): (2, 2, 2, 2.0, 0),  # B: 2 tasks each; 2 errors vs random's 1
    ("n", "random", "all"): (3, 1, 1, math.nan, 0),
    ("n", "random", A): (1, 0, None, math.nan, 0),  # no error: no first error
    ("n", "random", B): (2, 1, 1, math.nan, 0),
}


def test_counts_rates_and_gain(summary: pd.DataFrame) -> None:
    assert len(summary) == len(EXPECTED)
    for (model, search, subset), expected in EXPECTED.items():
        tasks, errors, first_error, vs_random, n_error = expected
        row = _row(summary, model, search, subset)
        label = (model, search, subset)
        assert (row.tasks, row.errors, row.n_error) == (tasks, errors, n_error), label
        assert row.error_rate == pytest.approx(errors / tasks), label
        if first_error is None:
            assert row.first_error is None or pd.isna(row.first_error), label
        else:
            assert row.first_error == first_error, label
        assert row.errors_vs_random == pytest.approx(vs_random, nan_ok=True), label
        strategy, lam = ("random", "") if search == "random" else ("dynamic", 0.2)
        assert (row.strategy, row["lambda"]) == (strategy, lam), label


def test_an_outcome_without_groups_and_a_search_of_errors_only() -> None:
    bare = Outcome("x-t0", "dynamic", "x", "wrong", extra={"task_id": 0, "category": A})
    s = summarize([bare, round_error("y", DYN)], SummaryContext.of(n_resamples=10))
    x = _row(s, "x", "", "all")
    assert (x.strategy, x["lambda"], x.tasks, x.errors, x.first_error) == ("", "", 1, 1, 0)
    y = _row(s, "y", DYN, "all")  # a search whose only outcome is a round's error
    assert (y.tasks, y.errors, y.n_error) == (0, 0, 1) and math.isnan(y.error_rate)
    assert pd.isna(y.first_error)
    assert summarize([], SummaryContext.of(n_resamples=10)).empty


def test_headline_is_the_all_rows_without_subset(summary: pd.DataFrame) -> None:
    head = headline(summary)
    assert list(head.columns) == [c for c in COLUMNS if c != "subset"]
    assert list(head.index) == [0, 1, 2, 3]
    assert list(zip(head.model, head.search, head.errors, strict=True)) == [
        ("m", DYN, 3), ("m", "random", 2), ("n", DYN, 4), ("n", "random", 1)
    ]  # fmt: skip


def test_scored_is_the_tasks_in_task_order() -> None:
    outs = run()
    ids = [o.extra["task_id"] for o in scored([o for o in outs if o.model == "m"])]
    assert ids == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]  # the round's error outcome left out
    m_dyn = scored([o for o in outs if o.model == "m" and o.group.get("search") == DYN])
    assert cumulative_errors(m_dyn).tolist() == [0, 1, 2, 2, 3, 3]  # errors at 1, 2, 4


def test_comparisons_against_fisher_and_holm() -> None:
    table, notes = comparisons(run(), [], n_resamples=10, seed=0)
    assert notes == []
    # default contrasts: each dynamic search vs random per model, then the models per search
    labels = list(zip(table.field, table.model, table.a, table.b, strict=True))
    assert labels == [
        ("search", "m", "random", DYN),
        ("search", "n", "random", DYN),
        ("model", "search random", "m", "n"),
        ("model", f"search {DYN}", "m", "n"),
    ]
    # (errors, tasks) of a and b
    counts = [((2, 6), (3, 6)), ((1, 3), (4, 4)), ((2, 6), (1, 3)), ((3, 6), (4, 4))]
    ps = []
    for (_, row), ((ea, na), (eb, nb)) in zip(table.iterrows(), counts, strict=True):
        p = fisher_exact([[ea, na - ea], [eb, nb - eb]]).pvalue
        ps.append(p)
        assert row.p_value == pytest.approx(p)
        assert (row.a_value, row.b_value) == pytest.approx((ea / na, eb / nb))
        assert row["diff"] == pytest.approx(eb / nb - ea / na)
        assert (row.unmatched_a, row.unmatched_b) == (na, nb)
        assert (row.n_pairs, row.n_clusters) == (0, 0)
        assert math.isnan(row.diff_lo) and math.isnan(row.diff_hi) and math.isnan(row.diff_se)
        assert (row.evaluation, row.metric) == ("dynamic", "error_rate")
        assert row.test == "fisher-exact (unpaired)"
    holm = multipletests(ps, method="holm")[1]
    assert table.p_holm.tolist() == pytest.approx(list(holm))


def test_requested_comparisons_and_none() -> None:
    table, notes = comparisons(run(), [("m", "n"), ("m", "zzz")], n_resamples=10, seed=0)
    assert list(zip(table.field, table.model, strict=True)) == [
        ("model", "search random"), ("model", f"search {DYN}")
    ]  # fmt: skip
    assert notes == ["--compare m,zzz: no field of this run has both labels"]
    only_random = [o for o in run() if o.group.get("search") == "random" and o.model == "m"]
    empty, _ = comparisons(only_random, [], n_resamples=10, seed=0)
    assert empty.empty and "p_holm" in empty.columns


def test_results_json_stats() -> None:
    tasks = scored([o for o in run() if o.model == "m" and o.group.get("search") == DYN])
    settings = DynamicSettings(lambdas=(0.2, 1.0))
    doc = results_json(tasks, settings, 0.2)
    assert doc["stats"] == {"total": 6, "errors": 3, "error_rate": 0.5, "error_indices": [1, 2, 4]}
    assert doc["config"]["lambda_explore"] == 0.2
    assert (doc["config"]["budget"], doc["config"]["batch_size"]) == (
        settings.budget,
        settings.batch,
    )
    assert (doc["config"]["pool_size"], doc["config"]["seed"]) == (settings.pool, settings.seed)
    assert [r["is_correct"] for r in doc["results"]] == [True, False, False, True, False, True]
    assert [r["utility"] for r in doc["results"]] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    empty = results_json([], settings, None)
    assert empty["stats"] == {"total": 0, "errors": 0, "error_rate": 0.0, "error_indices": []}
    assert empty["config"]["lambda_explore"] == 0.2  # random: the run's first lambda


def test_report_text_tables(summary: pd.DataFrame) -> None:
    text = report_text(summary, None, "procedural objects")
    assert "## By category" in text and "## Errors found as the search goes" not in text
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| model"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        c for c in COLUMNS if c != "subset"
    ]
    category_header = [line for line in lines if line.startswith("| model")][1]
    assert [c.strip() for c in category_header.strip("|").split("|")] == [
        "model", "search", "category", "tasks", "errors", "error_rate"
    ]  # fmt: skip
    assert "procedural objects" in text
    assert "errors_vs_random is the search's gain over the random baseline" in text
    only_all = summary[summary.subset == "all"]
    assert "## By category" not in report_text(only_all, None)


def test_comparisons_skip_a_missing_search() -> None:
    # model k ran only the random search: its dynamic contrast and its pairs within the dynamic
    # search are skipped, the rest kept (models sorted: k, m, n)
    outs = run() + [task("k", "random", *t) for t in N_RANDOM]
    table, _ = comparisons(outs, [], n_resamples=10, seed=0)
    assert list(zip(table.field, table.model, table.a, table.b, strict=True)) == [
        ("search", "m", "random", DYN),
        ("search", "n", "random", DYN),
        ("model", "search random", "k", "m"),
        ("model", "search random", "k", "n"),
        ("model", "search random", "m", "n"),
        ("model", f"search {DYN}", "m", "n"),
    ]
    requested, notes = comparisons(outs, [("random", DYN)], n_resamples=10, seed=0)
    assert notes == []
    assert list(zip(requested.field, requested.model, strict=True)) == [
        ("search", "m"), ("search", "n")
    ]  # fmt: skip


def test_generator_category_passes_unknown_names_through() -> None:
    # the outcome's own generator spelling wins; a name outside AnyPoint's list is kept as is
    assert (
        generator_category({"category": "custom", "generator_category": "custom_x"}) == "custom_x"
    )
    assert generator_category({"category": "mystery"}) == "mystery"
    assert generator_category({"category": "what_attribute"}) == "what_attribute_"


def test_cumulative_errors_are_whole_counts() -> None:
    tasks = [task("m", DYN, *t) for t in M_DYN]
    found = cumulative_errors(tasks)
    assert found.dtype.kind == "i" and found.tolist() == [0, 1, 2, 2, 3, 3]


def test_report_text_head_blanks_and_plot(summary: pd.DataFrame) -> None:
    text = report_text(summary, Path("cumulative_errors.png"), "procedural objects")
    lines = text.splitlines()
    assert lines[:3] == ["# dynamic: synthetic data", "", "**Data: procedural objects.** These "
                         "numbers check the pipeline; they say nothing about a model on the real "
                         "dataset."]  # fmt: skip
    assert "Errors found per search (tasks answered wrongly or unparsably); " in text
    assert "|\n\n## Errors found as the search goes\n\n![cumulative errors](" in text
    assert "![cumulative errors](cumulative_errors.png)" in text
    assert "png)\n\n## By category\n\n|" in text and text.endswith("|\n")
    assert text.index("| model") < text.index("## Errors found") < text.index("## By category")
    header = next(line for line in lines if line.startswith("| model"))
    names = [c.strip() for c in header.strip("|").split("|")]
    random_m = next(line for line in lines if line.startswith("| m ") and "| random " in line)
    cells = dict(zip(names, (c.strip() for c in random_m.strip("|").split("|")), strict=True))
    assert cells["errors_vs_random"] == "—"  # no ratio: the tables' missing mark, not "nan"
    assert cells["errors"] == "2" and cells["tasks"] == "6"
