"""The pointing evaluation through the vendors' SDKs against the loopback server.

One script answers every protocol. The metrics a run through an SDK yields must equal those of the
same script run in-process (an `answers:` provider, registered by a plugin), so the SDK round
trip loses nothing; faults must change nothing but the number of attempts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from support.doubles.loopback import FAULT_KINDS, Faults, LoopbackServer, ScriptRequest
from unit.helpers.suite_runs import SHARED_PARTS, files_following_links, link_shared_data

# every test here runs the suite in a subprocess; one worker runs this module, so its costly
# module fixtures are built once, not once a worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("api_pointing")]

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

REPO = Path(__file__).resolve().parents[3]
POINTING = str(REPO / "evals" / "pointing")
KEY = "sk-loopback-SECRET-7f3a9c1e55d2"
URL_PASSWORD = "url-pw-SECRET-93b1d7"  # a password in an --api-base URL
PRESENT = {"Liver", "Fat", "Grasper", "Gallbladder", "Abdominal Wall"}
PROVIDERS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GEMINI_API_KEY",
}


def answer(texts: list[str]) -> str:
    """The scripted model: says present (pointing at the canvas centre) for five organs."""
    organ = re.findall(r'Organ: "([^"]+)"', texts[-1] if texts else "")
    name = organ[-1] if organ else "?"
    if name in PRESENT:
        return json.dumps({"name": name, "present": 1, "point_canvas": [384, 384]})
    return f'Sure. {{"name": "{name}", "present": 0, "point_canvas": null}}'


def script(request: ScriptRequest) -> str:
    return answer(list(request.texts))


SCRIPTED_PLUGIN = f"""
from support.backends.base import register_provider
from support.backends.scripted import ScriptedBackend
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_api_pointing import answer

@register_provider
class Answers(ScriptedBackend):
    provider = "answers"  # `answers:<anything>` answers with `answer`

    @classmethod
    def create(cls, name, model_id, opts):
        return ScriptedBackend(lambda r: answer([p.text for p in r.parts if p.text]), name=name)
"""


@pytest.fixture(scope="module")
def cholecseg8k(synthetic_cholecseg8k) -> Path:
    return synthetic_cholecseg8k


@pytest.fixture(autouse=True)
def shared_parts(tmp_path: Path, shared_cache: Path) -> None:
    """Each test's cache (tmp_path/cache) starts with the session's prepared tables and canvases
    (SHARED_PARTS): they hold no answer, so no test here reads them."""
    link_shared_data(tmp_path / "cache", shared_cache)


def argv(model: str, cholecseg8k: Path, tmp: Path, *extra: str) -> list[str]:
    return [
        POINTING,
        f"--rootdir={REPO}",
        f"--model={model}",
        f"--cholecseg8k={cholecseg8k}",
        f"--cache-dir={tmp / 'cache'}",
        f"--results-dir={tmp / 'results'}",
        "--run-id=r",
        "--bootstrap=200",
        "-p",
        "no:cacheprovider",
        "-m",
        "quick",
        "-k",
        "zero_shot",
        *extra,
    ]


def metrics(tmp: Path) -> pd.DataFrame:
    df = pd.read_csv(tmp / "results" / "pointing" / "r" / "summary.csv")
    return df.drop(columns=["model"])


def rows(tmp: Path) -> list[dict]:
    path = tmp / "results" / "pointing" / "r" / "raw_results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def expected(cholecseg8k, tmp_path_factory, shared_cache) -> pd.DataFrame:
    """The metrics the script implies: the same script, in-process, no SDK."""
    tmp = tmp_path_factory.mktemp("expected")
    link_shared_data(tmp / "cache", shared_cache)
    (tmp / "scriptedplugin.py").write_text(SCRIPTED_PLUGIN)
    env = {**os.environ, "PYTHONPATH": str(tmp)}
    cmd = [sys.executable, "-m", "pytest", *argv("answers:x", cholecseg8k, tmp), "-p"]
    proc = subprocess.run([*cmd, "scriptedplugin"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    df = metrics(tmp)
    assert 0 < df.query("organ == 'ALL'")["f1"].iloc[0] < 1  # a script with some errors
    return df


def run_pytest(args: list[str], provider: str, key: str | None = KEY, pythonpath=None, **kw):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    if key is not None:
        env[PROVIDERS[provider]] = key
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args], env=env, capture_output=True, text=True, **kw
    )


@pytest.fixture(scope="module")
def faulty_runs(cholecseg8k, tmp_path_factory, shared_cache):
    """faulty_runs(provider) -> (folder, run, server stats, server port): the zero-shot quick
    subset through `provider`'s SDK against a loopback that faults half the first attempts (every
    kind of fault, a slow answer past `--api-timeout` among them), each provider's run made once
    and read by the metrics test and the SDK-upgrade test (which reruns openai's from a copy of
    its cache)."""
    made: dict[str, tuple] = {}

    def _run(provider: str) -> tuple:
        if provider not in made:
            tmp = tmp_path_factory.mktemp(f"faulty_{provider}")
            link_shared_data(tmp / "cache", shared_cache)
            faults = Faults(rate=0.5, attempts=1, seed=3, retry_after_s=0.01, slow_s=1.5)
            with LoopbackServer(script, api_key=KEY, faults=faults, lifetime_s=240) as server:
                args = argv(
                    f"{provider}:loop-model",
                    cholecseg8k,
                    tmp,
                    f"--api-base={server.url}",
                    "--api-timeout=0.5",
                    "--api-retries=3",
                )
                proc = run_pytest(args, provider, timeout=240)
            made[provider] = (tmp, proc, server.stats, server.port)
        return made[provider]

    return _run


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_each_sdk_yields_the_scripted_metrics_through_faults(provider, expected, faulty_runs):
    """Every fault retried through the SDK: no case lost, no error cached, and the metrics are
    the script's."""
    tmp_path, proc, stats, _ = faulty_runs(provider)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert set(stats.faults) == set(FAULT_KINDS), stats.faults
    pd.testing.assert_frame_equal(metrics(tmp_path), expected)
    got = rows(tmp_path)
    assert len(got) == 60 and all(r["status"] != "error" for r in got)
    assert all(r["usage"]["input_tokens"] > 0 for r in got)
    assert "usage and cost per model" in proc.stdout
    with sqlite3.connect(tmp_path / "cache" / "responses.sqlite") as db:
        stored = [json.loads(r[0]) for r in db.execute("SELECT response FROM responses")]
    assert len(stored) == 60
    assert all(re.search(r'"present"', t) for s in stored for t in s["texts"])


def test_persistent_errors_are_reported_not_cached_and_resent(cholecseg8k, tmp_path):
    broken = Faults(rate=0.25, attempts=100, seed=1, kinds=("500",), retry_after_s=0.01)
    with LoopbackServer(script, api_key=KEY, faults=broken, lifetime_s=240) as server:
        args = argv("openai:loop", cholecseg8k, tmp_path, f"--api-base={server.url}")
        first = run_pytest([*args, "--api-retries=1"], "openai", timeout=240)
    errors = [r for r in rows(tmp_path) if r["status"] == "error"]
    assert first.returncode == 1 and errors
    assert all("500" in r["error"] or "InternalServer" in r["error"] for r in errors)
    assert f"{len(errors)} errors" in first.stdout  # the pipeline broke: <error>, not <failure>
    # the same server restarted (its address is in the cache identity), healed
    with LoopbackServer(script, api_key=KEY, lifetime_s=240, port=server.port) as healed:
        args = argv("openai:loop", cholecseg8k, tmp_path, f"--api-base={healed.url}")
        second = run_pytest(args, "openai", timeout=240)
    assert second.returncode == 0
    assert healed.stats.attempts == len(errors)  # only what had failed is sent again


def test_killed_run_resends_only_what_did_not_complete(cholecseg8k, tmp_path):
    with LoopbackServer(script, api_key=KEY, latency_s=0.15, lifetime_s=240) as server:
        args = argv("openai:loop", cholecseg8k, tmp_path, f"--api-base={server.url}")
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env["OPENAI_API_KEY"] = KEY
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", *args, "--concurrency=4"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while server.stats.answered < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    with sqlite3.connect(tmp_path / "cache" / "responses.sqlite") as db:
        done = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    assert 0 < done < 60
    with LoopbackServer(script, api_key=KEY, lifetime_s=240, port=server.port) as again:
        args = argv("openai:loop", cholecseg8k, tmp_path, f"--api-base={again.url}")
        second = run_pytest(args, "openai", timeout=240)
    assert second.returncode == 0, second.stdout[-2000:]
    assert again.stats.attempts == 60 - done


SDK_UPGRADE_PLUGIN = """
import openai

openai.__version__ = "99.0.0"  # what `pip install -U openai` changes as the suite sees it


def pytest_report_header(config):
    return f"openai sdk {openai.__version__}"
"""


def test_an_sdk_upgrade_resends_nothing(cholecseg8k, faulty_runs, tmp_path):
    """The cache identity is what the provider sees, not the SDK version: after an upgrade the
    same run is served from the cache and the server gets no request."""
    first_tmp, first, _, port = faulty_runs("openai")
    assert first.returncode == 0, first.stdout[-2000:]
    # a copy of the shared run's cache, which stays as it was (this test's cache already links
    # the shared parts)
    shared = shutil.ignore_patterns(*SHARED_PARTS)
    shutil.copytree(first_tmp / "cache", tmp_path / "cache", ignore=shared, dirs_exist_ok=True)
    (tmp_path / "sdkupgrade.py").write_text(SDK_UPGRADE_PLUGIN)
    with LoopbackServer(script, api_key=KEY, lifetime_s=240, port=port) as again:
        args = argv("openai:loop-model", cholecseg8k, tmp_path, f"--api-base={again.url}")
        second = run_pytest([*args, "-p", "sdkupgrade"], "openai", pythonpath=tmp_path, timeout=240)
    assert second.returncode == 0, second.stdout[-2000:]
    assert "openai sdk 99.0.0" in second.stdout
    assert again.stats.attempts == 0
    assert "model calls: 0 sent, 60 served from cache" in second.stdout


def test_the_key_appears_in_no_artifact(cholecseg8k, tmp_path):
    faults = Faults(rate=0.3, attempts=100, seed=5, kinds=("500", "429"), retry_after_s=0.01)
    with LoopbackServer(script, api_key=KEY, faults=faults, lifetime_s=240) as server:
        args = argv(
            "openai:loop",
            cholecseg8k,
            tmp_path,
            # credentials in a URL on the command line (argparse keeps the later --api-base, so
            # the run uses the server; the manifest records both arguments)
            f"--api-base=http://bob:{URL_PASSWORD}@127.0.0.1:9/v1",
            f"--api-base={server.url}",
            "--api-retries=1",
            f"--junitxml={tmp_path / 'junit.xml'}",
            f"--html={tmp_path / 'report.html'}",
            "--self-contained-html",
            "-rA",
        )
        proc = run_pytest(args, "openai", timeout=240)
    assert proc.returncode == 1  # some cases failed for good: their errors went everywhere
    scanned = 0
    for path in files_following_links(tmp_path):
        assert KEY.encode() not in path.read_bytes(), path
        assert URL_PASSWORD.encode() not in path.read_bytes(), path
        scanned += 1
    assert scanned >= 7  # junit, html, raw results, summary, usage, report, manifest, cache...
    assert KEY not in proc.stdout and KEY not in proc.stderr
    manifest = json.loads((tmp_path / "results" / "pointing" / "r" / "manifest.json").read_text())
    assert "--api-base=http://***@127.0.0.1:9/v1" in manifest["command"]["args"]  # redacted
    assert manifest["models"]["openai:loop"]["identity"]["endpoint"]  # the model was used


def test_missing_key_skips_with_the_variable_named(cholecseg8k, tmp_path):
    args = argv("gpt-4o-mini", cholecseg8k, tmp_path, "-rs", "--skip-unavailable")
    proc = run_pytest(args, "openai", key=None, timeout=240)
    assert proc.returncode == 1, proc.stdout[-2000:]  # nothing evaluated: a CI lane goes red
    assert "60 skipped" in proc.stdout and "1 check failed in" in proc.stdout
    assert "NOTHING EVALUATED" in proc.stdout and "OPENAI_API_KEY" in proc.stdout


def test_fewshot_requests_carry_interleaved_images(cholecseg8k, tmp_path):
    """Hard-negative few-shot requests reach the server as one turn: 3 example images, each with
    its example text and answer, then the query text and image, with the system prompt."""
    seen: list[ScriptRequest] = []

    def recording(request: ScriptRequest) -> str:
        seen.append(request)
        return script(request)

    with LoopbackServer(recording, api_key=KEY, lifetime_s=240) as server:
        args = argv("openai:loop", cholecseg8k, tmp_path, f"--api-base={server.url}")
        args = [a if a != "zero_shot" else "fewshot_hard_negatives and liver-" for a in args]
        proc = run_pytest(args, "openai", timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert len(seen) == 5
    for r in seen:
        assert r.n_images == 4 and r.system and "STRICT JSON" in r.system
        assert r.texts[0] == "Here are some examples:\n"
        assert [t.split(":")[0] for t in r.texts[1:7:2]] == ["Example 1", "Example 2", "Example 3"]
        assert all(t.startswith("Response: {") for t in r.texts[2:7:2])
        assert r.texts[-1].startswith('Now for the actual query: Organ: "Liver"')
