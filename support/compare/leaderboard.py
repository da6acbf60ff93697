"""A leaderboard of runs: `vlmbench-compare --leaderboard results/` (support.compare.runs).

Every run folder under a results folder (`<dir>/<evaluation>/<run-id>/`; also one evaluation's
folder, or one run) becomes one row per headline row of its summary.csv: one per model, or per
model and label where the evaluation's headline has labels (pointing's `condition`, a dynamic
search). A row says where the numbers come from (from manifest.json: the session's start, the
command, the data fingerprint and label, the `--compat` profile) and the evaluation's key
metrics with their 95% intervals, written as report.md writes them (`0.812 [0.790, 0.833]`).

The key metrics are the evaluation's own: its summary module's `KEY_METRICS`, those its headline
has (support.reporting.tables.key_metrics, the terminal's brief table's rule too). Rows
are ordered by evaluation, then by the first key metric, best first (lower first for an error:
`lower_is_better`). Within an evaluation, runs on other data (fingerprint and label) or under
another profile cannot be compared: each distinct (fingerprint, label, profile) is a group (A,
B, ...), and an evaluation with more than one says so in a note.

A folder that cannot be read (no manifest.json, a manifest that is not JSON, no or an unreadable
summary.csv, an interrupted or otherwise partial run, an evaluation not registered here) is
listed as skipped, with why; nothing under the results folder is written.
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from support import evaluations
from support.contract.provenance import fallback_shares
from support.reporting.kit import interval_columns
from support.reporting.markdown import escape_markup
from support.reporting.tables import (
    MISSING,
    key_metrics,
    label_columns,
    markdown_table,
    with_intervals,
)
from support.secrets import redacted_command
from support.storage.files import atomic_write_text, write_csv
from support.storage.run_folder import (
    MANIFEST,
    PROVENANCE,
    RUN_FILES,
    SUMMARY,
    RunFolderError,
    read_manifest,
)

SHORT_HASH = 12  # hex digits of the data fingerprint shown
SHORT_COMMAND = 80  # characters of the command shown in markdown and HTML (CSV: all of it)
# options that place a run's files, not what it measures (the run id is a column of its own): left
# out of the short command
UNSHOWN_OPTIONS = ("--run-id", "--results-dir", "--cache-dir", "--rootdir", "--basetemp", "-p")
# generic names of metrics where less is better (an error, a rate of failures), whatever the
# evaluation; every other metric is better when higher
LOWER_NAMES = frozenset({"mae", "rmse"})
LOWER_SUFFIXES = ("error", "error_rate", "errors", "unparsable_rate")


def lower_is_better(metric: str) -> bool:
    """Whether a smaller `metric` is better (an error or a failure rate)."""
    return metric in LOWER_NAMES or metric.endswith(LOWER_SUFFIXES)


@dataclass(frozen=True)
class Skipped:
    """A folder that is not listed, and why."""

    folder: Path
    why: str


@dataclass(frozen=True)
class Run:
    """One readable run: what its manifest says, and its headline rows (summary.csv through the
    evaluation's `headline`) with the key metrics among their columns."""

    folder: Path
    evaluation: str
    run_id: str
    start: str  # ISO 8601, UTC (the manifest's times.start); "" when absent
    command: str  # the full command line
    command_short: str
    data_sha256: str | None
    data_label: str | None
    profile: str | None  # --compat
    headline: pd.DataFrame
    labels: tuple[str, ...]  # the headline's label columns (text, other than the model)
    metrics: tuple[str, ...]  # its key metrics
    # model -> the share of its answers read by a fallback parser rule (provenance.csv); empty
    # for a run written before provenance, or whose provenance.csv cannot be read
    fallback: Mapping[str, float] = field(default_factory=dict)
    incomplete: str | None = None  # read_run(partial=True): why its tables are not complete

    @property
    def group_key(self) -> tuple[str | None, str | None, str | None]:
        return (self.data_sha256, self.data_label, self.profile)


@dataclass
class Leaderboard:
    """The rows of every run (one table per evaluation), the notes and the skipped folders."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # evaluation -> rows
    metrics: dict[str, tuple[str, ...]] = field(default_factory=dict)  # evaluation -> key metrics
    notes: dict[str, str] = field(default_factory=dict)  # evaluation -> not-comparable note
    skipped: list[Skipped] = field(default_factory=list)


# --- finding and reading runs -------------------------------------------------------------------


def _is_run(folder: Path) -> bool:
    try:
        return any((folder / name).exists() for name in RUN_FILES)
    except OSError:  # an unreadable folder: listed as a run, then skipped with why
        return True


def _subfolders(folder: Path) -> list[Path]:
    """The folder's subfolders (none when it cannot be listed: read_run says why)."""
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []


def run_folders(root: Path) -> list[Path]:
    """The run folders `root` holds: `root` itself when it is a run, its subfolders when it is
    one evaluation's folder (named after a registered evaluation, or holding a run), else every
    `<evaluation>/<run-id>/` under it. A folder holding none of a run's files (a dry run's
    dry_run.csv alone, an evaluation's own data folder) is no run and is left out; a broken run
    (e.g. raw rows without a manifest) is still returned, to be listed as skipped."""
    root = Path(root)
    if _is_run(root):
        return [root]
    children = _subfolders(root)
    if root.name in evaluations.names() or any(_is_run(c) for c in children):
        return [c for c in children if _is_run(c)]
    return [run for child in children for run in _subfolders(child) if _is_run(run)]


def _short_command(args: Sequence[str], cwd: str | None) -> str:
    """The pytest arguments without those that place files (UNSHOWN_OPTIONS), paths under `cwd`
    made relative, cut to SHORT_COMMAND characters."""
    shown = []
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
            continue
        if arg in UNSHOWN_OPTIONS:  # `--opt VALUE`
            skip_next = True
            continue
        if arg.partition("=")[0] in UNSHOWN_OPTIONS or (arg.startswith("-p") and arg != "-p"):
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        if cwd and value.startswith(cwd.rstrip("/") + "/"):
            value = value[len(cwd.rstrip("/")) + 1 :]
        shown.append(f"{name}{eq}{value}")
    text = shlex.join(shown)
    return text if len(text) <= SHORT_COMMAND else text[: SHORT_COMMAND - 1] + "…"


def _completion_problem(completion: Any) -> str | None:
    """Why a run's tables do not stand for its selection (the manifest's `completion`)."""
    if not isinstance(completion, dict):
        return None
    done = f"{completion.get('cases_finished', '?')} of {completion.get('cases_selected', '?')}"
    if completion.get("interrupted"):
        return f"interrupted run (manifest.json completion: {done} cases finished)"
    if completion.get("complete") is False:
        return f"partial run (manifest.json completion: not complete, {done} cases finished)"
    return None


def read_run(folder: Path, partial: bool = False) -> Run | Skipped:
    """The run in `folder`, or why it cannot be listed. A run whose tables do not hold its
    selection (interrupted, partial) is skipped, unless `partial`: then it is read, and its
    `incomplete` says how far it got (the comparison page shows a partial run's facts)."""
    folder = Path(folder)
    if not (folder / MANIFEST).is_file():
        return Skipped(folder, "no manifest.json")
    try:
        manifest = read_manifest(folder, required=True)
    except RunFolderError as exc:
        return Skipped(folder, f"{exc.path.name}: {exc.within}")
    problem = _completion_problem(manifest.get("completion"))
    if problem and not partial:
        return Skipped(folder, problem)
    name = manifest.get("evaluation") or folder.parent.name
    try:
        summary_of = evaluations.spec(str(name)).summary_module()
    except Exception as exc:  # an evaluation not registered here, or its summary broken
        return Skipped(folder, f"evaluation {name!r} cannot be read here ({exc})")
    summary_path = folder / SUMMARY
    if not summary_path.is_file():
        return Skipped(folder, "no summary.csv")
    try:
        # only empty cells are undefined: a model or label named "NA" stays a name
        summary = pd.read_csv(summary_path, keep_default_na=False, na_values=[""])
        summary = _numeric_metrics(summary, summary_of.KEY_METRICS, summary_path)
        headline = summary_of.headline(summary)
    except RunFolderError as exc:
        return Skipped(folder, f"summary.csv: {exc.within}")
    except Exception as exc:  # an empty, cut or foreign summary.csv
        return Skipped(folder, f"summary.csv unreadable ({type(exc).__name__}: {exc})")
    if "model" not in headline or headline.empty:
        return Skipped(folder, "summary.csv has no model rows")
    run_section = manifest.get("run") if isinstance(manifest.get("run"), dict) else {}
    headline = headline.copy()
    headline["model"] = [_unquoted(m, run_section.get("models") or []) for m in headline["model"]]
    command = manifest.get("command") if isinstance(manifest.get("command"), dict) else {}
    # secret --model-arg values redacted, also in a folder an older vlmbench wrote in clear
    args = redacted_command(str(a) for a in command.get("args") or [])
    data = manifest.get("data") if isinstance(manifest.get("data"), dict) else {}
    times = manifest.get("times") if isinstance(manifest.get("times"), dict) else {}
    return Run(
        folder=folder,
        evaluation=str(name),
        run_id=str(run_section.get("run_id") or folder.name),
        start=str(times.get("start") or ""),
        command=shlex.join(["pytest", *args]) if args else str(command.get("line") or "pytest"),
        command_short=_short_command(args, command.get("dir")),
        data_sha256=_text(data.get("sha256")),
        data_label=_text(data.get("label")),
        profile=_text(run_section.get("compat")),
        headline=headline,
        labels=tuple(label_columns(headline)),
        metrics=tuple(key_metrics(headline, summary_of.KEY_METRICS)),
        fallback=_fallback_shares(folder, run_section.get("models") or []),
        incomplete=problem,
    )


def _numeric_metrics(summary: pd.DataFrame, metrics: Sequence[str], path: Path) -> pd.DataFrame:
    """`summary` with each key metric's columns (`m`, `m_lo`, `m_hi`) as numbers: a text cell
    "nan" / "inf" is that number; any other text is a RunFolderError naming the row and
    column (never a metric column read as labels)."""
    out = summary.copy()
    for column in interval_columns(list(metrics)):
        if column not in out or pd.api.types.is_numeric_dtype(out[column]):
            continue
        numbers = pd.to_numeric(out[column], errors="coerce")
        bad = numbers.isna() & out[column].notna()
        bad &= ~out[column].astype(str).str.strip().str.lower().isin(["nan", "inf", "-inf"])
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            value = str(out[column].iloc[row])[:40]
            raise RunFolderError(path, f"{value!r} is not a number", row + 2, column)
        out[column] = out[column].map(_as_float)
    return out


def _as_float(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def _fallback_shares(folder: Path, models: Sequence[str]) -> dict[str, float]:
    """Each model's share of answers read by a fallback rule, from the run's provenance.csv
    ({} without one, or when it cannot be read: the column then shows MISSING)."""
    path = folder / PROVENANCE
    if not path.is_file():
        return {}
    try:
        table = pd.read_csv(path, keep_default_na=False, na_values=[""])
        shares = fallback_shares(table)
    except Exception:  # an empty, cut or foreign provenance.csv: no column, never no run
        return {}
    # a share is a fraction: anything else (inf, -3, text) shows as MISSING
    return {
        _unquoted(model, models): float(share)
        for model, share in shares.items()
        if isinstance(share, int | float) and 0 <= share <= 1
    }


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _unquoted(model: object, models: Sequence[str]) -> str:
    """A model name as the run named it: summary.csv quotes a formula-like text with `'`
    (support.storage.files.spreadsheet_text); the manifest's `--model` list has it as given."""
    text = str(model)
    return text[1:] if text.startswith("'") and text[1:] in models else text


# --- the table ----------------------------------------------------------------------------------


def short_date(start: str) -> str:
    """`2026-11-27T10:40:04.409+00:00` -> `2026-11-27 10:40` (UTC, as the manifest has it)."""
    return start[:16].replace("T", " ") if start else MISSING


def fingerprint_text(run: Run) -> str:
    if run.data_sha256 is None and run.data_label is None:
        return MISSING
    short = run.data_sha256[:SHORT_HASH] if run.data_sha256 else "no hash"
    return f"{short} ({run.data_label})" if run.data_label else short


def _group_names(runs: Sequence[Run]) -> dict[tuple, str]:
    """(fingerprint, label, profile) -> A, B, ... in order of each group's earliest run."""
    keys = dict.fromkeys(r.group_key for r in sorted(runs, key=lambda r: (r.start, r.run_id)))
    names = {}
    for i, key in enumerate(keys):
        names[key] = chr(ord("A") + i) if i < 26 else f"G{i + 1}"
    return names


def _note(runs: Sequence[Run]) -> str | None:
    """What differs between an evaluation's groups, or None when it has one."""
    if len({r.group_key for r in runs}) < 2:
        return None
    why = []
    if len({(r.data_sha256, r.data_label) for r in runs}) > 1:
        why.append("data fingerprint differs")
    if len({r.profile for r in runs}) > 1:
        why.append("profile differs")
    return "runs in different groups are not comparable: " + " / ".join(why)


RESERVED = frozenset(
    {"evaluation", "group", "run", "date", "fallback", "profile", "data", "command"}
    | {"data_sha256"}
    | {"data_label", "start", "command_line", "folder"}
)


def _evaluation_table(runs: Sequence[Run]) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """One evaluation's rows (numbers, with `m_lo`/`m_hi`), best first, and its key metrics."""
    metrics = tuple(dict.fromkeys(m for r in runs for m in r.metrics))
    labels = tuple(dict.fromkeys(c for r in runs for c in r.labels))
    groups = _group_names(runs)
    rows = []
    for run in runs:
        for _, line in run.headline.iterrows():
            row: dict[str, Any] = {
                "evaluation": run.evaluation,
                "group": groups[run.group_key],
                "run": run.run_id,
                "date": short_date(run.start),
                "model": str(line["model"]),
            }
            for c in labels:
                value = line.get(c)
                shown = f"{c}_label" if c in RESERVED else c  # never over a column of ours
                row[shown] = MISSING if value is None or pd.isna(value) else str(value)
            for column in interval_columns(metrics):
                value = line.get(column)
                row[column] = float(value) if _number(value) else float("nan")
            row["fallback"] = run.fallback.get(str(line["model"]), float("nan"))
            row |= {
                "profile": run.profile or MISSING,
                "data": fingerprint_text(run),
                "command": run.command_short,
                "data_sha256": run.data_sha256 or "",
                "data_label": run.data_label or "",
                "start": run.start,
                "command_line": run.command,
                "folder": str(run.folder),
            }
            rows.append(row)
    table = pd.DataFrame(rows)
    if metrics:
        key = metrics[0]
        # NaN sorts last whichever way; ties keep the earlier run first
        table = table.sort_values(
            [key, "start", "run", "model"],
            ascending=[lower_is_better(key), True, True, True],
            na_position="last",
            kind="stable",
        )
    return table.reset_index(drop=True), metrics


def _number(value: object) -> bool:
    try:
        return value is not None and not pd.isna(value) and float(value) == float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def build_leaderboard(root: Path) -> Leaderboard:
    """Every run under `root` (see run_folders), as one table per evaluation, with the notes on
    groups that cannot be compared and the folders skipped."""
    board = Leaderboard()
    root = Path(root)
    if not root.is_dir():
        board.skipped.append(Skipped(root, "not a folder"))
        return board
    by_evaluation: dict[str, list[Run]] = {}
    for folder in run_folders(root):
        try:
            found = read_run(folder)
        except OSError as exc:  # a folder that cannot be listed or read
            found = Skipped(folder, f"cannot be read ({exc.strerror or exc})")
        if isinstance(found, Skipped):
            board.skipped.append(found)
        else:
            by_evaluation.setdefault(found.evaluation, []).append(found)
    for name in sorted(by_evaluation):
        runs = by_evaluation[name]
        board.tables[name], board.metrics[name] = _evaluation_table(runs)
        note = _note(runs)
        if note:
            board.notes[name] = note
    return board


# --- outputs ------------------------------------------------------------------------------------

SHOWN = ("group", "run", "date", "model")  # then the labels, the metrics, SHOWN_AFTER
SHOWN_AFTER = ("fallback", "profile", "data", "command")


def shown_table(board: Leaderboard, name: str) -> pd.DataFrame:
    """One evaluation's table as a person reads it: intervals as text (report.md's format)."""
    table, metrics = board.tables[name], board.metrics[name]
    numbers = interval_columns(metrics)
    labels = [c for c in table.columns if c not in {*RESERVED, "model", *numbers}]
    shown = with_intervals(table[[*SHOWN, *labels, *numbers, *SHOWN_AFTER]], metrics)
    return shown.assign(fallback=[_percent(v) for v in table["fallback"]])


def _percent(share: float) -> str:
    """A fallback share as a person reads it: 62%, or MISSING without provenance.csv."""
    return MISSING if share != share else f"{share:.0%}"


def _md_cell(value: object) -> object:
    """A markdown table cell that stays one cell showing its text: no HTML, `|` escaped, one
    line."""
    if not isinstance(value, str):
        return value
    one_line = " ".join(value.splitlines())
    return escape_markup(one_line).replace("|", "\\|")


def to_markdown(board: Leaderboard) -> str:
    """The leaderboard as markdown: a section per evaluation, its note, then the skipped."""
    lines = ["# Leaderboard of runs", ""]
    if not board.tables:
        lines += ["No readable run found.", ""]
    for name in board.tables:
        shown = shown_table(board, name).map(_md_cell)
        metrics = ", ".join(board.metrics[name]) or "none"
        lines += [f"## {_md_cell(name)}", "", f"Key metrics: {metrics} (95% intervals).", ""]
        lines += [markdown_table(shown), ""]
        if name in board.notes:
            lines += [f"Note: {board.notes[name]}.", ""]
    if board.skipped:
        lines += ["## Skipped", ""]
        lines += [f"- `{_md_cell(str(s.folder))}`: {_md_cell(s.why)}" for s in board.skipped]
        lines.append("")
    return "\n".join(lines)


def to_csv_table(board: Leaderboard) -> pd.DataFrame:
    """Every evaluation's rows in one table: numbers (`m`, `m_lo`, `m_hi`, empty where an
    evaluation has no such metric), the full command line and fingerprint."""
    if not board.tables:
        return pd.DataFrame(columns=["evaluation", "group", "run", "model"])
    frames = [t.drop(columns=["date", "data", "command"]) for t in board.tables.values()]
    table = pd.concat(frames, ignore_index=True)
    first = ["evaluation", "group", "run", "start", "model"]
    last = ["profile", "data_sha256", "data_label", "command_line", "folder"]
    middle = [c for c in table.columns if c not in (*first, *last)]
    return table[[*first, *middle, *last]]


def write_csv_file(board: Leaderboard, path: Path) -> Path:
    """The CSV (to_csv_table), written atomically, formula-like cells quoted for a spreadsheet."""
    return write_csv(to_csv_table(board), Path(path))


def to_html(board: Leaderboard) -> str:
    """One static page: a plain table per evaluation (the full command line as the command
    cell's title), its note, the skipped folders; every value html-escaped, no script."""
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>Leaderboard of runs</title>',
        "<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;"
        "margin-bottom:1em}th,td{border:1px solid #bbb;padding:2px 6px;text-align:left;"
        "vertical-align:top}th{background:#eee}.note{color:#a40}</style>",
        "</head><body>",
        "<h1>Leaderboard of runs</h1>",
    ]
    if not board.tables:
        parts.append("<p>No readable run found.</p>")
    for name in board.tables:
        shown = shown_table(board, name)
        metrics = ", ".join(board.metrics[name]) or "none"
        parts.append(f"<h2>{esc(name)}</h2><p>Key metrics: {esc(metrics)} (95% intervals).</p>")
        parts.append("<table><thead><tr>")
        parts += [f"<th>{esc(str(c))}</th>" for c in shown.columns]
        parts.append("</tr></thead><tbody>")
        full = board.tables[name]["command_line"]  # the command cell's title: all of it
        for row, line in zip(shown.itertuples(index=False), full, strict=True):
            cells = []
            for column, v in zip(shown.columns, row, strict=True):
                text = esc(MISSING if v is None or (isinstance(v, float) and v != v) else str(v))
                title = f' title="{esc(line)}"' if column == "command" else ""
                cells.append(f"<td{title}>{text}</td>")
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</tbody></table>")
        if name in board.notes:
            parts.append(f'<p class="note">Note: {esc(board.notes[name])}.</p>')
    if board.skipped:
        parts.append("<h2>Skipped</h2><ul>")
        for s in board.skipped:
            parts.append(f"<li><code>{esc(str(s.folder))}</code>: {esc(s.why)}</li>")
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_html_file(board: Leaderboard, path: Path) -> Path:
    """The HTML page (to_html), written atomically."""
    atomic_write_text(Path(path), to_html(board))
    return Path(path)
