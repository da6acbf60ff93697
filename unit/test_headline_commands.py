"""The README's headline commands say what they do (issue 39, item 4): its `-k` example selects
the liver alone (not Liver Ligament), `-n N` with more workers than cores warns once at
configure, a vLLM model on a machine without vLLM and without a GPU says a GPU or vLLM's CPU
build is needed (naming the section of docs/local-models.md), and plain `pytest` runs what the
README says (pytest.ini's testpaths)."""

from __future__ import annotations

import configparser
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from fixtures import distribution
from support.backends import registry
from support.backends.vllm_local import CPU_BUILD_DOC, gpu_visible, vllm_missing

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
HAS_VLLM = importlib.util.find_spec("vllm") is not None


def headline(prefix: str) -> list[str]:
    """The arguments of the README's first command line starting with `prefix` (its comment
    dropped)."""
    for line in README.splitlines():
        if line.startswith(prefix):
            return shlex.split(line, comments=True)
    raise AssertionError(f"no README line starts with {prefix!r}")


# -- -k ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_readme_k_example_selects_the_liver_alone(run_suite) -> None:
    args = headline("pytest evals/pointing -k")
    expression = args[args.index("-k") + 1]
    result, _ = run_suite("pointing", "-k", expression, "--collect-only", "-q")
    ids = [line for line in result.stdout.lines if "::test_pointing[" in line]
    organs = {re.search(r"\[s\d+-([a-z_]+)-", i).group(1) for i in ids}
    assert organs == {"liver"}, organs
    assert "liver and not ligament" in README  # the prose names the same expression


# -- -n ------------------------------------------------------------------------------------------


def test_more_workers_than_cores_is_named_with_what_to_do() -> None:
    note = distribution.oversubscribed(8, 2)
    assert note is not None
    assert note.startswith("-n 8 on 2 CPU cores: each xdist worker loads the run's evaluations")
    assert "use -n 2, -n auto, or no -n" in note
    assert distribution.oversubscribed(2, 2) is None
    assert distribution.oversubscribed(1, 4) is None
    assert distribution.usable_cores() >= 1


class Recorded:
    """A plugin that keeps the messages of pytest's recorded warnings (configure-time warnings
    go to the `pytest_warning_recorded` hook, which the terminal reporter prints)."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def pytest_warning_recorded(self, warning_message: warnings.WarningMessage) -> None:
        self.messages.append(str(warning_message.message))


def configure_warnings(pytester: pytest.Pytester, *args: str, worker: bool = False) -> list[str]:
    """The warnings `distribution.pytest_configure` records for a command line."""
    config = pytester.parseconfig(*args)
    if worker:
        config.workerinput = {"workerid": "gw0", "vlmbench_dist": "loadgroup"}  # type: ignore[attr-defined]
    recorded = Recorded()
    config.pluginmanager.register(recorded)
    distribution.pytest_configure(config)
    return recorded.messages


def test_the_controller_warns_once_at_configure(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(distribution, "usable_cores", lambda: 2)  # the machine, not the rule
    assert configure_warnings(pytester, "-n", "3") == [distribution.oversubscribed(3, 2)]
    assert configure_warnings(pytester, "-n", "2") == []  # as many workers as cores
    assert configure_warnings(pytester) == []  # serial
    assert configure_warnings(pytester, "-n", "3", worker=True) == []  # the controller warns


# -- vLLM without vLLM, without a GPU ------------------------------------------------------------


def test_a_gpu_is_seen_by_its_device_node(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    assert not gpu_visible({}, dev)
    (dev / "nvidiactl").touch()  # the driver's control node alone is no GPU
    assert not gpu_visible({}, dev)
    (dev / "nvidia0").touch()
    assert gpu_visible({}, dev)
    assert gpu_visible({"CUDA_VISIBLE_DEVICES": "0"}, dev)
    assert not gpu_visible({"CUDA_VISIBLE_DEVICES": ""}, dev)
    assert not gpu_visible({"CUDA_VISIBLE_DEVICES": "-1"}, dev)
    (dev / "nvidia0").unlink()
    (dev / "kfd").touch()  # ROCm
    assert gpu_visible({}, dev)


def test_the_message_without_a_gpu_names_the_cpu_build_and_its_section() -> None:
    message = vllm_missing("qwen25-vl-7b", gpu=False)
    assert message.startswith("qwen25-vl-7b: the vllm package is not installed, and no GPU")
    assert "vLLM needs a GPU" in message and "vLLM's CPU build" in message
    doc, _, section = CPU_BUILD_DOC.partition(", ")
    assert CPU_BUILD_DOC in message
    headings = (REPO / doc).read_text(encoding="utf-8").splitlines()
    assert f"## {section.strip(chr(34))}" in headings  # the section it names exists
    with_gpu = vllm_missing("qwen25-vl-7b", gpu=True)
    assert with_gpu == 'qwen25-vl-7b: the vllm package is not installed: pip install -e ".[vllm]"'


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here: a vLLM model is available")
def test_a_vllm_model_on_a_cpu_only_machine_says_what_is_missing(tmp_path: Path) -> None:
    assert registry.availability("qwen25-vl-7b") == vllm_missing("qwen25-vl-7b")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no GPU visible, whatever the machine
    env.pop("PYTEST_ADDOPTS", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--model=qwen25-vl-7b",
         "evals/pgt", f"--cache-dir={tmp_path / 'cache'}", f"--results-dir={tmp_path / 'r'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stderr[-2000:]
    assert "no GPU is visible here: vLLM needs a GPU" in result.stderr
    assert CPU_BUILD_DOC in result.stderr
    assert "Traceback" not in result.stdout + result.stderr


# -- plain pytest ---------------------------------------------------------------------------------


def test_plain_pytest_runs_the_suites_own_tests() -> None:
    ini = configparser.ConfigParser()
    ini.read(REPO / "pytest.ini", encoding="utf-8")
    assert ini["pytest"]["testpaths"].split() == ["unit"]
    assert "Plain `pytest`, with no path, runs the suite's own tests (`unit/`" in README
