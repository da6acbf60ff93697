"""The end-of-run terminal summary, written: reports.terminal's lines, made from the run's
RunResult, on pytest's terminal through `PrintableLines`, so no escape sequence from data reaches
it."""

from __future__ import annotations

from typing import Any

from reports import terminal
from reports.result import RunResult
from support.printable import printable
from support.settings import RunSettings


class PrintableLines:
    """A terminal reporter whose `write_line` and `write_sep` print only `printable` text; every
    other attribute is the reporter's own."""

    def __init__(self, reporter: Any) -> None:
        self._reporter = reporter

    def write_line(self, line: str, **markup: bool) -> None:
        self._reporter.write_line(printable(str(line)), **markup)

    def write_sep(self, sep: str, title: str | None = None, **kwargs: Any) -> None:
        self._reporter.write_sep(sep, None if title is None else printable(title), **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reporter, name)


def write_summary(reporter: Any, result: RunResult, run: RunSettings) -> None:
    """Everything the run prints at its end (terminal.summary_lines), on pytest's terminal
    reporter."""
    tr = PrintableLines(reporter)
    invocation = tr.config.invocation_params
    for line in terminal.summary_lines(
        result, run, tr.config.option.verbose, invocation.args, invocation.dir
    ):
        markup = dict.fromkeys(line.markup, True)
        if line.sep is not None:
            tr.write_sep(line.sep, line.text, **markup)
        else:
            tr.write_line(line.text, **markup)


def write_rerun(reporter: Any, result: RunResult) -> None:
    """The command that completes the run (terminal.rerun_line), after pytest's own short
    summary and its counts line, so the last screen shows it."""
    if result.rerun is None:
        return
    tr = PrintableLines(reporter)
    invocation = tr.config.invocation_params
    # quoted for the shell; credentials (user:pass@) shown as ***
    tr.write_line(terminal.rerun_line(invocation.args, *result.rerun), bold=True)
