"""Every registered evaluation's quick subset, end to end, against hostile answers (issue 25).

One run per evaluation (support.evaluations.names(), so an evaluation added later is covered with
no edit here) with three scripted models from unit/helpers/hostile_answers.py: `reply` and `second`
answer every request with one hostile class in turn (1 MB, NUL, lone surrogates, 10k-deep JSON, 100k
repeats of the target answer, +-1e308 / NaN / inf / -0, RTL and zero-width, prompt injection,
empty), `faulty` also raises on its first request and every 50th. Hostile answers are wrong answers:
the run ends with exit 0 or 1, every case has an outcome, junit has <error>s only for the faults
(each a named case error), summary.csv holds no infinity, report.html stays bounded.
"""

from __future__ import annotations

import json
import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from conftest import CHILD_PYTEST_FLAGS, child_pytest
from support import evaluations
from unit.helpers import hostile_answers
from unit.helpers.suite_runs import cache_with_shared_data, link_shared_data

# every test here runs the suite in a subprocess; the runs that several tests read are module
# fixtures, so the module's tests share one worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hostile_suite")]

HERE = Path(__file__).parent
# a child imports the scripted models by module name: this folder\'s and unit/helpers/\'s
CHILD_PATH = os.pathsep.join(
    map(str, (HERE, Path(__file__).resolve().parents[1] / "unit" / "helpers"))
)
REPO = HERE.parent
MODELS = {
    "hostile": "scripted:hostile_answers:reply",
    "second": "scripted:hostile_answers:second",
    "faulty": "scripted:hostile_answers:faulty",
}
# one evaluation's run, hostile answers and payloads included, its synthetic data built in it
# when no earlier test of the session did (pointing's: ~100 s on a busy 2-core machine)
TIMEOUT_S = 300
MAX_HTML_BYTES = 50 * 2**20  # generous: answer text in the HTML is being capped (issue 25)


def quick_run(evaluation: str, tmp_path: Path, shared_cache: Path, run_id: str) -> list[str]:
    """The arguments of `evaluation`'s quick subset (two samples) with its cache and results in
    `tmp_path`, the session's synthetic datasets shared through a link."""
    link_shared_data(tmp_path / "cache", shared_cache)
    return [
        str(REPO / "evals" / evaluation),
        f"--rootdir={REPO}",
        f"--cache-dir={tmp_path / 'cache'}",
        f"--results-dir={tmp_path / 'results'}",
        f"--run-id={run_id}",
        "--bootstrap=50",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        *CHILD_PYTEST_FLAGS,
        "-m",
        "quick",
        "--samples=2",  # two of each test set: every class still occurs, in bounded time
    ]


@pytest.fixture(scope="module")
def hostile_runs(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path):
    """hostile_runs(evaluation) -> (RunResult, run folder, results folder, answer log lines): one
    quick run per evaluation, made on first use and shared by the tests that read it (read-only).
    Its models are the hostile ones (MODELS) and the payload model of unit/helpers/hostile_pages.py
    (issue 34), so one run serves the hostile-answers checks and the report-page checks; it
    writes report.html (self-contained) and junit.xml."""
    from unit.helpers import hostile_pages

    runs: dict[str, tuple[pytest.RunResult, Path, Path, list[str]]] = {}

    def _run(evaluation: str):
        if evaluation not in runs:
            where = tmp_path_factory.mktemp(f"hostile-{evaluation}")
            log = where / "answers.log"
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("PYTHONPATH", CHILD_PATH)
                mp.setenv("HOSTILE_LOG", str(log))
                result = child_pytest(
                    where,
                    [
                        *quick_run(evaluation, where, shared_cache, "hostile"),
                        f"--model={','.join([*MODELS.values(), hostile_pages.MODEL])}",
                        f"--html={where / 'report.html'}",
                        "--self-contained-html",
                        f"--junitxml={where / 'junit.xml'}",
                    ],
                    timeout_s=TIMEOUT_S,
                )
            lines = log.read_text(encoding="utf-8").split() if log.exists() else []
            runs[evaluation] = (result, where, where / "results" / evaluation / "hostile", lines)
        return runs[evaluation]

    return _run


def _testcases(junit: Path) -> list[ET.Element]:
    return list(ET.parse(junit).getroot().iter("testcase"))


def _param_id(case: ET.Element) -> str:
    name = case.get("name", "")
    return name[name.index("[") + 1 : -1] if "[" in name else name


@pytest.mark.parametrize("evaluation", evaluations.names())
def test_hostile_answers_and_faults_cost_no_run(hostile_runs, evaluation):
    from unit.helpers import hostile_pages

    result, where, out, log = hostile_runs(evaluation)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret in (0, 1), text[-3000:]
    assert "INTERNALERROR" not in text and "Traceback (most recent call last)" not in text

    classes = set(log[0::2])  # "<class> <digest>" per call
    assert set(hostile_answers.NAMES) - classes == set(), "too few quick requests for coverage"
    assert "fault" in classes

    rows = [json.loads(line) for line in (out / "raw_results.jsonl").read_text().splitlines()]
    cases = _testcases(where / "junit.xml")
    assert cases
    for case in cases:  # every selected case of a hostile model has its outcome row(s)
        pid = _param_id(case)
        model = next((m for m in MODELS.values() if pid.endswith(f"-{m}")), None)
        if model is None:  # the payload model's (test_report_pages_run_no_data reads its cases)
            assert "hostile_pages" in pid, pid
            continue
        item = pid[: -len(model) - 1]  # the case, with or without the model; "-<part>" may follow
        mine = [r for r in rows if r["model"] == model
                and any(r["case_id"] == k or r["case_id"].startswith(f"{k}-")
                        for k in (pid, item))]  # fmt: skip
        skipped = case.find("skipped")
        if not mine and skipped is not None and model == MODELS["faulty"]:
            # a later round of a dynamic search whose round broke: skipped, quoting the error
            assert "an earlier round of this search ended in an error" in (
                skipped.get("message") or ""
            ), pid
            continue
        assert mine, f"no outcome row for {pid}"
        errors = case.findall("error") + case.findall("failure")
        if model != MODELS["faulty"]:
            assert not errors, f"{pid}: a hostile answer became a pipeline error"
            assert all(r["status"] != "error" for r in mine), pid
        elif errors:  # a fault is a named case error: the exception, in the case's row
            assert any(r["status"] == "error" and "ScriptedFault" in (r.get("error") or "")
                       for r in mine), pid  # fmt: skip
    by_model = {m: [r for r in rows if r["model"] == spec] for m, spec in MODELS.items()}
    assert any(r["status"] == "error" for r in by_model["faulty"])
    assert any(r["status"] != "error" for r in by_model["faulty"])  # the others have results
    assert by_model["hostile"] and by_model["second"]
    assert any(r["model"] == hostile_pages.MODEL for r in rows)  # the payload model ran too

    summary = pd.read_csv(out / "summary.csv")
    numeric = summary.select_dtypes("number")
    infinite = [c for c in numeric if any(math.isinf(v) for v in numeric[c].dropna())]
    assert not infinite, f"summary.csv: infinite {infinite}"
    html = where / "report.html"
    assert html.exists() and html.stat().st_size < MAX_HTML_BYTES, html.stat().st_size


@pytest.mark.parametrize("evaluation", evaluations.names())
def test_report_pages_run_no_data(hostile_runs, evaluation):
    """Issue 34: the quick subset with a model whose name is a script payload, answering payloads
    and failing one request with one (unit/helpers/hostile_pages.py), beside the hostile models (the
    run of test_hostile_answers_and_faults_cost_no_run). report.html, rendered in headless Chromium,
    shows them as text and runs none; report.md holds no raw markup."""
    from unit.helpers import hostile_pages

    if hostile_pages.chromium() is None:
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    result, where, out, _ = hostile_runs(evaluation)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, text[-3000:]  # the faults: named case errors
    assert "INTERNALERROR" not in text and "\x1b" not in text
    rows = [json.loads(line) for line in (out / "raw_results.jsonl").read_text().splitlines()]
    payload_errors = [r for r in rows if r["model"] == hostile_pages.MODEL
                      and r["status"] == "error"]  # fmt: skip
    assert any(hostile_pages.MARK in (r.get("error") or "") for r in payload_errors), rows[:3]

    page = where / "report.html"
    shown = [hostile_pages.MODEL_PAYLOAD, hostile_pages.ANSWER_PAYLOAD]
    shown.append(hostile_pages.ERROR_PAYLOAD.replace(hostile_pages.TERMINAL_ESCAPES, ""))
    found = hostile_pages.scan(hostile_pages.rendered(page, expect=shown))
    assert found.ran() == [], found.ran()
    assert found.title == "report.html"
    missing = [p for p in shown if p not in found.text]
    assert not missing, f"not shown as text: {missing}"
    report = (out / "report.md").read_text("utf-8")
    assert "<img" not in report and "<script" not in report


# ---- a PostScript file planted as an image (issue 34): nothing runs, the case is a named error --
PS_TIMEOUT_S = 240  # one evaluation's quick run with a planted file; Ghostscript would loop forever
REFUSED = "not a readable image (format found: EPS"  # the image door's words (support/images.py)


def _postscript(marker: Path) -> bytes:
    """An EPS file that, were Ghostscript to run it, writes `marker` and then loops forever."""
    return (
        "%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 16 16\n"
        f"({marker}) (w) file dup (ran) writestring closefile\n{{ }} loop\nshowpage\n"
    ).encode()


def _plant(evaluation: str, data: Path, payload: bytes) -> tuple[list[str], list[Path]] | None:
    """(the run's data options, the files now holding `payload`) for `evaluation`'s data built
    small under `data`; None for an evaluation that reads no image file."""
    if evaluation == "pointing":
        from support.evaluations.pointing.dataset import RawTree
        from support.evaluations.pointing.synthetic import build_cholecseg8k

        root = build_cholecseg8k(data / "cholec", n_videos=2, frames_per_video=4)
        frame = root / RawTree.scan(root)[0].frames[0]  # a frame, read at load (its size)
        frame.write_bytes(payload)
        return [f"--cholecseg8k={root}"], [frame]
    if evaluation == "nyu_distance":
        import numpy as np
        from PIL import Image

        root = data / "nyu"
        (root / "rgb").mkdir(parents=True)
        (root / "depth").mkdir()
        v, u = np.mgrid[0:480, 0:640].astype(np.float32)
        for i in range(2):
            Image.new("RGB", (640, 480), (90, 90, 40 * i)).save(root / "rgb" / f"{i:04d}.png")
            np.save(root / "depth" / f"{i:04d}.npy", 1.5 + 2.0 * u / 640 + 0.5 * v / 480)
        bad = root / "rgb" / "0001.png"
        bad.write_bytes(payload)
        return [f"--nyu-dir={root}", "--pairs-per-image=2"], [bad]
    if evaluation == "pgt":
        from PIL import Image

        folder = data / "pgt"
        folder.mkdir(parents=True)
        Image.new("RGB", (32, 32), (10, 120, 40)).save(folder / "good.png")
        bad = folder / "bad.png"
        bad.write_bytes(payload)
        csv = folder / "planted.csv"
        csv.write_text("image_path,label\ngood.png,real\nbad.png,ai-generated\n", encoding="utf-8")
        return [f"--pgt-dataset={csv}"], [bad]
    if evaluation == "surgvqa":
        # SurgVU's frames are decoded from its videos (PyAV), not from image files: the planted
        # "image" is every video of the sample
        from support.evaluations.surgvqa.synthetic import build_surgvu

        root = build_surgvu(data / "surgvu")
        videos = sorted(root.rglob("*.mp4"))
        for video in videos:
            video.write_bytes(payload)
        return [f"--surgvqa-root={root}"], videos
    if evaluation == "dynamic":
        return None  # reads no image file: its scenes are drawn here from .npy clouds
    raise AssertionError(f"{evaluation}: no data to plant a PostScript image in: add it here")


@pytest.mark.parametrize("evaluation", evaluations.names())
def test_a_postscript_image_in_the_data_runs_nothing(tmp_path, shared_cache, evaluation):
    import os
    import shutil
    import signal
    import subprocess
    import sys

    if shutil.which("gs") is None:
        pytest.skip("Ghostscript (gs) not installed: nothing could run the file")
    marker = tmp_path / "marker"
    planted = _plant(evaluation, tmp_path / "data", _postscript(marker))
    if planted is None:
        pytest.skip(f"{evaluation} reads no image file from its data")
    args, files = planted
    cache_with_shared_data(tmp_path, shared_cache)
    argv = [sys.executable, "-m", "pytest", str(REPO / "evals" / evaluation), f"--rootdir={REPO}",
            f"--cache-dir={tmp_path / 'cache'}", f"--results-dir={tmp_path / 'results'}",
            "--run-id=ps", "--bootstrap=50", "-p", "no:cacheprovider", "-p", "no:randomly",
            *CHILD_PYTEST_FLAGS, "-m", "quick", "--model=oracle", *args]  # fmt: skip
    child = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True)  # fmt: skip
    try:  # a new session: Ghostscript, were it started, is stopped with the run
        text, _ = child.communicate(timeout=PS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        pytest.fail(f"{evaluation}: the run hung (> {PS_TIMEOUT_S} s) on a PostScript image")
    assert not marker.exists(), f"{evaluation}: Ghostscript ran a data file"
    assert "INTERNALERROR" not in text and "bug of the suite" not in text, text[-3000:]
    assert child.returncode in (1, 2), text[-3000:]  # failed cases, or a collection error
    out = tmp_path / "results" / evaluation / "ps"
    rows = out / "raw_results.jsonl"
    if child.returncode == 2:  # read at load: one short error naming the file, no traceback
        assert any(f"{f}: {REFUSED}" in text for f in files), text[-3000:]
        assert "Traceback" not in text and not rows.exists(), text[-3000:]
        return
    errors = [r for r in map(json.loads, rows.read_text().splitlines()) if r["status"] == "error"]
    assert errors, text[-3000:]
    for row in errors:  # each bad case names its file (the door's words where Pillow read it)
        assert any(str(f) in row["error"] for f in files), row["error"]
        assert evaluation == "surgvqa" or REFUSED in row["error"], row["error"]
    assert (out / "summary.csv").exists(), text[-3000:]
