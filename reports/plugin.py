"""The reporting plugin: collects outcomes on the controller and writes session metrics.

Registered only on the controller (never on xdist workers), by fixtures.options once the run's
settings are known. Outcomes arrive as plain JSON on a report attribute (`vlmbench_outcomes`, set
by fixtures.outcomes on the report of the phase that produced them; xdist serialises report
attributes, as it does pytest-html's extras). At session finish each evaluation's summary module
turns its outcomes into a summary table and files under results/<evaluation>/<run-id>/; workers
write no files.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from reports import terminal
from reports.gates import Gate, failed_gates
from support import evaluations
from support.evaluation import SummaryContext
from support.settings import RunSettings
from support.types import Case, Outcome

if TYPE_CHECKING:
    import pandas as pd

# The run's files need pandas, scipy, statsmodels and matplotlib (~2 s of imports on a 2-core
# machine): the functions below import them when the files are written, so a run's start-up (and
# `--collect-only`) does not pay for them; once the first case has reported, a background thread
# imports them while the others run (the controller mostly waits on the model then; under xdist
# it only waits), so the files do not wait for them either.
REPORT_MODULES = (
    "reports.manifest",
    "support.tables",
    "support.comparisons.pairing",
    "statsmodels.stats.contingency_tables",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
)

IMPORTS_JOIN_S = 120.0  # seconds the process waits at exit for the background imports, at most
REPORT_PLUGIN_KEY = pytest.StashKey["ReportPlugin"]()
OUTCOMES_ATTR = "vlmbench_outcomes"  # TestReport attribute: list of Outcome JSON dicts
MAX_LISTED_FILES = 12  # "wrote PATH" lines per evaluation in the terminal summary (-v)
# engine statistics the terminal's engine table leaves out (in manifest.json, or batch lines)
MANIFEST_ONLY_STATS = ("identity", "endpoint", "batch_api")


def interval_label(run: RunSettings) -> str:
    """What the brackets of the printed tables are."""
    if run.bootstrap <= 0:
        return "no intervals: --bootstrap 0"
    return "95% bootstrap intervals"


class ReportPlugin:
    """Outcomes -> summary tables -> files, terminal summary, exit gates."""

    def __init__(self, run: RunSettings, gates: list[Gate]) -> None:
        self.run = run
        self.gates = gates
        self.outcomes: dict[tuple[str, str], Outcome] = {}  # (evaluation, case_id) -> outcome
        self.summaries: dict[str, pd.DataFrame] = {}
        self.headlines: dict[str, pd.DataFrame] = {}
        self.files: dict[str, list[Path]] = {}
        self.gate_messages: list[str] = []
        self.usage: dict[str, pd.DataFrame] = {}
        self.engine_stats: dict[str, list[Mapping[str, Any]]] = {}  # process -> per-model stats
        self.comparisons: dict[str, pd.DataFrame] = {}  # evaluation -> comparisons.csv
        self.started = time.time()  # epoch s, at configure: the manifest's session start
        self.order: list[str] = []  # evaluations in the order their first outcome arrived
        self.failed_summaries: dict[str, str] = {}  # evaluation -> what broke its summary
        self.unwritten: dict[str, list[str]] = {}  # evaluation -> "file: why" it was not written
        self.selected = 0  # cases selected (items collected, or one xdist worker's count)
        self.finished: set[str] = set()  # node ids of the cases that ran to their teardown
        self.interrupted = False  # the session ended by KeyboardInterrupt (SIGINT)
        self._to_import: list[str] = []  # imported in the background once cases report
        self._importer: threading.Thread | None = None  # the thread importing them

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The modules the run's files will need (imported once the first case reports)."""
        if session.config.option.collectonly or not session.items:
            return
        cases = (getattr(item, "callspec", None) for item in session.items)
        found = (c.params.get("case") for c in cases if c is not None)
        names = {case.evaluation for case in found if isinstance(case, Case)}
        self.selected = len(session.items)
        summaries = (evaluations.spec(n).summary.partition(":")[0] for n in sorted(names))
        self._to_import = [*REPORT_MODULES, *summaries]

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Under xdist the controller collects nothing: every worker collects the same cases."""
        self.selected = max(self.selected, len(ids))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.finished.add(report.nodeid)
        if self._to_import:  # the first case is done: requests are flowing
            modules, self._to_import = self._to_import, []
            self._importer = threading.Thread(
                target=_import_quietly, args=(modules,), name="vlmbench-imports", daemon=True
            )
            self._importer.start()
        for d in getattr(report, OUTCOMES_ATTR, None) or ():
            o = Outcome.from_json(d)
            self.outcomes.setdefault((o.evaluation, o.case_id), o)
            if o.evaluation not in self.order:
                self.order.append(o.evaluation)

    def add_engine_stats(self, process: str, stats: list[Mapping[str, Any]]) -> None:
        """One process's per-model engine statistics (see fixtures.distribution)."""
        if stats:
            self.engine_stats[process] = stats

    def completion(self) -> dict[str, Any]:
        """manifest.json's "completion": whether the run finished, and how many of the selected
        cases did (an interrupted run's files hold partial results)."""
        return {
            "complete": not self.interrupted,
            "interrupted": self.interrupted,
            "cases_finished": len(self.finished),
            "cases_selected": self.selected,
        }

    def partial_line(self) -> str:
        """What report.md and the terminal say first about an interrupted run."""
        return (
            f"interrupted: partial results ({len(self.finished)} of {self.selected} cases finished)"
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
        for name in self.order:  # every evaluation with an outcome, in arrival order
            outs = sorted(self.outcomes_of(name), key=lambda o: (o.model, o.case_id))
            try:
                self._write_files(session, name, outs)
            except Exception as exc:  # one evaluation's broken summary never costs the others
                self.failed_summaries[name] = "".join(
                    traceback.format_exception_only(type(exc), exc)
                ).strip()
                self.summaries.pop(name, None)
                self.headlines.pop(name, None)
        self.gate_messages = failed_gates(self.gates, self.headlines)
        failed = self.gate_messages or self.failed_summaries or any(self.unwritten.values())
        if failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _write_files(self, session: pytest.Session, name: str, outs: list[Outcome]) -> None:
        """An evaluation's files, summary, headline and comparisons. Each file is written on its
        own: one that cannot be (a full disk) is listed in `unwritten` with the reason, naming
        the file, and the others are still written; the manifest is attempted regardless."""
        from reports.manifest import write_manifest
        from support.files import write_jsonl

        out_dir = self.run.results_dir / name / self.run.run_id
        self.files[name] = []
        self.unwritten[name] = []
        try:
            # the raw rows first: whatever fails after them, no computed outcome is lost
            self._attempt(name, lambda: [write_jsonl(outs, out_dir / "raw_results.jsonl")])
            self._write_summary_files(name, outs, out_dir)
        finally:
            inv = session.config.invocation_params
            self._attempt(
                name,
                lambda: [
                    write_manifest(
                        out_dir, name, outs, self.run, self.engine_stats, self.started,
                        inv.args, inv.dir, completion=self.completion(),
                    )
                ],
            )  # fmt: skip

    def _attempt(self, name: str, write: Callable[[], list[Path]]) -> None:
        """Run one writer: its files are recorded, or (an OSError, which names the file) the
        reason they are not."""
        try:
            self.files[name] += write()
        except OSError as exc:
            self.unwritten[name].append(str(exc))

    def _write_summary_files(self, name: str, outs: list[Outcome], out_dir: Path) -> None:
        """summary.csv, usage.csv, calls.csv, the evaluation's own files, comparisons.csv."""
        from support.comparisons.pairing import evaluation_comparisons, report_section
        from support.files import write_csv
        from support.tables import calls_table, usage_table

        run = self.run
        module = evaluations.spec(name).summary_module()
        ctx = SummaryContext(run, run.evaluations.get(name), name)
        summary = module.summarize(outs, ctx)
        self.summaries[name] = summary
        self.headlines[name] = module.headline(summary)
        self.usage[name] = usage_table(outs)
        calls = calls_table(outs)
        self._attempt(name, lambda: [write_csv(summary, out_dir / "summary.csv")])
        self._attempt(name, lambda: [write_csv(self.usage[name], out_dir / "usage.csv")])
        self._attempt(name, lambda: [write_csv(calls, out_dir / "calls.csv")])
        section = ""
        try:
            self._attempt(name, lambda: list(module.write_outputs(outs, summary, out_dir, ctx)))
            compared = evaluation_comparisons(
                name, module, outs, run.compare, run.bootstrap, run.seed
            )
            if compared is not None:
                table, notes = compared
                self.comparisons[name] = table
                self._attempt(name, lambda: [write_csv(table, out_dir / "comparisons.csv")])
                section = report_section(table, notes)
        finally:  # report.md once, with whatever the summary added before anything failed
            notice = self.partial_line() if self.interrupted else None  # partial numbers

            def write_report() -> list[Path]:
                path = ctx.report.write(out_dir / "report.md", notice, section)
                return [path] if path else []

            self._attempt(name, write_report)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """The background imports finished before the process exits: a run shorter than they
        are (a cached or empty-answer run on a loaded machine) otherwise exited while that thread
        was inside an extension module's import (scipy's, statsmodels'), and the process died
        at exit with SIGABRT ("terminate called without an active exception", exit code -6)
        after every file was written."""
        if self._importer is not None:
            self._importer.join(timeout=IMPORTS_JOIN_S)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        tr = terminal.PrintableLines(terminalreporter)  # no escape sequence from data printed
        if self.headlines or self.engine_stats or self.failed_summaries:  # not --collect-only
            if tr.config.option.verbose > 0:
                self._terminal_tables(tr)
            else:
                self._terminal_brief(tr)
        for line in terminal.batch_lines(self.engine_stats):
            tr.write_line(line)
        if self.interrupted and self.order:
            tr.write_line(
                f"vlmbench: {self.partial_line()}; the result files say so "
                "(report.md, manifest.json completion)",
                red=True,
                bold=True,
            )
        for name, reasons in self.unwritten.items():
            for why in reasons:
                tr.write_line(f"vlmbench: {name}: NOT WRITTEN: {why}", red=True, bold=True)
        for name, what in self.failed_summaries.items():
            folder = self.run.results_dir / name / self.run.run_id
            tr.write_line(
                f"vlmbench: {name}: its summary failed ({what}); the outcomes are kept in "
                f"{folder / 'raw_results.jsonl'}. This is a bug of the suite: please report it.",
                red=True,
                bold=True,
            )
        errors = [
            line
            for name in self.order
            for line in terminal.error_lines(name, self.outcomes_of(name))
        ]
        if errors:
            for line in errors:
                tr.write_line(line, red=True)
            # quoted for the shell; credentials (--api-base user:pass@) shown as ***
            tr.write_line(terminal.rerun_line(tr.config.invocation_params.args))
        for msg in self.gate_messages:
            tr.write_line(f"GATE FAILED: {msg}", red=True, bold=True)

    def outcomes_of(self, name: str) -> list[Outcome]:
        """The outcomes of one evaluation, in arrival order."""
        return [o for o in self.outcomes.values() if o.evaluation == name]

    def data_label(self, name: str) -> str | None:
        """The evaluation's word on its data when it is not the real dataset (e.g. the synthetic
        sample), from its summary module's `data_label(run)`."""
        try:
            module = evaluations.spec(name).summary_module()
            label = getattr(module, "data_label", None)
            return label(self.run) if label is not None else None
        except Exception:  # a label is a courtesy: never a reason to lose the summary
            return None

    def _usage_table(self, tr, name: str) -> None:
        """Tokens and cost per model, when the models report tokens (API models do)."""
        from support.tables import markdown_table

        usage = self.usage.get(name)
        if usage is not None and (usage["input_tokens"] > 0).any():
            tr.write_line("usage and cost per model (USD; cached answers included):")
            tr.write_line(markdown_table(usage.fillna("")))

    def _terminal_brief(self, tr) -> None:
        """Per evaluation: a heading, the brief table, one line of counts (see reports.terminal);
        then one line naming the result folders."""
        from support.tables import markdown_table

        for name in [n for n in self.order if n in self.headlines]:
            headline = self.headlines[name]
            module = evaluations.spec(name).summary_module()
            metrics = terminal.key_metrics(headline, getattr(module, "KEY_METRICS", None))
            table = terminal.brief_table(headline, metrics)
            what = [", ".join(metrics)]
            if any(f"{m}_lo" in headline.columns for m in metrics):
                shown = any("[" in str(v) for v in table.to_numpy().ravel())
                what.append(
                    interval_label(self.run)
                    if shown or not self.run.bootstrap
                    else "intervals: -v, summary.csv"
                )
            label = self.data_label(name)
            if label:
                what.append(label.split(";")[0].split("(")[0].strip())
            tr.write_sep("=", f"vlmbench: {name}: {'; '.join(what)}")
            tr.write_line(markdown_table(table))
            outs = self.outcomes_of(name)
            tr.write_line(terminal.counts_line(outs, self.comparisons.get(name)))
            self._usage_table(tr, name)
        if self.files:
            tr.write_line(terminal.folders_line(self.files, tr.config.invocation_params.dir))

    def _terminal_tables(self, tr) -> None:
        import pandas as pd

        from support.comparisons.pairing import power_table
        from support.tables import markdown_table, with_intervals

        for name in [n for n in self.order if n in self.headlines]:
            headline = self.headlines[name]
            metrics = terminal.interval_metrics(headline)
            label = self.data_label(name)
            heading = interval_label(self.run) if metrics else "no intervals"
            tr.write_sep("=", f"vlmbench: {name} ({heading}){f'; {label}' if label else ''}")
            tr.write_line(markdown_table(with_intervals(headline, metrics)))
            outs = self.outcomes_of(name)
            tr.write_line(terminal.counts_line(outs, self.comparisons.get(name)))
            self._usage_table(tr, name)
            files = self.files.get(name, [])
            for path in files[:MAX_LISTED_FILES]:
                tr.write_line(f"wrote {path}")
            if len(files) > MAX_LISTED_FILES:
                tr.write_line(f"... and {len(files) - MAX_LISTED_FILES} more files")
        rows = [
            # identity, endpoint: in manifest.json; batch_api: terminal.batch_lines
            {"process": p, **{k: v for k, v in s.items() if k not in MANIFEST_ONLY_STATS}}
            for p, stats in sorted(self.engine_stats.items())
            for s in stats
        ]
        if rows:
            tr.write_sep("-", "vlmbench: engine (per process and model)")
            tr.write_line(markdown_table(pd.DataFrame(rows)))
        if self.run.power:
            for name, table in self.comparisons.items():
                sizes = power_table(table, self.run.power_delta, self.run.target_halfwidth)
                tr.write_sep("-", f"vlmbench: {name} power and sample size (--power)")
                if sizes.empty:
                    tr.write_line("no paired comparison with a bootstrap interval to size")
                    continue
                tr.write_line(
                    f"clusters (and pairs) needed to detect a difference of "
                    f"{self.run.power_delta:g} at 80% power (two-sided alpha 0.05), and for a 95% "
                    f"interval of half-width {self.run.target_halfwidth:g}; normal approximation "
                    "from the paired bootstrap's standard error"
                )
                tr.write_line(markdown_table(sizes))


def _import_quietly(modules: list[str]) -> None:
    for name in modules:  # a failure is raised again, where it matters, at report time
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def register_reporter(config: pytest.Config, run: RunSettings, gates: list[Gate]) -> ReportPlugin:
    """Create and register the controller's reporter (called once, at configure)."""
    plugin = ReportPlugin(run, gates)
    config.stash[REPORT_PLUGIN_KEY] = plugin
    config.pluginmanager.register(plugin, "vlmbench-report")
    return plugin
