"""`pytest evals/nyu_distance` end to end, through pytester subprocess runs of the real suite:
the oracle reads MAE 0 and response rate 1, chance does not, xdist changes nothing, and the
source's files (results JSON, marked images) land where the source puts them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow  # every test here runs the suite in a subprocess

SOURCE_FIELDS = {
    "image_idx",
    "pair_idx",
    "point1",
    "point2",
    "gt_distance",
    "predicted_distance",
    "raw_response",
    "model",
}


@pytest.fixture(scope="session")
def nyu_mat(tmp_path_factory) -> Path:
    from support.evaluations.nyu_distance.synthetic import ensure_nyu_mat

    return ensure_nyu_mat(tmp_path_factory.mktemp("nyu-data"))


@pytest.fixture
def run(run_suite):
    """run(*args, run_id=...) -> (RunResult, results folder of the nyu_distance run)."""

    def _run(*args: str, run_id: str = "r1", cache: str = "cache"):
        result, results = run_suite("nyu_distance", *args, run_id=run_id, cache=cache)
        return result, results / "nyu_distance" / run_id

    return _run


def test_oracle_reads_mae_zero_on_the_default_data(run, tmp_path):
    html = tmp_path / "report.html"
    gate = ("--max-metric", "nyu_distance.mae=0.001")
    result, out = run("--model=oracle", f"--html={html}", "--self-contained-html", *gate)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=8 * 3)  # the synthetic default: 8 images x 3 pairs
    assert (tmp_path / "cache" / "synthetic").is_dir()  # built on first use in the cache
    s = pd.read_csv(out / "summary.csv")
    assert s["model"].tolist() == ["oracle"]
    row = s.iloc[0]
    assert row["response_rate"] == 1.0 and row["n"] == 24 and row["n_error"] == 0
    for m in ("mae", "median_abs_error", "std_error", "mean_relative_error", "rmse"):
        assert abs(row[m]) < 1e-9, m
    assert row["delta1"] == 1.0
    results = json.loads((out / "nyu_distance_results.json").read_text())
    assert list(results) == ["oracle"] and len(results["oracle"]) == 24
    for r in results["oracle"]:
        assert set(r) == SOURCE_FIELDS
        assert r["predicted_distance"] == r["gt_distance"] > 0
        assert len(r["point1"]) == len(r["point2"]) == 2
    names = sorted(p.name for p in (out / "marked_images").iterdir())
    assert names == [f"img{i:04d}_pair{j}.jpg" for i in range(8) for j in range(3)]
    assert (out / "marked_images" / "img0000_pair0.jpg").read_bytes()[:3] == b"\xff\xd8\xff"
    assert {"raw_results.jsonl", "report.md", "pred_vs_truth.png"} <= {
        p.name for p in out.iterdir()
    }
    text = result.stdout.str()
    assert "vlmbench: nyu_distance: mae, delta1; 95% bootstrap intervals" in text
    assert "model calls: 24 sent, 0 served from cache" in text
    page = html.read_text()
    assert page.count("image/jpeg") >= 24 and "distance_m" in page  # a picture per case
    assert "data:image/png;base64" in page  # the scatter plot in the summary


def test_chance_is_wrong_and_xdist_gives_the_same_summary(run, nyu_mat):
    args = ("--model=chance,oracle", "-m", "quick", f"--nyu-mat={nyu_mat}", "--pairs-per-image=2")
    gate = ("--max-metric", "nyu_distance.mae=0.001")  # lower is better: chance fails it
    serial, out1 = run(*args, *gate, run_id="serial")
    parallel, out2 = run(*args, "-n", "2", run_id="xdist", cache="fresh")
    assert parallel.ret == 0, parallel.stdout.str()
    assert serial.ret == 1 and "GATE FAILED: nyu_distance.mae = " in serial.stdout.str()
    assert "(model=chance" in serial.stdout.str() and "(model=oracle" not in serial.stdout.str()
    serial.assert_outcomes(passed=2 * 2 * 2)  # quick: 2 images x 2 pairs x 2 models
    assert "2 workers" in parallel.stdout.str()
    assert (out1 / "summary.csv").read_bytes() == (out2 / "summary.csv").read_bytes()
    one = json.loads((out1 / "nyu_distance_results.json").read_text())
    assert one == json.loads((out2 / "nyu_distance_results.json").read_text())
    s = pd.read_csv(out1 / "summary.csv").set_index("model")
    assert s.loc["chance", "mae"] > 0.1 and s.loc["chance", "response_rate"] == 1.0
    assert s.loc["oracle", "mae"] == 0.0
    ids = [(r["image_idx"], r["pair_idx"]) for r in one["chance"]]
    assert ids == [(0, 0), (0, 1), (7, 0), (7, 1)]  # quick: the first and last of 8 images
    assert sorted(p.name for p in (out2 / "marked_images").iterdir()) == sorted(
        p.name for p in (out1 / "marked_images").iterdir()
    )


def test_broken_file_is_a_clear_usage_error(run, tmp_path):
    bad = tmp_path / "nyu_depth_v2_labeled.mat"
    bad.write_bytes(b"MATLAB 7.3 MAT-file" + b"\0" * 981)  # the first 1000 bytes, say
    result, _ = run("--model=oracle", f"--nyu-mat={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # checked at configure (--nyu-mat named)
    text = result.stderr.str()
    assert str(bad) in text and "truncated MATLAB v7.3" in text
