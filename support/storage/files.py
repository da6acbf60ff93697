"""A run's files: atomic writes (a reader never sees half a file), built-once folders,
raw_results.jsonl, CSV, and file names from free text (model names)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:  # imported where a table is built: workers import this module for its writers
    import pandas as pd

from support.types import Outcome


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write via `write(file)` into a temp file beside path, then rename it over path: a reader
    (or a run killed midway) never sees half a file. An OSError (a full disk, a file too large,
    no permission) is raised again naming `path`, not the temp file or nothing."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _naming(exc, path) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, 0o644)  # mkstemp makes it private
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):  # on a broken disk the clean-up can fail too
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _naming(exc, path) from exc
        raise


def _naming(exc: OSError, path: Path) -> OSError:
    """`exc` as the same kind of OSError whose message names `path` (`[Errno 28] No space left
    on device: 'results/.../report.md'`)."""
    if exc.errno is None:
        return OSError(f"{exc}: {path}")
    return type(exc)(exc.errno, exc.strerror or os.strerror(exc.errno), str(path))


def build_once(target: Path, build: Callable[[Path], object], timeout_s: float = 600) -> Path:
    """`target`, built by `build(folder)` on first use: safe across processes (xdist workers at
    once): one builds under a file lock while the others wait, into a temporary folder renamed
    into place when complete, so a reader never sees half a build."""
    from filelock import FileLock

    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{target}.lock", timeout=timeout_s):
        if target.is_dir():
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            build(tmp)
            os.chmod(tmp, 0o755)  # mkdtemp makes it private
            os.rename(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def atomic_write_text(path: Path, text: str) -> None:
    """atomic_write of UTF-8 text."""
    data = text.encode("utf-8")
    atomic_write(path, lambda f: f.write(data))


# What differs between two runs of the same inputs (timings, and whether answers came from the
# cache): kept out of raw_results.jsonl, so it is byte-identical across reruns, serial or -n N;
# calls.csv holds them.
RUN_FIELDS = ("latency_s", "backend_calls", "cache_hits", "cached")

# how an answer was obtained, not what it was: kept out of raw_results.jsonl with RUN_FIELDS, so a
# run through a batch API writes the bytes a synchronous one does (usage.csv prices it)
HOW_FIELDS = (*RUN_FIELDS, "batch_usage")


def write_jsonl(outcomes: Iterable[Outcome], path: Path) -> Path:
    """One JSON object per outcome, keys sorted: every field of `Outcome.to_json` but HOW_FIELDS
    (RUN_FIELDS and `batch_usage`)."""
    lines = [
        json.dumps({k: v for k, v in o.to_json().items() if k not in HOW_FIELDS}, sort_keys=True)
        for o in outcomes
    ]
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
    return path


def write_error(folder: Path) -> OSError | None:
    """None when this process can create files in `folder` (made if missing), else the error:
    tried, not guessed from permission bits (root, read-only mounts, immutable folders)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as exc:
        return exc


# longest file or folder name made from free text, in characters (ASCII: bytes too); file systems
# allow 255 bytes, and a name made here gets prefixes and suffixes (`.sqlite`, `reasoning_...`)
MAX_NAME_CHARS = 120
NAME_HASH_CHARS = 10  # hex digits of sha256 ending a shortened name (40 bits)


def file_name(text: str) -> str:
    """`text` as one file or folder name: characters other than letters, digits and `._-` become
    `_` (a model name such as `planted:where=0.9,*=0.05` or `hf:/path/model`), and leading or
    trailing `_` and `.` go (a name `..` is `_`, never the folder above). A name longer than
    MAX_NAME_CHARS is shortened (see `fit_name`)."""
    return fit_name(re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_.") or "_", text)


def fit_name(name: str, text: str) -> str:
    """`name` (made from `text`), or, past MAX_NAME_CHARS, its start and `-` and a hash of the
    whole `text`: deterministic, and two long texts that share their start stay apart."""
    if len(name) <= MAX_NAME_CHARS:
        return name
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:NAME_HASH_CHARS]
    return f"{name[: MAX_NAME_CHARS - NAME_HASH_CHARS - 1].rstrip('_.')}-{digest}"


# what a spreadsheet (Excel, LibreOffice, Sheets) reads as the start of a formula in a CSV cell
# (OWASP's CSV injection rule): such a text cell gets a leading `'`, shown as text
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(value: object) -> object:
    """A text cell that a spreadsheet would run as a formula (`=HYPERLINK(...)`, `-2+3`, `@SUM`)
    with a leading `'`; any other value as it is: numbers, and texts that are plain numbers
    (`-0.5`, which a spreadsheet reads as the number it is). A carriage return in a text becomes
    a line feed: the CSV writer quotes that one (a bare CR would end the row and start a new one
    with what follows, a formula included)."""
    if not isinstance(value, str):
        return value
    text = value.replace("\r\n", "\n").replace("\r", "\n") if "\r" in value else value
    if not value.startswith(FORMULA_STARTS):
        return text
    try:
        float(value)
    except ValueError:
        return "'" + text
    return text


def spreadsheet_safe(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with its text cells through `spreadsheet_text` (numeric columns untouched); `df`
    itself when no cell needs it."""
    from pandas.api.types import is_string_dtype

    out = df
    for i, dtype in enumerate(df.dtypes):
        if not is_string_dtype(dtype):  # object, or pandas 3's str: numbers never change
            continue
        column = df.iloc[:, i]
        safe = column.map(spreadsheet_text)
        if not safe.equals(column):
            out = df.copy() if out is df else out
            out.isetitem(i, safe)
    return out


def write_csv(df: pd.DataFrame, path: Path) -> Path:
    """`df` as CSV (numbers to 6 significant digits), text cells safe to open in a spreadsheet."""
    atomic_write_text(path, spreadsheet_safe(df).to_csv(index=False, float_format="%.6g"))
    return path
