"""The reporting plugin end to end, through pytester subprocess runs of the real pointing suite.

Each run uses the synthetic CholecSeg8k sample (built once per test session) and its own cache and
results folders, so runs are independent unless a test shares a cache on purpose. One run, the
default models' quick subset (`serial`), is read by several tests; it builds its cache cold, and
the other runs start with a copy of its prepared tables (see `run`).
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

# every test here runs the suite in a subprocess; `serial` is one run for the module's tests
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_plugin")]

METRICS = ["accuracy", "precision", "recall", "f1", "pointing_accuracy", "point_hit_rate"]


@pytest.fixture(scope="session")
def cholecseg8k(synthetic_cholecseg8k) -> Path:
    return synthetic_cholecseg8k


@pytest.fixture(scope="module")
def serial(module_run_suite, cholecseg8k: Path) -> tuple[pytest.RunResult, Path]:
    """The default models (oracle and chance) on the quick subset, without the response cache:
    (RunResult, its pointing run folder). The module's first run, from a cold cache folder."""
    data = f"--cholecseg8k={cholecseg8k}"
    result, results = module_run_suite("pointing", data, "-m", "quick", "--no-cache", run_id="s")
    return result, results / "pointing" / "s"


@pytest.fixture
def run(run_suite, cholecseg8k: Path):
    """run(*args, cache="c") -> (RunResult, results folder of the pointing run). A cache folder a
    test has not used yet holds no responses; its prepared tables and canvases are the session's
    (unit.helpers.suite_runs.SHARED_PARTS)."""

    def _run(*args: str, cache: str = "cache", run_id: str = "r1", plugins: str | None = None):
        extra = ["-p", plugins] if plugins else []
        data = f"--cholecseg8k={cholecseg8k}"
        result, results = run_suite("pointing", data, *args, *extra, run_id=run_id, cache=cache)
        return result, results / "pointing" / run_id

    return _run


def summary(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "summary.csv")


def raw(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "raw_results.jsonl").read_text().splitlines()]


def test_oracle_reads_one_on_every_metric(serial):
    """The default models' run (oracle and chance): the oracle's rows of each table."""
    result, out = serial
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2 * 5 * 12 * 3)  # both models; chance's wrong ones pass too
    s = summary(out)
    assert set(s["model"]) == {"oracle", "chance"}
    s = s[s["model"] == "oracle"]
    assert set(s["condition"]) == {"zero_shot", "fewshot_standard", "fewshot_hard_negatives"}
    overall = s[s["organ"] == "ALL"]
    assert len(overall) == 3
    for m in METRICS:
        assert (overall[m] == 1.0).all(), m
    for m in METRICS:  # per organ: 1.0 wherever the metric is defined
        assert all(v == 1.0 for v in s[m] if not math.isnan(v)), m
    assert (s["unparsable_rate"] == 0).all()
    assert {p.name for p in out.iterdir()} >= {
        "raw_results.jsonl",
        "summary.csv",
        "report.md",
        "f1_by_organ.png",
    }
    rows = [r for r in raw(out) if r["model"] == "oracle"]
    assert len(rows) == 180 and all(r["status"] == "correct" for r in rows)
    assert {"prompt_hash", "raw", "prediction", "target"} <= set(rows[0])
    assert not {"latency_s", "cached", "backend_calls", "cache_hits"} & set(rows[0])  # calls.csv
    calls = pd.read_csv(out / "calls.csv").query("model == 'oracle'")
    assert len(calls) == 180 and (calls["latency_s"] >= 0).all()
    report = (out / "report.md").read_text()
    assert "## Overall" in report and "Best and worst organs" in report


def test_chance_sits_near_chance_with_intervals(serial):
    """The default models' run (oracle and chance): chance's rows."""
    result, out = serial
    assert result.ret == 0
    overall = summary(out).query("organ == 'ALL' and model == 'chance'")
    assert len(overall) == 3  # one a condition
    # presence is a fair coin: accuracy near 0.5, well away from 1
    assert overall["accuracy"].between(0.35, 0.65).all(), overall["accuracy"]
    assert (overall["pointing_accuracy"] < 0.6).all()
    assert (overall["accuracy_lo"] < overall["accuracy"]).all()
    assert (overall["accuracy"] < overall["accuracy_hi"]).all()
    text = result.stdout.str()
    assert "95% bootstrap intervals" in text and "[" in text


def test_reruns_are_byte_identical_serial_xdist_and_cached(run, serial):
    """`serial` (no cache), then the same run under xdist into a fresh cache, then once more
    served from that cache (what xdist workers wrote, a serial run reads)."""
    first, out1 = serial
    parallel, out2 = run("-m", "quick", "-n", "2", "-v", run_id="xdist", cache="fresh")
    cached, out3 = run("-m", "quick", run_id="cached", cache="fresh")  # all from the cache
    assert first.ret == parallel.ret == cached.ret == 0
    assert "2 workers" in parallel.stdout.str()
    # each group runs on one worker: every request is sent exactly once, none twice
    assert "model calls: 360 sent, 0 served from cache" in parallel.stdout.str()
    assert "model calls: 0 sent, 360 served from cache" in cached.stdout.str()
    engine = parallel.stdout.str().split("vlmbench: engine")[1]  # per-worker stats, printed once
    assert "gw0" in engine and "gw1" in engine
    for name in ("raw_results.jsonl", "summary.csv", "comparisons.csv"):
        assert (
            (out1 / name).read_bytes() == (out2 / name).read_bytes() == (out3 / name).read_bytes()
        ), name
    # what differs between the runs is in calls.csv only
    calls = pd.read_csv(out3 / "calls.csv")
    assert len(calls) == 360 and calls["cached"].all()
    assert not pd.read_csv(out2 / "calls.csv")["cached"].any()


def test_min_metric_sets_exit_status(run):
    quick = ("-m", "quick", "-k", "liver or gallbladder", "--bootstrap=0")
    ok, _ = run("--model=oracle", *quick, "--min-metric", "pointing.f1=0.99")
    assert ok.ret == 0
    bad, _ = run("--model=chance", *quick, "--min-metric", "pointing.f1=0.99")
    assert bad.ret == 1
    assert "GATE FAILED: pointing.f1" in bad.stdout.str()
    typo, _ = run("--model=oracle", *quick, "--min-metric", "pointing.nope=1")  # fails alone
    assert typo.ret == 1
    assert "GATE FAILED: --min-metric pointing.nope: unknown metric" in typo.stdout.str()


def test_a_gate_names_the_model_it_applies_to(run):
    """docs/options.md's CI gate: the default models, a gate on the oracle only."""
    args = ("-m", "quick", "-k", "liver", "--bootstrap=0")
    ok, _ = run(*args, "--min-metric", "pointing.f1@oracle=0.6")
    assert ok.ret == 0, ok.stdout.str()
    assert "no intervals: --bootstrap 0" in ok.stdout.str()
    assert "95% bootstrap" not in ok.stdout.str()
    bad, _ = run(*args, "--min-metric", "pointing.f1@chance=0.99")
    assert bad.ret == 1 and "(model=chance" in bad.stdout.str()
    assert "(model=oracle" not in bad.stdout.str()
    nobody, _ = run(*args, "--min-metric", "pointing.f1@gpt-4o=0.5")  # fails alone
    assert nobody.ret == 1 and "no outcomes of model gpt-4o" in nobody.stdout.str()
    wrong, _ = run(*args, "--min-metric", "pointing.f1@=0.5")
    assert wrong.ret == pytest.ExitCode.USAGE_ERROR


def test_worksteal_is_a_usage_error_that_says_why(run):
    result, _ = run("-m", "quick", "-n", "2", "--dist", "worksteal")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--dist worksteal would split an evaluation's groups" in result.stderr.str()


def test_fail_on_wrong(run, serial):
    """Without --fail-on-wrong (`serial`), chance's wrong answers pass; with it they fail."""
    lenient, out = serial
    assert lenient.ret == 0
    assert "wrong" in {r["status"] for r in raw(out) if r["model"] == "chance"}
    strict, _ = run("--model=chance", "-m", "quick", "-k", "liver", "--fail-on-wrong")
    assert strict.ret == 1
    outcomes = strict.parseoutcomes()
    assert outcomes["failed"] > 0 and outcomes["passed"] > 0


def test_selection_by_id_parts(run):
    result, out = run("-k", "liver-zero_shot and oracle", "-m", "quick")
    assert result.ret == 0
    result.assert_outcomes(passed=5)
    ids = [r["case_id"] for r in raw(out)]
    assert all(i.endswith("-liver-zero_shot-oracle") for i in ids)


def test_junit_and_html_carry_cases_and_metrics(run, tmp_path):
    junit, html = tmp_path / "junit.xml", tmp_path / "report.html"
    result, _ = run(
        "--model=oracle",
        "-m",
        "quick",
        "-k",
        "gallbladder",
        f"--junitxml={junit}",
        f"--html={html}",
        "--self-contained-html",
    )
    assert result.ret == 0
    cases = ET.parse(junit).getroot().iter("testcase")
    first = next(cases)
    assert first.find("properties") is None  # xunit2: the outcome is the case's <system-out>
    out = [line.strip().split(": ", 1) for line in first.findtext("system-out").splitlines()]
    fields = {line[0].split()[0]: line[1] for line in out if len(line) == 2}
    assert fields["vlmbench"] == "correct"  # `vlmbench outcome <case id>: correct`
    assert json.loads(fields["target"])["present"] in (0, 1)
    assert "present" in json.loads(fields["prediction"])
    page = html.read_text()
    assert "vlmbench: pointing (95% bootstrap intervals)" in page
    assert "data:image/png;base64" in page  # the F1 plot in the summary
    assert page.count("image/jpeg") >= 15  # one canvas picture per case
    assert "point_canvas" in page  # raw responses


FLAKY_PLUGIN = '''
import os
from support.backends.base import Backend, BackendError, register_provider
from support.backends.reference import OracleBackend
from support.types import Response

@register_provider
class Flaky(Backend):
    """Oracle answers, except liver questions fail while FLAKY_FAIL is set."""
    provider, kind = "flaky", "api"
    @classmethod
    def create(cls, name, model_id, opts):
        return cls(name)
    def __init__(self, name):
        self.name = name
        self.identity = {"provider": "flaky"}
        self.reads_hints = True
        self.oracle = OracleBackend(name)
    async def generate(self, request):
        if os.environ.get("FLAKY_FAIL") and '"Liver"' in (request.parts[-2].text or ""):
            raise BackendError("HTTP 503 after retries")
        return await self.oracle.generate(request)
'''


def test_backend_errors_fail_the_case_are_reported_and_not_cached(run, pytester, monkeypatch):
    pytester.makepyfile(flakyplugin=FLAKY_PLUGIN)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    monkeypatch.setenv("FLAKY_FAIL", "1")
    args = ("--model=flaky:x", "-m", "quick", "-k", "zero_shot")
    broken, out = run(*args, plugins="flakyplugin", run_id="broken")
    assert broken.ret == 1
    broken.assert_outcomes(passed=5 * 11, errors=5)  # the pipeline broke: setup errors
    assert "pipeline error: HTTP 503 after retries" in broken.stdout.str()
    s = summary(out).query("organ == 'Liver'")
    assert s["n_error"].tolist() == [5] and s["n"].tolist() == [0]
    monkeypatch.delenv("FLAKY_FAIL")
    healed, out2 = run(*args, plugins="flakyplugin", run_id="healed")
    assert healed.ret == 0
    assert "model calls: 5 sent, 55 served from cache" in healed.stdout.str()
    assert (summary(out2).query("organ == 'ALL'")["f1"] == 1.0).all()


PEAK_PLUGIN = '''
import asyncio, os
from support.backends.base import register_provider
from support.backends.reference import OracleBackend

@register_provider
class Peak(OracleBackend):
    """Oracle answers once 8 requests are in flight (or after 0.5 s, so a run that sends one at
    a time still ends); writes the peak number of requests in flight per process. Waiting for the
    count, not a fixed sleep, keeps the measure independent of how loaded the machine is."""
    provider, kind = "peak", "api"
    in_flight = peak = 0
    @classmethod
    def create(cls, name, model_id, opts):
        return cls(name)
    async def generate(self, request):
        Peak.in_flight += 1
        Peak.peak = max(Peak.peak, Peak.in_flight)
        with open(os.path.join(os.environ["PEAK_DIR"], f"{os.getpid()}.txt"), "w") as f:
            f.write(str(Peak.peak))
        deadline = asyncio.get_running_loop().time() + 0.5
        while Peak.peak < 8 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.005)
        Peak.in_flight -= 1
        return await super().generate(request)
'''


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_cases_of_a_group_run_concurrently(run, pytester, monkeypatch, tmp_path, workers):
    """Prefetch starts a whole group at once, with and without xdist (loadgroup); the backend
    sees up to --concurrency requests in flight, not one at a time."""
    pytester.makepyfile(peakplugin=PEAK_PLUGIN)
    peaks = tmp_path / "peaks"
    peaks.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    monkeypatch.setenv("PEAK_DIR", str(peaks))
    args = ("--model=peak:x", "-m", "quick", "-k", "zero_shot", "--concurrency=8", *workers)
    result, _ = run(*args, plugins="peakplugin")
    assert result.ret == 0
    values = [int(p.read_text()) for p in peaks.iterdir()]
    assert len(values) == (2 if workers else 1)
    assert all(v == 8 for v in values), values
