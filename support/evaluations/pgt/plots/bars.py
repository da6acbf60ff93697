"""macro_f1_bars.pdf/.png: macro F1 with 95% bootstrap intervals, one panel per dataset, a group
of bars per model (in the order given: the run's `--model` order), a bar per method (its phrase
mode always named, prefill too); above each S2 bar, its difference to CoT (same mode and n)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from support.evaluations.pgt.plots import style as ps
from support.evaluations.pgt.plots.data import latest_runs, method_labels, method_order

HEIGHT = 2.2  # inches, without the legend
LEGEND_ROW = 0.17  # inches per legend row (8 pt text); one more for its title
MAX_MARKED_METHODS = 8  # more bars per group than this: no difference labels (they would overlap)
COMPARED = ("cot", "s2")  # improvement markers: the second phrase's bar minus the first's


def plot_macro_f1_bars(df: pd.DataFrame, out_dir: Path, order: Sequence[str] = ()) -> list[Path]:
    """Write macro_f1_bars.pdf and .png from a load_performance table; [] when it is empty.
    `order`: the models' order (style.model_order)."""
    if df.empty:
        return ps.skip("macro_f1_bars", "no performance results")
    with ps.publication_style():
        return ps.save_figure(macro_f1_figure(df, order), out_dir, "macro_f1_bars")


def macro_f1_figure(df: pd.DataFrame, order: Sequence[str] = ()) -> Figure:
    """The bar chart (ACL full width); the newest run of each method; models in `order` first
    (the run's `--model` order), then as style.model_order."""
    df = latest_runs(df)
    datasets = ps.ordered(df["dataset"], ps.DATASET_NAMES)
    models = ps.model_order(df["model"], order)
    methods = method_order(df)
    styles, labels = ps.method_styles(methods), method_labels(df)
    names = [ps.tex_safe(labels[m]) for m in methods]
    ncols = ps.legend_columns(names, ps.ACL_FULL_WIDTH)
    height = HEIGHT + LEGEND_ROW * (1 + math.ceil(len(methods) / ncols))  # every legend row
    fig = Figure(figsize=(ps.ACL_FULL_WIDTH, height), layout="constrained")
    axes = fig.subplots(1, len(datasets), sharey=True, squeeze=False)[0]
    for ax, dataset in zip(axes, datasets, strict=True):
        _panel(ax, df[df["dataset"] == dataset], models, styles)
        ax.set_title(ps.tex_safe(ps.dataset_name(dataset)))
    axes[0].set_ylabel("Macro F1")
    handles = [Patch(label=name, **styles[m]) for m, name in zip(methods, names, strict=True)]
    fig.legend(
        handles=handles,
        loc="outside upper center",
        ncols=ncols,
        frameon=False,
        title=ps.METHOD_LEGEND_TITLE,
    )
    return fig


def _panel(ax: Axes, panel: pd.DataFrame, models: list[str], styles: dict[str, dict]) -> None:
    methods = list(styles)
    x = np.arange(len(models), dtype=float)
    width = min(ps.BAR_WIDTH, 0.8 / len(methods))
    tops = {}  # method -> (bar x positions, top of bar or whisker, value): for the markers
    for k, method in enumerate(methods):
        rows = panel[panel["method"] == method].set_index("model").reindex(models)
        pos = x + (k - (len(methods) - 1) / 2) * width
        value = rows["macro_f1"].to_numpy(dtype=float)
        ax.bar(pos, np.nan_to_num(value), width, **styles[method])
        lo = rows["macro_f1_lo"].to_numpy(dtype=float)
        hi = rows["macro_f1_hi"].to_numpy(dtype=float)
        ok = np.isfinite(value) & np.isfinite(lo) & np.isfinite(hi)
        if ok.any():
            err = [np.clip(value - lo, 0, None)[ok], np.clip(hi - value, 0, None)[ok]]
            ax.errorbar(
                pos[ok],
                value[ok],
                yerr=err,
                fmt="none",
                ecolor="black",
                elinewidth=0.6,
                capsize=1.5,
                capthick=0.6,
            )
        tops[method] = (pos, np.fmax(value, np.where(ok, hi, np.nan)), value)
    if len(methods) <= MAX_MARKED_METHODS:
        _improvement_markers(ax, tops)
    ax.set_xticks(x, [ps.tex_safe(ps.model_name(m)) for m in models])
    ax.set_ylim(0, 1.2)
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.grid(axis="y", alpha=ps.GRID_ALPHA, color=ps.GRID_COLOR, linestyle=ps.GRID_LINESTYLE)
    ax.set_axisbelow(True)


def _improvement_markers(ax: Axes, tops: dict) -> None:
    """Above each S2 bar with a CoT bar of the same mode and n: the macro-F1 difference S2 - CoT."""
    base, other = COMPARED
    for method in tops:
        if method != base and not method.startswith(base + "/"):
            continue
        partner = other + method[len(base) :]
        if partner not in tops:
            continue
        pos, top, value = tops[partner]
        delta = value - tops[method][2]
        for p, t, d in zip(pos, top, delta, strict=True):
            if np.isfinite(d):
                ax.annotate(
                    f"{d:+.2f}",
                    (p, t),
                    xytext=(0, 1.5),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    rotation=90,
                    fontsize=ps.ANNOTATION_FONT_SIZE,
                )
