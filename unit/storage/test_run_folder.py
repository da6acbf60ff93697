"""The run folder's owner (support.storage.run_folder) against hostile folders: a real run's folder,
each of its files mutated (wrong type, missing field, deep nesting, non-UTF-8, huge, a link out,
duplicate ids, another evaluation's rows, control characters in names), read by every reader:
`vlmbench-compare` (load_run and its CLI), the leaderboard (read_run), `--resume`
(earlier_runs) and the comparison page's pictures (read_pictures). Each gives a named error
(the file, the line, the field) or a skip: no traceback, no escape byte on the terminal, no path
outside the folder on a page."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import REPO
from reports.resume import earlier_runs
from support.compare.leaderboard import Run, Skipped, build_leaderboard, read_run
from support.compare.runs import load_run, main
from support.settings import OutputSettings, RunSettings
from support.storage.run_folder import (
    FORMAT_FIELD,
    FORMAT_VERSION,
    MANIFEST,
    PICTURE_SUFFIXES,
    PICTURES,
    RAW,
    SUMMARY,
    RunFolderError,
    read_manifest,
    read_outcomes,
    read_pictures,
)
from unit.helpers.suite_runs import link_shared_data

# one worker runs this module: real_run (a pointing run in a subprocess) is made once, not once
# a worker
pytestmark = pytest.mark.xdist_group("run_folder")

ESC = "\x1b"
# OSC 0 (window title), OSC 52 (clipboard write), OSC 8 (a link), CSI 2J (clear): no "/", so
# the text is a folder name too
ESCAPES = "\x1b]0;pwned-title\x07\x1b]52;c;cHduZWQ=\x07\x1b]8;;x\x1b\\\x1b[2J"


def pointing_argv(base: Path, data: Path, *args: str, shared: Path) -> list[str]:
    """`pytest evals/pointing` on the quick liver cases, oracle and chance, results under
    base/results (run r1 unless `args` say), its cache under base/cache (the data and derived
    parts the session's, in `shared`: SHARED_PARTS)."""
    link_shared_data(base / "cache", shared)
    return [
        sys.executable, "-m", "pytest", str(REPO / "evals" / "pointing"), f"--rootdir={REPO}",
        f"--cholecseg8k={data}", "-m", "quick", "-k", "liver", "--model=oracle,chance",
        f"--cache-dir={base / 'cache'}", f"--results-dir={base / 'results'}", "--bootstrap=50",
        "-p", "no:cacheprovider", "-p", "no:randomly", "-q", *args,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def real_run(
    tmp_path_factory: pytest.TempPathFactory, synthetic_cholecseg8k: Path, shared_cache: Path
) -> Path:
    """pointing's quick liver cases, oracle and chance, with an HTML report (pictures.json):
    a real run folder, made once for the module; tests mutate copies."""
    base = tmp_path_factory.mktemp("real-run")
    html = f"--html={base / 'report.html'}"
    argv = pointing_argv(base, synthetic_cholecseg8k, "--run-id=r1", html, shared=shared_cache)
    done = subprocess.run(argv, cwd=base, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return base / "results" / "pointing" / "r1"


def copy_run(real_run: Path, tmp_path: Path, run_id: str = "r1") -> Path:
    """A copy of the real run at tmp/results/pointing/<run_id> (its report and assets beside)."""
    folder = tmp_path / "results" / "pointing" / run_id
    shutil.copytree(real_run, folder)
    for extra in ("report.html", "report_assets"):
        source = real_run.parents[2] / extra
        target = tmp_path / extra
        if source.is_dir() and not target.exists():
            shutil.copytree(source, target)
        elif source.is_file():
            shutil.copy(source, target)
    return folder


def rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / RAW).read_text().splitlines() if line]


def write_rows(folder: Path, found: list[dict]) -> None:
    (folder / RAW).write_text("".join(json.dumps(r) + "\n" for r in found), encoding="utf-8")


def row_field(line: int, field: str, value: object) -> Callable[[Path], None]:
    """Mutation: row `line` (1-based) gets `field` = value."""

    def mutate(folder: Path) -> None:
        found = rows(folder)
        found[line - 1][field] = value
        write_rows(folder, found)

    return mutate


def row_without(line: int, field: str) -> Callable[[Path], None]:
    def mutate(folder: Path) -> None:
        found = rows(folder)
        del found[line - 1][field]
        write_rows(folder, found)

    return mutate


def raw_line(line: int, text: bytes) -> Callable[[Path], None]:
    """Mutation: row `line` replaced by `text` (bytes, as they land on disk)."""

    def mutate(folder: Path) -> None:
        lines = (folder / RAW).read_bytes().splitlines()
        lines[line - 1] = text
        (folder / RAW).write_bytes(b"\n".join(lines) + b"\n")

    return mutate


def duplicate(folder: Path) -> None:
    found = rows(folder)
    write_rows(folder, [*found, found[1]])


def another_evaluation(folder: Path) -> None:
    found = rows(folder)
    found[2] = {**found[2], "evaluation": "nyu_distance"}
    write_rows(folder, found)


def link_out(name: str) -> Callable[[Path], None]:
    def mutate(folder: Path) -> None:
        (folder / name).unlink()
        (folder / name).symlink_to("/etc/passwd")

    return mutate


def manifest_field(dotted: str, value: object) -> Callable[[Path], None]:
    def mutate(folder: Path) -> None:
        manifest = json.loads((folder / MANIFEST).read_text())
        holder = manifest
        *parents, name = dotted.split(".")
        for p in parents:
            holder = holder[p]
        holder[name] = value
        (folder / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")

    return mutate


def file_text(name: str, text: bytes) -> Callable[[Path], None]:
    def mutate(folder: Path) -> None:
        (folder / name).write_bytes(text)

    return mutate


DEEP = b"[" * 200_000
DEEP_OBJECT = b'{"a": ' * 100_000 + b"1" + b"}" * 100_000
# (name, mutation, the file a named error names, the line it names or 0)
ROW_MUTATIONS = [
    ("case_id int", row_field(1, "case_id", 123), RAW, 1),
    ("group a text", row_field(2, "group", "liver"), RAW, 2),
    ("group a list", row_field(2, "group", ["liver"]), RAW, 2),
    ("group null", row_field(2, "group", None), RAW, 2),
    ("raw an int", row_field(3, "raw", 5), RAW, 3),
    ("error an int", row_field(3, "error", 5), RAW, 3),
    ("scores a text", row_field(1, "scores", "f1=1"), RAW, 1),
    ("score hit 'yes'", row_field(1, "scores", {"hit": "yes", "y_true": 1, "y_pred": 1}), RAW, 1),
    ("score y_pred [1]", row_field(1, "scores", {"hit": True, "y_true": 1, "y_pred": [1]}), RAW, 1),
    ("status unknown", row_field(4, "status", "fine"), RAW, 4),
    ("latency inf text", row_field(4, "latency_s", "inf"), RAW, 4),
    ("no model", row_without(2, "model"), RAW, 2),
    ("unknown field", row_field(2, "surprise", 1), RAW, 2),
    ("deep nesting", raw_line(2, DEEP), RAW, 2),
    ("deep but valid JSON", raw_line(2, b"[" * 100 + b"]" * 100), RAW, 2),
    ("not JSON", raw_line(3, b"{"), RAW, 3),
    ("non-UTF-8", raw_line(3, b'{"case_id": "\xff\xfe"}'), RAW, 0),
    ("duplicate ids", duplicate, RAW, 0),
    ("another evaluation's row", another_evaluation, RAW, 3),
    ("raw a link out", link_out(RAW), RAW, 1),
]
MANIFEST_MUTATIONS = [
    ("manifest a list", file_text(MANIFEST, b"[1, 2]"), MANIFEST, 0),
    (
        "manifest deep",
        file_text(MANIFEST, b'{"a": ' * 100_000 + b"1" + b"}" * 100_000),
        MANIFEST,
        0,
    ),
    ("manifest non-UTF-8", file_text(MANIFEST, b'{"evaluation": "\xff"}'), MANIFEST, 0),
    ("command.args 5", manifest_field("command.args", 5), MANIFEST, 0),
    ("completion a text", manifest_field("completion.complete", "yes"), MANIFEST, 0),
    ("format 99", manifest_field(FORMAT_FIELD, 99), MANIFEST, 0),
    ("models.n -1", manifest_field("models.oracle.outcomes.n", -1), MANIFEST, 0),
    ("manifest a link out", link_out(MANIFEST), MANIFEST, 0),
]


def named(exc: BaseException, file: str, line: int) -> None:
    """`exc` is a named error: its message names `file` (and `line`), nothing of a traceback."""
    text = str(exc)
    assert file in text, text
    if line:
        assert f"{file}:{line}" in text, text
    assert "Traceback" not in text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("what", "mutate", "file", "line"), ROW_MUTATIONS, ids=[m[0] for m in ROW_MUTATIONS]
)
def test_every_reader_names_a_broken_row(real_run, tmp_path, what, mutate, file, line) -> None:
    folder = copy_run(real_run, tmp_path)
    mutate(folder)
    with pytest.raises(RunFolderError) as caught:
        load_run(folder)
    named(caught.value, file, line)
    with pytest.raises(ValueError) as caught:  # --resume: a usage error at configure
        earlier_runs(
            RunSettings(output=OutputSettings(results_dir=tmp_path / "results")), ["pointing"], "r1"
        )
    named(caught.value, file, line)
    assert str(caught.value).startswith("--resume r1: ")
    # the leaderboard reads the manifest and the tables: a row breaks neither
    assert isinstance(read_run(folder), Run)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("what", "mutate", "file", "line"), MANIFEST_MUTATIONS, ids=[m[0] for m in MANIFEST_MUTATIONS]
)
def test_every_reader_names_a_broken_manifest(real_run, tmp_path, what, mutate, file, line):
    folder = copy_run(real_run, tmp_path)
    mutate(folder)
    with pytest.raises(RunFolderError) as caught:
        read_manifest(folder)
    named(caught.value, file, line)
    with pytest.raises(ValueError) as caught:
        earlier_runs(
            RunSettings(output=OutputSettings(results_dir=tmp_path / "results")), ["pointing"], "r1"
        )
    named(caught.value, file, line)
    board = build_leaderboard(tmp_path / "results")  # skipped with why, the others listed
    assert [s.folder for s in board.skipped] == [folder]
    assert board.skipped[0].why.startswith("manifest.json: "), board.skipped[0].why


def test_a_folder_of_another_format_is_refused_naming_the_version(tmp_path) -> None:
    (tmp_path / MANIFEST).write_text(json.dumps({FORMAT_FIELD: 2, "evaluation": "pgt"}))
    with pytest.raises(RunFolderError, match=r"run folder format 2; this vlmbench reads format 1"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"evaluation": "pgt"}))  # before the field
    assert read_manifest(tmp_path) == {"evaluation": "pgt"}


@pytest.mark.slow
def test_the_writer_writes_the_format_and_readers_read_it_back(real_run) -> None:
    manifest = read_manifest(real_run, required=True)
    assert manifest[FORMAT_FIELD] == FORMAT_VERSION
    found = read_outcomes(real_run, "pointing")
    assert len(found) == sum(m["outcomes"]["n"] for m in manifest["models"].values()) > 0
    pictures = read_pictures(real_run)
    assert pictures.missing is None and not pictures.dropped and pictures.files


@pytest.mark.slow
def test_summary_cells_and_shares_that_are_not_numbers(real_run, tmp_path) -> None:
    """A metric cell "nan" stays a number (the column is not read as labels); another text is
    a skip naming the row and column; a fallback share of inf or -3 is no share (shown as —)."""
    folder = copy_run(real_run, tmp_path)
    text = (folder / SUMMARY).read_text().splitlines()
    header = text[0].split(",")
    column = header.index("f1")
    cells = text[1].split(",")
    cells[column] = "nan"
    (folder / SUMMARY).write_text("\n".join([text[0], ",".join(cells), *text[2:]]) + "\n")
    run = read_run(folder)
    assert isinstance(run, Run) and "f1" in run.metrics and "f1" not in run.labels
    cells[column] = "abc"
    (folder / SUMMARY).write_text("\n".join([text[0], ",".join(cells), *text[2:]]) + "\n")
    skipped = read_run(folder)
    assert isinstance(skipped, Skipped)
    assert skipped.why == "summary.csv: line 2: f1: 'abc' is not a number", skipped.why
    (folder / SUMMARY).write_text("\n".join(text) + "\n")
    (folder / "provenance.csv").write_text(
        (folder / "provenance.csv").read_text().replace(",0.0,", ",inf,").replace(",0,", ",-3,")
    )
    run = read_run(folder)
    assert isinstance(run, Run)
    assert all(0 <= share <= 1 for share in run.fallback.values())


@pytest.mark.slow
def test_pictures_stay_inside_the_run_folder(real_run, tmp_path) -> None:
    """pictures.json entries outside the folder (a parent path, a link out) or of another type
    (.html) are dropped, named; the page shows none of them and says so."""
    folder = copy_run(real_run, tmp_path)
    index = json.loads((folder / PICTURES).read_text())
    cases = sorted(index["pictures"])
    (folder / "evil.html").write_text("<script>alert(1)</script>")
    (folder / "out.png").symlink_to("/etc/passwd")
    index["pictures"][cases[0]] = "../../../../../../../../etc/passwd"
    index["pictures"][cases[1]] = "evil.html"
    index["pictures"][cases[2]] = "out.png"
    (folder / PICTURES).write_text(json.dumps(index))
    os.utime(folder / PICTURES)  # newer than raw_results.jsonl, as the writer leaves it
    found = read_pictures(folder)
    assert len(found.dropped) == 3, found.dropped
    assert cases[0] not in found.files and cases[1] not in found.files
    assert cases[2] not in found.files
    for path in found.files.values():
        assert path.suffix in PICTURE_SUFFIXES and path.resolve().is_relative_to(tmp_path)
    other = copy_run(real_run, tmp_path, "r2")
    page = tmp_path / "page.html"
    assert main([str(other), str(folder), "--html", str(page), "--bootstrap", "20"]) == 0
    text = page.read_text()
    assert "etc/passwd" not in text.replace("../../../../../../../../etc/passwd", "")
    assert "evil.html" not in text.split("Pictures not shown", 1)[0]
    assert "Pictures not shown from" in text


@pytest.mark.slow
def test_the_terminal_gets_no_escape_from_a_shared_folder(real_run, tmp_path, capsys) -> None:
    """Model names, labels and folder names with OSC 0/8/52 and CSI 2J: vlmbench-compare and
    the leaderboard print them as text, without one escape byte."""
    folder = copy_run(real_run, tmp_path)
    found = rows(folder)
    for r in found:
        r["model"] = f"oracle{ESCAPES}" if r["model"] == "oracle" else r["model"]
        r["case_id"] = r["case_id"].replace("-oracle", f"-oracle{ESCAPES}")
    write_rows(folder, found)
    other = copy_run(real_run, tmp_path, "r2")
    bad = tmp_path / "results" / "pointing" / f"bad{ESCAPES}"
    bad.mkdir()
    (bad / MANIFEST).write_text("{")
    assert main([str(other), str(folder), "--bootstrap", "20"]) in (0, 2)
    assert main(["--leaderboard", str(tmp_path / "results")]) == 0
    out = capsys.readouterr()
    assert ESC not in out.out and ESC not in out.err
    assert "\x07" not in out.out + out.err
    assert "pointing/bad`" in out.out  # the folder is listed, its escapes gone


def test_cli_errors_are_named_with_exit_2(tmp_path, capsys) -> None:
    folder = tmp_path / "results" / "pointing" / "r1"
    folder.mkdir(parents=True)
    (folder / RAW).write_text('{"case_id": 123}\n')
    assert main([str(folder), str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"{folder / RAW}:1: case_id: expected a text, got int" in err
    (tmp_path / "a-file").write_text("")
    argv = ["--leaderboard", str(tmp_path), "--csv", str(tmp_path / "a-file" / "b.csv")]
    assert main(argv) == 2
    assert f"--csv {tmp_path / 'a-file' / 'b.csv'}: not written" in capsys.readouterr().err


@pytest.mark.slow
def test_an_unreadable_subfolder_is_skipped(real_run, tmp_path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every folder")
    folder = copy_run(real_run, tmp_path)
    locked = tmp_path / "results" / "pointing" / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        board = build_leaderboard(tmp_path / "results")
    finally:
        locked.chmod(0o755)
    assert [s.folder for s in board.skipped] == [locked]
    assert "pointing" in board.tables and folder.name in set(board.tables["pointing"]["run"])


@pytest.mark.slow
def test_resume_refuses_a_broken_earlier_run_before_any_request(
    real_run, tmp_path, synthetic_cholecseg8k, shared_cache
) -> None:
    """`--resume r1` over a run holding another evaluation's row: a usage error (exit 4) at
    configure naming the file and line; nothing is collected, nothing written."""
    folder = copy_run(real_run, tmp_path)
    another_evaluation(folder)
    before = sorted(p.name for p in folder.iterdir())
    argv = pointing_argv(tmp_path, synthetic_cholecseg8k, "--resume=r1", shared=shared_cache)
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert f"--resume r1: {folder / RAW}:3: evaluation: a row of 'nyu_distance'" in out
    assert sorted(p.name for p in folder.iterdir()) == before


@pytest.mark.slow
def test_a_partial_copy_resumed_says_what_its_tables_cover(
    real_run, tmp_path, synthetic_cholecseg8k, shared_cache
) -> None:
    """An earlier run copied in part (half its rows, its manifest saying complete), resumed
    with one case: the merged tables are marked partial in manifest.json and report.md."""
    folder = copy_run(real_run, tmp_path)
    found = rows(folder)
    write_rows(folder, found[: len(found) // 2])
    kept = {r["case_id"] for r in found[: len(found) // 2]}
    # rows are sorted by model: the copy lost oracle's; rerun one item (both models)
    last = found[-1]
    item = last["case_id"].removesuffix(f"-{last['model']}")
    argv = pointing_argv(tmp_path, synthetic_cholecseg8k, "--resume=r1", shared=shared_cache)
    argv[argv.index("liver")] = item
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    completion = read_manifest(folder, required=True)["completion"]
    assert completion["complete"] is False, completion
    assert completion["earlier_recorded"] == len(found), completion
    merged = {o.case_id for o in read_outcomes(folder, "pointing")}
    assert kept < merged and len(merged) < len(found)
    line = completion["partial"]
    assert "holds fewer outcomes than the" in line and "a partial copy" in line
    assert (folder / "report.md").read_text().startswith(f"**{line}.**")


def test_a_model_folder_whose_config_is_nested_too_deep_is_named(tmp_path) -> None:
    """An `hf:`/`vllm:` folder's config.json 100,000 levels deep: a named BackendUnavailable
    when the backend is made, never a RecursionError from transformers later."""
    from support.backends.base import BackendUnavailable
    from support.backends.model_folder import checked_folder

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_bytes(DEEP_OBJECT)
    with pytest.raises(BackendUnavailable, match=r"config.json is nested too deep to read"):
        checked_folder("hf:model", str(folder))
    (folder / "config.json").write_text("[1]")
    with pytest.raises(BackendUnavailable, match=r"config.json: not a JSON object"):
        checked_folder("hf:model", str(folder))
    (folder / "config.json").write_text('{"model_type": "llava"}')
    assert checked_folder("hf:model", str(folder)) == folder


@pytest.mark.slow
def test_a_folder_with_secrets_in_clear_reaches_no_leaderboard_output(real_run, tmp_path) -> None:
    """A manifest an older vlmbench wrote with `--model-arg hf_token=...` in clear: the
    leaderboard's markdown, CSV (command_line) and HTML (the command cell's title) redact it."""
    folder = copy_run(real_run, tmp_path)
    manifest = json.loads((folder / MANIFEST).read_text())
    clear = ["--model-arg", "hf_token=hf_SECRET_clear1", "--model-arg=password=hunter2x",
             "--model-arg-secret", "phrase=opensesame77", "--model-arg", "size=7"]  # fmt: skip
    manifest["command"]["args"] += clear
    manifest["command"]["line"] += " " + " ".join(clear)
    (folder / MANIFEST).write_text(json.dumps(manifest))
    board_csv, board_html = tmp_path / "b.csv", tmp_path / "b.html"
    argv = ["--leaderboard", str(tmp_path / "results"), "--csv", str(board_csv)]
    assert main([*argv, "--html", str(board_html)]) == 0
    for text in (board_csv.read_text(), board_html.read_text()):
        for secret in ("hf_SECRET_clear1", "hunter2x", "opensesame77"):
            assert secret not in text
        assert "size=7" in text


@pytest.mark.slow
def test_a_huge_answer_is_read_whole(real_run, tmp_path) -> None:
    """A 16 MiB answer in a row breaks nothing: every reader takes the row as it is."""
    folder = copy_run(real_run, tmp_path)
    huge = "x" * 2**24
    row_field(2, "raw", huge)(folder)
    name, found = load_run(folder)
    assert name == "pointing" and any(o.raw == huge for o in found)
    with pytest.raises(ValueError, match="other settings"):  # the rows read, the rules differ
        earlier_runs(
            RunSettings(output=OutputSettings(results_dir=tmp_path / "results")), ["pointing"], "r1"
        )
    assert isinstance(read_run(folder), Run)


@pytest.mark.slow
def test_out_into_a_missing_folder_exits_2_naming_it(real_run, tmp_path, capsys) -> None:
    a, b = copy_run(real_run, tmp_path, "a"), copy_run(real_run, tmp_path, "b")
    out = tmp_path / "missing" / "table.csv"
    assert main([str(a), str(b), "--bootstrap", "20", "--out", str(out)]) == 2
    assert f"vlmbench-compare: --out {out}: not written" in capsys.readouterr().err
