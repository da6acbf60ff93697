"""The run's checks as CI reads them (issue 39, item 2), without a suite run: each gate checked on
its own and named as on the command line, --skip-unavailable's "nothing evaluated", and their
testsuite added to the JUnit file pytest wrote, pytest's text kept byte for byte. The suite runs
are in unit/reports/test_junit.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest
import xmlschema

from fixtures.junit import GATES_SUITE, SUITES_END, add_checks_suite
from fixtures.skips import SKIP_UNAVAILABLE_CHECK, nothing_evaluated_check
from reports.gates import Gate, GateCheck, check_gates, failed_gates

SCHEMA = Path(__file__).parent / "schemas" / "junit-10.xsd"


def test_a_gate_is_named_as_on_the_command_line():
    assert Gate("nyu_distance", "delta1", 0.9, "min").text == "--min-metric nyu_distance.delta1=0.9"
    assert Gate("pointing", "f1", 1.0, "min", "oracle").text == "--min-metric pointing.f1@oracle=1"
    assert Gate("nyu_distance", "mae", 0.001, "max").text == "--max-metric nyu_distance.mae=0.001"
    assert Gate("e", "m", 1e-05, "max").text == "--max-metric e.m=1e-05"


def test_each_gate_is_checked_on_its_own():
    headline = pd.DataFrame({"model": ["a", "b"], "n": [4, 4], "accuracy": [0.5, 1.0]})
    gates = [
        Gate("ev", "accuracy", 0.9, "min"),  # a fails, b passes
        Gate("ev", "accuracy", 0.9, "min", "b"),
        Gate("ev", "nope", 1.0, "min"),
        Gate("gone", "accuracy", 0.1, "max"),
    ]
    checks = check_gates(gates, {"ev": headline})
    assert [c.name for c in checks] == [g.text for g in gates]
    assert [c.passed for c in checks] == [False, True, False, False]
    assert checks[0].failures == ("ev.accuracy = 0.5 < 0.9 (model=a, n=4, accuracy=0.5)",)
    assert checks[2].failures[0].startswith("--min-metric ev.nope: unknown metric; known: model")
    assert checks[3].failures == ("--max-metric gone.accuracy: no outcomes of gone in this run",)
    assert failed_gates(gates, {"ev": headline}) == [m for c in checks for m in c.failures]


def test_nothing_evaluated_fails_only_when_every_case_was_skipped_as_unavailable():
    why = {"t[a-x]": "x: X_KEY is not set", "t[b-x]": "x: X_KEY is not set", "t[a-y]": "y: gone"}
    failed = nothing_evaluated_check(why, set())
    assert failed.name == SKIP_UNAVAILABLE_CHECK and not failed.passed
    assert failed.failures[0].startswith("nothing evaluated: all 3 selected cases skipped")
    assert failed.failures[1:3] == ("skipped 2: x: X_KEY is not set", "skipped 1: y: gone")
    assert nothing_evaluated_check(why, {"t[a-z]"}).passed  # one case of another model ran
    assert nothing_evaluated_check({}, set()).passed  # nothing selected: pytest's exit 5 says so
    one = nothing_evaluated_check({"t[a-x]": "x: X_KEY is not set"}, set())
    assert one.failures[0].startswith("nothing evaluated: the 1 selected case skipped")


@pytest.fixture
def pytest_junit(pytester: pytest.Pytester) -> Path:
    """A JUnit file as pytest writes it (xunit2), of one passing and one failing test."""
    pytester.makepyfile(test_two="def test_ok():\n    pass\n\ndef test_bad():\n    assert 0\n")
    xml = pytester.path / "junit.xml"
    pytester.runpytest("-p", "no:cacheprovider", "-o", "junit_family=xunit2", f"--junitxml={xml}")
    return xml


def test_the_checks_suite_follows_pytests_suite_which_is_kept_byte_for_byte(pytest_junit: Path):
    before = pytest_junit.read_text(encoding="utf-8")
    checks = [
        GateCheck("--min-metric ev.f1=0.9", ("ev.f1 = 0.5 < 0.9 (model=a)", "ev.f1 = 0.6 < 0.9")),
        GateCheck("--max-metric ev.mae@b\x07=1"),  # a control character XML cannot hold
    ]
    add_checks_suite(pytest_junit, checks)
    after = pytest_junit.read_text(encoding="utf-8")
    head = before.removesuffix(SUITES_END)
    assert head != before and after.startswith(head) and after.endswith(SUITES_END)
    xmlschema.XMLSchema(SCHEMA).validate(pytest_junit)

    ours, gates = ET.parse(pytest_junit).getroot().findall("testsuite")
    assert ours.get("name") == "pytest" and ours.get("failures") == "1"
    assert (gates.get("name"), gates.get("tests"), gates.get("failures")) == (GATES_SUITE, "2", "1")
    failed, passed = gates.findall("testcase")
    assert failed.find("failure").text == "ev.f1 = 0.5 < 0.9 (model=a)\nev.f1 = 0.6 < 0.9"
    assert failed.find("failure").get("message") == failed.find("failure").text
    assert passed.get("name") == "--max-metric ev.mae@b#x07=1" and len(passed) == 0


def test_a_file_pytest_did_not_write_is_left_alone(tmp_path: Path):
    other = tmp_path / "junit.xml"
    other.write_text("<testsuite name='x' tests='0' failures='0' errors='0'/>")
    with pytest.raises(ValueError, match="does not end with </testsuites>"):
        add_checks_suite(other, [GateCheck("--min-metric a.b=1")])
    assert other.read_text() == "<testsuite name='x' tests='0' failures='0' errors='0'/>"
