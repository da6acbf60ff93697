"""Data loading before collection (fixtures/loading.py): which evaluations a command names,
and the terminal line that says what is being loaded while a first run builds its samples."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fixtures.scope import marked_evaluation

REPO = Path(__file__).resolve().parents[1]


def test_each_evaluation_module_names_its_evaluation() -> None:
    found = {marked_evaluation(p) for p in sorted((REPO / "evals").rglob("test_*.py"))}
    assert found == {"pointing", "pgt", "nyu_distance", "surgvqa", "dynamic"}


def test_modules_without_the_mark_name_none(tmp_path: Path) -> None:
    plain = tmp_path / "test_plain.py"
    plain.write_text('X = """pytestmark = pytest.mark.evaluation("pointing")"""\n')
    assert marked_evaluation(plain) is None  # inside a string: not the module's mark
    broken = tmp_path / "test_broken.py"
    broken.write_text("def (:\n")
    assert marked_evaluation(broken) is None  # never raises: collection reports it
    assert marked_evaluation(tmp_path / "missing.py") is None


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_the_controller_says_what_it_loads_before_the_session(run_suite, workers) -> None:
    result, _ = run_suite("nyu_distance", "-m", "quick", "--model=oracle", *workers)
    assert result.ret == 0, result.stdout.str()
    lines = result.stdout.lines
    loading = [i for i, line in enumerate(lines) if line.startswith("vlmbench: loading data")]
    assert loading, result.stdout.str()
    # a whole line an evaluation, with its time: a progress bar on stderr never splits one;
    # -m quick: the cases it leaves out are never listed, and counted (fixtures.selection)
    pattern = r"^vlmbench: loaded nyu_distance in [\d.]+ s, [\d,]+ cases left out by -m$"
    assert re.search(pattern, lines[loading[0] + 1]), lines[loading[0] : loading[0] + 2]
    # the last line: the wall time from process start, the loading apart (fixtures.wall_time)
    assert re.fullmatch(
        r"vlmbench: wall time [\d.]+ s from process start; loading data [\d.]+ s, before "
        r"pytest's clock",
        lines[-1],
    ), lines[-3:]
    first_case = next(
        i for i, line in enumerate(lines) if "test_nyu_distance.py" in line or line.startswith(".")
    )
    assert loading[0] < first_case
