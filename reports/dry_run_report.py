"""The controller's reporter under `--dry-run`, in place of ReportPlugin: the placeholder answers
are no results, so no result file but dry_run.csv is written (one per evaluation, in its results
folder), and the terminal prints the estimate table."""

from __future__ import annotations

import pytest

from reports import terminal
from reports.plugin import OUTCOMES_ATTR
from support.client.dry_run import estimate_table
from support.settings import RunSettings
from support.storage.files import write_csv
from support.types import Outcome


class DryRunReport:
    """Collects the dry run's outcomes; writes dry_run.csv and prints the estimate."""

    def __init__(self, run: RunSettings) -> None:
        self.run = run
        self.outcomes: dict[str, dict[str, Outcome]] = {}  # evaluation -> case id -> outcome
        self.written: dict[str, str] = {}  # evaluation -> dry_run.csv path

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for d in getattr(report, OUTCOMES_ATTR, None) or ():
            o = Outcome.from_json(d)
            self.outcomes.setdefault(o.evaluation, {}).setdefault(f"{o.case_id}@{o.model}", o)

    def tables(self) -> dict[str, object]:
        return {name: estimate_table(outs.values()) for name, outs in self.outcomes.items()}

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        for name, table in self.tables().items():
            path = self.run.output.results_dir / name / self.run.output.run_id / "dry_run.csv"
            self.written[name] = str(write_csv(table, path))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        for name, table in self.tables().items():
            for line in terminal.dry_run_lines(name, table, self.written.get(name)):
                terminalreporter.write_line(line)


def register_dry_run_report(config: pytest.Config, run: RunSettings) -> DryRunReport:
    """Create and register the controller's dry-run reporter (called once, at configure)."""
    plugin = DryRunReport(run)
    config.pluginmanager.register(plugin, "vlmbench-dry-run")
    return plugin
