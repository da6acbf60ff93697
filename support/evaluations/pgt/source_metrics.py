"""The original's metrics and result files under `--compat source` (Zero-shot-PGT, commit f42b715).

- Confusion matrix with `ai-generated` positive; a prediction that is neither label (None) is a
  wrong answer: FP for a real image, FN for an AI one (helpers.py `_build_confusion_matrix`).
- Precision, recall and F1 are 0 where their denominator is 0, F1 = 2PR / (P + R)
  (helpers.py:645-652); macro F1 is the mean of the two classes' F1.
- confidence.json: macro F1 only, 10,000 resamples of the images, resample i drawn by
  `np.random.RandomState(0 + i).choice(n, n, replace=True)`, bounds by `np.percentile`
  (results/compute_confidence_intervals.py:40-134).
- Recall per generator: AI images only, TP (voted ai-generated) over TP + FN (voted real); a None
  vote is in neither; generators `real` and `unknown` are left out (results/plot_recall_radar.py
  :112-178, 204-205; at f42b715 that script draws recall bars, 706af7f drew the radar).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from support.evaluations.pgt.answers import AI, REAL

N_BOOTSTRAP = 10_000  # compute_confidence_intervals.py: N_BOOTSTRAP
CONFIDENCE_LEVEL = 0.95  # CONFIDENCE_LEVEL
RANDOM_SEED = 0  # RANDOM_SEED: resample i uses RandomState(RANDOM_SEED + i)
CONFUSION = ("TP", "FP", "FN", "TN")  # the order of a count row
RADAR_LEFT_OUT = ("real", "unknown")  # generators the source's radar leaves out
PERFORMANCE_FIXED_RUN_PREFIX = "fixed_"  # what a reader of performance_<run>.json sees as <run>
CONFIDENCE_FILE = "confidence.json"  # per combination folder (compute_confidence_intervals.py)
DEFAULT_MODE = "prefill"  # evaluate.py: --mode default, recorded for baseline too


def confusion_code(truth: str, prediction: object) -> int:
    """The index in CONFUSION of one (truth, prediction); a non-label prediction is wrong."""
    if truth == AI:
        return 0 if prediction == AI else 2
    return 3 if prediction == REAL else 1


def confusion_rows(y_true: Sequence[str], y_pred: Sequence[object]) -> np.ndarray:
    """(n, 4) one-hot count rows (CONFUSION order), one per image."""
    codes = [confusion_code(t, p) for t, p in zip(y_true, y_pred, strict=True)]
    return np.eye(len(CONFUSION), dtype=np.int64)[np.asarray(codes, dtype=np.intp)]


def zero_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, 0 where den is 0 (the source's `x / y if y > 0 else 0`)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def _f1(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(p + r > 0, 2 * p * r / np.where(p + r > 0, p + r, 1.0), 0.0)


def class_metrics(tp: Any, fp: Any, fn: Any, tn: Any) -> dict[str, dict[str, np.ndarray]]:
    """{'ai-generated': {precision, recall, f1}, 'real': {...}} with the source's zero rules;
    vectorised over any leading shape."""
    ai_p, ai_r = zero_ratio(tp, np.add(tp, fp)), zero_ratio(tp, np.add(tp, fn))
    real_p, real_r = zero_ratio(tn, np.add(tn, fn)), zero_ratio(tn, np.add(tn, fp))
    return {
        AI: {"precision": ai_p, "recall": ai_r, "f1": _f1(ai_p, ai_r)},
        REAL: {"precision": real_p, "recall": real_r, "f1": _f1(real_p, real_r)},
    }


def macro_f1(counts: np.ndarray) -> np.ndarray:
    """Macro F1 of (..., 4) CONFUSION counts: the mean of the two classes' F1 (real + ai) / 2."""
    counts = np.asarray(counts)
    m = class_metrics(counts[..., 0], counts[..., 1], counts[..., 2], counts[..., 3])
    return (m[REAL]["f1"] + m[AI]["f1"]) / 2


def performance_metrics(
    y_true: Sequence[str], y_pred: Sequence[object], individual: Sequence[tuple[object, str]]
) -> dict[str, Any]:
    """The `metrics` object of the source's performance file (helpers.py `calculate_metrics`), in
    its key order; `individual` is every response's (prediction, truth), reported when there are
    more responses than images (n > 1)."""
    tp, fp, fn, tn = (int(x) for x in confusion_rows(y_true, y_pred).sum(axis=0))
    cm = class_metrics(tp, fp, fn, tn)
    correct = sum(1 for t, p in zip(y_true, y_pred, strict=True) if p == t)
    metrics: dict[str, Any] = {
        "total_examples": len(y_true),
        "correct_predictions": correct,
        "accuracy": correct / len(y_true),
        "confusion_matrix": {"TP": tp, "TN": tn, "FP": fp, "FN": fn},
        "class_metrics": {
            label: {k: float(v) for k, v in cm[label].items()} for label in (AI, REAL)
        },
        "macro_f1": float((cm[REAL]["f1"] + cm[AI]["f1"]) / 2),
    }
    if len(individual) > len(y_true):
        right = sum(1 for p, t in individual if p == t)
        metrics["individual_responses"] = {
            "total": len(individual),
            "correct": right,
            "accuracy": right / len(individual),
        }
    return metrics


def bootstrap_macro_f1(
    y_true: Sequence[str],
    y_pred: Sequence[object],
    n_bootstrap: int = N_BOOTSTRAP,
    confidence_level: float = CONFIDENCE_LEVEL,
    random_seed: int = RANDOM_SEED,
) -> dict[str, Any]:
    """The `macro_f1` object of the source's confidence.json: the point estimate and the
    percentile interval of `n_bootstrap` resamples of the images in the given order.

    Resample i re-seeds one legacy generator with `random_seed + i` (the same stream as
    `np.random.RandomState(random_seed + i)`) and draws `choice(n, size=n, replace=True)`."""
    codes = confusion_rows(y_true, y_pred).argmax(axis=1)
    n = len(codes)
    point = float(macro_f1(np.bincount(codes, minlength=4)))
    rng = np.random.RandomState()
    draws = np.empty((n_bootstrap, 4), dtype=np.int64)
    for i in range(n_bootstrap):
        rng.seed(random_seed + i)
        draws[i] = np.bincount(codes[rng.choice(n, size=n, replace=True)], minlength=4)
    scores = macro_f1(draws)
    alpha = 1 - confidence_level  # the source's arithmetic, so the percentiles are its own
    low = np.percentile(scores, (alpha / 2) * 100)
    high = np.percentile(scores, (1 - alpha / 2) * 100)
    return {
        "point": point,
        "ci_95": [float(low), float(high)],
        "n_bootstrap": n_bootstrap,
        "confidence_level": confidence_level,
    }


def generator_counts(entries: Sequence[tuple[str, str, object]]) -> dict[str, dict[str, int]]:
    """{generator: {"TP", "FN"}} over (generator, truth, prediction) of AI images; a prediction
    that is neither label counts in neither (plot_recall_radar.py
    `load_reasoning_json_with_subsets`)."""
    out: dict[str, dict[str, int]] = {}
    for generator, truth, prediction in entries:
        if truth != AI:
            continue
        counts = out.setdefault(generator, {"TP": 0, "FN": 0})
        if prediction == AI:
            counts["TP"] += 1
        elif prediction == REAL:
            counts["FN"] += 1
    return {g: c for g, c in out.items() if g not in RADAR_LEFT_OUT}


def recall(tp: int, fn: int) -> float:
    """TP / (TP + FN), 0.0 when both are 0 (`compute_recall_per_subset`, as a fraction)."""
    return tp / (tp + fn) if tp + fn > 0 else 0.0
