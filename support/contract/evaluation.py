"""The contract every evaluation implements: its spec (options, settings), its class, its summary.

An evaluation is a plugin in three parts, none of which the core names:

- an `EvaluationSpec` (a light module, imported when pytest starts): the name, the title of its
  option group, its `Option`s, `configure(values, run) -> settings` (validation; an `OptionError`
  becomes a usage error naming the option), and where its two halves live;
- the `Evaluation` class (worker side, where tests run): loads the data, lists the cases and
  evaluates them: `evaluate(case, client)` awaits a `CaseClient` and returns `Verdict`s, the core
  builds the outcomes; an evaluation that keeps existing results (its source's rule) hands them
  back instead through `reused(case, model)`, so a rerun reports them rather than dropping them;
- a `Summary` (controller side, where reports are written, possibly in another process under
  xdist; the contract in support.contract.summary, checked when the core loads it): a module
  with `summarize(outcomes, ctx)`, `headline(summary)` and `write_outputs(outcomes, summary,
  out_dir, ctx)`, where `ctx` (`SummaryContext`, built by the spec's `summary_context`) carries
  the run's settings and the evaluation's own, the label of its data and a way to reopen it (from
  the spec: a summary never imports the worker side), and the run's report.md (`ctx.report`,
  written by the core after write_outputs has added its part); an evaluation whose outcomes are
  simply right or wrong takes the stock one (support.contract.binary_summary:BINARY, the default)
  and writes none.

`support.evaluations` is the one registry (name -> spec). The library never imports pytest.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from support.backends.base import BackendError
from support.contract.provenance import ReadRule
from support.contract.summary import (
    LoadedSummary,
    Summary,
    SummaryContext,
    SummaryContractError,
    checked_summary,
)
from support.settings import RunSettings
from support.types import Case, Outcome, Request, Response, Verdict

if TYPE_CHECKING:
    from support.backends.registry import ModelSpec

__all__ = [
    "BackendError",  # what `client.generate` raises when the model call failed after retries
    "CaseClient",
    "Evaluation",
    "EvaluationSpec",
    "Option",
    "OptionError",
    "Reused",
    "Summary",
    "SummaryContext",
    "SummaryContractError",
]


class CaseClient(Protocol):
    """What `Evaluation.evaluate` awaits (support.contract.runner.LoggedClient implements it).

    `name` is the `--model` name, `model` its registry entry (provider, traits); `history` the
    outcomes of the earlier rounds of a sequence (empty for a case without `after`);
    `generate(request)` the answer (BackendError when the call failed after retries); `fork()` a
    client whose calls are logged apart, for items that yield many outcomes."""

    name: str
    history: tuple[Outcome, ...]

    @property
    def model(self) -> ModelSpec: ...

    async def generate(self, request: Request) -> Response: ...

    def fork(self) -> CaseClient: ...


REUSED = "reused"  # Outcome.extra key of a reused outcome: the file its result was read back from


@dataclass(frozen=True)
class Reused:
    """A case's verdicts read back from results that exist (`Evaluation.reused`), and the file
    they came from; the core marks each outcome's `extra["reused"]` with it."""

    source: str  # the path of the results file
    verdicts: Verdict | Sequence[Verdict]

    def marked(self) -> list[Verdict]:
        """The verdicts, each with `extra["reused"] = source`."""
        found = [self.verdicts] if isinstance(self.verdicts, Verdict) else list(self.verdicts)
        return [replace(v, extra={**v.extra, REUSED: self.source}) for v in found]


class CaseSkipped(Exception):
    """Raised by `evaluate` for a case that cannot run (a later round of a search whose earlier
    round broke): the case is skipped with this reason, its test shows no traceback, and
    nothing is recorded for it."""


class OptionError(ValueError):
    """A bad option value: `option` is the flag (e.g. "--my-eval-n"), the message says why."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message if message.startswith(option) else f"{option}: {message}")
        self.option = option


@dataclass(frozen=True)
class Option:
    """One command-line option of an evaluation (a pytest option in the evaluation's group).

    `action` is argparse's ("store", "store_true", "append"); `type` converts the text (argparse
    errors name the option too); semantic checks belong in the spec's `configure`.
    """

    flag: str  # "--my-eval-n"
    help: str
    default: Any = None
    metavar: str | None = None
    action: str = "store"
    type: Callable[[str], Any] | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def argparse_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"action": self.action, "help": self.help, "dest": self.dest}
        kwargs["default"] = [] if self.action == "append" and self.default is None else self.default
        if self.action not in ("store_true", "store_false"):
            if self.metavar:
                kwargs["metavar"] = self.metavar
            if self.type is not None:
                kwargs["type"] = self.type
        return kwargs


def _no_settings(values: Mapping[str, Any], run: RunSettings) -> Mapping[str, Any]:
    return dict(values)


@dataclass(frozen=True)
class EvaluationSpec:
    """What the core needs to know of an evaluation before loading it.

    `evaluation` is "module:Class" of the worker side, `summary` the controller side's module
    (or "module:ATTR"; by default the stock support.contract.binary_summary:BINARY);
    both are imported only when used. `configure(values, run)` turns the parsed option values
    (by dest) into the evaluation's settings object, raising OptionError on a bad value; it runs
    at configure time in every process, so it must be deterministic and cheap.

    Two optional fields feed the run's manifest.json (reports/manifest.py), read on the
    controller at session finish, after the cases ran:
    - `data_files(settings, run)`: the files and folders the evaluation reads (a folder stands for
      every file below it), for the data fingerprint; it must not build or download anything the
      run did not (the synthetic data's folder exists by then); None: no fingerprint;
    - `prompt_modules`: dotted names of the modules holding its prompt templates, whose source
      files are hashed (without importing them).

    `max_images(settings)`: the most images one of its requests carries under these settings
    (None: one). A local engine's per-prompt image limit defaults to the most over the
    configured evaluations (vLLM refuses a prompt over its limit).

    `notes(settings)`: lines the controller prints under the evaluation's loading line (e.g.
    surgvqa's metrics left out for want of their model); None: none.

    `read_rules`: its parsers' rules (support.contract.provenance.ReadRule), each a code its
    verdicts record in `read_by`: provenance.csv counts them per model and report.md flags a model
    read mostly by a fallback. Empty: its answers are not parsed (no provenance table).

    What the summary gets through its `SummaryContext` (`summary_context`):
    - `data_label(run)`: what the data is when it is not the real dataset (e.g. the synthetic
      sample), said by report.md, the terminal and the HTML report; None for the real data;
    - `open_data(settings, run)`: the evaluation's data opened again, for a summary that must
      reread it (`ctx.open_data()`); None: the summary rereads nothing.
    """

    name: str
    title: str
    evaluation: str
    summary: str = "support.contract.binary_summary:BINARY"  # the stock summary: accuracy per model
    options: Sequence[Option] = ()
    configure: Callable[[Mapping[str, Any], RunSettings], Any] = field(default=_no_settings)
    data_files: Callable[[Any, RunSettings], Sequence[Path]] | None = None
    prompt_modules: tuple[str, ...] = ()
    max_images: Callable[[Any], int] | None = None
    data_label: Callable[[RunSettings], str | None] | None = None
    open_data: Callable[[Any, RunSettings], Any] | None = None
    notes: Callable[[Any], Sequence[str]] | None = None
    read_rules: Sequence[ReadRule] = ()

    def evaluation_class(self) -> type[Evaluation]:
        module, _, attr = self.evaluation.partition(":")
        return getattr(importlib.import_module(module), attr)

    def summary_module(self) -> LoadedSummary:
        """The controller side, imported on first use: a module, or "module:ATTR" (an object
        with the Summary functions, e.g. support.contract.binary_summary:BINARY), checked against
        the contract (SummaryContractError naming the module and the member that breaks it)."""
        module, _, attr = self.summary.partition(":")
        found = importlib.import_module(module)
        return checked_summary(getattr(found, attr) if attr else found, self.summary)

    def summary_context(self, run: RunSettings) -> SummaryContext:
        """What the summary is given in this run: the evaluation's settings, its data label and
        its data's opener (from this spec), and a report.md of its own."""
        settings = run.evaluations.get(self.name)
        label = self.data_label(run) if self.data_label is not None else None
        opener = self.open_data
        if opener is None:
            return SummaryContext(run, settings, self.name, data_label=label)
        return SummaryContext(
            run, settings, self.name, data_label=label, opener=lambda: opener(settings, run)
        )


def linspace_subset(items: list[int], n: int | None) -> list[int]:
    """`n` evenly spaced items (np.linspace over positions, as the sources): what `--samples N`
    and the `quick` subsets take from an evaluation's items; all when n is None."""
    if n is None or n >= len(items):
        return list(items)
    positions = np.linspace(0, len(items) - 1, n, dtype=int)
    return [items[i] for i in dict.fromkeys(positions.tolist())]


class Evaluation:
    """Base class of the worker side: data, cases, requests, scoring."""

    name: ClassVar[str] = ""
    quick_samples: ClassVar[int] = 5  # samples in the `quick` subset

    @classmethod
    def load(cls, run: RunSettings, settings: Any) -> Evaluation:
        """Open (or build) the data and plans; called once per process at collection time, with
        the run's settings and this evaluation's own (from its spec's `configure`)."""
        raise NotImplementedError

    def cases(self) -> Sequence[Case]:
        """Every case of this run (after --samples), in a stable order: a list, or a sequence
        that builds each case when read (the suite keeps only those `-m` selects)."""
        raise NotImplementedError

    def is_quick(self, case: Case) -> bool:
        """Whether the case belongs to the fixed `quick` subset."""
        raise NotImplementedError

    def quick_cases(self) -> Sequence[Case]:
        """The quick subset, in the order of `cases()`: what `-m quick` lists. A quick case may
        wait only for quick cases. Override it where listing every case is costly (pgt)."""
        return [c for c in self.cases() if self.is_quick(c)]

    def prepare(self, cases: Sequence[Case], progress: bool) -> None:
        """Make before the run what the selected `cases` need that no model changes (e.g. the
        images they send) and keep it where they will read it (the run's cache folder). Called
        once per run, on the controller (the one process without xdist), after loading and the
        `-m` selection, before the workers start; the workers never call it, so a case must
        still make what it finds missing (a `-k` beyond these cases, `--no-cache`). `progress`:
        whether a bar may show (tqdm on stderr). Nothing by default."""

    def locality(self, case: Case) -> str:
        """Cases with the same locality share expensive inputs (e.g. one decoded image) and go
        to the same xdist worker; a case and the case it waits for (`after`) must share it."""
        return case.id

    async def evaluate(self, case: Case, client: CaseClient) -> Verdict | list[Verdict]:
        """Build the request(s), await `client.generate`, parse and score: the domain part of
        the outcome(s)."""
        raise NotImplementedError

    async def reused(self, case: Case, model: str) -> Reused | None:
        """The case's verdicts read back from results that exist (an evaluation whose source
        keeps them; `--override` turns that off in its settings), or None to evaluate it. The
        core asks before `evaluate`; a reused case makes no model call and is reported as run,
        each outcome's `extra["reused"]` naming the file."""
        return None

    def skip_reasons(self, selected: list[tuple[Case, str]]) -> list[str | None]:
        """For the (case, model) pairs selected to run (after -k/-m), why each must not run, or
        None. Results that exist are not a reason: hand them back through `reused`."""
        return [None] * len(selected)

    def render(self, case: Case, outcome: Outcome) -> bytes | None:
        """An image (JPEG/PNG bytes) that shows the case and the prediction, for the HTML report."""
        return None
