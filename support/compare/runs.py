"""Paired comparison of two runs: `vlmbench-compare RUN_A RUN_B` (`python -m support.compare.runs`).

Each folder is one evaluation's run (`results/<evaluation>/<run-id>/`, holding raw_results.jsonl).
Cases pair by case id without the model (the same data; a different model or other settings), model
by model when both runs have the same models, else the one model of A against the one of B. One
model of a multi-model run is picked with `--model-a MODEL` / `--model-b MODEL`, or by naming the
run `RUN@MODEL`; a model not in its run is an error that lists the run's models. The
table is the evaluation's own comparison (support/statistics/pairing.py: paired cluster-bootstrap
intervals, the evaluation's tests, Holm over the table); cases found in one run only are counted and
printed, never dropped silently.

A side that is not a folder is a run id (`RID` or `RID@MODEL`): its folders `<results>/*/RID`
(`--results DIR`, default `results`), so `RID@m1 RID@m2` compares every evaluation both sides
hold, each evaluation's table printed in turn. `--html FILE` also writes the comparison page
(support.compare.page): the paired tables, then every case pair, flipped first, with both answers
and the runs' case pictures.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import pandas as pd

from support import evaluations
from support.compare.page import Compared
from support.printable import printable
from support.settings import OutputSettings, RunSettings, StatisticsSettings
from support.statistics.pairing import report_section
from support.storage.files import spreadsheet_safe
from support.storage.run_folder import RAW, RunFolderError, read_outcomes
from support.types import Outcome, outcome_id


def load_run(folder: Path) -> tuple[str, list[Outcome]]:
    """(evaluation, outcomes) of a run folder, read through support.storage.run_folder (one
    evaluation's rows, no case twice); RunFolderError (a ValueError) naming the file, line and
    field."""
    outcomes = read_outcomes(folder, kinds_of=evaluations.score_kinds)
    if not outcomes:
        raise RunFolderError(Path(folder) / RAW, "no outcome rows")
    return outcomes[0].evaluation, outcomes


def _say(text: str, stream: TextIO | None = None) -> None:
    """Print `text` as the terminal may show it (support.printable): model names, labels,
    manifest fields and folder names come from shared folders."""
    print(printable(text), file=stream or sys.stdout)


def split_run(arg: str) -> tuple[Path, str | None]:
    """`RUN` or `RUN@MODEL` as (folder, model or None). A folder that exists whole is a RUN even
    if its name holds `@`; else the split is at the first `@` whose left part is a folder (a
    model name may hold `@` itself)."""
    if Path(arg).is_dir() or "@" not in arg:
        return Path(arg), None
    at = arg.find("@")
    while at != -1:
        if Path(arg[:at]).is_dir():
            return Path(arg[:at]), arg[at + 1 :] or None
        at = arg.find("@", at + 1)
    return Path(arg), None  # load_run names the missing folder


def picked(
    outcomes: Sequence[Outcome], model: str | None, side: str, folder: Path
) -> list[Outcome]:
    """`outcomes` of `model` only (all of them when None); ValueError naming the option and the
    run's models when it has no such model. `side`: "a" or "b"."""
    if model is None:
        return list(outcomes)
    mine = [o for o in outcomes if o.model == model]
    if not mine:
        models = ", ".join(dict.fromkeys(o.model for o in outcomes)) or "none"
        raise ValueError(
            f"--model-{side} (or RUN_{side.upper()}@MODEL) {model!r}: no such model in run "
            f"{side.upper()} ({folder}); its models: {models}"
        )
    return mine


def _tagged(outcomes: Sequence[Outcome], tag: str) -> list[Outcome]:
    """Outcomes with the model renamed `<tag>:<model>` (and the case id's suffix with it)."""
    out = []
    for o in outcomes:
        model = f"{tag}:{o.model}"
        out.append(dataclasses.replace(o, model=model, case_id=outcome_id(o.item_id, model)))
    return out


@dataclasses.dataclass(frozen=True)
class CompareOptions:
    """How two runs are compared: one model of each (None: all of the run's) and the paired
    bootstrap's resamples and seed."""

    model_a: str | None = None
    model_b: str | None = None
    n_resamples: int = StatisticsSettings.bootstrap  # the suite's --bootstrap default
    seed: int = RunSettings.seed


def compare_runs(
    folder_a: Path, folder_b: Path, options: CompareOptions = CompareOptions()
) -> tuple[pd.DataFrame, list[str]]:
    """The paired table of run B against run A, and notes (unmatched cases, what was not
    compared)."""
    found = compared_runs(folder_a, folder_b, options)
    return found.table, list(found.notes)


def compared_runs(
    folder_a: Path, folder_b: Path, options: CompareOptions = CompareOptions()
) -> Compared:
    """compare_runs, with what the comparison page shows besides: the evaluation, the outcomes
    picked and the model pairs compared."""
    name_a, outs_a = load_run(folder_a)
    name_b, outs_b = load_run(folder_b)
    if name_a != name_b:
        raise ValueError(f"{folder_a} holds {name_a}, {folder_b} holds {name_b}: not comparable")
    outs_a = picked(outs_a, options.model_a, "a", folder_a)
    outs_b = picked(outs_b, options.model_b, "b", folder_b)
    models_a = list(dict.fromkeys(o.model for o in outs_a))
    models_b = list(dict.fromkeys(o.model for o in outs_b))
    shared = [m for m in models_a if m in models_b]
    if shared:
        pairs = [(m, m) for m in shared]
    elif len(models_a) == 1 and len(models_b) == 1:
        pairs = [(models_a[0], models_b[0])]
    else:
        raise ValueError(
            f"runs share no model (A: {', '.join(models_a)}; B: {', '.join(models_b)}): pick one "
            "model of each with --model-a MODEL and --model-b MODEL (or RUN_A@MODEL RUN_B@MODEL)"
        )
    requested = [(f"A:{a}", f"B:{b}") for a, b in pairs]
    summary = evaluations.spec(name_a).summary_module()
    try:
        found = summary.compared(
            name_a, _tagged(outs_a, "A") + _tagged(outs_b, "B"), requested,
            options.n_resamples, options.seed,
        )  # fmt: skip
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:  # rows of the right
        # types that lack what the evaluation's comparison reads (scores of another version)
        raise ValueError(
            f"{folder_a} and {folder_b}: {name_a}'s comparison cannot read these rows "
            f"({type(exc).__name__}: {exc})"
        ) from None
    if found is None:
        raise ValueError(f"{name_a} declares no comparisons")
    table, notes = found
    cases_a = {o.item_id for o in outs_a}
    cases_b = {o.item_id for o in outs_b}
    only_a, only_b = sorted(cases_a - cases_b), sorted(cases_b - cases_a)
    if only_a or only_b:
        notes = [
            *notes,
            f"{len(only_a)} case(s) only in A (e.g. {only_a[:3]}), {len(only_b)} only in B "
            f"(e.g. {only_b[:3]}): left out of the pairs",
        ]
    return Compared(
        name_a, Path(folder_a), Path(folder_b), options.model_a, options.model_b, tuple(outs_a),
        tuple(outs_b), tuple(pairs), table, tuple(notes),
    )  # fmt: skip


def run_id_folders(arg: str, results: Path) -> tuple[dict[str, Path], str | None] | None:
    """`RID` or `RID@MODEL` as a run id across evaluations: ({evaluation: <results>/<evaluation>/
    RID}, model or None), or None when no evaluation under `results` has such a run. The whole
    `arg` is tried first, then each split at an `@` (a model name may hold `@` itself)."""
    results = Path(results)
    if not results.is_dir():
        return None
    tries = [(arg, None)]
    at = arg.find("@")
    while at != -1:
        tries.append((arg[:at], arg[at + 1 :] or None))
        at = arg.find("@", at + 1)
    for run_id, model in tries:
        if not run_id or run_id in (".", "..") or "/" in run_id or os.sep in run_id:
            continue
        found = {
            child.name: child / run_id
            for child in sorted(results.iterdir())
            if not child.name.startswith(".") and (child / run_id).is_dir()
        }
        if found:
            return found, model
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="vlmbench-compare", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument(
        "run_a",
        nargs="?",
        help="results/<evaluation>/<run-id> of run A; RUN@MODEL: one model of it",
    )
    parser.add_argument(
        "run_b",
        nargs="?",
        help="the same evaluation's folder of run B; RUN@MODEL: one model of it",
    )
    parser.add_argument(
        "--model-a", metavar="MODEL", help="compare this model of run A only (a multi-model run)"
    )
    parser.add_argument(
        "--model-b", metavar="MODEL", help="compare this model of run B only (a multi-model run)"
    )
    defaults = CompareOptions()
    parser.add_argument(
        "--bootstrap",
        type=int,
        default=defaults.n_resamples,
        help=f"resamples ({defaults.n_resamples})",
    )
    parser.add_argument(
        "--seed", type=int, default=defaults.seed, help=f"bootstrap seed ({defaults.seed})"
    )
    parser.add_argument("--out", type=Path, help="also write the table to this CSV file")
    parser.add_argument(
        "--results",
        metavar="DIR",
        type=Path,
        default=OutputSettings.results_dir,
        help="where a run id (a side that is not a folder: RID or RID@MODEL) is looked for: "
        "DIR/<evaluation>/RID, every evaluation both sides hold (results)",
    )
    board = parser.add_argument_group(
        "leaderboard", "every run of a results folder, instead of RUN_A RUN_B"
    )
    board.add_argument(
        "--leaderboard",
        metavar="DIR",
        type=Path,
        help="list every run under DIR (results/, one evaluation's folder or one run) with its "
        "key metrics; markdown on stdout",
    )
    board.add_argument("--csv", metavar="FILE", type=Path, help="--leaderboard: also as CSV")
    board.add_argument(
        "--html",
        metavar="FILE",
        type=Path,
        help="RUN_A RUN_B: also write the comparison page (cases side by side, flipped first); "
        "--leaderboard: also as HTML",
    )
    args = parser.parse_args(argv)
    if args.leaderboard is not None:
        return _leaderboard(parser, args)
    if args.csv:
        parser.error("--csv goes with --leaderboard DIR (RUN_A RUN_B: --out FILE, --html FILE)")
    if args.run_a is None or args.run_b is None:
        parser.error("give two runs, RUN_A RUN_B, or --leaderboard DIR")
    sides = []
    for side, arg, option in (("a", args.run_a, args.model_a), ("b", args.run_b, args.model_b)):
        folder, at = split_run(arg)
        by_id = None if folder.is_dir() else run_id_folders(arg, args.results)
        if by_id is not None:
            at = by_id[1]
        if at is not None and option is not None and at != option:
            parser.error(
                f"--model-{side} {option!r} and RUN_{side.upper()}@{at} name two models: "
                "give one of them"
            )
        sides.append((by_id[0] if by_id else folder, option or at))
    (where_a, model_a), (where_b, model_b) = sides
    options = CompareOptions(model_a, model_b, args.bootstrap, args.seed)
    by_run_id = not (isinstance(where_a, Path) and isinstance(where_b, Path))
    try:
        if by_run_id:
            found, skipped = _across_evaluations(where_a, where_b, options)
        else:  # two run folders, as before run ids
            found = [compared_runs(where_a, where_b, options)]
            skipped = []
    except ValueError as exc:
        _say(f"vlmbench-compare: {exc}", sys.stderr)
        return 2
    for c in found:
        _say(f"A = {c.folder_a}" + (f" (model {model_a})" if model_a else ""))
        _say(f"B = {c.folder_b}" + (f" (model {model_b})" if model_b else ""))
        _say(report_section(c.table, c.notes))
    for line in skipped:
        _say(line)
    if args.out:
        table = found[0].table
        if by_run_id:  # every evaluation's table, each row naming its evaluation
            table = pd.concat([c.table.assign(evaluation=c.evaluation) for c in found])
            table = table[["evaluation", *(k for k in table.columns if k != "evaluation")]]
        try:
            spreadsheet_safe(table).to_csv(args.out, index=False, float_format="%.6g")
        except OSError as exc:
            _say(
                f"vlmbench-compare: --out {args.out}: not written ({exc.strerror or exc})",
                sys.stderr,
            )
            return 2
    if args.html:
        from support.compare.page import write_page

        try:
            page = write_page(args.html, found, args.run_a, args.run_b, skipped)
        except OSError as exc:
            _say(f"vlmbench-compare: the page was not written: {exc}", sys.stderr)
            return 2
        _say(
            f"page: {args.html} ({page['bytes']:,} bytes; {page['flipped']} flipped of "
            f"{sum(n['pairs'] for n in page['counts'].values())} pairs)"
        )
    return 0


def _across_evaluations(
    where_a: Path | dict[str, Path],
    where_b: Path | dict[str, Path],
    options: CompareOptions,
) -> tuple[list[Compared], list[str]]:
    """A run id on one side at least: each evaluation both sides hold, compared (in name
    order), and a line for each evaluation one side holds only. ValueError when they share
    none."""
    maps = []
    for where in (where_a, where_b):
        if isinstance(where, dict):
            maps.append(where)
        else:  # a run folder beside a run id: its evaluation
            maps.append({load_run(where)[0]: where})
    held_a, held_b = maps
    shared = sorted(set(held_a) & set(held_b))
    if not shared:
        raise ValueError(
            f"A and B hold no evaluation in common (A: {', '.join(sorted(held_a))}; "
            f"B: {', '.join(sorted(held_b))})"
        )
    skipped = [
        f"{name}: only in {side} ({held[name]}), not compared"
        for side, held, other in (("A", held_a, held_b), ("B", held_b, held_a))
        for name in sorted(held)
        if name not in other
    ]
    found = [compared_runs(held_a[n], held_b[n], options) for n in shared]
    return found, skipped


def _leaderboard(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """`--leaderboard DIR`: the markdown on stdout, `--csv` / `--html` files, exit 0 (2 when
    DIR is no folder or holds no readable run)."""
    from support.compare.leaderboard import (
        build_leaderboard,
        to_markdown,
        write_csv_file,
        write_html_file,
    )

    if args.run_a is not None:
        parser.error("--leaderboard DIR lists every run: give it without RUN_A RUN_B")
    given = [f"--{n.replace('_', '-')}" for n in ("model_a", "model_b", "out") if getattr(args, n)]
    if given:
        parser.error(f"{', '.join(given)}: not with --leaderboard DIR (use --csv / --html)")
    board = build_leaderboard(args.leaderboard)
    _say(to_markdown(board))
    for option, path, write in (
        ("--csv", args.csv, write_csv_file),
        ("--html", args.html, write_html_file),
    ):
        if path is None:
            continue
        try:
            write(board, path)
        except OSError as exc:
            _say(
                f"vlmbench-compare: {option} {path}: not written ({exc.strerror or exc})",
                sys.stderr,
            )
            return 2
    if not board.tables:
        _say(f"vlmbench-compare: no readable run under {args.leaderboard}", sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
