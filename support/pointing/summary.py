"""Pointing metrics, summary table, report.md and the per-organ F1 plot (controller side).

Per organ and overall (`ALL`), per condition and model: accuracy, precision, recall, F1 of presence;
pointing accuracy = hits / cases present and predicted present; point hit rate = hits / cases
present. Unparsable answers count as wrong presence predictions (a false negative when the organ is
present, a false positive when absent); backend errors are excluded and counted in `n_error`.
Intervals: 95% cluster bootstrap over videos (frames of one video are correlated).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from support.metrics import binary_metrics, safe_ratio, summarize_groups
from support.pointing.classes import CLASS_NAMES, ORGAN_IDS
from support.pointing.prompts import CONDITIONS
from support.settings import RunSettings
from support.types import Outcome

METRICS = (
    "accuracy",
    "precision",
    "recall",
    "f1",
    "pointing_accuracy",
    "point_hit_rate",
    "unparsable_rate",
)
ALL = "ALL"
COUNT_FIELDS = ("tp", "fp", "fn", "tn", "hits", "unparsable")


def case_counts(o: Outcome) -> list[int]:
    """One case as additive counts in COUNT_FIELDS order."""
    y_true, y_pred, hit = o.scores["y_true"], o.scores["y_pred"], o.scores.get("hit")
    unparsable = int(y_pred is None)
    if y_pred is None:  # scored as the wrong answer
        y_pred = 1 - y_true
    return [
        int(y_true == 1 and y_pred == 1),
        int(y_true == 0 and y_pred == 1),
        int(y_true == 1 and y_pred == 0),
        int(y_true == 0 and y_pred == 0),
        int(bool(hit)),
        unparsable,
    ]


def reduce_counts(s: np.ndarray) -> dict[str, np.ndarray]:
    """(..., 6) summed counts -> metrics (vectorised over leading axes, for the bootstrap)."""
    tp, fp, fn, tn, hits, unp = (s[..., i] for i in range(len(COUNT_FIELDS)))
    out = binary_metrics(tp, fp, fn, tn)
    out["pointing_accuracy"] = safe_ratio(hits, tp)
    out["point_hit_rate"] = safe_ratio(hits, tp + fn)
    out["unparsable_rate"] = safe_ratio(unp, tp + fp + fn + tn)
    return out


def summarize(outcomes: list[Outcome], n_resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    """A row per (model, condition, organ) plus an `ALL` organ row; `m`, `m_lo`, `m_hi` columns."""

    def keys(o: Outcome) -> list[tuple[str, str, str]]:
        model, condition = o.model, o.group["condition"]
        return [(model, condition, o.group["organ"]), (model, condition, ALL)]

    groups = summarize_groups(outcomes, keys, case_counts, reduce_counts, n_resamples, seed)
    organ_rank = {CLASS_NAMES[i]: k for k, i in enumerate(ORGAN_IDS)}
    rows = [g.row(["model", "condition", "organ"], METRICS) for g in groups]
    rows.sort(
        key=lambda r: (r["model"], _condition_rank(r["condition"]), r["organ"] == ALL,
                       organ_rank.get(r["organ"], len(organ_rank)), r["organ"])
    )  # fmt: skip
    columns = ["model", "condition", "organ", "n", "n_error"]
    for m in METRICS:
        columns += [m, f"{m}_lo", f"{m}_hi"]
    return pd.DataFrame(rows, columns=columns)


def _condition_rank(condition: str) -> tuple[int, str]:
    """Source order of the conditions; unknown ones after, by name."""
    return (
        (CONDITIONS.index(condition), "")
        if condition in CONDITIONS
        else (len(CONDITIONS), condition)
    )


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """The overall rows: one per (model, condition)."""
    cols = ["model", "condition", "n", "n_error"]
    for m in ("accuracy", "precision", "recall", "f1", "pointing_accuracy", "point_hit_rate"):
        cols += [m, f"{m}_lo", f"{m}_hi"]
    return summary[summary["organ"] == ALL][cols].reset_index(drop=True)


def write_report(summary: pd.DataFrame, path: Path) -> Path:
    """report.md: overall, per organ, best and worst organs, conditions compared."""
    from support.outputs import atomic_write_text, markdown_table, with_intervals

    lines = ["# Pointing evaluation (CholecSeg8k)", ""]
    lines += [
        "Presence metrics treat unparsable answers as wrong; pointing accuracy is the share of "
        "cases with the organ present and predicted present whose point (mapped back from the "
        "768x768 canvas to image pixels) falls inside the organ mask; point hit rate divides the "
        "same hits by all present cases. Brackets: 95% bootstrap intervals, resampling videos.",
        "",
        "## Overall",
        "",
        markdown_table(with_intervals(headline(summary), METRICS)),
        "",
        "## Conditions compared (overall F1 and pointing accuracy)",
        "",
    ]
    overall = summary[summary["organ"] == ALL]
    for metric in ("f1", "pointing_accuracy"):
        pivot = overall.pivot(index="model", columns="condition", values=metric)
        pivot = pivot[sorted(pivot.columns, key=_condition_rank)]
        if "zero_shot" in pivot:
            for c in pivot.columns:
                if c != "zero_shot":
                    pivot[f"{c} - zero_shot"] = pivot[c] - pivot["zero_shot"]
        lines += [f"### {metric}", "", pivot.reset_index().round(3).to_markdown(index=False), ""]
    organs = summary[summary["organ"] != ALL]
    lines += ["## Best and worst organs by F1", ""]
    for (model, condition), g in organs.groupby(["model", "condition"], sort=True):
        ranked = g.dropna(subset=["f1"]).sort_values(["f1", "organ"], ascending=[False, True])
        best = ", ".join(f"{r.organ} ({r.f1:.3f})" for r in ranked.head(3).itertuples())
        worst = ", ".join(f"{r.organ} ({r.f1:.3f})" for r in ranked.tail(3)[::-1].itertuples())
        lines.append(f"- **{model} / {condition}**: best {best}; worst {worst}")
    lines += ["", "## Per organ", ""]
    per_organ = organs[["model", "condition", "organ", "n", *METRICS[:5]]]
    lines += [per_organ.round(3).to_markdown(index=False), ""]
    atomic_write_text(path, "\n".join(lines))
    return path


def plot_f1_by_organ(summary: pd.DataFrame, out_dir: Path) -> Path:
    """f1_by_organ.png: per-organ F1 bars per condition (one panel per model), 95% CI whiskers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    organs = summary[summary["organ"] != ALL]
    models = sorted(organs["model"].unique())
    conditions = sorted(organs["condition"].unique(), key=_condition_rank)
    names = [CLASS_NAMES[i] for i in ORGAN_IDS if CLASS_NAMES[i] in set(organs["organ"])]
    fig, axes = plt.subplots(
        len(models), 1, figsize=(11, 3.2 * max(1, len(models))), squeeze=False, sharex=True
    )
    width = 0.8 / max(1, len(conditions))
    x = np.arange(len(names))
    for ax, model in zip(axes[:, 0], models, strict=True):
        for k, condition in enumerate(conditions):
            g = organs[(organs["model"] == model) & (organs["condition"] == condition)]
            g = g.set_index("organ").reindex(names)
            lo = (g["f1"] - g["f1_lo"]).clip(lower=0).fillna(0)
            hi = (g["f1_hi"] - g["f1"]).clip(lower=0).fillna(0)
            ax.bar(
                x + (k - (len(conditions) - 1) / 2) * width,
                g["f1"].fillna(0),
                width,
                yerr=[lo, hi],
                capsize=2,
                label=condition,
            )
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("F1")
        ax.set_title(f"{model}: presence F1 by organ (95% bootstrap CI)")
        ax.grid(axis="y", alpha=0.3)
    axes[-1, 0].set_xticks(x, names, rotation=35, ha="right")
    axes[0, 0].legend(fontsize=8, ncols=len(conditions))
    fig.tight_layout()
    path = out_dir / "f1_by_organ.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_outputs(
    outcomes: list[Outcome], summary: pd.DataFrame, out_dir: Path, run: RunSettings
) -> list[Path]:
    """report.md and the per-organ F1 plot in the run folder."""
    return [write_report(summary, out_dir / "report.md"), plot_f1_by_organ(summary, out_dir)]
