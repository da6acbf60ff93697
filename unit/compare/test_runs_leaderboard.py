"""`vlmbench-compare --leaderboard DIR` (support.compare.leaderboard): runs found, rows per run and
model with the key metrics and intervals, groups of comparable runs, skipped folders, hostile text
in the markdown, CSV and HTML."""

from __future__ import annotations

import csv
import json
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from support import evaluations
from support.compare.leaderboard import (
    build_leaderboard,
    lower_is_better,
    run_folders,
    shown_table,
    to_html,
    to_markdown,
)
from support.compare.runs import main
from support.evaluations.nyu_distance import summary as nyu
from support.storage.files import write_csv

HOSTILE = "=cmd|<script>alert(1)</script>"  # a formula, a pipe, a tag
SHA_X = "a" * 64
SHA_Y = "b" * 64


# --- hand-written runs ----------------------------------------------------------------------------


def manifest(run_id: str, sha: str | None = SHA_X, compat: str = "writeup", **extra) -> dict:
    """A manifest.json with the sections the leaderboard reads (reports/manifest.py's layout)."""
    return {
        "manifest_version": 1,
        "evaluation": "nyu_distance",
        "command": {
            "args": ["evals/nyu_distance", "-m", "quick"],
            "dir": "/w",
            "line": "pytest evals/nyu_distance -m quick",
        },
        "run": {"run_id": run_id, "compat": compat, "models": ["m1", "m2"]},
        "data": {"sha256": sha, "label": "synthetic rooms"},
        "times": {"start": f"2026-11-2{len(run_id) % 10}T10:00:00.000+00:00"},
        "completion": {"complete": True, "interrupted": False},
        **extra,
    }


def summary(maes: dict[str, float]) -> pd.DataFrame:
    """nyu_distance's summary.csv columns (its headline's), one row per model: mae as given,
    every other metric 0.5 with the interval [0.4, 0.6]."""
    rows = []
    for model, mae in maes.items():
        row: dict = {"model": model, "n": 10, "n_error": 0}
        for metric in nyu.HEADLINE:
            row |= {metric: 0.5, f"{metric}_lo": 0.4, f"{metric}_hi": 0.6}
        row |= {"mae": mae, "mae_lo": mae - 0.1, "mae_hi": mae + 0.1}
        rows.append(row)
    return pd.DataFrame(rows)


def make_run(root: Path, run_id: str, maes: dict[str, float], **kw) -> Path:
    folder = root / "nyu_distance" / run_id
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(manifest(run_id, **kw)), encoding="utf-8")
    write_csv(summary(maes), folder / "summary.csv")
    return folder


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root`: (size, mtime in ns)."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


def test_key_metrics_come_from_the_evaluation_and_lower_errors_rank_first(tmp_path: Path) -> None:
    make_run(tmp_path, "r1", {"m1": 2.0, "m2": 0.5})
    make_run(tmp_path, "r22", {"m1": 1.0})
    board = build_leaderboard(tmp_path)
    summary_of = evaluations.spec("nyu_distance").summary_module()
    assert board.metrics["nyu_distance"] == summary_of.KEY_METRICS
    table = board.tables["nyu_distance"]
    assert list(zip(table["run"], table["model"], strict=True)) == [
        ("r1", "m2"),
        ("r22", "m1"),
        ("r1", "m1"),
    ]
    assert lower_is_better("mae") and not lower_is_better("delta1")
    assert board.notes == {} and set(table["group"]) == {"A"}
    text = to_markdown(board)
    assert "0.500 [0.400, 0.600]" in text  # delta1, report.md's format
    assert "2.000 [1.900, 2.100]" in text  # m1's mae in r1
    assert "not comparable" not in text


def test_other_data_or_profile_is_another_group_with_a_note(tmp_path: Path) -> None:
    make_run(tmp_path, "r1", {"m1": 1.0})  # earliest start: group A
    make_run(tmp_path, "r22", {"m1": 2.0})  # same data and profile: A
    make_run(tmp_path, "r333", {"m1": 3.0}, sha=SHA_Y)
    make_run(tmp_path, "r4444", {"m1": 4.0}, compat="source")
    board = build_leaderboard(tmp_path)
    table = board.tables["nyu_distance"]
    groups = dict(zip(table["run"], table["group"], strict=True))
    assert groups == {"r1": "A", "r22": "A", "r333": "B", "r4444": "C"}
    note = board.notes["nyu_distance"]
    assert "not comparable" in note and "data fingerprint differs" in note
    assert "profile differs" in note
    text = to_markdown(board)
    assert f"Note: {note}" in text and "aaaaaaaaaaaa (synthetic rooms)" in text


def test_only_a_profile_differs(tmp_path: Path) -> None:
    make_run(tmp_path, "r1", {"m1": 1.0})
    make_run(tmp_path, "r22", {"m1": 1.0}, compat="source")
    note = build_leaderboard(tmp_path).notes["nyu_distance"]
    assert note.endswith("profile differs") and "fingerprint" not in note


def test_broken_runs_are_skipped_with_why_and_nothing_is_written(tmp_path: Path) -> None:
    make_run(tmp_path, "good", {"m1": 1.0})
    (tmp_path / "nyu_distance" / "no_manifest").mkdir()
    (tmp_path / "nyu_distance" / "no_manifest" / "summary.csv").write_text("model\n")
    bad = make_run(tmp_path, "bad_json", {"m1": 1.0})
    (bad / "manifest.json").write_text("{not json", encoding="utf-8")
    (make_run(tmp_path, "no_summary", {"m1": 1.0}) / "summary.csv").unlink()
    (make_run(tmp_path, "empty_summary", {"m1": 1.0}) / "summary.csv").write_text("")
    foreign = make_run(tmp_path, "foreign_summary", {"m1": 1.0})
    (foreign / "summary.csv").write_text("model,x\nm1,1\n")
    stopped = {"complete": False, "interrupted": True, "cases_finished": 3, "cases_selected": 9}
    make_run(tmp_path, "interrupted", {"m1": 1.0}, completion=stopped)
    (make_run(tmp_path, "unknown", {"m1": 1.0}) / "manifest.json").write_text(
        json.dumps(manifest("unknown") | {"evaluation": "no_such_eval"})
    )
    before = snapshot(tmp_path)
    board = build_leaderboard(tmp_path)
    assert snapshot(tmp_path) == before
    assert list(board.tables["nyu_distance"]["run"]) == ["good"]
    why = {s.folder.name: s.why for s in board.skipped}
    assert why["no_manifest"] == "no manifest.json"
    assert why["bad_json"].startswith("manifest.json: not JSON (")
    assert why["no_summary"] == "no summary.csv"
    assert why["empty_summary"].startswith("summary.csv unreadable")
    assert why["foreign_summary"].startswith("summary.csv unreadable")
    assert why["interrupted"].startswith("interrupted run") and "3 of 9" in why["interrupted"]
    assert "'no_such_eval'" in why["unknown"]
    text = to_markdown(board)
    assert "## Skipped" in text and "no_summary" in text and "interrupted run" in text
    assert "interrupted run" in to_html(board)


def test_runs_found_from_results_an_evaluation_folder_or_one_run(tmp_path: Path) -> None:
    one = make_run(tmp_path, "r1", {"m1": 1.0})
    make_run(tmp_path, "r22", {"m1": 1.0})
    assert len(run_folders(tmp_path)) == 2
    assert len(run_folders(tmp_path / "nyu_distance")) == 2
    assert run_folders(one) == [one]
    assert list(build_leaderboard(one).tables["nyu_distance"]["run"]) == ["r1"]
    # a dry run's folder (dry_run.csv alone) and an evaluation's own data folder are no runs:
    # left out, not listed as broken
    dry = tmp_path / "nyu_distance" / "dry"
    dry.mkdir()
    (dry / "dry_run.csv").write_text("evaluation,model\n")
    (tmp_path / "pgt" / "synthetic" / "images").mkdir(parents=True)
    board = build_leaderboard(tmp_path)
    assert len(run_folders(tmp_path)) == 2 and board.skipped == []
    assert build_leaderboard(tmp_path / "nyu_distance").skipped == []


class Parsed(HTMLParser):
    """Tags seen, the text of every table cell, and the title attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.cells: list[str] = []
        self.titles: list[str] = []
        self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        self.titles += [value for name, value in attrs if name == "title"]
        self._in_cell = tag in ("td", "th")
        if self._in_cell:
            self.cells.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self._in_cell = False

    def handle_data(self, data: str) -> None:
        if self._in_cell:
            self.cells[-1] += data


def check_hostile(board, csv_path: Path, html_text: str, model: str, command: str) -> None:
    """`model` and `command` (hostile text) are shown as text in all three outputs."""
    text = to_markdown(board)
    assert "<script" not in text and "&lt;script>" in text
    assert "=cmd\\|&lt;script>" in text  # the pipe escaped: the row keeps its cells
    header = next(line for line in text.splitlines() if line.startswith("| group"))
    row = next(line for line in text.splitlines() if "alert(1)" in line and "group" not in line)
    assert row.count(" | ") == header.count(" | ")
    with csv_path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert "'" + model in [r["model"] for r in rows]  # formula-like: quoted for spreadsheets
    assert any(command in r["command_line"] for r in rows)
    parsed = Parsed()
    parsed.feed(html_text)
    assert "script" not in parsed.tags and "table" in parsed.tags
    assert model in parsed.cells
    assert any(command in title for title in parsed.titles)  # the full command line


def test_hostile_model_and_command_are_text_in_every_output(tmp_path: Path, capsys) -> None:
    results = tmp_path / "results"
    folder = make_run(results, "r1", {HOSTILE: 1.0, "m1": 2.0})
    data = json.loads((folder / "manifest.json").read_text())
    data["run"]["models"] = [HOSTILE, "m1"]
    data["command"]["line"] = f"pytest evals/nyu_distance -k '{HOSTILE}'"
    data["command"]["args"] = ["evals/nyu_distance", "-k", HOSTILE]
    (folder / "manifest.json").write_text(json.dumps(data))
    csv_path, html_path = tmp_path / "board.csv", tmp_path / "board.html"
    argv = ["--leaderboard", str(results), "--csv", str(csv_path), "--html", str(html_path)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    board = build_leaderboard(results)
    assert printed.strip() == to_markdown(board).strip()
    assert list(board.tables["nyu_distance"]["model"]) == [HOSTILE, "m1"]  # unquoted again
    check_hostile(board, csv_path, html_path.read_text(encoding="utf-8"), HOSTILE, HOSTILE)


def test_cli_leaderboard_excludes_two_runs_and_its_files_need_it(tmp_path: Path, capsys) -> None:
    run = make_run(tmp_path, "r1", {"m1": 1.0})
    for argv, words in (
        (["--leaderboard", str(tmp_path), str(run), str(run)], "--leaderboard DIR"),
        (["--leaderboard", str(tmp_path), "--out", "x.csv"], "--out"),
        ([str(run), str(run), "--csv", "x.csv"], "--leaderboard DIR"),
        ([], "--leaderboard DIR"),
        ([str(run)], "RUN_A RUN_B"),
    ):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2
        assert words in capsys.readouterr().err
    assert main(["--leaderboard", str(tmp_path / "nothing")]) == 2
    assert "no readable run" in capsys.readouterr().err


# --- real runs ------------------------------------------------------------------------------------


def report_cells(report: str) -> str:
    """report.md's text with the markdown table padding collapsed (cells compared as text)."""
    return " ".join(report.split())


@pytest.mark.slow
def test_leaderboard_of_real_runs(run_suite, tmp_path: Path, capsys) -> None:
    models = "--model=oracle,chance"
    for evaluation, args, run_id in (
        ("pointing", (), "writeup"),
        ("pointing", ("--compat", "source"), "source"),
        ("nyu_distance", (), "nyu"),
    ):
        result, results = run_suite(evaluation, models, "-m", "quick", *args, run_id=run_id)
        assert result.ret == 0, result.stdout.str()[-2000:]
    broken = results / "pointing" / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{", encoding="utf-8")
    before = snapshot(results)
    csv_path, html_path = tmp_path / "board.csv", tmp_path / "board.html"
    argv = ["--leaderboard", str(results), "--csv", str(csv_path), "--html", str(html_path)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert snapshot(results) == before
    board = build_leaderboard(results)

    pointing = board.tables["pointing"]
    keys = evaluations.spec("pointing").summary_module().KEY_METRICS
    assert board.metrics["pointing"][0] == keys[0]
    headline_rows = {}  # pointing's headline: the overall (ALL) row per model and condition
    for run_id in ("writeup", "source"):
        found = pd.read_csv(results / "pointing" / run_id / "summary.csv")
        headline_rows[run_id] = int((found["organ"] == "ALL").sum())
    assert pointing["run"].value_counts().to_dict() == headline_rows  # a row per model, condition
    assert set(pointing["model"]) == {"oracle", "chance"}
    oracle = pointing[pointing["model"] == "oracle"]
    assert (oracle[keys[0]] == 1.0).all()
    assert (oracle["fallback"] == 0.0).all()  # every oracle answer read as the prompt asks
    assert list(pointing[keys[0]]) == sorted(pointing[keys[0]], reverse=True)  # best first
    groups = dict(zip(pointing["run"], pointing["group"], strict=False))
    assert groups["writeup"] != groups["source"]
    assert "profile differs" in board.notes["pointing"]
    assert "fingerprint" not in board.notes["pointing"]  # the same quick data

    nyu_rows = board.tables["nyu_distance"]
    assert list(nyu_rows["model"]) == ["oracle", "chance"]  # mae: lower first
    assert "nyu_distance" not in board.notes
    assert [s.folder.name for s in board.skipped] == ["broken"]

    # intervals as report.md writes them
    for evaluation, run_id in (("pointing", "writeup"), ("nyu_distance", "nyu")):
        report = report_cells((results / evaluation / run_id / "report.md").read_text())
        shown = shown_table(board, evaluation)
        for cell in shown[shown["run"] == run_id][board.metrics[evaluation][0]]:
            assert "[" in cell and cell in report, cell
    assert f"Note: {board.notes['pointing']}." in text and "## Skipped" in text

    with csv_path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(pointing) + len(nyu_rows)
    assert {r["evaluation"] for r in rows} == {"pointing", "nyu_distance"}
    parsed = Parsed()
    parsed.feed(html_path.read_text(encoding="utf-8"))
    assert parsed.tags.count("tr") == len(rows) + 2  # a heading row per evaluation's table

    # a hostile model name and command in a real run's files
    folder = results / "nyu_distance" / "nyu"
    data = json.loads((folder / "manifest.json").read_text())
    data["run"]["models"] = ["oracle", HOSTILE]
    data["command"]["line"] += f" -k '{HOSTILE}'"
    data["command"]["args"] += ["-k", HOSTILE]
    (folder / "manifest.json").write_text(json.dumps(data))
    table = pd.read_csv(folder / "summary.csv")
    table["model"] = table["model"].replace({"chance": HOSTILE})
    write_csv(table, folder / "summary.csv")
    assert main(argv) == 0
    capsys.readouterr()
    board = build_leaderboard(results)
    check_hostile(board, csv_path, html_path.read_text(encoding="utf-8"), HOSTILE, HOSTILE)


def test_each_models_fallback_share_comes_from_provenance_csv(tmp_path: Path) -> None:
    """The fallback column: each model's share of answers read by a fallback parser rule
    (provenance.csv, support.contract.provenance); MISSING for a run without one, or with one that
    cannot be read (the run is still listed)."""
    read = make_run(tmp_path, "read", {"m1": 0.3, "m2": 0.5})
    rows = [  # m1: 3 of 4 answers converted (a fallback); m2: all bare numbers
        {"model": "m1", "read_by": "number", "kind": "primary", "answers": 1, "share": 0.25},
        {"model": "m1", "read_by": "converted", "kind": "fallback", "answers": 3, "share": 0.75},
        {"model": "m2", "read_by": "number", "kind": "primary", "answers": 4, "share": 1.0},
    ]
    write_csv(pd.DataFrame(rows), read / "provenance.csv")
    make_run(tmp_path, "older", {"m1": 0.4})  # written before provenance
    broken = make_run(tmp_path, "broken", {"m2": 0.6})
    (broken / "provenance.csv").write_text("model\n\x00", encoding="utf-8")
    board = build_leaderboard(tmp_path)
    table = board.tables["nyu_distance"]
    got = {(r.run, r.model): r.fallback for r in table.itertuples()}
    assert got[("read", "m1")] == pytest.approx(0.75) and got[("read", "m2")] == 0.0
    assert pd.isna(got[("older", "m1")]) and pd.isna(got[("broken", "m2")])
    shown = shown_table(board, "nyu_distance").set_index(["run", "model"])["fallback"]
    assert shown[("read", "m1")] == "75%" and shown[("read", "m2")] == "0%"
    assert shown[("older", "m1")] == "—"
    assert "| 75%" in to_markdown(board) and "<td>75%</td>" in to_html(board)
