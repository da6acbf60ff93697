"""`--resume RUN`: a rerun completes the earlier run's tables (reports/resume.py).

The golden test: a run through the loopback server with injected faults, then the command the
terminal prints, leaves tables byte-identical to those of a run without faults. The others: a
subset (-x, --lf into a new folder) says it is partial; a resume with other rules, or of a run
that does not exist, is a usage error naming the option.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from reports.result import Completion
from reports.resume import earlier_runs, rerun_command
from support.doubles.loopback import Faults, LoopbackServer, ScriptRequest
from support.settings import OutputSettings, RunSettings
from support.types import Outcome
from unit.helpers.suite_runs import link_shared_data

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-loopback-SECRET-resume-5e1c0b7a92"
TABLES = ("raw_results.jsonl", "summary.csv", "comparisons.csv", "usage.csv")


def script(request: ScriptRequest) -> str:
    """Present, at the canvas centre, for organs whose name is even in length."""
    text = request.texts[-1] if request.texts else ""
    name = text.rsplit('Organ: "', 1)[-1].split('"', 1)[0] if 'Organ: "' in text else "?"
    if len(name) % 2 == 0:
        return json.dumps({"name": name, "present": 1, "point_canvas": [384, 384]})
    return json.dumps({"name": name, "present": 0, "point_canvas": None})


def argv(tmp: Path, cholecseg8k: Path, url: str, *extra: str, shared: Path) -> list[str]:
    """The pointing quick subset (zero-shot) with two models, pytest's cache in tmp (the data
    and derived parts of the response cache the session's, in `shared`: SHARED_PARTS)."""
    link_shared_data(tmp / "cache", shared)
    return [
        str(REPO / "evals" / "pointing"),
        f"--rootdir={REPO}",
        "--model=openai:loop-a,openai:loop-b",
        f"--cholecseg8k={cholecseg8k}",
        f"--cache-dir={tmp / 'cache'}",
        f"--results-dir={tmp / 'results'}",
        f"--api-base={url}",
        "--bootstrap=200",
        "-o",
        f"cache_dir={tmp / 'pytest-cache'}",
        "-m",
        "quick",
        "-k",
        "zero_shot",
        *extra,
    ]


def pytest_run(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["OPENAI_API_KEY"] = KEY
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def hint(stdout: str) -> list[str]:
    """The arguments of the command the terminal printed to complete the tables."""
    lines = [line for line in stdout.splitlines() if "and complete the tables of run" in line]
    assert len(lines) == 1, stdout[-3000:]
    command = lines[0].split(": ", 1)[1].removesuffix(" (answers already received are cached)")
    words = shlex.split(command)
    assert words[0] == "pytest"
    return words[1:]


@pytest.mark.slow
def test_the_rerun_hint_completes_the_tables_of_a_run_without_faults(
    synthetic_cholecseg8k, shared_cache, tmp_path
) -> None:
    faulty, clean = tmp_path / "faulty", tmp_path / "clean"
    faults = Faults(rate=0.3, attempts=1, seed=2, kinds=("500",), retry_after_s=0.01)
    with LoopbackServer(script, api_key=KEY, faults=faults, lifetime_s=280) as server:
        args = argv(
            faulty,
            synthetic_cholecseg8k,
            server.url,
            "--run-id=r",
            "--api-retries=0",
            shared=shared_cache,
        )
        first = pytest_run(args)
        assert first.returncode == 1, first.stdout[-3000:]
        errors = sum(
            '"status": "error"' in line
            for line in (faulty / "results/pointing/r/raw_results.jsonl").read_text().splitlines()
        )
        assert errors > 0 and f"{errors} errors" in first.stdout
        again = hint(first.stdout)
        assert again[-3:] == ["--lf", "--resume", "r"] and "--run-id=r" not in again
        second = pytest_run(again)  # each faulted body failed once: now answered
    assert second.returncode == 0, second.stdout[-3000:]
    assert f"{errors} passed" in second.stdout  # only what had failed ran again
    assert "and complete the tables" not in second.stdout and "partial" not in second.stdout
    with LoopbackServer(script, api_key=KEY, lifetime_s=280) as server:
        fault_free = pytest_run(
            argv(clean, synthetic_cholecseg8k, server.url, "--run-id=r", shared=shared_cache)
        )
    assert fault_free.returncode == 0, fault_free.stdout[-3000:]
    for name in TABLES:
        got = (faulty / "results/pointing/r" / name).read_bytes()
        assert got == (clean / "results/pointing/r" / name).read_bytes(), name
    completion = json.loads((faulty / "results/pointing/r/manifest.json").read_text())
    assert completion["completion"]["complete"] is True
    assert completion["completion"]["resumed"] == "r"
    assert completion["completion"]["kept"] == 120 - errors


@pytest.mark.slow
def test_a_subset_says_it_is_partial_and_how_to_complete_it(
    synthetic_cholecseg8k, shared_cache, tmp_path
) -> None:
    """-x stops at the first error: report.md, the manifest and the terminal say the tables
    are partial, and the printed command (no --lf: cases never run are not among the failed)
    completes them."""
    faults = Faults(rate=0.3, attempts=1, seed=2, kinds=("500",), retry_after_s=0.01)
    with LoopbackServer(script, api_key=KEY, faults=faults, lifetime_s=280) as server:
        args = argv(
            tmp_path,
            synthetic_cholecseg8k,
            server.url,
            "--run-id=x",
            "--api-retries=0",
            shared=shared_cache,
        )
        first = pytest_run([*args, "-x"])
        folder = tmp_path / "results/pointing/x"
        report = (folder / "report.md").read_text()
        assert report.startswith("**stopped early (-x or --maxfail): partial results ("), report
        manifest = json.loads((folder / "manifest.json").read_text())["completion"]
        assert manifest["complete"] is False and manifest["stopped_early"] is True
        assert "stopped early" in first.stdout
        again = hint(first.stdout)
        assert again[-2:] == ["--resume", "x"] and "--lf" not in again
    # healed (the same address: it is in the cache identity): the cases -x left are sent now
    with LoopbackServer(script, api_key=KEY, lifetime_s=280, port=server.port):
        second = pytest_run(again)
    assert second.returncode == 0, second.stdout[-3000:]
    assert not (folder / "report.md").read_text().startswith("**")
    rows = (folder / "raw_results.jsonl").read_text().splitlines()
    assert len(rows) == 120 and not any('"status": "error"' in r for r in rows)


@pytest.mark.slow
def test_resume_is_a_usage_error_for_a_missing_run_or_other_rules(
    synthetic_cholecseg8k, shared_cache, tmp_path
) -> None:
    with LoopbackServer(script, api_key=KEY, lifetime_s=280) as server:
        args = argv(tmp_path, synthetic_cholecseg8k, server.url, shared=shared_cache)
        missing = pytest_run([*args, "--resume", "nope"])
        assert missing.returncode == 4, missing.stdout + missing.stderr
        assert "--resume nope: no earlier run to complete" in missing.stderr
        made = pytest_run([*args, "--run-id=m"])
        assert made.returncode == 0, made.stdout[-3000:]
        other = pytest_run([*args, "--resume=m", "--compat=source"])
    assert other.returncode == 4
    assert "--resume m: pointing was run with other " in other.stderr, other.stderr


def test_an_earlier_run_that_cannot_be_read_is_named_at_the_start(tmp_path: Path) -> None:
    """Its outcomes are read before collection: a broken row is a usage error naming the file
    and line then, never a failure at session finish that would cost this session's answers."""
    run = RunSettings(output=OutputSettings(results_dir=tmp_path, run_id="r"))
    folder = tmp_path / "nyu_distance" / "r"
    folder.mkdir(parents=True)
    row = Outcome("c1-oracle", "nyu_distance", "oracle", "correct").to_json()
    (folder / "raw_results.jsonl").write_text(json.dumps(row) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"raw_results.jsonl:2: not JSON"):
        earlier_runs(run, ["nyu_distance"], "r")
    (folder / "raw_results.jsonl").write_text(json.dumps(row) + "\n")
    (folder / "calls.csv").write_bytes(b"model,case_id\n\xff\xfe\n")
    with pytest.raises(ValueError, match=r"calls.csv cannot be read"):
        earlier_runs(run, ["nyu_distance"], "r")
    (folder / "calls.csv").unlink()
    found = earlier_runs(run, ["nyu_distance", "pgt"], "r")
    assert list(found) == ["nyu_distance"]
    assert found["nyu_distance"].outcomes[0].case_id == "c1-oracle"


def test_the_rerun_command_replaces_the_run_options_and_pastes_back() -> None:
    args = ["evals/pgt", "--run-id", "old", "--lf", "-k", "a or b", "--resume=older", "--x=$(id)"]
    command = rerun_command(args, "old", failed_only=True)
    assert shlex.split(command) == [
        "pytest", "evals/pgt", "-k", "a or b", "--x=$(id)", "--lf", "--resume", "old"
    ]  # fmt: skip
    assert shlex.split(rerun_command(["--run-id=r"], "r", failed_only=False)) == [
        "pytest", "--resume", "r"
    ]  # fmt: skip


def test_completion_says_what_the_tables_cover() -> None:
    assert Completion(cases_finished=4, cases_selected=4).partial_line() is None
    assert Completion(cases_finished=4, cases_selected=4).complete
    early = Completion(cases_finished=3, cases_selected=4)
    assert not early.complete and "3 of 4" in early.partial_line()
    lf = Completion(cases_finished=2, cases_selected=2, rerun_of_failed=True)
    assert not lf.complete and "--lf" in lf.partial_line()
    resumed = Completion(cases_finished=2, cases_selected=2, rerun_of_failed=True, resumed="r")
    assert resumed.complete and resumed.as_json()["resumed"] == "r"
    partial_earlier = Completion(
        cases_finished=2, cases_selected=2, resumed="r", kept=5, earlier_complete=False
    )
    assert not partial_earlier.complete and "5 kept" in partial_earlier.partial_line()
