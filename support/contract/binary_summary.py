"""The stock summary, for evaluations whose outcomes are right or wrong and need nothing else.

`BINARY`: a `Summary` (support.contract.summary) of the share of correct answers per model, with a
cluster-bootstrap interval (clusters: `Outcome.cluster`); errors are counted apart (`n_error`) and
unparsable answers count as not correct. An evaluation's spec names it as its summary
(`summary="support.contract.binary_summary:BINARY"`, the default) and writes no summary module.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from support.reporting.kit import interval_columns
from support.types import Outcome

if TYPE_CHECKING:
    import pandas as pd

    from support.contract.summary import SummaryContext


class BinarySummary:
    """The stock summary: accuracy (correct / scored) per model, interval by cluster bootstrap."""

    METRICS = ("accuracy",)
    KEY_METRICS = ("accuracy",)  # the terminal's brief table (reports/terminal.py)

    def summarize(self, outcomes: Sequence[Outcome], ctx: SummaryContext) -> pd.DataFrame:
        """One row per model: n (scored), n_error, accuracy and its interval."""
        import pandas as pd

        from support.statistics.metrics import safe_ratio, summarize_groups

        groups = summarize_groups(
            outcomes,
            lambda o: [(o.model,)],
            lambda o: [int(o.status == "correct"), 1],
            lambda s: {"accuracy": safe_ratio(s[..., 0], s[..., 1])},
            ctx.n_resamples,
            ctx.seed,
        )
        rows = [g.row(["model"], self.METRICS) for g in groups]
        columns = ["model", "n", "n_error", *interval_columns(self.METRICS)]
        return pd.DataFrame(rows, columns=columns)

    def headline(self, summary: pd.DataFrame) -> pd.DataFrame:
        return summary

    def write_outputs(
        self,
        outcomes: Sequence[Outcome],
        summary: pd.DataFrame,
        out_dir: Path,
        ctx: SummaryContext,
    ) -> list[Path]:
        """report.md's part: the table with its intervals (no files of its own)."""
        from support.reporting.tables import in_model_order, markdown_table, with_intervals

        table = markdown_table(
            with_intervals(in_model_order(summary, ctx.run.models.names), self.METRICS)
        )
        title = f"{ctx.evaluation or 'evaluation'}: accuracy per model"
        ctx.report.add(f"# {title}\n\n{table}\n")
        return []


BINARY = BinarySummary()
