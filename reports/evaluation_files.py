"""One evaluation's files under results/<evaluation>/<run-id>/, and its EvaluationResult.

In order: the summary's controller-side scores (`score_outcomes`: BERTScore and NLI for surgvqa),
raw_results.jsonl (whatever fails after it, no computed outcome is lost), the summary
(summary.csv, usage.csv, calls.csv, provenance.csv: how the answers were read,
support/contract/provenance.py), the evaluation's own files (its summary's
`write_outputs`), comparisons.csv, report.md (once, with whatever the summary added before
anything failed) and manifest.json (attempted regardless). Each file is written on its own: one
that cannot be (a full disk) is listed in `unwritten` with the reason, naming the file, and the
others are still written. A summary that raises never costs another evaluation its files: its
result says what broke it (`failure`).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reports.manifest import write_manifest
from reports.result import Completion, EvaluationResult
from support import evaluations
from support.contract.evaluation import OptionError
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
)
from support.types import Outcome


class _Written:
    """The files written so far, and why the others were not."""

    def __init__(self) -> None:
        self.files: list[Path] = []
        self.unwritten: list[str] = []

    def attempt(self, write: Callable[[], list[Path]]) -> None:
        """Run one writer: its files are recorded, or (an OSError, which names the file) the
        reason they are not."""
        try:
            self.files += write()
        except OSError as exc:
            self.unwritten.append(str(exc))


def write_evaluation(
    name: str,
    outcomes: Sequence[Outcome],
    completion: Completion,
    run: RunSettings,
    engine_stats: Mapping[str, Sequence[Mapping[str, Any]]],
    started: float,
    args: Sequence[str],
    cwd: Path,
) -> EvaluationResult:
    """Write the evaluation's files from its outcomes (in arrival order) and return its result.
    `engine_stats`, `started` (epoch s), `args` and `cwd` (the invocation) feed manifest.json."""
    outs = sorted(outcomes, key=lambda o: (o.model, o.case_id))
    out_dir = run.results_dir / name / run.run_id
    written = _Written()

    def clear() -> list[Path]:  # an earlier session's tables go first: none is left beside
        clear_derived(out_dir)  # this session's manifest should one not be written
        return []

    written.attempt(clear)
    found: dict[str, Any] = {}
    try:
        try:
            summary_of, ctx, outs = _scored(name, outs, run, out_dir, written)
            _write_summary_files(name, summary_of, ctx, outs, out_dir, run, completion, written,
                                 found)  # fmt: skip
        finally:
            written.attempt(
                lambda: [
                    write_manifest(
                        out_dir, name, outs, run, engine_stats, started, args, cwd,
                        completion=completion.as_json(),
                    )
                ]
            )  # fmt: skip
    except Exception as exc:  # one evaluation's broken summary never costs the others
        found.update(summary_failure(exc))
        found.pop("summary", None)
        found.pop("headline", None)
    scored = {(o.model, o.case_id): o for o in outs}  # with the controller-side scores
    return EvaluationResult(
        name,
        tuple(scored.get((o.model, o.case_id), o) for o in outcomes),  # in arrival order
        files=tuple(written.files),
        unwritten=tuple(written.unwritten),
        completion=completion,
        **found,
    )


def summary_failure(exc: Exception) -> dict[str, str | None]:
    """EvaluationResult's `failure` (the exception as "Type: message") and `failed_input` (its
    message, when it is an OptionError: an input's fault, not the suite's) for a summary that
    raised `exc`."""
    failure = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return {"failure": failure, "failed_input": str(exc) if isinstance(exc, OptionError) else None}


def _scored(
    name: str, outs: list[Outcome], run: RunSettings, out_dir: Path, written: _Written
) -> tuple[LoadedSummary, SummaryContext, list[Outcome]]:
    """The evaluation's summary and its context (loaded once, for every file after), and the
    outcomes with the summary's controller-side scores (`score_outcomes`); then
    raw_results.jsonl. When loading or scoring fails, raw_results.jsonl holds the outcomes as
    they came and the error propagates (the evaluation's result says what broke)."""
    spec = evaluations.spec(name)
    try:
        summary_of = spec.summary_module()
        ctx = spec.summary_context(run)
        outs = summary_of.scored(outs, ctx)
    finally:
        written.attempt(lambda: [write_jsonl(outs, out_dir / RAW)])
    return summary_of, ctx, outs


def _provenance(
    name: str,
    outs: list[Outcome],
    run: RunSettings,
    out_dir: Path,
    written: _Written,
    found: dict[str, Any],
) -> str:
    """provenance.csv (each model's answers by the parser rule that read them) and its report.md
    section; "" for an evaluation whose answers carry no rule code."""
    rules = evaluations.spec(name).read_rules
    if not rules and not any(o.read_by for o in outs):
        return ""
    table = found["provenance"] = provenance_table(outs, rules, run.models)
    flags = found["fallback_flags"] = tuple(fallback_flags(table))
    written.attempt(lambda: [write_csv(table, out_dir / PROVENANCE)])
    return provenance_section(table, flags)


def _write_summary_files(
    name: str,
    summary_of: LoadedSummary,
    ctx: SummaryContext,
    outs: list[Outcome],
    out_dir: Path,
    run: RunSettings,
    completion: Completion,
    written: _Written,
    found: dict[str, Any],
) -> None:
    """summary.csv, usage.csv, calls.csv, the evaluation's own files, comparisons.csv and
    report.md; what they are made of goes into `found` (EvaluationResult's fields) as it is
    computed."""
    found["data_label"] = ctx.data_label
    found["key_metrics"] = summary_of.KEY_METRICS
    summary = found["summary"] = summary_of.summarize(outs, ctx)
    found["headline"] = summary_of.headline(summary)
    usage = found["usage"] = usage_table(outs)
    calls = calls_table(outs)
    written.attempt(lambda: [write_csv(summary, out_dir / SUMMARY)])
    written.attempt(lambda: [write_csv(usage, out_dir / USAGE)])
    written.attempt(lambda: [write_csv(calls, out_dir / CALLS)])
    section = ""
    try:
        section = _provenance(name, outs, run, out_dir, written, found)
        written.attempt(lambda: list(summary_of.write_outputs(outs, summary, out_dir, ctx)))
        compared = summary_of.compared(name, outs, run.compare, run.bootstrap, run.seed)
        if compared is not None:
            table, notes = compared
            found["comparisons"] = table
            written.attempt(lambda: [write_csv(table, out_dir / COMPARISONS)])
            section += report_section(table, notes)
    finally:  # report.md once, with whatever the summary added before anything failed
        notice = completion.partial_line()

        def write_report() -> list[Path]:
            path = ctx.report.write(out_dir / REPORT, notice, section)
            return [path] if path else []

        written.attempt(write_report)
