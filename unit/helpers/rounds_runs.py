"""The small rounds evaluation (examples/rounds_evaluation.py) run through the real suite in a
pytester folder: the conftest that registers it, its test module, and the options every such
run shares (this test's cache and results folders, run id "r", one round of two sequences)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

HERE = Path(__file__).parent
EXAMPLE = HERE.parents[1] / "examples" / "rounds_evaluation.py"

CONFTEST = """
from support import evaluations

evaluations.register("rounds", "rounds_evaluation:SPEC")  # before the suite's plugins load
pytest_plugins = ["fixtures.suite"]
"""
TEST_MODULE = """
import pytest

pytestmark = pytest.mark.evaluation("rounds")


def test_rounds(outcomes, judge):
    judge(outcomes)
"""


def plant_rounds(pytester: pytest.Pytester, conftest_head: str = "") -> None:
    """The evaluation, its registering conftest (after `conftest_head`: a plugin's providers)
    and its test module, in pytester's folder."""
    shutil.copy(EXAMPLE, pytester.path / "rounds_evaluation.py")
    pytester.makeconftest(conftest_head + CONFTEST)
    pytester.makepyfile(test_rounds=TEST_MODULE)


def rounds_args(
    tmp_path: Path, run_id: str = "r", bootstrap: int = 0, one_round: bool = True
) -> list[str]:
    """The shared options; `one_round`: one round of two sequences (2 tasks each: 4 requests a
    model), else the evaluation's defaults."""
    return [
        f"--cache-dir={tmp_path / 'cache'}",
        f"--results-dir={tmp_path / 'results'}",
        f"--run-id={run_id}",
        f"--bootstrap={bootstrap}",
        *(["--rounds=1", "--rounds-batch=2"] if one_round else []),
        "-p",
        "no:cacheprovider",
    ]
