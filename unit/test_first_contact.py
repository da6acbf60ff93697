"""What a first run meets (issue 24, items 2, 3 and 7): a model that cannot run here stops the
run with a usage error (exit 4) unless --skip-unavailable, whose skip reasons the terminal prints
without -rs; a missing or malformed data path is a usage error naming the option, the path and
the fix; the cache and results land in pytest's rootdir wherever pytest is started."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

# the data checks' lazy imports, made at collection: a module first imported during a pytester
# test is dropped afterwards, and numpy's extensions cannot be imported a second time
import support.evaluations.nyu_distance.mat
import support.evaluations.pointing.download  # noqa: F401
from support import evaluations
from support.backends import registry
from support.backends.gemini import GeminiBackend
from support.backends.transformers_local import TransformersBackend
from support.contract.evaluation import OptionError
from support.settings import OutputSettings, RunSettings
from unit.helpers.rounds_runs import CONFTEST, TEST_MODULE, plant_rounds, rounds_args

HERE = Path(__file__).parent
SECRET = "sk-first-contact-0123456789"  # a key value that must never be printed
PYTHONPATH = os.environ.get("PYTHONPATH", "")
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (*KEY_VARS, "VLMBENCH_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def rounds(pytester: pytest.Pytester, tmp_path: Path, no_keys: None):
    """rounds(*args) -> RunResult: the small rounds evaluation through the real suite."""
    plant_rounds(pytester)

    def _run(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess(*rounds_args(tmp_path), *args, timeout=120)

    return _run


# -- item 2: a model that cannot run here -----------------------------------------------------


@pytest.mark.slow
def test_a_model_without_its_key_stops_the_run_naming_the_variable(rounds, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)  # set, and never printed
    result = rounds("--model=oracle,gpt-4o-mini,claude-sonnet-4-20250514")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    err = result.stderr.str()
    assert "--model gpt-4o-mini cannot run here: OPENAI_API_KEY is not set" in err
    assert "--skip-unavailable" in err
    assert "claude" not in err  # its key is set
    assert SECRET not in err + result.stdout.str()


@pytest.mark.slow
def test_skip_unavailable_skips_and_the_summary_gives_the_reason_without_rs(rounds):
    result = rounds("--model=oracle,gemini-2.0-flash", "--skip-unavailable")
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.assert_outcomes(passed=2, skipped=2)  # 2 sequences x 1 round, per model
    lines = result.stdout.lines
    want = "skipped 2: gemini-2.0-flash: GEMINI_API_KEY or GOOGLE_API_KEY is not set"
    assert want in lines
    assert sum(line.startswith("skipped ") for line in lines) == 1


@pytest.mark.slow
def test_a_run_without_skips_prints_no_skip_summary(rounds):
    result = rounds("--model=oracle")
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert "skipped cases" not in result.stdout.str()
    assert not any(line.startswith("skipped ") for line in result.stdout.lines)


def test_availability_names_the_variable_the_install_or_the_option(monkeypatch, no_keys):
    availability, BackendOptions = registry.availability, registry.BackendOptions
    assert availability("oracle") is None and availability("planted:*=0.5") is None
    assert availability("gpt-4o") == "gpt-4o: OPENAI_API_KEY is not set"
    assert "ANTHROPIC_API_KEY" in availability("anthropic:claude-x")
    assert "GEMINI_API_KEY or GOOGLE_API_KEY" in availability("google:gemini-x")
    monkeypatch.setenv("GOOGLE_API_KEY", SECRET)
    assert availability("google:gemini-x") is None
    assert "--api-base" in availability("openai-compatible:m")
    assert availability("openai-compatible:m", BackendOptions(api_base="http://127.0.0.1:9")) in (
        None,
        'openai-compatible:m: the openai package is not installed: pip install -e ".[api]"',
    )
    monkeypatch.setattr(GeminiBackend, "needs", ("no_such_sdk_for_vlmbench",))
    why = availability("google:gemini-x")
    assert why == (
        "google:gemini-x: the no_such_sdk_for_vlmbench package is not installed: "
        'pip install -e ".[api]"'
    )
    monkeypatch.setattr(TransformersBackend, "needs", ())
    why = availability("hf:/no/such/model")
    assert why == "hf:/no/such/model: model folder /no/such/model does not exist"


def test_skip_summary_is_short_and_counts_the_rest():
    from fixtures.skips import summary_lines

    reasons = Counter({f"reason {i}": 10 - i for i in range(8)})
    lines = summary_lines(reasons)
    assert lines[0] == "skipped 10: reason 0" and len(lines) == 6
    assert lines[-1] == "skipped 12: 3 other reasons (-rs lists every skip)"  # 5 + 4 + 3


# -- item 3: data paths -----------------------------------------------------------------------


def configure(name: str, tmp_path: Path, **values):
    run = RunSettings(
        output=OutputSettings(cache_dir=tmp_path / "cache", results_dir=tmp_path / "results")
    )
    return evaluations.spec(name).configure(values, run)


@pytest.mark.parametrize(
    ("evaluation", "dest", "fix"),
    [
        ("pointing", "cholecseg8k", "the folder holding videoNN/"),
        ("pointing", "pointing_prepared", "prepared folder"),
        ("pgt", "pgt_dataset", "a dataset CSV"),
        ("pgt", "pgt_root", "data/ folder"),
        ("pgt", "pgt_image_root", "image paths are relative to"),
        ("nyu_distance", "nyu_mat", "python -m support.evaluations.nyu_distance.download"),
        ("nyu_distance", "nyu_dir", "an extracted NYU folder"),
        ("surgvqa", "surgvqa_root", "SurgVU data"),
        ("dynamic", "dynamic_data", "AnyPoint objects folder"),
    ],
)
def test_a_missing_data_path_names_the_option_the_path_and_the_fix(tmp_path, evaluation, dest, fix):
    missing = str(tmp_path / "nope.csv")
    value = [missing] if dest == "pgt_image_root" else missing
    with pytest.raises(OptionError) as info:
        configure(evaluation, tmp_path, **{dest: value})
    flag = "--" + dest.replace("_", "-")
    assert str(info.value).startswith(f"{flag} {missing}: no such"), info.value
    assert fix in str(info.value)


def test_a_registered_pgt_dataset_names_the_file_it_looked_for(tmp_path):
    with pytest.raises(OptionError, match=r"--pgt-dataset df40: .*10k_sample_df40.csv: no such"):
        configure("pgt", tmp_path, pgt_dataset="df40", pgt_root=str(tmp_path))


def test_malformed_data_files_are_usage_errors(tmp_path):
    mat = tmp_path / "nyu_depth_v2_labeled.mat"
    mat.write_bytes(b"not a mat file at all")
    with pytest.raises(OptionError, match=f"--nyu-mat {mat}: not an HDF5 / MATLAB v7.3 file"):
        configure("nyu_distance", tmp_path, nyu_mat=str(mat))
    csv = tmp_path / "mine.csv"
    csv.write_text("picture,truth\na.png,real\n")
    with pytest.raises(OptionError, match=f"--pgt-dataset {csv}: no 'image_path' column"):
        configure("pgt", tmp_path, pgt_dataset=str(csv))
    csv.write_text("")
    with pytest.raises(OptionError, match="empty CSV"):
        configure("pgt", tmp_path, pgt_dataset=str(csv))
    (tmp_path / "empty").mkdir()
    with pytest.raises(OptionError, match=r"--cholecseg8k .*empty: holds no CholecSeg8k data"):
        configure("pointing", tmp_path, cholecseg8k=str(tmp_path / "empty"))
    with pytest.raises(OptionError, match=r"--nyu-dir .*empty: no rgb/ or depth/"):
        configure("nyu_distance", tmp_path, nyu_dir=str(tmp_path / "empty"))
    with pytest.raises(OptionError, match=r"--cholecseg8k someone/Data: not downloaded.*--repo"):
        configure("pointing", tmp_path, cholecseg8k="someone/Data")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("evaluation", "option"),
    [("pointing", "--cholecseg8k"), ("pgt", "--pgt-dataset"), ("nyu_distance", "--nyu-mat")],
)
def test_a_missing_data_path_stops_the_run_with_exit_4(run_suite, tmp_path, evaluation, option):
    missing = tmp_path / ("nope.csv" if option == "--pgt-dataset" else "nope")
    result, _ = run_suite(evaluation, f"{option}={missing}", "-m", "quick", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    assert f"{option} {missing}: no such" in result.stderr.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


# -- item 7: the cache and results in the rootdir ---------------------------------------------


@pytest.mark.slow
def test_a_run_started_in_a_subfolder_writes_under_the_rootdir(tmp_path, no_keys):
    root = tmp_path / "repo"
    sub = root / "evals"
    sub.mkdir(parents=True)
    shutil.copy(HERE.parent / "examples" / "rounds_evaluation.py", root / "rounds_evaluation.py")
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "conftest.py").write_text(CONFTEST)
    (sub / "test_rounds.py").write_text(TEST_MODULE)
    base = [sys.executable, "-m", "pytest", "--model=oracle", "--rounds=1", "--rounds-batch=2"]
    base += ["--bootstrap=0", "--run-id=r", "-p", "no:cacheprovider", "-p", "no:randomly"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), PYTHONPATH]))}

    done = subprocess.run(base, cwd=sub, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (root / ".vlmbench-cache" / "responses.sqlite").is_file()
    assert (root / "results" / "rounds" / "r" / "raw_results.jsonl").is_file()
    assert not (sub / ".vlmbench-cache").exists() and not (sub / "results").exists()

    # paths the user gives stay relative to where pytest started, as on any command line
    env["VLMBENCH_CACHE_DIR"] = "env-cache"
    again = subprocess.run(
        [*base, "--results-dir=out"], cwd=sub, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert (sub / "env-cache" / "responses.sqlite").is_file()
    assert (sub / "out" / "rounds" / "r" / "raw_results.jsonl").is_file()
