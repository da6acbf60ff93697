"""The summary contract (support/contract/summary.py): a summary that breaks it is refused when
the core loads it, naming the module and the member; the optional members get their defaults;
a summary reaches its data label and its data through the SummaryContext the spec builds."""

from __future__ import annotations

import dataclasses
import sys
from types import ModuleType

import pytest

from support import evaluations
from support.contract.binary_summary import BINARY
from support.contract.evaluation import EvaluationSpec
from support.contract.summary import (
    LoadedSummary,
    SummaryContext,
    SummaryContractError,
    checked_summary,
)
from support.settings import RunSettings


def summary_module(name: str, **members: object) -> ModuleType:
    module = ModuleType(name)
    for key in ("summarize", "headline", "write_outputs"):
        setattr(module, key, lambda *args: None)
    for key, value in members.items():
        if value is None:
            delattr(module, key)
        else:
            setattr(module, key, value)
    return module


def test_a_complete_summary_loads_with_its_optional_members_defaulted() -> None:
    loaded = checked_summary(summary_module("plain"), "plain")
    assert isinstance(loaded, LoadedSummary)
    assert (loaded.KEY_METRICS, loaded.COMPARISONS, loaded.comparisons) == (None, None, None)
    assert loaded.compared("x", [], (), 0, 0) is None  # declares no comparisons
    stock = checked_summary(BINARY, "support.contract.binary_summary:BINARY")
    assert stock.KEY_METRICS == ("accuracy",) and stock.summarize == BINARY.summarize


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({"headline": None}, "summary my.summary: `headline` is missing"),
        ({"write_outputs": 3}, "summary my.summary: `write_outputs` is not a function"),
        ({"KEY_METRICS": "f1"}, "summary my.summary: `KEY_METRICS` must be a sequence"),
        ({"KEY_METRICS": ("f1", 2)}, "summary my.summary: `KEY_METRICS` must be a sequence"),
        ({"COMPARISONS": {"f1": 1}}, "summary my.summary: `COMPARISONS` must be a Comparisons"),
        ({"comparisons": "yes"}, "summary my.summary: `comparisons` is not a function"),
    ],
)
def test_a_summary_that_breaks_the_contract_is_refused_by_name(members, message) -> None:
    with pytest.raises(SummaryContractError, match=message.replace("`", ".")):
        checked_summary(summary_module("my.summary", **members), "my.summary")


def test_the_spec_checks_its_summary_when_it_is_loaded(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "bad_summary", summary_module("bad_summary", headline=None))
    spec = EvaluationSpec("bad", "bad", "nowhere:Nothing", summary="bad_summary")
    with pytest.raises(SummaryContractError, match=r"summary bad_summary: .headline. is missing"):
        spec.summary_module()
    for name in evaluations.names():  # every built-in summary keeps the contract
        assert isinstance(evaluations.spec(name).summary_module(), LoadedSummary)


def test_the_context_carries_the_specs_data_label_and_its_data() -> None:
    opened = []

    def open_data(settings, run):
        opened.append((settings, run))
        return "the data"

    spec = EvaluationSpec(
        "toy", "toy", "nowhere:Nothing", data_label=lambda run: "a sample", open_data=open_data
    )
    run = RunSettings(evaluations={"toy": "its settings"})
    ctx = spec.summary_context(run)
    assert (ctx.evaluation, ctx.settings, ctx.data_label) == ("toy", "its settings", "a sample")
    assert opened == [] and ctx.open_data() == "the data" and opened == [("its settings", run)]
    bare = dataclasses.replace(spec, data_label=None, open_data=None).summary_context(run)
    assert bare.data_label is None
    with pytest.raises(LookupError, match="no open_data"):
        bare.open_data()
    with pytest.raises(LookupError):
        SummaryContext.of().open_data()
