"""Checks of the evaluations' data-path options, for their specs' `configure`.

A missing folder or file named on the command line is an OptionError (a usage error, exit code 4)
naming the option, the path and what to pass instead, before anything is collected. The checks
stat paths and read at most a file's first line: configure runs in every process. What a
dataset holds beyond that is checked where it is opened.
"""

from __future__ import annotations

import csv
from pathlib import Path

from support.evaluation import OptionError

SYNTHETIC_FIX = "or leave the option out for the synthetic sample"


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
