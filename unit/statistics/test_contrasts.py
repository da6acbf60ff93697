"""Which cases pair in a comparison (support/statistics/pairing.py), and comparisons.csv end to
end."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fixtures.statistics_options import parse_compare
from support.evaluations.pointing.summary import COMPARISONS as POINTING
from support.statistics.pairing import (
    TABLE_COLUMNS,
    Comparisons,
    comparison_table,
    observed_labels,
    pairs_of,
    power_table,
    resolve,
)
from support.types import Outcome


def outcome(case: str, model: str, condition: str, correct: int, status: str = "") -> Outcome:
    status = status or ("correct" if correct else "wrong")
    return Outcome(
        case_id=f"{case}-{condition}-{model}",
        evaluation="pointing",
        model=model,
        status=status,
        group={"condition": condition, "organ": "Liver"},
        cluster=case[:4],  # s000, s001, ...: ten cases per cluster
        scores={"y_true": 1, "y_pred": 1 if correct else 0, "hit": bool(correct)},
    )


def run_of(model_rates: dict[str, float], n: int = 40, seed: int = 0) -> list[Outcome]:
    rng = np.random.default_rng(seed)
    found = []
    for model, rate in model_rates.items():
        for i in range(n):
            for condition in ("zero_shot", "fewshot_standard"):
                found.append(outcome(f"s{i:04d}-liver", model, condition, int(rng.random() < rate)))
    return found


@pytest.mark.parametrize(
    ("item", "model"),
    [("s0001-liver-zero_shot", "gpt-4o"), ("img0000-pair0", "hf:/models/x-y"), ("a-b", "b")],
)
def test_an_outcome_id_splits_back_into_its_item_and_model(item: str, model: str) -> None:
    """Outcome.case_id is outcome_id(item, model); item_id takes the model's suffix off again,
    whatever dashes either holds (comparisons pair on it)."""
    from support.types import outcome_id

    o = Outcome(case_id=outcome_id(item, model), evaluation="e", model=model, status="correct")
    assert o.case_id == f"{item}-{model}" and o.item_id == item


def test_model_pairs_are_the_same_cases_and_unmatched_are_counted() -> None:
    outs = run_of({"a": 0.5, "b": 0.5}, n=6)
    outs = [o for o in outs if not (o.model == "b" and o.case_id.startswith("s0005"))]
    outs.append(outcome("s0009-liver", "a", "zero_shot", 1))  # only on side a
    broken = outcome("s0000-liver", "b", "zero_shot", 0, status="error")
    outs = [o for o in outs if o.case_id != "s0000-liver-zero_shot-b"] + [broken]
    (pairs, only_a, only_b) = pairs_of(outs, POINTING, "model", "a", "b")[""]
    # 6 cases x 2 conditions = 12 keys of a, plus s0009; b lacks s0005 (2 keys); s0000 zero-shot
    # of b is an error: it pairs with nothing
    assert (len(pairs), only_a, only_b) == (12 - 2 - 1, 1 + 2, 0)


def test_condition_pairs_stay_within_a_model() -> None:
    outs = run_of({"a": 0.9, "b": 0.2}, n=5)
    found = pairs_of(outs, POINTING, "condition", "zero_shot", "fewshot_standard")
    assert sorted(found) == ["a", "b"]
    for pairs, only_a, only_b in found.values():
        assert (len(pairs), only_a, only_b) == (5, 0, 0)


def test_default_and_requested_contrasts() -> None:
    labels = observed_labels(run_of({"m1": 0.5, "m2": 0.5}, n=2), POINTING)
    assert labels["model"] == ["m1", "m2"]
    assert POINTING.defaults(labels) == [("condition", "zero_shot", "fewshot_standard")]
    contrasts, notes = resolve(
        [("m2", "m1"), ("fewshot_standard", "zero_shot"), ("x", "m1")], labels
    )
    assert contrasts == [("model", "m2", "m1"), ("condition", "fewshot_standard", "zero_shot")]
    assert notes == ["--compare x,m1: no field of this run has both labels"]


def test_a_planted_difference_is_found_and_holm_covers_the_table() -> None:
    table, notes = comparison_table(
        "pointing", run_of({"good": 0.9, "poor": 0.5}, n=80), POINTING, n_resamples=400, seed=1
    )
    assert list(table.columns) == list(TABLE_COLUMNS) and not notes
    models = table[(table.field == "model") & (table.metric == "accuracy")].iloc[0]
    assert (models.a, models.b, models.test) == ("good", "poor", "mcnemar-exact")
    assert models["diff"] < -0.2 and models.diff_hi < 0 and models.p_holm < 0.01
    # Holm over the whole table: each adjusted p is at least the raw one, at most 1
    assert (table.p_holm >= table.p_value - 1e-12).all() and (table.p_holm <= 1).all()


def test_no_pairs_is_a_note_not_an_error() -> None:
    spec = Comparisons(counts=lambda o: [1.0], reduce=lambda s: {"n": s[..., 0]}, metrics=("n",))
    outs = [
        outcome("s0000-liver", "a", "zero_shot", 1),
        outcome("s0001-liver", "b", "zero_shot", 1),
    ]
    table, notes = comparison_table("x", outs, spec)
    assert table.empty and list(table.columns) == list(TABLE_COLUMNS)
    assert notes == ["model b vs a: no pairs"]


@pytest.mark.slow
def test_comparisons_csv_end_to_end(run_suite) -> None:
    result, results = run_suite("pointing", "-m", "quick", "--model=oracle,chance")
    assert result.ret == 0, result.stdout.str()
    out = results / "pointing" / "r1"
    table = pd.read_csv(out / "comparisons.csv")
    models = table[(table.field == "model") & (table.metric == "accuracy")].iloc[0]
    assert (models.a, models.b) == ("oracle", "chance") or (models.a, models.b) == (
        "chance",
        "oracle",
    )
    assert models.p_holm < 0.01
    oracle = table[(table.field == "condition") & (table.model == "oracle")]
    assert len(oracle) and (oracle["diff"] == 0).all() and (oracle.p_value == 1).all()
    assert "## Paired comparisons" in (out / "report.md").read_text()
    # --compare picks explicitly; an unknown pair is a note in report.md
    result, results = run_suite(
        "pointing",
        "-m",
        "quick",
        "--model=oracle,chance",
        "--compare=zero_shot,fewshot_standard",
        "--compare=gpt,oracle",
        run_id="r2",
    )
    assert result.ret == 0, result.stdout.str()
    out = results / "pointing" / "r2"
    table = pd.read_csv(out / "comparisons.csv")
    assert set(table.field) == {"condition"} and set(table.b) == {"fewshot_standard"}
    assert (
        "--compare gpt,oracle: no field of this run has both labels"
        in (out / "report.md").read_text()
    )


@pytest.mark.parametrize("value", ["oracle", "oracle,", ",chance"])
def test_compare_needs_two_labels(value) -> None:
    with pytest.raises(pytest.UsageError, match="expected two labels"):
        parse_compare([value])
    assert parse_compare(["a,b", " a , b ", "b,a"]) == (("a", "b"), ("b", "a"))


def test_power_table_sizes_for_a_delta_and_a_half_width() -> None:
    table, _ = comparison_table(
        "pointing", run_of({"good": 0.8, "poor": 0.7}, n=80), POINTING, n_resamples=400, seed=1
    )
    big = power_table(table, delta=0.10, target=0.10)
    small = power_table(table, delta=0.05, target=0.05)
    row_big = big[(big.metric == "accuracy") & big.comparison.str.startswith("model")].iloc[0]
    row_small = small[(small.metric == "accuracy") & small.comparison.str.startswith("model")].iloc[
        0
    ]
    assert row_big.clusters == 8 and row_big.pairs == 160
    # halving the difference to detect needs about four times the clusters (normal approximation)
    ratio = row_small["clusters_for_delta_0.05"] / row_big["clusters_for_delta_0.1"]
    assert 3.0 <= ratio <= 5.0
    assert row_small["pairs_for_delta_0.05"] == pytest.approx(
        row_small["clusters_for_delta_0.05"] * 20, abs=20
    )
    # the half-width now, and the clusters for a target of exactly that half-width: the same n
    hw = power_table(table, delta=0.05, target=float(row_big.half_width))
    now = hw[(hw.metric == "accuracy") & hw.comparison.str.startswith("model")].iloc[0]
    assert now[f"clusters_for_half_width_{float(row_big.half_width):g}"] == pytest.approx(8, abs=1)
