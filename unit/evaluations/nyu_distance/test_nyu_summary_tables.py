"""nyu_distance's tables (support.evaluations.nyu_distance.summary) on a small hand-made run:
summary.csv's columns and every metric against numpy on the listed errors, intervals around
them, the headline, the results JSON's keys (`--compat source`), MAE by true distance (bins
[0, 1), [1, 2), [2, 3), >= 3 m), the data label and report.md's sections."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from support.contract.evaluation import SummaryContext
from support.evaluations.nyu_distance.spec import NyuSettings, data_label
from support.evaluations.nyu_distance.summary import (
    HEADLINE,
    METRICS,
    abs_error,
    by_distance,
    headline,
    median_interval,
    pair_counts,
    report_text,
    result_key,
    result_rows,
    summarize,
    write_results_json,
)
from support.settings import OutputSettings, RunSettings
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
    synthetic = data_label(RunSettings(output=OutputSettings(cache_dir=tmp_path)))
    where = "support/evaluations/nyu_distance/synthetic.py"
    assert synthetic == f"synthetic sample ({where}; not the real NYU Depth V2)"
    for settings in (NyuSettings(mat="x.mat"), NyuSettings(folder="extracted")):
        run_settings = RunSettings(
            evaluations={"nyu_distance": settings}, output=OutputSettings(cache_dir=tmp_path)
        )
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


@pytest.mark.parametrize(
    ("gt", "pred", "counts"),
    [
        # [pairs, answered, |e|, e^2, e, |e|/gt, delta < 1.25]
        (2.0, 2.5, [1, 1, 0.5, 0.25, 0.5, 0.25, 0]),  # 2.5/2 = 1.25: not < 1.25
        (0.5, 0.3, [1, 1, 0.2, 0.04, -0.2, 0.4, 0]),  # under: 0.5/0.3 = 1.67
        (2.0, 1.7, [1, 1, 0.3, 0.09, -0.3, 0.15, 1]),  # 2/1.7 = 1.18
        (1.5, 0.0, [1, 1, 1.5, 2.25, -1.5, 1.0, 0]),  # an answer of 0 m: ratio inf
        (1.5, None, [1, 0, 0, 0, 0, 0, 0]),  # unparsable: a pair, not answered
    ],
)
def test_pair_counts_by_hand(gt: float, pred: float | None, counts: list[float]) -> None:
    o = pair("a", 0, 0, gt, pred)
    assert pair_counts(o) == pytest.approx(counts)
    expected = math.nan if pred is None else abs(pred - gt)
    assert abs_error(o) == pytest.approx(expected, nan_ok=True)


def test_std_error_of_equal_errors_is_zero_not_nan() -> None:
    # three answers each 0.4 m over: the spread of |e| is 0; mean(e^2) - mean(|e|)^2 rounds to
    # -2.8e-17 here, which must not become sqrt(negative) = NaN
    outs = [pair("a", i, 0, 0.5, 0.9) for i in range(3)]
    row = summarize(outs, SummaryContext.of(n_resamples=50, seed=0)).iloc[0]
    assert row.std_error == pytest.approx(np.std([0.4, 0.4, 0.4]), abs=1e-12)
    assert row.std_error_lo == pytest.approx(0.0, abs=1e-12)


def test_intervals_follow_the_seed() -> None:
    # 10 images x 3 pairs of random answers: enough distinct values for the percentiles to move
    rng = np.random.default_rng(8)
    outs = [
        pair("a", i, j, float(gt), float(gt + d))
        for i in range(10)
        for j, (gt, d) in enumerate(zip(rng.uniform(1, 4, 3), rng.normal(0, 1, 3), strict=True))
        if gt + d > 0
    ]
    first = summarize(outs, SummaryContext.of(n_resamples=200, seed=3))
    again = summarize(outs, SummaryContext.of(n_resamples=200, seed=3))
    other = summarize(outs, SummaryContext.of(n_resamples=200, seed=4))
    columns = [c for c in first.columns if c.endswith(("_lo", "_hi"))]
    pd.testing.assert_frame_equal(first[columns], again[columns])  # same seed, same intervals
    for m in ("mae", "median_abs_error"):  # another seed, other draws
        assert (first[f"{m}_lo"].iloc[0], first[f"{m}_hi"].iloc[0]) != (
            other[f"{m}_lo"].iloc[0],
            other[f"{m}_hi"].iloc[0],
        ), m
    # the median's interval is median_interval's on the answered pairs, with the run's seed
    errors = np.array([o.scores["abs_error"] for o in outs])
    clusters = [o.cluster for o in outs]
    lo, hi = median_interval(errors, clusters, 200, 3)
    assert (first.median_abs_error_lo.iloc[0], first.median_abs_error_hi.iloc[0]) == (lo, hi)
    assert median_interval(errors, clusters, 200, 4) != (lo, hi)
    assert median_interval(np.array([]), [], 100, 0) == (
        pytest.approx(np.nan, nan_ok=True),
        pytest.approx(np.nan, nan_ok=True),
    )


def test_results_json_file(tmp_path) -> None:
    outs = [pair("gpt-4o", 1, 0, 2.0, 2.5), pair("gpt-4o", 0, 0, 3.0, None)]
    path = write_results_json(outs, tmp_path / "nyu_distance_results.json", "source")
    text = path.read_text()
    assert text.endswith("}\n") and text.startswith('{\n  "gpt4o": [')  # indent 2
    doc = json.loads(text)
    assert list(doc) == ["gpt4o"]
    got = [(r["image_idx"], r["predicted_distance"]) for r in doc["gpt4o"]]
    assert got == [(0, None), (1, 2.5)]
    plain = json.loads(write_results_json(outs, tmp_path / "w.json").read_text())
    assert list(plain) == ["gpt-4o"]


def test_report_text_layout_and_rounding() -> None:
    # model d, all in the 1-2 m bin: |e| = 0.1, 0.2, 0.2 -> MAE 0.5 / 3 = 0.167 (3 decimals)
    outs = [pair("d", 0, 0, 1.0, 1.1), pair("d", 0, 1, 1.5, 1.7), pair("d", 1, 0, 1.2, 1.0)]
    s = summarize(outs, SummaryContext.of(n_resamples=20, seed=0))
    text = report_text(s, outs, "synthetic sample")
    lines = text.splitlines()
    assert lines[0] == "# NYU Depth V2 3D distance evaluation: synthetic data"
    for sentence in (
        "Each case shows an indoor image with a red cross at A and a blue cross at B and asks "
        "for their 3D Euclidean distance in metres.",
        "The truth back-projects both pixels with their Kinect depths through the NYU intrinsics.",
        "Errors are predicted minus true distance (m); error metrics use the answered pairs, "
        "unparsable answers count against the response rate.",
        "std_error is the standard deviation of the absolute errors; bias the mean signed error;",
        "Brackets: 95% bootstrap intervals, resampling images.",
    ):
        assert sentence in text, sentence
    assert "\n\n## Overall\n\n| model" in text
    assert "\n\n## By true distance\n\n| model" in text and text.endswith("|\n")
    row = next(line for line in lines if line.startswith("| d ") and "1-2" in line)
    assert [c.strip() for c in row.strip("|").split("|")][2:] == ["3", "1", "0.167"]
