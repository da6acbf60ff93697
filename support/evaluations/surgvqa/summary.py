"""SurgVU metrics, summary table and files (controller side).

VQA, per model and question kind (all, yes_no, open), over the answered questions (backend errors
are left out and counted in `n_error`; empty and refusing answers score 0 and count). Each is the
mean over questions of the question's max over its five references (SurgVU 2026's official rules,
evals/surgvqa/README.md); the columns are those the run scored (--surgvqa-metrics):

    bertscore_f1      BERTScore-F1, roberta-large layer 17 rescaled (2026's ranking metric)
    nli_entailment    the NLI cross-encoder's entailment probability (candidate => reference)
    nli_bertscore_f1  their product per question
    bleu              sentence BLEU-4 (the 2025 metric)
    rouge1, rouge2, rougeL   ROUGE F-measure
    yes_no_accuracy   yes/no questions whose answer opens with the references' yes/no word

BERTScore and NLI are scored here, on the controller, once a run (`score_outcomes`: the models
load once; each score is kept in the cache folder, score_cache.py, and read back by a rerun); the
others on the workers with each answer.

Tool detection, per model, over the frames scored (errors left out, counted):

    map, ap50, ap75   COCO bbox AP@[.5:.05:.95], AP@.5, AP@.75 of all frames pooled
                      (pycocotools COCOeval, area all, 100 detections per image)
    map_video_mean    COCOeval run per video, AP@[.5:.95] averaged over videos (the challenge's
                      evaluator scores each test video alone). Writeup profile: vlmbench's AP (boxes
                      on frames without truth are false positives, ids from 1, rank scores);
                      `--compat source`: the leaderboard's number exactly
                      (support.evaluations.surgvqa.coco.official_inputs: truth frames only, ids from
                      0, score 0.5)
    precision50, recall50, f1_50
                      pycocotools' matches at IoU 0.5 counted over frames: free of the ranking
                      that a VLM's missing confidences make arbitrary
    per class rows    `subset` = the class, `map`/`ap50` its AP (no interval)

Intervals: 95% cluster bootstrap over videos: additive metrics through
support.statistics.metrics.summarize_groups, the APs by re-accumulating pycocotools' per-image
matches for resampled videos (support.evaluations.surgvqa.coco.map_bootstrap).
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
from support.evaluations.surgvqa.boxes import xywh_boxes
from support.evaluations.surgvqa.coco import (
    detections,
    evaluate,
    frame_truth,
    ground_truth,
    map_bootstrap,
    official_inputs,
)
from support.evaluations.surgvqa.leaderboard import metrics_json, scores_present
from support.evaluations.surgvqa.semantic import (
    SEMANTIC_METRICS,
    ScorerInputError,
    SemanticScorer,
    zero_scores,
)
from support.evaluations.surgvqa.tools import TOOL_CLASSES
from support.reporting.kit import interval_columns, legend_outside, save_figure
from support.reporting.tables import (
    MISSING,
    in_model_order,
    markdown_table,
    model_order,
    report_head,
    with_intervals,
)
from support.statistics.metrics import safe_ratio, summarize_groups
from support.statistics.pairing import Comparisons
from support.storage.files import atomic_write_text, file_name
from support.types import Outcome

VQA_METRICS = ("bleu", "yes_no_accuracy")  # every run's (2025's); vqa_metrics() adds the rest
BOX_METRICS = ("map", "ap50", "ap75", "precision50", "recall50", "f1_50")
METRICS = (*VQA_METRICS, *BOX_METRICS)
HEADLINE = ("bleu", "yes_no_accuracy", "map", "ap50", "f1_50")
# in the headline too when scored (ROUGE-1/2 and NLI x BERT: summary.csv and report.md's full
# table); ROUGE-L after BLEU
HEADLINE_SEMANTIC = ("bertscore_f1", "nli_entailment")
HEADLINE_ROUGE = ("rougeL",)
KEYS = ("model", "category", "subset")
# the terminal's brief table (reports/terminal.py; those the headline has)
KEY_METRICS = ("bertscore_f1", "bleu", "rougeL", "map")
SCORES = {  # each row's scores, checked when a run folder is read (support.storage.run_folder)
    **dict.fromkeys(("n_dt", "n_gt", "tp50"), "count"),
    **dict.fromkeys(("bleu", "rouge1", "rouge2", "rougeL", *SEMANTIC_METRICS), "number"),
    "reference_bleu": "numbers",
    "yes_no_correct": "flag",
}


def vqa_metrics(outcomes: Sequence[Outcome]) -> tuple[str, ...]:
    """The VQA metrics of the run's outcomes, in column order: the model-based ones scored,
    BLEU, the ROUGE ones scored, yes/no accuracy."""
    scored = scores_present(outcomes)
    return (*scored, "yes_no_accuracy")


def headline_metrics(columns: Sequence[str]) -> tuple[str, ...]:
    """The headline's metrics among `columns` (a summary's or a headline's)."""
    semantic = (m for m in HEADLINE_SEMANTIC if m in columns)
    rouge = (m for m in HEADLINE_ROUGE if m in columns)
    return (*semantic, HEADLINE[0], *rouge, *HEADLINE[1:])


def is_tools(o: Outcome) -> bool:
    return o.params.get("category") == "tools"


# ---- VQA ------------------------------------------------------------------------------------
def vqa_counts(o: Outcome, scores: Sequence[str] = ("bleu",)) -> list[float]:
    """questions, each of `scores` summed (NaN where the outcome lacks it), yes/no questions
    scored, yes/no answers right."""
    yn = o.scores.get("yes_no_correct")
    sums = [float(o.scores.get(m, np.nan)) for m in scores]
    return [1.0, *sums, float(yn is not None), float(yn or 0)]


def vqa_reduce(s: np.ndarray, scores: Sequence[str] = ("bleu",)) -> dict[str, np.ndarray]:
    """Each of `scores` as its mean over questions, and yes/no accuracy (vqa_counts' layout)."""
    out = {m: safe_ratio(s[..., 1 + k], s[..., 0]) for k, m in enumerate(scores)}
    yn = 1 + len(scores)
    return out | {"yes_no_accuracy": safe_ratio(s[..., yn + 1], s[..., yn])}


def vqa_rows(outcomes: list[Outcome], n_resamples: int, seed: int) -> list[dict]:
    metrics = vqa_metrics(outcomes)
    scores = metrics[:-1]  # all but yes_no_accuracy
    keys = lambda o: [(o.model, "vqa", "all"), (o.model, "vqa", o.group.get("kind", ""))]  # noqa: E731
    groups = summarize_groups(
        outcomes,
        keys,
        lambda o: vqa_counts(o, scores),
        lambda s: vqa_reduce(s, scores),
        n_resamples,
        seed,
    )
    return [g.row(KEYS, metrics) for g in groups]


def score_outcomes(outcomes: Sequence[Outcome], ctx: SummaryContext) -> list[Outcome]:
    """The answered VQA outcomes with BERTScore-F1, NLI entailment and their product added
    (support.evaluations.surgvqa.semantic: the models load once, a question is one batch), when
    the run scores them (`SurgvqaSettings.scoring`); the outcomes unchanged otherwise.

    Each score is computed once: an answer with the same references is scored once a run, and
    the scores are kept in the cache folder (score_cache.py; not under --no-cache), so a rerun
    or --resume reads them and loads no model when every answer is there.

    An answer the models fail on scores 0.0 on the three, its outcome's `extra` naming the error
    (`scoring_error`; report.md counts them; never kept), and the others are scored; when every
    answer fails (the models cannot run at all), the first error propagates. A model or baseline
    that cannot load (semantic.ScorerInputError, naming the option and the file) propagates at
    once: it would fail every answer. Scores computed before an error are kept."""
    settings = ctx.settings
    models = getattr(settings, "scoring", None)
    todo = [k for k, o in enumerate(outcomes) if not is_tools(o) and o.status != "error"]
    if models is None or not todo:
        return list(outcomes)
    from dataclasses import replace

    from tqdm import tqdm

    from support.evaluations.surgvqa.score_cache import KeptScores

    source = ctx.compat == "source"
    scorer = SemanticScorer(models, source=source)
    out = list(outcomes)
    answers = {k: (out[k].prediction or {}).get("answer", out[k].raw) for k in todo}
    kept = KeptScores(ctx.run.output, models, source) if ctx.run.output.use_cache else None
    keys = {k: kept.key(answers[k], out[k].params["answers"]) for k in todo} if kept else {}
    wanted = {key: len(out[k].params["answers"]) for k, key in keys.items() if key is not None}
    done = kept.read(wanted) if kept else {}  # key -> scores, and this run's as they come
    failed: list[Exception] = []
    try:
        for k in tqdm(todo, desc="surgvqa: BERTScore and NLI", unit="answer", disable=None):
            o = out[k]
            if "scoring_error" in o.extra:  # an earlier run's (--resume): scored again now
                o = replace(o, extra={k: v for k, v in o.extra.items() if k != "scoring_error"})
            key = keys.get(k) or memo_key(answers[k], o.params["answers"])
            got = done.get(key) if key is not None else None
            if got is None:
                try:
                    got = scorer.score(answers[k], o.params["answers"])
                except ScorerInputError:  # the models could not load: no answer can be scored
                    raise
                except Exception as exc:  # one answer's failure costs only its own model scores
                    failed.append(exc)
                    got = zero_scores(len(o.params["answers"]))
                    error = f"{type(exc).__name__}: {exc}"
                    o = replace(o, extra={**o.extra, "scoring_error": error})
                else:
                    if key is not None:
                        done[key] = got
                    if kept is not None and keys.get(k) is not None:
                        kept.keep(keys[k], got)
            out[k] = replace(o, scores={**o.scores, **copied(got)})
    finally:
        if kept is not None:
            kept.close()
    if len(failed) == len(todo):
        raise failed[0]
    return out


def memo_key(answer: object, references: Sequence[object]) -> str | None:
    """This run's key of an answer with its references (the same pair is scored once a run);
    None for what is not text (scored without a model)."""
    if not isinstance(answer, str) or not all(isinstance(r, str) for r in references):
        return None
    return json.dumps([answer, list(references)])


def copied(scores: dict[str, Any]) -> dict[str, Any]:
    """`scores` with its lists copied (outcomes sharing a computed score share no list)."""
    return {k: list(v) if isinstance(v, list) else v for k, v in scores.items()}


# ---- tools ----------------------------------------------------------------------------------
def match_counts(o: Outcome) -> list[float]:
    return [float(o.scores["tp50"]), float(o.scores["n_dt"]), float(o.scores["n_gt"])]


def match_reduce(s: np.ndarray) -> dict[str, np.ndarray]:
    tp, n_dt, n_gt = s[..., 0], s[..., 1], s[..., 2]
    return {
        "precision50": safe_ratio(tp, n_dt),
        "recall50": safe_ratio(tp, n_gt),
        "f1_50": safe_ratio(2 * tp, n_dt + n_gt),
    }


def paired_counts(o: Outcome, scores: Sequence[str] = ("bleu",)) -> list[float]:
    """Both categories in one row: VQA counts (vqa_counts), then box matches (match_counts)."""
    if is_tools(o):
        return [0.0] * (3 + len(scores)) + match_counts(o)
    return vqa_counts(o, scores) + [0.0] * 3


def paired_reduce(s: np.ndarray, scores: Sequence[str] = ("bleu",)) -> dict[str, np.ndarray]:
    width = 3 + len(scores)
    return vqa_reduce(s[..., :width], scores) | match_reduce(s[..., width:])


def yes_no_correct(o: Outcome) -> float:
    yn = o.scores.get("yes_no_correct")
    return float("nan") if is_tools(o) or yn is None else float(yn)


def comparisons_spec(scores: Sequence[str] = ("bleu",)) -> Comparisons:
    """Paired comparisons (support/statistics/pairing.py): model vs model on the same questions
    and frames, for the model-based VQA scores among `scores`, BLEU, yes/no accuracy and F1@.5
    (the COCO APs are not additive counts: they are compared through f1_50, which is)."""
    semantic = tuple(m for m in SEMANTIC_METRICS if m in scores)

    def per_case(o: Outcome) -> dict[str, float]:
        values = {m: np.nan if is_tools(o) else float(o.scores[m]) for m in (*semantic, "bleu")}
        return values | {"yes_no_accuracy": yes_no_correct(o)}

    return Comparisons(
        counts=lambda o: paired_counts(o, scores),
        reduce=lambda s: paired_reduce(s, scores),
        metrics=(*semantic, "bleu", "yes_no_accuracy", "f1_50"),
        tests={"yes_no_accuracy": "mcnemar-exact"}
        | dict.fromkeys((*semantic, "bleu"), "permutation"),
        scores=per_case,
    )


def comparisons(
    outcomes: Sequence[Outcome],
    requested: Sequence[tuple[str, str]],
    n_resamples: int,
    seed: int,
) -> tuple[pd.DataFrame, list[str]]:
    """comparisons.csv for the VQA scores the run has (comparisons_spec)."""
    from support.statistics.pairing import comparison_table

    spec = comparisons_spec(scores_present(outcomes))
    return comparison_table("surgvqa", outcomes, spec, requested, n_resamples, seed)


def coco_files(scored: list[Outcome]) -> tuple[dict, list[dict], dict[int, str]]:
    """One model's scored tool frames as pycocotools input: ground truth, results, and each
    image's cluster. Image ids 1.. in case order (the outcomes arrive sorted by case id)."""
    truths, results, cluster_of = [], [], {}
    for image_id, o in enumerate(sorted(scored, key=lambda o: o.case_id), start=1):
        truths.append(frame_truth(image_id, o.params))
        results += detections(image_id, xywh_boxes((o.prediction or {}).get("boxes", [])))
        cluster_of[image_id] = o.cluster
    return ground_truth(truths), results, cluster_of


def video_mean_map(
    gt: dict, results: list[dict], cluster_of: dict[int, str], source: bool = False
) -> float:
    """The challenge's number: COCOeval on each video alone, AP@[.5:.95] averaged over videos.

    source: each video's inputs as the official evaluator builds them (coco.official_inputs);
    else vlmbench's (every frame, ids from 1, rank scores). A video without truth is left out;
    one without a predicted box scores 0 (the official evaluator stops with an IndexError)."""
    by_video: dict[str, list[int]] = defaultdict(list)
    for image_id, video in cluster_of.items():
        by_video[video].append(image_id)
    values = []
    for ids in by_video.values():
        keep = set(ids)
        sub = dict(
            gt,
            images=[i for i in gt["images"] if i["id"] in keep],
            annotations=[a for a in gt["annotations"] if a["image_id"] in keep],
        )
        sub_results = [r for r in results if r["image_id"] in keep]
        if source:
            sub, sub_results = official_inputs(sub, sub_results)
        values.append(evaluate(sub, sub_results).stats["AP"])
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else np.nan


def tool_rows(outcomes: list[Outcome], n_resamples: int, seed: int, source: bool) -> list[dict]:
    rows, class_rows = [], []
    keys = lambda o: [(o.model, "tools", "all")]  # noqa: E731
    for g in summarize_groups(outcomes, keys, match_counts, match_reduce, n_resamples, seed):
        row = g.row(KEYS, ("precision50", "recall50", "f1_50"))
        if g.scored:
            gt, results, cluster_of = coco_files(g.scored)
            scores = evaluate(gt, results)
            for name, e in map_bootstrap(gt, results, cluster_of, n_resamples, seed).items():
                row |= {name: e.value, f"{name}_lo": e.low, f"{name}_hi": e.high}
            row["map_video_mean"] = video_mean_map(gt, results, cluster_of, source)
            for cls in TOOL_CLASSES:
                ap, ap50 = scores.per_class_ap[cls], scores.per_class_ap50[cls]
                if np.isfinite(ap):
                    class_rows.append(
                        {
                            "model": g.key[0],
                            "category": "tools",
                            "subset": cls,
                            "map": ap,
                            "ap50": ap50,
                        }
                    )
        rows.append(row)
    return rows + class_rows


def summarize(outcomes: list[Outcome], ctx: SummaryContext) -> pd.DataFrame:
    """Rows per (model, category, subset): n, n_error and each metric with `_lo`, `_hi`."""
    vqa = [o for o in outcomes if not is_tools(o)]
    tools = [o for o in outcomes if is_tools(o)]
    n_resamples, seed, source = ctx.n_resamples, ctx.seed, ctx.compat == "source"
    rows = vqa_rows(vqa, n_resamples, seed) + tool_rows(tools, n_resamples, seed, source)
    columns = [*KEYS, "n", "n_error", *interval_columns((*vqa_metrics(vqa), *BOX_METRICS))]
    columns.insert(columns.index("ap75_hi") + 1, "map_video_mean")
    df = pd.DataFrame(rows, columns=columns)
    order = {"all": 0, "yes_no": 1, "open": 2}
    df["_o"] = [
        (m, c, order.get(s, 3)) for m, c, s in zip(df.model, df.category, df.subset, strict=True)
    ]
    return df.sort_values("_o", kind="stable").drop(columns="_o").reset_index(drop=True)


COUNTS = {"vqa": "n_questions", "tools": "n_frames"}  # headline: each category's cases apart


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per model: VQA and tool detection side by side (a gate reads one row), with the
    questions and frames counted apart (`n_questions`, `n_frames`: those scored, as `n` of
    summary.csv) and the backend errors of both (`n_error`)."""
    rows = []
    vqa = [m for m in headline_metrics(summary.columns) if m not in BOX_METRICS]
    for model, rows_of in summary.groupby("model", sort=True):
        row: dict[str, Any] = {"model": model, **dict.fromkeys(COUNTS.values(), 0), "n_error": 0}
        for category, metrics in (("vqa", vqa), ("tools", ("map", "ap50", "f1_50"))):
            hit = rows_of[(rows_of.category == category) & (rows_of.subset == "all")]
            for c in interval_columns(metrics):
                row[c] = hit[c].iloc[0] if len(hit) else np.nan
            if len(hit):
                row[COUNTS[category]] = int(hit["n"].iloc[0])
                row["n_error"] += int(hit["n_error"].iloc[0])
        rows.append(row)
    metrics = headline_metrics(summary.columns)
    cols = ["model", *COUNTS.values(), "n_error", *interval_columns(metrics)]
    return pd.DataFrame(rows, columns=cols)


# ---- files ----------------------------------------------------------------------------------
def model_dir(out_dir: Path, model: str) -> Path:
    """by_model/<model>/ (characters other than letters, digits, `._-` become `_`)."""
    return out_dir / "by_model" / file_name(model)


def write_json(path: Path, obj: Any) -> Path:
    atomic_write_text(path, json.dumps(obj, indent=2) + "\n")
    return path


def write_outputs(
    outcomes: list[Outcome], summary: pd.DataFrame, out_dir: Path, ctx: SummaryContext
) -> list[Path]:
    """Per model: the official evaluator's metrics.json (VQA, support.evaluations.surgvqa.
    leaderboard), the COCO ground truth, results and COCOeval stats; report.md and the headline
    metrics' plot (metrics_by_model.png) for the run."""
    written = []
    present = scores_present(outcomes)
    by_model: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        if o.status != "error":
            by_model[o.model].append(o)
    for model, scored in sorted(by_model.items()):
        folder = model_dir(out_dir, model)
        vqa = sorted((o for o in scored if not is_tools(o)), key=lambda o: o.case_id)
        if vqa:  # the official layout; results in case order, by the data's case id
            rows = [(o.params.get("case", o.case_id), o.scores) for o in vqa]
            metrics = metrics_json(rows, present)
            written.append(write_json(folder / "metrics.json", metrics))
        tools = [o for o in scored if is_tools(o)]
        if tools:
            gt, results, _ = coco_files(tools)
            scores = evaluate(gt, results)
            written += [
                write_json(folder / "coco_ground_truth.json", gt),
                write_json(folder / "coco_results.json", results),
                write_json(
                    folder / "cocoeval.json",
                    {
                        "stats": scores.stats,
                        "per_class_ap": scores.per_class_ap,
                        "per_class_ap50": scores.per_class_ap50,
                    },
                ),
            ]
    plot = plot_metrics(summary, out_dir / "metrics_by_model.png", ctx.run.models.names)
    notes = scoring_notes(ctx.settings, present, outcomes)
    ctx.report.add(report_text(summary, ctx.data_label, ctx.run.models.names, plot, notes))
    return [*([plot] if plot else []), *written]  # the run folder's plot first (terminal)


# the headline metrics as the plot names them (all in [0, 1] but BERTScore-F1, rescaled: it can
# fall below 0, the plot's floor)
METRIC_LABELS = {
    "bertscore_f1": "BERTScore\nF1",
    "nli_entailment": "NLI\nentailment",
    "bleu": "BLEU",
    "rougeL": "ROUGE-L",
    "yes_no_accuracy": "yes/no\naccuracy",
    "map": "mAP\n@[.5:.95]",
    "ap50": "AP@.5",
    "f1_50": "F1@.5",
}


def plot_metrics(summary: pd.DataFrame, path: Path, models: Sequence[str] = ()) -> Path | None:
    """metrics_by_model.png (metrics_figure); None (no file) when no metric is defined."""
    fig = metrics_figure(summary, models)
    return None if fig is None else save_figure(fig, path, dpi=110)


def metrics_figure(summary: pd.DataFrame, models: Sequence[str] = ()) -> Any:
    """The headline metrics (headline_metrics) as grouped bars: a group per metric, a bar per
    model (in `models` order: the run's `--model` order) with its 95% bootstrap interval as a
    whisker; a metric a model has no value for is marked "—" at the axis. The legend, above the
    axes, names each model with its questions and frames scored. None when no metric is
    defined."""
    head = headline(summary)
    shown = headline_metrics(head.columns)
    if head.empty or head[list(shown)].isna().all().all():
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    head = head.set_index("model")
    order = model_order(head.index, models)
    x = np.arange(len(shown), dtype=float)
    width = 0.8 / len(order)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(shown) * max(1, len(order) / 2)), 3.6),
                           layout="constrained")  # fmt: skip
    for k, model in enumerate(order):
        row = head.loc[model]
        value = np.array([row[m] for m in shown], dtype=float)
        lo = np.array([row[f"{m}_lo"] for m in shown], dtype=float)
        hi = np.array([row[f"{m}_hi"] for m in shown], dtype=float)
        pos = x + (k - (len(order) - 1) / 2) * width
        counts = f"{int(row['n_questions'])} questions, {int(row['n_frames'])} frames scored"
        label = f"{model} ({counts})"
        ax.bar(pos, np.nan_to_num(value), width, label=label, color=f"C{k % 10}")
        ok = np.isfinite(value) & np.isfinite(lo) & np.isfinite(hi)
        if ok.any():
            err = [np.clip(value - lo, 0, None)[ok], np.clip(hi - value, 0, None)[ok]]
            ax.errorbar(pos[ok], value[ok], yerr=err, fmt="none", ecolor="black", capsize=3)
        tops = np.where(ok, np.fmax(value, hi), value)  # the whisker's top, else the bar's
        for p, v, top in zip(pos, value, tops, strict=True):
            text = MISSING if not np.isfinite(v) else f"{v:.2f}"
            y = top if np.isfinite(top) else 0.0
            ax.annotate(text, (p, y), xytext=(0, 2), textcoords="offset points", ha="center",
                        fontsize=7)  # fmt: skip
    ax.set_xticks(x, [METRIC_LABELS.get(m, m) for m in shown])
    lows = head[[f"{m}_lo" for m in shown] + list(shown)].to_numpy(dtype=float)
    floor = np.nanmin(lows) if np.isfinite(lows).any() else 0.0  # rescaled BERTScore: < 0
    ax.set_ylim(min(0.0, 1.1 * floor), 1.1)
    if floor < 0:
        ax.axhline(0, color="black", linewidth=0.6)
    ax.set_ylabel("score (95% bootstrap CI)")
    ax.set_title("surgvqa: headline metrics per model")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    handles, _ = ax.get_legend_handles_labels()
    legend_outside(fig, handles, ncols=min(len(handles), 2), title="model", fontsize=8)
    return fig


def scoring_notes(
    settings: Any, present: Sequence[str], outcomes: Sequence[Outcome] = ()
) -> list[str]:
    """What report.md says of the VQA metrics: the models that scored BERTScore and NLI (and the
    answers they failed on, scored 0), or why they are not scored (--surgvqa-metrics auto
    without them; 2025)."""
    if settings is None:
        return []
    models = getattr(settings, "scoring", None)
    if models is not None and "bertscore_f1" in present:
        rescale = (
            f"rescaled with the {models.rescaled_by} baseline"
            if models.rescaled
            else "**not rescaled** (--surgvqa-bertscore-baseline none): not comparable with "
            "the leaderboard's"
        )
        notes = [
            f"BERTScore-F1: {models.bertscore_name}, layer {models.layers}, {rescale}. "
            f"NLI: {models.nli_name}. Both as SurgVU 2026's official evaluator, on the "
            "controller: an answer with its references is scored once, and a rerun reads the "
            "scores kept in the cache folder (none kept under --no-cache)."
        ]
        failed = [o for o in outcomes if "scoring_error" in o.extra]
        if failed:
            first = failed[0]
            notes.append(
                f"**{len(failed)} answer{'s' * (len(failed) != 1)} could not be scored by "
                "BERTScore and NLI** and count "
                f"0 on both (raw_results.jsonl: `extra.scoring_error`); the first, "
                f"{first.case_id} of {first.model}: {first.extra['scoring_error']}"
            )
        return notes
    if getattr(settings, "metrics", "") == "2025":
        return ["VQA metrics: 2025's (--surgvqa-metrics 2025): max sentence-BLEU only."]
    if getattr(settings, "left_out", None):
        return [
            "BERTScore-F1, NLI entailment and NLI x BERT (SurgVU 2026's ranking metric and two "
            f"of its secondary ones) are not scored: {settings.left_out}"
        ]
    return []


def report_text(
    summary: pd.DataFrame,
    data: str | None = None,
    models: Sequence[str] = (),
    plot: Path | None = None,
    notes: Sequence[str] = (),
) -> str:
    """report.md: what the data is, the headline (questions and frames counted apart), the VQA
    kinds and the tool rows with 95% intervals; models in `models` order (the run's `--model`
    order), the others after; `notes` on the VQA metrics (scoring_notes); the plot (its file
    name, beside report.md) when there is one."""
    summary = in_model_order(summary, models)
    main = summary[summary.subset.isin(["all", "yes_no", "open"])]
    classes = summary[~summary.subset.isin(["all", "yes_no", "open"])]
    head = in_model_order(headline(summary), models)
    metrics = [m for m in summary.columns if f"{m}_lo" in summary.columns]
    parts = [
        "\n".join(report_head("surgvqa", data)),
        *(f"{note}\n" for note in notes),
        "## Headline\n",
        markdown_table(with_intervals(head, headline_metrics(head.columns))),
        "\n## By category and question kind\n",
        markdown_table(with_intervals(main, metrics)),
    ]
    if len(classes):
        table = classes[["model", "subset", "map", "ap50"]].rename(columns={"subset": "tool"})
        parts += ["\n## AP per tool class (pooled frames)\n", markdown_table(table)]
    if plot is not None:
        parts += ["\n## Metrics per model\n", f"![metrics per model]({plot.name})"]
    return "\n".join(parts) + "\n"
