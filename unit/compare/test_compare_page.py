"""The comparison page (`vlmbench-compare A B --html out.html`, support.compare.page) and the
pictures index it reads (pictures.json, written by reports.html under --html).

The end-to-end tests run the quick subsets of all five evaluations with two scripted models of
this module, `answer_a` and `answer_b`: each answers like the oracle except on the requests its
own rule picks (a quarter, by a hash of the request and the side), where it answers MISS. The
cases that flip are then known from the raw rows alone (which side's answer holds MISS), and the
page must list exactly those, in its data and in the DOM Chromium builds from it. Chromium tests
skip where none is installed (unit/helpers/hostile_pages.py).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from support.compare.page import FLIP_KINDS, PAGE_ROWS, flip_kind
from support.compare.runs import main
from support.storage.files import write_jsonl
from support.types import Outcome, Request
from unit.helpers import hostile_pages
from unit.helpers.hostile_pages import (
    ANSWER_PAYLOAD,
    ERROR_PAYLOAD,
    FILE_PAYLOAD,
    MODEL,
    MODEL_PAYLOAD,
    TERMINAL_ESCAPES,
    rendered,
    scan,
)
from unit.helpers.suite_runs import EVERY_SHAPE

HERE = Path(__file__).parent
# a child imports the scripted models by module name: this folder\'s and unit/helpers/\'s
CHILD_PATH = os.pathsep.join(
    map(str, (HERE, Path(__file__).resolve().parents[2] / "unit" / "helpers"))
)
MISS = "???"  # what a scripted side answers on the requests its rule picks
MODEL_A = "scripted:test_compare_page:answer_a"
MODEL_B = "scripted:test_compare_page:answer_b"
KIND_CODES = [code for code, _ in FLIP_KINDS]


def _missed(request: Request, side: str) -> bool:
    """A quarter of the requests, by a hash of the side and the request (hints left out), and
    every later request of a case that carries an earlier MISS (pgt's second stage quotes the
    first), so a case's answer is right exactly when no request of it was missed."""
    texts = [request.system or "", request.prefill or "", *(p.text or "" for p in request.parts)]
    if any(MISS in t for t in texts):
        return True
    return hashlib.sha256(f"{side}:{request.digest()}".encode()).digest()[0] < 64


def answer_a(request: Request) -> str:
    """The oracle's answer, except MISS on the requests side a's rule picks."""
    return MISS if request.target is None or _missed(request, "a") else request.target


def answer_b(request: Request) -> str:
    """The oracle's answer, except MISS on the requests side b's rule picks."""
    return MISS if request.target is None or _missed(request, "b") else request.target


@pytest.fixture
def browser() -> None:
    if hostile_pages.chromium() is None:
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")


# --- reading a page back ------------------------------------------------------------------------


def page_data(page: Path) -> dict:
    """The JSON the page embeds; its text holds no `<` at all (nothing can close the element)."""
    text = page.read_text(encoding="utf-8")
    found = re.search(
        r'<script type="application/json" id="vlmbench-data">(.*?)</script>', text, re.S
    )
    assert found, "no data element in the page"
    assert "<" not in found.group(1)
    return json.loads(found.group(1))


def data_pairs(data: dict) -> dict[tuple[str, str], str]:
    """(evaluation, item id) -> kind code, from the page's JSON rows."""
    return {(data["evaluations"][r[0]], r[1]): KIND_CODES[r[3]] for r in data["rows"]}


class _Rows(HTMLParser):
    """The case rows of a rendered page: (evaluation, item id, kind code, the row's text)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[dict] = []
        self._cell: str | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr" and "case" in (a.get("class") or "").split():
            self.rows.append({"kind": KIND_CODES[int(a["data-kind"])], "ev": "", "item": ""})
            self.rows[-1]["text"] = ""
        if self.rows and tag == "div" and a.get("class") in ("ev", "item"):
            self._cell = a["class"]

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            self._cell = None

    def handle_data(self, data: str) -> None:
        if not self.rows:
            return
        self.rows[-1]["text"] += data
        if self._cell:
            self.rows[-1][self._cell] += data


def dom_rows(dom: str) -> list[dict]:
    parser = _Rows()
    parser.feed(dom)
    return parser.rows


def shown_number(dom: str, element_id: str) -> int:
    found = re.search(rf'id="{element_id}">(\d+)<', dom)
    assert found, element_id
    return int(found.group(1))


# --- hand-written runs ----------------------------------------------------------------------------


def outcome(item: str, model: str, status: str, **kw) -> Outcome:
    gt = 2.0
    pred = gt if status == "correct" else 3.5
    return Outcome(
        case_id=f"{item}-{model}",
        evaluation="nyu_distance",
        model=model,
        status=status,
        cluster=item[:7],
        scores={"gt": gt, "pred": pred, "abs_error": abs(pred - gt)},
        raw=f"{pred} m" if status != "unparsable" else "far",
        prediction={"distance_m": pred},
        target={"distance_m": gt},
        **kw,
    )


# (item, A's status, B's status) and the kind each pair is
STATUS_PAIRS = [
    ("img0000-pair0", "correct", "wrong", "a_right"),
    ("img0000-pair1", "correct", "unparsable", "a_right"),
    ("img0001-pair0", "wrong", "correct", "b_right"),
    ("img0001-pair1", "correct", "error", "error"),
    ("img0002-pair0", "correct", "correct", "same"),
    ("img0002-pair1", "wrong", "unparsable", "same"),
]


def hand_run(folder: Path, model: str, side: int) -> Path:
    """A nyu_distance run of one model: STATUS_PAIRS' statuses of `side` (1: A, 2: B), an item
    of its own too (counted, never paired)."""
    outs = [outcome(row[0], model, row[side], read_by="first number") for row in STATUS_PAIRS]
    outs.append(outcome(f"img0009-only{side}", model, "correct"))
    write_jsonl(outs, folder / "raw_results.jsonl")
    return folder


def defined_kind(a: str, b: str) -> str:
    """The page's definitions (docs/comparisons.md), written out here, apart from the module."""
    if a == "correct" and b in ("wrong", "unparsable"):
        return "a_right"
    if b == "correct" and a in ("wrong", "unparsable"):
        return "b_right"
    return "error" if "error" in (a, b) else "same"


def test_flip_kinds_follow_the_definitions() -> None:
    for _, a, b, kind in STATUS_PAIRS:
        assert flip_kind(a, b) == kind == defined_kind(a, b), (a, b)
    statuses = ("correct", "wrong", "unparsable", "error")
    for a in statuses:
        for b in statuses:
            assert flip_kind(a, b) == defined_kind(a, b), (a, b)


def test_the_report_indexes_each_picture_and_never_fails_the_run_for_it(tmp_path: Path) -> None:
    """reports.html: a picture inlined (and its copy in the run folder) and one written to the
    assets folder, each under its outcome's case id and evaluation, in the run folder's
    pictures.json (paths relative to it);
    a pictures.json that cannot be written is a terminal line, not an exception."""
    import base64
    from types import SimpleNamespace

    from reports.html import PICTURE_KEY, HtmlCases
    from reports.plugin import OUTCOMES_ATTR, REPORT_PLUGIN_KEY

    report = tmp_path / "html" / "report.html"
    cases = HtmlCases(report, True, 20)  # room for one small picture inline
    pictures = [base64.b64encode(b"x" * n).decode() for n in (9, 30)]
    for n, encoded in enumerate(pictures):
        case_id = f"item{n}-m"
        logged = SimpleNamespace(
            nodeid=f"t[{n}]",
            extras=[{"content": encoded, "name": case_id, PICTURE_KEY: True}],
            **{OUTCOMES_ATTR: [{"case_id": case_id, "evaluation": "nyu_distance"}]},
        )
        cases.pytest_runtest_logreport(logged)
    folder = tmp_path / "results" / "nyu_distance" / "r1"
    folder.mkdir(parents=True)
    stash = pytest.Stash()
    stash[REPORT_PLUGIN_KEY] = SimpleNamespace(
        result=SimpleNamespace(evaluations=[SimpleNamespace(name="nyu_distance")]),
        run=SimpleNamespace(output=SimpleNamespace(results_dir=tmp_path / "results", run_id="r1")),
    )
    session = SimpleNamespace(config=SimpleNamespace(stash=stash))
    cases.pytest_sessionfinish(session)
    index = json.loads((folder / "pictures.json").read_text())
    assert index["report"] == "../../../html/report.html" and index["inlined"] == []
    assert list(index["pictures"]) == ["item0-m", "item1-m"]
    inlined, linked = (folder / p for p in index["pictures"].values())
    # the inlined picture has the run folder's own copy (the comparison page shows it)
    assert inlined.read_bytes() == b"x" * 9 and inlined.parent == folder / "pictures"
    assert linked.read_bytes() == b"x" * 30
    assert linked.resolve().parent == report.parent / "report_assets"

    (folder / "pictures.json").unlink()
    (folder / "pictures.json").mkdir()  # in the way: the index cannot be written
    cases.pytest_sessionfinish(session)
    lines = []
    cases.pytest_terminal_summary(SimpleNamespace(write_line=lines.append))
    assert len(lines) == 1 and "pictures index not written" in lines[0]


def test_pairs_kinds_pictures_and_counts_in_the_page(tmp_path: Path, capsys) -> None:
    """Two models of one run: the rows (flipped first), the counts, the pictures from
    pictures.json (one file both sides show appears once; an inlined one and a file gone are
    said), and every text of the data inert (no `<`)."""
    run = tmp_path / "results" / "nyu_distance" / "r1"
    hand_run(run / "a", "m1", 1)
    hand_run(run / "b", "m2", 2)
    rows = (run / "a" / "raw_results.jsonl").read_text() + (
        run / "b" / "raw_results.jsonl"
    ).read_text()
    (run / "raw_results.jsonl").write_text(rows)
    assets = tmp_path / "html" / "report_assets"
    assets.mkdir(parents=True)
    for name in ("shared.jpg", "own.jpg"):
        (assets / name).write_bytes(b"\xff\xd8 not really a picture")
    rel = os.path.relpath(assets, run)
    (run / "pictures.json").write_text(
        json.dumps(
            {
                "report": os.path.relpath(tmp_path / "html" / "report.html", run),
                "pictures": {
                    "img0000-pair0-m1": f"{rel}/shared.jpg",
                    "img0000-pair0-m2": f"{rel}/shared.jpg",
                    "img0000-pair1-m1": f"{rel}/own.jpg",
                    "img0001-pair0-m1": f"{rel}/gone.jpg",
                },
                "inlined": ["img0000-pair1-m2"],
            }
        )
    )
    page = tmp_path / "out" / "page.html"
    assert main([f"{run}@m1", f"{run}@m2", "--html", str(page), "--bootstrap", "20"]) == 0
    printed = capsys.readouterr().out
    assert "## Paired comparisons" in printed and "page: " in printed and "3 flipped" in printed

    data = page_data(page)
    kinds = data_pairs(data)
    assert kinds == {("nyu_distance", item): kind for item, _, _, kind in STATUS_PAIRS}
    order = [KIND_CODES[r[3]] for r in data["rows"]]
    assert order == sorted(order, key=KIND_CODES.index)  # flipped first
    by_item = {r[1]: r for r in data["rows"]}
    assert by_item["img0000-pair0"][8] == [["A and B", "../html/report_assets/shared.jpg"]]
    assert by_item["img0000-pair1"][8] == [["A", "../html/report_assets/own.jpg"]]
    assert by_item["img0000-pair1"][9] == "B: inlined in the report (no file)"
    assert by_item["img0001-pair0"][9] == "A: picture file missing; B: no picture"
    assert by_item["img0000-pair0"][5][:4] == [
        "correct",
        "2.0 m",
        '{"distance_m": 2.0}',
        "first number",
    ]

    text = page.read_text(encoding="utf-8")
    assert '<b id="flipped-count">3</b>' in text
    assert "1 case(s) only in A" in text  # compare_runs' note, and the counts' table
    assert "No pictures for some runs" not in text


def test_a_run_without_pictures_json_renders(tmp_path: Path, browser) -> None:
    """Two runs without --html: no pictures, said once; the rows still render, flipped first."""
    a = hand_run(tmp_path / "results" / "nyu_distance" / "ra", "m", 1)
    b = hand_run(tmp_path / "results" / "nyu_distance" / "rb", "m", 2)
    page = tmp_path / "page.html"
    assert main([str(a), str(b), "--html", str(page), "--bootstrap", "20"]) == 0
    text = page.read_text(encoding="utf-8")
    assert text.count("no pictures.json (a run without --html)") == 2  # one line, both runs
    assert text.count("No pictures for some runs") == 1
    dom = rendered(page, expect=["img0000-pair0"])
    rows = dom_rows(dom)
    assert [r["item"] for r in rows] == [item for item, *_ in STATUS_PAIRS]  # the page's order
    assert [r["kind"] for r in rows] == [kind for *_, kind in STATUS_PAIRS]
    assert shown_number(dom, "flipped-count") == 3
    assert "6 of 6 matching rows shown" in scan(dom).text
    assert not re.search(r"<img[^>]*class=\"pic\"", dom)
    assert 'id="vlmbench-data"' not in dom and 'id="no-script"' not in dom  # read, then gone


def test_a_stale_pictures_json_is_not_used(tmp_path: Path) -> None:
    from support.storage.run_folder import read_pictures

    run = hand_run(tmp_path / "r", "m", 1)
    (run / "pictures.json").write_text('{"report": "x.html", "pictures": {}, "inlined": []}')
    assert read_pictures(run).missing is None
    later = (run / "pictures.json").stat().st_mtime_ns + 10**9
    os.utime(run / "raw_results.jsonl", ns=(later, later))  # a later run without --html
    assert "older than raw_results.jsonl" in read_pictures(run).missing
    os.utime(run / "raw_results.jsonl", ns=(0, 0))
    (run / "pictures.json").write_text("[1]")
    assert "unreadable" in read_pictures(run).missing


def test_run_ids_across_evaluations_and_the_cli_errors(tmp_path: Path, capsys) -> None:
    results = tmp_path / "results"
    for rid, side in (("ra", 1), ("rb", 2)):
        hand_run(results / "nyu_distance" / rid, "m", side)
    (results / "pgt" / "ra").mkdir(parents=True)  # A holds pgt, B does not
    hand = ["ra", "rb"]
    out = tmp_path / "cmp.csv"
    page = tmp_path / "page.html"
    args = ["--results", str(results), "--bootstrap", "20"]
    assert main([*hand, *args, "--out", str(out), "--html", str(page)]) == 0
    printed = capsys.readouterr().out
    assert f"A = {results / 'nyu_distance' / 'ra'}" in printed
    assert f"pgt: only in A ({results / 'pgt' / 'ra'}), not compared" in printed
    assert set(pd.read_csv(out).evaluation) == {"nyu_distance"}
    assert "pgt: only in A" in page.read_text(encoding="utf-8")
    # RID@MODEL, a folder beside a run id, and --model-a with a run id
    assert main(["ra@m", str(results / "nyu_distance" / "rb"), *args]) == 0
    assert main(["ra", "rb", "--model-a", "m", *args]) == 0
    capsys.readouterr()
    # a run id nowhere: the folder's error, as before run ids
    assert main(["nope", "rb", *args]) == 2
    assert "nope/raw_results.jsonl: missing" in capsys.readouterr().err
    (results / "surgvqa" / "rc").mkdir(parents=True)
    assert main(["rb", "rc", *args]) == 2
    assert "hold no evaluation in common (A: nyu_distance; B: surgvqa)" in capsys.readouterr().err
    assert main(["ra@x", "rb", *args]) == 2
    assert "--model-a (or RUN_A@MODEL) 'x': no such model in run A" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["ra@m", "rb", "--model-a", "other", *args])
    assert stop.value.code == 2
    assert "--model-a 'other' and RUN_A@m name two models" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["ra", "rb", "--csv", str(out), *args])
    assert stop.value.code == 2
    assert "--csv goes with --leaderboard DIR" in capsys.readouterr().err


# --- end to end -----------------------------------------------------------------------------------


def raw_rows(results: Path, run_id: str = "r1") -> dict[str, list[Outcome]]:
    """evaluation -> the outcomes of its raw_results.jsonl."""
    found = {}
    for path in sorted(results.glob(f"*/{run_id}/raw_results.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        found[path.parent.parent.name] = [Outcome.from_json(json.loads(x)) for x in lines]
    return found


@pytest.mark.slow
def test_the_page_lists_exactly_the_cases_the_models_differ_on(
    run_suite, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("PYTHONPATH", CHILD_PATH)  # this module: the scripted models
    report = tmp_path / "html" / "report.html"
    result, results = run_suite(
        "",  # evals/: all five
        "-m",
        "quick",
        "-k",
        EVERY_SHAPE,  # each evaluation's every request shape, not all its quick cases
        f"--model={MODEL_A}",
        f"--model={MODEL_B}",
        f"--html={report}",
        "--self-contained-html",
        "--html-inline-mb=0.05",  # a few pictures inlined, the rest files
    )
    assert result.ret == 0, (result.stdout.str() + result.stderr.str())[-3000:]
    rows = raw_rows(results)
    assert sorted(rows) == ["dynamic", "nyu_distance", "pgt", "pointing", "surgvqa"]

    expected: dict[tuple[str, str], str] = {}  # by the definitions, from the raw rows
    for name, outcomes in rows.items():
        a = {o.item_id: o for o in outcomes if o.model == MODEL_A}
        b = {o.item_id: o for o in outcomes if o.model == MODEL_B}
        assert a.keys() == b.keys()
        for item in a:
            expected[(name, item)] = defined_kind(a[item].status, b[item].status)
            # the known cases: a side is right exactly where its rule left its answer alone
            for o in (a[item], b[item]):
                assert (o.status == "correct") == (MISS not in o.raw), (name, o.case_id)
    flipped = {k for k, v in expected.items() if v in ("a_right", "b_right")}
    assert {"a_right", "b_right", "same"} <= set(expected.values())
    assert len(flipped) < PAGE_ROWS  # all of them on the page's first rows

    copies = 0  # the pictures index: every picture of the report as a file, inlined or not
    for name in rows:
        folder = results / name / "r1"
        index = json.loads((folder / "pictures.json").read_text())
        assert (folder / index["report"]).resolve() == report.resolve() and not index["inlined"]
        for path in index["pictures"].values():
            where = (folder / path).resolve().parent
            assert where in (report.parent / "report_assets", folder.resolve() / "pictures")
            copies += where == folder.resolve() / "pictures"
    assert copies > 0  # some were inlined: their copies are the run folder's

    page = tmp_path / "page" / "compare.html"
    cli = [f"r1@{MODEL_A}", f"r1@{MODEL_B}", "--results", str(results), "--bootstrap", "50"]
    assert main([*cli, "--html", str(page)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("## Paired comparisons") == 5

    data = page_data(page)
    assert data_pairs(data) == expected
    pictures = [src for r in data["rows"] for _, src in r[8]]
    assert pictures and all(
        src.startswith("../html/report_assets/") or "/r1/pictures/" in src for src in pictures
    )
    assert not any("inlined in the report" in r[9] for r in data["rows"])
    # every flipped row of an evaluation that draws pictures shows both sides' pictures (one
    # when both sides were shown the same picture), none missing
    drawn = {r[0] for r in data["rows"] if r[8]}
    shown_flips = [r for r in data["rows"] if (data["evaluations"][r[0]], r[1]) in flipped]
    assert drawn and shown_flips
    for r in shown_flips:
        assert r[0] not in drawn or (r[8] and not r[9]), r

    if hostile_pages.chromium() is None:
        pytest.skip("no Chromium on PATH: the page's data checked, not its rendering")
    dom = rendered(page, expect=["matching rows shown"])
    assert shown_number(dom, "flipped-count") == len(flipped)
    shown = dom_rows(dom)
    assert {(r["ev"], r["item"]) for r in shown if r["kind"] in ("a_right", "b_right")} == flipped
    assert all(expected[(r["ev"], r["item"])] == r["kind"] for r in shown)
    # one flipped case's row shows both answers
    row = next(r for r in shown if r["kind"] == "a_right")
    a, b = (
        next(o for o in rows[row["ev"]] if o.item_id == row["item"] and o.model == m)
        for m in (MODEL_A, MODEL_B)
    )
    assert a.raw[:200] in row["text"] and MISS in b.raw and b.raw[:200] in row["text"]


@pytest.mark.slow
def test_the_page_shows_hostile_data_as_text_and_runs_none(
    browser, run_suite, tmp_path: Path, monkeypatch
) -> None:
    """A model named MODEL_PAYLOAD answering ANSWER_PAYLOAD (one request failing with
    ERROR_PAYLOAD), its results and report in a folder named FILE_PAYLOAD: the page shows each
    as text, and nothing ran."""
    monkeypatch.setenv("PYTHONPATH", CHILD_PATH)
    hostile = tmp_path / FILE_PAYLOAD
    results = hostile / "results"
    result, _ = run_suite(
        "nyu_distance",
        "-m",
        "quick",
        "--model=oracle",
        f"--model={MODEL}",
        f"--results-dir={results}",  # after run_suite's own: this one holds
        f"--html={hostile / 'report.html'}",
    )
    assert result.ret == 1, (result.stdout.str() + result.stderr.str())[-3000:]  # one error
    page = tmp_path / "page.html"
    assert main(["r1@oracle", f"r1@{MODEL}", "--results", str(results), "--html", str(page)]) == 0
    text = page_data(page)
    assert any(r[6][1] == ANSWER_PAYLOAD for r in text["rows"])
    assert any(ERROR_PAYLOAD in r[6][4] for r in text["rows"])

    error_text = ERROR_PAYLOAD.replace(TERMINAL_ESCAPES, "")
    found = scan(rendered(page, expect=[ANSWER_PAYLOAD]))
    assert found.ran() == [], found.ran()
    assert found.title == "vlmbench comparison"
    for payload in (MODEL_PAYLOAD, ANSWER_PAYLOAD, FILE_PAYLOAD, error_text):
        assert payload in found.text, payload


@pytest.mark.slow
def test_two_profiles_of_one_model_side_by_side_say_why_they_differ(
    run_suite, tmp_path: Path, monkeypatch, capsys
) -> None:
    """One model, `--compat writeup` against `--compat source`: unit/helpers/lenient_answers.py
    writes each distance in centimetres ("About 234.5000 cm."). The write-up's parser converts it
    (`converted`) and is right; the original's takes the first number as metres
    (`source-number`) and is wrong. Every pair flips, and each row shows both rules."""
    monkeypatch.setenv("PYTHONPATH", CHILD_PATH)
    lenient = "--model=scripted:lenient_answers:reply"
    for run_id, compat in (("w", "writeup"), ("s", "source")):
        result, results = run_suite(
            "nyu_distance", "-m", "quick", lenient, f"--compat={compat}", run_id=run_id
        )
        assert result.ret == 0, result.outlines[-20:]
    page = tmp_path / "profiles.html"
    folders = [str(results / "nyu_distance" / r) for r in ("w", "s")]
    assert main([*folders, "--bootstrap", "50", "--html", str(page)]) == 0
    capsys.readouterr()
    data = page_data(page)
    assert data["rows"] and {KIND_CODES[r[3]] for r in data["rows"]} == {"a_right"}
    assert {(r[5][3], r[6][3]) for r in data["rows"]} == {("converted", "source-number")}
    assert "the profile differs (A writeup, B source)" in page.read_text(encoding="utf-8")


def test_a_partial_run_shows_its_facts_and_says_it_is_partial(tmp_path: Path, capsys) -> None:
    """A run whose tables do not hold its selection is read all the same: its date, profile and
    data in the sides table, and a warning naming how far it got."""
    from test_runs_leaderboard import make_run

    partial = {"complete": False, "interrupted": False, "cases_finished": 3, "cases_selected": 6}
    a = hand_run(make_run(tmp_path, "full", {"m1": 0.3}), "m1", 1)
    b = hand_run(make_run(tmp_path, "part", {"m1": 0.4}, completion=partial), "m1", 2)
    page = tmp_path / "page.html"
    assert main([str(a), str(b), "--bootstrap", "50", "--html", str(page)]) == 0
    capsys.readouterr()
    text = html.unescape(page.read_text(encoding="utf-8"))
    assert "B: partial run (manifest.json completion: not complete, 3 of 6 cases finished)" in text
    assert "(partial run" not in text  # its facts, not the reason in their place
    assert "writeup" in text and "aaaaaaaaaaaa" in text  # the profile, the fingerprint
