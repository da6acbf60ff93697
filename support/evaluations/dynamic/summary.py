"""The dynamic evaluation's summary and files (controller side).

Per model and search (`dynamic-lambda0.2`, `random`), over the tasks evaluated:

    tasks             tasks with a verdict (backend errors end a search: its later rounds are
                      error outcomes, counted in `n_error`, never tasks)
    errors            tasks answered wrongly or unparsably (AnyPoint counts both as errors)
    error_rate        errors / tasks
    first_error       evaluation order (task_id) of the first error; empty when none
    errors_vs_random  errors / the random search's errors for the same model over the same
                      number of tasks (the search's gain; empty without a random search)
    subset            "all", or one category (AnyPoint's names, e.g. where_distance_closest)

No intervals: a search's tasks are chosen from earlier verdicts, so they are not a sample a
bootstrap over tasks could resample; the spread that matters is over seeds (`--dynamic-seed`,
benchmarks/test_dynamic_search.py).

Files, AnyPoint's formats exactly (dynamic_evaluation/evaluator.py `_save`, `_save_hard_data`),
under `<model>/<search>/`: results.json (config, stats, results rows), and when there are errors
hard_data/tasks.jsonl, hard_data/tasks_info.json and hard_data/pcd/NNNNNN.npy (the scene of
hard task NNNNNN = results' error_indices[NNNNNN]). Plus report.md and cumulative_errors.png.

Where AnyPoint's writers disagree with its readers or its own documentation, the files take the
form its readers accept and its generator writes:
- `config.lambda_explore` is always a number: AnyPoint's `UtilityCalculator` multiplies by it
  (dynamic_evaluation/utility.py:59; `None` raises TypeError), and its random baseline records
  the comparison run's `--lambda-explore` (scripts/eval/compare_eval_strategies.py, `main`'s
  `common_cfg` into `EvalConfig`, saved by `_save_results` as `cfg.to_dict()`). The random search
  here records the run's first `--dynamic-lambda` (it does not use it).
- hard_data/tasks.jsonl's `category` is spelled as the generator's tasks.jsonl spells it,
  `f"{generator_type}_{distance_type or ''}"` (point_qa_generator/generator.py:249; so
  `what_attribute_`), the "standard generator format" hard_data promises (dynamic_evaluation/
  evaluator.py:233, README.md:167-169 of that folder). results.json keeps the evaluator's own
  spelling without the trailing `_` (evaluator.py:187, 282-291).
- hard_data/pcd/*.npy are float64 (N, 6), the generator's dtype (scenes.assemble).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from support.contract.summary import SummaryContext
from support.evaluations.dynamic.assets import Asset
from support.evaluations.dynamic.questions import CATEGORIES, evaluator_category
from support.evaluations.dynamic.scenes import build_scene
from support.evaluations.dynamic.spec import DynamicSettings
from support.reporting.kit import integer_axis, legend_outside, save_figure
from support.reporting.tables import in_model_order, markdown_table, model_order, report_head
from support.storage.files import atomic_write, atomic_write_text, file_name
from support.types import Outcome

KEYS = ("model", "search", "strategy", "lambda", "subset")
COLUMNS = (*KEYS, "tasks", "errors", "error_rate", "first_error", "errors_vs_random", "n_error")
KEY_METRICS = ("error_rate",)  # the terminal's brief table (reports/terminal.py)
SCORES = {"correct": "flag", "error": "flag"}  # each row's scores (support.storage.run_folder)
NUM_OPTIONS = 4  # tasks_info.json's task_plan.num_options (AnyPoint writes the constant 4)
# the evaluator's category (no trailing "_") -> the generator's (generator.py:249)
GENERATOR_CATEGORY = {evaluator_category(c): c for c in CATEGORIES}


def scored(outcomes: list[Outcome]) -> list[Outcome]:
    """The outcomes with a task (not a round's error outcome), in evaluation order."""
    return sorted((o for o in outcomes if "task_id" in o.extra), key=lambda o: o.extra["task_id"])


def _searches(outcomes: list[Outcome]) -> dict[tuple[str, str], list[Outcome]]:
    """(model, search) -> its outcomes."""
    found: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        found[(o.model, o.group.get("search", ""))].append(o)
    return found


def _row(model: str, search: str, first: Outcome, subset: str, tasks: list[Outcome]) -> dict:
    errors = [o for o in tasks if o.status != "correct"]
    return {
        "model": model,
        "search": search,
        "strategy": first.group.get("strategy", ""),
        "lambda": first.group.get("lambda", ""),
        "subset": subset,
        "tasks": len(tasks),
        "errors": len(errors),
        "error_rate": len(errors) / len(tasks) if tasks else np.nan,
        "first_error": errors[0].extra["task_id"] if errors else None,
    }


def summarize(outcomes: list[Outcome], ctx: SummaryContext) -> pd.DataFrame:
    """summary.csv: one row per model, search and subset (module docstring); no intervals."""
    rows = []
    for (model, search), outs in sorted(_searches(outcomes).items()):
        tasks = scored(outs)
        n_error = sum(o.status == "error" for o in outs)
        row = _row(model, search, outs[0], "all", tasks)
        rows.append({**row, "n_error": n_error})
        by_category: dict[str, list[Outcome]] = defaultdict(list)
        for o in tasks:
            by_category[o.extra["category"]].append(o)
        for category, items in sorted(by_category.items()):
            rows.append({**_row(model, search, outs[0], category, items), "n_error": 0})
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for i, row in df.iterrows():
        base = df[(df.model == row.model) & (df.search == "random") & (df.subset == row.subset)]
        if row.search != "random" and len(base) and base.tasks.iloc[0] == row.tasks:
            random_errors = base.errors.iloc[0]
            df.at[i, "errors_vs_random"] = row.errors / random_errors if random_errors else np.nan
    return df


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per model and search (the `all` subset)."""
    main = summary[summary.subset == "all"]
    return main.drop(columns=["subset"]).reset_index(drop=True)


# ---- comparisons ------------------------------------------------------------------------------
def comparisons(
    outcomes: list[Outcome], requested: list[tuple[str, str]], n_resamples: int, seed: int
) -> tuple[pd.DataFrame, list[str]]:
    """comparisons.csv: each dynamic search vs random per model, and models per search, on the
    error rate. Unpaired: a search picks its tasks from its own verdicts, so two searches share
    only the cold start; Fisher's exact test on (errors, correct) of the two, no interval."""
    from scipy.stats import fisher_exact

    from support.statistics.paired import holm_by_family
    from support.statistics.pairing import TABLE_COLUMNS, model_pairs, resolve

    tasks = {key: scored(outs) for key, outs in _searches(outcomes).items()}
    models = sorted({m for m, _ in tasks})
    searches = sorted({s for _, s in tasks}, key=lambda s: (s != "random", s))
    if requested:
        wanted, notes = resolve(requested, {"model": models, "search": searches})
    else:
        wanted = [("search", "random", s) for s in searches if s != "random"]
        wanted += model_pairs(models)
        notes = []
    rows = []
    for field, a, b in wanted:
        for within in searches if field == "model" else models:
            key_a, key_b = (
                ((a, within), (b, within)) if field == "model" else ((within, a), (within, b))
            )
            ta, tb = tasks.get(key_a, []), tasks.get(key_b, [])
            if not ta or not tb:
                continue
            ea = sum(o.status != "correct" for o in ta)
            eb = sum(o.status != "correct" for o in tb)
            p = fisher_exact([[ea, len(ta) - ea], [eb, len(tb) - eb]]).pvalue
            rows.append(
                {
                    "evaluation": "dynamic",
                    "field": field,
                    "model": within if field == "search" else f"search {within}",
                    "metric": "error_rate",
                    "a": a,
                    "b": b,
                    "n_pairs": 0,  # unpaired
                    "n_clusters": 0,
                    "a_value": ea / len(ta),
                    "b_value": eb / len(tb),
                    "diff": eb / len(tb) - ea / len(ta),
                    "diff_lo": np.nan,
                    "diff_hi": np.nan,
                    "p_value": float(p),
                    "test": "fisher-exact (unpaired)",
                    "diff_se": np.nan,
                    "unmatched_a": len(ta),
                    "unmatched_b": len(tb),
                }
            )
    if not rows:
        return pd.DataFrame(columns=list(TABLE_COLUMNS)), notes
    table = holm_by_family(pd.DataFrame(rows), families=["evaluation"])
    return table[list(TABLE_COLUMNS)], notes


# ---- AnyPoint's files -------------------------------------------------------------------------


def results_json(tasks: list[Outcome], settings: DynamicSettings, lam: float | None) -> dict:
    """results.json as AnyPoint's evaluator writes it (`config`, `stats`, `results`). lam None
    (the random search) records the run's first lambda, as AnyPoint's random baseline records
    its run's (module docstring)."""
    lam = settings.lambdas[0] if lam is None else lam
    errors = [o.extra["task_id"] for o in tasks if o.status != "correct"]
    rows = [
        {
            "task_id": o.extra["task_id"],
            "question": o.extra["question"],
            "answer": o.extra["answer"],
            "model_answer": o.extra["model_answer"],
            "is_correct": o.status == "correct",
            "utility": o.extra["utility"],
            "category": o.extra["category"],
            "options": o.extra["options"],
            "layout_description": o.extra["layout_description"],
        }
        for o in tasks
    ]
    return {
        "config": {
            "budget": settings.budget,
            "batch_size": settings.batch,
            "pool_size": settings.pool,
            "lambda_explore": float(lam),
            "seed": settings.seed,
        },
        "stats": {
            "total": len(tasks),
            "errors": len(errors),
            "error_rate": len(errors) / len(tasks) if tasks else 0.0,
            "error_indices": errors,
        },
        "results": rows,
    }


def _json_text(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def generator_category(extra: dict) -> str:
    """A task's category as AnyPoint's generator writes it in tasks.jsonl (`what_attribute_`),
    from an outcome's extra (outcomes without `generator_category` map the evaluator's name)."""
    if "generator_category" in extra:
        return extra["generator_category"]
    category = extra["category"]
    return GENERATOR_CATEGORY.get(category, category)


def write_hard_data(
    tasks: list[Outcome], assets: dict[str, Asset], seed: int, folder: Path
) -> list[Path]:
    """hard_data/: each failed task's scene and record, numbered in evaluation order."""
    failed = [o for o in tasks if o.status != "correct"]
    written = []
    lines = []
    for i, o in enumerate(failed):
        x = o.extra
        scene = build_scene(x["layout"], x["assignment"], assets)
        path = folder / "pcd" / f"{i:06d}.npy"
        atomic_write(path, lambda f, scene=scene: np.save(f, scene))
        written.append(path)
        record = {
            "question_id": i,
            "point": path.name,
            "category": generator_category(x),
            "question": x["question"],
            "options": x["options"],
            "answer": x["answer"],
        }
        lines.append(json.dumps(record, ensure_ascii=False))
    tasks_file = folder / "tasks.jsonl"
    atomic_write_text(tasks_file, "".join(line + "\n" for line in lines))
    info = {
        "task_plan": {"generator_type": "mixed", "num_options": NUM_OPTIONS, "seed": seed},
        "generation_stats": {
            "num_tasks_requested": len(failed),
            "num_tasks_generated": len(failed),
            "output_directory": str(folder),
        },
    }
    info_file = folder / "tasks_info.json"
    atomic_write_text(info_file, _json_text(info))
    return [tasks_file, info_file, *written]


def write_outputs(
    outcomes: list[Outcome], summary: pd.DataFrame, out_dir: Path, ctx: SummaryContext
) -> list[Path]:
    """AnyPoint's files per model and search, report.md and the cumulative-errors plot."""
    settings = ctx.settings or DynamicSettings()
    written: list[Path] = []
    assets: dict[str, Asset] | None = None
    for (model, search), outs in sorted(_searches(outcomes).items()):
        tasks = scored(outs)
        if not tasks:
            continue
        lam = outs[0].params.get("lambda")
        folder = out_dir / file_name(model) / file_name(search)
        path = folder / "results.json"
        atomic_write_text(path, _json_text(results_json(tasks, settings, lam)))
        written.append(path)
        if any(o.status != "correct" for o in tasks):
            assets = assets if assets is not None else ctx.open_data()
            written += write_hard_data(tasks, assets, settings.seed, folder / "hard_data")
    plot = plot_cumulative_errors(outcomes, out_dir / "cumulative_errors.png", ctx.run.models.names)
    ctx.report.add(report_text(summary, plot, ctx.data_label, ctx.run.models.names))
    return [*written, *([plot] if plot else [])]


# ---- report and plot ------------------------------------------------------------------------
def cumulative_errors(tasks: list[Outcome]) -> np.ndarray:
    """(n,) errors found after each task evaluated, in evaluation order."""
    return np.cumsum([o.status != "correct" for o in tasks]).astype(int)


def plot_cumulative_errors(
    outcomes: list[Outcome], path: Path, models: Sequence[str] = ()
) -> Path | None:
    """cumulative_errors.png (cumulative_errors_figure); None (no file) without a task."""
    fig = cumulative_errors_figure(outcomes, models)
    return None if fig is None else save_figure(fig, path, dpi=110)


def cumulative_errors_figure(outcomes: list[Outcome], models: Sequence[str] = ()) -> Any:
    """One panel per model (in `models` order: the run's `--model` order): cumulative errors
    found vs tasks evaluated, a line per search (a color each, the same in every panel; the
    legend above the panels), whole-number axes (counts). None without a task."""
    by_model: dict[str, dict[str, list[Outcome]]] = defaultdict(dict)
    for (model, search), outs in sorted(_searches(outcomes).items()):
        tasks = scored(outs)
        if tasks:
            by_model[model][search] = tasks
    if not by_model:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = model_order(by_model, models)
    searches = sorted({s for found in by_model.values() for s in found}, key=_search_rank)
    colors = {s: f"C{i}" for i, s in enumerate(searches)}
    fig, axes = plt.subplots(
        1,
        len(order),
        figsize=(4.5 * len(order), 3.9),  # inches; 0.3 of the height: the legend's row
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    handles = {}
    for ax, model in zip(axes[0], order, strict=True):
        for search, tasks in sorted(by_model[model].items(), key=lambda kv: _search_rank(kv[0])):
            found = cumulative_errors(tasks)
            style = "--" if search == "random" else "-"
            (line,) = ax.step(
                np.arange(1, len(found) + 1),
                found,
                style,
                where="post",
                label=search,
                color=colors[search],
            )
            handles.setdefault(search, line)
        ax.set_title(model, fontsize=9)
        ax.set_xlabel("tasks evaluated")
        integer_axis(ax.xaxis)  # counts: no "2.5 tasks"
        integer_axis(ax.yaxis)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("errors found")
    legend_outside(fig, [handles[s] for s in searches], title="search", fontsize=8)
    return fig


def _search_rank(search: str) -> tuple[bool, str]:
    """The dynamic searches by name, then the random baseline."""
    return (search == "random", search)


def report_text(
    summary: pd.DataFrame, plot: Path | None, data: str | None = None, models: Sequence[str] = ()
) -> str:
    """report.md: what the data is, the searches per model, then the errors found per
    category; models in `models` order (the run's `--model` order), the others after."""
    main = in_model_order(headline(summary), models)
    by_category = summary[summary.subset != "all"][
        ["model", "search", "subset", "tasks", "errors", "error_rate"]
    ].rename(columns={"subset": "category"})
    by_category = in_model_order(by_category, models)
    parts = [
        "\n".join(report_head("dynamic", data)),
        "Errors found per search (tasks answered wrongly or unparsably); errors_vs_random is "
        "the search's gain over the random baseline at the same budget.\n",
        markdown_table(main),
    ]
    if plot is not None:
        parts += ["\n## Errors found as the search goes\n", f"![cumulative errors]({plot.name})"]
    if len(by_category):
        parts += ["\n## By category\n", markdown_table(by_category)]
    return "\n".join(parts) + "\n"
