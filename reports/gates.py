"""CI gates on session metrics: `--min-metric EVAL.METRIC[@MODEL]=VALUE` and `--max-metric`."""

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


def failed_gates(gates: Iterable[Gate], headlines: Mapping[str, pd.DataFrame]) -> list[str]:
    """One message per failed gate row (an undefined value fails; so does a gate on an
    evaluation, metric or model that the run did not produce)."""
    failed = []
    for gate in gates:
        rows = headlines.get(gate.evaluation)
        if rows is None:
            failed.append(f"{gate.option}: no outcomes of {gate.evaluation} in this run")
            continue
        if gate.metric not in rows:
            known = ", ".join(c for c in rows.columns if not c.endswith(("_lo", "_hi")))
            failed.append(f"{gate.option}: unknown metric; known: {known}")
            continue
        if gate.model is not None:
            rows = rows[rows["model"] == gate.model]
            if rows.empty:
                failed.append(f"{gate.option}: no outcomes of model {gate.model} in this run")
                continue
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
