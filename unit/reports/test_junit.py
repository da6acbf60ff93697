"""`--junitxml` that CI tools can trust, through two subprocess runs of the real pointing suite
(one serial, one under `-n 2`): the same test names in both, a group's cases on one worker, a
broken pipeline as `<error>` and a wrong answer under --fail-on-wrong as `<failure>`, each case's
outcome in its `<system-out>`, and files valid against Jenkins' xunit junit-10.xsd
(unit/reports/schemas/) and pytest's own xunit2 rules.

CI sees what the terminal sees (issue 39, item 2), through pytester runs of the small rounds
evaluation (examples/rounds_evaluation.py): each metric gate is a testcase of a `vlmbench.gates`
testsuite of its own, failed when the gate fails; a dry run's cases are skipped ("dry run"), its
estimate written as before; --skip-unavailable with nothing evaluated fails the run, the
testsuite saying why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest
import xmlschema
from _pytest.junitxml import families

from unit.helpers.rounds_runs import plant_rounds, rounds_args
from unit.helpers.suite_runs import link_shared_data

# every test here runs the suite in a subprocess; one worker runs this module, so its costly
# module fixtures are built once, not once a worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("junit")]

REPO = Path(__file__).resolve().parents[2]
SCHEMA = Path(__file__).parent / "schemas" / "junit-10.xsd"

# -p junitprobe: a model that breaks on liver questions, and where each case ran (worker pid and
# xdist group ride on the worker's reports; the controller writes them to $PROBE_FILE)
PROBE_PLUGIN = '''
import json, os
import pytest
from support.backends.base import Backend, BackendError, register_provider
from support.backends.reference import OracleBackend

@register_provider
class Breaks(Backend):
    """Oracle answers, but every liver question fails as an API error after its retries."""
    provider, kind = "breaks", "api"
    @classmethod
    def create(cls, name, model_id, opts):
        return cls(name)
    def __init__(self, name):
        self.name, self.identity, self.reads_hints = name, {"provider": "breaks"}, True
        self.oracle = OracleBackend(name)
    async def generate(self, request):
        if '"Liver"' in (request.parts[-2].text or ""):
            raise BackendError("HTTP 503 after retries")
        return await self.oracle.generate(request)

SEEN = []

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    mark = item.get_closest_marker("xdist_group")
    report.probe = {"pid": os.getpid(), "group": mark.args[0] if mark else None}
    return report

def pytest_runtest_logreport(report):
    if report.when == "setup" and hasattr(report, "probe"):
        SEEN.append({"nodeid": report.nodeid, **report.probe})

def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        with open(os.environ["PROBE_FILE"], "w") as f:
            json.dump(SEEN, f)
'''
SELECTION = "zero_shot and (gallbladder or liver) and not liver_ligament"
ARGS = ("--model=breaks:x,chance", "-m", "quick", "-k", SELECTION, "--fail-on-wrong")
N_CASES = 2 * 2 * 5  # models x organs x quick frames
XUNIT2_SUITE = {"name", "tests", "failures", "errors", "skipped", "time", "timestamp", "hostname"}


def run_pointing(folder: Path, shared_cache: Path, cholecseg8k: Path, *args: str) -> dict:
    """The real `pytest evals/pointing` in a subprocess -> its exit code, output, junit root and
    probe rows."""
    folder.mkdir()
    (folder / "junitprobe.py").write_text(PROBE_PLUGIN)
    link_shared_data(folder / "cache", shared_cache)
    env = {**os.environ, "PYTHONPATH": str(folder), "PROBE_FILE": str(folder / "probe.json")}
    env.pop("PYTEST_XDIST_WORKER", None)
    argv = [
        sys.executable,
        "-m",
        "pytest",
        str(REPO / "evals" / "pointing"),
        f"--rootdir={REPO}",
        f"--cholecseg8k={cholecseg8k}",
        f"--cache-dir={folder / 'cache'}",
        f"--results-dir={folder / 'results'}",
        "--run-id=junit",
        "--bootstrap=0",
        "-p",
        "no:cacheprovider",
        "-p",
        "junitprobe",
        f"--junitxml={folder / 'junit.xml'}",
        *ARGS,
        *args,
    ]
    done = subprocess.run(
        argv, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    output = done.stdout + done.stderr
    assert (folder / "junit.xml").exists(), output
    return {
        "ret": done.returncode,
        "output": output,
        "xml": folder / "junit.xml",
        "root": ET.parse(folder / "junit.xml").getroot(),
        "probe": json.loads((folder / "probe.json").read_text()),
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path, synthetic_cholecseg8k):
    """{"serial": run, "xdist": run}: the same selection, with its own cache each time."""
    base = tmp_path_factory.mktemp("junit")
    return {
        "serial": run_pointing(base / "serial", shared_cache, synthetic_cholecseg8k),
        "xdist": run_pointing(base / "xdist", shared_cache, synthetic_cholecseg8k, "-n", "2"),
    }


def cases_of(root: ET.Element) -> dict[tuple[str, str], ET.Element]:
    return {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}


def test_names_are_the_serial_ones_under_xdist_and_groups_stay_on_one_worker(runs):
    serial, xdist = cases_of(runs["serial"]["root"]), cases_of(runs["xdist"]["root"])
    assert len(serial) == N_CASES, runs["serial"]["output"]
    assert set(xdist) == set(serial), runs["xdist"]["output"][-3000:]
    assert not [n for _, n in xdist if "@" in n]
    assert "@" not in runs["xdist"]["output"]  # terminal names: the serial ones too

    probe = runs["xdist"]["probe"]
    assert {p["nodeid"] for p in probe} == {p["nodeid"] for p in runs["serial"]["probe"]}
    workers_of: dict[str, set[int]] = defaultdict(set)
    for p in probe:
        workers_of[p["group"]].add(p["pid"])
    assert None not in workers_of and len(workers_of) >= 4  # every case grouped; several groups
    assert all(len(pids) == 1 for pids in workers_of.values()), workers_of  # a group: one worker
    assert len({p["pid"] for p in probe}) == 2  # and both workers had groups


@pytest.mark.parametrize("mode", ["serial", "xdist"])
def test_broken_pipeline_is_an_error_and_a_wrong_answer_a_failure(runs, mode):
    run = runs[mode]
    assert run["ret"] == 1
    kinds: dict[str, set[str]] = defaultdict(set)
    for (_, name), case in cases_of(run["root"]).items():
        tags = {child.tag for child in case} - {"system-out", "system-err"}
        model = "breaks" if name.endswith("-breaks:x]") else "chance"
        kinds[f"{model}/{name.split('-')[1]}"] |= tags or {"pass"}
        out = case.findtext("system-out") or ""
        assert "vlmbench outcome" in out and "prediction:" in out and "target:" in out, name
        if "error" in tags:
            assert ": error" in out and "error: HTTP 503 after retries" in out
            assert "pipeline error: HTTP 503 after retries" in case.find("error").get("message")
    assert kinds["breaks/liver"] == {
        "error"
    }  # the broken model's liver questions: the harness broke
    assert kinds["breaks/gallbladder"] == {"pass"}
    assert {"failure", "pass"} <= kinds["chance/liver"] | kinds["chance/gallbladder"]
    assert "error" not in kinds["chance/liver"] | kinds["chance/gallbladder"]
    suite = run["root"].find("testsuite")
    assert suite.get("errors") == "5"  # the 5 frames' liver questions to the broken model
    assert "5 errors" in run["output"]


@pytest.mark.parametrize("mode", ["serial", "xdist"])
def test_junit_is_valid_for_jenkins_junit10_and_pytest_xunit2(runs, mode):
    run = runs[mode]
    xmlschema.XMLSchema(SCHEMA).validate(run["xml"])  # raises, naming the element, when invalid

    suite = run["root"].find("testsuite")
    assert set(suite.attrib) == XUNIT2_SUITE
    assert suite.get("name") == "vlmbench"
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["vlmbench.run_id"] == "junit"
    assert props["vlmbench.models"] == "breaks:x,chance"
    for case in suite.iter("testcase"):
        assert set(case.attrib) == {*families["xunit2"]["testcase"], "time"}  # pytest's xunit2
        assert case.find("properties") is None  # xunit2: no properties under a testcase
        assert {c.tag for c in case} <= {"failure", "error", "skipped", "system-out", "system-err"}


# -- the run's checks: gates, dry runs, nothing evaluated (rounds, pytester) -------------------

GONE_PROVIDER = """
from support.backends.base import Backend, BackendUnavailable, register_provider


@register_provider
class Gone(Backend):
    '''Passes the check at configure; its factory finds it cannot run (a plugin's requirement).'''

    provider, kind = "gone", "api"

    @classmethod
    def create(cls, name, model_id, opts):
        raise BackendUnavailable(f"{name}: its device is taken")
"""
GATES = "vlmbench.gates"
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture
def rounds(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """rounds(*args) -> (RunResult, junit root, junit path): 2 cases a model (one round of two
    sequences), with the repository's JUnit settings (pytest.ini)."""
    for var in (*KEY_VARS, "VLMBENCH_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    plant_rounds(pytester, GONE_PROVIDER)
    ini = [line for line in (REPO / "pytest.ini").read_text().splitlines() if "junit" in line]
    pytester.makefile(".ini", pytest="\n".join(["[pytest]", *ini]))

    def _run(*args: str) -> tuple[pytest.RunResult, ET.Element, Path]:
        xml = pytester.path / "junit.xml"
        result = pytester.runpytest_subprocess(
            *rounds_args(tmp_path), f"--junitxml={xml}", *args, timeout=120
        )
        assert xml.exists(), result.stdout.str()[-3000:]
        xmlschema.XMLSchema(SCHEMA).validate(xml)  # Jenkins' junit-10.xsd, every shape
        return result, ET.parse(xml).getroot(), xml

    return _run


def suites(root: ET.Element) -> dict[str, ET.Element]:
    assert root.tag == "testsuites"
    return {s.get("name"): s for s in root.findall("testsuite")}


def gate_cases(root: ET.Element) -> dict[str, ET.Element]:
    return {c.get("name"): c for c in suites(root)[GATES].findall("testcase")}


def last_line(result: pytest.RunResult) -> str:
    """pytest's stats line (`4 passed, 1 gate failed in 2.1s`), before the suite's wall time."""
    return next(line for line in reversed(result.stdout.lines) if line.startswith("="))


def test_each_gate_is_a_testcase_of_its_own_suite_failed_when_the_gate_fails(rounds):
    gates = (
        *("--min-metric", "rounds.accuracy=0.9"),  # chance: 0.75 on its 4 answers (seed 0)
        *("--min-metric", "rounds.accuracy@oracle=1"),
        *("--max-metric", "rounds.accuracy@chance=1"),
    )
    result, root, xml = rounds("--model=chance,oracle", *gates)
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    result.assert_outcomes(passed=4)
    assert "GATE FAILED: rounds.accuracy = 0.75 < 0.9 (model=chance" in out
    assert " 4 passed, 1 gate failed in " in last_line(result)

    found = suites(root)
    assert list(found) == ["vlmbench", GATES]  # pytest's own suite first, as pytest wrote it
    ours = found["vlmbench"]
    assert set(ours.attrib) == XUNIT2_SUITE
    assert (ours.get("tests"), ours.get("failures"), ours.get("errors")) == ("4", "0", "0")
    assert ours.find("properties") is not None and len(ours.findall("testcase")) == 4

    suite = found[GATES]
    assert set(suite.attrib) == XUNIT2_SUITE
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "0")
    cases = gate_cases(root)
    assert list(cases) == [
        "--min-metric rounds.accuracy=0.9",
        "--min-metric rounds.accuracy@oracle=1",
        "--max-metric rounds.accuracy@chance=1",
    ]
    failure = cases["--min-metric rounds.accuracy=0.9"].find("failure")
    assert failure.get("message") == failure.text
    assert failure.text.startswith("rounds.accuracy = 0.75 < 0.9 (model=chance")
    assert "oracle" not in failure.text  # the oracle's row passed
    for name, case in cases.items():
        assert case.get("classname") == GATES
        assert name == "--min-metric rounds.accuracy=0.9" or len(case) == 0  # passed: no child
    assert xml.read_text(encoding="utf-8").count("<?xml") == 1


def test_a_dry_run_reports_each_case_skipped_and_writes_its_estimate(rounds, tmp_path):
    result, root, _ = rounds("--model=gpt-4o,oracle", "--dry-run", "--fail-on-wrong")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out[-3000:]
    result.assert_outcomes(skipped=4)  # not "4 passed": nothing was evaluated
    assert "passed" not in last_line(result)
    assert "skipped 4: dry run" in result.stdout.lines
    assert "vlmbench: rounds dry run: requests to send, tokens and cost (USD)" in out
    table = (tmp_path / "results" / "rounds" / "r" / "dry_run.csv").read_text().splitlines()
    assert table[0].startswith("model,requests_to_send,cached,input_tokens,")
    rows = {line.split(",")[0]: line.split(",") for line in table[1:]}
    # 2 cases x 2, and their total
    assert {m: r[1] for m, r in rows.items()} == {"gpt-4o": "4", "oracle": "4", "total": "8"}

    assert list(suites(root)) == ["vlmbench"]  # no gate, no check: no suite of checks
    cases = list(root.iter("testcase"))
    assert len(cases) == 4
    for case in cases:
        skipped = case.find("skipped")
        assert skipped is not None and skipped.get("message") == "dry run", case.get("name")
        assert "vlmbench outcome" in (case.findtext("system-out") or "")  # recorded, then skipped


def test_skip_unavailable_with_nothing_evaluated_fails_naming_the_models_and_why(rounds):
    result, root, _ = rounds("--model=gemini-2.0-flash,gone:x", "--skip-unavailable")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    result.assert_outcomes(skipped=4)
    assert "NOTHING EVALUATED" in out
    lines = result.stdout.lines
    assert "skipped 2: gemini-2.0-flash: GEMINI_API_KEY or GOOGLE_API_KEY is not set" in lines
    assert "skipped 2: gone:x: its device is taken" in lines  # found by its factory, at first use
    assert " 4 skipped, 1 check failed in " in last_line(result)
    (case,) = gate_cases(root).values()
    assert case.get("name") == "--skip-unavailable"
    text = case.find("failure").text
    assert text.startswith("nothing evaluated: all 4 selected cases skipped under")
    assert "gone:x: its device is taken" in text and "GEMINI_API_KEY" in text
    assert suites(root)[GATES].get("failures") == "1"

    ok, root, _ = rounds("--model=oracle,gemini-2.0-flash", "--skip-unavailable")
    assert ok.ret == pytest.ExitCode.OK, ok.stdout.str()[-3000:]
    ok.assert_outcomes(passed=2, skipped=2)
    assert "NOTHING EVALUATED" not in ok.stdout.str()
    (case,) = gate_cases(root).values()
    assert case.get("name") == "--skip-unavailable" and len(case) == 0  # passed
