"""CI gates on session metrics: `--min-metric EVAL.METRIC[@MODEL]=VALUE` and `--max-metric`.

Each gate is checked on its own (`check_gates`: a GateCheck, passed or with its failure lines), so
that CI can show it as a test of its own (fixtures.junit: one `<testcase>` a gate in the
`vlmbench.gates` testsuite, and on the terminal's last line: `12 passed, 1 gate failed`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the headlines are DataFrames; the gates never build one
    import pandas as pd


@dataclass(frozen=True)
class Gate:
    """Every headline row of `evaluation` (of `model`, when named) must reach `threshold` on
    `metric` (bound "min") or stay at or below it (bound "max")."""

    evaluation: str
    metric: str
    threshold: float
    bound: str  # "min" | "max"
    model: str | None = None

    @property
    def option(self) -> str:
        at = f"@{self.model}" if self.model else ""
        return f"--{self.bound}-metric {self.evaluation}.{self.metric}{at}"

    @property
    def text(self) -> str:
        """The gate as an option on the command line, e.g. `--min-metric pgt.f1=0.9`: its test
        name in JUnit (the threshold as Python reads it back: `1` for 1.0, `0.9`)."""
        return f"{self.option}={repr(self.threshold).removesuffix('.0')}"


@dataclass(frozen=True)
class GateCheck:
    """One check of the run as a whole, done: a metric gate (named by `Gate.text`), or that a
    run under --skip-unavailable evaluated something (fixtures.skips). No failure lines: passed."""

    name: str
    failures: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.failures


def check_gates(gates: Iterable[Gate], headlines: Mapping[str, pd.DataFrame]) -> list[GateCheck]:
    """Each gate checked against the headlines, in the order given (see `failed_gates`)."""
    return [GateCheck(gate.text, tuple(_failures(gate, headlines))) for gate in gates]


def failed_gates(gates: Iterable[Gate], headlines: Mapping[str, pd.DataFrame]) -> list[str]:
    """One message per failed gate row (an undefined value fails; so does a gate on an
    evaluation, metric or model that the run did not produce)."""
    return [line for check in check_gates(gates, headlines) for line in check.failures]


def _failures(gate: Gate, headlines: Mapping[str, pd.DataFrame]) -> list[str]:
    """One gate's failure lines: none when it passed."""
    rows = headlines.get(gate.evaluation)
    if rows is None:
        return [f"{gate.option}: no outcomes of {gate.evaluation} in this run"]
    if gate.metric not in rows:
        known = ", ".join(c for c in rows.columns if not c.endswith(("_lo", "_hi")))
        return [f"{gate.option}: unknown metric; known: {known}"]
    if gate.model is not None:
        rows = rows[rows["model"] == gate.model]
        if rows.empty:
            return [f"{gate.option}: no outcomes of model {gate.model} in this run"]
    failed = []
    for _, row in rows.iterrows():
        value = row[gate.metric]
        undefined = not isinstance(value, float | int) or math.isnan(value)
        low = gate.bound == "min"
        if undefined or (value < gate.threshold if low else value > gate.threshold):
            where = ", ".join(f"{k}={row[k]}" for k in rows.columns[:3])
            sign = "<" if low else ">"
            failed.append(
                f"{gate.evaluation}.{gate.metric} = {value} {sign} {gate.threshold} ({where})"
            )
    return failed
