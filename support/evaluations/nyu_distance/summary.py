"""NYU distance metrics, summary table, results JSON, report.md and the scatter plot (controller).

Per model, over the pairs whose answer parsed (unparsable answers are excluded from the error
metrics and count against the response rate; backend errors are excluded and counted in
`n_error`), with errors e = predicted - true distance in metres:

    response_rate        answered pairs / pairs
    mae                  mean |e|
    median_abs_error     median |e|
    std_error            standard deviation of |e| (np.std, ddof 0): the source computes its
                         "Median Error" and "Std Error" from the same list of errors as its MAE,
                         i.e. absolute errors; the sign is in `bias`
    bias                 mean e (> 0: distances overestimated)
    rmse                 sqrt(mean e^2)
    mean_relative_error  mean |e| / true distance
    delta1               share of answers with max(pred/gt, gt/pred) < 1.25 (the `correct` status)

Intervals: 95% cluster bootstrap over images (the pairs of one image share a scene). Everything
but the median is a ratio of additive per-image sums (support.statistics.metrics.summarize_groups);
the median's interval resamples images with support.statistics.metrics.cluster_resample.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from support.contract.summary import SummaryContext
from support.reporting.kit import interval_columns, save_figure
from support.reporting.tables import fmt, model_order
from support.statistics.metrics import cluster_resample, safe_ratio, summarize_groups
from support.statistics.pairing import Comparisons
from support.storage.files import atomic_write
from support.types import Outcome

METRICS = (
    "response_rate",
    "mae",
    "median_abs_error",
    "std_error",
    "bias",
    "rmse",
    "mean_relative_error",
    "delta1",
)
HEADLINE = (*METRICS[:4], "mean_relative_error", "delta1")  # bias and rmse: summary.csv, report
# per-pair additive sums: pairs, answered, sum |e|, sum e^2, sum e, sum |e|/gt, delta < 1.25
KEY_METRICS = ("mae", "delta1")  # the terminal's brief table (reports/terminal.py)
SCORES = {"abs_error": "number", "gt": "number", "pred": "number"}  # support.storage.run_folder
COUNT_FIELDS = ("pairs", "answered", "abs", "sq", "signed", "rel", "delta1")
DISTANCE_BINS = (0.0, 1.0, 2.0, 3.0, np.inf)  # m, true distance bins of the report


def pair_counts(o: Outcome) -> list[float]:
    """One scored pair as additive sums in COUNT_FIELDS order."""
    gt, pred = float(o.scores["gt"]), o.scores.get("pred")
    if pred is None:
        return [1, 0, 0, 0, 0, 0, 0]
    e = float(pred) - gt
    ratio = max(pred / gt, gt / pred) if pred > 0 and gt > 0 else np.inf
    return [1, 1, abs(e), e * e, e, abs(e) / gt, float(ratio < 1.25)]


def reduce_counts(s: np.ndarray) -> dict[str, np.ndarray]:
    """(..., 7) summed counts -> metrics (vectorised over leading axes, for the bootstrap)."""
    pairs, answered, abs_, sq, signed, rel, d1 = (s[..., i] for i in range(len(COUNT_FIELDS)))
    mae = safe_ratio(abs_, answered)
    mean_sq = safe_ratio(sq, answered)
    with np.errstate(invalid="ignore"):
        return {
            "response_rate": safe_ratio(answered, pairs),
            "mae": mae,
            "std_error": np.sqrt(np.clip(mean_sq - mae**2, 0, None)),
            "bias": safe_ratio(signed, answered),
            "rmse": np.sqrt(mean_sq),
            "mean_relative_error": safe_ratio(rel, answered),
            "delta1": safe_ratio(d1, answered),
        }


def abs_error(o: Outcome) -> float:
    """|prediction - truth| in metres; NaN when the answer had no distance."""
    pred = o.scores.get("pred")
    return float("nan") if pred is None else abs(float(pred) - float(o.scores["gt"]))


# paired comparisons (support/statistics/pairing.py): model vs model on the same point pairs
COMPARISONS = Comparisons(
    counts=pair_counts,
    reduce=reduce_counts,
    metrics=("mae", "delta1", "response_rate"),
    tests={"mae": "permutation"},
    scores=lambda o: {"mae": abs_error(o)},
)


def median_interval(
    errors: np.ndarray, clusters: list[str], n_resamples: int, seed: int, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of the median of `errors` when whole clusters are resampled
    (support.statistics.metrics.cluster_resample). (nan, nan) with fewer than 2 clusters or no
    resamples."""
    if len(errors) == 0:
        return np.nan, np.nan
    values = np.asarray(errors, dtype=float)
    e = cluster_resample(
        clusters, lambda idx: {"median": np.median(values[idx])}, n_resamples, seed, level
    )["median"]
    return e.low, e.high


def summarize(outcomes: list[Outcome], ctx: SummaryContext) -> pd.DataFrame:
    """One row per model: n, n_error, n_answered and each metric with `_lo`, `_hi` columns."""
    rows = []
    keys = lambda o: [(o.model,)]  # noqa: E731
    n_resamples, seed = ctx.n_resamples, ctx.seed
    for g in summarize_groups(outcomes, keys, pair_counts, reduce_counts, n_resamples, seed):
        answered = [o for o in g.scored if o.scores.get("pred") is not None]
        additive = [m for m in METRICS if m != "median_abs_error"]
        row = g.row(["model"], additive) | {"n_answered": len(answered)}
        errors = np.array([o.scores["abs_error"] for o in answered], dtype=float)
        lo, hi = median_interval(errors, [o.cluster for o in answered], n_resamples, seed)
        median = float(np.median(errors)) if len(errors) else np.nan
        if g.n:
            row |= {"median_abs_error_lo": lo, "median_abs_error_hi": hi}
        rows.append(row | {"median_abs_error": median})
    columns = ["model", "n", "n_error", "n_answered", *interval_columns(METRICS)]
    return pd.DataFrame(rows, columns=columns)


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per model: counts and the source's metrics (plus relative error and delta1)."""
    cols = ["model", "n", "n_error", *interval_columns(HEADLINE)]
    return summary[cols].reset_index(drop=True)


# ---- files -------------------------------------------------------------------------------------
SOURCE_KEYS = (("claude", "claude"), ("gpt-4o", "gpt4o"))  # model name part -> the original's key


def result_key(model: str, compat: str = "writeup") -> str:
    """The model's key in nyu_distance_results.json: its name, or under `--compat source` the
    original's `claude` / `gpt4o` for Claude and GPT-4o models."""
    if compat == "source":
        for part, key in SOURCE_KEYS:
            if part in model.lower():
                return key
    return model


def result_rows(outcomes: list[Outcome], compat: str = "writeup") -> dict[str, list[dict]]:
    """The source's nyu_distance_results.json content: per model, one dict per pair in image and
    pair order (predicted_distance None when unparsable or on a backend error); under source the
    raw response is stripped, as the original stores it."""
    models = sorted({o.model for o in outcomes})
    keys = {m: result_key(m, compat) for m in models}
    if len(set(keys.values())) < len(keys):  # two Claude models, say: keep their own names
        keys = {m: m for m in models}
    out: dict[str, list[dict]] = {}
    for o in sorted(outcomes, key=lambda o: (o.model, o.params["image_idx"], o.params["pair_idx"])):
        out.setdefault(keys[o.model], []).append(
            {
                "image_idx": o.params["image_idx"],
                "pair_idx": o.params["pair_idx"],
                "point1": list(o.params["point1"]),
                "point2": list(o.params["point2"]),
                "gt_distance": o.params["gt_distance"],
                "predicted_distance": o.scores.get("pred"),
                "raw_response": o.raw.strip() if compat == "source" and o.raw else o.raw,
                "model": o.model,
            }
        )
    return out


def write_results_json(outcomes: list[Outcome], path: Path, compat: str = "writeup") -> Path:
    """nyu_distance_results.json keyed by model, as the source writes it."""
    from support.storage.files import atomic_write_text

    atomic_write_text(path, json.dumps(result_rows(outcomes, compat), indent=2) + "\n")
    return path


def by_distance(outcomes: list[Outcome]) -> pd.DataFrame:
    """MAE and response rate per model and true-distance bin (metres)."""
    frame = pd.DataFrame(
        [
            {
                "model": o.model,
                "gt": o.scores["gt"],
                "answered": o.scores.get("pred") is not None,
                "abs_error": o.scores.get("abs_error"),
            }
            for o in outcomes
            if o.status != "error"
        ]
    )
    if frame.empty:
        return pd.DataFrame(columns=["model", "true distance (m)", "n", "response_rate", "mae"])
    labels = [
        f"{a:g}-{b:g}" if np.isfinite(b) else f">= {a:g}"
        for a, b in itertools.pairwise(DISTANCE_BINS)
    ]
    frame["true distance (m)"] = pd.cut(frame["gt"], DISTANCE_BINS, right=False, labels=labels)
    grouped = frame.groupby(["model", "true distance (m)"], observed=True)
    table = grouped.agg(
        n=("gt", "size"),
        response_rate=("answered", "mean"),
        mae=("abs_error", lambda s: s.dropna().mean()),
    )
    return table.reset_index()


def report_text(
    summary: pd.DataFrame,
    outcomes: list[Outcome],
    data: str | None = None,
    models: Sequence[str] = (),
) -> str:
    """report.md: what the data is, what is measured, the overall table with intervals, MAE by
    true distance; models in `models` order (the run's `--model` order), the others after."""
    from support.reporting.tables import in_model_order, markdown_table, report_head, with_intervals

    lines = [
        *report_head("NYU Depth V2 3D distance evaluation", data),
        "Each case shows an indoor image with a red cross at A and a blue cross at B and asks for "
        "their 3D Euclidean distance in metres. The truth back-projects both pixels with their "
        "Kinect depths through the NYU intrinsics. Errors are predicted minus true distance (m); "
        "error metrics use the answered pairs, unparsable answers count against the response "
        "rate. std_error is the standard deviation of the absolute errors; bias the mean signed "
        "error; delta1 the share with max(pred/gt, gt/pred) < 1.25. Brackets: 95% bootstrap "
        "intervals, resampling images.",
        "",
        "## Overall",
        "",
        markdown_table(with_intervals(in_model_order(summary, models), METRICS)),
        "",
        "## By true distance",
        "",
        markdown_table(in_model_order(by_distance(outcomes).round(3), models)),
        "",
    ]
    return "\n".join(lines)


def plot_predictions(
    outcomes: list[Outcome], summary: pd.DataFrame, path: Path, models: Sequence[str] = ()
) -> Path | None:
    """pred_vs_truth.png: predicted vs true distance per model (panels in `models` order: the
    run's `--model` order), the y = x line; answers beyond the axes are drawn at the edge as
    triangles; a model without a parsed answer gets a panel saying so. None (no file) without
    outcomes."""
    models = model_order({o.model for o in outcomes}, models)
    if not models:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 4.2), squeeze=False)
    truth = max(float(o.params["gt_distance"]) for o in outcomes)  # m (error outcomes too)
    preds = [o.scores["pred"] for o in outcomes if o.scores.get("pred") is not None]
    typical = float(np.quantile(preds, 0.95)) if preds else 0.0
    limit = 1.1 * max(truth, min(typical, 3 * truth))  # m: wild answers do not squash the rest
    stats = summary.set_index("model") if len(summary) else None
    for ax, model in zip(axes[0], models, strict=False):
        pts = [
            (o.scores["gt"], o.scores["pred"])
            for o in outcomes
            if o.model == model and o.scores.get("pred") is not None
        ]
        gt = np.array([p[0] for p in pts], dtype=float)
        pred = np.array([p[1] for p in pts], dtype=float)
        inside = pred <= limit
        ax.plot([0, limit], [0, limit], color="grey", lw=1, ls="--", label="y = x")
        ax.scatter(gt[inside], pred[inside], s=14, alpha=0.7)
        ax.scatter(gt[~inside], np.full((~inside).sum(), limit), s=20, marker="^", color="red")
        if not pts:
            ax.text(0.5, 0.5, "no parsable answers", transform=ax.transAxes, ha="center")
        ax.set_xlim(0, limit)
        ax.set_ylim(0, limit * 1.02)
        ax.set_aspect("equal")
        ax.set_xlabel("true distance (m)")
        ax.set_ylabel("predicted distance (m)")
        title = model
        if stats is not None and model in stats.index:
            r = stats.loc[model]
            title += f"\nMAE {fmt(r['mae'])} m, response rate {fmt(r['response_rate'], 2)}"
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


def write_marked_images(outcomes: list[Outcome], ctx: SummaryContext, folder: Path) -> list[Path]:
    """marked_images/img0000_pair0.jpg: what the model saw, one per pair, drawn again here on
    the controller from the outcomes' pairs and the data reopened (`ctx.open_data()`; workers
    write no files)."""
    from support.evaluations.nyu_distance.folder import NyuFolderError
    from support.evaluations.nyu_distance.marks import marked_jpeg, marked_name, pair_of
    from support.evaluations.nyu_distance.mat import NyuMatError
    from support.evaluations.nyu_distance.spec import NyuSettings

    if not outcomes:  # nothing to draw: the data is not opened
        return []
    settings = ctx.settings or NyuSettings()
    mat = ctx.open_data()
    pairs = {(o.params["image_idx"], o.params["pair_idx"]): o.params for o in outcomes}
    paths = []
    for image_idx in sorted({i for i, _ in pairs}):
        try:
            rgb = mat.image(image_idx)
        except (NyuFolderError, NyuMatError):  # a file refused or broken: its cases are errors
            continue  # naming it already, and the other images are still drawn
        for (i, j), params in sorted(pairs.items()):
            if i == image_idx:
                data = marked_jpeg(rgb, pair_of(params), settings.compat)
                paths.append(folder / marked_name(i, j))
                atomic_write(paths[-1], lambda f, data=data: f.write(data))
    return paths


def write_outputs(
    outcomes: list[Outcome], summary: pd.DataFrame, out_dir: Path, ctx: SummaryContext
) -> list[Path]:
    """The source's nyu_distance_results.json and marked images, report.md's part and the
    prediction-vs-truth plot (none without outcomes)."""
    ctx.report.add(report_text(summary, outcomes, ctx.data_label, ctx.run.models.names))
    plot = plot_predictions(outcomes, summary, out_dir / "pred_vs_truth.png", ctx.run.models.names)
    return [
        write_results_json(outcomes, out_dir / "nyu_distance_results.json", ctx.compat),
        *([plot] if plot else []),
        *write_marked_images(outcomes, ctx, out_dir / "marked_images"),
    ]
