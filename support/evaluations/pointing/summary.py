"""Pointing metrics, summary table, report.md and the per-organ F1 plot (controller side).

Per organ and overall (`ALL`), per condition and model: accuracy, precision, recall, F1 of presence;
pointing accuracy = hits / cases present and predicted present; point hit rate = hits / cases
present. Unparsable answers count as wrong presence predictions (a false negative when the organ is
present, a false positive when absent); backend errors are excluded and counted in `n_error`.
Intervals: 95% cluster bootstrap over videos (frames of one video are correlated).

Under `--compat source` (`SummaryContext.compat`) the original's metrics are added
(eval/pointing_metrics.py:10-125, 170-232): `gated_accuracy` per organ and overall (a case counts
as predicted present only when its point hits; gated accuracy = agreement of that with the truth,
so a false "present" on an absent organ counts as correct there), and on the overall rows the
macro means over organs (organs whose value is undefined left out) `macro_presence_accuracy`,
`macro_hit_rate` (Hit@Point|Present), `macro_gated_accuracy` and `macro_f1`; the overall
`accuracy` is the original's micro presence accuracy. Each run also gets the original's files:
`<condition>/<model>/cholecseg8k_pointing/train_{row:05d}.json` and `metrics_summary_train.json`.
"""

from __future__ import annotations

import json
import warnings
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from support.contract.summary import SummaryContext
from support.evaluations.pointing.classes import CLASS_NAMES, ORGAN_IDS
from support.evaluations.pointing.prompts import CONDITIONS
from support.reporting.kit import (
    interval_columns,
    legend_outside,
    save_figure,
)
from support.reporting.tables import MISSING, model_order
from support.statistics.metrics import binary_metrics, safe_ratio, summarize_groups
from support.statistics.pairing import Comparisons
from support.storage.files import atomic_write_text, file_name
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
KEY_METRICS = ("f1", "pointing_accuracy")  # the terminal's brief table (reports/terminal.py)
SCORES = {"y_true": "flag", "y_pred": "flag", "hit": "flag"}  # support.storage.run_folder
COUNT_FIELDS = ("tp", "fp", "fn", "tn", "hits", "unparsable")
SOURCE_METRICS = ("gated_accuracy",)  # per organ and overall, `--compat source` only
MACRO_METRICS = ("macro_presence_accuracy", "macro_hit_rate", "macro_gated_accuracy", "macro_f1")


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


def presence_correct(o: Outcome) -> int:
    """1 when the presence answer is right (an unparsable answer is wrong)."""
    y_pred = o.scores["y_pred"]
    return int(y_pred is not None and y_pred == o.scores["y_true"])


def pair_key(o: Outcome, field: str) -> str:
    """The same sample and organ: the case id without the model (and the condition)."""
    case = o.item_id
    if field != "condition":
        return case
    return (case + "-").replace(f"-{o.group['condition']}-", "-", 1)


# paired comparisons (support/statistics/pairing.py): few-shot conditions vs zero-shot per model,
# models
COMPARISONS = Comparisons(
    counts=case_counts,
    reduce=reduce_counts,
    metrics=("f1", "accuracy", "pointing_accuracy"),
    tests={"accuracy": "mcnemar-exact"},
    scores=lambda o: {"accuracy": presence_correct(o)},
    fields={"condition": lambda o: o.group["condition"]},
    key=pair_key,
    defaults=lambda labels: [
        ("condition", "zero_shot", c)
        for c in labels.get("condition", [])
        if c != "zero_shot" and "zero_shot" in labels["condition"]
    ],
)


def gated_correct(o: Outcome) -> int:
    """1 when "present and the point hits" agrees with the truth (the original's gated rule)."""
    y_true, y_pred, hit = o.scores["y_true"], o.scores["y_pred"], o.scores.get("hit")
    if y_pred is None:  # unparsable (writeup only): the wrong answer, no point
        y_pred = 1 - y_true
    return int((y_pred == 1 and bool(hit)) == (y_true == 1))


def source_case_counts(o: Outcome) -> list[int]:
    """COUNT_FIELDS plus the gated count."""
    return [*case_counts(o), gated_correct(o)]


def reduce_source_counts(s: np.ndarray) -> dict[str, np.ndarray]:
    out = reduce_counts(s[..., : len(COUNT_FIELDS)])
    out["gated_accuracy"] = safe_ratio(s[..., len(COUNT_FIELDS)], s[..., :4].sum(axis=-1))
    return out


_PER_ORGAN = 6  # tp, fp, fn, tn, hits when present, gated correct


def macro_case_counts(o: Outcome) -> np.ndarray:
    """One case as (12 organs x _PER_ORGAN) additive counts, zero but for its organ's block."""
    tp, fp, fn, tn, hits, _ = case_counts(o)
    out = np.zeros(len(ORGAN_IDS) * _PER_ORGAN)
    j = ORGAN_IDS.index(int(o.params["organ"]))
    out[j * _PER_ORGAN : (j + 1) * _PER_ORGAN] = [tp, fp, fn, tn, hits, gated_correct(o)]
    return out


def reduce_macro(s: np.ndarray) -> dict[str, np.ndarray]:
    """Summed macro counts (..., 72) -> the original's macro means over organs (an organ whose
    value is undefined, e.g. F1 without positives or predictions, is left out; all undefined:
    NaN)."""
    c = s.reshape(*s.shape[:-1], len(ORGAN_IDS), _PER_ORGAN)
    tp, fp, fn, tn, hits, gated = (c[..., k] for k in range(_PER_ORGAN))
    total = tp + fp + fn + tn
    per_organ = {
        "macro_presence_accuracy": safe_ratio(tp + tn, total),
        "macro_hit_rate": safe_ratio(hits, tp + fn),
        "macro_gated_accuracy": safe_ratio(gated, total),
        "macro_f1": safe_ratio(2 * tp, 2 * tp + fp + fn),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # mean of an empty slice: NaN
        return {k: np.nanmean(v, axis=-1) for k, v in per_organ.items()}


def summarize(outcomes: list[Outcome], ctx: SummaryContext) -> pd.DataFrame:
    """A row per (model, condition, organ) plus an `ALL` organ row; `m`, `m_lo`, `m_hi` columns.
    Source runs add `gated_accuracy` and, on the `ALL` rows, the macro metrics."""

    def keys(o: Outcome) -> list[tuple[str, str, str]]:
        model, condition = o.model, o.group["condition"]
        return [(model, condition, o.group["organ"]), (model, condition, ALL)]

    n_resamples, seed = ctx.n_resamples, ctx.seed
    source = ctx.compat == "source"
    metrics = (*METRICS, *SOURCE_METRICS) if source else METRICS
    counts, reduce = (
        (source_case_counts, reduce_source_counts) if source else (case_counts, reduce_counts)
    )
    groups = summarize_groups(outcomes, keys, counts, reduce, n_resamples, seed)
    organ_rank = {CLASS_NAMES[i]: k for k, i in enumerate(ORGAN_IDS)}
    rows = [g.row(["model", "condition", "organ"], metrics) for g in groups]
    if source:
        macro = summarize_groups(
            outcomes,
            lambda o: [(o.model, o.group["condition"])],
            macro_case_counts,
            reduce_macro,
            n_resamples,
            seed,
        )
        by_key = {g.key: g.row(["model", "condition"], MACRO_METRICS) for g in macro}
        for r in rows:
            if r["organ"] == ALL:
                m = by_key.get((r["model"], r["condition"]), {})
                r |= {k: v for k, v in m.items() if k.startswith("macro_")}
    rows.sort(
        key=lambda r: (r["model"], _condition_rank(r["condition"]), r["organ"] == ALL,
                       organ_rank.get(r["organ"], len(organ_rank)), r["organ"])
    )  # fmt: skip
    columns = ["model", "condition", "organ", "n", "n_error"]
    columns += interval_columns((*metrics, *MACRO_METRICS) if source else metrics)
    return pd.DataFrame(rows, columns=columns)


def _condition_rank(condition: str) -> tuple[int, str]:
    """Source order of the conditions; unknown ones after, by name."""
    return (
        (CONDITIONS.index(condition), "")
        if condition in CONDITIONS
        else (len(CONDITIONS), condition)
    )


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """The overall rows: one per (model, condition); source runs add the original's metrics."""
    cols = ["model", "condition", "n", "n_error"]
    extra = (*SOURCE_METRICS, *MACRO_METRICS) if "gated_accuracy" in summary else ()
    cols += interval_columns(
        ("accuracy", "precision", "recall", "f1", "pointing_accuracy", "point_hit_rate", *extra)
    )
    return summary[summary["organ"] == ALL][cols].reset_index(drop=True)


def ranked_organs(f1: dict[str, float], k: int = 3, best: bool = True) -> str:
    """The k best (or worst) organs by F1 as the report prints them: F1 at 3 digits, organs
    whose printed F1 ties named together ("Fat, Liver (0.500, tied)"), so a tie is never
    broken by name; a level that reaches past k is named whole; one level for all: "all N tied"."""
    levels: dict[float, list[str]] = defaultdict(list)
    for organ, value in f1.items():
        if np.isfinite(value):
            levels[round(float(value), 3)].append(organ)
    if not levels:
        return "none scored"
    if len(levels) == 1:
        ((value, organs),) = levels.items()
        return (
            f"all {len(organs)} tied ({value:.3f})"
            if len(organs) > 1
            else f"{organs[0]} ({value:.3f})"
        )
    parts, named = [], 0
    for value in sorted(levels, reverse=best):
        organs = sorted(levels[value])
        tie = ", tied" if len(organs) > 1 else ""
        parts.append(f"{', '.join(organs)} ({value:.3f}{tie})")
        named += len(organs)
        if named >= k:
            break
    return "; ".join(parts)


def report_text(summary: pd.DataFrame, data: str | None = None, models: Sequence[str] = ()) -> str:
    """report.md: what the data is, overall, per organ, best and worst organs, conditions
    compared; models in `models` order (the run's `--model` order), the others after."""
    from support.reporting.tables import in_model_order, markdown_table, report_head, with_intervals

    title = "Pointing evaluation" if data else "Pointing evaluation (CholecSeg8k)"
    lines = report_head(title, data)
    lines += [
        "Presence metrics treat unparsable answers as wrong; pointing accuracy is the share of "
        "cases with the organ present and predicted present whose point (mapped back from the "
        "768x768 canvas to image pixels) falls inside the organ mask; point hit rate divides the "
        "same hits by all present cases. Brackets: 95% bootstrap intervals, resampling videos.",
        "",
        "## Overall",
        "",
        markdown_table(
            with_intervals(
                in_model_order(headline(summary), models),
                (*METRICS, *SOURCE_METRICS, *MACRO_METRICS),
            )
        ),
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
        table = in_model_order(pivot.reset_index().round(3), models)
        lines += [f"### {metric}", "", markdown_table(table), ""]
    organs = summary[summary["organ"] != ALL]
    lines += ["## Best and worst organs by F1", ""]
    lines += ["Organs whose F1 ties at three digits are named together.", ""]
    by_model = {m: i for i, m in enumerate(model_order(organs["model"], models))}
    groups = sorted(
        organs.groupby(["model", "condition"], sort=True),
        key=lambda kg: (by_model[kg[0][0]], _condition_rank(kg[0][1])),
    )
    for (model, condition), g in groups:
        f1 = dict(zip(g["organ"], g["f1"].astype(float), strict=True))
        if not any(np.isfinite(v) for v in f1.values()):
            lines.append(f"- **{model} / {condition}**: no organ has a defined F1")
            continue
        best, worst = ranked_organs(f1), ranked_organs(f1, best=False)
        lines.append(f"- **{model} / {condition}**: best: {best} | worst: {worst}")
    lines += ["", "## Per organ", ""]
    per_organ = in_model_order(organs[["model", "condition", "organ", "n", *METRICS[:5]]], models)
    lines += [markdown_table(per_organ.round(3)), ""]
    return "\n".join(lines)


def plot_f1_by_organ(
    summary: pd.DataFrame, out_dir: Path, models: Sequence[str] = ()
) -> Path | None:
    """f1_by_organ.png: per-organ F1 bars per condition (one panel per model, in `models` order:
    the run's `--model` order), 95% CI whiskers, the conditions' legend above the panels; an
    undefined F1 is marked "—" (not a bar of 0), a model without a defined F1 gets a panel
    saying so. None (no file) without organ rows."""
    fig = f1_by_organ_figure(summary, models)
    if fig is None:
        return None
    return save_figure(fig, out_dir / "f1_by_organ.png", dpi=120)


def f1_by_organ_figure(summary: pd.DataFrame, models: Sequence[str] = ()) -> Any:
    """plot_f1_by_organ's figure (matplotlib Figure); None without organ rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    organs = summary[summary["organ"] != ALL]
    if organs.empty:
        return None
    models = model_order(organs["model"], models)
    conditions = sorted(organs["condition"].unique(), key=_condition_rank)
    names = [CLASS_NAMES[i] for i in ORGAN_IDS if CLASS_NAMES[i] in set(organs["organ"])]
    fig, axes = plt.subplots(
        len(models),
        1,
        figsize=(11, 0.4 + 3.2 * max(1, len(models))),  # inches; 0.4: the legend's row
        squeeze=False,
        sharex=True,
        layout="constrained",
    )
    width = 0.8 / max(1, len(conditions))
    x = np.arange(len(names))
    for ax, model in zip(axes[:, 0], models, strict=True):
        mine = organs[organs["model"] == model]
        nothing = bool(mine["f1"].isna().all())  # the panel says so once, no mark per bar
        for k, condition in enumerate(conditions):
            g = organs[(organs["model"] == model) & (organs["condition"] == condition)]
            g = g.set_index("organ").reindex(names)
            lo = (g["f1"] - g["f1_lo"]).clip(lower=0).fillna(0)
            hi = (g["f1_hi"] - g["f1"]).clip(lower=0).fillna(0)
            pos = x + (k - (len(conditions) - 1) / 2) * width
            ax.bar(pos, g["f1"].fillna(0), width, yerr=[lo, hi], capsize=2, label=condition)
            undefined = g["f1"].isna().to_numpy() & (not nothing)
            for p in pos[undefined]:  # an undefined F1: marked, not read as a bar of 0
                ax.annotate(MISSING, (p, 0), xytext=(0, 1), textcoords="offset points",
                            ha="center", fontsize=8)  # fmt: skip
        if nothing:
            why = "no scored answers" if mine["n"].sum() == 0 else "F1 undefined for every organ"
            ax.text(0.5, 0.5, why, transform=ax.transAxes, ha="center")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("F1")
        ax.set_title(f"{model}: presence F1 by organ (95% bootstrap CI)")
        ax.grid(axis="y", alpha=0.3)
    axes[-1, 0].set_xticks(x, names, rotation=35, ha="right")
    handles, _ = axes[0, 0].get_legend_handles_labels()
    legend_outside(fig, handles, ncols=len(conditions), title="condition", fontsize=9)
    return fig


# ---- the original's files (`--compat source`) ----------------------------------------------------


def source_records(outcomes: list[Outcome]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(condition, model) -> the original's per-sample records, rows in test-set order as they
    ran: {"sample_idx", "y_true", "y_pred", "hits" (12 each, organ id order), "rows" (each
    organ's parsed answer: present, point_canvas, raw, organ), "prompt": {"name"}}
    (eval/enhanced_evaluator.py: run_zero_shot_enhanced). Only rows whose 12 organs all ran."""
    by_row: dict[tuple[str, str, int], dict[int, Outcome]] = defaultdict(dict)
    for o in outcomes:
        if o.status != "error":
            by_row[(o.group["condition"], o.model, int(o.params["row"]))][
                int(o.params["organ"])
            ] = o
    out: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for (condition, model, row), organs in by_row.items():
        if set(organs) != set(ORGAN_IDS):
            continue
        cases = [organs[c] for c in ORGAN_IDS]
        out[(condition, model)].append(
            {
                "sample_idx": row,
                "y_true": [int(o.scores["y_true"]) for o in cases],
                "y_pred": [int(o.scores["y_pred"] or 0) for o in cases],
                "hits": [int(bool(o.scores.get("hit"))) for o in cases],
                "rows": [
                    {
                        "present": int((o.prediction or {}).get("present") or 0),
                        "point_canvas": (o.prediction or {}).get("point"),
                        "raw": o.raw,
                        "organ": CLASS_NAMES[c],
                    }
                    for c, o in zip(ORGAN_IDS, cases, strict=True)
                ],
                "prompt": {"name": condition},
            }
        )
    return out


def _ratio(a: int, b: int) -> float | None:
    return float(a / b) if b > 0 else None


def source_metrics(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The original's per-organ rows, totals, macro and micro metrics of a list of records
    (eval/pointing_metrics.py: calculate_comprehensive_metrics, save_metrics_json)."""
    y = np.array([r["y_true"] for r in records], dtype=int).reshape(-1, len(ORGAN_IDS))
    p = np.array([r["y_pred"] for r in records], dtype=int).reshape(-1, len(ORGAN_IDS))
    h = np.array([r["hits"] for r in records], dtype=int).reshape(-1, len(ORGAN_IDS))
    g = (p == 1) & (h == 1)  # gated prediction: present only when the point hits
    count = {
        "TP": (y == 1) & (p == 1), "FN": (y == 1) & (p == 0),
        "TN": (y == 0) & (p == 0), "FP": (y == 0) & (p == 1),
        "Gated_TP": (y == 1) & g, "Gated_FN": (y == 1) & ~g,
        "Gated_TN": (y == 0) & ~g, "Gated_FP": (y == 0) & g,
    }  # fmt: skip
    n = {k: v.sum(axis=0).astype(int) for k, v in count.items()}
    present_n, hit_present = (y == 1).sum(axis=0), ((h == 1) & (y == 1)).sum(axis=0)
    rows = []
    for j, cid in enumerate(ORGAN_IDS):
        tp, fn, tn, fp = (int(n[k][j]) for k in ("TP", "FN", "TN", "FP"))
        total = tp + fn + tn + fp
        rows.append(
            {
                "label_id": cid, "label": CLASS_NAMES[cid], "TP": tp, "FN": fn, "TN": tn, "FP": fp,
                "Present_n": int(present_n[j]), "Absent_n": tn + fp, "Total": total,
                "PresenceAcc": _ratio(tp + tn, total),
                "Hit@Point|Present": _ratio(int(hit_present[j]), int(present_n[j])),
                **{k: int(n[k][j]) for k in ("Gated_TP", "Gated_FN", "Gated_TN", "Gated_FP")},
                "GatedAcc": _ratio(int(n["Gated_TP"][j] + n["Gated_TN"][j]), total),
                "Precision": _ratio(tp, tp + fp), "Recall": _ratio(tp, tp + fn),
                "F1": _ratio(2 * tp, 2 * tp + fp + fn),
            }
        )  # fmt: skip
    totals = {k: int(v.sum()) for k, v in n.items() if not k.startswith("Gated")}
    totals |= {"Present_n": int(present_n.sum()), "Absent_n": totals["TN"] + totals["FP"]}
    totals["Total"] = totals["Present_n"] + totals["Absent_n"]
    totals |= {k: int(v.sum()) for k, v in n.items() if k.startswith("Gated")}

    def macro(key: str) -> float | None:
        values = [r[key] for r in rows if r[key] is not None]
        return float(np.mean(values)) if values else None

    total = totals["Total"]
    return {
        "n_examples": len(records),
        "per_organ_metrics": rows,
        "totals": totals,
        "macro_metrics": {
            "macro_presence_acc": macro("PresenceAcc"),
            "macro_gated_acc": macro("GatedAcc"),
            "macro_hit_rate": macro("Hit@Point|Present"),
            "macro_f1": macro("F1"),
        },
        "micro_metrics": {
            "micro_presence_acc": _ratio(totals["TP"] + totals["TN"], total),
            "micro_gated_acc": _ratio(totals["Gated_TP"] + totals["Gated_TN"], total),
        },
    }


def write_source_files(outcomes: list[Outcome], out_dir: Path, split: str = "train") -> list[Path]:
    """The original's files under out_dir: per (condition, model) a folder
    `<condition>/<model>/cholecseg8k_pointing/` with `{split}_{row:05d}.json` per sample and
    `metrics_summary_{split}.json`. Returns the summary files (the per-sample ones are many)."""
    written = []
    for (condition, model), records in sorted(source_records(outcomes).items()):
        # one folder a model, whatever its name (`hf:/models/x` made three before)
        folder = out_dir / condition / file_name(model) / "cholecseg8k_pointing"
        for r in records:
            text = json.dumps(r, indent=2)
            atomic_write_text(folder / f"{split}_{r['sample_idx']:05d}.json", text)
        head = {"model": model, "prompt": condition, "split": split}
        path = folder / f"metrics_summary_{split}.json"
        atomic_write_text(path, json.dumps({**head, **source_metrics(records)}, indent=2))
        written.append(path)
    return written


def write_outputs(
    outcomes: list[Outcome], summary: pd.DataFrame, out_dir: Path, ctx: SummaryContext
) -> list[Path]:
    """report.md's part and the per-organ F1 plot in the run folder; source runs add the
    original's per-sample and metrics files."""
    ctx.report.add(report_text(summary, ctx.data_label, ctx.run.models.names))
    plot = plot_f1_by_organ(summary, out_dir, ctx.run.models.names)
    paths = [plot] if plot else []
    if ctx.compat == "source":
        paths += write_source_files(outcomes, out_dir)
    return paths
