"""`pytest evals/surgvqa -m quick` under SurgVU 2026's metrics, end to end (pytester subprocess
runs of the real suite): with the models in the Hugging Face cache (the tiny stand-ins of
support/doubles/tiny_scorers.py under the official ids, found through HF_HOME as a user's run
finds them) `--surgvqa-metrics 2026` reports all seven metrics with intervals in summary.csv,
report.md, the terminal's table, comparisons.csv and the official metrics.json; with an empty cache
the default `auto` runs BLEU and ROUGE and says why the rest is left out, and `2026` stops with a
usage error."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd
import pytest

from support.doubles.tiny_scorers import install_official_ids
from support.evaluations.surgvqa.leaderboard import OFFICIAL_KEYS, VQA_SCORES
from support.evaluations.surgvqa.score_cache import STORE
from support.evaluations.surgvqa.semantic import SEMANTIC_METRICS
from support.storage.files import file_name

MODELS = ("oracle", "chance")
SEVEN = VQA_SCORES  # bertscore_f1, nli_entailment, nli_bertscore_f1, bleu, rouge1/2/L
TEXT = ("bleu", "rouge1", "rouge2", "rougeL")
OFFICIAL_ORDER = [OFFICIAL_KEYS[m] for m in SEVEN]  # evaluate.py's METRIC_KEYS


@pytest.fixture(scope="module")
def hf_home(shared_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An HF_HOME whose hub/ holds the stand-ins under the official ids (links to the models,
    built once a run in shared_cache)."""
    home = tmp_path_factory.mktemp("hf-suite")
    install_official_ids(home / "hub", shared_cache)
    return home


@pytest.fixture
def run(run_suite, monkeypatch: pytest.MonkeyPatch):
    """run(hf_home, *args) -> (RunResult, results folder): the surgvqa quick subset of oracle
    and chance, the child's Hugging Face cache at `hf_home`/hub."""

    def _run(home: Path, *args: str):
        monkeypatch.setenv("HF_HOME", str(home))
        for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):  # they would win over HF_HOME
            monkeypatch.delenv(name, raising=False)
        result, results = run_suite("surgvqa", f"--model={','.join(MODELS)}", "-m", "quick", *args)
        return result, results / "surgvqa" / "r1"

    return _run


def raw_vqa(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "raw_results.jsonl").read_text().splitlines()]
    return [r for r in rows if r["params"]["category"] == "vqa"]


@pytest.mark.slow
def test_the_2026_profile_reports_seven_metrics_everywhere(run, hf_home: Path) -> None:
    result, out = run(hf_home, "--surgvqa-metrics", "2026")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    s = pd.read_csv(out / "summary.csv")
    for m in SEVEN:
        assert {m, f"{m}_lo", f"{m}_hi"} <= set(s.columns), m
    vqa = s[s.category == "vqa"]
    for _, row in vqa.iterrows():
        for m in SEVEN:
            if row.subset == "all" or not pd.isna(row[f"{m}_lo"]):  # one question: no interval
                assert row[f"{m}_lo"] <= row[m] <= row[f"{m}_hi"], (row.model, row.subset, m)
    head = vqa[vqa.subset == "all"].set_index("model")
    assert head.loc["oracle", "n"] == 3  # the quick subset
    for m in TEXT:
        assert head.loc["oracle", m] == 1.0, m
    # an answer identical to a reference: BERTScore 1 up to float32 rounding (the golden's
    # identical pairs score 1.0 to 1.0000014)
    assert head.loc["oracle", "bertscore_f1"] == pytest.approx(1.0, abs=1e-5)
    assert head.loc["chance", "bleu"] < 0.5

    raw = raw_vqa(out)
    assert len(raw) == 3 * len(MODELS)
    for r in raw:
        sc = r["scores"]
        assert all(isinstance(sc[m], float) for m in SEMANTIC_METRICS), sc
        assert sc["nli_bertscore_f1"] == sc["nli_entailment"] * sc["bertscore_f1"]
        assert len(sc["reference_bertscore"]) == len(r["params"]["answers"])
        assert 0.0 <= sc["nli_entailment"] <= 1.0
        if r["model"] == "oracle":
            assert sc["bertscore_f1"] == pytest.approx(1.0, abs=1e-5)

    for model in MODELS:
        metrics = json.loads((out / "by_model" / file_name(model) / "metrics.json").read_text())
        assert list(metrics) == ["results", "aggregates"]
        assert list(metrics["aggregates"]) == OFFICIAL_ORDER
        assert all(list(r) == ["case_id", *OFFICIAL_ORDER] for r in metrics["results"])
        for key in OFFICIAL_ORDER:
            assert metrics["aggregates"][key] == statistics.mean(
                r[key] for r in metrics["results"]
            ), key
        by_case = {r["params"]["case"]: r["scores"] for r in raw if r["model"] == model}
        assert [r["case_id"] for r in metrics["results"]] == sorted(by_case)
        for r in metrics["results"]:
            for m in SEVEN:
                assert r[OFFICIAL_KEYS[m]] == by_case[r["case_id"]][m], (model, m)
        for m in SEVEN:  # summary.csv: 6 significant digits
            csv_mean = head.loc[model, m]
            assert csv_mean == pytest.approx(metrics["aggregates"][OFFICIAL_KEYS[m]], rel=1e-5)

    report = (out / "report.md").read_text()
    assert "roberta-large, layer 17, rescaled" in report
    assert "cross-encoder/nli-deberta-v3-base" in report
    for m in SEVEN:
        assert f" {m} " in report, m
    terminal = result.stdout.str()
    assert any(line.startswith("| bertscore_f1 ") for line in terminal.splitlines()), terminal
    comparisons = pd.read_csv(out / "comparisons.csv")
    assert {"bertscore_f1", "nli_entailment", "nli_bertscore_f1", "bleu"} <= set(comparisons.metric)
    assert len(comparisons[comparisons.metric == "bertscore_f1"]) >= 1

    # --resume: every model score read from the cache folder, byte for byte
    assert (out.parents[2] / "cache" / STORE).is_file()
    cold = {(r["model"], r["case_id"]): json.dumps(r["scores"]) for r in raw}
    result, out = run(hf_home, "--surgvqa-metrics", "2026", "--resume", "r1")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert {(r["model"], r["case_id"]): json.dumps(r["scores"]) for r in raw_vqa(out)} == cold


@pytest.mark.slow
def test_auto_with_an_empty_cache_scores_bleu_and_rouge_and_says_why(run, tmp_path: Path) -> None:
    empty = tmp_path / "empty-hf"
    (empty / "hub").mkdir(parents=True)
    result, out = run(empty)  # --surgvqa-metrics auto, the default
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    s = pd.read_csv(out / "summary.csv")
    for m in TEXT:
        assert {m, f"{m}_lo", f"{m}_hi"} <= set(s.columns), m
    assert not [c for c in s.columns if c.startswith(("bertscore", "nli"))]
    report = (out / "report.md").read_text()
    assert "are not scored" in report and "hf download roberta-large" in report
    assert "--surgvqa-bertscore-model" in report
    metrics = json.loads((out / "by_model" / "oracle" / "metrics.json").read_text())
    assert list(metrics["aggregates"]) == [OFFICIAL_KEYS[m] for m in TEXT]
    assert "bertscore_f1" not in set(pd.read_csv(out / "comparisons.csv").metric)
    assert all("bertscore_f1" not in r["scores"] for r in raw_vqa(out))
    # the loading lines say so too, before the run starts
    assert "not scored" in result.stdout.str() + result.stderr.str()


@pytest.mark.slow
def test_2026_with_an_empty_cache_is_a_usage_error(run, tmp_path: Path) -> None:
    empty = tmp_path / "empty-hf"
    (empty / "hub").mkdir(parents=True)
    result, out = run(empty, "--surgvqa-metrics=2026")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "--surgvqa-bertscore-model" in text and "hf download roberta-large" in text
    assert not (out / "summary.csv").exists()
