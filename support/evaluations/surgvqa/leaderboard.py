"""The official category-2 evaluator's metrics file (`metrics.json`); which VQA scores a run has.

Layout, as isi-challenges/surgvu26-category-2-eval-public, evaluation/evaluate.py (`main` and
`compute_heavy_metrics`): `{"results": [{"case_id": ..., <metric>: ...}, ...], "aggregates":
{<metric>: mean}}`, the metrics in the order of its METRIC_KEYS, `aggregates` only when there are
results, each mean by `statistics.mean` (exact; it differs from sum / n by up to an ulp). A run
under --surgvqa-metrics 2025 writes the same layout with `bleu_score` alone.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from support.evaluations.surgvqa.semantic import SEMANTIC_METRICS
from support.types import Outcome

ROUGE_METRICS = ("rouge1", "rouge2", "rougeL")  # rouge-score's names
TEXT_SCORES = ("bleu", *ROUGE_METRICS)  # scored on the workers
VQA_SCORES = (*SEMANTIC_METRICS, *TEXT_SCORES)  # the official METRIC_KEYS order
OFFICIAL_KEYS = {  # vlmbench's score -> the official metrics.json key
    "bertscore_f1": "bertscore_f1",
    "nli_entailment": "nli_entailment",
    "nli_bertscore_f1": "nli_bertscore_f1",
    "bleu": "bleu_score",
    "rouge1": "rouge1_score",
    "rouge2": "rouge2_score",
    "rougeL": "rougeL_score",
}


def scores_present(outcomes: Sequence[Outcome]) -> tuple[str, ...]:
    """The VQA scores of VQA_SCORES that every answered VQA outcome holds, in that order (BLEU
    always: every VQA case is scored by it)."""
    answered = [o for o in outcomes if o.params.get("category") != "tools" and o.status != "error"]
    return tuple(
        m for m in VQA_SCORES if m == "bleu" or (answered and all(m in o.scores for o in answered))
    )


def metrics_json(
    rows: Sequence[tuple[str, Mapping[str, Any]]], metrics: Sequence[str]
) -> dict[str, Any]:
    """metrics.json of `rows` ((case id, scores) in case order) with `metrics` (of VQA_SCORES)."""
    keys = [m for m in VQA_SCORES if m in metrics]
    results = [
        {"case_id": case, **{OFFICIAL_KEYS[m]: float(scores[m]) for m in keys}}
        for case, scores in rows
    ]
    out: dict[str, Any] = {"results": results}
    if results:
        out["aggregates"] = {
            OFFICIAL_KEYS[m]: statistics.mean(r[OFFICIAL_KEYS[m]] for r in results) for m in keys
        }
    return out
