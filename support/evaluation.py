"""The contract every evaluation implements, and the flat registry of evaluations.

An evaluation is data + solver + scorer. On the worker side (where tests run) it lists its cases at
collection time and evaluates them; on the controller side (where reports are written, possibly in
another process under xdist) its class methods turn outcomes into a summary table and files.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from support.engine import ModelClient
from support.settings import RunSettings
from support.types import Case, Outcome

# name -> "module:Class", imported only when the evaluation is used
EVALUATIONS: dict[str, str] = {
    "pointing": "support.pointing.task:PointingEvaluation",
    "pgt": "support.pgt.task:PgtEvaluation",
    "nyu_distance": "support.nyu.task:NyuDistanceEvaluation",
}


def linspace_subset(items: list[int], n: int | None) -> list[int]:
    """`n` evenly spaced items (np.linspace over positions, as the sources): what `--samples N`
    and the `quick` subsets take from an evaluation's items; all when n is None."""
    if n is None or n >= len(items):
        return list(items)
    positions = np.linspace(0, len(items) - 1, n, dtype=int)
    return [items[i] for i in dict.fromkeys(positions.tolist())]


def evaluation_class(name: str) -> type[Evaluation]:
    """The Evaluation class registered under `name`."""
    try:
        target = EVALUATIONS[name]
    except KeyError:
        raise ValueError(f"unknown evaluation {name!r}; known: {sorted(EVALUATIONS)}") from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


class Evaluation:
    """Base class. Subclasses fill in the worker-side and controller-side halves."""

    name: ClassVar[str] = ""
    quick_samples: ClassVar[int] = 5  # samples in the `quick` subset

    # ---- worker side -------------------------------------------------------------------------
    @classmethod
    def load(cls, settings: RunSettings) -> Evaluation:
        """Open (or build) the data and plans; called once per process at collection time."""
        raise NotImplementedError

    def cases(self) -> list[Case]:
        """Every case of this run (after --samples), in a stable order."""
        raise NotImplementedError

    def is_quick(self, case: Case) -> bool:
        """Whether the case belongs to the fixed `quick` subset."""
        raise NotImplementedError

    def locality(self, case: Case) -> str:
        """Cases with the same locality share expensive inputs (e.g. one decoded image)."""
        return case.id

    async def evaluate(self, case: Case, client: ModelClient) -> Outcome:
        """Build the request(s), await the model, parse and score: one Outcome."""
        raise NotImplementedError

    def error_outcome(self, case: Case, model: str, message: str) -> Outcome:
        """The outcome recorded when the pipeline broke for this case."""
        raise NotImplementedError

    def skip_reasons(self, selected: list[tuple[Case, str]]) -> list[str | None]:
        """For the (case, model) pairs selected to run (after -k/-m), why each must not run
        (e.g. its results exist already and the source keeps them), or None."""
        return [None] * len(selected)

    def render(self, case: Case, outcome: Outcome) -> bytes | None:
        """An image (JPEG/PNG bytes) that shows the case and the prediction, for the HTML report."""
        return None

    # ---- controller side ---------------------------------------------------------------------
    # A module (imported only on the controller, when reports are written) with three functions:
    #   summarize(outcomes, n_resamples, seed) -> DataFrame  the summary (`m`, `m_lo`, `m_hi`)
    #   headline(summary) -> DataFrame  the rows printed at the end and shown in the HTML summary
    #   write_outputs(outcomes, summary, out_dir, settings) -> list[Path]  report.md, plots...
    summary_module: ClassVar[str] = ""

    @classmethod
    def _summary(cls):
        return importlib.import_module(cls.summary_module)

    @classmethod
    def summarize(cls, outcomes: list[Outcome], settings: RunSettings) -> pd.DataFrame:
        """The summary table: one row per reporting group, with interval columns."""
        return cls._summary().summarize(
            outcomes, n_resamples=settings.bootstrap, seed=settings.seed
        )

    @classmethod
    def write_outputs(
        cls, outcomes: list[Outcome], summary: pd.DataFrame, out_dir: Path, settings: RunSettings
    ) -> list[Path]:
        """Evaluation-specific files beside summary.csv (report.md, plots), or elsewhere under
        settings.results_dir where the source's layout says so. Returns their paths."""
        return cls._summary().write_outputs(outcomes, summary, out_dir, settings)

    @classmethod
    def headline(cls, summary: pd.DataFrame) -> pd.DataFrame:
        """The rows and columns printed at the end of the run and shown in the HTML summary."""
        return cls._summary().headline(summary)
