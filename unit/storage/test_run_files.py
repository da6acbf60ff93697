"""A run's own files (issue 34): default run ids that never collide and are one id across xdist
workers, a lock on the run folders a session writes, CSV cells a spreadsheet never runs as
formulas, and names from over-long model names that a file system accepts."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from fixtures.output_options import (
    RUN_ID_INPUT,
    check_results_dir,
    lock_run_folders,
    new_run_id,
    release_run_folders,
    run_id,
)
from support.evaluations.pgt.layout import path_name
from support.settings import OutputSettings
from support.storage.files import MAX_NAME_CHARS, file_name, write_csv


def fake_config(given: str | None = None, **attrs: object) -> SimpleNamespace:
    """What run_id and the lock read of a pytest.Config: getoption("run_id") and a stash."""
    return SimpleNamespace(getoption=lambda name: given, stash={}, **attrs)


def test_default_run_ids_are_unique_and_sort_by_time() -> None:
    ids = [new_run_id() for _ in range(2000)]  # one-second ids made these one or two
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"\d{8}_\d{6}_\d{6}_[0-9a-f]{4}", i) for i in ids)
    stamps = [i.rsplit("_", 1)[0] for i in ids]
    assert stamps == sorted(stamps)


def test_workers_take_the_controllers_run_id() -> None:
    worker = fake_config(workerinput={RUN_ID_INPUT: "20261126_081624_123456_a3f9"})
    assert run_id(worker) == "20261126_081624_123456_a3f9"
    assert run_id(fake_config("mine", workerinput={RUN_ID_INPUT: "x"})) == "mine"
    assert run_id(fake_config()) != run_id(fake_config())


def test_a_second_session_on_a_run_folder_is_a_usage_error(tmp_path: Path) -> None:
    output = OutputSettings(results_dir=tmp_path, run_id="shared")
    first, second = fake_config(), fake_config()
    lock_run_folders(first, output, ["pointing", "pgt"])
    with pytest.raises(pytest.UsageError) as err:
        lock_run_folders(second, output, ["pointing"])
    assert str(tmp_path / "pointing" / "shared") in str(err.value)
    assert "--run-id shared" in str(err.value)
    other = fake_config()  # another run id, at the same time: no conflict
    lock_run_folders(other, OutputSettings(results_dir=tmp_path, run_id="other"), ["pointing"])
    release_run_folders(other)
    release_run_folders(first)  # the first session ends: a rerun of its id works
    assert not list(tmp_path.rglob("*.lock"))  # and leaves no lock file behind
    lock_run_folders(second, output, ["pointing"])
    release_run_folders(second)


def test_results_dir_that_cannot_be_written_is_a_usage_error(tmp_path: Path) -> None:
    a_file = tmp_path / "results"
    a_file.write_text("not a folder")
    for folder in (a_file, a_file / "below"):
        with pytest.raises(pytest.UsageError, match="--results-dir"):
            check_results_dir(folder)
    check_results_dir(tmp_path / "new" / "results")  # made when missing
    assert (tmp_path / "new" / "results").is_dir()


def test_csv_text_cells_never_start_a_formula(tmp_path: Path) -> None:
    texts = ['=HYPERLINK("http://x","y")', "+1+2", "-2+3+cmd|' /C calc'!A0", "@SUM(A1)"]
    texts += ["\tx", "\rx", "-0.5", "+3", "plain", "a\r=cmd()"]
    df = pd.DataFrame(
        {"generator": texts, "recall": [-0.5] * len(texts), "n": range(-5, len(texts) - 5)}
    )
    path = write_csv(df, tmp_path / "generator_recall.csv")
    with path.open(newline="") as f:
        back = pd.DataFrame(list(csv.DictReader(f)))
    assert back["generator"].tolist() == [
        '\'=HYPERLINK("http://x","y")',
        "'+1+2",
        "'-2+3+cmd|' /C calc'!A0",
        "'@SUM(A1)",
        "'\tx",
        "'\nx",  # a bare CR would end the row: as LF it is quoted
        "-0.5",  # a text that is a plain number stays one
        "+3",
        "plain",
        "a\n=cmd()",
    ]
    assert back["recall"].tolist() == ["-0.5"] * len(texts)  # numbers are never touched
    assert back["n"].tolist() == [str(n) for n in range(-5, len(texts) - 5)]
    assert df["generator"].iloc[0].startswith("=")  # the caller's table is unchanged


@pytest.mark.parametrize("name", [file_name, path_name])
def test_over_long_names_are_shortened_with_a_hash(name) -> None:
    long_a = "planted:" + "x" * 300 + "=0.5"
    long_b = "planted:" + "x" * 300 + "=0.6"  # the same first 300 characters
    a, b = name(long_a), name(long_b)
    assert len(a) <= MAX_NAME_CHARS and len(b) <= MAX_NAME_CHARS
    assert a != b and a == name(long_a)  # unique, deterministic
    assert re.fullmatch(r"planted_x+-[0-9a-f]{10}", a)
    assert name("planted:where=0.9,*=0.05") == name("planted:where=0.9,*=0.05")
    assert file_name("hf:/path/model") == "hf_path_model"  # short names as before
    assert len(name("y" * MAX_NAME_CHARS)) == MAX_NAME_CHARS


def test_a_long_model_name_makes_files_the_file_system_accepts(tmp_path: Path) -> None:
    folder = tmp_path / file_name("openai-compatible:" + "m" * 300) / "vqa_metrics.json"
    folder.parent.mkdir()
    folder.write_text("{}")  # File name too long before (ENAMETOOLONG past 255 bytes)


# ---- through the real suite (subprocesses) -------------------------------------------------------
ARGS = ("-m", "quick", "-k", "zero_shot and gallbladder", "-p", "no:randomly")

# -p crashonce: the worker running CRASH_AT dies (os._exit) the first time it runs it, as a worker
# killed by the OOM killer or a segfaulting engine
CRASH_ONCE = """
import os
from pathlib import Path

def pytest_runtest_call(item):
    mark = Path(os.environ["CRASH_MARK"])
    if os.environ.get("PYTEST_XDIST_WORKER") and os.environ["CRASH_AT"] in item.nodeid:
        if not mark.exists():
            mark.write_text("crashed")
            os._exit(3)
"""


@pytest.mark.slow
def test_a_second_session_on_a_run_id_stops_at_its_start(run_suite, tmp_path: Path) -> None:
    held = fake_config()  # another session writing pointing/shared (the lock a session takes)
    output = OutputSettings(results_dir=tmp_path / "results", run_id="shared")
    lock_run_folders(held, output, ["pointing"])
    try:
        second, results = run_suite("pointing", *ARGS, "-n", "2", run_id="shared")
    finally:
        release_run_folders(held)
    out = second.stdout.str() + second.stderr.str()
    assert second.ret == pytest.ExitCode.USAGE_ERROR, out
    assert f"{results / 'pointing' / 'shared'} is being written by another session" in out
    assert not (results / "pointing" / "shared").exists()  # nothing of it was overwritten
    again, _ = run_suite("pointing", *ARGS, run_id="shared")  # that session over: a rerun works
    assert again.ret == 0, again.stdout.str()
    rows = (results / "pointing" / "shared" / "raw_results.jsonl").read_text().splitlines()
    assert len(rows) == 10
    assert sorted(p.name for p in (results / "pointing").iterdir()) == ["shared"]  # no lock left


@pytest.mark.slow
def test_a_results_dir_that_is_a_file_stops_the_run_before_any_request(
    run_suite, tmp_path: Path
) -> None:
    a_file = tmp_path / "results.txt"
    a_file.write_text("a file")
    result, _ = run_suite("pointing", *ARGS, f"--results-dir={a_file}")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    assert f"--results-dir {a_file}: not a folder" in out
    assert not (tmp_path / "cache" / "responses.sqlite").exists()  # no model was asked


@pytest.mark.slow
def test_a_crashed_workers_case_is_listed_once_in_junit(
    run_suite, pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import xml.etree.ElementTree as ET

    pytester.makepyfile(crashonce=CRASH_ONCE)
    crashed = "test_pointing[s0105-gallbladder-zero_shot-oracle]"
    monkeypatch.setenv("CRASH_AT", crashed.removeprefix("test_pointing["))
    monkeypatch.setenv("CRASH_MARK", str(tmp_path / "crashed"))
    junit = tmp_path / "junit.xml"
    result, _ = run_suite("pointing", *ARGS, "-n", "2", "-p", "crashonce", f"--junitxml={junit}")
    out = result.stdout.str()
    assert (tmp_path / "crashed").exists() and "INTERNALERROR" not in out, out
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    names = [c.get("name") for c in cases]
    assert len(names) == len(set(names)) == 10, names  # the crashed one once, not run again
    (entry,) = [c for c in cases if c.get("name") == crashed]
    assert "crashed while running" in entry.find("error").get("message")
