"""The end-of-run terminal summary, printed from the run's RunResult (reports.result).

By default each evaluation gets a heading, its brief table and one line of counts, then one line
names the result folders; `-v` prints the full headline tables, every file written, the engine
statistics and (`--power`) the sample sizes. Then, in any case: the models whose answers were
mostly read by a fallback rule (provenance.csv), the batch lines, the
partial-results line of an interrupted run, the files not written, the summaries that failed,
the pipeline errors with a command that reruns them, and the failed gates. The lines' pieces
are reports.terminal's.
"""

from __future__ import annotations

from typing import Any

from reports import terminal
from reports.result import EvaluationResult, RunResult
from support.settings import RunSettings
from support.storage.run_folder import RAW

MAX_LISTED_FILES = 12  # "wrote PATH" lines per evaluation in the terminal summary (-v)
# engine statistics the terminal's engine table leaves out (in manifest.json, or batch lines)
MANIFEST_ONLY_STATS = ("identity", "endpoint", "batch_api")


def write_summary(tr: Any, result: RunResult, run: RunSettings) -> None:
    """Everything the run prints at its end, on `tr` (a terminal.PrintableLines)."""
    failed = [r for r in result.evaluations if r.failure is not None]
    if result.summarized or result.engine_stats or failed:  # not --collect-only
        if tr.config.option.verbose > 0:
            _tables(tr, result, run)
        else:
            _brief(tr, result, run)
    for r in (
        result.evaluations
    ):  # answers read mostly by a lenient rule (support/contract/provenance.py)
        for flag in r.fallback_flags:
            tr.write_line(f"vlmbench: {r.name}: {flag}", yellow=True, bold=True)
    for line in terminal.batch_lines(result.engine_stats):
        tr.write_line(line)
    partial = {r.name: r.completion.partial_line() for r in result.evaluations}
    if len(set(partial.values())) == 1:  # every evaluation's the same: said once, unnamed
        partial = {"": next(iter(partial.values()))}
    for name, line in partial.items():
        if line is not None:
            which = f"{name}: " if name else ""
            tr.write_line(
                f"vlmbench: {which}{line}; the result files say so (report.md, manifest.json "
                "completion)",
                red=True,
                bold=True,
            )
    for r in result.evaluations:
        for why in r.unwritten:
            tr.write_line(f"vlmbench: {r.name}: NOT WRITTEN: {why}", red=True, bold=True)
    for r in failed:
        folder = run.results_dir / r.name / run.run_id
        if r.failed_input is not None:  # a file an option names (evaluation_files.summary_failure)
            tr.write_line(
                f"vlmbench: {r.name}: its summary could not use an input: {r.failed_input}; the "
                f"outcomes are kept in {folder / RAW}. Fix that file (or pass another) "
                "and run again.",
                red=True,
                bold=True,
            )
            continue
        tr.write_line(
            f"vlmbench: {r.name}: its summary failed ({r.failure}); the outcomes are kept in "
            f"{folder / RAW}. This is a bug of the suite: please report it.",
            red=True,
            bold=True,
        )
    errors = [line for r in result.evaluations for line in terminal.error_lines(r.name, r.outcomes)]
    for line in errors:
        tr.write_line(line, red=True)
    if result.rerun is not None:
        # quoted for the shell; credentials (--api-base user:pass@) shown as ***
        tr.write_line(terminal.rerun_line(tr.config.invocation_params.args, *result.rerun))
    for msg in result.gate_messages:
        tr.write_line(f"GATE FAILED: {msg}", red=True, bold=True)


def _usage_table(tr: Any, r: EvaluationResult) -> None:
    """Tokens and cost per model, when the models report tokens (API models do)."""
    from support.reporting.tables import markdown_table

    if r.usage is not None and (r.usage["input_tokens"] > 0).any():
        tr.write_line("usage and cost per model (USD; cached answers included):")
        tr.write_line(markdown_table(r.usage))


def _brief(tr: Any, result: RunResult, run: RunSettings) -> None:
    """Per evaluation: a heading, the brief table, one line of counts (see reports.terminal);
    then one line naming the result folders."""
    from support.reporting.tables import in_model_order, key_metrics, markdown_table

    for r in result.summarized:
        metrics = key_metrics(r.headline, r.key_metrics)
        table = terminal.brief_table(in_model_order(r.headline, run.models), metrics)
        what = [", ".join(metrics)]
        if any(f"{m}_lo" in r.headline.columns for m in metrics):
            shown = any("[" in str(v) for v in table.to_numpy().ravel())
            what.append(
                terminal.interval_label(run)
                if shown or not run.bootstrap
                else "intervals: -v, summary.csv"
            )
        if r.data_label:
            what.append(r.data_label.split(";")[0].split("(")[0].strip())
        tr.write_sep("=", f"vlmbench: {r.name}: {'; '.join(what)}")
        tr.write_line(markdown_table(table))
        tr.write_line(terminal.counts_line(r.outcomes, r.comparisons))
        _usage_table(tr, r)
    files = {r.name: list(r.files) for r in result.evaluations}
    if files:
        tr.write_line(terminal.folders_line(files, tr.config.invocation_params.dir))


def _tables(tr: Any, result: RunResult, run: RunSettings) -> None:
    """Per evaluation: the full headline table with its intervals, counts, usage and the files
    written; then the engine statistics and (`--power`) the sample sizes."""
    import pandas as pd

    from support.reporting.tables import (
        in_model_order,
        interval_metrics,
        markdown_table,
        with_intervals,
    )
    from support.statistics.pairing import power_table

    for r in result.summarized:
        metrics = interval_metrics(r.headline)
        label = r.data_label
        heading = terminal.interval_label(run) if metrics else "no intervals"
        tr.write_sep("=", f"vlmbench: {r.name} ({heading}){f'; {label}' if label else ''}")
        ordered = in_model_order(r.headline, run.models)
        tr.write_line(markdown_table(with_intervals(ordered, metrics)))
        tr.write_line(terminal.counts_line(r.outcomes, r.comparisons))
        _usage_table(tr, r)
        for path in r.files[:MAX_LISTED_FILES]:
            tr.write_line(f"wrote {path}")
        if len(r.files) > MAX_LISTED_FILES:
            tr.write_line(f"... and {len(r.files) - MAX_LISTED_FILES} more files")
    rows = [
        # identity, endpoint: in manifest.json; batch_api: terminal.batch_lines
        {"process": p, **{k: v for k, v in s.items() if k not in MANIFEST_ONLY_STATS}}
        for p, stats in sorted(result.engine_stats.items())
        for s in stats
    ]
    if rows:
        tr.write_sep("-", "vlmbench: engine (per process and model)")
        tr.write_line(markdown_table(pd.DataFrame(rows)))
    if run.power:
        for r in result.evaluations:
            if r.comparisons is None:
                continue
            sizes = power_table(r.comparisons, run.power_delta, run.target_halfwidth)
            tr.write_sep("-", f"vlmbench: {r.name} power and sample size (--power)")
            if sizes.empty:
                tr.write_line("no paired comparison with a bootstrap interval to size")
                continue
            tr.write_line(
                f"clusters (and pairs) needed to detect a difference of "
                f"{run.power_delta:g} at 80% power (two-sided alpha 0.05), and for a 95% "
                f"interval of half-width {run.target_halfwidth:g}; normal approximation "
                "from the paired bootstrap's standard error"
            )
            tr.write_line(markdown_table(sizes))
