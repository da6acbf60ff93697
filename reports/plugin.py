"""The reporting plugin: collects outcomes on the controller and, at session finish, builds the
run's RunResult once.

Registered only on the controller (never on xdist workers), by fixtures.run_settings once the run's
settings are known. Outcomes arrive as plain JSON on a report attribute (`vlmbench_outcomes`, set
by fixtures.outcomes on the report of the phase that produced them; xdist serialises report
attributes, as it does pytest-html's extras). At session finish each evaluation's files are
written under results/<evaluation>/<run-id>/ (reports.evaluation_files, which returns its
EvaluationResult), the gates are checked against the headlines, and the RunResult is kept in
`result`: the terminal summary (reports.terminal_summary), the HTML summary (reports.html) and the
exit status read it. Workers write no files. The modules that write the files (pandas, scipy,
statsmodels, matplotlib, the summaries; `REPORT_MODULES`) are imported at session finish, where
they are used: start-up and `--collect-only` never pay for them, and no request waits on the
import while the process's own cases run. An xdist controller, which runs no case, imports them
when the first outcome arrives, while its workers' requests are in flight. Nothing is imported in
another thread. Once imported, their objects are frozen (support.heap).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pytest

from reports.gates import Gate, GateCheck, check_gates
from reports.result import Completion, EvaluationResult, RunResult, SessionFacts, headlines
from support import evaluations
from support.heap import freeze_permanent
from support.settings import RunSettings
from support.types import Outcome

if TYPE_CHECKING:
    from reports.resume import Earlier

REPORT_PLUGIN_KEY = pytest.StashKey["ReportPlugin"]()
LAST_RUN_KEY = "vlmbench/last_run_id"  # pytest's cache: the run id of the last run with results
OUTCOMES_ATTR = "vlmbench_outcomes"  # TestReport attribute: list of Outcome JSON dicts
# what writing the files imports, beyond the summaries (imported when the first outcome arrives)
REPORT_MODULES = (
    "reports.evaluation_files",
    "statsmodels.stats.contingency_tables",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
)


class ReportPlugin:
    """Outcomes -> RunResult (files written, gates checked) -> terminal summary, exit status."""

    def __init__(self, run: RunSettings, gates: list[Gate]) -> None:
        self.run = run
        self.gates = gates
        self.rerun_of_failed = False  # --lf with failures of an earlier run to rerun
        self.previous_run: str | None = None  # the run id of pytest's cache (LAST_RUN_KEY)
        # --resume: evaluation -> the earlier run its outcomes are merged with (reports.resume)
        self.earlier: dict[str, Earlier] = {}
        self.started = time.time()  # epoch s, at configure: the manifest's session start
        self.result: RunResult | None = None  # built once, at session finish
        self.gate_checks: list[GateCheck] = []  # each gate checked, at session finish
        # evaluation -> case_id -> outcome, evaluations in the order their first outcome arrived
        self._outcomes: dict[str, dict[str, Outcome]] = {}
        self._engine_stats: dict[str, list[Mapping[str, Any]]] = {}  # process -> per-model
        self._selected = 0  # cases selected (items collected, or one xdist worker's count)
        self._finished: set[str] = set()  # node ids of the cases that ran to their teardown
        self._imported = False  # REPORT_MODULES and the summaries
        self._config: pytest.Config | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """What pytest's cache says of the runs before this one (read before this session
        changes it): whether --lf reruns failures, and the last run with results."""
        cache = getattr(session.config, "cache", None)  # None under -p no:cacheprovider
        if cache is not None:
            self.rerun_of_failed = reruns_failures(session.config)
            self.previous_run = cache.get(LAST_RUN_KEY, None)

    @property
    def runs_no_cases(self) -> bool:
        """Whether this process only gathers outcomes (an xdist controller: its workers run the
        cases), so importing the report modules early keeps no request waiting."""
        return self._config is not None and self._config.pluginmanager.has_plugin("dsession")

    def pytest_configure(self, config: pytest.Config) -> None:
        self._config = config

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not session.config.option.collectonly and session.items:
            self._selected = len(session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Under xdist the controller collects nothing: every worker collects the same cases."""
        self._selected = max(self._selected, len(ids))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self._finished.add(report.nodeid)
        for d in getattr(report, OUTCOMES_ATTR, None) or ():
            o = Outcome.from_json(d)
            self._outcomes.setdefault(o.evaluation, {}).setdefault(o.case_id, o)
        if self._outcomes and not self._imported and self.runs_no_cases:
            self._imported = True  # an xdist controller: its workers send the requests
            import_report_modules(self._outcomes)

    def add_engine_stats(self, process: str, stats: list[Mapping[str, Any]]) -> None:
        """One process's per-model engine statistics (see fixtures.distribution); before
        session finish."""
        if stats:
            self._engine_stats[process] = stats

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        completion = Completion(
            interrupted=session.exitstatus == pytest.ExitCode.INTERRUPTED,
            cases_finished=len(self._finished),
            cases_selected=self._selected,
            rerun_of_failed=self.rerun_of_failed,
        )
        inv = session.config.invocation_params
        engine_stats = MappingProxyType({p: tuple(s) for p, s in self._engine_stats.items()})
        facts = SessionFacts(tuple(inv.args), Path(inv.dir), self.started, engine_stats)
        results: tuple[EvaluationResult, ...] = ()
        if self._outcomes:  # pandas & co, imported here: a run without outcomes never needs them
            if not self._imported:
                self._imported = True
                import_report_modules(self._outcomes)
            freeze_permanent()  # the report modules' objects: permanent too (support.heap)
            from reports.evaluation_files import write_evaluation

            results = tuple(
                write_evaluation(name, *self._merged(name, completion), self.run, facts)
                for name in self._outcomes  # in arrival order
            )
        if results and getattr(session.config, "cache", None) is not None:  # for a later --lf
            session.config.cache.set(LAST_RUN_KEY, self.run.output.run_id)
        # each gate on its own: one JUnit test a gate (fixtures.junit), counted on the terminal
        self.gate_checks = check_gates(self.gates, headlines(results))
        self.result = RunResult(
            results,
            completion,
            engine_stats,
            tuple(line for check in self.gate_checks for line in check.failures),
            self._rerun(results),
        )
        if self.result.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _rerun(self, results: tuple[EvaluationResult, ...]) -> tuple[str, bool] | None:
        """The run to complete and whether only what failed is to run again (RunResult.rerun)."""
        if self.rerun_of_failed and not self.earlier:  # --lf into a new folder
            return (self.previous_run, True) if self.previous_run else None
        if any(r.completion.interrupted or r.completion.stopped_early for r in results):
            return self.run.output.run_id, False  # cases never run: not among pytest's last failed
        if any(not r.completion.complete for r in results):
            return self.run.output.run_id, False
        if any(o.status == "error" for r in results for o in r.outcomes):
            return self.run.output.run_id, True
        return None

    def _merged(self, name: str, completion: Completion) -> tuple[tuple[Outcome, ...], Completion]:
        """An evaluation's outcomes and completion: this session's, or under --resume merged
        with the earlier run's (this session's winning), the completion saying so."""
        new = tuple(self._outcomes[name].values())
        earlier = self.earlier.get(name)
        if earlier is None:
            return new, completion
        from reports.resume import merged

        before = earlier.outcomes
        keys = {(o.model, o.case_id) for o in new}
        kept = [o for o in before if (o.model, o.case_id) not in keys]
        return tuple(merged(before, new)), dataclasses.replace(
            completion,
            resumed=self.run.output.run_id,
            kept=len(kept),
            # this session ran every case the earlier one had: its own completion is what counts
            earlier_complete=earlier.complete or not kept,
            earlier_recorded=earlier.recorded if kept else None,
        )

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.result is None:  # the session never finished
            return
        from reports.terminal_summary import write_summary

        write_summary(terminalreporter, self.result, self.run)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """The rerun command, after pytest's counts line (its terminal summary ends with it)."""
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if self.result is None or reporter is None or config.get_verbosity() < -1:
            return
        from reports.terminal_summary import write_rerun

        write_rerun(reporter, self.result)


def import_report_modules(names: Mapping[str, Any]) -> None:
    """Import what writing the files needs, and the evaluations' summaries (loaded, so checked
    against the contract); a failure here is raised again, where it matters, at session finish."""
    for module in REPORT_MODULES:
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    for name in names:
        with contextlib.suppress(Exception):
            evaluations.spec(name).summary_module()


def register_reporter(config: pytest.Config, run: RunSettings, gates: list[Gate]) -> ReportPlugin:
    """Create and register the controller's reporter (called once, at configure)."""
    plugin = ReportPlugin(run, gates)
    config.stash[REPORT_PLUGIN_KEY] = plugin
    config.pluginmanager.register(plugin, "vlmbench-report")
    return plugin


def reruns_failures(config: pytest.Config) -> bool:
    """--lf with failed cases of an earlier run to rerun: the session runs those alone (read at
    session start, before this session changes pytest's cache; with none, --lf runs all)."""
    if not config.getoption("lf", False) or getattr(config, "cache", None) is None:
        return False
    return any(str(k).startswith("evals/") for k in config.cache.get("cache/lastfailed", {}))


def report_plugin(config: pytest.Config) -> ReportPlugin | None:
    """The controller's reporter (None on workers, under --dry-run, or before configure)."""
    return config.stash.get(REPORT_PLUGIN_KEY, None)
