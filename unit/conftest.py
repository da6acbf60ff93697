"""The suite's own tests: offline always, pytester available."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from unit.helpers.suite_runs import link_shared_data

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
# an empty Hugging Face cache of the suite's own (children inherit it): what a model found there
# changes a run (surgvqa's `--surgvqa-metrics auto` scores BERTScore and NLI when roberta-large is
# cached), so no test sees the developer's models; a test that wants some installs its own
_EMPTY_HUB = Path(tempfile.gettempdir()) / "vlmbench-unit-empty-hub"  # nothing writes there
_EMPTY_HUB.mkdir(exist_ok=True)
os.environ["HF_HUB_CACHE"] = str(_EMPTY_HUB)
os.environ.setdefault("MPLBACKEND", "Agg")
# The suite runs pytest children (`pytest evals/...` in a subprocess): they skip hypothesis's
# plugin, which imports hypothesis at every terminal summary (~1 s a child here; the children
# never use it). See child_pytest_flags.
CHILD_PYTEST_FLAGS = ("-p", "no:hypothesispytest")


@pytest.fixture(scope="session", autouse=True)
def child_pytest_flags():
    """CHILD_PYTEST_FLAGS in PYTEST_ADDOPTS for the subprocesses the tests start. Set once the
    session runs, so neither this process's options nor its xdist workers' (started earlier)
    take them: the unit tests' own @given tests keep hypothesis's plugin. pytester clears
    PYTEST_ADDOPTS for its runs; run_suite passes the flags itself. Undone when the session
    ends."""
    flags = " ".join([os.environ.get("PYTEST_ADDOPTS", ""), *CHILD_PYTEST_FLAGS]).strip()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTEST_ADDOPTS", flags)
        yield


pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder for the session's synthetic datasets, shared by the xdist workers of one
    run (their base folders have one parent). Builds go through support.storage.files.build_once (a
    file lock, then a rename), so each dataset is built once per run, not once per test."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return base / "shared-cache"


@pytest.fixture(scope="session")
def synthetic_cholecseg8k(shared_cache: Path) -> Path:
    """The default synthetic CholecSeg8k (a raw tree), built once per run."""
    from support.evaluations.pointing.synthetic import ensure_cholecseg8k

    return ensure_cholecseg8k(shared_cache)


def suite_argv(
    evaluation: str, base: Path, shared_cache: Path, args: tuple[str, ...], run_id: str, cache: str
) -> list[str]:
    """The arguments of `pytest evals/<evaluation>` as run_suite runs it: the cache folder `cache`
    and results folder `results` under `base`, the cache's `synthetic/` linked to the session's
    shared one, a fixed run id and 200 bootstrap resamples."""
    link_shared_data(base / cache, shared_cache)
    return [
        str(REPO / "evals" / evaluation),
        f"--rootdir={REPO}",
        f"--cache-dir={base / cache}",
        f"--results-dir={base / 'results'}",
        f"--run-id={run_id}",
        "--bootstrap=200",
        "-p",
        "no:cacheprovider",
        *CHILD_PYTEST_FLAGS,
        *args,
    ]


@pytest.fixture
def run_suite(pytester: pytest.Pytester, tmp_path: Path, shared_cache: Path):
    """run_suite(evaluation, *args, run_id="r1", cache="cache") -> (RunResult, results folder):
    the real `pytest evals/<evaluation>` in a subprocess, with this test's own cache (a folder
    name under tmp_path) and results folder, a fixed run id and 200 bootstrap resamples. The
    cache's `synthetic/` links to the session's shared one: the default datasets are content a
    test never changes, and building them is most of a fresh run's time."""

    def _run(evaluation: str, *args: str, run_id: str = "r1", cache: str = "cache"):
        argv = suite_argv(evaluation, tmp_path, shared_cache, args, run_id, cache)
        return pytester.runpytest_subprocess(*argv, timeout=300), tmp_path / "results"

    return _run


def child_pytest(where: Path, argv: list[str], timeout_s: float = 300) -> pytest.RunResult:
    """`pytest *argv` in a subprocess started in `where`, in the environment pytester gives its
    subprocess runs (HOME is `where`, no PYTEST_ADDOPTS, no colour): runpytest_subprocess for
    fixtures wider than a test, which pytester (function-scoped) cannot serve."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "TOX_ENV_DIR")}
    env |= {"HOME": str(where), "USERPROFILE": str(where), "PY_COLORS": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(where), env.get("PYTHONPATH", "")]))
    basetemp = tempfile.mkdtemp(prefix="runpytest-", dir=where)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", f"--basetemp={basetemp}", *argv],
        cwd=where,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    took = time.monotonic() - start
    return pytest.RunResult(
        proc.returncode, proc.stdout.splitlines(), proc.stderr.splitlines(), took
    )


@pytest.fixture(scope="module")
def module_run_suite(request: pytest.FixtureRequest, tmp_path_factory, shared_cache: Path):
    """run_suite for module fixtures: the same child runs and arguments, under one folder of the
    module's own (its cache names and `results`). A child run that several tests read is run once
    in a module fixture built on this; the module is then marked `xdist_group` so its tests share
    one worker."""
    base = tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2])

    def _run(evaluation: str, *args: str, run_id: str = "r1", cache: str = "cache"):
        argv = suite_argv(evaluation, base, shared_cache, args, run_id, cache)
        return child_pytest(base, argv), base / "results"

    return _run
