"""Row selection for the pointing evaluation: the balanced test set and the few-shot example plans.

Pure functions of a presence matrix Y (N rows x 12 organs, uint8; column j is organ ORGAN_IDS[j])
and the video id of each row. Rows of one video are consecutive frames, so the spacing rule
"min_gap" compares row numbers: two picks from the same video must be at least min_gap rows apart.
Everything is integer arithmetic or seeded `np.random.default_rng`, so results are reproducible.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from support.pointing.classes import CLASS_NAMES, ORGAN_IDS

_SCALE = 1 << 20  # fixed-point scale of the greedy weights (integer maths: no platform drift)
# the balanced targets take at most this share of the rows that could be picked for an organ,
# leaving the rest for the few-shot plans (binds only on small data: the real rows are plenty)
_TARGET_SHARE = (2, 3)


class _Spacing:
    """Rows still allowed under the min_gap rule, as picks are made (row numbers, same video)."""

    def __init__(self, video_ids: Sequence[str], min_gap: int) -> None:
        _, self.codes = np.unique(np.asarray(video_ids, dtype=str), return_inverse=True)
        self.gap = max(int(min_gap), 1)  # a row always blocks itself
        self.blocked = np.zeros(len(self.codes), dtype=bool)

    def capacity(self, mask: np.ndarray) -> int:
        """How many rows of mask could be picked together (greedy, first row first, per video)."""
        last: dict[int, int] = {}
        count = 0
        for row in np.flatnonzero(mask).tolist():
            code = int(self.codes[row])
            if row - last.get(code, -self.gap) >= self.gap:
                last[code] = row
                count += 1
        return count

    def take(self, row: int) -> None:
        lo, hi = max(0, row - self.gap + 1), min(len(self.codes), row + self.gap)
        self.blocked[lo:hi] |= self.codes[lo:hi] == self.codes[row]


def _check(Y: np.ndarray, video_ids: Sequence[str]) -> np.ndarray:
    Y = np.asarray(Y)
    if Y.ndim != 2 or Y.shape[1] != len(ORGAN_IDS):
        raise ValueError(f"presence matrix must be (N, {len(ORGAN_IDS)}), got {Y.shape}")
    if len(video_ids) != Y.shape[0]:
        raise ValueError(f"{len(video_ids)} video ids for {Y.shape[0]} rows")
    return (Y != 0).astype(np.int64)


def select_balanced(Y: np.ndarray, video_ids: Sequence[str], n: int, min_gap: int = 3) -> list[int]:
    """Greedily pick up to n rows whose organ labels are balanced; returns sorted row indices.

    Targets per organ: n//2 positive and n - n//2 negative rows, each capped at 2/3 of the rows
    that could be picked under the spacing rule (the rest stays for the few-shot plans).
    Each step takes the allowed row with the largest reduction of the remaining deficits, each
    organ's deficit weighted by its share still missing (rare organs count more as they lag);
    ties go to the row whose video has the fewest picks, then the lowest row index. Rows closer
    than min_gap to a pick of the same video are not allowed. Fewer than n rows come back only
    when the spacing rule leaves no allowed row.
    """
    Yb = _check(Y, video_ids)
    n_rows = Yb.shape[0]
    n = max(0, min(int(n), n_rows))
    spacing = _Spacing(video_ids, min_gap)
    # what exists: per organ, how many positive / negative rows could be picked under the spacing
    # rule; the targets take at most _TARGET_SHARE of it
    num, den = _TARGET_SHARE
    avail_pos = np.array([spacing.capacity(Yb[:, j] == 1) for j in range(Yb.shape[1])])
    avail_neg = np.array([spacing.capacity(Yb[:, j] == 0) for j in range(Yb.shape[1])])
    target_pos = np.minimum(n // 2, avail_pos * num // den)
    target_neg = np.minimum(n - n // 2, avail_neg * num // den)
    got_pos = np.zeros_like(target_pos)
    got_neg = np.zeros_like(target_neg)
    per_video = np.zeros(int(spacing.codes.max(initial=-1)) + 1, dtype=np.int64)
    picked: list[int] = []
    for _ in range(n):
        w_pos = np.maximum(target_pos - got_pos, 0) * _SCALE // np.maximum(target_pos, 1)
        w_neg = np.maximum(target_neg - got_neg, 0) * _SCALE // np.maximum(target_neg, 1)
        score = Yb @ w_pos + (1 - Yb) @ w_neg
        allowed = np.flatnonzero(~spacing.blocked)
        if allowed.size == 0:
            break
        best = allowed[score[allowed] == score[allowed].max()]
        row = int(best[np.lexsort((best, per_video[spacing.codes[best]]))[0]])
        picked.append(row)
        spacing.take(row)
        per_video[spacing.codes[row]] += 1
        got_pos += Yb[row]
        got_neg += 1 - Yb[row]
    return sorted(picked)


def jaccard(rows: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Jaccard similarity of each 0/1 row with ref; two empty sets count as identical (1.0)."""
    rows, ref = np.asarray(rows, dtype=np.int64), np.asarray(ref, dtype=np.int64)
    inter = rows @ ref
    union = rows.sum(axis=-1) + ref.sum() - inter
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


def build_fewshot_plan(
    Y: np.ndarray,
    video_ids: Sequence[str],
    exclude: Iterable[int],
    seed: int,
    n_pos: int = 1,
    n_neg_easy: int = 1,
    n_neg_hard: int = 0,
    min_gap: int = 3,
) -> dict[str, Any]:
    """Few-shot examples per organ, as the plan JSON: {"plan": {"1": {...}, ...}, "seed": ...}.

    For each organ (scarcest first; "plan" keys in ORGAN_IDS order): n_pos random rows containing
    it, then n_neg_hard near-miss rows without it (highest Jaccard similarity to its first positive
    over the other organs, ties drawn at random), then n_neg_easy random rows without it. No pick
    is an excluded (test) row, and every pick is at least min_gap rows from the excluded rows and
    from every other pick of the same video. A list that cannot be filled stays short and adds to
    "warnings".
    """
    Yb = _check(Y, video_ids)
    excluded = sorted({int(i) for i in exclude})
    if excluded and not 0 <= excluded[0] <= excluded[-1] < Yb.shape[0]:
        raise ValueError(f"excluded rows must lie in 0..{Yb.shape[0] - 1}")
    rng = np.random.default_rng(seed)
    spacing = _Spacing(video_ids, min_gap)
    for row in excluded:
        spacing.take(row)
    plan: dict[str, dict[str, list[int]]] = {}
    warnings: list[str] = []

    def draw(mask: np.ndarray, k: int, what: str, cid: int, hard_ref: np.ndarray | None = None):
        out: list[int] = []
        for _ in range(k):
            cand = np.flatnonzero(mask & ~spacing.blocked)
            if cand.size == 0:
                warnings.append(
                    f"organ {cid} ({CLASS_NAMES[cid]}): {what}: found {len(out)} of {k} rows"
                )
                break
            if hard_ref is not None:  # near miss: the most similar context, ties at random
                others = np.delete(Yb[cand], ORGAN_IDS.index(cid), axis=1)
                sim = jaccard(others, hard_ref)
                cand = cand[sim == sim.max()]
            row = int(rng.choice(cand))
            spacing.take(row)
            out.append(row)
        return out

    # scarcest organ first (fewest allowed positives or negatives), so common ones don't use up
    # the few rows a rare organ could take; ties in ORGAN_IDS order
    free = ~spacing.blocked
    scarcity = np.minimum((Yb[free] == 1).sum(axis=0), (Yb[free] == 0).sum(axis=0))
    for j in sorted(range(len(ORGAN_IDS)), key=lambda j: (int(scarcity[j]), j)):
        cid = ORGAN_IDS[j]
        has = Yb[:, j] == 1
        positives = draw(has, n_pos, "positives", cid)
        hard: list[int] = []
        if n_neg_hard and positives:
            ref = np.delete(Yb[positives[0]], j)
            hard = draw(~has, n_neg_hard, "negatives_hard", cid, hard_ref=ref)
        elif n_neg_hard:
            warnings.append(f"organ {cid} ({CLASS_NAMES[cid]}): negatives_hard: no positive")
        easy = draw(~has, n_neg_easy, "negatives_easy", cid)
        plan[str(cid)] = {"positives": positives, "negatives_easy": easy, "negatives_hard": hard}
    return {
        "plan": {str(cid): plan[str(cid)] for cid in ORGAN_IDS},
        "seed": int(seed),
        "n_pos": int(n_pos),
        "n_neg_easy": int(n_neg_easy),
        "n_neg_hard": int(n_neg_hard),
        "excluded": len(excluded),
        "min_gap": int(min_gap),
        "warnings": warnings,
    }
