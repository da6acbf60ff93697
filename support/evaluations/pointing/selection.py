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

from support.evaluations.pointing.classes import CLASS_NAMES, ORGAN_IDS

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


# ---- the original's rules (`--compat source`) ----------------------------------------------------
# fallcat/llm_cholec_organ src/few_shot_selection.py and notebooks_py/prepare_fewshot_examples.py
# (4ebb357): presence at >= 50 px, balanced test rows with seed 42, plans with seeds 43 and 45.
# Rows are plain dataset row numbers; "spacing" compares row numbers across videos, as there.
SOURCE_MIN_PIXELS = 50
SOURCE_SEEDS = {"balanced": 42, "standard": 43, "near_miss": 45}
SOURCE_SPACING = 100  # rows between picks of `select_diverse`


def select_balanced_source(Y: np.ndarray, n: int, seed: int = 42) -> list[int]:
    """The original's greedy balanced selection; rows in the order they were picked.

    Each step looks at the organs picked least so far ("rare"), scores every row still available
    by how many of them it shows, and draws uniformly (`rng.choice`, seeded) among the rows with
    the top score, listed in ascending row order; when no row shows a rare organ, it draws among
    all available rows. No spacing rule. The original raises when n exceeds the rows; here n is
    capped at the number of rows.
    """
    Yb = (np.asarray(Y) != 0).astype(np.int64)
    if Yb.ndim != 2 or Yb.shape[1] != len(ORGAN_IDS):
        raise ValueError(f"presence matrix must be (N, {len(ORGAN_IDS)}), got {Yb.shape}")
    rng = np.random.default_rng(seed)
    counts = np.zeros(Yb.shape[1], dtype=np.int64)
    available = np.ones(Yb.shape[0], dtype=bool)
    picked: list[int] = []
    for _ in range(min(int(n), Yb.shape[0])):
        rows = np.flatnonzero(available)  # ascending, as the original's set of ints iterates
        score = Yb[rows][:, counts == counts.min()].sum(axis=1)
        pool = rows[score == score.max()] if score.max() > 0 else rows
        row = int(rng.choice(pool))
        picked.append(row)
        counts += Yb[row]
        available[row] = False
    return picked


def select_diverse(
    candidates: Sequence[int],
    n: int,
    rng: np.random.Generator,
    min_spacing: int = SOURCE_SPACING,
    avoid: Iterable[int] = (),
) -> list[int]:
    """The original's `_select_diverse_indices`: up to n candidates at least min_spacing rows apart.

    All of them when there are at most n (no draw). Else the sorted candidates are visited in a
    seeded random order (`rng.shuffle` of their positions), taking each that keeps min_spacing
    from the picks and from `avoid`; if that falls short, the sorted candidates are swept again
    with the spacing halved while it stays above 10 (`avoid` no longer counts), and any remainder
    is drawn at random from the candidates left (`rng.choice`, without replacement).
    """
    cands = [int(c) for c in candidates]
    if len(cands) <= n:
        return cands
    ordered = sorted(cands)
    blocked = [int(a) for a in avoid]
    picks: list[int] = []

    def far(row: int, others: Sequence[int], spacing: int) -> bool:
        return all(abs(row - o) >= spacing for o in others)

    order = list(range(len(ordered)))
    rng.shuffle(order)
    for i in order:
        if len(picks) >= n:
            break
        if far(ordered[i], picks, min_spacing) and far(ordered[i], blocked, min_spacing):
            picks.append(ordered[i])
    spacing = min_spacing // 2
    while len(picks) < n and spacing > 10:
        for row in ordered:
            if len(picks) >= n:
                break
            if row not in picks and far(row, picks, spacing):
                picks.append(row)
        spacing //= 2
    if len(picks) < n:
        rest = [c for c in cands if c not in picks]
        if rest:
            picks += rng.choice(rest, min(n - len(picks), len(rest)), replace=False).tolist()
    return picks[:n]


def _pool_lists(Y: np.ndarray, exclude: Iterable[int]) -> tuple[list[int], np.ndarray]:
    """The rows not excluded (ascending) and their presence rows."""
    Yb = (np.asarray(Y) != 0).astype(np.int64)
    if Yb.ndim != 2 or Yb.shape[1] != len(ORGAN_IDS):
        raise ValueError(f"presence matrix must be (N, {len(ORGAN_IDS)}), got {Yb.shape}")
    excluded = {int(i) for i in exclude}
    pool = [r for r in range(Yb.shape[0]) if r not in excluded]
    if not pool:
        raise ValueError("no rows left after excluding the test rows")
    return pool, Yb[pool]


def source_plan_rows(
    Y: np.ndarray,
    exclude: Iterable[int],
    seed: int,
    n_pos: int = 1,
    n_neg_easy: int = 1,
    n_near_miss: int = 0,
) -> dict[str, dict[str, Any]]:
    """The rows of the original's few-shot plans, per organ id (str) in id order.

    n_near_miss == 0: `build_fewshot_plan` (standard plan: positives by `rng.choice` without
    replacement, easy negatives by `select_diverse`). n_near_miss > 0:
    `build_fewshot_plan_with_nearmiss` (positives and easy negatives by `select_diverse`, then
    near-miss rows: frames that DO show the organ, drawn by `rng.choice` among the positives not
    picked, or among all positives when too few are left). The pool is every row not excluded; Y
    is presence at >= 50 px. Returns {"1": {"positives", "negatives_easy", "near_miss" (only with
    n_near_miss), "pos_available", "neg_available"}, ...}; one rng serves all organs in order.
    """
    pool, Yp = _pool_lists(Y, exclude)
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, Any]] = {}
    for j, cid in enumerate(ORGAN_IDS):
        pos_avail = [pool[i] for i in np.flatnonzero(Yp[:, j] == 1)]
        neg_avail = [pool[i] for i in np.flatnonzero(Yp[:, j] == 0)]
        pos: list[int] = []
        if n_pos > 0 and pos_avail:
            if n_near_miss > 0:
                pos = select_diverse(pos_avail, n_pos, rng)
            else:
                pos = rng.choice(pos_avail, min(n_pos, len(pos_avail)), replace=False).tolist()
        easy = select_diverse(neg_avail, n_neg_easy, rng) if n_neg_easy > 0 and neg_avail else []
        entry: dict[str, Any] = {"positives": [int(r) for r in pos], "negatives_easy": easy}
        if n_near_miss > 0:
            near: list[int] = []
            if pos_avail:
                rest = [r for r in pos_avail if r not in pos]
                src = rest if len(rest) >= n_near_miss else pos_avail
                k = n_near_miss if src is rest else min(n_near_miss, len(pos_avail))
                near = rng.choice(src, k, replace=False).tolist()
            entry["near_miss"] = [int(r) for r in near]
        entry["pos_available"], entry["neg_available"] = len(pos_avail), len(neg_avail)
        out[str(cid)] = entry
    return out


def near_miss_negative(
    Y: np.ndarray, organ: int, reference: int, exclude: Iterable[int], gap: int = 3
) -> int | None:
    """A near-miss negative for a plan that has none (the original's near-miss plan lists frames
    that show the organ, under `near_miss`): the row without `organ` whose other organs are most
    like those of row `reference` (Jaccard), ties to the lowest row; rows closer than `gap` rows
    to an excluded row (test rows, the plan's other examples) are left out. None if no row fits.
    """
    Yb = (np.asarray(Y) != 0).astype(np.int64)
    j = ORGAN_IDS.index(organ)
    allowed = Yb[:, j] == 0
    for row in {int(r) for r in exclude}:
        allowed[max(0, row - gap + 1) : row + gap] = False
    rows = np.flatnonzero(allowed)
    if rows.size == 0:
        return None
    sim = jaccard(np.delete(Yb[rows], j, axis=1), np.delete(Yb[reference], j))
    return int(rows[int(np.argmax(sim))])
