"""nyu_distance's tables (support.evaluations.nyu_distance.summary) on a small hand-made run:
summary.csv's columns and every metric against numpy on the listed errors, intervals around
them, the headline, the results JSON's keys (`--compat source`), MAE by true distance (bins
[0, 1), [1, 2), [2, 3), >= 3 m), the data label and report.md's sections."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from support.evaluation import SummaryContext
from support.evaluations.nyu_distance.spec import NyuSettings
from support.evaluations.nyu_distance.summary import (
    HEADLINE,
    METRICS,
    by_distance,
    data_label,
    headline,
    report_text,
    result_key,
    result_rows,
    summarize,
)
from support.settings import RunSettings
from support.types import Outcome


def pair(model: str, image: int, idx: int, gt: float, pred: float | None, status=None) -> Outcome:
    if status is None:
        status = "unparsable" if pred is None else "wrong"
    scores = {"gt": gt, "pred": pred, "abs_error": None if pred is None else abs(pred - gt)}
    return Outcome(
        case_id=f"img{image:04d}-pair{idx}-{model}",
        evaluation="nyu_distance",
        model=model,
        status=status,
        cluster=f"img{image}",
        scores=scores if status != "error" else {},
        raw="" if pred is None else f" {pred} m\n",
        params={"image_idx": image, "pair_idx": idx, "point1": [40, 40], "point2": [200, 120],
                "gt_distance": gt},
    )  # fmt: skip


# model a: (gt, pred) metres per image; None = unparsable
A_PAIRS = {
    0: [(2.0, 2.5), (1.0, 0.9)],  # e = +0.5 (ratio 1.25: not < 1.25), -0.1 (ratio 1.11)
    1: [(4.0, None), (3.0, 6.0)],  # unparsable; e = +3 (ratio 2)
    2: [(0.5, 0.5), (1.5, 0.0)],  # e = 0 (ratio 1); e = -1.5 (pred 0: ratio inf)
    3: [(2.5, 2.0), (0.8, 1.0)],  # e = -0.5 (ratio 1.25: not < 1.25), +0.2 (ratio 1.25)
}


def run() -> list[Outcome]:
    outs = [pair("a", i, j, gt, p) for i, ps in A_PAIRS.items() for j, (gt, p) in enumerate(ps)]
    outs.append(pair("a", 4, 0, 2.0, None, status="error"))  # a backend error: n_error
    outs += [pair("b", 0, 0, 2.0, None), pair("b", 1, 0, 1.0, None)]  # never answered
    outs.append(pair("c", 0, 0, 2.0, None, status="error"))  # errors only
    return outs


# function scope: mutmut maps a test to the code its own setup calls
@pytest.fixture
def summary() -> pd.DataFrame:
    return summarize(run(), SummaryContext.of(n_resamples=200, seed=3))


def test_columns(summary: pd.DataFrame) -> None:
    metric_columns = [f"{m}{s}" for m in METRICS for s in ("", "_lo", "_hi")]
    assert list(summary.columns) == ["model", "n", "n_error", "n_answered", *metric_columns]
    assert METRICS == ("response_rate", "mae", "median_abs_error", "std_error", "bias", "rmse",
                       "mean_relative_error", "delta1")  # fmt: skip
    assert list(summary.model) == ["a", "b", "c"]


def test_metrics_of_a_by_numpy(summary: pd.DataFrame) -> None:
    row = summary[summary.model == "a"].iloc[0]
    gt = np.array([g for ps in A_PAIRS.values() for g, p in ps if p is not None])
    pred = np.array([p for ps in A_PAIRS.values() for g, p in ps if p is not None])
    e = pred - gt  # [0.5, -0.1, 3, 0, -1.5, -0.5, 0.2]
    assert (row.n, row.n_error, row.n_answered) == (8, 1, 7)
    assert row.response_rate == pytest.approx(7 / 8)
    assert row.mae == pytest.approx(np.mean(np.abs(e)))  # 5.8 / 7
    assert row.mae == pytest.approx(5.8 / 7)
    assert row.median_abs_error == pytest.approx(np.median(np.abs(e)))  # of 0..3: 0.5
    assert row.median_abs_error == pytest.approx(0.5)
    assert row.std_error == pytest.approx(np.std(np.abs(e)))  # ddof 0, of |e|
    assert row.bias == pytest.approx(np.mean(e))  # 1.6 / 7
    assert row.bias == pytest.approx(1.6 / 7)
    assert row.rmse == pytest.approx(np.sqrt(np.mean(e**2)))  # sqrt(11.8 / 7)
    assert row.mean_relative_error == pytest.approx(np.mean(np.abs(e) / gt))
    # delta < 1.25 (strict): 0.9 vs 1.0 (1.11) and 0.5 vs 0.5 (1.0) only; 1.25 itself is out
    assert row.delta1 == pytest.approx(2 / 7)
    for m in METRICS:
        assert row[f"{m}_lo"] <= row[m] <= row[f"{m}_hi"], m
        assert row[f"{m}_lo"] < row[f"{m}_hi"], m  # 4 images: the resamples differ


def test_a_model_that_never_answered_and_one_with_errors_only(summary: pd.DataFrame) -> None:
    b = summary[summary.model == "b"].iloc[0]
    assert (b.n, b.n_error, b.n_answered) == (2, 0, 0)
    assert b.response_rate == 0.0
    for m in ("mae", "median_abs_error", "std_error", "bias", "rmse", "delta1"):
        assert math.isnan(b[m]), m
    c = summary[summary.model == "c"].iloc[0]
    assert (c.n, c.n_error, c.n_answered) == (0, 1, 0)
    assert math.isnan(c.median_abs_error_lo) and math.isnan(c.median_abs_error_hi)


def test_headline_columns(summary: pd.DataFrame) -> None:
    head = headline(summary)
    assert HEADLINE == ("response_rate", "mae", "median_abs_error", "std_error",
                        "mean_relative_error", "delta1")  # fmt: skip
    expected = ["model", "n", "n_error", *[f"{m}{s}" for m in HEADLINE for s in ("", "_lo", "_hi")]]
    assert list(head.columns) == expected
    assert list(head.index) == [0, 1, 2]


@pytest.mark.parametrize(
    ("model", "compat", "key"),
    [
        ("claude-3-5-sonnet", "source", "claude"),
        ("Claude-Opus", "source", "claude"),
        ("gpt-4o", "source", "gpt4o"),
        ("GPT-4o-mini", "source", "gpt4o"),
        ("gemini-2.0", "source", "gemini-2.0"),
        ("claude-3-5-sonnet", "writeup", "claude-3-5-sonnet"),
        ("gpt-4o", "writeup", "gpt-4o"),
    ],
)
def test_result_key(model: str, compat: str, key: str) -> None:
    # the original's JSON keys are "claude" and "gpt4o" (eval_nyu_distance.py results dict)
    assert result_key(model, compat) == key
    if compat == "writeup":
        assert result_key(model) == key


def test_result_rows_under_source() -> None:
    outs = [pair("gpt-4o", 1, 0, 2.0, 2.5), pair("gpt-4o", 0, 1, 1.0, None),
            pair("gpt-4o", 0, 0, 3.0, 3.5)]  # fmt: skip
    rows = result_rows(outs, "source")
    assert list(rows) == ["gpt4o"]
    assert [(r["image_idx"], r["pair_idx"]) for r in rows["gpt4o"]] == [(0, 0), (0, 1), (1, 0)]
    assert [r["raw_response"] for r in rows["gpt4o"]] == ["3.5 m", "", "2.5 m"]  # stripped
    assert [r["predicted_distance"] for r in rows["gpt4o"]] == [3.5, None, 2.5]
    assert list(rows["gpt4o"][0]) == ["image_idx", "pair_idx", "point1", "point2",
                                      "gt_distance", "predicted_distance", "raw_response",
                                      "model"]  # fmt: skip
    assert result_rows(outs)["gpt-4o"][0]["raw_response"] == " 3.5 m\n"  # writeup: as sent
    # two Claude models would share "claude": both keep their own names
    two = result_rows([pair("claude-a", 0, 0, 1.0, 1.0), pair("claude-b", 0, 0, 1.0, 2.0)],
                      "source")  # fmt: skip
    assert list(two) == ["claude-a", "claude-b"]


def test_mae_by_true_distance() -> None:
    table = by_distance(run())
    assert list(table.columns) == ["model", "true distance (m)", "n", "response_rate", "mae"]
    a = table[table.model == "a"]
    # bins [0,1): 0.5, 0.8; [1,2): 1.0, 1.5; [2,3): 2.0, 2.5 (the error pair is left out);
    # >= 3: 4.0 (unparsable), 3.0
    assert [str(x) for x in a["true distance (m)"]] == ["0-1", "1-2", "2-3", ">= 3"]
    assert a.n.tolist() == [2, 2, 2, 2]
    assert a.response_rate.tolist() == pytest.approx([1.0, 1.0, 1.0, 0.5])
    # |e|: [0, 0.2], [0.1, 1.5], [0.5, 0.5], [3]
    assert a.mae.tolist() == pytest.approx([0.1, 0.8, 0.5, 3.0])
    b = table[table.model == "b"]
    assert [str(x) for x in b["true distance (m)"]] == ["1-2", "2-3"]  # gt 1.0 is in [1, 2)
    assert b.response_rate.tolist() == [0.0, 0.0] and b.mae.isna().all()
    empty = by_distance([pair("c", 0, 0, 2.0, None, status="error")])
    assert empty.empty and list(empty.columns) == list(table.columns)


def test_data_label(tmp_path) -> None:
    synthetic = data_label(RunSettings(cache_dir=tmp_path))
    assert synthetic is not None and "synthetic" in synthetic
    assert "support/evaluations/nyu_distance/synthetic.py" in synthetic
    for settings in (NyuSettings(mat="x.mat"), NyuSettings(folder="extracted")):
        run_settings = RunSettings(cache_dir=tmp_path, evaluations={"nyu_distance": settings})
        assert data_label(run_settings) is None


def test_report_sections(summary: pd.DataFrame) -> None:
    text = report_text(summary, run(), "synthetic sample")
    assert text.index("## Overall") < text.index("## By true distance")
    assert "synthetic sample" in text
    assert "delta1 the share with max(pred/gt, gt/pred) < 1.25" in text
    overall = text[text.index("## Overall") : text.index("## By true distance")]
    header = next(line for line in overall.splitlines() if line.startswith("| model"))
    assert [c.strip() for c in header.strip("|").split("|")][:4] == ["model", "n", "n_error",
                                                                     "n_answered"]  # fmt: skip
    assert f"{5.8 / 7:.3f}" in overall  # a's MAE, 0.829
    by_bin = text[text.index("## By true distance") :]
    cells = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in by_bin.splitlines()
        if line.startswith("| a ")
    ]
    assert [(c[1], c[2], float(c[4])) for c in cells] == [
        ("0-1", "2", 0.1), ("1-2", "2", 0.8), ("2-3", "2", 0.5), (">= 3", "2", 3.0)
    ]  # fmt: skip
