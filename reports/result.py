"""What a run's reports are made of, built once on the controller at session finish.

`EvaluationResult` is one evaluation's: its outcomes, summary, headline, usage, comparisons,
labels (its data label, the metrics of its brief table), the files written and those that could
not be, and what broke its summary. `RunResult` holds them in run order with what the run says
as a whole: how far it got (`Completion`), the engine statistics and the failed gates. The file
writer (reports.evaluation_files) builds each EvaluationResult; the terminal
(reports.terminal_summary), the HTML summary (reports.html) and the exit status read them. Both
are frozen: nothing changes a result once it is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from support.types import Outcome

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Completion:
    """Whether the run finished, and how many of the selected cases did (an interrupted run's
    files hold partial results)."""

    interrupted: bool = False  # the session ended by KeyboardInterrupt (SIGINT)
    cases_finished: int = 0  # cases that ran to their teardown
    cases_selected: int = 0  # items collected, or one xdist worker's count

    def as_json(self) -> dict[str, Any]:
        """manifest.json's "completion"."""
        return {
            "complete": not self.interrupted,
            "interrupted": self.interrupted,
            "cases_finished": self.cases_finished,
            "cases_selected": self.cases_selected,
        }

    def partial_line(self) -> str:
        """What report.md and the terminal say first about an interrupted run."""
        return (
            f"interrupted: partial results ({self.cases_finished} of {self.cases_selected} "
            "cases finished)"
        )


@dataclass(frozen=True)
class EvaluationResult:
    """One evaluation's part of the run. `summary` and `headline` are None when its summary
    failed (`failure` says how); `files` and `unwritten` ("file: why") hold what was written
    before and after regardless."""

    name: str
    outcomes: tuple[Outcome, ...]  # in arrival order
    data_label: str | None = None  # what the data is when it is not the real dataset
    key_metrics: tuple[str, ...] | None = None  # the summary's KEY_METRICS
    summary: pd.DataFrame | None = None  # summary.csv
    headline: pd.DataFrame | None = None
    usage: pd.DataFrame | None = None  # usage.csv
    comparisons: pd.DataFrame | None = None  # comparisons.csv
    files: tuple[Path, ...] = ()
    unwritten: tuple[str, ...] = ()
    failure: str | None = None


@dataclass(frozen=True)
class RunResult:
    """The run's results: each evaluation's in run order (the order its first outcome arrived),
    how far the run got, the engine statistics (process -> per-model stats) and one message per
    failed gate."""

    evaluations: tuple[EvaluationResult, ...] = ()
    completion: Completion = Completion()
    engine_stats: Mapping[str, tuple[Mapping[str, Any], ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    gate_messages: tuple[str, ...] = ()

    @property
    def summarized(self) -> tuple[EvaluationResult, ...]:
        """The evaluations whose summary succeeded."""
        return tuple(r for r in self.evaluations if r.headline is not None)

    @property
    def failed(self) -> bool:
        """A gate failed, a summary failed or a file could not be written."""
        return bool(self.gate_messages or any(r.failure or r.unwritten for r in self.evaluations))


def headlines(results: tuple[EvaluationResult, ...]) -> dict[str, pd.DataFrame]:
    """Each summarized evaluation's headline, by name (what the gates read)."""
    return {r.name: r.headline for r in results if r.headline is not None}
