"""PGT metrics, the source's output files, and the summary tables (controller side).

Metrics as the source, from the majority-voted predictions with `ai-generated` as the positive
class: accuracy, macro F1, per-class precision / recall / F1, the confusion matrix; with n > 1
also the accuracy of the individual responses; and the recall per generator. An unparsable vote
(no response named a label) counts as the wrong label; backend errors are excluded and counted.
Intervals: 95% bootstrap over images (percentile, support.statistics.metrics.cluster_bootstrap).

`--compat source` (`SummaryContext.compat`): precision, recall and F1 are 0
where undefined, recall per generator counts AI images only and drops None votes, and each
combination gets the source's files (support.evaluations.pgt.source_metrics).
"""

from __future__ import annotations

import json
import math
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from support.contract.summary import SummaryContext
from support.evaluations.pgt import source_metrics as sm
from support.evaluations.pgt.answers import AI, REAL
from support.evaluations.pgt.layout import log_dir, performance_name, result_dir
from support.evaluations.pgt.phrases import MODES
from support.reporting.kit import interval_columns
from support.reporting.tables import in_model_order, markdown_table, report_head, with_intervals
from support.settings import RunSettings
from support.statistics.metrics import (
    binary_metrics,
    cluster_bootstrap,
    counts_by_cluster,
    safe_ratio,
    summarize_groups,
)
from support.statistics.pairing import Comparisons
from support.storage.files import atomic_write_text, write_csv
from support.types import Outcome

COMBINATION = ["model", "dataset", "phrase", "mode", "n_responses"]
COUNT_FIELDS = ("tp", "fp", "fn", "tn", "individual_correct", "individual_total", "unparsable")
METRICS = (
    "accuracy",
    "macro_f1",
    "precision_real",
    "recall_real",
    "f1_real",
    "precision_ai",
    "recall_ai",
    "f1_ai",
    "individual_accuracy",
    "unparsable_rate",
)
LEVEL = 0.95
KEY_METRICS = ("macro_f1",)  # the terminal's brief table (reports/terminal.py)
SCORES = {  # each row's scores, checked when a run folder is read (support.storage.run_folder)
    "individual_correct": "count",
    "individual_total": "count",
    "y_pred": "text",
    "y_true": "text",
}


def case_counts(o: Outcome) -> list[int]:
    """One scored case as additive counts (COUNT_FIELDS order); unparsable = the wrong label."""
    y_true, y_pred = o.scores["y_true"], o.scores["y_pred"]
    unparsable = int(y_pred is None)
    if y_pred is None:
        y_pred = REAL if y_true == AI else AI
    return [
        int(y_true == AI and y_pred == AI),
        int(y_true == REAL and y_pred == AI),
        int(y_true == AI and y_pred == REAL),
        int(y_true == REAL and y_pred == REAL),
        int(o.scores.get("individual_correct", 0)),
        int(o.scores.get("individual_total", 0)),
        unparsable,
    ]


def reduce_counts(s: np.ndarray) -> dict[str, np.ndarray]:
    """(..., 7) summed counts -> metrics, vectorised over leading axes (for the bootstrap)."""
    tp, fp, fn, tn, ind_ok, ind_n, unp = (s[..., i] for i in range(len(COUNT_FIELDS)))
    ai = binary_metrics(tp, fp, fn, tn)
    real = binary_metrics(tn, fn, fp, tp)  # the same table with `real` as the positive class
    return {
        "accuracy": ai["accuracy"],
        "macro_f1": (ai["f1"] + real["f1"]) / 2,
        "precision_real": real["precision"],
        "recall_real": real["recall"],
        "f1_real": real["f1"],
        "precision_ai": ai["precision"],
        "recall_ai": ai["recall"],
        "f1_ai": ai["f1"],
        "individual_accuracy": safe_ratio(ind_ok, ind_n),
        "unparsable_rate": safe_ratio(unp, tp + fp + fn + tn),
    }


def reduce_counts_source(s: np.ndarray) -> dict[str, np.ndarray]:
    """reduce_counts with the source's rules: precision, recall, F1 are 0 where undefined."""
    tp, fp, fn, tn, ind_ok, ind_n, unp = (s[..., i] for i in range(len(COUNT_FIELDS)))
    cm = sm.class_metrics(tp, fp, fn, tn)
    n = tp + fp + fn + tn
    return {
        "accuracy": safe_ratio(tp + tn, n),
        "macro_f1": (cm[REAL]["f1"] + cm[AI]["f1"]) / 2,
        "precision_real": cm[REAL]["precision"],
        "recall_real": cm[REAL]["recall"],
        "f1_real": cm[REAL]["f1"],
        "precision_ai": cm[AI]["precision"],
        "recall_ai": cm[AI]["recall"],
        "f1_ai": cm[AI]["f1"],
        "individual_accuracy": safe_ratio(ind_ok, ind_n),
        "unparsable_rate": safe_ratio(unp, n),
    }


def label_correct(o: Outcome) -> int:
    """1 when the final label is right (no label is wrong)."""
    return int(o.scores["y_pred"] is not None and o.scores["y_pred"] == o.scores["y_true"])


def variant(o: Outcome) -> str:
    """The phrase and mode as case ids spell them: `baseline`, `cot-prefill`."""
    g = o.group
    return f"{g['phrase']}-{g['mode']}" if g["mode"] else g["phrase"]


def pair_key(o: Outcome, field: str) -> str:
    """The same image (and the rest of the combination): the case id without the model and
    without the compared part (`-cot-prefill`, `-n5`)."""
    case = o.item_id
    part = {"variant": variant(o), "n": f"n{o.group['n']}"}.get(field)
    if not part:
        return case
    # the last "-<part>-": the image id before it may hold the same text (a generator "n1")
    head, found, tail = (case + "-").rpartition(f"-{part}-")
    return f"{head}-{tail}" if found else f"{case}-"


# paired comparisons (support/statistics/pairing.py): each phrase x mode vs baseline and each n vs
# n=1, per model, on the same images; and models
COMPARISONS = Comparisons(
    counts=case_counts,
    reduce=reduce_counts,
    metrics=("accuracy", "macro_f1"),
    tests={"accuracy": "mcnemar-exact"},
    scores=lambda o: {"accuracy": label_correct(o)},
    fields={"variant": variant, "n": lambda o: f"n{o.group['n']}"},
    key=pair_key,
    defaults=lambda labels: (
        [
            ("variant", "baseline", v)
            for v in labels.get("variant", [])
            if v != "baseline" and "baseline" in labels["variant"]
        ]
        + [("n", "n1", n) for n in labels.get("n", []) if n != "n1" and "n1" in labels["n"]]
    ),
)


def _frame(outcomes: list[Outcome]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": [o.model for o in outcomes],
            "dataset": [o.group["dataset"] for o in outcomes],
            "phrase": [o.group["phrase"] for o in outcomes],
            "mode": [o.group["mode"] for o in outcomes],
            "n_responses": [int(o.group["n"]) for o in outcomes],
        }
    )


def combinations(outcomes: list[Outcome]) -> Iterable[tuple[tuple, list[Outcome]]]:
    """(model, dataset, phrase, mode, n) and its outcomes, in a stable order."""
    if not outcomes:
        return
    for key, idx in _frame(outcomes).groupby(COMBINATION, sort=True).groups.items():
        yield key, [outcomes[i] for i in idx]


def _mode_rank(mode: str) -> int:
    return MODES.index(mode) if mode in MODES else (-1 if not mode else len(MODES))


def summarize(outcomes: list[Outcome], ctx: SummaryContext) -> pd.DataFrame:
    """One row per (model, dataset, phrase, mode, n): counts and metrics with `_lo`/`_hi`."""

    def keys(o: Outcome) -> list[tuple]:
        g = o.group
        return [(o.model, g["dataset"], g["phrase"], g["mode"], int(g["n"]))]

    n_resamples, seed = ctx.n_resamples, ctx.seed
    reduce = reduce_counts_source if ctx.compat == "source" else reduce_counts
    rows = []
    for g in summarize_groups(outcomes, keys, case_counts, reduce, n_resamples, seed, LEVEL):
        row = g.row(COMBINATION, METRICS)
        if g.n:
            total = g.totals.astype(int).tolist()
            row |= dict(zip(("TP", "FP", "FN", "TN"), total[:4], strict=True))
            row |= {"correct": total[0] + total[3]}
            row |= {"individual_correct": total[4], "individual_total": total[5]}
        rows.append(row)
    rows.sort(key=lambda r: (r["model"], r["dataset"], r["phrase"] != "baseline", r["phrase"],
                             _mode_rank(r["mode"]), r["n_responses"]))  # fmt: skip
    columns = [*COMBINATION, "n", "n_error", "correct", "TP", "TN", "FP", "FN"]
    columns += ["individual_correct", "individual_total"]
    columns += interval_columns(METRICS)
    return pd.DataFrame(rows, columns=columns)


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per combination: accuracy, macro F1 and (n > 1) individual accuracy."""
    cols = [*COMBINATION, "n", "n_error"]
    cols += interval_columns(("accuracy", "macro_f1", "individual_accuracy"))
    return summary[cols].reset_index(drop=True)


def generator_recall(
    outcomes: list[Outcome], n_resamples: int = 1000, seed: int = 0, source: bool = False
) -> dict[str, dict[str, Any]]:
    """{generator: {recall, n, ci}}: the share of a generator's images labelled correctly
    (for `real` rows, the recall of the real class); unparsable votes count as wrong.
    `source` (`--compat source`): generator_recall_source."""
    if source:
        return generator_recall_source(outcomes, n_resamples, seed)
    out: dict[str, dict[str, Any]] = {}
    scored = [o for o in outcomes if o.status != "error"]
    for generator in sorted({o.group["generator"] for o in scored}):
        subset = [o for o in scored if o.group["generator"] == generator]
        rows = [[int(o.status == "correct"), 1] for o in subset]
        _, counts = counts_by_cluster([o.cluster for o in subset], rows)
        e = cluster_bootstrap(
            counts, lambda s: {"recall": safe_ratio(s[..., 0], s[..., 1])}, n_resamples, seed
        )["recall"]
        out[generator] = {"recall": e.value, "n": len(subset), "ci": [e.low, e.high]}
    return out


def generator_recall_source(
    outcomes: list[Outcome], n_resamples: int = 1000, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """{generator: {recall, n, ci}} as the source's radar: AI images only, TP / (TP + FN) with
    a None vote in neither (0.0 when both are 0), `real` and `unknown` left out; n = TP + FN.
    The interval (not in the source) is the usual bootstrap over images."""
    out: dict[str, dict[str, Any]] = {}
    scored = [o for o in outcomes if o.status != "error" and o.params["label"] == AI]
    counts = sm.generator_counts([(o.group["generator"], AI, o.scores["y_pred"]) for o in scored])
    for generator, c in sorted(counts.items()):
        subset = [o for o in scored if o.group["generator"] == generator]
        rows = [[int(o.scores["y_pred"] == AI), int(o.scores["y_pred"] in (AI, REAL))]
                for o in subset]  # fmt: skip
        _, by_cluster = counts_by_cluster([o.cluster for o in subset], rows)
        e = cluster_bootstrap(
            by_cluster,
            lambda s: {"recall": sm.zero_ratio(s[..., 0], s[..., 1])},
            n_resamples,
            seed,
        )["recall"]
        tp, fn = c["TP"], c["FN"]
        out[generator] = {"recall": sm.recall(tp, fn), "n": tp + fn, "ci": [e.low, e.high]}
    return out


def _num(value: Any) -> Any:
    """JSON-safe number: NaN -> None, numpy scalars -> Python."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _count(value: Any) -> int | None:
    """A count read back from the summary table (where NaN turns int columns to float)."""
    value = _num(value)
    return None if value is None else int(value)


def performance(row: pd.Series, generators: dict, n_resamples: int, seed: int) -> dict:
    """The source's performance_<ts>.json for one summary row (plus intervals, generators)."""
    n = int(row["n_responses"])
    metrics: dict[str, Any] = {
        "total_examples": int(row["n"]),
        "correct_predictions": _count(row.get("correct")),
        "accuracy": _num(row["accuracy"]),
        "macro_f1": _num(row["macro_f1"]),
        "class_metrics": {
            label: {k: _num(row[f"{k}_{suffix}"]) for k in ("precision", "recall", "f1")}
            for label, suffix in ((REAL, "real"), (AI, "ai"))
        },
        "confusion_matrix": {k: _count(row.get(k)) for k in ("TP", "TN", "FP", "FN")},
    }
    if n > 1:
        metrics["individual_responses"] = {
            "total": _count(row.get("individual_total")),
            "correct": _count(row.get("individual_correct")),
            "accuracy": _num(row["individual_accuracy"]),
        }
    metrics["per_generator_recall"] = {
        g: {"recall": _num(v["recall"]), "n": v["n"], "ci": [_num(x) for x in v["ci"]]}
        for g, v in generators.items()
    }
    metrics["confidence_intervals"] = {
        m: [_num(row[f"{m}_lo"]), _num(row[f"{m}_hi"])]
        for m in METRICS
        if f"{m}_lo" in row and (n > 1 or m != "individual_accuracy")
    }
    metrics["bootstrap"] = {"resamples": n_resamples, "level": LEVEL, "seed": seed}
    metrics["errors"] = int(row["n_error"])
    return {
        "model": row["model"],
        "dataset": row["dataset"],
        "phrase": row["phrase"],
        "mode": row["mode"] or None,
        "n_responses": n,
        "metrics": metrics,
    }


def reasoning_entry(o: Outcome) -> dict[str, Any]:
    """One image's entry of reasoning_<ts>.json, in the source's keys (plus generator, error)."""
    label = o.params["label"]
    prediction = (o.prediction or {}).get("aggregated_prediction")
    entry = {
        "image": o.params["image"],
        "generator": o.group["generator"],
        "question": o.extra.get("question"),
        "full_prompt": o.extra.get("full_prompt"),
        "ground_truth": label,
        "responses": list(o.extra.get("responses", [])),
        "aggregated_prediction": prediction,
        "aggregated_score": int(prediction == label),
        "vote_distribution": (o.prediction or {}).get("vote_distribution", {}),
    }
    if o.status == "error":
        entry["error"] = o.error
    return entry


def log_text(key: tuple, group: list[Outcome], perf: dict | None, files: list[Path]) -> str:
    """evaluation_<ts>.log: what ran, what came back, the metrics (perf None: nothing scored),
    where they went."""
    model, dataset, phrase, mode, n = key
    m = perf["metrics"] if perf else {"accuracy": None, "macro_f1": None, "confusion_matrix": None}
    statuses = Counter(o.status for o in group)
    sent = sum(o.backend_calls for o in group)
    cached = sum(o.cache_hits for o in group)
    lines = [
        f"dataset={dataset} model={model} phrase={phrase} mode={mode or '-'} n={n}",
        f"stage 1 temperature={0.0 if n == 1 else 1.0}, stage 2 temperature=0.0",
        f"examples: {len(group)}; statuses: {dict(sorted(statuses.items()))}",
        f"model calls: {sent} sent, {cached} served from cache",
        f"accuracy={m['accuracy']} macro_f1={m['macro_f1']} confusion={m['confusion_matrix']}",
    ]
    if "individual_responses" in m:
        lines.append(f"individual responses: {m['individual_responses']}")
    lines += [f"error {o.case_id}: {o.error}" for o in group if o.status == "error"]
    lines += [f"wrote {p}" for p in files]
    return "\n".join(lines) + "\n"


def write_outputs(
    outcomes: list[Outcome], summary: pd.DataFrame, out_dir: Path, ctx: SummaryContext
) -> list[Path]:
    """Per combination, the source's reasoning/performance/log files in its folder hierarchy;
    in the run folder, generator_recall.csv, report.md and the plots."""
    run = ctx.run
    ts = run.output.run_id
    source = ctx.compat == "source"
    written: list[Path] = []
    recall_rows = []
    summary_rows = {tuple(r[c] for c in COMBINATION): r for _, r in summary.iterrows()}
    for key, group in combinations(outcomes):
        model, dataset, phrase, mode, n = key
        folder = result_dir(run.output.results_dir, dataset, model, phrase, mode, int(n))
        generators = generator_recall(group, run.statistics.bootstrap, run.seed, source)
        if source:
            written += write_source_files(key, group, run)
        else:
            perf = performance(summary_rows[key], generators, run.statistics.bootstrap, run.seed)
            group.sort(key=lambda o: int(o.params["row"]))
            files = [folder / f"reasoning_{ts}.json", folder / performance_name(ts)]
            _write_json(files[0], [reasoning_entry(o) for o in group])
            _write_json(files[1], perf)
            log = folder / f"evaluation_{ts}.log"
            atomic_write_text(log, log_text(key, group, perf, files))
            written += [*files, log]
        recall_rows += [
            dict(zip(COMBINATION, key, strict=True))
            | {
                "generator": g,
                "recall": v["recall"],
                "recall_lo": v["ci"][0],
                "recall_hi": v["ci"][1],
                "n": v["n"],
            }
            for g, v in generators.items()
        ]
    recall_columns = [*COMBINATION, "generator", "recall", "recall_lo", "recall_hi", "n"]
    recall = pd.DataFrame(recall_rows, columns=recall_columns)  # a header even when empty
    ctx.report.add(report_text(summary, recall, ctx.data_label, run.models.names))
    sent = in_model_order(modes_sent(outcomes), run.models.names)
    if not sent.empty:
        ctx.report.add(
            "## What each mode sent\n\n"
            "Per model and phrase mode: where the phrase went in stage 1, and how stage 2's "
            "prefill (the stage-1 prefill, the reasoning and the answer cue) reached the "
            "model.\n\n" + markdown_table(sent) + "\n"
        )
    in_run = [write_csv(recall, out_dir / "generator_recall.csv")]
    # the source's figures, from this run's performance and reasoning files (the PNGs show in
    # the HTML report); a figure the data cannot make is skipped, its reason logged; none
    # without results/pgt (no outcomes: the plots would read a missing folder as a file)
    if not (run.output.results_dir / "pgt").is_dir():
        return in_run + written
    from support.evaluations.pgt.plots import PlotSkipped, make_all

    performance_run = f"{sm.PERFORMANCE_FIXED_RUN_PREFIX}{ts}" if source else ts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlotSkipped)
        in_run += make_all(
            run.output.results_dir / "pgt",
            out_dir / "figures",
            run=performance_run,
            reasoning_run=ts,
            order=run.models.names,
        )
    return in_run + written  # the run folder's files first: the terminal lists the first few


def reasoning_entry_source(o: Outcome) -> dict[str, Any]:
    """One image's entry of the source's reasoning file: exactly its keys (helpers.py
    `evaluate_two_stage`); the vote distribution keeps None as "null"."""
    prediction = (o.prediction or {}).get("aggregated_prediction")
    return {
        "image": o.params["image"],
        "question": o.extra.get("question"),
        "full_prompt": o.extra.get("full_prompt"),
        "ground_truth": o.params["label"],
        "responses": list(o.extra.get("responses", [])),
        "aggregated_prediction": prediction,
        "aggregated_score": int(prediction == o.params["label"]),
        "vote_distribution": (o.prediction or {}).get("vote_distribution", {}),
    }


def write_source_files(key: tuple, group: list[Outcome], run: RunSettings) -> list[Path]:
    """`--compat source`: a combination's reasoning_<ts>.json, performance_fixed_<ts>.json and
    confidence.json in its folder, images in the source's order, and its log under
    results/pgt/logs/. Backend errors (the source has none: it stops) are left out of the files
    and named in the log; nothing is written when no image was scored."""
    model, dataset, phrase, mode, n = key
    n = int(n)
    ts = run.output.run_id
    folder = result_dir(run.output.results_dir, dataset, model, phrase, mode, n)
    group.sort(key=lambda o: int(o.params.get("order", o.params["row"])))
    scored = [o for o in group if o.status != "error"]
    logs = log_dir(run.output.results_dir, dataset, model, phrase, mode, n) / f"evaluation_{ts}.log"
    if not scored:
        atomic_write_text(logs, log_text(key, group, None, []))
        return [logs]
    entries = [reasoning_entry_source(o) for o in scored]
    y_true = [e["ground_truth"] for e in entries]
    y_pred = [e["aggregated_prediction"] for e in entries]
    individual = [
        (r.get("extracted_prediction"), e["ground_truth"]) for e in entries for r in e["responses"]
    ]
    source_mode = mode or sm.DEFAULT_MODE  # the source records baseline's --mode (default)
    perf = {
        "model": model,
        "dataset": dataset,
        "phrase": phrase,
        "mode": source_mode,
        "n_responses": n,
        "metrics": sm.performance_metrics(y_true, y_pred, individual),
    }
    confidence = {
        "macro_f1": sm.bootstrap_macro_f1(y_true, y_pred),
        "metadata": {
            "dataset": dataset,
            "model": model,
            "phrase": phrase,
            "mode": source_mode,
            "n_responses": n,
            "n_examples": len(y_pred),
        },
    }
    files = [
        folder / f"reasoning_{ts}.json",
        folder / performance_name(ts, source=True),
        folder / sm.CONFIDENCE_FILE,
    ]
    for path, obj in zip(files, (entries, perf, confidence), strict=True):
        atomic_write_text(path, json.dumps(obj, indent=2))  # as json.dump(obj, f, indent=2)
    atomic_write_text(logs, log_text(key, group, perf, files))
    return [*files, logs]


def _write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


# where each phrase mode puts the phrase (phrases.build_prompt)
MODE_SENT = {
    "prompt": "user turn: the phrase as an instruction",
    "instruct": "system message: the phrase as an instruction",
    "prefill-pseudo-system": "system message: start with the phrase",
    "prefill-pseudo-user": "user turn: start with the phrase",
}
# how a prefill reaches a model (ModelSpec.prefill)
PREFILL_SENT = {
    "native": "prefill, continued by the model",
    "assistant-turn fallback": "prefill as a final assistant turn (answered after, not continued)",
    "model-turn fallback": "prefill as a final model turn (answered after, not continued)",
    "unsupported": "prefill: unsupported; sent as a user-turn instruction to continue it",
    "request": "prefill (a reference model reads the request)",
}


def modes_sent(outcomes: Iterable[Outcome]) -> pd.DataFrame:
    """Per model (other than the reference models) and phrase mode: what was sent, from the
    model's traits and what its backend adapted (Outcome.adapted). Empty for a run of
    reference models only."""
    from support.backends.api_models import PREFILL_AS_INSTRUCTION
    from support.backends.registry import UNSUPPORTED_PREFILL, spec_or_unregistered

    seen: dict[tuple[str, str], set[str]] = {}
    for o in outcomes:
        if o.status == "error" or o.extra.get("reused"):
            continue
        key = (o.model, o.params.get("mode") or "prefill")
        seen.setdefault(key, set()).update(o.adapted)
    rows = []
    for (model, mode), adapted in sorted(seen.items()):
        spec = spec_or_unregistered(model)
        if spec.kind == "reference":
            continue
        unsupported = PREFILL_AS_INSTRUCTION in adapted or spec.prefill == UNSUPPORTED_PREFILL
        mode_of_prefill = UNSUPPORTED_PREFILL if unsupported else spec.prefill
        prefill = PREFILL_SENT.get(mode_of_prefill, mode_of_prefill)  # a plugin's own: as named
        rows.append(
            {
                "model": model,
                "mode": mode,
                "stage_1": prefill if mode == "prefill" else MODE_SENT.get(mode, mode),
                "stage_2": prefill,
                "adapted": "; ".join(sorted(a for a in adapted if a != PREFILL_AS_INSTRUCTION)),
            }
        )
    return pd.DataFrame(rows, columns=["model", "mode", "stage_1", "stage_2", "adapted"])


def report_text(
    summary: pd.DataFrame,
    recall: pd.DataFrame,
    data: str | None = None,
    models: Sequence[str] = (),
) -> str:
    """report.md: what the data is, the headline table and per-generator recall, with 95%
    intervals; models in `models` order (the run's `--model` order), the others after."""
    head = in_model_order(headline(summary), models)
    recall = in_model_order(recall, models)
    metrics = [c for c in head.columns if f"{c}_lo" in head.columns]
    parts = [
        *report_head("PGT: real vs AI-generated image detection", data),
        "Majority vote over n responses (ties -> real); positive class ai-generated; "
        "95% bootstrap intervals over images.",
        "",
        markdown_table(with_intervals(head, metrics)),
    ]
    if not recall.empty:
        parts += [
            "",
            "## Recall per generator",
            "",
            markdown_table(with_intervals(recall, ["recall"])),
        ]
    return "\n".join(parts) + "\n"
