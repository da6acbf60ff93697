"""Checks of the evaluations' data-path options, for their specs' `configure`.

A missing folder or file named on the command line is an OptionError (a usage error, exit code 4)
naming the option, the path and what to pass instead, before anything is collected; so is a
folder that holds none of the data's files. The checks stat paths, walk a folder until its first
data file and read at most a file's first line: configure runs in every process. What a dataset
holds beyond that is checked where it is opened.

What vlmbench itself built is never a user's data: a search below a data folder skips vlmbench's
cache folders (`skipped_folder`), and a data path inside a cache's `synthetic/` folder is
reported as synthetic (`built_by_vlmbench`).
"""

from __future__ import annotations

import csv
import fnmatch
import os
from collections.abc import Iterator
from pathlib import Path

from support.contract.evaluation import OptionError
from support.settings import OutputSettings
from support.storage.file_hashes import HASH_MEMO

SYNTHETIC_FIX = "or leave the option out for the synthetic sample"
CACHE_NAME = OutputSettings.cache_dir.name  # the cache folder's default name, .vlmbench-cache
SYNTHETIC_DIR = "synthetic"  # the samples vlmbench builds, in its cache folder
SKIPPED = f"{CACHE_NAME}/ and macOS __MACOSX/ folders are skipped"


def is_vlmbench_cache(folder: Path) -> bool:
    """Whether `folder` is a vlmbench cache: the default's name, or a cache under another name
    (VLMBENCH_CACHE_DIR, --cache-dir) known by its `synthetic/` folder beside the file hashes'
    memo."""
    if folder.name == CACHE_NAME:
        return True
    return (folder / SYNTHETIC_DIR).is_dir() and (folder / HASH_MEMO).is_file()


def skipped_folder(folder: Path) -> bool:
    """A folder a search for data never enters: a vlmbench cache, macOS archive debris."""
    return folder.name == "__MACOSX" or is_vlmbench_cache(folder)


def files_below(root: Path, pattern: str) -> Iterator[Path]:
    """Files under `root` (at any depth) whose name matches the glob `pattern`, in walk order,
    never inside `skipped_folder`s nor named `._*` (macOS resource forks). Symbolic links to
    folders are not followed."""
    for top, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not skipped_folder(Path(top) / d))
        for name in sorted(names):
            path = Path(top) / name
            if fnmatch.fnmatchcase(name, pattern) and not name.startswith("._") and path.is_file():
                yield path


def holds_data(flag: str, folder: Path, patterns: tuple[str, ...], what: str, fix: str) -> None:
    """OptionError naming `flag`, the folder and what is missing unless a file below `folder`
    matches one of `patterns` (`what`: the data in words, e.g. "no caseNNN_question.json")."""
    for pattern in patterns:
        if next(files_below(folder, pattern), None) is not None:
            return
    empty = next(os.scandir(folder), None) is None
    found = "an empty folder" if empty else f"holds no data below it: {what} ({SKIPPED})"
    raise OptionError(flag, f"{flag} {folder}: {found}; {fix}")


def built_by_vlmbench(path: str | Path, cache_dir: str | Path | None = None) -> bool:
    """Whether `path` lies in the `synthetic/` folder of a vlmbench cache (the run's
    `cache_dir`, a folder named `.vlmbench-cache`, or one `is_vlmbench_cache` knows), or is such
    a cache: data vlmbench built, to be reported as synthetic, whoever named it. A real dataset
    kept elsewhere in a cache (a hub download) is not."""
    given = Path(path).expanduser()
    caches = set()
    if cache_dir is not None:
        cache = Path(cache_dir).expanduser()
        caches = {cache.absolute(), cache.resolve()}
    for where in {given.absolute(), given.resolve()}:  # as named, and with links followed
        if where in caches or is_vlmbench_cache(where):  # the cache itself: its samples below
            return True
        for folder in (where, *where.parents):
            if folder.name == SYNTHETIC_DIR and (
                folder.parent in caches or is_vlmbench_cache(folder.parent)
            ):
                return True
    return False


def built_label(path: str | Path, cache_dir: str | Path, real: str) -> str | None:
    """The data label of a data path vlmbench built (`built_by_vlmbench`); None for any other.
    `real`: the real dataset's name."""
    if not built_by_vlmbench(path, cache_dir):
        return None
    return f"synthetic sample built by vlmbench ({path}; not the real {real})"


def existing_folder(flag: str, value: str, fix: str) -> Path:
    """`value` as a folder (expanded, relative to the working directory); OptionError naming
    `flag`, the path and `fix` (what to pass) when it is not one."""
    path = Path(value).expanduser()
    if not path.is_dir():
        what = "a file, not a directory" if path.exists() else "no such directory"
        raise OptionError(flag, f"{flag} {value}: {what}; {fix}")
    return path


def existing_file(flag: str, value: str | Path, fix: str) -> Path:
    """`value` as a file; OptionError naming `flag`, the path and `fix` when it is not one."""
    path = Path(value).expanduser()
    if not path.is_file():
        what = "a directory, not a file" if path.is_dir() else "no such file"
        raise OptionError(flag, f"{flag} {value}: {what}; {fix}")
    return path


def csv_columns(flag: str, path: Path) -> list[str]:
    """The header of a CSV file, stripped and lowercased; OptionError naming `flag` and the file
    when it has none or cannot be read as text."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            header = next(csv.reader(f), None)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise OptionError(flag, f"{flag} {path}: not a readable CSV ({exc})") from None
    columns = [c.strip().lower() for c in header or [] if c.strip()]
    if not columns:
        raise OptionError(flag, f"{flag} {path}: empty CSV, no header row")
    return columns
