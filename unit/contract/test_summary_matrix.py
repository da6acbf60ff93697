"""Every evaluation's summary and files survive any mix of outcomes (issue 24, item 1).

The matrix: the five evaluations x {all error, all unparsable, mixed, zero cases, one case}.
Outcomes are real: each evaluation is loaded on its synthetic data and a few quick cases run
through `support.contract.runner.run_case` with small in-process backends (one that always fails,
one that answers garbage, one that cycles through right, wrong, garbage and a failure). For each
cell the controller's path runs as the reporter runs it (summarize, headline, summary.csv,
usage.csv, calls.csv, write_outputs, comparisons.csv and its report.md section, the terminal
table) and must not raise; every file written must exist and read back.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from support import evaluations
from support.backends.base import Backend, BackendError
from support.backends.planted import PlantedBackend
from support.backends.reference import OracleBackend
from support.client.engine import ModelClient
from support.contract.evaluation import Evaluation, SummaryContext
from support.contract.runner import CaseResult, run_case
from support.settings import ModelSettings, OutputSettings, RunSettings, StatisticsSettings
from support.types import Case, Outcome, Request, Response
from unit.helpers.suite_runs import cache_with_shared_data

# one worker runs this module: its costly module fixtures are built once, not once a worker
pytestmark = pytest.mark.xdist_group("summary_matrix")

EVALUATIONS = ("pointing", "pgt", "nyu_distance", "surgvqa", "dynamic")
MIXES = ("all_error", "all_unparsable", "mixed", "zero", "one")
CASES = 8  # quick cases per evaluation (dynamic: all rounds of its small searches)
RESAMPLES = 20  # bootstrap resamples: enough to exercise the intervals, fast
# each evaluation's option values (dest -> value): small, fast configurations
VALUES: Mapping[str, Mapping[str, object]] = {
    "dynamic": {"dynamic_budget": 4, "dynamic_batch": 2, "dynamic_pool": 6},
}
GARBAGE = "Sorry, I can't help with that."


class FailingBackend(Backend):
    """Every call fails after retries, as an unreachable API does."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.identity = {"provider": "test", "model": name}

    async def generate(self, request: Request) -> Response:
        raise BackendError(f"{self.name}: connection refused (127.0.0.1:9)")


class GarbageBackend(Backend):
    """Answers every request with text no parser reads as an answer."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.identity = {"provider": "test", "model": name}

    async def generate(self, request: Request) -> Response:
        return Response(texts=(GARBAGE,) * request.n, model=self.name)


class CyclingBackend(Backend):
    """Calls in turn: the oracle's answer, a wrong one, garbage, a failure."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.identity = {"provider": "test", "model": name}
        self.calls = 0
        self.right = OracleBackend(name)
        self.wrong = PlantedBackend(name, "*=1")

    async def generate(self, request: Request) -> Response:
        self.calls += 1
        turn = self.calls % 4
        if turn == 1:
            return await self.right.generate(request)
        if turn == 2:
            return await self.wrong.generate(request)
        if turn == 3:
            return Response(texts=(GARBAGE,) * request.n, model=self.name)
        raise BackendError(f"{self.name}: HTTP 500")


def picked(ev: Evaluation) -> list[Case]:
    """Up to CASES quick cases spread over the list, with every case they wait for."""
    quick = [c for c in ev.cases() if ev.is_quick(c)]
    if any(c.after for c in quick):
        return quick  # rounds: the whole (small) sequence
    step = max(1, len(quick) // CASES)
    return quick[::step][:CASES]


def run_cases(ev: Evaluation, cases: list[Case], backend: Backend) -> list[Outcome]:
    """The outcomes of `cases` on `backend`, rounds in order with their history."""
    client = ModelClient(backend, None, concurrency=1)

    async def go() -> list[Outcome]:
        done: dict[str, CaseResult] = {}
        for case in cases:
            prior = done.get(case.after) if case.after else None

            async def before(prior: CaseResult | None = prior) -> CaseResult:
                assert prior is not None
                return prior

            done[case.id] = await run_case(ev, case, client, before if prior else None)
        return [o for r in done.values() for o in r.outcomes]

    return asyncio.run(go())


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> Path:
    """A cache folder whose synthetic/ is the session's shared one (built once per run)."""
    root = tmp_path_factory.mktemp("matrix")
    cache_with_shared_data(root, shared_cache)
    return root


@pytest.fixture(scope="module")
def outcomes(base: Path) -> dict[tuple[str, str], tuple[RunSettings, list[Outcome]]]:
    """(evaluation, mix) -> (the run's settings, its outcomes), computed once per module."""
    found = {}
    for name in EVALUATIONS:
        run = RunSettings(
            samples=2,
            models=ModelSettings(names=("m-a", "m-b")),
            output=OutputSettings(
                cache_dir=base / "cache", results_dir=base / "results", run_id="r"
            ),
            statistics=StatisticsSettings(bootstrap=RESAMPLES),
        )
        spec = evaluations.spec(name)
        settings = spec.configure(VALUES.get(name, {}), run)
        run = replace(run, evaluations={name: settings})
        ev = spec.evaluation_class().load(run, settings)
        cases = picked(ev)
        failing = run_cases(ev, cases, FailingBackend("m-a")) + run_cases(
            ev, cases, FailingBackend("m-b")
        )
        garbage = run_cases(ev, cases, GarbageBackend("m-a")) + run_cases(
            ev, cases, GarbageBackend("m-b")
        )
        mixed = run_cases(ev, cases, CyclingBackend("m-a")) + run_cases(
            ev, cases, OracleBackend("m-b")
        )
        found |= {
            (name, "all_error"): (run, failing),
            (name, "all_unparsable"): (run, garbage),
            (name, "mixed"): (run, mixed),
            (name, "zero"): (run, []),
            (name, "one"): (run, mixed[:1]),
        }
    return found


def check_readable(path: Path) -> None:
    """A written file that exists and parses as what its name says."""
    assert path.exists(), path
    if path.is_dir():
        return
    if path.suffix == ".csv":
        pd.read_csv(path)
    elif path.suffix == ".json":
        json.loads(path.read_text(encoding="utf-8"))
    elif path.suffix == ".jsonl":
        for line in path.read_text(encoding="utf-8").splitlines():
            json.loads(line)
    elif path.suffix in (".png", ".jpg", ".jpeg"):
        with Image.open(path) as im:
            im.verify()
    elif path.suffix in (".md", ".txt"):
        path.read_text(encoding="utf-8")


def test_mixes_hold_what_they_say(outcomes) -> None:
    for name in EVALUATIONS:
        statuses = {m: {o.status for o in outcomes[(name, m)][1]} for m in MIXES}
        assert statuses["all_error"] == {"error"}, name
        assert "correct" not in statuses["all_unparsable"] and statuses["all_unparsable"], name
        assert {"correct", "error"} <= statuses["mixed"], (name, statuses["mixed"])
        assert len(statuses["mixed"]) >= 3, (name, statuses["mixed"])
        assert statuses["zero"] == set() and len(outcomes[(name, "one")][1]) == 1


@pytest.mark.parametrize("mix", MIXES)
@pytest.mark.parametrize("name", EVALUATIONS)
def test_summary_and_files_survive(outcomes, tmp_path: Path, name: str, mix: str) -> None:
    from support.reporting.tables import calls_table, markdown_table, usage_table, with_intervals
    from support.statistics.pairing import report_section
    from support.storage.files import write_csv, write_jsonl

    run, outs = outcomes[(name, mix)]
    run = replace(run, output=replace(run.output, results_dir=tmp_path / "results"))
    out_dir = run.output.results_dir / name / run.output.run_id
    module = evaluations.spec(name).summary_module()
    outs = sorted(outs, key=lambda o: (o.model, o.case_id))
    files = [write_jsonl(outs, out_dir / "raw_results.jsonl")]
    ctx = evaluations.spec(name).summary_context(
        replace(run, statistics=replace(run.statistics, bootstrap=RESAMPLES), seed=0)
    )
    summary = module.summarize(outs, ctx)
    head = module.headline(summary)
    metrics = [c for c in head.columns if f"{c}_lo" in head.columns]
    markdown_table(with_intervals(head, metrics))  # the terminal's table
    files += [
        write_csv(summary, out_dir / "summary.csv"),
        write_csv(usage_table(outs), out_dir / "usage.csv"),
        write_csv(calls_table(outs), out_dir / "calls.csv"),
        *module.write_outputs(outs, summary, out_dir, ctx),
    ]
    compared = module.compared(name, outs, run.statistics.compare, RESAMPLES, 0)
    section = ""
    if compared is not None:
        table, notes = compared
        files.append(write_csv(table, out_dir / "comparisons.csv"))
        section = report_section(table, notes)
    written = ctx.report.write(out_dir / "report.md", None, section)
    assert written is not None  # every summary says something, with or without outcomes
    report = written.read_text(encoding="utf-8")
    for path in files:
        check_readable(path)
    if outs:  # a model's counts are kept, whatever its outcomes
        assert len(summary) >= 1
        assert set(summary["model"]) == {o.model for o in outs}
    # the data is the synthetic sample here, and the report says so at its top (issue 24, item 9)
    label = ctx.data_label  # the spec's data_label(run)
    assert label and ("synthetic" in label or "procedural" in label)
    head = report.splitlines()[:4]
    assert "synthetic" in head[0] and any(label in line for line in head), head
    assert "CholecSeg8k)" not in head[0]  # pointing's real-data title


def real_settings(name: str, tmp_path: Path) -> object:
    """Settings of each evaluation pointing at real data (paths that need not exist: only the
    summary reads them here)."""
    from support.evaluations.dynamic.spec import DynamicSettings
    from support.evaluations.nyu_distance.spec import NyuSettings
    from support.evaluations.pgt.spec import PgtSettings
    from support.evaluations.pointing.spec import PointingSettings
    from support.evaluations.surgvqa.spec import SurgvqaSettings

    return {
        "pointing": PointingSettings(cholecseg8k=str(tmp_path / "cholecseg8k")),
        "pgt": PgtSettings(dataset="df40", csv=tmp_path / "df40.csv"),
        "nyu_distance": NyuSettings(mat=str(tmp_path / "nyu_depth_v2_labeled.mat")),
        "surgvqa": SurgvqaSettings(root=str(tmp_path / "surgvu")),
        "dynamic": DynamicSettings(data=str(tmp_path / "anypoint")),
    }[name]


@pytest.mark.parametrize("name", EVALUATIONS)
def test_data_label_is_none_on_real_data_and_the_report_says_nothing(
    tmp_path: Path, name: str
) -> None:
    spec = evaluations.spec(name)
    module = spec.summary_module()
    synthetic = RunSettings(output=OutputSettings(results_dir=tmp_path / "results", run_id="r"))
    assert spec.data_label(synthetic)  # no data option: the synthetic sample
    run = replace(synthetic, evaluations={name: real_settings(name, tmp_path)})
    assert spec.data_label(run) is None
    ctx = spec.summary_context(replace(run, statistics=replace(run.statistics, bootstrap=0)))
    assert ctx.data_label is None
    summary = module.summarize([], ctx)
    module.write_outputs([], summary, tmp_path / "out", ctx)
    report = ctx.report.text()
    assert "synthetic" not in report and "Data:" not in report
    if name == "pointing":
        assert report.startswith("# Pointing evaluation (CholecSeg8k)")


def test_surgvqa_headline_counts_questions_and_frames_apart(outcomes) -> None:
    module = evaluations.spec("surgvqa").summary_module()
    _, outs = outcomes[("surgvqa", "mixed")]
    head = module.headline(module.summarize(outs, SummaryContext.of(n_resamples=0)))
    head = head.set_index("model")
    assert "n" not in head.columns
    for model in ("m-a", "m-b"):
        mine = [o for o in outs if o.model == model]
        scored = [o for o in mine if o.status != "error"]
        row = head.loc[model]
        assert row["n_questions"] == sum(o.params["category"] == "vqa" for o in scored)
        assert row["n_frames"] == sum(o.params["category"] == "tools" for o in scored)
        assert row["n_error"] == len(mine) - len(scored)
    assert head.loc["m-b", "n_questions"] > 0 and head.loc["m-b", "n_frames"] > 0


def pointing_outcome(organ_id: int, y_true: int, y_pred: int) -> Outcome:
    from support.evaluations.pointing.classes import CLASS_NAMES

    organ = CLASS_NAMES[organ_id]
    return Outcome(
        case_id=f"s0000-{organ}-zero_shot-m",
        evaluation="pointing",
        model="m",
        status="correct" if y_true == y_pred else "wrong",
        group={"condition": "zero_shot", "organ": organ},
        cluster="video01",
        scores={"y_true": y_true, "y_pred": y_pred, "hit": y_pred == 1},
        params={"organ": organ_id, "row": 0},
    )


def test_pointing_report_names_every_tied_organ() -> None:
    from support.evaluations.pointing.classes import CLASS_NAMES, ORGAN_IDS
    from support.evaluations.pointing.summary import report_text, summarize

    missed = ORGAN_IDS[:4]  # present, answered absent: F1 0, four ways tied
    outs = [pointing_outcome(i, 1, 0) for i in missed] + [pointing_outcome(ORGAN_IDS[4], 1, 1)]
    summary = summarize(outs, SummaryContext.of(n_resamples=0))
    text = report_text(summary)
    (line,) = [x for x in text.splitlines() if x.startswith("- **m / zero_shot**")]
    worst = line.split("worst", 1)[1]
    assert all(CLASS_NAMES[i] in worst for i in missed), line  # not three of four, by name
    assert "tied" in worst
    best = line.split("worst", 1)[0]
    assert CLASS_NAMES[ORGAN_IDS[4]] in best and "1.000" in best
