"""`python -m support.compare.runs RUN_A RUN_B`: two runs' raw rows paired by case id."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support.compare.runs import CompareOptions, compare_runs, main
from support.storage.files import write_jsonl
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
    table, notes = compare_runs(a, b, CompareOptions(n_resamples=500))
    mae = table[table.metric == "mae"].iloc[0]
    assert (mae.a, mae.b, mae.n_pairs, mae.test) == ("A:m", "B:m", 40, "permutation")
    assert mae["diff"] < 0 and mae.diff_hi < 0 and mae.p_value < 0.01 and not notes
    same, _ = compare_runs(a, a, CompareOptions(n_resamples=200))
    assert (same["diff"] == 0).all() and (same.p_value == 1).all()


def test_one_model_each_and_unmatched_cases_are_reported(tmp_path: Path) -> None:
    a = nyu_run(tmp_path / "a", "m1", spread=0.5, cases=40)
    b = nyu_run(tmp_path / "b", "m2", spread=0.5, cases=36, seed=1)
    table, notes = compare_runs(a, b, CompareOptions(n_resamples=100))
    assert set(table.a) == {"A:m1"} and set(table.n_pairs) == {36}
    assert any("4 case(s) only in A" in n for n in notes)


def test_cli_prints_writes_and_fails_clearly(tmp_path: Path, capsys) -> None:
    a = nyu_run(tmp_path / "a", "m", spread=1.0)
    out = tmp_path / "cmp.csv"
    assert main([str(a), str(a), "--bootstrap", "50", "--out", str(out)]) == 0
    assert "## Paired comparisons" in capsys.readouterr().out
    assert set(pd.read_csv(out).metric) >= {"mae", "delta1"}
    assert main([str(a), str(tmp_path / "missing")]) == 2
    assert "raw_results.jsonl: missing" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "raw_results.jsonl").write_text('{"case_id": 1}\n')
    with pytest.raises(ValueError, match=r"bad/raw_results.jsonl:1: case_id: expected a text"):
        compare_runs(a, tmp_path / "bad")


def two_model_run(folder: Path, models: dict[str, float], seed: int = 0) -> Path:
    """A nyu_distance run folder of several models: model -> its answers' spread (m)."""
    rows = []
    for k, (model, spread) in enumerate(models.items()):
        nyu_run(folder / model, model, spread, seed=seed + k)
        rows += (folder / model / "raw_results.jsonl").read_text().splitlines()
    (folder / "raw_results.jsonl").write_text("\n".join(rows) + "\n")
    return folder


def test_one_model_of_each_multi_model_run_is_picked(tmp_path: Path) -> None:
    a = two_model_run(tmp_path / "a", {"good": 0.0, "bad": 2.0})
    b = two_model_run(tmp_path / "b", {"other": 0.0, "worse": 3.0}, seed=5)
    with pytest.raises(ValueError, match=r"runs share no model \(A: good, bad; B: other, worse\)"):
        compare_runs(a, b)  # which of each? the error says how to pick
    table, _ = compare_runs(a, b, CompareOptions("bad", "other", n_resamples=100))
    mae = table[table.metric == "mae"].iloc[0]
    assert (mae.a, mae.b, mae.n_pairs) == ("A:bad", "B:other", 40)
    assert mae["diff"] < 0  # other answers exactly; bad is off by ~2 m
    # only A's side picked: B has the same model, so they pair
    same, _ = compare_runs(a, a, CompareOptions("good", n_resamples=50))
    assert set(zip(same.a, same.b, strict=True)) == {("A:good", "B:good")}


def test_run_at_model_form_and_option_errors(tmp_path: Path, capsys) -> None:
    a = two_model_run(tmp_path / "a", {"good": 0.0, "bad": 2.0})
    b = two_model_run(tmp_path / "b", {"other": 0.0, "worse": 3.0}, seed=5)
    out = tmp_path / "cmp.csv"
    assert main([f"{a}@bad", f"{b}@other", "--bootstrap", "50", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"A = {a} (model bad)" in printed and f"B = {b} (model other)" in printed
    assert set(pd.read_csv(out).a) == {"A:bad"} and set(pd.read_csv(out).b) == {"B:other"}
    assert (
        main([str(a), str(b), "--model-a", "good", "--model-b", "worse", "--bootstrap", "20"]) == 0
    )
    capsys.readouterr()
    # a model not in its run: the option and the run's models are named
    assert main([str(a), str(b), "--model-a", "nope", "--model-b", "other"]) == 2
    err = capsys.readouterr().err
    assert "--model-a (or RUN_A@MODEL) 'nope': no such model in run A" in err
    assert "its models: good, bad" in err
    assert main([str(a), f"{b}@gone"]) == 2
    assert "--model-b (or RUN_B@MODEL) 'gone'" in capsys.readouterr().err
    # two models named for one side: a usage error
    with pytest.raises(SystemExit) as stop:
        main([f"{a}@bad", str(b), "--model-a", "good", "--model-b", "other"])
    assert stop.value.code == 2
    assert "--model-a 'good' and RUN_A@bad name two models" in capsys.readouterr().err


def test_a_folder_whose_name_holds_an_at_sign_is_a_run(tmp_path: Path) -> None:
    from support.compare.runs import split_run

    odd = nyu_run(tmp_path / "run@v2", "m", spread=0.0)
    assert split_run(str(odd)) == (odd, None)
    assert split_run(f"{odd}@m") == (odd, "m")
    assert split_run(f"{tmp_path / 'a'}@m@x") == (tmp_path / "a@m@x", None)  # no folder: as is
    (tmp_path / "a").mkdir()
    assert split_run(f"{tmp_path / 'a'}@m@x") == (tmp_path / "a", "m@x")  # a model with "@"
