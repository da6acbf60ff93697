"""The evaluation seam end to end: an evaluation defined entirely outside the suite's packages
(examples/rounds_evaluation.py: spec, options, worker side; the stock summary) registered by a
conftest, run through the real suite, serial and under xdist; its items are rounds that wait for
each other and yield many outcomes each."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from examples.rounds_evaluation import N_TASKS, SEQUENCES, next_tasks, truth
from unit.helpers.rounds_runs import plant_rounds, rounds_args

HERE = Path(__file__).parent


@pytest.fixture
def suite(pytester: pytest.Pytester, tmp_path: Path):
    """suite(*args, run_id=...) -> (RunResult, raw rows): the rounds evaluation, in a folder of
    its own that holds nothing of the suite but the registering conftest."""
    plant_rounds(pytester)

    def _run(*args: str, run_id: str = "r"):
        result = pytester.runpytest_subprocess(
            *rounds_args(tmp_path, run_id, bootstrap=100, one_round=False), *args, timeout=300
        )
        path = tmp_path / "results" / "rounds" / run_id / "raw_results.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return result, rows

    return _run


@pytest.mark.slow
def test_rounds_serial_and_xdist_agree_and_follow_the_history(suite, tmp_path):
    args = ("--rounds=4", "--rounds-batch=3", "--no-cache")
    serial, rows = suite(*args, run_id="serial")
    assert serial.ret == 0, serial.stdout.str()
    serial.assert_outcomes(passed=2 * 2 * 4)  # 2 sequences x 2 models x 4 rounds
    parallel, rows2 = suite(*args, "-n", "2", "-v", run_id="xdist")  # -v: the engine table
    assert parallel.ret == 0, parallel.stdout.str()
    assert rows == rows2  # raw rows hold no timings (calls.csv does): identical
    text = parallel.stdout.str()
    assert "vlmbench: engine" in text and "gw0" in text and "gw1" in text  # each worker's stats

    assert len(rows) == 2 * 2 * 4 * 3  # every round's outcomes, each with its own id
    assert len({r["case_id"] for r in rows}) == len(rows)
    calls = pd.read_csv(tmp_path / "results" / "rounds" / "serial" / "calls.csv")
    assert set(calls["backend_calls"]) == {1}  # each outcome counts its own call
    # no summary module: the stock one (support.contract.binary_summary:BINARY), accuracy per model
    summary = pd.read_csv(tmp_path / "results" / "rounds" / "serial" / "summary.csv")
    summary = summary.set_index("model")
    for model in ("oracle", "chance"):
        mine = [r for r in rows if r["model"] == model]
        right = sum(r["status"] == "correct" for r in mine) / len(mine)
        assert summary.loc[model, "accuracy"] == pytest.approx(right)
        assert summary.loc[model, "accuracy_lo"] <= right <= summary.loc[model, "accuracy_hi"]
    assert summary.loc["oracle", "accuracy"] == 1.0 and summary.loc["chance", "accuracy"] < 1.0
    report = (tmp_path / "results" / "rounds" / "serial" / "report.md").read_text()
    assert report.startswith("# rounds: accuracy per model") and "oracle" in report
    for model in ("oracle", "chance"):
        for seq, pool in SEQUENCES.items():
            history: list[tuple[int, bool]] = []
            for k in range(4):  # round k's tasks follow from the rounds before it
                done = [r for r in rows if r["model"] == model and r["params"]["round"] == k
                        and r["params"]["sequence"] == seq]  # fmt: skip
                tasks = [r["extra"]["task"] for r in sorted(done, key=lambda r: r["case_id"])]
                assert sorted(tasks) == sorted(next_tasks(list(pool), history, 3)), (model, k)
                for r in done:
                    assert r["target"] == truth(r["extra"]["task"])
                    assert (r["status"] == "correct") == (r["prediction"] == str(r["target"]))
                history += [(r["extra"]["task"], r["status"] != "correct") for r in done]
    chance = [r for r in rows if r["model"] == "chance"]
    assert any(r["status"] == "wrong" for r in chance)  # a search with failures to follow
    assert all(r["status"] == "correct" for r in rows if r["model"] == "oracle")
    assert max(r["extra"]["task"] for r in rows) < N_TASKS


@pytest.mark.slow
def test_a_later_round_alone_runs_its_earlier_rounds_first(suite):
    result, rows = suite("--model=chance", "-k", "a-round-2", "--no-cache")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)
    assert {r["params"]["round"] for r in rows} == {2}  # only the selected item is reported
    full, all_rows = suite("--model=chance", "-k", "a-round", "--no-cache", run_id="all")
    assert full.ret == 0
    assert rows == [r for r in all_rows if r["params"]["round"] == 2]


@pytest.mark.slow
def test_its_options_are_validated_as_usage_errors(suite):
    result, _ = suite("--rounds-batch=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--rounds-batch: 0: expected a whole number >= 1" in result.stderr.str()
    helped = suite("--help")[0]
    assert "vlmbench: rounds (a search for failures in rounds" in helped.stdout.str()
