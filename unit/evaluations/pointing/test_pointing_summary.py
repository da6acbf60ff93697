"""Pointing's tables from small hand-built outcome lists: per-case counts, the metrics, the row and
column order of summary.csv and the headline, intervals, report.md, the F1 plot and the original's
files under `--compat source` (support/evaluations/pointing/summary.py).

Every expected number is worked out by hand in a comment from the module docstring's rules:
accuracy = (tp + tn) / n, precision = tp / (tp + fp), recall = tp / (tp + fn),
F1 = 2tp / (2tp + fp + fn), pointing accuracy = hits / tp, point hit rate = hits / (tp + fn),
unparsable rate = unparsable / n; an unparsable answer is the wrong presence answer.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.container import BarContainer
from PIL import Image

from support.contract.evaluation import SummaryContext
from support.evaluations.pointing import summary as pointing_summary
from support.evaluations.pointing.classes import CLASS_NAMES, ORGAN_IDS
from support.evaluations.pointing.spec import PointingSettings, data_label
from support.evaluations.pointing.summary import (
    COMPARISONS,
    case_counts,
    gated_correct,
    headline,
    macro_case_counts,
    pair_key,
    presence_correct,
    ranked_organs,
    reduce_counts,
    reduce_macro,
    reduce_source_counts,
    report_text,
    source_metrics,
    source_records,
    summarize,
    write_outputs,
    write_source_files,
)
from support.settings import RunSettings
from support.types import Outcome

LIVER, FAT = 2, 4  # organ ids (classes.py)
METRIC_COLUMNS = [
    f"{m}{s}"
    for m in (
        "accuracy",
        "precision",
        "recall",
        "f1",
        "pointing_accuracy",
        "point_hit_rate",
        "unparsable_rate",
    )
    for s in ("", "_lo", "_hi")
]
MACRO_COLUMNS = [
    f"{m}{s}"
    for m in ("macro_presence_accuracy", "macro_hit_rate", "macro_gated_accuracy", "macro_f1")
    for s in ("", "_lo", "_hi")
]
GATED_COLUMNS = ["gated_accuracy", "gated_accuracy_lo", "gated_accuracy_hi"]


def case(
    organ: int,
    y_true: int,
    y_pred: int | None,
    hit: bool | None = None,
    *,
    model: str = "m",
    condition: str = "zero_shot",
    row: int = 0,
    video: str = "v0",
    error: bool = False,
    compat: str | None = None,
) -> Outcome:
    """One scored case (or a backend error) as the pointing task records it."""
    name = CLASS_NAMES.get(organ, f"organ{organ}")
    params = {"row": row, "organ": organ} | ({"compat": compat} if compat else {})
    status = "error" if error else ("correct" if y_pred == y_true else "wrong")
    return Outcome(
        case_id=f"s{row:04d}-{name}-{condition}-{model}",
        evaluation="pointing",
        model=model,
        status=status,
        group={"condition": condition, "organ": name},
        cluster=video,
        scores={} if error else {"y_true": y_true, "y_pred": y_pred, "hit": hit},
        prediction=None if y_pred is None else {"present": y_pred, "point": [3, 4]},
        raw=f"answer {row}-{organ}",
        params=params,
    )


# ---- per-case counts and reducers ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("y_true", "y_pred", "hit", "counts", "correct", "gated"),
    [
        # counts: tp, fp, fn, tn, hits, unparsable; gated = ("present and hit") == truth
        (1, 1, True, [1, 0, 0, 0, 1, 0], 1, 1),
        (1, 1, False, [1, 0, 0, 0, 0, 0], 1, 0),
        (1, 1, None, [1, 0, 0, 0, 0, 0], 1, 0),
        (0, 1, None, [0, 1, 0, 0, 0, 0], 0, 1),  # a false "present" cannot hit: gated correct
        (1, 0, None, [0, 0, 1, 0, 0, 0], 0, 0),
        (0, 0, None, [0, 0, 0, 1, 0, 0], 1, 1),
        (1, None, None, [0, 0, 1, 0, 0, 1], 0, 0),  # unparsable on a present organ: a miss
        (0, None, None, [0, 1, 0, 0, 0, 1], 0, 1),  # on an absent one: a false alarm, no hit
    ],
)
def test_case_counts(y_true: int, y_pred, hit, counts: list[int], correct: int, gated: int) -> None:
    o = case(LIVER, y_true, y_pred, hit)
    assert case_counts(o) == counts
    assert presence_correct(o) == correct
    assert gated_correct(o) == gated
    # the macro layout: the same tp, fp, fn, tn, hits and gated in the organ's block of six
    block = macro_case_counts(o).reshape(12, 6)
    assert block[ORGAN_IDS.index(LIVER)].tolist() == [*counts[:5], gated]
    assert np.delete(block, ORGAN_IDS.index(LIVER), axis=0).sum() == 0


def test_case_counts_without_a_hit_score() -> None:
    o = Outcome("c-m", "pointing", "m", "correct", scores={"y_true": 1, "y_pred": 1})
    assert case_counts(o) == [1, 0, 0, 0, 0, 0]
    assert gated_correct(o) == 0


def test_reduce_counts_by_hand() -> None:
    # tp 3, fp 1, fn 2, tn 4, hits 2, unparsable 1 (n = 10)
    s = np.array([[3, 1, 2, 4, 2, 1], [0, 0, 0, 5, 0, 0]], dtype=float)
    out = reduce_counts(s)
    expected = {
        "accuracy": [7 / 10, 1.0],  # (3 + 4) / 10; 5 / 5
        "precision": [3 / 4, 1.0],  # nothing predicted, nothing present: 1.0 (metrics.py)
        "recall": [3 / 5, 1.0],
        "f1": [6 / 9, 1.0],  # 2*3 / (6 + 1 + 2)
        "pointing_accuracy": [2 / 3, math.nan],  # hits / tp; no tp: undefined
        "point_hit_rate": [2 / 5, math.nan],  # hits / (tp + fn)
        "unparsable_rate": [1 / 10, 0.0],
    }
    assert set(out) == set(expected)
    for k, v in expected.items():
        np.testing.assert_allclose(out[k], v, err_msg=k)
    # the source reducer adds gated accuracy = gated / (tp + fp + fn + tn): 6 / 10
    src = reduce_source_counts(np.array([3, 1, 2, 4, 2, 1, 6], dtype=float))
    assert float(src["gated_accuracy"]) == pytest.approx(0.6)
    assert float(src["f1"]) == pytest.approx(6 / 9)


def test_reduce_macro_by_hand() -> None:
    c = np.zeros((12, 6))
    c[0] = [1, 0, 1, 0, 1, 1]  # tp fp fn tn hits gated: acc 1/2, hit 1/2, gated 1/2, F1 2/3
    c[1] = [0, 1, 0, 1, 0, 2]  # acc 1/2, hit undefined, gated 2/2, F1 0/1 = 0
    # organs 3..12 never ran: every value undefined, left out of the means
    out = reduce_macro(c.reshape(-1))
    assert float(out["macro_presence_accuracy"]) == pytest.approx(0.5)
    assert float(out["macro_hit_rate"]) == pytest.approx(0.5)
    assert float(out["macro_gated_accuracy"]) == pytest.approx(0.75)  # (1/2 + 1) / 2
    assert float(out["macro_f1"]) == pytest.approx(1 / 3)  # (2/3 + 0) / 2
    # vectorised over a leading axis (the bootstrap); all undefined: NaN
    both = reduce_macro(np.stack([c.reshape(-1), np.zeros(72)]))
    assert both["macro_f1"].shape == (2,) and math.isnan(both["macro_f1"][1])


# ---- pairing -------------------------------------------------------------------------------------
def test_pair_key_and_default_comparisons() -> None:
    zs = case(LIVER, 1, 1, True, condition="zero_shot", row=3)
    fs = case(LIVER, 1, 0, None, condition="fewshot_standard", row=3)
    other = case(LIVER, 1, 1, True, condition="zero_shot", row=4)
    # conditions pair on the item without its condition; models pair on the whole item
    assert pair_key(zs, "condition") == pair_key(fs, "condition") == "s0003-Liver-"
    assert pair_key(zs, "condition") != pair_key(other, "condition")
    assert pair_key(zs, "model") == "s0003-Liver-zero_shot"
    assert pair_key(fs, "model") != pair_key(zs, "model")
    labels = {"condition": ["zero_shot", "fewshot_standard", "fewshot_hard_negatives"]}
    assert COMPARISONS.defaults(labels) == [
        ("condition", "zero_shot", "fewshot_standard"),
        ("condition", "zero_shot", "fewshot_hard_negatives"),
    ]
    assert COMPARISONS.defaults({"condition": ["fewshot_standard"]}) == []
    assert COMPARISONS.defaults({}) == []


# ---- summary.csv ---------------------------------------------------------------------------------
def writeup_outcomes() -> list[Outcome]:
    return [
        # model m, zero_shot, Liver: tp 2 (one hit), fn 1, tn 1, fp 1, one unparsable on a present
        # organ (fn): tp 2, fp 1, fn 2, tn 1, hits 1, unparsable 1, n 6
        case(LIVER, 1, 1, True, video="v0"),
        case(LIVER, 1, 1, False, video="v1", row=1),
        case(LIVER, 1, 0, None, video="v0", row=2),
        case(LIVER, 0, 0, None, video="v1", row=3),
        case(LIVER, 0, 1, None, video="v0", row=4),
        case(LIVER, 1, None, None, video="v1", row=5),
        # Fat: tn 2, tp 1 (a hit), and a backend error (excluded, counted in n_error)
        case(FAT, 0, 0, None, video="v0"),
        case(FAT, 0, 0, None, video="v1", row=1),
        case(FAT, 1, 1, True, video="v0", row=2),
        case(FAT, 1, 1, True, video="v1", row=3, error=True),
        # fewshot_standard, Liver: one hit, one true absent
        case(LIVER, 1, 1, True, condition="fewshot_standard", video="v0"),
        case(LIVER, 0, 0, None, condition="fewshot_standard", video="v1", row=1),
        # model a: zero_shot and two conditions the suite does not know (after, by name)
        case(FAT, 0, 0, None, model="a"),
        case(LIVER, 1, 1, True, model="a", condition="custom"),
        case(LIVER, 0, 0, None, model="a", condition="beta"),
    ]


def test_summary_rows_columns_and_values() -> None:
    s = summarize(writeup_outcomes(), SummaryContext.of(n_resamples=0))
    assert list(s.columns) == ["model", "condition", "organ", "n", "n_error", *METRIC_COLUMNS]
    # models by name; conditions in the suite's order, unknown ones after by name; organs in id
    # order (Liver 2 before Fat 4), the ALL row last
    assert list(zip(s["model"], s["condition"], s["organ"], strict=True)) == [
        ("a", "zero_shot", "Fat"),
        ("a", "zero_shot", "ALL"),
        ("a", "beta", "Liver"),
        ("a", "beta", "ALL"),
        ("a", "custom", "Liver"),
        ("a", "custom", "ALL"),
        ("m", "zero_shot", "Liver"),
        ("m", "zero_shot", "Fat"),
        ("m", "zero_shot", "ALL"),
        ("m", "fewshot_standard", "Liver"),
        ("m", "fewshot_standard", "ALL"),
    ]
    rows = s.set_index(["model", "condition", "organ"])
    liver = rows.loc[("m", "zero_shot", "Liver")]
    assert (liver["n"], liver["n_error"]) == (6, 0)
    expected = {
        "accuracy": 3 / 6,  # (tp 2 + tn 1) / 6
        "precision": 2 / 3,  # tp 2 / (tp 2 + fp 1)
        "recall": 2 / 4,  # tp 2 / (tp 2 + fn 2)
        "f1": 4 / 7,  # 4 / (4 + 1 + 2)
        "pointing_accuracy": 1 / 2,  # hits 1 / tp 2
        "point_hit_rate": 1 / 4,  # hits 1 / (tp + fn) 4
        "unparsable_rate": 1 / 6,
    }
    assert liver[list(expected)].astype(float).tolist() == pytest.approx(list(expected.values()))
    fat = rows.loc[("m", "zero_shot", "Fat")]
    assert (fat["n"], fat["n_error"]) == (3, 1)
    assert fat[list(expected)].astype(float).tolist() == pytest.approx([1, 1, 1, 1, 1, 1, 0])
    overall = rows.loc[("m", "zero_shot", "ALL")]
    assert (overall["n"], overall["n_error"]) == (9, 1)
    # pooled: tp 3, fp 1, fn 2, tn 3, hits 2, unparsable 1, n 9
    assert overall[list(expected)].astype(float).tolist() == pytest.approx(
        [6 / 9, 3 / 4, 3 / 5, 6 / 9, 2 / 3, 2 / 5, 1 / 9]
    )
    # no resamples: no interval
    assert liver[["f1_lo", "f1_hi"]].isna().all()


def test_summary_intervals_bracket_the_estimate() -> None:
    s = summarize(writeup_outcomes(), SummaryContext.of(n_resamples=200, seed=3))
    overall = s[(s["model"] == "m") & (s["condition"] == "zero_shot") & (s["organ"] == "ALL")]
    r = overall.iloc[0]
    for m in ("accuracy", "f1", "recall", "unparsable_rate"):
        assert r[f"{m}_lo"] <= r[m] <= r[f"{m}_hi"], m
    # two videos: v0 holds tp 2, fn 1, fp 1, tn 1 (accuracy 3/5); v1 holds tp 1, fn 1 (the
    # unparsable answer), tn 2 (3/4); a resample is v0 twice (3/5), v1 twice (3/4) or both (6/9),
    # so the bounds lie in [3/5, 3/4]
    assert 0.6 - 1e-9 <= r["accuracy_lo"] < r["accuracy_hi"] <= 0.75 + 1e-9
    # a single video: no interval
    a = s[(s["model"] == "a") & (s["organ"] == "ALL")].iloc[0]
    assert math.isnan(a["accuracy_lo"]) and math.isnan(a["accuracy_hi"])


def test_unknown_organs_sort_after_the_known_ones_by_name() -> None:
    outs = [case(99, 0, 0), case(98, 0, 0), case(FAT, 0, 0), case(LIVER, 0, 0)]
    s = summarize(outs, SummaryContext.of(n_resamples=0))
    assert s["organ"].tolist() == ["Liver", "Fat", "organ98", "organ99", "ALL"]


def test_intervals_follow_the_run_seed_and_resamples() -> None:
    outs = writeup_outcomes()
    lo = ["accuracy_lo", "f1_lo", "recall_hi"]
    a = summarize(outs, SummaryContext.of(n_resamples=50, seed=1))[lo]
    b = summarize(outs, SummaryContext.of(n_resamples=50, seed=1))[lo]
    pd.testing.assert_frame_equal(a, b)  # the same seed: the same intervals
    # the source run's macro intervals: none without resamples, reproducible with a seed
    src = source_outcomes()
    none = summarize(src, SummaryContext.of(n_resamples=0, compat="source"))
    assert none[MACRO_COLUMNS[1:3]].isna().all().all()
    ctx = SummaryContext.of(n_resamples=50, seed=2, compat="source")
    one, two = summarize(src, ctx), summarize(src, ctx)
    pd.testing.assert_frame_equal(one[MACRO_COLUMNS], two[MACRO_COLUMNS])
    assert one[MACRO_COLUMNS[1:3]].notna().any().all()


def test_headline_is_the_overall_rows() -> None:
    s = summarize(writeup_outcomes(), SummaryContext.of(n_resamples=0))
    h = headline(s)
    six = [c for c in METRIC_COLUMNS if not c.startswith("unparsable")]
    assert list(h.columns) == ["model", "condition", "n", "n_error", *six]
    assert list(zip(h["model"], h["condition"], strict=True)) == [
        ("a", "zero_shot"),
        ("a", "beta"),
        ("a", "custom"),
        ("m", "zero_shot"),
        ("m", "fewshot_standard"),
    ]
    assert h["n"].tolist() == [1, 1, 1, 9, 2] and list(h.index) == [0, 1, 2, 3, 4]


def source_outcomes() -> list[Outcome]:
    """Two frames, Liver and Fat asked (others not run): a `--compat source` run."""
    kw = {"compat": "source"}
    return [
        case(LIVER, 1, 1, True, row=0, video="v0", **kw),
        case(LIVER, 1, 1, False, row=1, video="v1", **kw),
        case(FAT, 0, 1, None, row=0, video="v0", **kw),
        case(FAT, 0, 0, None, row=1, video="v1", **kw),
    ]


def test_source_summary_adds_gated_and_macro_columns() -> None:
    s = summarize(source_outcomes(), SummaryContext.of(n_resamples=0, compat="source"))
    assert list(s.columns) == [
        "model",
        "condition",
        "organ",
        "n",
        "n_error",
        *METRIC_COLUMNS,
        *GATED_COLUMNS,
        *MACRO_COLUMNS,
    ]
    rows = s.set_index("organ")
    # Liver: tp 2, one hit -> gated correct 1 of 2; Fat: fp 1 (no hit: gated correct), tn 1
    assert rows.loc["Liver", "gated_accuracy"] == pytest.approx(0.5)
    assert rows.loc["Fat", "gated_accuracy"] == pytest.approx(1.0)
    assert rows.loc["ALL", "gated_accuracy"] == pytest.approx(3 / 4)
    # macro means over the two organs that ran: presence acc (1 + 1/2) / 2, hit rate Liver only
    # 1/2, gated (1/2 + 1) / 2, F1 (Liver 2*2/(4) = 1, Fat 0/(0 + 1) = 0) / 2
    overall = rows.loc["ALL"]
    assert overall["macro_presence_accuracy"] == pytest.approx(0.75)
    assert overall["macro_hit_rate"] == pytest.approx(0.5)
    assert overall["macro_gated_accuracy"] == pytest.approx(0.75)
    assert overall["macro_f1"] == pytest.approx(0.5)
    # the macro columns belong to the ALL row only
    assert rows.loc[["Liver", "Fat"], MACRO_COLUMNS].isna().all().all()
    h = headline(s)
    assert list(h.columns)[-15:] == [*GATED_COLUMNS, *MACRO_COLUMNS]
    assert h.loc[0, "macro_f1"] == pytest.approx(0.5)


def test_source_summary_intervals_cover_the_macro_rows() -> None:
    s = summarize(source_outcomes(), SummaryContext.of(n_resamples=100, compat="source"))
    overall = s[s["organ"] == "ALL"].iloc[0]
    for m in ("macro_presence_accuracy", "macro_gated_accuracy", "gated_accuracy"):
        assert overall[f"{m}_lo"] <= overall[m] <= overall[f"{m}_hi"], m
        assert overall[f"{m}_lo"] >= 0.0 and overall[f"{m}_hi"] <= 1.0


# ---- report.md -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("f1", "k", "best", "text"),
    [
        ({}, 3, True, "none scored"),
        ({"Fat": math.nan}, 3, True, "none scored"),
        ({"Liver": 0.5}, 3, True, "Liver (0.500)"),
        ({"Liver": 0.5, "Fat": 0.5, "Blood": math.nan}, 3, True, "all 2 tied (0.500)"),
        ({"A": 0.5004, "B": 0.4996}, 3, True, "all 2 tied (0.500)"),  # equal at 3 digits
        (
            {"A": 0.9, "B": 0.8, "C": 0.7, "D": 0.6},
            3,
            True,
            "A (0.900); B (0.800); C (0.700)",
        ),
        (
            {"A": 0.9, "B": 0.8, "C": 0.7, "D": 0.6},
            3,
            False,
            "D (0.600); C (0.700); B (0.800)",
        ),
        ({"A": 0.9, "B": 0.8, "C": 0.7}, 1, True, "A (0.900)"),
        ({"A": 0.9, "C": 0.5, "B": 0.5, "D": 0.1}, 3, True, "A (0.900); B, C (0.500, tied)"),
        ({"A": 0.9, "C": 0.5, "B": 0.5, "D": 0.1}, 3, False, "D (0.100); B, C (0.500, tied)"),
        # a tie reaching past k is named whole
        (
            {"A": 0.9, "B": 0.5, "C": 0.5, "D": 0.5, "E": 0.1},
            2,
            True,
            "A (0.900); B, C, D (0.500, tied)",
        ),
        ({"A": math.nan, "B": 0.8, "C": 0.3}, 3, True, "B (0.800); C (0.300)"),
    ],
)
def test_ranked_organs(f1: dict[str, float], k: int, best: bool, text: str) -> None:
    assert ranked_organs(f1, k=k, best=best) == text


def test_ranked_organs_defaults_are_the_three_best() -> None:
    assert ranked_organs({"A": 0.1, "B": 0.2, "C": 0.3, "D": 0.4}) == (
        "D (0.400); C (0.300); B (0.200)"
    )


def test_data_label() -> None:
    assert data_label(RunSettings()) == (
        "synthetic sample (support/evaluations/pointing/synthetic.py; not the real CholecSeg8k)"
    )
    real = RunSettings(evaluations={"pointing": PointingSettings(cholecseg8k="/data/cholec")})
    assert data_label(real) is None


def test_report_text() -> None:
    s = summarize(writeup_outcomes(), SummaryContext.of(n_resamples=0))
    text = report_text(s)
    lines = text.split("\n")
    assert lines[:2] == ["# Pointing evaluation (CholecSeg8k)", ""]
    assert lines[2] == (
        "Presence metrics treat unparsable answers as wrong; pointing accuracy is the share of "
        "cases with the organ present and predicted present whose point (mapped back from the "
        "768x768 canvas to image pixels) falls inside the organ mask; point hit rate divides the "
        "same hits by all present cases. Brackets: 95% bootstrap intervals, resampling videos."
    )
    heads = [ln for ln in lines if ln.startswith("#")]
    assert heads == [
        "# Pointing evaluation (CholecSeg8k)",
        "## Overall",
        "## Conditions compared (overall F1 and pointing accuracy)",
        "### f1",
        "### pointing_accuracy",
        "## Best and worst organs by F1",
        "## Per organ",
    ]
    assert "Organs whose F1 ties at three digits are named together." in lines
    # markdown: a blank line around every heading (tables and lists render after one)
    for i, ln in enumerate(lines):
        if ln.startswith("#"):
            assert lines[i + 1] == "" and (i == 0 or lines[i - 1] == ""), ln
    overall = text.split("## Overall\n\n")[1].split("\n")
    assert [c.strip() for c in overall[0].strip("|").split("|")] == [
        "model", "condition", "n", "n_error", "accuracy", "precision", "recall", "f1",
        "pointing_accuracy", "point_hit_rate",
    ]  # fmt: skip
    # model m: F1 zero_shot 6/9 = 0.667, fewshot_standard 1.0 -> difference +0.333; the columns
    # in the suite's order, unknown conditions after
    f1_table = text.split("### f1\n\n")[1].split("\n\n")[0].split("\n")
    header = [c.strip() for c in f1_table[0].strip("|").split("|")]
    assert header == [
        "model",
        "zero_shot",
        "fewshot_standard",
        "beta",
        "custom",
        "fewshot_standard - zero_shot",
        "beta - zero_shot",
        "custom - zero_shot",
    ]
    m_row = [c.strip() for c in f1_table[3].strip("|").split("|")]
    assert m_row[0] == "m" and float(m_row[1]) == 0.667 and float(m_row[2]) == 1.0
    assert float(m_row[5]) == 0.333
    # best / worst organs of model m, zero_shot: Fat F1 1.000, Liver 4/7 = 0.571
    assert (
        "- **m / zero_shot**: best: Fat (1.000); Liver (0.571) | worst: Liver (0.571); Fat (1.000)"
        in lines
    )
    assert "- **a / beta**: best: Liver (1.000) | worst: Liver (1.000)" in lines
    per_organ = text.split("## Per organ\n\n")[1].split("\n")
    cols = [c.strip() for c in per_organ[0].strip("|").split("|")]
    assert cols == [
        "model", "condition", "organ", "n", "accuracy", "precision", "recall", "f1",
        "pointing_accuracy",
    ]  # fmt: skip
    liver = next(r for r in per_organ if "| m  " in r and "zero_shot" in r and "Liver" in r)
    assert [c.strip() for c in liver.strip("|").split("|")][3:] == [
        "6",
        "0.5",
        "0.667",
        "0.5",
        "0.571",
        "0.5",
    ]  # n 6, accuracy 3/6, precision 2/3, recall 2/4, F1 4/7, pointing 1/2
    # data that is not the real CholecSeg8k says so in the title
    synthetic = report_text(s, "a sample")
    assert synthetic.startswith("# Pointing evaluation: synthetic data\n")


def test_report_without_a_defined_f1() -> None:
    # an organ whose only case is a backend error has no scored case: F1 NaN
    outs = [case(LIVER, 1, 1, True, error=True)]
    s = summarize(outs, SummaryContext.of(n_resamples=0))
    assert "- **m / zero_shot**: no organ has a defined F1" in report_text(s)


# ---- the F1 plot ---------------------------------------------------------------------------------
@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list:
    """The figures the plot saves (the real writer runs; each figure is kept for inspection)."""
    kept = []
    real = pointing_summary.save_figure

    def keep(fig, path, dpi=110):
        kept.append(fig)
        return real(fig, path, dpi=dpi)

    monkeypatch.setattr(pointing_summary, "save_figure", keep)
    return kept


def test_plot_f1_by_organ(tmp_path: Path, figures: list) -> None:
    outs = [o for o in writeup_outcomes() if o.model == "m"]
    s = summarize(outs, SummaryContext.of(n_resamples=0))
    path = pointing_summary.plot_f1_by_organ(s, tmp_path)
    assert path == tmp_path / "f1_by_organ.png"
    # one panel for one model and the legend's row: 11 x (3.2 + 0.4) inches at 120 dpi
    assert Image.open(path).size == (1320, 432)
    (fig,) = figures
    (ax,) = fig.axes
    assert ax.get_title() == "m: presence F1 by organ (95% bootstrap CI)"
    assert ax.get_ylabel() == "F1" and ax.get_ylim() == (0, 1.05)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["Liver", "Fat"]  # organ id order
    # two conditions: bars 0.4 wide at x -0.2 / +0.2 around each organ; zero_shot first
    bars = [[p.get_x() + p.get_width() / 2, p.get_height(), p.get_width()] for p in ax.patches]
    expected = [
        [-0.2, 4 / 7, 0.4],  # zero_shot Liver F1 4/7
        [0.8, 1.0, 0.4],  # zero_shot Fat
        [0.2, 1.0, 0.4],  # fewshot_standard Liver
        [1.2, 0.0, 0.4],  # fewshot_standard Fat: no row, a bar of 0 marked undefined
    ]
    np.testing.assert_allclose(bars, expected, atol=1e-12)
    marks = [(t.get_text(), t.xy[0]) for t in ax.texts]
    assert marks == [("—", pytest.approx(1.2))]  # the one undefined F1, not read as 0
    # the conditions' legend: the figure's, above the panel (never over a bar)
    assert ax.get_legend() is None
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["zero_shot", "fewshot_standard"]
    fig.canvas.draw()
    assert legend.get_window_extent().y0 >= ax.get_window_extent().y1
    # no intervals (no resamples): whiskers of zero length
    for c in ax.containers:
        if isinstance(c, BarContainer):
            for seg in c.errorbar.lines[2][0].get_segments():
                assert seg[0][1] == seg[1][1]


def test_plot_panels_per_model_and_empty(tmp_path: Path, figures: list) -> None:
    outs = [*writeup_outcomes(), case(FAT, 1, 1, True, model="z", error=True)]
    s = summarize(outs, SummaryContext.of(n_resamples=0))
    path = pointing_summary.plot_f1_by_organ(s, tmp_path)
    assert Image.open(path).size == (1320, 1200)  # three panels of 3.2 inches, a legend row
    axes = figures[0].axes
    assert [a.get_title().split(":")[0] for a in axes] == ["a", "m", "z"]
    assert [t.get_text() for t in axes[2].texts] == ["no scored answers"]
    # the scored panels: no panel text, only a "—" on each undefined (or missing) F1
    organs = s[s["organ"] != "ALL"]
    bars = organs["organ"].nunique() * organs["condition"].nunique()  # per panel
    for ax, model in zip(axes[:2], ("a", "m"), strict=True):
        defined = int(organs[organs["model"] == model]["f1"].notna().sum())
        assert [t.get_text() for t in ax.texts] == ["—"] * (bars - defined)
    # no organ rows: no file
    empty = s[s["organ"] == "ALL"]
    assert pointing_summary.plot_f1_by_organ(empty, tmp_path / "none") is None


def test_plot_error_whiskers(tmp_path: Path, figures: list) -> None:
    s = pd.DataFrame(
        {
            "model": ["m", "m", "u"],
            "condition": ["zero_shot", "zero_shot", "zero_shot"],
            "organ": ["Liver", "ALL", "Liver"],
            "n": [10, 10, 4],
            "f1": [0.6, 0.6, np.nan],
            "f1_lo": [0.5, 0.5, np.nan],
            "f1_hi": [0.9, 0.9, np.nan],
        }
    )
    pointing_summary.plot_f1_by_organ(s, tmp_path)
    ax, undefined = figures[0].axes
    (container,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    segments = container.errorbar.lines[2][0].get_segments()
    # whisker from F1 - (F1 - lo) = 0.5 up to F1 + (hi - F1) = 0.9 at the bar's centre x = 0
    np.testing.assert_allclose(segments[0], [[0.0, 0.5], [0.0, 0.9]])
    # scored cases but no defined F1: the panel says which
    assert [t.get_text() for t in undefined.texts] == ["F1 undefined for every organ"]
    assert [p.get_height() for p in undefined.patches] == [0.0]


# ---- the original's files (`--compat source`) ----------------------------------------------------
def two_records() -> list[dict]:
    """Two frames; organ 1 (Abdominal Wall), 2 (Liver), 3 (GI tract) vary, organs 4..12 are
    absent and answered absent in both."""
    y_a, p_a, h_a = [1, 1, 0], [1, 0, 1], [1, 1, 0]
    y_b, p_b, h_b = [1, 0, 0], [0, 1, 0], [0, 1, 0]
    pad = [0] * 9
    return [
        {"y_true": y_a + pad, "y_pred": p_a + pad, "hits": h_a + pad},
        {"y_true": y_b + pad, "y_pred": p_b + pad, "hits": h_b + pad},
    ]


def test_source_metrics_by_hand() -> None:
    m = source_metrics(two_records())
    assert m["n_examples"] == 2
    rows = m["per_organ_metrics"]
    assert [r["label_id"] for r in rows] == list(ORGAN_IDS)
    assert list(rows[0]) == [
        "label_id", "label", "TP", "FN", "TN", "FP", "Present_n", "Absent_n", "Total",
        "PresenceAcc", "Hit@Point|Present", "Gated_TP", "Gated_FN", "Gated_TN", "Gated_FP",
        "GatedAcc", "Precision", "Recall", "F1",
    ]  # fmt: skip
    # organ 1: (y, p, h) = (1, 1, 1), (1, 0, 0): TP 1, FN 1; hit on present 1/2; gated TP 1, FN 1
    assert rows[0] == {
        "label_id": 1, "label": "Abdominal Wall", "TP": 1, "FN": 1, "TN": 0, "FP": 0,
        "Present_n": 2, "Absent_n": 0, "Total": 2, "PresenceAcc": 0.5, "Hit@Point|Present": 0.5,
        "Gated_TP": 1, "Gated_FN": 1, "Gated_TN": 0, "Gated_FP": 0, "GatedAcc": 0.5,
        "Precision": 1.0, "Recall": 0.5, "F1": pytest.approx(2 / 3),
    }  # fmt: skip
    # Liver: (1, 0, 1) is a hit on a present organ predicted absent (counted in Hit@Point|Present,
    # pointing_metrics.py:65-66, but not gated); (0, 1, 1) a gated false positive
    assert rows[1] == {
        "label_id": 2, "label": "Liver", "TP": 0, "FN": 1, "TN": 0, "FP": 1,
        "Present_n": 1, "Absent_n": 1, "Total": 2, "PresenceAcc": 0.0, "Hit@Point|Present": 1.0,
        "Gated_TP": 0, "Gated_FN": 1, "Gated_TN": 0, "Gated_FP": 1, "GatedAcc": 0.0,
        "Precision": 0.0, "Recall": 0.0, "F1": 0.0,
    }  # fmt: skip
    # GI tract: (0, 1, 0), (0, 0, 0): FP 1, TN 1; no present case: hit rate and recall undefined
    assert rows[2] == {
        "label_id": 3, "label": "Gastrointestinal Tract", "TP": 0, "FN": 0, "TN": 1, "FP": 1,
        "Present_n": 0, "Absent_n": 2, "Total": 2, "PresenceAcc": 0.5, "Hit@Point|Present": None,
        "Gated_TP": 0, "Gated_FN": 0, "Gated_TN": 2, "Gated_FP": 0, "GatedAcc": 1.0,
        "Precision": 0.0, "Recall": None, "F1": 0.0,
    }  # fmt: skip
    # organs 4..12: two true absents each; precision, recall and F1 are 0/0
    for r in rows[3:]:
        assert (r["TN"], r["Total"], r["PresenceAcc"], r["GatedAcc"]) == (2, 2, 1.0, 1.0)
        assert r["Precision"] is None and r["Recall"] is None and r["F1"] is None
    assert m["totals"] == {
        "TP": 1, "FN": 2, "TN": 19, "FP": 2, "Present_n": 3, "Absent_n": 21, "Total": 24,
        "Gated_TP": 1, "Gated_FN": 2, "Gated_TN": 20, "Gated_FP": 1,
    }  # fmt: skip
    assert list(m["totals"])[:7] == ["TP", "FN", "TN", "FP", "Present_n", "Absent_n", "Total"]
    macro = m["macro_metrics"]
    assert list(macro) == ["macro_presence_acc", "macro_gated_acc", "macro_hit_rate", "macro_f1"]
    assert macro["macro_presence_acc"] == pytest.approx((0.5 + 0 + 0.5 + 9) / 12)
    assert macro["macro_gated_acc"] == pytest.approx((0.5 + 0 + 1 + 9) / 12)
    assert macro["macro_hit_rate"] == pytest.approx((0.5 + 1.0) / 2)
    assert macro["macro_f1"] == pytest.approx((2 / 3 + 0 + 0) / 3)
    assert m["micro_metrics"] == {
        "micro_presence_acc": pytest.approx(20 / 24),  # (TP 1 + TN 19) / 24
        "micro_gated_acc": pytest.approx(21 / 24),  # (gated TP 1 + gated TN 20) / 24
    }


def test_source_metrics_of_no_records() -> None:
    m = source_metrics([])
    assert m["n_examples"] == 0 and m["totals"]["Total"] == 0
    assert m["macro_metrics"] == dict.fromkeys(
        ("macro_presence_acc", "macro_gated_acc", "macro_hit_rate", "macro_f1")
    )
    assert m["micro_metrics"] == {"micro_presence_acc": None, "micro_gated_acc": None}


def frame(row: int, *, condition: str = "zero_shot", model: str = "m") -> list[Outcome]:
    """All 12 organs of one frame: Liver present and hit, an unparsable answer on Fat."""
    outs = []
    for organ in ORGAN_IDS:
        y_true = int(organ == LIVER)
        y_pred = None if organ == FAT else y_true
        hit = True if organ == LIVER else None
        outs.append(
            case(organ, y_true, y_pred, hit, row=row, condition=condition, model=model,
                 compat="source")
        )  # fmt: skip
    return outs


def test_source_records() -> None:
    outs = frame(7) + frame(3) + frame(5)[:-1]  # row 5 lacks organ 12: left out
    outs += [o for o in frame(9) if o.params["organ"] != 1]
    outs.append(case(1, 0, 0, None, row=9, error=True, compat="source"))  # an error: not a case
    records = source_records(outs)
    assert list(records) == [("zero_shot", "m")]
    got = records[("zero_shot", "m")]
    assert [r["sample_idx"] for r in got] == [7, 3]  # the order the rows ran
    r = got[0]
    assert list(r) == ["sample_idx", "y_true", "y_pred", "hits", "rows", "prompt"]
    assert r["y_true"] == [int(o == LIVER) for o in ORGAN_IDS]
    assert r["y_pred"] == [int(o == LIVER) for o in ORGAN_IDS]  # unparsable -> 0
    assert r["hits"] == [int(o == LIVER) for o in ORGAN_IDS]
    assert r["prompt"] == {"name": "zero_shot"}
    assert r["rows"][1] == {
        "present": 1,
        "point_canvas": [3, 4],
        "raw": "answer 7-2",
        "organ": "Liver",
    }
    assert r["rows"][3] == {"present": 0, "point_canvas": None, "raw": "answer 7-4", "organ": "Fat"}
    assert [x["organ"] for x in r["rows"]] == [CLASS_NAMES[i] for i in ORGAN_IDS]


def test_write_source_files(tmp_path: Path) -> None:
    outs = frame(7, model="hf:/models/x") + frame(2, condition="fewshot_standard")
    written = write_source_files(outs, tmp_path, split="val")
    folders = [
        tmp_path / "fewshot_standard" / "m" / "cholecseg8k_pointing",
        tmp_path / "zero_shot" / "hf_models_x" / "cholecseg8k_pointing",
    ]
    assert written == [f / "metrics_summary_val.json" for f in folders]  # sorted by condition
    sample = json.loads((folders[1] / "val_00007.json").read_text())
    assert sample["sample_idx"] == 7 and sample["y_true"][1] == 1
    summary = json.loads(written[1].read_text())
    assert list(summary)[:4] == ["model", "prompt", "split", "n_examples"]
    assert (summary["model"], summary["prompt"], summary["split"]) == (
        "hf:/models/x",
        "zero_shot",
        "val",
    )
    # 12 organs: Liver TP, Fat an unparsable answer read as absent (TN), 10 other TN
    assert summary["totals"]["TP"] == 1 and summary["totals"]["TN"] == 11
    assert (folders[0] / "val_00002.json").is_file()
    # the default split is "train"
    assert write_source_files(outs[:12], tmp_path / "t")[0].name == "metrics_summary_train.json"


def test_write_outputs(tmp_path: Path) -> None:
    outs = frame(0) + frame(1)
    ctx = SummaryContext.of(n_resamples=0, compat="source", data_label=data_label(RunSettings()))
    s = summarize(outs, ctx)
    paths = write_outputs(outs, s, tmp_path, ctx)
    assert paths == [
        tmp_path / "f1_by_organ.png",
        tmp_path / "zero_shot" / "m" / "cholecseg8k_pointing" / "metrics_summary_train.json",
    ]
    assert ctx.report.text().startswith("# Pointing evaluation: synthetic data\n")
    # a writeup run: the plot only
    ctx = SummaryContext.of(n_resamples=0)
    assert write_outputs(outs, summarize(outs, ctx), tmp_path / "w", ctx) == [
        tmp_path / "w" / "f1_by_organ.png"
    ]
