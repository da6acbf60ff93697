"""recall_radar.pdf/.png: recall per generator, one polar panel per dataset, one translucent polygon
per model.

Method drawn: the one given, else for each model the method with the best mean macro F1 over the
datasets (ties: the first in method order), named in the legend. Axes: the generators ("real" first,
then the AI generators by name) with a finite recall for every model drawn in that panel; a panel
with fewer than 3 such generators, too few for a polygon, becomes a grouped bar chart instead.
Datasets without per-generator recall are left out (logged).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from support.evaluations.pgt.plots import style as ps
from support.evaluations.pgt.plots.data import (
    latest_runs,
    method_labels,
    method_order,
    recall_table,
)

HEIGHT = 2.5  # inches
REAL = "real"
MIN_AXES = 3  # a polygon needs three vertices
FILL_ALPHA = 0.15


def plot_recall_radar(
    df: pd.DataFrame,
    out_dir: Path,
    models: Sequence[str] | None = None,
    method: str | None = None,
    order: Sequence[str] = (),
) -> list[Path]:
    """Write recall_radar.pdf and .png; [] (with the reason logged) when nothing can be drawn.
    `order`: the models' order (style.model_order)."""
    try:
        with ps.publication_style():
            fig = recall_radar_figure(df, models, method, order)
            return ps.save_figure(fig, out_dir, "recall_radar")
    except ps.NotEnoughData as e:
        return ps.skip("recall_radar", str(e))


def recall_radar_figure(
    df: pd.DataFrame,
    models: Sequence[str] | None = None,
    method: str | None = None,
    order: Sequence[str] = (),
) -> Figure:
    """The radar figure (ACL full width); NotEnoughData when no panel can be drawn. Models (and
    their colors) in `order` first (the run's `--model` order), then as style.model_order."""
    chosen = chosen_rows(df, models, method)
    drawn = ps.model_order(chosen["model"], order)
    panels = panel_tables(chosen, drawn)
    if not panels:
        raise ps.NotEnoughData("no per-generator recall in the selected results")
    labels = method_labels(chosen)
    names = {r.model: f"{ps.model_name(r.model)}: {labels[r.method]}" for r in chosen.itertuples()}
    colors = ps.model_colors(drawn)
    fig = Figure(figsize=(ps.ACL_FULL_WIDTH, HEIGHT), layout="constrained")
    for i, (dataset, table) in enumerate(panels.items()):
        polar = len(table) >= MIN_AXES
        ax = fig.add_subplot(1, len(panels), i + 1, projection="polar" if polar else None)
        (_radar if polar else _bars)(ax, table, colors)
        ax.set_title(ps.tex_safe(ps.dataset_name(dataset)), pad=10 if polar else 4)
    handles = [Line2D([], [], color=colors[m], lw=1.5, label=ps.tex_safe(names[m])) for m in colors]
    ncols = ps.legend_columns([h.get_label() for h in handles], ps.ACL_FULL_WIDTH)
    fig.legend(handles=handles, loc="outside lower center", ncols=ncols, frameon=False)
    return fig


def panel_tables(chosen: pd.DataFrame, drawn: list[str]) -> dict[str, pd.DataFrame]:
    """Per dataset, recall as generators x models (columns in `drawn` order): the generators with
    a finite recall for every model of the panel, "real" first, then by name."""
    recall = recall_table(chosen)
    panels = {}
    for dataset in ps.ordered(chosen["dataset"], ps.DATASET_NAMES):
        rows = recall[recall["dataset"] == dataset]
        table = rows.pivot(index="generator", columns="model", values="recall")
        table = table.reindex(columns=[m for m in drawn if m in table]).dropna()
        if table.empty:
            ps.log.info("recall_radar: %s has no per-generator recall; left out", dataset)
            continue
        panels[dataset] = table.loc[sorted(table.index, key=lambda g: (g != REAL, g))]
    return panels


def chosen_rows(
    df: pd.DataFrame, models: Sequence[str] | None = None, method: str | None = None
) -> pd.DataFrame:
    """The rows drawn: one per (dataset, model), of `method` or of each model's best method."""
    df = latest_runs(df)
    if models:
        missing = sorted(set(models) - set(df["model"]))
        if missing:
            ps.log.warning("recall_radar: no results for models %s", ", ".join(missing))
        df = df[df["model"].isin(models)]
    if method is not None:
        df = df[df["method"] == method]
    elif not df.empty:
        rank = {m: i for i, m in enumerate(method_order(df))}
        mean = df.groupby(["model", "method"], sort=False)["macro_f1"].mean().reset_index()
        mean["rank"] = mean["method"].map(rank)
        mean = mean.sort_values(["model", "macro_f1", "rank"], ascending=[True, False, True])
        best = mean.drop_duplicates("model")
        df = df.merge(best[["model", "method"]], on=["model", "method"])
    if df.empty:
        asked = [f"method {method!r}"] if method else []
        asked += [f"models {', '.join(models)}"] if models else []
        raise ps.NotEnoughData("no results" + (" for " + " and ".join(asked) if asked else ""))
    return latest_runs(df)


def _radar(ax: Axes, table: pd.DataFrame, colors: dict[str, str]) -> None:
    ax.set_theta_offset(np.pi / 2)  # first generator ("real") on top, the others clockwise
    ax.set_theta_direction(-1)
    angles = np.linspace(0, 2 * np.pi, len(table), endpoint=False)
    closed = np.append(angles, angles[0])
    for model in table.columns:
        r = table[model].to_numpy(dtype=float)
        r = np.append(r, r[0])
        ax.plot(closed, r, color=colors[model], linewidth=1)
        ax.fill(closed, r, color=colors[model], alpha=FILL_ALPHA)
    ax.set_xticks(angles, [ps.tex_safe(g) for g in table.index])
    ax.tick_params(axis="x", labelsize=ps.ANNOTATION_FONT_SIZE, pad=-2)
    for label, angle in zip(ax.get_xticklabels(), angles, strict=True):
        side = np.sin(angle)  # > 0: right half of the circle (clockwise from the top)
        label.set_horizontalalignment(
            "left" if side > 0.1 else "right" if side < -0.1 else "center"
        )
    ax.set_ylim(0, 1)
    ax.set_yticks([0.25, 0.5, 0.75, 1.0], ["", "0.5", "", "1"])
    ax.tick_params(axis="y", labelsize=ps.ANNOTATION_FONT_SIZE)
    ax.grid(alpha=ps.GRID_ALPHA, color=ps.GRID_COLOR, linestyle=ps.GRID_LINESTYLE)


def _bars(ax: Axes, table: pd.DataFrame, colors: dict[str, str]) -> None:
    """Fallback for fewer than 3 generators: grouped bars, a group per generator."""
    x = np.arange(len(table), dtype=float)
    width = min(ps.BAR_WIDTH, 0.8 / len(table.columns))
    for k, model in enumerate(table.columns):
        pos = x + (k - (len(table.columns) - 1) / 2) * width
        ax.bar(
            pos,
            table[model],
            width,
            color=colors[model],
            alpha=ps.BAR_ALPHA,
            edgecolor="black",
            linewidth=ps.BAR_EDGE_WIDTH,
        )
    ax.set_xticks(x, [ps.tex_safe(g) for g in table.index])
    ax.set_ylim(0, 1)
    ax.set_ylabel("Recall")
    ax.grid(axis="y", alpha=ps.GRID_ALPHA, color=ps.GRID_COLOR, linestyle=ps.GRID_LINESTYLE)
    ax.set_axisbelow(True)
