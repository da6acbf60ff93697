"""Hostile outputs: usage a backend reports, huge answers in the HTML, a results disk that fails,
and a run stopped by SIGINT (issue 25, items 8-10)."""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support.reporting.tables import usage_table
from support.types import Outcome, Usage
from unit.helpers.suite_runs import link_shared_data

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
genai_types = pytest.importorskip("google.genai.types")

from support.backends.anthropic_messages import anthropic_result  # noqa: E402
from support.backends.gemini import gemini_result  # noqa: E402
from support.backends.openai_chat import openai_result  # noqa: E402

BAD_COUNTS = [-5, math.nan, math.inf, -math.inf, 2.5, "12"]


def openai_completion(prompt_tokens: object, completion_tokens: object) -> dict:
    """A Chat Completion's JSON as openai_result reads it (the body, parsed; fields as sent)."""
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "yes"}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }


def anthropic_message(input_tokens: object, output_tokens: object):
    return anthropic.types.Message.model_construct(
        content=[anthropic.types.TextBlock.model_construct(type="text", text="yes")],
        usage=anthropic.types.Usage.model_construct(
            input_tokens=input_tokens, output_tokens=output_tokens
        ),
    )


def gemini_response(prompt: object, candidates: object):
    return genai_types.GenerateContentResponse.model_construct(
        candidates=[
            genai_types.Candidate.model_construct(
                index=0,
                content=genai_types.Content.model_construct(
                    role="model", parts=[genai_types.Part.model_construct(text="yes")]
                ),
            )
        ],
        usage_metadata=genai_types.GenerateContentResponseUsageMetadata.model_construct(
            prompt_token_count=prompt, candidates_token_count=candidates
        ),
    )


@pytest.mark.parametrize("bad", BAD_COUNTS, ids=repr)
@pytest.mark.parametrize(
    "parse",
    [
        lambda i, o: openai_result(openai_completion(i, o))[1],
        lambda i, o: anthropic_result(anthropic_message(i, o))[1],
        lambda i, o: gemini_result(gemini_response(i, o))[1],
    ],
    ids=["openai", "anthropic", "gemini"],
)
def test_unusable_reported_usage_is_unknown_not_negative(parse, bad, caplog, monkeypatch):
    monkeypatch.setattr("support.types._warned_usage", False)
    with caplog.at_level(logging.WARNING, logger="support.types"):
        assert parse(100, bad) == Usage()  # neither count kept: the response's usage is unknown
        assert parse(bad, 7) == Usage()
    assert len([r for r in caplog.records if "unusable token counts" in r.message]) == 1
    assert parse(100, 7) == Usage(100, 7)
    assert parse(None, None) == Usage()


def test_usage_table_never_prices_a_negative_count():
    usage = openai_result(openai_completion(-1_000_000, -1_000_000))[1]
    outs = [
        Outcome(evaluation="e", case_id=f"c{i}", model="openai:gpt-4o", status="correct", usage=u)
        for i, u in enumerate([usage, Usage(1_000_000, 0)])
    ]
    table = usage_table(outs)
    assert table["input_tokens"].tolist() == [1_000_000]
    assert table["cost_usd"].tolist() == [2.5]  # the list price of the one known response


# -- the HTML shows at most SHOWN_CHARS of each answer ---------------------------------------------

MEGABYTE_MODEL = """
def reply(request):
    target = request.target if isinstance(request.target, str) else ""
    return target + " " + "x" * (2**20 - len(target) - 1)
"""


@pytest.mark.slow
def test_html_page_is_not_the_answers_size(run_suite, tmp_path, monkeypatch):
    """Every answer 1 MiB: the page stays small and says where the whole answer is (before the
    cap: 23.3 MB for these 11 cases)."""
    (tmp_path / "megabyte_answers.py").write_text(MEGABYTE_MODEL)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    page = tmp_path / "report.html"
    result, results = run_suite(
        "pgt", "-m", "quick", "-k", "r00000-real", "--model=scripted:megabyte_answers:reply",
        f"--html={page}", "-p", "no:randomly",
    )  # fmt: skip
    assert result.ret == 0, result.outlines[-20:]
    assert page.stat().st_size < 4 * 2**20, page.stat().st_size
    assert "more characters; the whole answer is in raw_results.jsonl" in page.read_text()
    raw = (results / "pgt" / "r1" / "raw_results.jsonl").read_text()
    assert '"raw": "' in raw and "x" * 2**19 in raw  # the whole answer is kept there


def test_shown_never_splits_a_surrogate_pair():
    from support.reporting.shown_text import SHOWN_CHARS, shown

    text = "a" * (SHOWN_CHARS - 1) + "\ud83d\ude00" + "b" * 10  # a pair across the limit
    cut = shown(text)
    assert "\ud83d" not in cut and cut.startswith("a" * (SHOWN_CHARS - 1) + "\n")
    assert "12 more characters" in cut
    assert shown("short") == "short"


# -- a results disk that fails, a run stopped by SIGINT --------------------------------------------

REPO = Path(__file__).resolve().parents[1]
# a real fault: files of this process cannot grow past FSIZE_LIMIT bytes (EFBIG, SIGXFSZ ignored)
FSIZE_LIMIT = 2**20
LIMITED = (
    "import resource, signal, sys, pytest; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
    f"resource.setrlimit(resource.RLIMIT_FSIZE, ({FSIZE_LIMIT}, {FSIZE_LIMIT})); "
    "sys.exit(pytest.main(sys.argv[1:]))"
)
ANSWERS = '''
import os, time

def reply(request):
    """The target (a perfect model), padded to ANSWER_CHARS, after ANSWER_S seconds."""
    target = request.target if isinstance(request.target, str) else ""
    time.sleep(float(os.environ.get("ANSWER_S", "0")))
    return target + " " * int(os.environ.get("ANSWER_CHARS", "0"))
'''


def suite_argv(tmp_path: Path, shared_cache: Path, *args: str) -> list[str]:
    """`pytest evals/pgt` on the synthetic sample with a scripted model, no response cache."""
    (tmp_path / "answers.py").write_text(ANSWERS)
    link_shared_data(tmp_path / "cache", shared_cache)
    return [
        str(REPO / "evals" / "pgt"), f"--rootdir={REPO}", f"--cache-dir={tmp_path / 'cache'}",
        f"--results-dir={tmp_path / 'results'}", "--run-id=r1", "--bootstrap=50", "--no-cache",
        "--model=scripted:answers:reply", "-p", "no:cacheprovider", "-p", "no:randomly", *args,
    ]  # fmt: skip


def suite_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tmp_path), **extra}


@pytest.mark.slow
def test_a_full_results_disk_names_the_file_and_loses_no_other(tmp_path, shared_cache):
    """raw_results.jsonl (11 answers of 128 KiB) cannot be written: the run says so naming it,
    exits non-zero, and writes every other file, manifest.json included."""
    argv = suite_argv(tmp_path, shared_cache, "-m", "quick", "-k", "r00000-real", "-n", "0")
    done = subprocess.run(
        [sys.executable, "-c", LIMITED, *argv],
        cwd=tmp_path, env=suite_env(tmp_path, ANSWER_CHARS=str(2**17)),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = done.stdout + done.stderr
    folder = tmp_path / "results" / "pgt" / "r1"
    assert done.returncode == 1, out[-3000:]
    assert (
        f"NOT WRITTEN: [Errno {errno.EFBIG}] File too large: '{folder / 'raw_results.jsonl'}'"
        in out
    )
    assert not (folder / "raw_results.jsonl").exists()
    assert not list(folder.glob(".*.tmp"))  # no temp file left behind
    for name in ("summary.csv", "usage.csv", "calls.csv", "report.md", "manifest.json"):
        assert (folder / name).is_file(), name
    assert json.loads((folder / "manifest.json").read_text())["completion"]["complete"] is True


HELD = '''
import os, time
from pathlib import Path

asked = 0

def reply(request):
    """The target (a perfect model), at once, but for the HOLD_AT-th request of this process:
    that one writes HELD.<pid> and is still being answered until RELEASE exists (120 s at most),
    as a slow model's. It runs on the engine's loop thread, so no later case of this process
    can finish while it waits."""
    global asked
    asked += 1
    if asked == int(os.environ["HOLD_AT"]):
        Path(f"{os.environ['HELD']}.{os.getpid()}").touch()
        deadline = time.monotonic() + 120  # s: the test releases it right after its SIGINT
        while not os.path.exists(os.environ["RELEASE"]) and time.monotonic() < deadline:
            time.sleep(0.02)
    return request.target if isinstance(request.target, str) else ""
'''
HOLD_AT = 40  # requests of a process: 14 of pgt's 66 quick cases have passed when it is asked


def sigint_as_from_a_shell() -> None:
    """In the child before it runs pytest: SIGINT at its default disposition and unblocked, as a
    shell starts a command (a child inherits an ignored or blocked signal)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "2"])
def test_sigint_marks_the_results_partial(tmp_path, shared_cache, workers):
    """SIGINT while a model is still answering, 3 cases having passed: the files are written,
    and report.md, manifest.json and the terminal say they are partial (N of M cases).

    The signal is sent on conditions, not on time: a process of the child has been asked its
    HOLD_AT-th request, which is not answered until the test says so, and 3 PASSED lines have
    been read. An earlier form signalled on the third PASSED line alone, the model sleeping
    0.5 s an answer; in full suites under load its child ran every case to the end, a cause never
    reproduced (the workers' SIGINT was watched after every test of a whole run and never
    ignored or blocked). Held, the run cannot end before the signal, whatever the timing."""
    argv = suite_argv(tmp_path, shared_cache, "-m", "quick", "-n", workers, "-v")
    (tmp_path / "held.py").write_text(HELD)
    argv[argv.index("--model=scripted:answers:reply")] = "--model=scripted:held:reply"
    held, release = tmp_path / "holding", tmp_path / "release"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *argv],
        cwd=tmp_path,
        env=suite_env(tmp_path, HOLD_AT=str(HOLD_AT), HELD=str(held), RELEASE=str(release)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=sigint_as_from_a_shell,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 240  # s
        while not (
            list(tmp_path.glob("holding.*")) and sum("PASSED" in line for line in list(lines)) >= 3
        ):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)[-3000:]
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        release.touch()
        proc.wait(timeout=120)
        reader.join(timeout=10)
    finally:
        release.touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "".join(lines)
    folder = tmp_path / "results" / "pgt" / "r1"
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    completion = json.loads((folder / "manifest.json").read_text())["completion"]
    assert completion["complete"] is False and completion["interrupted"] is True
    n, m = completion["cases_finished"], completion["cases_selected"]
    assert 0 < n < m == 66, completion
    line = f"interrupted: partial results ({n} of {m} cases finished)"
    assert (folder / "report.md").read_text().startswith(f"**{line}.**"), line
    assert f"vlmbench: {line}" in out


DROPPED = '''
import os, signal

passed = 0


class Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)  # KeyboardInterrupt raised here, in a finalizer


def pytest_runtest_logreport(report):
    """After the 3rd passed case, a Ctrl-C that lands in a finalizer: Python drops the
    KeyboardInterrupt raised there (an unraisable exception)."""
    global passed
    if report.when == "call" and report.passed:
        passed += 1
        if passed == 3:
            Finalized()  # finalized at once, on the main thread
'''


@pytest.mark.slow
def test_a_sigint_dropped_in_a_finalizer_still_stops_the_run(tmp_path, shared_cache):
    """A KeyboardInterrupt that Python drops (raised in a `__del__`) still ends the run as
    interrupted before the next case (fixtures/interrupts.py), its results marked partial:
    without the suite's SIGINT handler the run went on to its 66th case and exited 0."""
    argv = suite_argv(tmp_path, shared_cache, "-m", "quick", "-n", "0", "-p", "dropped")
    (tmp_path / "dropped.py").write_text(DROPPED)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *argv, "-W", "default"],
        cwd=tmp_path, env=suite_env(tmp_path), capture_output=True, text=True, timeout=300,
        preexec_fn=sigint_as_from_a_shell,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert "KeyboardInterrupt" in out and "__del__" in out, out[-3000:]  # it was dropped there
    assert done.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    folder = tmp_path / "results" / "pgt" / "r1"
    completion = json.loads((folder / "manifest.json").read_text())["completion"]
    assert completion["interrupted"] is True and completion["complete"] is False
    assert 0 < completion["cases_finished"] < completion["cases_selected"] == 66, completion
