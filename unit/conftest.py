"""The suite's own tests: offline always, pytester available."""

import os
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def run_suite(pytester: pytest.Pytester, tmp_path: Path):
    """run_suite(evaluation, *args, run_id="r1", cache="cache") -> (RunResult, results folder):
    the real `pytest evals/<evaluation>` in a subprocess, with this test's own cache (a folder
    name under tmp_path) and results folder, a fixed run id and 200 bootstrap resamples."""

    def _run(evaluation: str, *args: str, run_id: str = "r1", cache: str = "cache"):
        results = tmp_path / "results"
        argv = [
            str(REPO / "evals" / evaluation),
            f"--rootdir={REPO}",
            f"--cache-dir={tmp_path / cache}",
            f"--results-dir={results}",
            f"--run-id={run_id}",
            "--bootstrap=200",
            "-p",
            "no:cacheprovider",
            *args,
        ]
        return pytester.runpytest_subprocess(*argv, timeout=300), results

    return _run
