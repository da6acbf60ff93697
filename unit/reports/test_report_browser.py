"""Report pages that never run data (issue 34): report.html rendered in headless Chromium.

A run plants a script payload (unit/helpers/hostile_pages.py) in a model name, in a case id (a
SurgVU question folder named as markup), in an answer and in an error; the page, once its scripts
ran, must show each payload as text and have run none (its title is still `report.html`; no element
made from data carries an event handler). report.md must hold no raw markup, and the terminal no
escape sequence from the error. Skipped where no Chromium is installed (.ci/run installs
Debian's).
"""

from __future__ import annotations

import html
import json
import os
import shutil
from pathlib import Path

import pytest

from unit.helpers import hostile_pages
from unit.helpers.hostile_pages import (
    ERROR_PAYLOAD,
    FILE_PAYLOAD,
    MARK,
    MODEL,
    PAYLOADS,
    TERMINAL_ESCAPES,
    rendered,
    scan,
)

HERE = Path(__file__).parent
# a child imports the scripted models by module name: this folder\'s and unit/helpers/\'s
CHILD_PATH = os.pathsep.join(
    map(str, (HERE, Path(__file__).resolve().parents[2] / "unit" / "helpers"))
)


@pytest.fixture
def browser() -> None:
    if hostile_pages.chromium() is None:
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")


def shown(payload: str) -> str:
    """A payload's markup, as its text must show in the page (the terminal escapes are not)."""
    return payload.replace(TERMINAL_ESCAPES, "")


def test_the_browser_check_sees_a_payload_that_runs(browser, tmp_path: Path) -> None:
    """The check can fail: each payload, inserted as pytest-html 4 inserts a row's cells (read
    from a JSON data attribute, a <template>'s innerHTML appended to the table), runs in this
    browser or stays a live element, and `scan` finds it."""
    cells = json.dumps([f"<td>{p}</td>" for p in PAYLOADS.values()])
    page = tmp_path / "raw.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>report.html</title></head><body><table><tr id=row>"
        f'</tr></table><div id=data data-cells="{html.escape(cells)}"></div><script>'
        "for (const c of JSON.parse(document.getElementById('data').dataset.cells)) {"
        "const t = document.createElement('template'); t.innerHTML = c; "
        "document.getElementById('row').appendChild(t.content)}</script></body></html>",
        encoding="utf-8",
    )
    found = scan(rendered(page))
    assert found.title.startswith(MARK), found.title  # a handler ran
    evidence = " ".join(found.ran())
    for where in PAYLOADS:
        assert f"{MARK}-{where}" in evidence, (where, found.ran())


@pytest.fixture
def payload_data(tmp_path: Path, shared_cache: Path) -> Path:
    """A SurgVU root with two VQA cases from the synthetic sample, the first renamed
    FILE_PAYLOAD (its folder and files), so its case id is `vqa-<FILE_PAYLOAD>`."""
    from support.evaluations.surgvqa.synthetic import CAT2_DIR, ensure_surgvu

    source = sorted(p for p in (ensure_surgvu(shared_cache) / CAT2_DIR).iterdir() if p.is_dir())
    root = tmp_path / "surgvu"
    for folder, name in ((source[0], FILE_PAYLOAD), (source[1], source[1].name)):
        target = root / CAT2_DIR / name
        target.mkdir(parents=True)
        for suffix in (".mp4", "_question.json", ".json"):
            shutil.copyfile(folder / f"{folder.name}{suffix}", target / f"{name}{suffix}")
    return root


@pytest.mark.slow
def test_report_pages_show_data_as_text_and_run_none(
    browser, run_suite, payload_data: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", CHILD_PATH)  # the payload model's module
    page = tmp_path / "html" / "report.html"
    result, results = run_suite(
        "surgvqa",
        f"--surgvqa-root={payload_data}",
        f"--model={MODEL}",
        f"--html={page}",
        "--self-contained-html",
    )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, out[-3000:]  # one case's pipeline error, the other answered
    rows = (results / "surgvqa" / "r1" / "raw_results.jsonl").read_text(encoding="utf-8")
    outcomes = [json.loads(line) for line in rows.splitlines()]
    assert {o["status"] == "error" for o in outcomes} == {True, False}
    assert any(o["case_id"].startswith(f"vqa-{FILE_PAYLOAD}-") for o in outcomes)

    found = scan(rendered(page, expect=[shown(p) for p in PAYLOADS.values()]))
    assert found.ran() == [], found.ran()
    assert found.title == "report.html"
    for where, payload in PAYLOADS.items():
        assert shown(payload) in found.text, f"the {where} payload is not shown as text"

    report = (results / "surgvqa" / "r1" / "report.md").read_text(encoding="utf-8")
    assert "<img" not in report and "<script" not in report
    assert hostile_pages.MODEL_PAYLOAD.replace("<", "&lt;") in report  # shown as text

    assert "\x1b" not in out and "\x07" not in out  # the error's escapes never reach it
    assert shown(ERROR_PAYLOAD) in out  # the error itself is named
