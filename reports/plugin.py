"""The reporting plugin: collects outcomes on the controller and writes session metrics.

Registered only on the controller (never on xdist workers). Outcomes arrive through
`report.user_properties`, the channel that crosses xdist; at session finish each evaluation's
class turns its outcomes into a summary table and files under results/<evaluation>/<run-id>/.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path

import pandas as pd
import pytest

from fixtures.options import GATES_KEY, settings
from fixtures.outcomes import OUTCOME_PROPERTY
from support.evaluation import evaluation_class
from support.outputs import markdown_table, usage_table, with_intervals, write_csv, write_jsonl
from support.types import Outcome

REPORT_PLUGIN_KEY = pytest.StashKey["ReportPlugin"]()
MAX_LISTED_FILES = 12  # "wrote PATH" lines per evaluation in the terminal summary


class ReportPlugin:
    """Outcomes -> SessionMetrics (summary tables) -> files, terminal summary, exit gates."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.outcomes: dict[str, Outcome] = {}  # by nodeid: each phase's report repeats them
        self.summaries: dict[str, pd.DataFrame] = {}
        self.files: dict[str, list[Path]] = {}
        self.gate_messages: list[str] = []
        self.usage: dict[str, pd.DataFrame] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == OUTCOME_PROPERTY and report.nodeid not in self.outcomes:
                self.outcomes[report.nodeid] = Outcome.from_json(json.loads(value))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        s = settings(self.config)
        by_eval: dict[str, list[Outcome]] = defaultdict(list)
        for o in self.outcomes.values():
            by_eval[o.evaluation].append(o)
        for name, outs in sorted(by_eval.items()):
            outs.sort(key=lambda o: (o.model, o.case_id))
            out_dir = s.results_dir / name / s.run_id
            # the raw rows first: whatever fails after them, no computed outcome is lost
            self.files[name] = [write_jsonl(outs, out_dir / "raw_results.jsonl")]
            cls = evaluation_class(name)
            summary = cls.summarize(outs, s)
            self.usage[name] = usage_table(outs)
            self.files[name] += [
                write_csv(summary, out_dir / "summary.csv"),
                write_csv(self.usage[name], out_dir / "usage.csv"),
                *cls.write_outputs(outs, summary, out_dir, s),
            ]
            self.summaries[name] = summary
        self.gate_messages = self._check_gates()
        if self.gate_messages and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _check_gates(self) -> list[str]:
        failed = []
        for name, metric, threshold, bound in self.config.stash.get(GATES_KEY, []):
            option = f"--{bound}-metric {name}.{metric}"
            if name not in self.summaries:
                failed.append(f"{option}: no outcomes of {name} in this run")
                continue
            rows = evaluation_class(name).headline(self.summaries[name])
            if metric not in rows:
                failed.append(
                    f"{option}: unknown metric; "
                    f"known: {', '.join(c for c in rows.columns if not c.endswith(('_lo', '_hi')))}"
                )
                continue
            for _, row in rows.iterrows():
                value = row[metric]
                undefined = not isinstance(value, float | int) or math.isnan(value)
                if undefined or (value < threshold if bound == "min" else value > threshold):
                    where = ", ".join(f"{k}={row[k]}" for k in rows.columns[:3])
                    sign = "<" if bound == "min" else ">"
                    failed.append(f"{name}.{metric} = {value} {sign} {threshold} ({where})")
        return failed

    def pytest_terminal_summary(self, terminalreporter) -> None:
        tr = terminalreporter
        for name, summary in self.summaries.items():
            cls = evaluation_class(name)
            tr.write_sep("=", f"vlmbench: {name} (95% bootstrap intervals)")
            headline = cls.headline(summary)
            metrics = [c for c in headline.columns if f"{c}_lo" in headline.columns]
            tr.write_line(markdown_table(with_intervals(headline, metrics)))
            outs = [o for o in self.outcomes.values() if o.evaluation == name]
            sent = sum(int(o.extra.get("backend_calls", 0)) for o in outs)
            cached = sum(int(o.extra.get("cache_hits", 0)) for o in outs)
            tr.write_line(
                f"cases: {len(outs)}; model calls: {sent} sent, {cached} served from cache; "
                f"statuses: {dict(sorted(Counter(o.status for o in outs).items()))}"
            )
            usage = self.usage.get(name)
            if usage is not None and (usage["input_tokens"] > 0).any():
                tr.write_line("usage and cost per model (USD; cached answers included):")
                tr.write_line(markdown_table(usage.fillna("")))
            files = self.files.get(name, [])
            for path in files[:MAX_LISTED_FILES]:
                tr.write_line(f"wrote {path}")
            if len(files) > MAX_LISTED_FILES:
                tr.write_line(f"... and {len(files) - MAX_LISTED_FILES} more files")
        for msg in self.gate_messages:
            tr.write_line(f"GATE FAILED: {msg}", red=True, bold=True)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # xdist worker: the controller reports
        return
    plugin = ReportPlugin(config)
    config.stash[REPORT_PLUGIN_KEY] = plugin
    config.pluginmanager.register(plugin, "vlmbench-report")
