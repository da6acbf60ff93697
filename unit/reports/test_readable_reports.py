"""Readable pictures and tables (issue 39, item 6): models in the run's `--model` order, legends
outside the data, whole-number axes for counts, one missing-value mark ("—") in every table, and
surgvqa's metrics plot. Figures are inspected as matplotlib objects; the pgt figures are tested
in test_pgt_plots.py."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from support.contract.evaluation import SummaryContext
from support.reporting.kit import integer_axis, legend_outside
from support.reporting.tables import MISSING, in_model_order, markdown_table, model_order
from support.settings import ModelSettings
from support.types import Outcome
from unit.evaluations.dynamic.test_dynamic_summary import M_DYN, N_RANDOM, task
from unit.evaluations.pointing.test_pointing_summary import writeup_outcomes
from unit.evaluations.surgvqa.test_surgvqa_summary import tool_outcomes, vqa, vqa_outcomes


def legends_clear_of_axes(fig: Figure) -> list:
    """The figure's legends, each checked to overlap no axes (drawn first, so the boxes are the
    rendered ones); an axes-level legend (drawn inside its axes) fails."""
    fig.draw_without_rendering()  # the layout is run (a bare Figure's canvas draws nothing)
    assert all(ax.get_legend() is None for ax in fig.axes), "a legend inside the axes"
    for legend in fig.legends:
        box = legend.get_window_extent()
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent()), (legend, ax)
    return fig.legends


def whole(values: np.ndarray) -> bool:
    return bool(np.all(np.asarray(values) == np.round(values)))


# ---- the kit ---------------------------------------------------------------------------------
def test_model_order_is_the_runs_then_by_name() -> None:
    assert model_order(["chance", "zz", "oracle", "aa", "oracle"], ("oracle", "chance")) == [
        "oracle",
        "chance",
        "aa",
        "zz",
    ]
    assert model_order(["b", "a"]) == ["a", "b"]  # no order given: by name
    assert model_order(["a"], ("gone", "a", "a")) == ["a"]  # absent and repeated names


def test_in_model_order_moves_rows_not_their_order_within_a_model() -> None:
    df = pd.DataFrame({"model": ["a", "b", "a", "c"], "k": [1, 2, 3, 4]})
    shown = in_model_order(df, ("c", "a"))
    assert list(shown["model"]) == ["c", "a", "a", "b"] and list(shown["k"]) == [4, 1, 3, 2]
    assert in_model_order(df.iloc[0:0], ("c",)).empty
    assert in_model_order(df.drop(columns="model"), ("c",)).equals(df.drop(columns="model"))


def test_markdown_table_marks_every_undefined_value_the_same() -> None:
    df = pd.DataFrame(
        {"model": ["a", None], "f1": [0.5, math.nan], "n": [3, 4], "when": [pd.NA, "x"]}
    )
    text = markdown_table(df)
    assert "nan" not in text.lower() and "None" not in text and "<NA>" not in text
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()[2:]]
    assert rows == [["a", "0.5", "3", MISSING], [MISSING, MISSING, "4", "x"]]


def test_integer_axis_and_legend_outside() -> None:
    fig = Figure(layout="constrained")
    ax = fig.subplots()
    (line,) = ax.plot([1, 2, 3], [0, 1, 1], label="s")
    integer_axis(ax.xaxis)
    assert isinstance(ax.xaxis.get_major_locator(), MaxNLocator)
    legend_outside(fig, [line], title="search")
    fig.draw_without_rendering()  # the layout is run (a bare Figure's canvas draws nothing)
    assert whole(ax.get_xticks()) and not whole(ax.get_yticks())  # only the axis asked for
    (legend,) = legends_clear_of_axes(fig)
    assert legend.get_window_extent().y0 >= ax.get_window_extent().y1  # above the axes


# ---- each evaluation's figure ----------------------------------------------------------------
def test_dynamic_panels_in_run_order_whole_counts_and_the_legend_outside() -> None:
    from support.evaluations.dynamic.summary import cumulative_errors_figure

    outs = [task("m", "dynamic-lambda0.2", *t) for t in M_DYN]
    outs += [task("n", "random", *t) for t in N_RANDOM]  # 3 tasks, 1 error: 1.5 would be a tick
    fig = cumulative_errors_figure(outs, models=("n", "m"))
    try:
        assert [ax.get_title() for ax in fig.axes] == ["n", "m"]
        (legend,) = legends_clear_of_axes(fig)
        assert [t.get_text() for t in legend.get_texts()] == ["dynamic-lambda0.2", "random"]
        for ax in fig.axes:
            assert whole(ax.get_xticks()) and whole(ax.get_yticks()), ax.get_title()
            assert isinstance(ax.xaxis.get_major_locator(), MaxNLocator)
    finally:
        plt.close(fig)
    assert cumulative_errors_figure([]) is None


def test_pointing_panels_in_run_order_and_the_legend_outside() -> None:
    from support.evaluations.pointing.summary import f1_by_organ_figure, summarize

    summary = summarize(writeup_outcomes(), SummaryContext.of(n_resamples=0))
    fig = f1_by_organ_figure(summary, models=("m", "a"))
    try:
        assert [ax.get_title().split(":")[0] for ax in fig.axes] == ["m", "a"]
        (legend,) = legends_clear_of_axes(fig)
        assert legend.get_title().get_text() == "condition"
    finally:
        plt.close(fig)


def test_nyu_panels_in_run_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from support.evaluations.nyu_distance import summary as nyu

    kept: list[Figure] = []
    real = nyu.save_figure
    monkeypatch.setattr(
        nyu, "save_figure", lambda fig, path, dpi=110: kept.append(fig) or real(fig, path, dpi)
    )
    outs = [
        Outcome(
            case_id=f"img0-pair{k}-{model}",
            evaluation="nyu_distance",
            model=model,
            status="correct",
            cluster="img0",
            params={"gt_distance": 2.0},
            scores={"gt": 2.0, "pred": 2.0 + k / 10, "abs_error": k / 10},
        )
        for model in ("b-model", "a-model")
        for k in range(3)
    ]
    summary = nyu.summarize(outs, SummaryContext.of(n_resamples=0))
    nyu.plot_predictions(outs, summary, tmp_path / "p.png", models=("b-model", "a-model"))
    (fig,) = kept
    assert [ax.get_title().split("\n")[0] for ax in fig.axes] == ["b-model", "a-model"]
    text = nyu.report_text(summary, outs, models=("b-model", "a-model"))
    overall = text[text.index("## Overall") : text.index("## By true distance")]
    assert overall.index("| b-model") < overall.index("| a-model")


def test_surgvqa_plot_shows_each_metric_with_its_interval() -> None:
    from support.evaluations.surgvqa import summary as s

    outs = vqa_outcomes("m") + tool_outcomes("m") + [vqa(7, 0.4, None, model="vqa-only")]
    summary = s.summarize(outs, SummaryContext.of(n_resamples=40))
    fig = s.metrics_figure(summary, models=("vqa-only", "m"))
    try:
        (ax,) = fig.axes
        assert [t.get_text() for t in ax.get_xticklabels()] == [
            s.METRIC_LABELS[m] for m in s.HEADLINE
        ]
        (legend,) = legends_clear_of_axes(fig)
        names = [t.get_text().split(" (")[0] for t in legend.get_texts()]
        assert names == ["vqa-only", "m"]  # the run's order
        head = s.headline(summary).set_index("model")
        k = len(s.HEADLINE)
        heights = [p.get_height() for p in ax.patches]
        for i, model in enumerate(names):
            expected = np.nan_to_num([head.loc[model, m] for m in s.HEADLINE])
            np.testing.assert_allclose(heights[i * k : (i + 1) * k], expected)
        # m's intervals are drawn as whiskers from lo to hi
        tops = sorted(
            round(float(seg[1][1]), 6)
            for c in ax.containers
            if hasattr(c, "lines") and c.lines[2]
            for seg in c.lines[2][0].get_segments()
        )
        his = [head.loc[mm, f"{m}_hi"] for mm in names for m in s.HEADLINE]
        assert tops == sorted(round(float(h), 6) for h in his if np.isfinite(h))
        # the VQA-only model (one open question) has no yes/no or detection metric: each is
        # marked, not a bar of 0 read as a score; every defined value is printed on its bar
        shown = [t.get_text() for t in ax.texts]
        assert shown[:k] == ["0.40", MISSING, MISSING, MISSING, MISSING]
        assert shown[k:] == [f"{head.loc['m', m]:.2f}" for m in s.HEADLINE]
    finally:
        plt.close(fig)
    errors = [vqa(0, 0.0, None, model="x", error=True)]
    assert s.metrics_figure(s.summarize(errors, SummaryContext.of(n_resamples=0))) is None


def test_surgvqa_writes_its_plot_and_report_in_run_order(tmp_path: Path) -> None:
    from dataclasses import replace

    from support.evaluations.surgvqa import summary as s

    outs = vqa_outcomes("m") + tool_outcomes("m") + vqa_outcomes("a") + tool_outcomes("a")
    ctx = SummaryContext.of(n_resamples=0)
    ctx = replace(ctx, run=replace(ctx.run, models=ModelSettings(names=("m", "a"))))
    written = s.write_outputs(outs, s.summarize(outs, ctx), tmp_path, ctx)
    assert written[0] == tmp_path / "metrics_by_model.png" and written[0].stat().st_size > 0
    report = ctx.report.text()
    headline = report[report.index("## Headline") : report.index("## By category")]
    assert headline.index("| m ") < headline.index("| a ")  # summary.csv has a first
    assert "![metrics per model](metrics_by_model.png)" in report
    assert "nan" not in report


def test_pointing_report_has_one_missing_mark_and_the_run_order() -> None:
    from support.evaluations.pointing.summary import report_text, summarize

    summary = summarize(writeup_outcomes(), SummaryContext.of(n_resamples=0))
    text = report_text(summary, models=("m", "a"))
    assert "nan" not in text
    per_organ = text[text.index("## Per organ") :]
    assert MISSING in per_organ  # a's Liver precision etc. are undefined
    assert per_organ.index("| m ") < per_organ.index("| a ")
    best = text[text.index("## Best and worst") : text.index("## Per organ")]
    assert best.index("**m / zero_shot**") < best.index("**a / zero_shot**")


def test_the_stock_summary_lists_models_in_the_run_order() -> None:
    from dataclasses import replace

    from support.contract.binary_summary import BINARY

    outs = [
        Outcome(case_id=f"c{k}-{m}", evaluation="e", model=m, status="correct", cluster=f"c{k}")
        for m in ("alpha", "zeta")
        for k in range(2)
    ]
    ctx = SummaryContext.of(n_resamples=0)
    ctx = replace(ctx, run=replace(ctx.run, models=ModelSettings(names=("zeta", "alpha"))))
    BINARY.write_outputs(outs, BINARY.summarize(outs, ctx), Path("."), ctx)
    text = ctx.report.text()
    assert text.index("| zeta") < text.index("| alpha")
