"""The controller side's contract: what a summary is given (`SummaryContext`) and what it must
provide (`Summary`), checked when the core loads it (`checked_summary`).

A summary is a module (or an object, e.g. support.contract.binary_summary:BINARY) with `summarize`,
`headline` and `write_outputs`, and optionally `KEY_METRICS`, `COMPARISONS`, `comparisons`,
`score_outcomes` (scores that need a model loaded once a run: added on the controller before
raw_results.jsonl is written) and `SCORES` (score name -> kind, SCORE_KINDS of
support.storage.run_folder: how a run folder's rows are checked when read back). The core
never reads a summary by `getattr`: `checked_summary` turns it into a `LoadedSummary`, whose
optional members hold their defaults where the summary has none, and refuses a summary that
breaks the contract with a `SummaryContractError` naming the module and the member.

What a summary needs from the run, and from its evaluation's worker side, comes in the context:
its settings, the label of its data when that is not the real dataset, and a way to reopen the
data (`ctx.open_data()`); a summary never imports its evaluation's task module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from support.reporting.markdown import Report
from support.settings import RunSettings, StatisticsSettings
from support.storage.run_folder import SCORE_KINDS
from support.types import Outcome

if TYPE_CHECKING:
    import pandas as pd

    from support.statistics.pairing import Comparisons

REQUIRED = ("summarize", "headline", "write_outputs")  # functions every summary has


class SummaryContractError(TypeError):
    """A summary that breaks the contract: the message names its module and the member."""


def _no_data() -> Any:
    raise LookupError("this evaluation's spec declares no open_data: there is no data to reopen")


@dataclass(frozen=True)
class SummaryContext:
    """What a summary sees of the run: its settings and the evaluation's own (what its spec's
    `configure` built; None where the evaluation has none), the label of its data when that is
    not the real dataset (`data_label`, from the spec; report.md says it first), a way to reopen
    the data (`open_data()`, from the spec), and the run's report.md, to which `write_outputs`
    adds its markdown (the core writes the file)."""

    run: RunSettings = field(default_factory=RunSettings)
    settings: Any = None
    evaluation: str = ""  # its name
    report: Report = field(default_factory=Report, compare=False)
    data_label: str | None = None
    opener: Callable[[], Any] = field(default=_no_data, compare=False, repr=False)

    @property
    def n_resamples(self) -> int:
        """Bootstrap resamples of each interval (0: no intervals)."""
        return self.run.statistics.bootstrap

    @property
    def seed(self) -> int:
        return self.run.seed

    @property
    def compat(self) -> str:
        """The run's `--compat` profile ("writeup" or "source")."""
        return self.run.compat

    def open_data(self) -> Any:
        """The evaluation's data, opened again on the controller (its spec's `open_data`)."""
        return self.opener()

    @classmethod
    def of(
        cls,
        n_resamples: int = StatisticsSettings.bootstrap,
        seed: int = RunSettings.seed,
        settings: Any = None,
        data_label: str | None = None,
        **run: Any,
    ) -> SummaryContext:
        """A context for a summary called outside a run (tests, scripts): the bootstrap's
        resamples and seed, the evaluation's settings, its data label and any other RunSettings
        field."""
        return cls(
            RunSettings(seed=seed, statistics=StatisticsSettings(bootstrap=n_resamples), **run),
            settings,
            data_label=data_label,
        )


class Summary(Protocol):
    """The controller side of an evaluation (its spec's `summary`). Each function must hold for
    any mix of outcomes, all errors and zero cases included. The optional members default to
    None: `KEY_METRICS`, the metrics of the terminal's brief table; for comparisons.csv a
    `COMPARISONS` spec or a `comparisons(outcomes, requested, n_resamples, seed)` function
    (support.statistics.pairing); `score_outcomes(outcomes, ctx)`, the outcomes with scores
    added that need a model loaded on the controller (surgvqa's BERTScore and NLI):
    the core calls it before writing raw_results.jsonl, so every file holds them."""

    KEY_METRICS: ClassVar[Sequence[str] | None] = None
    COMPARISONS: ClassVar[Comparisons | None] = None
    comparisons: ClassVar[Callable[..., tuple[pd.DataFrame, list[str]]] | None] = None
    score_outcomes: ClassVar[Callable[..., list[Outcome]] | None] = None

    def summarize(self, outcomes: Sequence[Outcome], ctx: SummaryContext) -> pd.DataFrame:
        """The summary table (`m`, `m_lo`, `m_hi` columns): summary.csv."""
        ...

    def headline(self, summary: pd.DataFrame) -> pd.DataFrame:
        """The rows printed at the end of the run and in the HTML report."""
        ...

    def write_outputs(
        self,
        outcomes: Sequence[Outcome],
        summary: pd.DataFrame,
        out_dir: Path,
        ctx: SummaryContext,
    ) -> list[Path]:
        """The evaluation's own files (plots, the source's files): their paths; its report.md
        markdown goes to `ctx.report.add`."""
        ...


@dataclass(frozen=True)
class LoadedSummary:
    """A summary that passed `checked_summary`: its functions, and its optional members with
    their defaults filled in. `where` is the spec's "module[:ATTR]"."""

    where: str
    summarize: Callable[[Sequence[Outcome], SummaryContext], pd.DataFrame]
    headline: Callable[[pd.DataFrame], pd.DataFrame]
    write_outputs: Callable[..., list[Path]]
    KEY_METRICS: tuple[str, ...] | None = None
    COMPARISONS: Comparisons | None = None
    comparisons: Callable[..., tuple[pd.DataFrame, list[str]]] | None = None
    score_outcomes: Callable[[Sequence[Outcome], SummaryContext], list[Outcome]] | None = None
    SCORES: dict[str, str] = field(default_factory=dict)  # score name -> kind (run_folder)

    def scored(self, outcomes: Sequence[Outcome], ctx: SummaryContext) -> list[Outcome]:
        """The outcomes with the summary's controller-side scores added (`score_outcomes`; the
        outcomes as they are when it has none)."""
        if self.score_outcomes is None:
            return list(outcomes)
        return list(self.score_outcomes(outcomes, ctx))

    def compared(
        self,
        name: str,
        outcomes: Sequence[Outcome],
        requested: Sequence[tuple[str, str]],
        n_resamples: int,
        seed: int,
    ) -> tuple[pd.DataFrame, list[str]] | None:
        """comparisons.csv's table and notes: the summary's own `comparisons` if it has one,
        else support.statistics.pairing.comparison_table with its `COMPARISONS`; None when it
        declares neither."""
        if self.comparisons is not None:
            return self.comparisons(outcomes, requested, n_resamples, seed)
        if self.COMPARISONS is None:
            return None
        from support.statistics.pairing import comparison_table

        return comparison_table(name, outcomes, self.COMPARISONS, requested, n_resamples, seed)


def checked_summary(found: object, where: str) -> LoadedSummary:
    """`found` (the module or object at `where`) as a LoadedSummary; SummaryContractError when a
    required function is missing or not callable, or an optional member has the wrong type."""
    if isinstance(found, LoadedSummary):
        return found

    def broken(member: str, why: str) -> SummaryContractError:
        return SummaryContractError(f"summary {where}: `{member}` {why}")

    for name in REQUIRED:
        if not callable(getattr(found, name, None)):
            missing = not hasattr(found, name)
            raise broken(name, "is missing" if missing else "is not a function")
    key = getattr(found, "KEY_METRICS", None)
    if key is not None and (
        isinstance(key, str)
        or not isinstance(key, Sequence)
        or not all(isinstance(m, str) for m in key)
    ):
        raise broken("KEY_METRICS", f"must be a sequence of metric names, not {key!r}")
    spec = getattr(found, "COMPARISONS", None)
    if spec is not None:
        from support.statistics.pairing import Comparisons

        if not isinstance(spec, Comparisons):
            raise broken("COMPARISONS", f"must be a Comparisons, not {type(spec).__name__}")
    own = getattr(found, "comparisons", None)
    if own is not None and not callable(own):
        raise broken("comparisons", "is not a function")
    scorer = getattr(found, "score_outcomes", None)
    if scorer is not None and not callable(scorer):
        raise broken("score_outcomes", "is not a function")
    scores = getattr(found, "SCORES", None) or {}
    if not isinstance(scores, dict) or any(
        not isinstance(k, str) or v not in SCORE_KINDS for k, v in scores.items()
    ):
        raise broken("SCORES", f"must map score names to one of {', '.join(SCORE_KINDS)}")
    return LoadedSummary(
        where,
        found.summarize,  # type: ignore[attr-defined]
        found.headline,  # type: ignore[attr-defined]
        found.write_outputs,  # type: ignore[attr-defined]
        tuple(key) if key is not None else None,
        spec,
        own,
        scorer,
        dict(scores),
    )
