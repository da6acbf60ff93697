"""Golden tables: the pointing original's recorded results rebuilt by vlmbench's source metrics.

unit/evaluations/pointing/data/pointing_recorded.json holds seven per-organ tables that the original
(fallcat/llm_cholec_organ at 5692c23) printed in its committed logs and notebooks, each citing
the file and lines it was transcribed from: five models (claude-sonnet-4, Llama-3.2-11B-Vision,
Qwen2.5-VL-7B, LLaVA-v1.6, Pixtral-12B from the 100-sample logs; gpt-5-mini and gemini-2.5-pro
from the 10-sample notebook), zero-shot and few-shot, two tables with undefined values ("--").

From each table's counts (TP, FN, TN, FP per organ; gTP = present cases predicted present whose
point hits; gFP = the same on absent cases) the cases are rebuilt and fed to
`support.evaluations.pointing.summary`: `source_metrics` (the original's metrics_summary file), the
`reduce_source_counts`/`reduce_macro` reducers and `summarize` (summary.csv). Every printed value
must come back at the printed precision. The original prints a ratio as a percentage with two
decimals and "--" when it is undefined (eval/pointing_metrics.py:122-124), and its macro line
averages the defined per-organ values (pointing_metrics.py:171-180).

Hits on present cases predicted absent: the original counts them in Hit@Point|Present
(pointing_metrics.py:65-66); in every recorded row Hit@Pt|Pres equals gTP / Pres, so there are none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from support.contract.evaluation import SummaryContext
from support.evaluations.pointing.classes import CLASS_NAMES, ORGAN_IDS
from support.evaluations.pointing.summary import (
    ALL,
    reduce_macro,
    reduce_source_counts,
    source_metrics,
    summarize,
)
from support.types import Outcome

DATA = Path(__file__).parent / "data" / "pointing_recorded.json"
TABLES: list[dict[str, Any]] = json.loads(DATA.read_text())["tables"]
IDS = [f"{t['model'].split('/')[-1]}-{t['prompt'] or 'notebook'}-{t['examples']}" for t in TABLES]


def printed(x: float | None) -> str:
    """A ratio as the original prints it: percent, two decimals; "--" when undefined."""
    if x is None or not np.isfinite(x):
        return "--"
    return f"{x * 100:.2f}%"


def rows_of(table: dict[str, Any]) -> list[dict[str, Any]]:
    """The table's rows as dicts keyed by its column names."""
    return [dict(zip(table["columns"], r, strict=True)) for r in table["rows"]]


def organ_cases(row: dict[str, Any]) -> list[tuple[int, int, int]]:
    """(y_true, y_pred, hit) per case of one organ, rebuilt from the row's counts."""
    tp, fn, tn, fp, gtp, gfp = (row[k] for k in ("TP", "FN", "TN", "FP", "gTP", "gFP"))
    return (
        [(1, 1, 1)] * gtp + [(1, 1, 0)] * (tp - gtp) + [(1, 0, 0)] * fn
        + [(0, 0, 0)] * tn + [(0, 1, 1)] * gfp + [(0, 1, 0)] * (fp - gfp)
    )  # fmt: skip


def records(table: dict[str, Any]) -> list[dict[str, list[int]]]:
    """The original's per-sample records (12 organs each, id order) holding the table's counts."""
    per_organ = [organ_cases(r) for r in rows_of(table)]
    assert {len(c) for c in per_organ} == {table["examples"]}
    return [
        {k: [c[i][j] for c in per_organ] for j, k in enumerate(("y_true", "y_pred", "hits"))}
        for i in range(table["examples"])
    ]


@pytest.fixture(params=TABLES, ids=IDS)
def table(request: pytest.FixtureRequest) -> dict[str, Any]:
    return request.param


def test_recorded_tables_cover_models_and_conditions() -> None:
    models = {t["model"] for t in TABLES}
    prompts = {t["prompt"] for t in TABLES}
    assert len(TABLES) >= 5 and len(models) >= 5
    assert "zero_shot" in prompts and any(p and p.startswith("fewshot") for p in prompts)
    undefined = sum(r.count("--") for t in TABLES for r in t["rows"])
    assert undefined > 0  # undefined hit rates (no present case) are among the goldens
    for t in TABLES:  # the row order is the original's organ order
        assert [r["label"] for r in rows_of(t)] == [CLASS_NAMES[i] for i in ORGAN_IDS]
        for r in rows_of(t):  # no hit on a present case predicted absent (see module doc)
            assert r["Hit@Pt|Pres"] == printed(r["gTP"] / r["Pres"] if r["Pres"] else None)


def test_source_metrics_reproduce_recorded_table(table: dict[str, Any]) -> None:
    """Counts in, the original's metrics_summary values out: every printed column, the totals
    line and the macro line."""
    m = source_metrics(records(table))
    assert m["n_examples"] == table["examples"]
    got_rows = [
        {
            "id": o["label_id"], "label": o["label"],
            "TP": o["TP"], "FN": o["FN"], "TN": o["TN"], "FP": o["FP"],
            "Pres": o["Present_n"], "Abs": o["Absent_n"], "Tot": o["Total"],
            "PresenceAcc": printed(o["PresenceAcc"]),
            "Hit@Pt|Pres": printed(o["Hit@Point|Present"]),
            "gTP": o["Gated_TP"], "gFN": o["Gated_FN"], "gTN": o["Gated_TN"], "gFP": o["Gated_FP"],
            "GatedAcc": printed(o["GatedAcc"]),
        }
        for o in m["per_organ_metrics"]
    ]  # fmt: skip
    assert got_rows == rows_of(table), table["source"]
    t = m["totals"]
    assert {
        "TP": t["TP"], "FN": t["FN"], "TN": t["TN"], "FP": t["FP"],
        "Present": t["Present_n"], "Absent": t["Absent_n"], "Total": t["Total"],
    } == table["totals"]  # fmt: skip
    macro = {
        "PresenceAcc": printed(m["macro_metrics"]["macro_presence_acc"]),
        "Hit@Point|Present": printed(m["macro_metrics"]["macro_hit_rate"]),
        "GatedAcc": printed(m["macro_metrics"]["macro_gated_acc"]),
        "F1": printed(m["macro_metrics"]["macro_f1"]),
    }
    assert {k: macro[k] for k in table["macro"]} == table["macro"], table["source"]


def test_summary_reducers_reproduce_recorded_table(table: dict[str, Any]) -> None:
    """The reducers behind summary.csv: per organ accuracy (PresenceAcc), point hit rate
    (Hit@Pt|Pres) and gated accuracy; over organs the macro means."""
    macro_counts = []
    for r in rows_of(table):
        tp, fn, tn, fp = r["TP"], r["FN"], r["TN"], r["FP"]
        hits, gated = r["gTP"] + r["gFP"], r["gTP"] + r["gTN"]
        out = reduce_source_counts(np.array([tp, fp, fn, tn, hits, 0, gated]))
        got = [printed(out[k]) for k in ("accuracy", "point_hit_rate", "gated_accuracy")]
        assert got == [r["PresenceAcc"], r["Hit@Pt|Pres"], r["GatedAcc"]], r["label"]
        macro_counts += [tp, fp, fn, tn, hits, gated]
    m = reduce_macro(np.array(macro_counts))
    macro = {
        "PresenceAcc": printed(m["macro_presence_accuracy"]),
        "Hit@Point|Present": printed(m["macro_hit_rate"]),
        "GatedAcc": printed(m["macro_gated_accuracy"]),
        "F1": printed(m["macro_f1"]),
    }
    assert {k: macro[k] for k in table["macro"]} == table["macro"], table["source"]


def test_summarize_reproduces_recorded_macros(table: dict[str, Any]) -> None:
    """Whole outcomes through `summarize` (a `--compat source` run): the per-organ rows and the
    ALL row's macro means are the printed ones."""
    outcomes = []
    for row, rec in enumerate(records(table)):
        cases = zip(ORGAN_IDS, rec["y_true"], rec["y_pred"], rec["hits"], strict=True)
        for organ, y, p, h in cases:
            outcomes.append(
                Outcome(
                    case_id=f"s{row}-{organ}", evaluation="pointing", model="m",
                    status="correct" if y == p else "wrong",
                    group={"condition": "zero_shot", "organ": CLASS_NAMES[organ]},
                    cluster=f"video{row % 5}",
                    scores={"y_true": y, "y_pred": p, "hit": bool(h) if p else None},
                    params={"row": row, "organ": organ, "compat": "source"},
                )
            )  # fmt: skip
    ctx = SummaryContext.of(n_resamples=2, compat="source")
    summary = summarize(outcomes, ctx).set_index("organ")
    for r in rows_of(table):
        s = summary.loc[r["label"]]
        got = [printed(s[k]) for k in ("accuracy", "point_hit_rate", "gated_accuracy")]
        assert got == [r["PresenceAcc"], r["Hit@Pt|Pres"], r["GatedAcc"]], r["label"]
    overall = summary.loc[ALL]
    macro = {
        "PresenceAcc": printed(overall["macro_presence_accuracy"]),
        "Hit@Point|Present": printed(overall["macro_hit_rate"]),
        "GatedAcc": printed(overall["macro_gated_accuracy"]),
        "F1": printed(overall["macro_f1"]),
    }
    assert {k: macro[k] for k in table["macro"]} == table["macro"], table["source"]
    totals = table["totals"]
    assert printed(overall["accuracy"]) == printed((totals["TP"] + totals["TN"]) / totals["Total"])
