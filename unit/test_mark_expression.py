"""fixtures/mark_expression.py against pytest's own `-m` evaluator (the golden reference:
`_pytest.mark.expression.Expression`, read here in a test only, never by the suite)."""

from __future__ import annotations

import itertools

import pytest
from _pytest.mark.expression import Expression

from fixtures.mark_expression import parse

MARKS = ("quick", "full", "api", "gpu", "slow")
EXPRESSIONS = [
    "quick",
    "not quick",
    "quick and api",
    "quick or api",
    "not quick and not gpu",
    "quick or api and gpu",  # and binds tighter than or
    "not (quick or api) and full",
    "((quick))",
    "not not quick",
    "quick and (api or gpu) or not full",
    "slow or quick and not api or gpu",
    "  quick   and\tfull ",
    "xdist_group",
    "my-mark.x:y/z[1]",
]


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_every_mark_set_is_judged_as_pytest_judges_it(text):
    ours = parse(text)
    assert ours is not None
    theirs = Expression.compile(text)
    for r in range(len(MARKS) + 1):
        for marks in itertools.combinations(MARKS, r):
            want = theirs.evaluate(frozenset(marks).__contains__)
            assert ours.matches(marks) is bool(want), (text, marks)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        None,
        "quick and",
        "(quick",
        "quick)",
        "and quick",
        "not",
        "quick api",
        "evaluation(name='pgt')",  # pytest's keyword form: left to pytest
        "quick or evaluation(name=pgt)",
        "'quick'",
    ],
)
def test_what_it_does_not_read_is_none(text):
    assert parse(text) is None


def test_the_names_it_reads():
    expression = parse("quick and not (api or gpu)")
    assert expression.names == {"quick", "api", "gpu"}
    assert expression.matches({"quick", "full"}) and not expression.matches({"quick", "gpu"})
