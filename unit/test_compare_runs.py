"""`python -m support.compare_runs RUN_A RUN_B`: two runs' raw rows paired by case id."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support.compare_runs import compare_runs, main
from support.files import write_jsonl
from support.types import Outcome


def nyu_run(folder: Path, model: str, spread: float, cases: int = 40, seed: int = 0) -> Path:
    """A nyu_distance run folder: `cases` point pairs in 10 images, answers off by ~spread m."""
    rng = np.random.default_rng(seed)
    outs = []
    for i in range(cases):
        gt = 1.0 + (i % 7) * 0.5
        pred = round(gt + rng.normal(0, spread), 3) if spread else gt
        outs.append(
            Outcome(
                case_id=f"img{i // 4:04d}-pair{i % 4}-{model}",
                evaluation="nyu_distance",
                model=model,
                status="correct",
                cluster=f"img{i // 4}",
                scores={"gt": gt, "pred": pred, "abs_error": abs(pred - gt)},
            )
        )
    write_jsonl(outs, folder / "raw_results.jsonl")
    return folder


def test_a_better_run_is_found_and_the_same_run_is_not(tmp_path: Path) -> None:
    a = nyu_run(tmp_path / "a", "m", spread=1.0)
    b = nyu_run(tmp_path / "b", "m", spread=0.0)
    table, notes = compare_runs(a, b, n_resamples=500)
    mae = table[table.metric == "mae"].iloc[0]
    assert (mae.a, mae.b, mae.n_pairs, mae.test) == ("A:m", "B:m", 40, "permutation")
    assert mae["diff"] < 0 and mae.diff_hi < 0 and mae.p_value < 0.01 and not notes
    same, _ = compare_runs(a, a, n_resamples=200)
    assert (same["diff"] == 0).all() and (same.p_value == 1).all()


def test_one_model_each_and_unmatched_cases_are_reported(tmp_path: Path) -> None:
    a = nyu_run(tmp_path / "a", "m1", spread=0.5, cases=40)
    b = nyu_run(tmp_path / "b", "m2", spread=0.5, cases=36, seed=1)
    table, notes = compare_runs(a, b, n_resamples=100)
    assert set(table.a) == {"A:m1"} and set(table.n_pairs) == {36}
    assert any("4 case(s) only in A" in n for n in notes)


def test_cli_prints_writes_and_fails_clearly(tmp_path: Path, capsys) -> None:
    a = nyu_run(tmp_path / "a", "m", spread=1.0)
    out = tmp_path / "cmp.csv"
    assert main([str(a), str(a), "--bootstrap", "50", "--out", str(out)]) == 0
    assert "## Paired comparisons" in capsys.readouterr().out
    assert set(pd.read_csv(out).metric) >= {"mae", "delta1"}
    assert main([str(a), str(tmp_path / "missing")]) == 2
    assert "no raw_results.jsonl" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "raw_results.jsonl").write_text('{"case_id": 1}\n')
    with pytest.raises(ValueError, match=r"bad/raw_results.jsonl:1: not an outcome row"):
        compare_runs(a, tmp_path / "bad")
