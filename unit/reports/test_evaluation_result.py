"""The run's results (reports/result.py): built once at session finish by the reporter
(reports/plugin.py, reports/evaluation_files.py), frozen, and what the gates and the exit status
read."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

import reports.evaluation_files as evaluation_files
from reports.gates import Gate
from reports.plugin import OUTCOMES_ATTR, ReportPlugin
from support import evaluations
from support.contract.evaluation import EvaluationSpec
from support.settings import OutputSettings, RunSettings, StatisticsSettings
from support.types import Outcome

TOY = "toy_binary"  # an evaluation with the stock summary (support.contract.binary_summary:BINARY)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> EvaluationSpec:
    spec = EvaluationSpec(
        name=TOY,
        title="toy",
        evaluation="nowhere:Nothing",
        data_label=lambda run: "toy sample (not real)",
    )
    monkeypatch.setitem(evaluations._specs, TOY, spec)
    return spec


def report(nodeid: str, *outcomes: Outcome, when: str = "call") -> SimpleNamespace:
    return SimpleNamespace(
        nodeid=nodeid, when=when, **{OUTCOMES_ATTR: [o.to_json() for o in outcomes]}
    )


def session(tmp_path: Path) -> SimpleNamespace:
    params = SimpleNamespace(args=("evals",), dir=tmp_path)
    return SimpleNamespace(
        exitstatus=pytest.ExitCode.OK, config=SimpleNamespace(invocation_params=params)
    )


def finished_plugin(tmp_path: Path, gates: list[Gate], monkeypatch) -> tuple[ReportPlugin, list]:
    """A reporter fed three outcomes (one twice) and finished; the evaluations it wrote."""
    calls: list[str] = []
    real = evaluation_files.write_evaluation

    def counted(name, *args, **kwargs):
        calls.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(evaluation_files, "write_evaluation", counted)
    run = RunSettings(
        output=OutputSettings(results_dir=tmp_path / "results", run_id="r1"),
        statistics=StatisticsSettings(bootstrap=0),
    )
    plugin = ReportPlugin(run, gates)
    a = Outcome("b-case", TOY, "m1", "correct")
    b = Outcome("a-case", TOY, "m1", "wrong")
    plugin.pytest_runtest_logreport(report("t::1", a))
    plugin.pytest_runtest_logreport(report("t::2", b, a))  # `a` again: kept once
    plugin.pytest_runtest_logreport(report("t::2", when="teardown"))
    plugin.add_engine_stats("main", [{"model": "m1", "requests": 2}])
    s = session(tmp_path)
    plugin.pytest_sessionfinish(s)
    return plugin, calls, s


def test_the_result_is_built_once_at_session_finish_and_is_frozen(
    tmp_path: Path, toy, monkeypatch
) -> None:
    plugin, calls, s = finished_plugin(tmp_path, [], monkeypatch)
    assert calls == [TOY]  # one EvaluationResult per evaluation, built once
    result = plugin.result
    assert result is not None and s.exitstatus == pytest.ExitCode.OK and not result.failed
    (r,) = result.evaluations
    assert [o.case_id for o in r.outcomes] == ["b-case", "a-case"]  # arrival order, no duplicate
    assert r.data_label == "toy sample (not real)" and r.key_metrics == ("accuracy",)
    assert list(r.headline["accuracy"]) == [0.5] and r.failure is None and r.unwritten == ()
    folder = tmp_path / "results" / TOY / "r1"
    assert {p.name for p in r.files} >= {"raw_results.jsonl", "summary.csv", "report.md"}
    assert all(p.parent == folder and p.is_file() for p in r.files)
    assert result.completion.cases_finished == 1
    assert result.engine_stats["main"] == ({"model": "m1", "requests": 2},)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.summary = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.gate_messages = ("x",)  # type: ignore[misc]
    with pytest.raises(TypeError):
        result.engine_stats["worker"] = ()  # type: ignore[index]
    assert isinstance(r.outcomes, tuple) and isinstance(r.files, tuple)


def test_the_gates_read_the_result_and_set_the_exit_status(tmp_path: Path, toy, monkeypatch):
    gates = [Gate(TOY, "accuracy", 0.9, "min"), Gate("absent", "accuracy", 0.1, "min")]
    plugin, _, s = finished_plugin(tmp_path, gates, monkeypatch)
    assert plugin.result.gate_messages == (
        f"{TOY}.accuracy = 0.5 < 0.9 (model=m1, n=2, n_error=0)",
        "--min-metric absent.accuracy: no outcomes of absent in this run",
    )
    assert s.exitstatus == pytest.ExitCode.TESTS_FAILED


def test_a_summary_that_breaks_the_contract_fails_its_result_only(
    tmp_path: Path, toy, monkeypatch
) -> None:
    broken = dataclasses.replace(toy, summary="support.settings")  # a module, not a summary
    monkeypatch.setitem(evaluations._specs, TOY, broken)
    plugin, _, s = finished_plugin(tmp_path, [], monkeypatch)
    (r,) = plugin.result.evaluations
    assert r.headline is None and r.summary is None
    assert r.failure == (
        "support.contract.summary.SummaryContractError: "
        "summary support.settings: `summarize` is missing"
    )
    assert {p.name for p in r.files} == {"raw_results.jsonl", "manifest.json"}  # kept
    assert s.exitstatus == pytest.ExitCode.TESTS_FAILED


class _Scoring:
    """The stock summary with a `score_outcomes` that adds a score, or fails (`fail`)."""

    def __init__(self, fail: bool) -> None:
        from support.contract.binary_summary import BINARY

        self.summarize, self.headline = BINARY.summarize, BINARY.headline
        self.write_outputs, self.fail = BINARY.write_outputs, fail

    def score_outcomes(self, outcomes, ctx):
        if self.fail:
            raise RuntimeError("the scoring model cannot load")
        return [dataclasses.replace(o, scores={**o.scores, "late": 1.0}) for o in outcomes]


@pytest.mark.parametrize("fail", [False, True])
def test_controller_side_scores_reach_raw_results_or_their_failure_keeps_them(
    tmp_path: Path, toy, monkeypatch, fail: bool
) -> None:
    import json
    import sys
    import types

    module = types.ModuleType("toy_scoring_summary")
    module.SUMMARY = _Scoring(fail)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toy_scoring_summary", module)
    monkeypatch.setitem(
        evaluations._specs, TOY, dataclasses.replace(toy, summary="toy_scoring_summary:SUMMARY")
    )
    plugin, _, _ = finished_plugin(tmp_path, [], monkeypatch)
    (r,) = plugin.result.evaluations
    raw = tmp_path / "results" / TOY / "r1" / "raw_results.jsonl"
    rows = [json.loads(line) for line in raw.read_text().splitlines()]
    assert [row["case_id"] for row in rows] == ["a-case", "b-case"]  # written either way
    if fail:
        assert r.failure == "RuntimeError: the scoring model cannot load"
        assert all("late" not in row["scores"] for row in rows)  # the outcomes as they came
    else:
        assert r.failure is None
        assert all(row["scores"]["late"] == 1.0 for row in rows)
        assert all(o.scores["late"] == 1.0 for o in r.outcomes)  # the result holds them too


def test_an_evaluation_without_a_spec_here_gets_a_failed_result() -> None:
    from reports.evaluation_files import write_evaluation
    from reports.result import Completion, SessionFacts

    outcome = Outcome("a-case", "not_registered", "m1", "correct")
    facts = SessionFacts(("evals",), Path("."), 0.0)
    r = write_evaluation("not_registered", [outcome], Completion(), RunSettings(), facts)
    assert r.failure is not None and r.failure.startswith("ValueError: unknown evaluation")
    assert r.outcomes == (outcome,) and r.files == () and r.headline is None
