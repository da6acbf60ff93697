"""The controller's reporter under `--dry-run`, in place of ReportPlugin: the placeholder answers
are no results, so no result file but dry_run.csv is written (one per evaluation, in its results
folder), and the terminal prints the estimate table. Under `--pilot N` the tables gain the
pilot's expectations (support/client/dry_run.py `with_expectations`), read from the run's pilot
file, which is then removed."""

from __future__ import annotations

import pandas as pd
import pytest

from reports import terminal
from reports.plugin import OUTCOMES_ATTR
from support.client.dry_run import (
    GRAND_TOTAL,
    PilotCall,
    estimate_table,
    pilot_file,
    pilot_lines,
    read_pilots,
    total_row,
    with_expectations,
    with_totals,
)
from support.settings import RunSettings
from support.storage.files import write_csv
from support.types import Outcome


class DryRunReport:
    """Collects the dry run's outcomes; writes dry_run.csv and prints the estimate."""

    def __init__(self, run: RunSettings) -> None:
        self.run = run
        self.outcomes: dict[str, dict[str, Outcome]] = {}  # evaluation -> case id -> outcome
        self.written: dict[str, str] = {}  # evaluation -> dry_run.csv path
        self.pilots: dict[str, list[PilotCall]] | None = None  # read once, at session finish

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for d in getattr(report, OUTCOMES_ATTR, None) or ():
            o = Outcome.from_json(d)
            self.outcomes.setdefault(o.evaluation, {}).setdefault(f"{o.case_id}@{o.model}", o)

    def read_pilots(self) -> dict[str, list[PilotCall]]:
        """The pilot's calls by model (--pilot; {} without), the file removed once read."""
        if self.pilots is None:
            self.pilots = {}
            if self.run.pilot:
                path = pilot_file(self.run.output.results_dir, self.run.output.run_id)
                self.pilots = read_pilots(path)
                path.unlink(missing_ok=True)
        return self.pilots

    def tables(self) -> dict[str, pd.DataFrame]:
        """Each evaluation's estimate (one row a model), with the pilot's expectations under
        --pilot."""
        tables = {name: estimate_table(outs.values()) for name, outs in self.outcomes.items()}
        if not self.run.pilot:
            return tables
        pilots = self.read_pilots()
        return {name: with_expectations(table, pilots) for name, table in tables.items()}

    def grand_total(self, tables: dict[str, pd.DataFrame]) -> dict[str, object] | None:
        """The session's total over its evaluations and models; None for one evaluation (its
        own total says it)."""
        return total_row(tables.values(), GRAND_TOTAL) if len(tables) > 1 else None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        tables = self.tables()
        grand = self.grand_total(tables)
        for name, table in tables.items():
            path = self.run.output.results_dir / name / self.run.output.run_id / "dry_run.csv"
            self.written[name] = str(write_csv(with_totals(table, grand), path))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        tables = self.tables()
        for name, table in tables.items():
            for line in terminal.dry_run_lines(name, with_totals(table), self.written.get(name)):
                terminalreporter.write_line(line)
        for line in pilot_lines(self.read_pilots()):
            terminalreporter.write_line(line)
        if tables:
            for line in terminal.dry_run_total_lines(tables):
                terminalreporter.write_line(line, bold=True)


def register_dry_run_report(config: pytest.Config, run: RunSettings) -> DryRunReport:
    """Create and register the controller's dry-run reporter (called once, at configure)."""
    if run.pilot:  # a file a stopped dry run of the same run id left holds none of this run's
        pilot_file(run.output.results_dir, run.output.run_id).unlink(missing_ok=True)
    plugin = DryRunReport(run)
    config.pluginmanager.register(plugin, "vlmbench-dry-run")
    return plugin
