"""`--junitxml` that CI tools can trust, through two subprocess runs of the real pointing suite
(one serial, one under `-n 2`): the same test names in both, a group's cases on one worker, a
broken pipeline as `<error>` and a wrong answer under --fail-on-wrong as `<failure>`, each case's
outcome in its `<system-out>`, and files valid against Jenkins' xunit junit-10.xsd
(unit/schemas/) and pytest's own xunit2 rules."""

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

pytestmark = pytest.mark.slow  # every test here runs the suite in a subprocess

REPO = Path(__file__).resolve().parents[1]
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
    (folder / "cache").mkdir()
    (folder / "cache" / "synthetic").symlink_to(
        shared_cache / "synthetic", target_is_directory=True
    )
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
