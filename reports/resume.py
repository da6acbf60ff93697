"""`--resume RUN`: a rerun that completes an earlier run's tables rather than starting new ones.

A session under `--resume RUN` writes into `<results-dir>/<evaluation>/RUN/`. At session finish
each evaluation's earlier outcomes (raw_results.jsonl, with calls.csv's bookkeeping) are merged
with this session's by (model, case id), the newest winning, and every file is written again from
the merged set: a run with pipeline errors, then `pytest ... --lf --resume RUN`, leaves the tables a
run without the errors would have written. Before anything is collected the earlier run must
exist and have been run with the same rules (`--compat`, the seeds, `--samples`, the evaluation's
settings): anything else would mix two experiments in one table, so it is a usage error naming
the difference.

`rerun_command` is the command the terminal prints after a run that did not give complete tables
(pipeline errors, an interrupt, `-x`/`--maxfail`, a `--lf` rerun into a new folder).
"""

from __future__ import annotations

import csv
import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports.manifest import run_section
from support import evaluations
from support.reporting.tables import BATCH_COLUMNS
from support.secrets import redact
from support.settings import RunSettings
from support.storage.run_folder import (
    CALLS,
    MANIFEST,
    RAW,
    RunFolderError,
    read_manifest,
    read_outcomes,
    recorded_outcomes,
)
from support.types import Outcome, Usage

# the run options that decide which cases a run has and how they are scored: a resumed run must
# have been run with the same (the models may differ: a rerun may add one)
SAME_RULES = ("compat", "seeds", "samples", "settings")
# pytest options a rerun command replaces with its own (pytest parses no abbreviations)
REPLACED = {"--lf": 0, "--last-failed": 0, "--resume": 1, "--run-id": 1}


@dataclass(frozen=True)
class Earlier:
    """One evaluation's earlier run: its folder, whether its own run was complete, and its
    outcomes (read at session start: a row that cannot be read is a usage error then, never a
    failure after this session's answers came in)."""

    folder: Path
    complete: bool
    outcomes: tuple[Outcome, ...] = ()
    # the outcome rows its manifest says were written, when raw_results.jsonl holds fewer (a
    # partial copy of the folder): its tables cannot be complete
    recorded: int | None = None


def earlier_runs(run: RunSettings, names: Iterable[str], resume: str) -> dict[str, Earlier]:
    """The earlier run `resume` of each evaluation in `names` that has one, read through
    support.storage.run_folder and checked against this run's rules; ValueError (the caller's usage
    error) when none has, one differs, or one's files break the run folder's format (rows of
    another evaluation, a case twice, a field of the wrong type)."""
    found: dict[str, Earlier] = {}
    names = list(names)
    for name in names:
        folder = run.output.results_dir / name / resume
        if not (folder / RAW).is_file():
            continue
        try:
            manifest = read_manifest(folder)
            if manifest.get("evaluation", name) != name:
                raise RunFolderError(
                    folder / MANIFEST, f"a run of {manifest['evaluation']!r:.60}, not of {name}",
                    field="evaluation",
                )  # fmt: skip
            bookkeeping = calls_rows(folder / CALLS)
            outcomes = tuple(read_outcomes(folder, name, bookkeeping, evaluations.score_kinds))
            check_same_rules(name, manifest.get("run", {}), run, resume)
        except RunFolderError as exc:
            raise ValueError(f"--resume {resume}: {exc}") from None
        complete = bool(manifest.get("completion", {}).get("complete", False))
        recorded = recorded_outcomes(manifest)
        short = recorded is not None and len(outcomes) < recorded
        found[name] = Earlier(folder, complete and not short, outcomes, recorded if short else None)
    if not found:
        where = ", ".join(str(run.output.results_dir / n / resume / RAW) for n in names)
        known = sorted(
            {p.parent.name for n in names for p in (run.output.results_dir / n).glob(f"*/{RAW}")}
        )[-5:]
        runs = f"; runs there: {', '.join(known)}" if known else "; no run there yet"
        raise ValueError(f"--resume {resume}: no earlier run to complete ({where} missing){runs}")
    return found


def check_same_rules(name: str, earlier: Mapping[str, Any], run: RunSettings, resume: str) -> None:
    """ValueError naming the first of SAME_RULES on which the earlier run differs from this one
    (a field the earlier manifest lacks is not compared)."""
    now = json.loads(json.dumps(run_section(run, name), default=str))
    for key in SAME_RULES:
        if key in earlier and comparable(earlier[key]) != comparable(now.get(key)):
            raise ValueError(
                f"--resume {resume}: {name} was run with other {key} "
                f"({short(earlier[key])}; this command: {short(now.get(key))}); "
                "complete it with its own options, or start a new run without --resume"
            )


def comparable(value: Any) -> str:
    """A manifest value as text to compare: functions' addresses (`<function f at 0x7f..>`,
    different in every process) left out."""
    return re.sub(r" at 0x[0-9a-f]+", "", json.dumps(value, sort_keys=True, default=str))


def short(value: Any, limit: int = 160) -> str:
    text = comparable(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def calls_rows(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """calls.csv by (model, case id): its bookkeeping (support.storage.files.RUN_FIELDS and the
    batch usage) as Outcome fields ({} when the file is missing: the bookkeeping is then the
    defaults; a row without it keeps the defaults). ValueError naming the file it cannot be read."""
    if not path.is_file():
        return {}
    out = {}
    try:
        with path.open(encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"--resume: {path} cannot be read ({exc})") from None
    for row in rows:
        try:
            fields: dict[str, Any] = {
                "latency_s": float(row["latency_s"]),
                "backend_calls": int(row["backend_calls"]),
                "cache_hits": int(row["cache_hits"]),
                "cached": row["cached"] == "True",
            }
            if all(row.get(c) for c in BATCH_COLUMNS):
                fields["batch_usage"] = Usage(*(int(row[c]) for c in BATCH_COLUMNS)).to_json()
            out[(row["model"], row["case_id"])] = fields
        except (KeyError, ValueError, TypeError):
            continue  # a row without bookkeeping: the defaults
    return out


def merged(earlier: Iterable[Outcome], new: Iterable[Outcome]) -> list[Outcome]:
    """The earlier outcomes with this session's in place of any of the same (model, case id),
    then this session's others."""
    by_key = {(o.model, o.case_id): o for o in earlier}
    by_key.update({(o.model, o.case_id): o for o in new})
    return list(by_key.values())


def rerun_command(args: Sequence[str], run_id: str, failed_only: bool) -> str:
    """`pytest <args> [--lf] --resume RUN_ID`: the command that completes run RUN_ID's tables,
    each argument redacted (credentials in `--api-base user:pass@` become ***) and quoted for a
    POSIX shell (shlex.join), so pasting it runs pytest and nothing else. `failed_only`: the
    cases to run are those that failed (--lf), else every selected case (the answers already
    received come from the cache)."""
    kept: list[str] = []
    skip = 0
    for arg in map(str, args):
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in REPLACED:
            skip = REPLACED[name] if "=" not in arg else 0
            continue
        kept.append(redact(arg))
    tail = ["--lf"] if failed_only else []
    return shlex.join(["pytest", *kept, *tail, "--resume", run_id])
