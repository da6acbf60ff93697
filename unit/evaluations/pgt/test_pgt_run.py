"""The PGT suite end to end (pytester subprocess runs): oracle accuracy, the source's output tree
and JSON keys, metrics against scikit-learn, kept results and --override, bad datasets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from support.evaluations.pgt.phrases import MODES

# every test here runs the suite in a subprocess; one worker runs this module, so its costly
# module fixtures are built once, not once a worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("pgt_run")]

# the keys of the source's example files
PERFORMANCE_KEYS = {"model", "dataset", "phrase", "mode", "n_responses", "metrics"}
METRIC_KEYS = {
    "total_examples", "correct_predictions", "accuracy", "macro_f1", "class_metrics",
    "confusion_matrix",
}  # fmt: skip
ENTRY_KEYS = {
    "image", "question", "full_prompt", "ground_truth", "responses", "aggregated_prediction",
    "aggregated_score", "vote_distribution",
}  # fmt: skip
RESPONSE_KEYS = {"reasoning_response", "clean_answer_response", "extracted_prediction", "score"}


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    from support.evaluations.pgt.synthetic import build_pgt_sample

    return build_pgt_sample(tmp_path_factory.mktemp("pgt"))


@pytest.fixture
def run(run_suite, sample: Path):
    """run(*args, run_id=...) -> (RunResult, results root)."""

    def _run(*args: str, run_id: str = "r1", dataset: str | None = None):
        return run_suite("pgt", f"--pgt-dataset={dataset or sample}", "-rs", *args, run_id=run_id)

    return _run


@pytest.fixture(scope="module")
def oracle_run(module_run_suite, sample: Path, tmp_path_factory):
    """(RunResult, results root, report.html) of one run of the oracle and chance models in every
    phrase and mode at n=1 and n=5, shared (read-only) by the tests that read it."""
    report = tmp_path_factory.mktemp("pgt-report") / "report.html"
    result, root = module_run_suite(
        "pgt", f"--pgt-dataset={sample}", "-rs", "--model=oracle,chance", "--pgt-n=1,5",
        f"--html={report}",
    )  # fmt: skip
    return result, root, report


def read(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def expected_dirs(root: Path, model: str, n: int) -> list[Path]:
    base = root / "pgt" / "synthetic_sample" / model
    dirs = [base / "baseline"] + [base / p / m for p in ("cot", "s2") for m in MODES]
    return [d / f"n={n}" if n > 1 else d for d in dirs]


def test_oracle_is_perfect_in_every_mode_and_n_and_files_follow_the_source(oracle_run, tmp_path):
    result, root, report = oracle_run
    assert result.ret == 0, result.stdout.str()[-3000:]
    summary = pd.read_csv(root / "pgt" / "r1" / "summary.csv")
    assert len(summary) == 2 * 11 * 2  # models x (baseline + 2 phrases x 5 modes) x n
    oracle = summary[summary["model"] == "oracle"]
    assert (oracle["n"] == 48).all() and (oracle["n_error"] == 0).all()
    for metric in ("accuracy", "macro_f1", "recall_ai", "recall_real", "f1_ai", "f1_real"):
        assert (oracle[metric] == 1.0).all(), metric
    assert (oracle.loc[oracle["n_responses"] == 5, "individual_accuracy"] == 1.0).all()
    chance = summary[summary["model"] == "chance"]
    assert chance["accuracy"].between(0.2, 0.8).all()
    assert chance["accuracy"].nunique() > 1  # seeded draws, different per request

    for n in (1, 5):
        for folder in expected_dirs(root, "oracle", n):
            names = sorted(p.name for p in folder.iterdir() if p.is_file())
            assert names == ["evaluation_r1.log", "performance_r1.json", "reasoning_r1.json"]
            perf = read(folder / "performance_r1.json")
            assert set(perf) == PERFORMANCE_KEYS
            assert perf["n_responses"] == n and perf["dataset"] == "synthetic_sample"
            assert (perf["mode"] is None) == (perf["phrase"] == "baseline")
            m = perf["metrics"]
            assert set(m) >= METRIC_KEYS
            assert ("individual_responses" in m) == (n > 1)
            if n > 1:
                assert m["individual_responses"] == {"total": 240, "correct": 240, "accuracy": 1.0}
            assert set(m["class_metrics"]) == {"real", "ai-generated"}
            assert set(m["class_metrics"]["real"]) == {"precision", "recall", "f1"}
            assert m["confusion_matrix"] == {"TP": 24, "TN": 24, "FP": 0, "FN": 0}
            assert m["accuracy"] == 1.0 and m["correct_predictions"] == 48
            assert len(m["per_generator_recall"]) == 5
            entries = read(folder / "reasoning_r1.json")
            assert len(entries) == 48
            for e in entries:
                assert set(e) >= ENTRY_KEYS
                assert len(e["responses"]) == n
                assert all(set(r) == RESPONSE_KEYS for r in e["responses"])
                assert e["vote_distribution"] == {e["ground_truth"]: n}
                assert e["aggregated_score"] == 1
    # the figures, from this run's performance files, in the run folder and the HTML report
    figures = root / "pgt" / "r1" / "figures"
    stems = ("macro_f1_bars", "recall_radar", "vocab_lr")
    assert {p.name for p in figures.iterdir()} >= {
        f"{s}.{e}" for s in stems for e in ("pdf", "png")
    }
    confidence = read(figures / "confidence.json")["synthetic_sample"]["oracle"]
    assert {v["macro_f1"] for v in confidence.values()} == {1.0} and len(confidence) == 22
    page = report.read_text()
    assert all(f'alt="{s}.png"' in page for s in stems)
    # ... and by one command, from the performance files of a run. In its own process, as a user
    # runs it: drawing every figure in this process leaves fontTools in a state where later PDF
    # saves of the same process fail (a MATH table without `closure_glyphs`), which broke
    # test_pgt_plots when xdist put it after this test on one worker
    cmd = [sys.executable, "-m", "support.evaluations.pgt.plots", str(root / "pgt"), "--run", "r1"]
    done = subprocess.run([*cmd, "--out", str(tmp_path / "again")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "again" / "macro_f1_bars.pdf").read_bytes()[:4] == b"%PDF"
    # a mode never leaks into baseline, and n=1 has no n folder
    assert not (root / "pgt/synthetic_sample/oracle/baseline/prefill").exists()
    assert not (root / "pgt/synthetic_sample/oracle/cot/prefill/n=1").exists()


def test_metrics_agree_with_scikit_learn(oracle_run):
    """The chance model's metrics (cot, prompt, n=5: a vote of several responses) in the shared
    run, against scikit-learn's on the same predictions."""
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_score

    result, root, _ = oracle_run
    assert result.ret == 0, result.stdout.str()[-3000:]
    folder = root / "pgt/synthetic_sample/chance/cot/prompt/n=5"
    m = read(folder / "performance_r1.json")["metrics"]
    entries = read(folder / "reasoning_r1.json")
    y_true = [e["ground_truth"] for e in entries]
    y_pred = [e["aggregated_prediction"] for e in entries]
    assert None not in y_pred
    assert m["accuracy"] == pytest.approx(accuracy_score(y_true, y_pred))
    assert m["macro_f1"] == pytest.approx(f1_score(y_true, y_pred, average="macro"))
    for label in ("real", "ai-generated"):
        p = precision_score(y_true, y_pred, pos_label=label)
        assert m["class_metrics"][label]["precision"] == pytest.approx(p)
    tn, fp, fn, tp = confusion_matrix(y_true, y_pred, labels=["real", "ai-generated"]).ravel()
    assert m["confusion_matrix"] == {"TP": tp, "TN": tn, "FP": fp, "FN": fn}
    scores = [r["score"] for e in entries for r in e["responses"]]
    assert m["individual_responses"]["accuracy"] == pytest.approx(sum(scores) / len(scores))
    frame = pd.DataFrame(
        {"g": [e["generator"] for e in entries], "ok": [e["aggregated_score"] for e in entries]}
    )
    for generator, recall in frame.groupby("g")["ok"].mean().items():
        got = m["per_generator_recall"][generator]
        assert got["recall"] == pytest.approx(recall)
        assert got["ci"][0] <= got["recall"] <= got["ci"][1]
    lo, hi = m["confidence_intervals"]["macro_f1"]
    assert lo <= m["macro_f1"] <= hi and hi - lo > 0


def test_a_malformed_dataset_stops_the_run_with_the_row_and_column(run, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("image_path,label\nnowhere.png,real\n")
    result, _ = run("--model=oracle", dataset=str(bad))
    assert result.ret != 0
    out = result.stdout.str() + result.stderr.str()
    assert f"{bad}, row 0 (line 2), column 'image_path': image not found" in out


def test_unknown_options_are_usage_errors(run):
    result, _ = run("--pgt-mode=prefil")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "known modes" in result.stderr.str()
    result, _ = run("--pgt-n=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result, _ = run("--pairs-per-image=0")  # another evaluation's option: also at configure
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--pairs-per-image: 0: expected a whole number >= 1" in result.stderr.str()
