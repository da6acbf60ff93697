"""The run folder, `results/<evaluation>/<run-id>/`: its one owner.

A session writes these files at its finish (reports.evaluation_files), and later commands read
them back: `--resume` (reports.resume), `vlmbench-compare` and its comparison page
(support.compare.runs, support.compare.page), the leaderboard (support.compare.leaderboard). Every
one of them names the files through this module and reads them through its readers, which check
what they read against the format below: a folder that breaks it is a `RunFolderError` naming
the file, the line and the field, never a traceback and never a number computed from it.

    raw_results.jsonl  one outcome a line (support.types.Outcome.to_json), ROW_FIELDS below
    manifest.json      what produced the numbers (reports.manifest), MANIFEST_FIELDS below;
                       `run_folder_format` is FORMAT_VERSION (a folder written before the field
                       existed has the same layout: read as format 1)
    summary.csv, usage.csv, calls.csv, provenance.csv, comparisons.csv, report.md
                       the tables, made from raw_results.jsonl (DERIVED)
    pictures.json      where reports.html put each case's picture (PICTURES_FIELDS)

Limits on what is read: JSON nested deeper than MAX_DEPTH levels is refused (an outcome has
about 6), and a picture path must lie inside the run folder or the report's assets folder and
name a picture file type.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.storage.bounded_json import TooDeep, loads, nesting
from support.types import STATUSES, Outcome

FORMAT_VERSION = 1  # written into manifest.json as `run_folder_format`
FORMAT_FIELD = "run_folder_format"
READABLE_FORMATS = frozenset({1})

RAW = "raw_results.jsonl"
MANIFEST = "manifest.json"
SUMMARY = "summary.csv"
USAGE = "usage.csv"
CALLS = "calls.csv"
PROVENANCE = "provenance.csv"
COMPARISONS = "comparisons.csv"
REPORT = "report.md"
PICTURES = "pictures.json"
# the run folder's own copy of each picture the report inlined (`--self-contained-html`), named
# by content: the comparison page shows them whatever the report did with them
PICTURE_FILES = "pictures"
# the files made from raw_results.jsonl at session finish: a session that writes the folder
# removes an earlier session's first, so none is left beside a newer manifest
DERIVED = (SUMMARY, USAGE, CALLS, PROVENANCE, COMPARISONS, REPORT, PICTURES)
RUN_FILES = (MANIFEST, SUMMARY, RAW)  # any of them: a run folder

MAX_DEPTH = 64  # levels of JSON nesting read (an outcome row has about 6)
# what a picture of pictures.json may be: raster images only (an .svg or .html runs script
# when opened from the page)
PICTURE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp"})


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# what a score may be: a summary's SCORES maps score names to these kinds, and a run folder's
# rows are checked against them when read back (below)
SCORE_KINDS: dict[str, Callable[[Any], bool]] = {
    "flag": lambda v: v is None or isinstance(v, bool) or (_number(v) and v in (0, 1)),
    "count": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "number": lambda v: v is None or _number(v),
    "text": lambda v: v is None or isinstance(v, str),
    "numbers": lambda v: isinstance(v, list) and all(_number(x) for x in v),
}


class RunFolderError(ValueError):
    """A run folder's file that breaks its format: the file, the line (1-based, 0: the whole
    file) and the field."""

    def __init__(self, path: Path | str, why: str, line: int = 0, field: str = "") -> None:
        self.path, self.why, self.line, self.field = Path(path), why, line, field
        super().__init__(f"{path}:{line}: {self._what()}" if line else f"{path}: {self._what()}")

    @property
    def within(self) -> str:
        """What is wrong within the file, without its path: `line N: field: why`."""
        return f"line {self.line}: {self._what()}" if self.line else self._what()

    def _what(self) -> str:
        return f"{self.field}: {self.why}" if self.field else self.why


# --- JSON -----------------------------------------------------------------------------------------


def parse_json(text: str, path: Path | str, line: int = 0) -> Any:
    """`text` as JSON (NaN and Infinity as Python writes them), or RunFolderError naming `path`
    and `line`: not JSON, or nested deeper than MAX_DEPTH (support.storage.bounded_json)."""
    try:
        value = loads(text)
    except TooDeep:
        raise RunFolderError(path, f"nested deeper than {MAX_DEPTH} levels", line) from None
    except ValueError as exc:  # JSONDecodeError
        raise RunFolderError(path, f"not JSON ({exc})", line) from None
    if nesting(value) > MAX_DEPTH:
        raise RunFolderError(path, f"nested deeper than {MAX_DEPTH} levels", line)
    return value


def read_text(path: Path) -> str:
    """A run file's text (UTF-8), or RunFolderError naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RunFolderError(path, f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise RunFolderError(path, f"cannot be read ({exc.strerror or exc})") from None


# --- field checks ---------------------------------------------------------------------------------


Check = Callable[[Any], str | None]  # None: the value is good; else what is wrong
# an evaluation's name -> its scores' kinds (support.evaluations.score_kinds: its summary's SCORES)
KindsOf = Callable[[str], Mapping[str, str]]


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def is_text(value: Any) -> str | None:
    return None if isinstance(value, str) else f"expected a text, got {_type_name(value)}"


def is_optional_text(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else is_text(value)


def is_bool(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"expected true or false, got {_type_name(value)}"


def is_count(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return None
    return f"expected a whole number >= 0, got {value!r:.40}"


def is_seconds(value: Any) -> str | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and math.isfinite(value) and value >= 0:
        return None
    return f"expected seconds (a finite number >= 0), got {value!r:.40}"


def is_object(value: Any) -> str | None:
    return None if isinstance(value, dict) else f"expected an object, got {_type_name(value)}"


def is_text_map(value: Any) -> str | None:
    """An object of texts (an outcome's group)."""
    if not isinstance(value, dict):
        return is_object(value)
    for key, item in value.items():
        if not isinstance(item, str):
            return f"{key!r:.40}: expected a text, got {_type_name(item)}"
    return None


def is_score_map(value: Any) -> str | None:
    """An object of scores: each a number, true/false, null, a text or a list of numbers
    (an evaluation's own scores are checked further by check_scores)."""
    if not isinstance(value, dict):
        return is_object(value)
    for key, item in value.items():
        if not any(ok(item) for ok in SCORE_KINDS.values()):
            return f"{key!r:.40}: expected a number, true/false, null or a text, got {item!r:.40}"
    return None


def check_scores(row: Mapping[str, Any], kinds: Mapping[str, str], path: Path, line: int) -> None:
    """RunFolderError for a score of `row` whose value is not of its kind (`kinds`: the
    evaluation's SCORES; a score it does not name is free)."""
    for key, kind in kinds.items():
        scores = row.get("scores", {})
        if key in scores and not SCORE_KINDS[kind](scores[key]):
            raise RunFolderError(
                path, f"expected a {kind}, got {scores[key]!r:.40}", line, f"scores.{key}"
            )


def is_texts(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return None
    return f"expected a list of texts, got {value!r:.40}"


def is_status(value: Any) -> str | None:
    if value in STATUSES:
        return None
    return f"expected one of {', '.join(STATUSES)}, got {value!r:.40}"


def is_usage(value: Any) -> str | None:
    if not isinstance(value, dict):
        return is_object(value)
    for key, item in value.items():
        if key not in ("input_tokens", "output_tokens", "reasoning_tokens"):
            return f"unknown count {key!r:.40}"
        if (why := is_count(item)) is not None:
            return f"{key}: {why}"
    return None


def anything(value: Any) -> str | None:
    return None


# an outcome row: field -> (check, required)
ROW_FIELDS: dict[str, tuple[Check, bool]] = {
    "case_id": (is_text, True),
    "evaluation": (is_text, True),
    "model": (is_text, True),
    "status": (is_status, True),
    "group": (is_text_map, False),
    "cluster": (is_text, False),
    "scores": (is_score_map, False),
    "prediction": (anything, False),
    "target": (anything, False),
    "raw": (is_text, False),
    "prompt_hash": (is_text, False),
    "latency_s": (is_seconds, False),
    "cached": (is_bool, False),
    "usage": (is_usage, False),
    "backend_calls": (is_count, False),
    "cache_hits": (is_count, False),
    "batch_usage": (is_usage, False),
    "rendered_prompt": (is_optional_text, False),
    "error": (is_optional_text, False),
    "params": (is_object, False),
    "extra": (is_object, False),
    "read_by": (is_text, False),
    "thinking": (is_texts, False),
    "finish_reasons": (is_texts, False),
    "adapted": (is_texts, False),
}


def check_fields(
    value: Any, fields: Mapping[str, tuple[Check, bool]], path: Path, line: int, prefix: str = ""
) -> None:
    """RunFolderError for the first field of `value` (an object) that is missing, unknown or
    of the wrong type."""
    if not isinstance(value, dict):
        raise RunFolderError(path, f"expected an object, got {_type_name(value)}", line, prefix)
    for name, (check, required) in fields.items():
        if name not in value:
            if required:
                raise RunFolderError(path, "missing", line, prefix + name)
            continue
        why = check(value[name])
        if why is not None:
            raise RunFolderError(path, why, line, prefix + name)


def check_row(row: Any, path: Path, line: int) -> dict[str, Any]:
    """A raw_results.jsonl row checked against ROW_FIELDS (an unknown field is refused: this
    format has none)."""
    check_fields(row, ROW_FIELDS, path, line)
    unknown = sorted(set(row) - set(ROW_FIELDS))
    if unknown:
        raise RunFolderError(path, "unknown field", line, str(unknown[0])[:80])
    return row


# --- manifest.json --------------------------------------------------------------------------------

# the fields readers use, where present: dotted name -> check (any other field is free)
MANIFEST_FIELDS: dict[str, Check] = {
    "evaluation": is_text,
    "command": is_object,
    "command.args": is_texts,
    "command.line": is_text,
    "command.dir": is_text,
    "run": is_object,
    "run.run_id": is_text,
    "run.models": is_texts,
    "run.compat": is_optional_text,
    "data": lambda v: None if v is None else is_object(v),
    "data.sha256": is_optional_text,
    "data.label": is_optional_text,
    "times": is_object,
    "times.start": is_text,
    "completion": is_object,
    "completion.complete": is_bool,
    "completion.interrupted": is_bool,
    "completion.cases_finished": is_count,
    "completion.cases_selected": is_count,
    "models": is_object,
}


def check_manifest(manifest: Any, path: Path) -> dict[str, Any]:
    """manifest.json checked: an object of a readable format whose fields in MANIFEST_FIELDS
    have their types; RunFolderError naming the field otherwise."""
    if not isinstance(manifest, dict):
        raise RunFolderError(path, f"expected an object, got {_type_name(manifest)}")
    version = manifest.get(FORMAT_FIELD, 1)
    if version not in READABLE_FORMATS:
        raise RunFolderError(
            path,
            f"run folder format {version!r:.20}; this vlmbench reads format "
            f"{', '.join(map(str, sorted(READABLE_FORMATS)))}",
            field=FORMAT_FIELD,
        )
    for dotted, check in MANIFEST_FIELDS.items():
        parent, _, name = dotted.rpartition(".")
        holder = manifest.get(parent) if parent else manifest
        if isinstance(holder, dict) and name in holder:
            why = check(holder[name])
            if why is not None:
                raise RunFolderError(path, why, field=dotted)
    models = manifest.get("models")
    for model, entry in (models or {}).items():
        outcomes = entry.get("outcomes") if isinstance(entry, dict) else None
        if isinstance(outcomes, dict) and "n" in outcomes and is_count(outcomes["n"]):
            raise RunFolderError(path, is_count(outcomes["n"]) or "", field=f"models.{model}.n")
    return manifest


def read_manifest(folder: Path, required: bool = False) -> dict[str, Any]:
    """The folder's manifest.json, checked ({} when it has none and not `required`: a run
    killed before writing it)."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        if required:
            raise RunFolderError(path, "missing")
        return {}
    return check_manifest(parse_json(read_text(path), path), path)


def recorded_outcomes(manifest: Mapping[str, Any]) -> int | None:
    """How many outcome rows the manifest says raw_results.jsonl got (the models' `outcomes.n`
    added up), or None when it does not say."""
    models = manifest.get("models")
    if not isinstance(models, dict) or not models:
        return None
    counts = [e.get("outcomes", {}).get("n") for e in models.values() if isinstance(e, dict)]
    if not counts or any(not isinstance(n, int) for n in counts):
        return None
    return sum(counts)


# --- raw_results.jsonl ----------------------------------------------------------------------------


def read_rows(
    folder: Path, evaluation: str | None = None, kinds_of: KindsOf | None = None
) -> list[tuple[int, dict[str, Any]]]:
    """raw_results.jsonl's rows with their line numbers, each checked (check_row); also refused:
    a row of another evaluation than `evaluation` (or than the first row's), and a second row of
    the same (model, case id)."""
    path = Path(folder) / RAW
    if not path.is_file():
        raise RunFolderError(path, "missing (a run is results/<evaluation>/<run-id>)")
    rows: list[tuple[int, dict[str, Any]]] = []
    seen: dict[tuple[str, str], int] = {}
    kinds: dict[str, Mapping[str, str]] = {}
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        row = check_row(parse_json(line, path, number), path, number)
        expected = (
            evaluation if evaluation is not None else rows[0][1]["evaluation"] if rows else None
        )
        if expected is not None and row["evaluation"] != expected:
            raise RunFolderError(
                path, f"a row of {row['evaluation']!r:.60}, not of {expected!r:.60}", number,
                "evaluation",
            )  # fmt: skip
        if kinds_of is not None:
            if row["evaluation"] not in kinds:
                kinds[row["evaluation"]] = kinds_of(row["evaluation"])
            check_scores(row, kinds[row["evaluation"]], path, number)
        key = (row["model"], row["case_id"])
        if key in seen:
            raise RunFolderError(
                path, f"the same model and case id as line {seen[key]}", number, "case_id"
            )
        seen[key] = number
        rows.append((number, row))
    return rows


def read_outcomes(
    folder: Path,
    evaluation: str | None = None,
    bookkeeping: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    kinds_of: KindsOf | None = None,
) -> list[Outcome]:
    """The folder's outcomes (read_rows), each with its `bookkeeping` fields by (model, case id)
    where given (calls.csv's, under --resume)."""
    path = Path(folder) / RAW
    out = []
    for number, row in read_rows(folder, evaluation, kinds_of):
        row = {**row, **(bookkeeping or {}).get((row["model"], row["case_id"]), {})}
        try:
            out.append(Outcome.from_json(row))
        except (TypeError, ValueError) as exc:  # a check above missed: still named
            raise RunFolderError(path, f"not an outcome ({exc})", number) from None
    return out


# --- pictures.json --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pictures:
    """A run folder's pictures (pictures.json): the report that shows them, each outcome case
    id's picture file, and the case ids whose picture is inside the report; `missing` says why
    a run has none, `dropped` the entries refused (outside the folder, not a picture)."""

    report: Path | None = None
    files: Mapping[str, Path] = field(default_factory=dict)
    inlined: frozenset[str] = frozenset()
    missing: str | None = None
    dropped: tuple[str, ...] = ()


def write_pictures(folder: Path, report: Path, pictures: Mapping[str, Path | None]) -> Path:
    """Write folder/pictures.json: the report's path and, per outcome case id, its picture file
    (a path), or None for a picture inside the report; paths relative to `folder` (a picture
    that could not be drawn is in neither)."""
    from support.storage.files import atomic_write_text

    def rel(path: Path) -> str:
        return os.path.relpath(path, folder.absolute())

    index = {
        "report": rel(report),
        "pictures": {k: rel(v) for k, v in sorted(pictures.items()) if v is not None},
        "inlined": sorted(k for k, v in pictures.items() if v is None),
    }
    path = Path(folder) / PICTURES
    atomic_write_text(path, json.dumps(index, indent=1) + "\n")
    return path


def write_picture_files(folder: Path, pictures: Mapping[str, tuple[bytes, str]]) -> dict[str, Path]:
    """Each picture, (bytes, extension) by case id, as folder/pictures/<sha256[:20]>.<ext> (one
    file for every case that shows the same picture); case id -> its file."""
    import hashlib

    from support.storage.files import atomic_write

    where = Path(folder) / PICTURE_FILES
    files: dict[str, Path] = {}
    for case, (data, extension) in pictures.items():
        path = where / f"{hashlib.sha256(data).hexdigest()[:20]}.{extension}"
        if not path.is_file():
            where.mkdir(parents=True, exist_ok=True)
            atomic_write(path, lambda f, data=data: f.write(data))
        files[case] = path
    return files


def read_pictures(folder: Path) -> Pictures:
    """The pictures of a run folder. Each picture must be a raster image file (PICTURE_SUFFIXES)
    that resolves (links followed) inside the run folder or the report's assets folder
    (`<report name>_assets/` beside an .html report); any other entry is dropped and named in
    `dropped`. The report must be an .html file."""
    folder = Path(folder)
    path = folder / PICTURES
    if not path.is_file():
        return Pictures(missing="no pictures.json (a run without --html)")
    raw = folder / RAW
    if raw.is_file() and raw.stat().st_mtime_ns > path.stat().st_mtime_ns:
        return Pictures(missing="pictures.json is older than raw_results.jsonl (a later run wrote "
                        "the folder without --html)")  # fmt: skip
    try:
        index = parse_json(read_text(path), path)
        check_fields(index, PICTURES_FIELDS, path, 0)
    except RunFolderError as exc:
        return Pictures(missing=f"pictures.json unreadable ({exc.within})")
    dropped: list[str] = []
    report = None
    if index.get("report"):
        report = _under(folder, index["report"])
        if report.suffix.lower() != ".html":
            dropped.append(f"report {index['report']!r:.80}: not an .html file")
            report = None
    roots = [folder.resolve()]  # links followed: a link out of the folder is out
    if report is not None:
        roots.append(report.resolve().parent / f"{report.stem}_assets")
    files: dict[str, Path] = {}
    for case, rel in index.get("pictures", {}).items():
        where = _under(folder, rel)
        if where.suffix.lower() not in PICTURE_SUFFIXES:
            dropped.append(f"{case!r:.80}: {rel!r:.80} is not a picture file")
        elif not any(where.resolve().is_relative_to(root) for root in roots):
            dropped.append(f"{case!r:.80}: {rel!r:.80} lies outside the run folder")
        else:
            files[case] = where
    inlined = frozenset(index.get("inlined", ()))
    return Pictures(report, files, inlined, dropped=tuple(dropped))


def _under(folder: Path, rel: str) -> Path:
    """A path of pictures.json (relative to its run folder) as an absolute, normal path."""
    return Path(os.path.normpath(folder.absolute() / rel))


def _is_text_map(value: Any) -> str | None:
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return None
    return f"expected an object of texts, got {_type_name(value)}"


PICTURES_FIELDS: dict[str, tuple[Check, bool]] = {
    "report": (is_optional_text, False),
    "pictures": (_is_text_map, False),
    "inlined": (is_texts, False),
}


# --- writing --------------------------------------------------------------------------------------


def folder_of(results_dir: Path, evaluation: str, run_id: str) -> Path:
    """An evaluation's run folder: `<results_dir>/<evaluation>/<run_id>`."""
    return Path(results_dir) / evaluation / run_id


def write_manifest(folder: Path, manifest: Mapping[str, Any]) -> Path:
    """Write folder/manifest.json (indented JSON, no NaN) and return its path."""
    from support.storage.files import atomic_write_text

    path = Path(folder) / MANIFEST
    atomic_write_text(path, json.dumps(manifest, indent=2, allow_nan=False) + "\n")
    return path


def clear_derived(folder: Path) -> list[Path]:
    """Remove an earlier session's DERIVED files from `folder` (before this session writes its
    own, so no table older than the manifest is left where a file cannot be written); the
    paths removed."""
    gone = []
    for name in DERIVED:
        path = Path(folder) / name
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        gone.append(path)
    return gone
