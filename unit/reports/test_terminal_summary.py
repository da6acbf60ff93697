"""The end-of-run terminal summary (reports/terminal.py makes its lines, reports/terminal_summary.py
writes them): brief by default, every failure named with a way to rerun it; one broken summary
never costs another evaluation."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from reports import terminal, terminal_summary
from support.printable import printable
from support.reporting.tables import key_metrics
from support.types import Outcome


def headline(models: list[str]) -> pd.DataFrame:
    rows = []
    for model in models:
        for condition, f1 in (("zero_shot", 0.5), ("fewshot", 0.75)):
            rows.append(
                {"model": model, "condition": condition, "n": 60, "f1": f1, "f1_lo": f1 - 0.1,
                 "f1_hi": f1 + 0.1, "accuracy": 0.9, "accuracy_lo": 0.8, "accuracy_hi": 1.0}
            )  # fmt: skip
    return pd.DataFrame(rows)


def outcome(case: str, status: str, model: str = "m", error: str | None = None, **extra) -> Outcome:
    return Outcome(
        evaluation="e", case_id=case, model=model, status=status, error=error, extra=extra,
        backend_calls=1, cache_hits=0,
    )  # fmt: skip


def test_brief_table_puts_models_side_by_side_with_intervals() -> None:
    table = terminal.brief_table(headline(["a", "b"]), ["f1"])
    assert list(table.columns) == ["condition", "a", "b"]
    assert table.iloc[1].tolist() == ["fewshot", "0.750 [0.650, 0.850]", "0.750 [0.650, 0.850]"]
    two = terminal.brief_table(headline(["a"]), ["f1", "accuracy"])
    assert list(two.columns) == ["condition", "metric", "a"] and len(two) == 4


def test_brief_table_drops_intervals_rather_than_overflow_the_terminal() -> None:
    models = [f"model-{i}" for i in range(8)]
    table = terminal.brief_table(headline(models), ["f1"])
    assert table.iloc[0]["model-0"] == "0.500"  # no interval: it would not fit 120 columns
    assert terminal._width(table) <= terminal.MAX_WIDTH


def test_key_metrics_prefer_the_declared_ones() -> None:
    h = headline(["a"])
    assert key_metrics(h, ("f1", "missing")) == ["f1"]
    assert key_metrics(h, None) == ["f1"]  # the first metric with an interval


def test_counts_line_says_what_happened() -> None:
    outs = [outcome("1", "correct"), outcome("2", "error", error="boom"), outcome("3", "wrong")]
    outs.append(outcome("4", "correct", reused="results/pgt/x/reasoning.json"))
    line = terminal.counts_line(outs, pd.DataFrame({"p_holm": [0.01, 0.5]}))
    assert line.startswith("4 cases: 2 correct, 1 wrong, 1 error")
    assert "model calls: 4 sent, 0 served from cache" in line
    assert "1 reused from kept results" in line and "1 of 2 comparisons" in line
    many = [outcome(str(i), "correct", reused="kept.json") for i in range(132)]
    wrapped = terminal.counts_line(many, pd.DataFrame({"p_holm": [0.01] * 42}))
    assert max(len(part) for part in wrapped.splitlines()) <= terminal.MAX_WIDTH
    assert wrapped.replace("\n", " · ").count(" · ") == 3  # four pieces, wrapped between them


def test_error_lines_group_messages_most_frequent_first() -> None:
    outs = [outcome(str(i), "error", error="Connection error.") for i in range(5)]
    outs += [outcome("x", "error", model="n", error="rate\nlimited"), outcome("y", "correct")]
    lines = terminal.error_lines("nyu_distance", outs)
    assert lines[0] == "nyu_distance: 6 case(s) failed in the pipeline (not wrong answers):"
    assert lines[1:] == ["  m: Connection error. (5)", "  n: rate limited (1)"]
    assert terminal.error_lines("e", [outcome("y", "correct")]) == []


def test_folders_line_names_one_run_in_one_line(tmp_path: Path) -> None:
    files = {
        name: [tmp_path / "results" / name / "r1" / "raw_results.jsonl", Path("x")]
        for name in ("pgt", "pointing")
    }
    line = terminal.folders_line(files, tmp_path)
    assert line == "results: results/{pgt,pointing}/r1/ (4 files; report.md in each; -v lists them)"


BROKEN_SUMMARY = """
import support.evaluations.nyu_distance.summary as nyu_summary


def _broken(*args, **kwargs):
    raise RuntimeError("planted summary failure")


nyu_summary.summarize = _broken
"""


@pytest.mark.slow
def test_a_broken_summary_costs_no_other_evaluation(pytester, run_suite, tmp_path) -> None:
    """The failing evaluation keeps its raw rows; no table of an earlier session is left beside
    its new manifest (planted: summary.csv and report.md of an older run in the folder)."""
    pytester.makepyfile(plant_broken_summary=BROKEN_SUMMARY)
    pytester.syspathinsert()
    stale = tmp_path / "results" / "nyu_distance" / "r1"
    stale.mkdir(parents=True)
    for name in ("summary.csv", "report.md"):
        (stale / name).write_text("an earlier session's table\n")
    result, results = run_suite(
        "nyu_distance", "--model=oracle", "-m", "quick", "-p", "plant_broken_summary",
        str(Path(__file__).resolve().parents[2] / "evals" / "surgvqa"),
        f"--junitxml={pytester.path / 'junit.xml'}",
    )  # fmt: skip
    out = result.stdout.str()
    assert result.ret == 1, out
    assert "nyu_distance: its summary failed (RuntimeError: planted summary failure)" in out
    assert "vlmbench: surgvqa" in out  # the other evaluation's table is printed
    assert (results / "nyu_distance" / "r1" / "raw_results.jsonl").is_file()
    assert (results / "nyu_distance" / "r1" / "manifest.json").is_file()
    assert not (stale / "summary.csv").exists()
    report = stale / "report.md"  # written if the failure came late enough, never the old one
    assert not report.exists() or not report.read_text().startswith("an earlier")
    assert (results / "surgvqa" / "r1" / "summary.csv").is_file()
    assert (pytester.path / "junit.xml").is_file()


@pytest.mark.slow
def test_pipeline_errors_are_named_with_a_rerun_command(run_suite) -> None:
    result, results = run_suite(
        "nyu_distance", "--model=openai-compatible:nothing", "-m", "quick",
        "--api-base=http://127.0.0.1:9/v1", "--api-retries=0", "--api-timeout=2",
        "--no-preflight",  # the closed port's errors are what this test wants
    )  # fmt: skip
    out = result.stdout.str()
    assert result.ret == 1, out
    assert "nyu_distance: 6 case(s) failed in the pipeline (not wrong answers):" in out
    assert "rerun what failed and complete the tables of run r1: pytest " in out
    assert " --lf --resume r1 " in out
    # printed last: after pytest's short summary and its counts line, so the last screen shows it
    lines = out.splitlines()
    rerun = max(i for i, line in enumerate(lines) if line.startswith("rerun what failed"))
    counts = max(i for i, line in enumerate(lines) if line.startswith("=") and " error" in line)
    short = [i for i, line in enumerate(lines) if "short test summary info" in line]
    assert short and short[-1] < counts < rerun, out
    assert (results / "nyu_distance" / "r1" / "summary.csv").is_file()


@pytest.mark.slow
def test_the_main_job_summary_fits_a_screen(run_suite) -> None:
    """Everything after the progress dots of a two-evaluation quick run, by default and -v."""
    args = ("--model=oracle,chance", "-m", "quick")
    brief, _ = run_suite("nyu_distance", *args)
    verbose, _ = run_suite("nyu_distance", *args, "-v", run_id="r2")
    tail = brief.stdout.lines[brief.stdout.lines.index("") + 1 :]
    assert brief.ret == 0 and len(tail) <= 12, "\n".join(tail)
    assert not any(line.startswith("wrote ") for line in tail)
    assert max(len(line) for line in tail if not line.startswith("results: ")) <= 120
    assert any(line.startswith("wrote ") for line in verbose.stdout.lines)


ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m\r\x00\x7f\x9b1m"  # title, clear, colours


def test_printable_strips_escape_sequences_and_controls_but_tab_and_newline() -> None:
    assert printable(f"a{ESCAPES}b\tc\nd") == "aredb\tc\nd"
    assert printable("x\x1b]8;;http://e\x1b\\link\x1b]8;;\x1b\\y") == "xlinky"  # OSC 8
    assert printable("x\x1b]0;no end") == "x0;no end"  # the text stays, inert
    assert printable("ünï € 模型 \u200b") == "ünï € 模型 \u200b"


def test_error_lines_and_every_reporter_line_carry_no_escape_sequence() -> None:
    outs = [outcome("c1", "error", model=f"m{ESCAPES}", error=f"server said {ESCAPES}no")]
    lines = terminal.error_lines("e", outs)
    assert lines[1] == "  mred: server said redno (1)"

    class Reporter:  # what PrintableLines wraps: pytest's TerminalReporter
        config = "the config"

        def __init__(self) -> None:
            self.written: list[str] = []

        def write_line(self, line: str, **markup: bool) -> None:
            self.written.append(line)

        def write_sep(self, sep: str, title: str | None = None, **markup: bool) -> None:
            self.written.append(f"{sep} {title}")

    tr = Reporter()
    safe = terminal_summary.PrintableLines(tr)
    safe.write_line(f"model {ESCAPES}", red=True)
    safe.write_sep("=", f"vlmbench: {ESCAPES}")
    assert tr.written == ["model red", "= vlmbench: red"] and safe.config == "the config"


RERUN_ARGS = [
    "evals/pgt",
    "-k",
    "pair0 or pair1",
    "--pgt-phrase=$(touch {marker}) `touch {marker}` ; touch {marker}",
    "--model=openai-compatible:it's",
]


def test_the_rerun_line_pastes_back_as_the_same_arguments(tmp_path: Path) -> None:
    """shlex.join: `-k "pair0 or pair1"` stays one argument, a quote stays a quote."""
    import shlex

    marker = tmp_path / "ran"
    args = [a.format(marker=marker) for a in RERUN_ARGS]
    line = terminal.rerun_line(args, "r1", failed_only=True)
    command = line.removeprefix("rerun what failed and complete the tables of run r1: ")
    command = command.removesuffix(" (answers already received are cached)")
    assert shlex.split(command) == ["pytest", *args, "--lf", "--resume", "r1"]


def test_the_rerun_line_runs_nothing_when_pasted_into_a_shell(tmp_path: Path) -> None:
    """bash reads the line's arguments back exactly (printf stands in for pytest) and runs no
    `$(...)`, backquote or `;` command that an argument holds."""
    import subprocess

    marker = tmp_path / "ran"
    args = [a.format(marker=marker) for a in RERUN_ARGS]
    command = terminal.rerun_line(args, "r1", True).split(": ", 1)[1].rsplit(" (", 1)[0]
    assert command.startswith("pytest ")
    pasted = "printf '%s\\0' " + command.removeprefix("pytest ")
    done = subprocess.run(["bash", "-c", pasted], capture_output=True, timeout=10, check=True)
    assert done.stdout.decode().split("\0")[:-1] == [*args, "--lf", "--resume", "r1"]
    assert not marker.exists()


def test_the_rerun_line_redacts_credentials_inside_the_quoting() -> None:
    """A redacted URL credential (***) is quoted: the pasted line has no glob in it."""
    import shlex

    line = terminal.rerun_line(["--api-base=http://user:hunter2@127.0.0.1:9/v1"], "r1", True)
    assert "hunter2" not in line
    command = line.split(": ", 1)[1].rsplit(" (", 1)[0]
    assert "'--api-base=http://***@127.0.0.1:9/v1'" in command
    assert shlex.split(command)[1] == "--api-base=http://***@127.0.0.1:9/v1"
