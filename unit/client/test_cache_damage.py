"""A damaged response cache is named once (issue 34): a file that is not a database, truncated,
of another schema or locked stops the run at its start with a usage error naming the file and
the fix; a stored answer that does not decode is a miss, warned once with its count; a cache
folder that cannot be written is read without writing."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from support.client import response_cache as cache_module
from support.client.response_cache import CacheUnusable, ResponseCache, check_cache
from support.types import Response


def filled(path: Path, n: int = 40) -> Path:
    """A real cache with n answers."""
    cache = ResponseCache(path)
    for i in range(n):
        cache.put(f"k{i}", Response(texts=(f"answer {i} " + "x" * 400,), model="m"))
    cache.close()
    return path


def damaged(kind: str, path: Path) -> Path:
    """A cache file damaged one way."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "random bytes":
        path.write_bytes(os.urandom(8192))
        return path
    if kind == "another schema":
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE responses (id INTEGER PRIMARY KEY, body BLOB)")
        conn.commit()
        conn.close()
        return path
    if kind == "another program's database":
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        conn.commit()
        conn.close()
        return path
    filled(path)
    if kind == "truncated":
        with path.open("r+b") as f:
            f.truncate(path.stat().st_size // 2)
    return path


KINDS = ("random bytes", "truncated", "another schema", "another program's database")


@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_cache_is_named_with_its_fix(tmp_path: Path, kind: str) -> None:
    path = damaged(kind, tmp_path / "cache" / "responses.sqlite")
    with pytest.raises(CacheUnusable) as err:
        check_cache(path)
    message = str(err.value)
    assert str(path) in message and "--no-cache" in message and "aside" in message
    assert "schema" in message if "schema" in kind or "program" in kind else "sqlite" in message


def test_an_intact_or_missing_cache_passes_the_check(tmp_path: Path) -> None:
    assert check_cache(tmp_path / "none" / "responses.sqlite") == []
    assert check_cache(filled(tmp_path / "responses.sqlite")) == []
    assert not (tmp_path / "none").exists()  # the check makes nothing


def test_a_locked_cache_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = filled(tmp_path / "responses.sqlite")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")  # another process keeping the file to itself
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(cache_module, "CHECK_BUSY_S", 0.2)
    try:
        with pytest.raises(CacheUnusable, match="locked") as err:
            check_cache(path)
        assert str(path) in str(err.value) and "--no-cache" in str(err.value)
    finally:
        holder.execute("COMMIT")
        holder.close()


def test_answers_that_do_not_decode_are_misses_counted_once(tmp_path: Path) -> None:
    path = filled(tmp_path / "responses.sqlite")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE responses SET response = 'not json {' WHERE key IN ('k1', 'k2')")
    conn.execute("UPDATE responses SET response = '[1, 2]' WHERE key = 'k3'")  # JSON, no answer
    conn.commit()
    conn.close()
    (note,) = check_cache(path)
    assert str(path) in note and "2 stored answer(s) do not decode" in note
    cache = ResponseCache(path)
    assert [cache.get(k) for k in ("k1", "k2", "k3")] == [None, None, None]  # misses, no raise
    assert cache.undecodable == 3
    assert cache.get("k4").text.startswith("answer 4")
    cache.put("k1", Response(texts=("asked again",), model="m"))  # stored over the bad row
    assert cache.get("k1").text == "asked again"


def test_a_read_only_cache_is_read_and_never_written(tmp_path: Path) -> None:
    path = filled(tmp_path / "cache" / "responses.sqlite")
    for side in (".lock", "-wal", "-shm"):
        Path(f"{path}{side}").unlink(missing_ok=True)
    before = path.read_bytes()
    cache = ResponseCache(path, read_only=True)
    assert cache.read_only and len(cache) == 40
    assert cache.get("k7").text.startswith("answer 7")
    cache.put("new", Response(texts=("not stored",), model="m"))  # nothing, no raise
    assert cache.get("new") is None
    cache.close()
    assert path.read_bytes() == before and not Path(f"{path}.lock").exists()
    empty = ResponseCache(tmp_path / "ro-empty" / "responses.sqlite", read_only=True)
    assert empty.get("k1") is None and len(empty) == 0


@pytest.fixture
def immutable_folder(tmp_path: Path):
    """make(folder): a folder no process can write, root included (chattr +i, or chmod for
    another user); skips where neither holds."""
    made: list[Path] = []

    def make(folder: Path) -> Path:
        folder.chmod(0o555)
        if cache_module.writable(folder) and shutil.which("chattr"):
            subprocess.run(["chattr", "+i", str(folder)], capture_output=True, check=False)
            made.append(folder)
        if cache_module.writable(folder):
            pytest.skip("no way to make a read-only folder here (root without chattr +i)")
        return folder

    yield make
    for folder in made:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True, check=False)
    for folder in tmp_path.rglob("*"):
        if folder.is_dir():
            folder.chmod(0o755)


def test_a_cache_folder_that_cannot_be_written_is_found_read_only(
    tmp_path: Path, immutable_folder
) -> None:
    path = filled(tmp_path / "cache" / "responses.sqlite")
    for side in (".lock", "-wal", "-shm"):
        Path(f"{path}{side}").unlink(missing_ok=True)
    immutable_folder(path.parent)
    cache = ResponseCache(path)  # before: PermissionError on responses.sqlite.lock
    assert cache.read_only and cache.get("k3").text.startswith("answer 3")
    cache.put("k3", Response(texts=("new",), model="m"))
    cache.close()
    assert check_cache(path) == []


# ---- through the real suite ---------------------------------------------------------------------
ARGS = ("-m", "quick", "-k", "s0000 and zero_shot and gallbladder", "-p", "no:randomly")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["random bytes", "another schema"])
def test_a_run_on_a_damaged_cache_stops_at_its_start(run_suite, tmp_path: Path, kind) -> None:
    damaged(kind, tmp_path / "cache" / "responses.sqlite")
    result, results = run_suite("pointing", *ARGS)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    assert f"response cache {tmp_path / 'cache' / 'responses.sqlite'}" in out
    assert "--no-cache" in out and "Traceback" not in out
    assert not results.exists() or not any(results.rglob("raw_results.jsonl"))


@pytest.mark.slow
def test_answers_that_do_not_decode_are_asked_again(run_suite, tmp_path: Path) -> None:
    first, _ = run_suite("pointing", *ARGS, run_id="first")
    assert first.ret == 0
    conn = sqlite3.connect(tmp_path / "cache" / "responses.sqlite")
    conn.execute("UPDATE responses SET response = 'not json' WHERE rowid = 1")
    conn.commit()
    conn.close()
    again, _ = run_suite("pointing", *ARGS, "-v", run_id="again")
    out = again.stdout.str()
    assert again.ret == 0, out
    assert out.count("1 stored answer(s) do not decode") == 1
    assert "model calls: 1 sent, 1 served from cache" in out
