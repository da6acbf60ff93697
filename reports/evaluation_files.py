"""One evaluation's run folder, results/<evaluation>/<run-id>/, and its EvaluationResult.

`EvaluationWriter` writes, in order: the summary's controller-side scores (`score_outcomes`:
BERTScore and NLI for surgvqa), raw_results.jsonl (whatever fails after it, no computed outcome
is lost), the summary (summary.csv, usage.csv, calls.csv, provenance.csv: how the answers were
read, support/contract/provenance.py), the evaluation's own files (its summary's
`write_outputs`), comparisons.csv, report.md (once, with whatever the summary added before
anything failed) and manifest.json (attempted regardless). Each file is written on its own: one
that cannot be (a full disk) is listed in `unwritten` with the reason, naming the file, and the
others are still written. A summary that raises never costs another evaluation its files: its
result says what broke it (`SummaryFailure`).
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reports.manifest import build_manifest
from reports.result import Completion, EvaluationResult, SessionFacts
from support import evaluations
from support.contract.evaluation import EvaluationSpec, OptionError
from support.contract.provenance import fallback_flags, provenance_table
from support.contract.provenance import report_section as provenance_section
from support.contract.summary import LoadedSummary, SummaryContext
from support.reporting.tables import calls_table, usage_table
from support.settings import RunSettings
from support.statistics.pairing import report_section
from support.storage.files import write_csv, write_jsonl
from support.storage.run_folder import (
    CALLS,
    COMPARISONS,
    PROVENANCE,
    RAW,
    REPORT,
    SUMMARY,
    USAGE,
    clear_derived,
    folder_of,
    write_manifest,
)
from support.types import Outcome

if TYPE_CHECKING:
    import pandas as pd


@dataclasses.dataclass(frozen=True)
class SummaryFindings:
    """What an evaluation's summary made, as far as it got: the EvaluationResult fields of the
    same names."""

    data_label: str | None = None
    key_metrics: tuple[str, ...] | None = None
    summary: pd.DataFrame | None = None
    headline: pd.DataFrame | None = None
    usage: pd.DataFrame | None = None
    comparisons: pd.DataFrame | None = None
    provenance: pd.DataFrame | None = None
    fallback_flags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class SummaryFailure:
    """What broke an evaluation's summary: the exception as "Type: message" (`failure`), and its
    message (`failed_input`) when it is an OptionError, an input's fault rather than the suite's."""

    failure: str
    failed_input: str | None = None

    @classmethod
    def of(cls, exc: Exception) -> SummaryFailure:
        failure = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return cls(failure, str(exc) if isinstance(exc, OptionError) else None)


def write_evaluation(
    name: str,
    outcomes: Sequence[Outcome],
    completion: Completion,
    run: RunSettings,
    session: SessionFacts,
) -> EvaluationResult:
    """Evaluation `name`'s files written from its outcomes (in arrival order), and its result;
    a result naming the failure when no spec of `name` can be loaded here."""
    try:
        spec = evaluations.spec(name)
    except Exception as exc:
        failed = SummaryFailure.of(exc)
        return EvaluationResult(
            name, tuple(outcomes), completion=completion, failure=failed.failure,
            failed_input=failed.failed_input,
        )  # fmt: skip
    return EvaluationWriter(spec, run, session, completion).write(outcomes)


class EvaluationWriter:
    """Writes one evaluation's run folder (`folder`) and builds its EvaluationResult, from its
    spec, the run's settings, the session's facts and how far its tables reach. One writer
    writes once."""

    def __init__(
        self, spec: EvaluationSpec, run: RunSettings, session: SessionFacts, completion: Completion
    ) -> None:
        self.spec = spec
        self.run = run
        self.session = session
        self.completion = completion
        self.folder = folder_of(run.output.results_dir, spec.name, run.output.run_id)
        self.files: list[Path] = []  # written so far
        self.unwritten: list[str] = []  # "file: why" of each file that could not be
        self.found = SummaryFindings()

    def write(self, outcomes: Sequence[Outcome]) -> EvaluationResult:
        """Write the files from the outcomes (in arrival order) and return the result."""
        outs = sorted(outcomes, key=lambda o: (o.model, o.case_id))
        self._attempt(self._clear)
        failure = None
        try:
            try:
                summary_of, ctx, outs = self._scored(outs)
                self._summary_files(summary_of, ctx, outs)
            finally:
                self._attempt(lambda: [self._manifest(outs)])
        except Exception as exc:  # one evaluation's broken summary never costs the others
            failure = SummaryFailure.of(exc)
        return self._result(outcomes, outs, failure)

    def _attempt(self, write: Callable[[], list[Path]]) -> None:
        """Run one file's writer: its files are recorded, or (an OSError, which names the file)
        why they are not."""
        try:
            self.files += write()
        except OSError as exc:
            self.unwritten.append(str(exc))

    def _clear(self) -> list[Path]:
        """An earlier session's tables go first: none is left beside this session's manifest
        should one not be written."""
        clear_derived(self.folder)
        return []

    def _table(self, table: pd.DataFrame, name: str) -> None:
        """One CSV file of the folder."""
        self._attempt(lambda: [write_csv(table, self.folder / name)])

    def _scored(self, outs: list[Outcome]) -> tuple[LoadedSummary, SummaryContext, list[Outcome]]:
        """The summary and its context (loaded once, for every file after), and the outcomes
        with the summary's controller-side scores (`score_outcomes`); then raw_results.jsonl.
        When loading or scoring fails, raw_results.jsonl holds the outcomes as they came and the
        error propagates."""
        try:
            summary_of = self.spec.summary_module()
            ctx = self.spec.summary_context(self.run)
            outs = summary_of.scored(outs, ctx)
        finally:
            self._attempt(lambda: [write_jsonl(outs, self.folder / RAW)])
        return summary_of, ctx, outs

    def _summary_files(
        self, summary_of: LoadedSummary, ctx: SummaryContext, outs: list[Outcome]
    ) -> None:
        """summary.csv, usage.csv, calls.csv, provenance.csv, the evaluation's own files,
        comparisons.csv and report.md; what they are made of goes into `found` as it is made."""
        self.found = SummaryFindings(ctx.data_label, summary_of.KEY_METRICS)
        summary = summary_of.summarize(outs, ctx)
        headline = summary_of.headline(summary)
        usage = usage_table(outs)
        self.found = dataclasses.replace(
            self.found, summary=summary, headline=headline, usage=usage
        )
        calls = calls_table(outs)
        self._table(summary, SUMMARY)
        self._table(usage, USAGE)
        self._table(calls, CALLS)
        section = ""
        try:
            section = self._provenance(outs)
            self._attempt(lambda: list(summary_of.write_outputs(outs, summary, self.folder, ctx)))
            compared = summary_of.compared(
                self.spec.name, outs, self.run.statistics.compare, self.run.statistics.bootstrap,
                self.run.seed,
            )  # fmt: skip
            if compared is not None:
                table, notes = compared
                self.found = dataclasses.replace(self.found, comparisons=table)
                self._table(table, COMPARISONS)
                section += report_section(table, notes)
        finally:  # report.md once, with whatever the summary added before anything failed
            notice = self.completion.partial_line()

            def write_report() -> list[Path]:
                path = ctx.report.write(self.folder / REPORT, notice, section)
                return [path] if path else []

            self._attempt(write_report)

    def _provenance(self, outs: list[Outcome]) -> str:
        """provenance.csv (each model's answers by the parser rule that read them) and its
        report.md section; "" for an evaluation whose answers carry no rule code."""
        rules = self.spec.read_rules
        if not rules and not any(o.read_by for o in outs):
            return ""
        table = provenance_table(outs, rules, self.run.models.names)
        self.found = dataclasses.replace(self.found, provenance=table)
        flags = tuple(fallback_flags(table))
        self.found = dataclasses.replace(self.found, fallback_flags=flags)
        self._table(table, PROVENANCE)
        return provenance_section(table, flags)

    def _manifest(self, outs: list[Outcome]) -> Path:
        """manifest.json, with the evaluation's completion."""
        manifest = build_manifest(self.spec, self.run, self.session, outs)
        manifest["completion"] = self.completion.as_json()
        return write_manifest(self.folder, manifest)

    def _result(
        self, outcomes: Sequence[Outcome], outs: list[Outcome], failure: SummaryFailure | None
    ) -> EvaluationResult:
        """The EvaluationResult: the outcomes in arrival order with the controller-side scores,
        what the summary found (no summary or headline when it failed), the files."""
        scored = {(o.model, o.case_id): o for o in outs}
        found = self.found
        return EvaluationResult(
            self.spec.name,
            tuple(scored.get((o.model, o.case_id), o) for o in outcomes),
            data_label=found.data_label,
            key_metrics=found.key_metrics,
            summary=found.summary if failure is None else None,
            headline=found.headline if failure is None else None,
            usage=found.usage,
            comparisons=found.comparisons,
            provenance=found.provenance,
            fallback_flags=found.fallback_flags,
            files=tuple(self.files),
            unwritten=tuple(self.unwritten),
            failure=failure.failure if failure is not None else None,
            failed_input=failure.failed_input if failure is not None else None,
            completion=self.completion,
        )
