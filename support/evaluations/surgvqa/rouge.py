"""SurgVU 2026's ROUGE rows: ROUGE-1, ROUGE-2 and ROUGE-L F-measure, each the max over references.

As the official category-2 evaluator (isi-challenges/surgvu26-category-2-eval-public,
evaluation/evaluate.py, `compute_rouge`): `rouge_score.RougeScorer(["rouge1", "rouge2", "rougeL"],
use_stemmer=True)`, `score(reference, candidate)` on the normalised texts (bleu.normalize), the
F-measure of each, the max over references per metric (each metric's best reference on its own),
0.0 without references. The scores are rouge-score's; only the candidate's cut past
bleu.MAX_CANDIDATE_TOKENS is vlmbench's (bleu.scored_text; docs/compat.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from support.evaluations.surgvqa.bleu import normalize, scored_text
from support.evaluations.surgvqa.leaderboard import ROUGE_METRICS


@cache
def _scorer() -> Any:  # rouge_score's RougeScorer (it has no type hints)
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer(list(ROUGE_METRICS), use_stemmer=True)


def rouge_scores(references: Sequence[str], candidate: object) -> dict[str, float]:
    """{"rouge1", "rouge2", "rougeL"}: the best F-measure over the references, each alone."""
    cand = scored_text(candidate)
    best = dict.fromkeys(ROUGE_METRICS, 0.0)
    for ref in references:
        got = _scorer().score(normalize(ref), cand)
        for m in ROUGE_METRICS:
            best[m] = max(best[m], float(got[m].fmeasure))
    return best
