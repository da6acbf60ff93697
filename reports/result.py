"""What a run's reports are made of, built once on the controller at session finish.

`EvaluationResult` is one evaluation's: its outcomes, summary, headline, usage, comparisons,
labels (its data label, the metrics of its brief table), the files written and those that could
not be, and what broke its summary. `RunResult` holds them in run order with what the run says
as a whole: how far it got (`Completion`), the engine statistics and the failed gates.
`SessionFacts` is what every evaluation's manifest.json says of the session. The file writer
(reports.evaluation_files) builds each EvaluationResult; the terminal
(reports.terminal_summary), the HTML summary (reports.html) and the exit status read them. All
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
    """How far an evaluation's tables reach: whether the session finished, how many of the
    selected cases did, and (`--resume`) the earlier run its outcomes were merged into. A table
    that is not `complete` says so first (`partial_line`) in report.md, the terminal and
    manifest.json."""

    interrupted: bool = False  # the session ended by KeyboardInterrupt (SIGINT)
    cases_finished: int = 0  # cases that ran to their teardown
    cases_selected: int = 0  # items collected, or one xdist worker's count
    rerun_of_failed: bool = False  # --lf: only the cases that failed before were selected
    resumed: str | None = None  # --resume: the run id whose outcomes these were merged with
    kept: int = 0  # outcomes of that run kept (their cases were not run again)
    earlier_complete: bool = True  # that run's tables were complete, or this one ran all it had
    # (--resume) the outcome rows that run's manifest records, when its raw_results.jsonl held
    # fewer (a partial copy): None when it held them all
    earlier_recorded: int | None = None

    @property
    def stopped_early(self) -> bool:
        """Selected cases left unrun without an interrupt: -x or --maxfail."""
        return not self.interrupted and self.cases_finished < self.cases_selected

    @property
    def complete(self) -> bool:
        """The tables hold every case of the selection they stand for."""
        if self.interrupted or self.stopped_early:
            return False
        if self.resumed is not None:
            return self.earlier_complete
        return not self.rerun_of_failed

    def as_json(self) -> dict[str, Any]:
        """manifest.json's "completion"."""
        out: dict[str, Any] = {
            "complete": self.complete,
            "interrupted": self.interrupted,
            "cases_finished": self.cases_finished,
            "cases_selected": self.cases_selected,
        }
        if self.stopped_early:
            out["stopped_early"] = True
        if self.rerun_of_failed:
            out["rerun_of_failed"] = True
        if self.resumed is not None:
            out["resumed"] = self.resumed
            out["kept"] = self.kept
            if self.earlier_recorded is not None:
                out["earlier_recorded"] = self.earlier_recorded
        partial = self.partial_line()
        if partial:
            out["partial"] = partial
        return out

    def partial_line(self) -> str | None:
        """What report.md and the terminal say first about tables that are not complete (None
        when they are)."""
        done = f"{self.cases_finished} of {self.cases_selected} cases finished"
        if self.interrupted:
            return f"interrupted: partial results ({done})"
        if self.stopped_early:
            return f"stopped early (-x or --maxfail): partial results ({done})"
        if self.resumed is not None and not self.earlier_complete:
            if self.earlier_recorded is not None:
                return (
                    f"partial results: run {self.resumed}'s raw_results.jsonl holds fewer "
                    f"outcomes than the {self.earlier_recorded} its manifest records (a partial "
                    f"copy); {self.kept} kept, {self.cases_finished} run"
                )
            return (
                f"partial results: run {self.resumed} was not complete and this rerun did not "
                f"run all its cases ({self.kept} kept, {self.cases_finished} run)"
            )
        if self.resumed is None and self.rerun_of_failed:
            return (
                f"partial results: a rerun of what failed before (--lf); these tables hold only "
                f"the {self.cases_finished} cases it ran"
            )
        return None


@dataclass(frozen=True)
class SessionFacts:
    """What the session says of itself in every evaluation's manifest.json, made once at
    session finish: the pytest arguments and working folder, the session's start (epoch s) and
    the engine statistics (process -> per-model stats)."""

    args: tuple[str, ...]
    cwd: Path
    started: float
    engine_stats: Mapping[str, tuple[Mapping[str, Any], ...]] = field(
        default_factory=lambda: MappingProxyType({})
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
    provenance: pd.DataFrame | None = None  # provenance.csv: each model's answers by read rule
    fallback_flags: tuple[str, ...] = ()  # models read mostly by a fallback rule (provenance)
    files: tuple[Path, ...] = ()
    unwritten: tuple[str, ...] = ()
    failure: str | None = None
    # the failure's message when it was an input's (an OptionError: a file an option names that
    # fails to load, e.g. a surgvqa scorer), not a bug of the suite
    failed_input: str | None = None
    completion: Completion = Completion()  # how far its tables reach (merged under --resume)


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
    # what completes the tables (`--resume RUN`, `--lf` when only what failed is to run again),
    # as (RUN, failed only); None when they are complete and nothing failed in the pipeline
    rerun: tuple[str, bool] | None = None

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
