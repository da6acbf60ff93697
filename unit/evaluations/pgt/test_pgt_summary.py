"""pgt's tables and files (support/evaluations/pgt/summary.py) on small hand-built outcomes.

Expected counts are worked out by hand in the comments, metrics against scikit-learn, the
source profile's zero rules against the original's helpers.py:645-652 (Zero-shot-PGT f42b715)."""

from __future__ import annotations

import json
import math
import sys
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score, precision_recall_fscore_support

from support.contract.evaluation import SummaryContext
from support.evaluations.pgt import source_metrics as sm
from support.evaluations.pgt import spec
from support.evaluations.pgt import summary as s
from support.evaluations.pgt.answers import AI, REAL
from support.evaluations.pgt.phrases import MODES
from support.evaluations.pgt.spec import PgtSettings
from support.settings import OutputSettings, RunSettings, StatisticsSettings
from support.statistics.metrics import cluster_bootstrap
from support.types import Outcome

N = None  # an answer that names no label
RESAMPLES = 200  # bootstrap resamples: enough for ordered intervals, cheap


def pgt(
    row: int,
    label: str,
    pred: str | None,
    *,
    model: str = "m",
    phrase: str = "baseline",
    mode: str = "",
    n: int = 1,
    generator: str = "g0",
    votes: tuple[str | None, ...] | None = None,
    error: str | None = None,
    source: bool = False,
) -> Outcome:
    """One image's outcome as task.py builds it (Verdict fields, group, cluster, params)."""
    method = f"{phrase}-{mode}" if mode else phrase
    votes = votes if votes is not None else (pred,) * n
    responses = [
        {"reasoning_response": "r", "extracted_prediction": v, "score": int(v == label)}
        for v in votes
    ]
    params = {"row": row, "image": f"/img/{row}.png", "label": label, "generator": generator}
    if source:
        params |= {"compat": "source", "order": 100 - row}  # the source's order: rows reversed
    common = dict(
        case_id=f"i{row}-{method}-n{n}-{model}",
        evaluation="pgt",
        model=model,
        group={"dataset": "d", "phrase": phrase, "mode": mode, "n": str(n), "generator": generator},
        cluster=f"r{row:05d}",
        params=params,
    )
    if error:
        return Outcome(status="error", error=error, **common)
    status = "unparsable" if pred is None else "correct" if pred == label else "wrong"
    return Outcome(
        status=status,
        scores={
            "y_true": label,
            "y_pred": pred,
            "individual_correct": sum(r["score"] for r in responses),
            "individual_total": len(responses),
        },
        prediction={"aggregated_prediction": pred, "vote_distribution": {"x": len(votes)}},
        extra={"question": "¿Q?", "full_prompt": "P", "responses": responses},
        backend_calls=2,
        cache_hits=1,
        **common,
    )


# ---- counts and their metrics ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("label", "pred", "counts"),
    [  # COUNT_FIELDS: tp, fp, fn, tn, individual_correct, individual_total, unparsable
        (AI, AI, [1, 0, 0, 0, 1, 1, 0]),
        (REAL, AI, [0, 1, 0, 0, 0, 1, 0]),
        (AI, REAL, [0, 0, 1, 0, 0, 1, 0]),
        (REAL, REAL, [0, 0, 0, 1, 1, 1, 0]),
        (AI, N, [0, 0, 1, 0, 0, 1, 1]),  # no label = the wrong one: FN for an AI image
        (REAL, N, [0, 1, 0, 0, 0, 1, 1]),  # FP for a real image
    ],
)
def test_case_counts(label: str, pred: str | None, counts: list[int]) -> None:
    assert s.case_counts(pgt(0, label, pred)) == counts
    assert s.label_correct(pgt(0, label, pred)) == int(label == pred)


def test_case_counts_of_n_responses_and_without_them() -> None:
    o = pgt(0, AI, AI, n=3, votes=(AI, REAL, AI))
    assert s.case_counts(o) == [1, 0, 0, 0, 2, 3, 0]  # 2 of 3 responses said ai-generated
    bare = Outcome("c", "pgt", "m", "correct", scores={"y_true": REAL, "y_pred": REAL})
    assert s.case_counts(bare) == [0, 0, 0, 1, 0, 0, 0]  # no individual counts: 0 of 0


TABLES = [(3, 1, 2, 4), (5, 2, 0, 3), (1, 4, 4, 1), (2, 0, 1, 6)]  # (TP, FP, FN, TN)


def _labels(tp: int, fp: int, fn: int, tn: int) -> tuple[list[str], list[str]]:
    return [AI] * tp + [REAL] * fp + [AI] * fn + [REAL] * tn, (
        [AI] * tp + [AI] * fp + [REAL] * fn + [REAL] * tn
    )


@pytest.mark.parametrize("reduce", [s.reduce_counts, s.reduce_counts_source])
def test_reduced_metrics_agree_with_scikit_learn(reduce) -> None:
    # both profiles agree where no denominator is 0; (..., 7) stacks keep their leading axes
    stack = np.array([[*t, 7, 10, 2] for t in TABLES], dtype=float)
    got = reduce(stack)
    assert list(got) == list(s.METRICS)
    for i, table in enumerate(TABLES):
        y_true, y_pred = _labels(*table)
        p, r, f, _ = precision_recall_fscore_support(y_true, y_pred, labels=[AI, REAL])
        want = {
            "accuracy": (table[0] + table[3]) / sum(table),
            "macro_f1": f1_score(y_true, y_pred, average="macro"),
            "precision_ai": p[0],
            "recall_ai": r[0],
            "f1_ai": f[0],
            "precision_real": p[1],
            "recall_real": r[1],
            "f1_real": f[1],
            "individual_accuracy": 0.7,  # 7 / 10
            "unparsable_rate": 2 / sum(table),
        }
        for k, v in want.items():
            assert got[k][i] == pytest.approx(v), k


def test_zero_denominators_differ_between_the_profiles() -> None:
    # only real images, all called real, no responses counted: TP = FP = FN = 0, TN = 4
    counts = np.array([0, 0, 0, 4, 0, 0, 0], dtype=float)
    writeup, source = s.reduce_counts(counts), s.reduce_counts_source(counts)
    # write-up (support.statistics.metrics.binary_metrics): nothing to get wrong -> 1.0; source: 0
    assert [float(writeup[k]) for k in ("precision_ai", "recall_ai", "f1_ai")] == [1, 1, 1]
    assert [float(source[k]) for k in ("precision_ai", "recall_ai", "f1_ai")] == [0, 0, 0]
    assert float(writeup["macro_f1"]) == 1.0 and float(source["macro_f1"]) == 0.5
    for m in (writeup, source):
        assert float(m["accuracy"]) == 1.0 and float(m["f1_real"]) == 1.0
        assert float(m["unparsable_rate"]) == 0.0
        assert math.isnan(float(m["individual_accuracy"]))  # 0 of 0 responses: undefined
    empty = s.reduce_counts_source(np.zeros(7))
    assert math.isnan(float(empty["accuracy"])) and math.isnan(float(empty["unparsable_rate"]))


# ---- what pairs in a comparison -----------------------------------------------------------------
def test_variant_pair_key_and_default_contrasts() -> None:
    base, cot, n5 = (
        pgt(3, AI, AI),
        pgt(3, AI, AI, phrase="cot", mode="prefill"),
        pgt(3, AI, AI, n=5),
    )
    assert [s.variant(o) for o in (base, cot)] == ["baseline", "cot-prefill"]
    # item id "i3-cot-prefill-n1": without the variant, the same key as the baseline's
    assert s.pair_key(cot, "variant") == s.pair_key(base, "variant") == "i3-n1-"
    assert s.pair_key(n5, "n") == s.pair_key(base, "n") == "i3-baseline-"
    assert s.pair_key(cot, "model") == "i3-cot-prefill-n1"  # any other field: the item id
    assert s.COMPARISONS.fields["n"](n5) == "n5"
    assert s.COMPARISONS.scores(base) == {"accuracy": 1}
    labels = {"variant": ["artifacts", "baseline", "cot-prefill"], "n": ["n1", "n3"]}
    assert s.COMPARISONS.defaults(labels) == [
        ("variant", "baseline", "artifacts"),
        ("variant", "baseline", "cot-prefill"),
        ("n", "n1", "n3"),
    ]
    # without the reference label there is nothing to compare with
    assert s.COMPARISONS.defaults({"variant": ["cot-prefill"], "n": ["n3", "n5"]}) == []
    assert s.COMPARISONS.defaults({}) == []


@pytest.mark.parametrize("generator", ["n1", "n5", "baseline", "cot-prefill", "gan"])
def test_pair_key_when_the_image_id_holds_a_label(generator: str) -> None:
    # task.py: case id f"{ex.id}-{method}-n{n}", ex.id = f"r{row:05d}-{slug(generator)}": a
    # generator slug may spell a method or an n; only the method or n after it is dropped
    def at(phrase: str, mode: str, n: int) -> Outcome:
        o = pgt(1, AI, AI, phrase=phrase, mode=mode, n=n)
        method = f"{phrase}-{mode}" if mode else phrase
        return replace(o, case_id=f"r00001-{generator}-{method}-n{n}-m")

    base, n5, cot = at("baseline", "", 1), at("baseline", "", 5), at("cot", "prefill", 1)
    assert s.pair_key(base, "n") == s.pair_key(n5, "n") == f"r00001-{generator}-baseline-"
    assert s.pair_key(base, "variant") == s.pair_key(cot, "variant") == f"r00001-{generator}-n1-"
    other = replace(base, case_id="r00002-gan-baseline-n1-m")  # another image never pairs
    assert s.pair_key(other, "n") != s.pair_key(base, "n")


def test_mode_rank() -> None:
    assert s._mode_rank("") == -1  # baseline first
    assert [s._mode_rank(m) for m in MODES] == list(range(len(MODES)))
    assert s._mode_rank("other") == len(MODES)


# ---- summary.csv ------------------------------------------------------------------------------
def outcomes_of_a_run() -> list[Outcome]:
    out = [  # baseline, n = 1: TP 2, FN 1 (an unparsable), FP 1, TN 2; 4 of 6 right
        pgt(0, AI, AI),
        pgt(1, AI, AI),
        pgt(2, AI, N),
        pgt(3, REAL, AI),
        pgt(4, REAL, REAL),
        pgt(5, REAL, REAL),
        pgt(6, REAL, None, error="timeout"),
    ]
    out += [  # cot-prefill-pseudo-user, n = 1: all right
        pgt(r, lab, lab, phrase="cot", mode="prefill-pseudo-user")
        for r, lab in ((0, AI), (1, REAL), (2, AI))
    ]
    out += [pgt(0, AI, AI, phrase="cot", mode="prefill")]  # MODES order: prefill first
    out += [pgt(0, AI, REAL, phrase="artifacts", mode="prefill")]  # sorts before "baseline"
    out += [  # baseline, n = 3: 5 of 9 responses right
        pgt(0, AI, AI, n=3, votes=(AI, AI, REAL)),
        pgt(1, REAL, REAL, n=3, votes=(REAL, N, REAL)),
        pgt(2, AI, REAL, n=3, votes=(REAL, REAL, AI)),
    ]
    out += [pgt(0, AI, None, model="a", error="boom")]  # a model with nothing scored
    return out


def test_summary_rows_columns_counts_and_intervals() -> None:
    table = s.summarize(outcomes_of_a_run(), SummaryContext.of(n_resamples=RESAMPLES, seed=3))
    assert list(table.columns) == [
        *["model", "dataset", "phrase", "mode", "n_responses", "n", "n_error", "correct"],
        *["TP", "TN", "FP", "FN", "individual_correct", "individual_total"],
        *[c for m in s.METRICS for c in (m, f"{m}_lo", f"{m}_hi")],  # each metric, its interval
    ]
    # rows: model, dataset, baseline first, phrase, mode in MODES order, n
    keys = [tuple(r) for r in table[["model", "phrase", "mode", "n_responses"]].values]
    assert keys == [
        ("a", "baseline", "", 1),
        ("m", "baseline", "", 1),
        ("m", "baseline", "", 3),
        ("m", "artifacts", "prefill", 1),  # baseline first, then the phrases by name
        ("m", "cot", "prefill", 1),
        ("m", "cot", "prefill-pseudo-user", 1),
    ]
    errors_only = table.iloc[0]
    assert errors_only["n"] == 0 and errors_only["n_error"] == 1
    assert pd.isna(errors_only["TP"]) and pd.isna(errors_only["accuracy"])
    base = table.iloc[1]
    assert (base["n"], base["n_error"], base["correct"]) == (6, 1, 4)
    assert [base[k] for k in ("TP", "TN", "FP", "FN")] == [2, 2, 1, 1]
    assert (base["individual_correct"], base["individual_total"]) == (4, 6)
    y_true, y_pred = [AI, AI, AI, REAL, REAL, REAL], [AI, AI, REAL, AI, REAL, REAL]
    assert base["accuracy"] == pytest.approx(4 / 6)
    assert base["macro_f1"] == pytest.approx(f1_score(y_true, y_pred, average="macro"))
    assert base["unparsable_rate"] == pytest.approx(1 / 6)
    n3 = table.iloc[2]
    assert (n3["individual_correct"], n3["individual_total"]) == (5, 9)
    assert n3["individual_accuracy"] == pytest.approx(5 / 9)
    for _, row in table.iloc[1:3].iterrows():  # 6 and 3 images: intervals around the value
        for m in ("accuracy", "macro_f1", "individual_accuracy"):
            assert row[f"{m}_lo"] <= row[m] <= row[f"{m}_hi"], m
        assert row["accuracy_lo"] < row["accuracy_hi"]
    one = table.iloc[4]  # one image: no interval
    assert one["n"] == 1 and math.isnan(one["accuracy_lo"])
    head = s.headline(table)
    assert list(head.columns) == [
        *s.COMBINATION, "n", "n_error",
        "accuracy", "accuracy_lo", "accuracy_hi", "macro_f1", "macro_f1_lo", "macro_f1_hi",
        "individual_accuracy", "individual_accuracy_lo", "individual_accuracy_hi",
    ]  # fmt: skip
    assert list(head.index) == list(range(6)) and head["macro_f1"].iloc[1] == base["macro_f1"]


def test_source_profile_summary_uses_the_zero_rules() -> None:
    outs = [pgt(r, REAL, REAL, source=True) for r in range(4)]  # no AI image at all
    writeup = s.summarize(outs, SummaryContext.of(n_resamples=0)).iloc[0]
    source = s.summarize(outs, SummaryContext.of(n_resamples=0, compat="source")).iloc[0]
    assert writeup["macro_f1"] == 1.0 and source["macro_f1"] == 0.5  # helpers.py: f1_ai = 0
    assert s.summarize([], SummaryContext.of(n_resamples=0)).empty
    assert list(s.combinations([])) == []


def test_combinations_in_sorted_order() -> None:
    outs = [pgt(0, AI, AI, model="z"), pgt(1, AI, AI, n=3), pgt(2, AI, AI), pgt(3, AI, AI)]
    got = [(key, [o.params["row"] for o in group]) for key, group in s.combinations(outs)]
    assert got == [
        (("m", "d", "baseline", "", 1), [2, 3]),
        (("m", "d", "baseline", "", 3), [1]),
        (("z", "d", "baseline", "", 1), [0]),
    ]


# ---- recall per generator -------------------------------------------------------------------
def test_generator_recall_writeup() -> None:
    outs = [pgt(r, AI, AI, generator="g1") for r in range(3)]
    outs += [pgt(3, AI, REAL, generator="g1"), pgt(4, AI, N, generator="g1")]  # 3 of 5
    outs += [pgt(5, REAL, REAL, generator="real"), pgt(6, REAL, AI, generator="real")]
    outs += [pgt(7, AI, None, generator="g2", error="x")]  # errors: left out
    got = s.generator_recall(outs, n_resamples=RESAMPLES, seed=1)
    assert list(got) == ["g1", "real"]
    assert got["g1"]["recall"] == pytest.approx(3 / 5) and got["g1"]["n"] == 5
    assert got["real"]["recall"] == 0.5 and got["real"]["n"] == 2  # the real class's recall
    lo, hi = got["g1"]["ci"]
    assert 0 <= lo <= 3 / 5 <= hi <= 1 and lo < hi
    assert all(math.isnan(x) for x in s.generator_recall(outs, n_resamples=0)["g1"]["ci"])


def test_generator_recall_intervals_resample_images() -> None:
    # the interval is support.statistics.metrics.cluster_bootstrap over images: rows (right,
    # counted)
    outs = [pgt(r, AI, [AI, REAL, N, AI][r % 4], generator="g1", source=True) for r in range(30)]
    outs += [pgt(30, REAL, REAL, generator="g1", source=True)]
    for source, rows in (
        (False, [[int(o.status == "correct"), 1] for o in outs]),  # share labelled right
        (True, [[int(o.scores["y_pred"] == AI), int(o.scores["y_pred"] in (AI, REAL))]
                for o in outs[:30]]),  # AI images: TP over TP + FN, None in neither
    ):  # fmt: skip
        e = cluster_bootstrap(
            np.array(rows, dtype=float),  # one image a cluster, clusters in row order
            lambda c: {"recall": sm.zero_ratio(c[..., 0], c[..., 1])},
            RESAMPLES,
            4,
        )["recall"]
        got = s.generator_recall(outs, n_resamples=RESAMPLES, seed=4, source=source)["g1"]
        assert got["ci"] == [e.low, e.high], source
        again = s.generator_recall(outs, n_resamples=RESAMPLES, seed=5, source=source)["g1"]
        assert again["ci"] != got["ci"]  # the seed is used


def test_generator_recall_source_interval() -> None:
    outs = [pgt(r, AI, AI, generator="g1", source=True) for r in range(4)]
    outs += [pgt(4, AI, REAL, generator="g1", source=True), pgt(5, AI, N, generator="g1")]
    outs += [pgt(6, AI, None, generator="g1", error="x")]
    got = s.generator_recall(outs, n_resamples=RESAMPLES, source=True)["g1"]
    assert got["recall"] == pytest.approx(4 / 5) and got["n"] == 5  # TP 4, FN 1, None in neither
    lo, hi = got["ci"]
    assert 0 <= lo <= 4 / 5 <= hi <= 1 and lo < hi


# ---- the source's files -----------------------------------------------------------------------
def test_num_and_count() -> None:
    assert s._num(np.float64("nan")) is None and s._num(float("nan")) is None
    assert type(s._num(np.int64(3))) is int and s._num(np.float64(0.25)) == 0.25
    assert s._num("x") == "x"
    assert s._count(np.float64(4.0)) == 4 and type(s._count(4.0)) is int
    assert s._count(float("nan")) is None


def test_performance_json_of_a_row() -> None:
    outs = outcomes_of_a_run()
    table = s.summarize(outs, SummaryContext.of(n_resamples=RESAMPLES))
    gens = {"g0": {"recall": np.float64(0.5), "n": 3, "ci": [np.float64("nan"), 1.0]}}
    perf = s.performance(table.iloc[1], gens, RESAMPLES, 7)
    assert perf["mode"] is None and perf["n_responses"] == 1  # baseline: no mode
    m = perf["metrics"]
    assert list(m)[:6] == [
        "total_examples", "correct_predictions", "accuracy", "macro_f1", "class_metrics",
        "confusion_matrix",
    ]  # fmt: skip
    assert m["total_examples"] == 6 and m["correct_predictions"] == 4
    assert m["confusion_matrix"] == {"TP": 2, "TN": 2, "FP": 1, "FN": 1}
    # ai: p = 2/3, r = 2/3; real: p = 2/3 (TN 2, FN 1), r = 2/3 (TN 2, FP 1)
    assert list(m["class_metrics"]) == [REAL, AI]
    assert m["class_metrics"][AI] == pytest.approx({"precision": 2 / 3, "recall": 2 / 3,
                                                    "f1": 2 / 3})  # fmt: skip
    assert "individual_responses" not in m
    assert m["per_generator_recall"] == {"g0": {"recall": 0.5, "n": 3, "ci": [None, 1.0]}}
    ci = m["confidence_intervals"]
    assert "individual_accuracy" not in ci and next(iter(ci)) == "accuracy"
    assert ci["accuracy"] == [table.iloc[1]["accuracy_lo"], table.iloc[1]["accuracy_hi"]]
    assert m["bootstrap"] == {"resamples": RESAMPLES, "level": 0.95, "seed": 7}
    assert m["errors"] == 1
    perf3 = s.performance(table.iloc[2], {}, RESAMPLES, 0)["metrics"]
    assert perf3["individual_responses"] == {"total": 9, "correct": 5,
                                             "accuracy": pytest.approx(5 / 9)}  # fmt: skip
    assert "individual_accuracy" in perf3["confidence_intervals"]
    assert s.performance(table.iloc[4], {}, 0, 0)["mode"] == "prefill"


def test_reasoning_entries_and_log() -> None:
    ok, bad = pgt(1, AI, REAL, n=3, votes=(REAL, REAL, AI)), pgt(2, REAL, None, error="boom")
    entry = s.reasoning_entry(ok)
    assert list(entry) == [
        "image", "generator", "question", "full_prompt", "ground_truth", "responses",
        "aggregated_prediction", "aggregated_score", "vote_distribution",
    ]  # fmt: skip
    assert entry["aggregated_score"] == 0 and entry["ground_truth"] == AI
    assert entry["responses"] == [dict(r) for r in ok.extra["responses"]]
    assert s.reasoning_entry(bad)["error"] == "boom" and "error" not in entry
    assert s.reasoning_entry(bad)["aggregated_prediction"] is None
    assert s.reasoning_entry(bad)["vote_distribution"] == {}
    src = s.reasoning_entry_source(pgt(1, AI, AI))
    assert list(src) == [k for k in entry if k != "generator"] and src["aggregated_score"] == 1
    assert s.reasoning_entry_source(bad)["vote_distribution"] == {}
    key = ("m", "d", "baseline", "", 3)
    text = s.log_text(key, [ok, bad], None, [Path("/x/a.json")])
    assert text.splitlines() == [
        "dataset=d model=m phrase=baseline mode=- n=3",
        "stage 1 temperature=1.0, stage 2 temperature=0.0",  # n > 1 samples at 1.0
        "examples: 2; statuses: {'error': 1, 'wrong': 1}",
        "model calls: 2 sent, 1 served from cache",
        "accuracy=None macro_f1=None confusion=None",
        "error i2-baseline-n1-m: boom",
        "wrote /x/a.json",
    ]
    perf = {"metrics": {"accuracy": 0.5, "macro_f1": 0.25, "confusion_matrix": {"TP": 1},
                        "individual_responses": {"total": 3}}}  # fmt: skip
    text = s.log_text(("m", "d", "cot", "prefill", 1), [ok], perf, [])
    assert "stage 1 temperature=0.0" in text and "mode=prefill" in text
    assert "accuracy=0.5 macro_f1=0.25 confusion={'TP': 1}\n" in text
    assert "individual responses: {'total': 3}\n" in text


def _run(tmp_path: Path, compat: str) -> RunSettings:
    return RunSettings(
        seed=0,
        compat=compat,
        output=OutputSettings(results_dir=tmp_path / "results", run_id="t1"),
        statistics=StatisticsSettings(bootstrap=50),
    )


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The plots package (support.evaluations.pgt.plots, seconds of matplotlib, tested in
    test_pgt_plots.py) stood in for by a recorder of what make_all was asked to read."""
    calls: list[dict] = []

    def make_all(
        root: Path, out_dir: Path, run: str, reasoning_run: str, order: tuple = ()
    ) -> list[Path]:
        calls.append(
            {
                "root": root,
                "out_dir": out_dir,
                "run": run,
                "reasoning_run": reasoning_run,
                "order": order,
            }
        )
        return [out_dir / "figure.png"]

    plots = types.ModuleType("support.evaluations.pgt.plots")
    plots.PlotSkipped = type("PlotSkipped", (UserWarning,), {})  # type: ignore[attr-defined]
    plots.make_all = make_all  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "support.evaluations.pgt.plots", plots)
    return calls


def test_write_outputs_writeup_files(tmp_path: Path, figures: list[dict]) -> None:
    outs = [pgt(r, lab, p) for r, lab, p in ((2, AI, AI), (0, REAL, AI), (1, AI, N))]
    outs.append(pgt(3, REAL, None, error="boom"))
    run = _run(tmp_path, "writeup")
    ctx = SummaryContext(run, PgtSettings(), data_label=spec.data_label(run))
    table = s.summarize(outs, ctx)
    written = s.write_outputs(outs, table, tmp_path / "out", ctx)
    folder = tmp_path / "results" / "pgt" / "d" / "m" / "baseline"
    assert written[0] == tmp_path / "out" / "generator_recall.csv"
    assert {p.name for p in written} >= {"reasoning_t1.json", "performance_t1.json",
                                         "evaluation_t1.log", "generator_recall.csv"}  # fmt: skip
    text = (folder / "reasoning_t1.json").read_text(encoding="utf-8")
    reasoning = json.loads(text)
    assert text == json.dumps(reasoning, indent=2, ensure_ascii=False) + "\n"  # "¿" kept as is
    assert [e["image"] for e in reasoning] == [f"/img/{r}.png" for r in range(4)]  # row order
    assert reasoning[3]["error"] == "boom"
    perf = json.loads((folder / "performance_t1.json").read_text())
    # TP 1 (row 2), FP 1 (row 0), FN 1 (row 1, unparsable): accuracy 1/3
    assert perf["metrics"]["confusion_matrix"] == {"TP": 1, "TN": 0, "FP": 1, "FN": 1}
    assert perf["metrics"]["accuracy"] == pytest.approx(1 / 3)
    recall = pd.read_csv(tmp_path / "out" / "generator_recall.csv")
    assert list(recall.columns) == [*s.COMBINATION, "generator", "recall", "recall_lo",
                                    "recall_hi", "n"]  # fmt: skip
    assert recall["recall"].tolist() == pytest.approx([1 / 3]) and recall["n"].tolist() == [3]
    first = recall.iloc[0]
    assert [first[k] for k in ("model", "dataset", "phrase", "n_responses", "generator")] == [
        "m", "d", "baseline", 1, "g0"
    ]  # fmt: skip
    assert 0 <= first["recall_lo"] <= first["recall_hi"] <= 1
    log = (folder / "evaluation_t1.log").read_text()
    assert "error i3-baseline-n1-m: boom" in log and f"wrote {folder / 'reasoning_t1.json'}" in log
    # the figures read this run's performance_<run>.json and reasoning files, in the run folder
    # ... with the models in the run's --model order
    assert figures == [{"root": tmp_path / "results" / "pgt", "out_dir": tmp_path / "out" /
                        "figures", "run": "t1", "reasoning_run": "t1",
                        "order": run.models.names}]  # fmt: skip
    assert written[1] == tmp_path / "out" / "figures" / "figure.png"  # run folder's files first
    report = ctx.report.text()
    assert "PGT: real vs AI-generated image detection" in report
    assert "synthetic sample" in report and "## Recall per generator" in report


def test_write_outputs_source_files(tmp_path: Path, figures: list[dict]) -> None:
    labels = [(0, AI, AI), (1, REAL, AI), (2, AI, N), (3, REAL, REAL)]
    outs = [pgt(r, lab, p, source=True, n=3, votes=(p, p, AI)) for r, lab, p in labels]
    outs.append(pgt(4, AI, None, source=True, n=3, error="boom"))
    outs.append(pgt(9, AI, None, source=True, phrase="cot", mode="prefill", error="x"))
    run = _run(tmp_path, "source")
    ctx = SummaryContext(run, PgtSettings())
    written = s.write_outputs(outs, s.summarize(outs, ctx), tmp_path / "out", ctx)
    root = tmp_path / "results" / "pgt"
    folder = root / "d" / "m" / "baseline" / "n=3"
    assert folder / "performance_fixed_t1.json" in written
    text = (folder / "reasoning_t1.json").read_text()
    reasoning = json.loads(text)
    assert text == json.dumps(reasoning, indent=2)  # the source's json.dump(obj, f, indent=2)
    assert [e["image"] for e in reasoning] == [f"/img/{r}.png" for r in (3, 2, 1, 0)]  # order
    perf = json.loads((folder / "performance_fixed_t1.json").read_text())
    assert perf["mode"] == "prefill" and perf["n_responses"] == 3  # baseline records --mode
    m = perf["metrics"]
    # TP 1 (row 0), FP 1 (row 1), FN 1 (row 2, None), TN 1 (row 3); the error left out
    assert m["confusion_matrix"] == {"TP": 1, "TN": 1, "FP": 1, "FN": 1}
    # 12 responses: rows 0 (3 right), 1 (AI on real: 0), 2 (None, None, AI: 1), 3 (2 right)
    assert m["individual_responses"] == {"total": 12, "correct": 6, "accuracy": 0.5}
    conf = json.loads((folder / "confidence.json").read_text())
    assert conf["metadata"] == {"dataset": "d", "model": "m", "phrase": "baseline",
                                "mode": "prefill", "n_responses": 3, "n_examples": 4}  # fmt: skip
    assert conf["macro_f1"]["point"] == pytest.approx(0.5) and conf["macro_f1"]["n_bootstrap"]
    log = (root / "logs" / "d" / "m" / "baseline" / "n=3" / "evaluation_t1.log").read_text()
    assert "error i4-baseline-n3-m: boom" in log and "wrote " in log
    nothing = root / "logs" / "d" / "m" / "cot" / "prefill" / "evaluation_t1.log"
    assert "accuracy=None" in nothing.read_text()  # nothing scored: a log only
    assert not (root / "d" / "m" / "cot").exists()
    # the figures read performance_fixed_<run>.json (helpers.py:776) and reasoning_<run>.json
    assert [(c["run"], c["reasoning_run"]) for c in figures] == [("fixed_t1", "t1")]


def test_write_outputs_without_outcomes_draws_nothing(tmp_path: Path, figures: list[dict]) -> None:
    ctx = SummaryContext(_run(tmp_path, "writeup"), PgtSettings())
    written = s.write_outputs([], s.summarize([], ctx), tmp_path / "out", ctx)
    assert written == [tmp_path / "out" / "generator_recall.csv"] and figures == []
    assert list(pd.read_csv(written[0]).columns)[-5:] == [
        "generator",
        "recall",
        "recall_lo",
        "recall_hi",
        "n",
    ]  # a header even when empty


def test_data_label_and_report_text(tmp_path: Path) -> None:
    assert "synthetic sample" in spec.data_label(RunSettings())
    real = RunSettings(evaluations={"pgt": PgtSettings(dataset="df40", csv=tmp_path / "a.csv")})
    assert spec.data_label(real) is None
    named = RunSettings(evaluations={"pgt": PgtSettings(dataset="df40")})
    assert spec.data_label(named) is None
    table = s.summarize(outcomes_of_a_run()[:6], SummaryContext.of(n_resamples=0))
    empty = pd.DataFrame(columns=[*s.COMBINATION, "generator", "recall", "recall_lo",
                                  "recall_hi", "n"])  # fmt: skip
    text = s.report_text(table, empty, "synthetic")
    assert "macro_f1" in text and "Recall per generator" not in text
    assert "positive class ai-generated" in text
    recall = pd.DataFrame([dict(zip(empty.columns, ["m", "d", "baseline", "", 1, "g0", 0.5,
                                                    0.1, 0.9, 4], strict=True))])  # fmt: skip
    assert "## Recall per generator" in s.report_text(table, recall)
