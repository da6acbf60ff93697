"""Where a `python:<module>:<Factory>` model's module is imported from (issue 54, item 6).

The module is found on the import path, else in the working folder; the working folder is on
sys.path only while that module imports, so the suite's own optional imports (bpe_openai,
vllm, ...: packages that may not be installed) are never served by a file planted beside the
command. End to end: plain `pytest` in a folder holding the model, a module beside it, and
planted modules named like the suite's optional packages, each of which leaves a marker file
when it is imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

from support.backends import python_model
from unit.helpers.suite_runs import link_shared_data

REPO = Path(__file__).resolve().parents[2]
# a pointing answer the parser reads (a JSON verdict), so the model's cases are scored
ANSWER = '{"name": "Liver", "present": 0, "point_canvas": null}'
LEAKED = "the working folder is on sys.path"  # what the model answers if it still is

# the model: it imports a module beside it at import time, and says whether the working folder
# is on sys.path when it is called (in the xdist workers too)
MODEL = """
    import os
    import sys

    from {helper} import ANSWER


    class F:
        modalities = ("text", "image")

        def generate(self, request):
            here = os.getcwd()
            if any(os.path.abspath(p or os.curdir) == here for p in sys.path):
                return {leaked!r}
            return ANSWER
"""

PLANTED = """
    import pathlib

    pathlib.Path({marker!r}).touch()
"""

# loaded with `-p`: the packages named look not installed (an environment without the `tokens`
# extra, say), while the rest of sys.path is searched for them as an import would
WITHOUT_EXTRAS = """
    import sys
    from importlib.machinery import PathFinder

    HIDDEN = {hidden!r}
    INSTALLED = ("site-packages", "dist-packages")


    class WithoutExtras(PathFinder):
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            if path is None and name in HIDDEN:
                path = [p for p in sys.path if not p.rstrip("/").endswith(INSTALLED)]
            return super().find_spec(name, path, target)


    sys.meta_path[:] = [WithoutExtras if f is PathFinder else f for f in sys.meta_path]
"""


def write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


def plain_pytest(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`pytest ARGS` run in `cwd` as a user types it: `-P` keeps the working folder off the
    child's sys.path, which `python -m pytest` would put first."""
    argv = [sys.executable, "-P", "-m", "pytest", f"--rootdir={REPO}", "-p", "no:cacheprovider"]
    return subprocess.run(
        [*argv, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def shown(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout[-3000:] + result.stderr[-2000:]


@pytest.mark.slow
def test_planted_optional_modules_are_never_imported_from_the_working_folder(
    tmp_path: Path, synthetic_cholecseg8k: Path, shared_cache: Path
):
    """The issue's repro: a dry run with gpt-4o beside a `python:` model, in a folder holding a
    planted bpe_openai.py, where bpe_openai is not installed; then the model's cases for real,
    under xdist. No planted module runs, and the model loads its sibling and answers."""
    work, markers = tmp_path / "work", tmp_path / "markers"
    markers.mkdir()
    planted = ("bpe_openai", "vllm", "bert_score", "sentence_transformers")
    for name in planted:
        write(work / f"{name}.py", PLANTED.format(marker=str(markers / name)))
    write(work / "m_helper.py", f"ANSWER = {ANSWER!r}\n")
    write(work / "m.py", MODEL.format(helper="m_helper", leaked=LEAKED))
    write(tmp_path / "plugins" / "without_extras.py", WITHOUT_EXTRAS.format(hidden=planted))
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "plugins")}
    link_shared_data(tmp_path / "cache", shared_cache)
    common = [
        "-p", "without_extras", "-m", "quick", f"--cholecseg8k={synthetic_cholecseg8k}",
        f"--cache-dir={tmp_path / 'cache'}", f"--results-dir={tmp_path / 'results'}",
        "--bootstrap=0",
    ]  # fmt: skip

    dry = plain_pytest(
        work, str(REPO / "evals" / "pointing"), *common, "--model", "python:m:F,gpt-4o",
        "--dry-run", "--run-id=dry", env=env,
    )  # fmt: skip
    assert sorted(p.name for p in markers.iterdir()) == [], shown(dry)  # none was imported
    assert dry.returncode == 0, shown(dry)
    table = pd.read_csv(tmp_path / "results" / "pointing" / "dry" / "dry_run.csv")
    assert list(table["model"]) == ["gpt-4o", "python:m:F", "total"]
    assert (table["requests_to_send"] > 0).all()  # the model's cases ran, as a dry run runs them
    (gpt,) = table.loc[table["model"] == "gpt-4o", "text_counted_by"]
    assert gpt.startswith("estimate")  # bpe_openai was looked for, and is not installed

    real = plain_pytest(
        work, str(REPO / "evals" / "pointing"), *common, "--model", "python:m:F",
        "-k", "zero_shot", "-n", "2", "--run-id=real", env=env,
    )  # fmt: skip
    assert sorted(p.name for p in markers.iterdir()) == [], shown(real)  # none was imported
    assert real.returncode == 0, shown(real)
    raw = tmp_path / "results" / "pointing" / "real" / "raw_results.jsonl"
    rows = [json.loads(line) for line in raw.read_text().splitlines() if line.strip()]
    assert rows and all(row["model"] == "python:m:F" for row in rows)
    assert {row["raw"] for row in rows} == {ANSWER}  # never LEAKED, no error outcome


# -- in process ----------------------------------------------------------------------------------


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """name(stem) -> a module name unique to this test; the working folder is tmp_path, which
    is not on sys.path. The modules imported from it are forgotten afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    made: list[str] = []

    def name(stem: str) -> str:
        made.append(f"{stem}_{abs(hash(str(tmp_path))) % 10**8}")
        return made[-1]

    yield name
    for module in list(sys.modules):
        if module.partition(".")[0] in made:
            del sys.modules[module]
    python_model.factory_of.cache_clear()
    importlib.invalidate_caches()


def test_sys_path_after_factory_of_is_what_it_was(folder, tmp_path):
    model, absent = folder("own_model"), folder("absent_optional")
    write(
        tmp_path / f"{model}.py", "class F:\n    def generate(self, request):\n        return 'A'\n"
    )
    write(tmp_path / f"{absent}.py", "raise SystemExit('imported from the working folder')\n")
    importlib.invalidate_caches()
    before = list(sys.path)
    factory, _, _ = python_model.factory_of(f"python:{model}:F", f"{model}:F")
    assert sys.path == before
    assert Path(sys.modules[model].__file__).parent == tmp_path  # it came from the folder
    assert factory().generate(None) == "A"
    # the suite's later optional imports do not find what lies beside the command
    assert importlib.util.find_spec(absent) is None


def test_a_module_importing_a_module_beside_it_loads(folder, tmp_path):
    model, helper, package = folder("with_sibling"), folder("sibling_helper"), folder("own_pkg")
    write(tmp_path / f"{helper}.py", "ANSWER = 'B'\n")
    write(
        tmp_path / f"{model}.py",
        f"from {helper} import ANSWER\n\n\n"
        "class F:\n    def generate(self, request):\n        return ANSWER\n",
    )
    write(tmp_path / package / "__init__.py", "")  # a package there, a dotted name
    write(tmp_path / package / "models.py", f"from {helper} import ANSWER\n\nF = ANSWER.lower\n")
    importlib.invalidate_caches()
    before = list(sys.path)
    factory, _, _ = python_model.factory_of(f"python:{model}:F", f"{model}:F")
    assert factory().generate(None) == "B"
    dotted = python_model.factory_of(f"python:{package}.models:F", f"{package}.models:F")[0]
    assert dotted() == "b"
    assert sys.path == before


def test_a_module_on_the_import_path_wins_over_one_in_the_working_folder(
    folder, tmp_path, monkeypatch
):
    model = folder("twice")
    write(tmp_path / f"{model}.py", "F = 'working folder'.upper\n")
    write(tmp_path / "elsewhere" / f"{model}.py", "F = 'import path'.upper\n")
    monkeypatch.syspath_prepend(str(tmp_path / "elsewhere"))
    before = list(sys.path)
    assert python_model.factory_of(f"python:{model}:F", f"{model}:F")[0]() == "IMPORT PATH"
    assert sys.path == before


def test_a_module_nowhere_is_still_an_error_naming_it(folder):
    model = folder("nowhere")
    with pytest.raises(ValueError, match=f"cannot import module '{model}'"):
        python_model.factory_of(f"python:{model}:F", f"{model}:F")
