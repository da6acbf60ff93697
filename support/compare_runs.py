"""Paired comparison of two runs: `vlmbench-compare RUN_A RUN_B` (`python -m support.compare_runs`).

Each folder is one evaluation's run (`results/<evaluation>/<run-id>/`, holding raw_results.jsonl).
Cases pair by case id without the model (the same data; a different model or other settings), model
by model when both runs have the same models, else the one model of A against the one of B. The
table is the evaluation's own comparison (support/comparisons/pairing.py: paired cluster-bootstrap
intervals, the evaluation's tests, Holm over the table); cases found in one run only are counted and
printed, never dropped silently.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from support import evaluations
from support.comparisons.pairing import report_section
from support.files import spreadsheet_safe
from support.types import Outcome, outcome_id


def load_run(folder: Path) -> tuple[str, list[Outcome]]:
    """(evaluation, outcomes) of a run folder; ValueError naming the file and line."""
    path = Path(folder) / "raw_results.jsonl"
    if not path.is_file():
        raise ValueError(f"{folder}: no raw_results.jsonl (a run is results/<eval>/<run-id>)")
    outcomes = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            outcomes.append(Outcome.from_json(json.loads(line)))
        except (json.JSONDecodeError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{number}: not an outcome row ({exc})") from None
    names = {o.evaluation for o in outcomes}
    if len(names) != 1:
        raise ValueError(f"{path}: expected one evaluation's outcomes, found {sorted(names)}")
    return names.pop(), outcomes


def _tagged(outcomes: Sequence[Outcome], tag: str) -> list[Outcome]:
    """Outcomes with the model renamed `<tag>:<model>` (and the case id's suffix with it)."""
    out = []
    for o in outcomes:
        model = f"{tag}:{o.model}"
        out.append(dataclasses.replace(o, model=model, case_id=outcome_id(o.item_id, model)))
    return out


def compare_runs(
    folder_a: Path, folder_b: Path, n_resamples: int = 1000, seed: int = 0
) -> tuple[pd.DataFrame, list[str]]:
    """The paired table of run B against run A, and notes (unmatched cases, what was not
    compared)."""
    name_a, outs_a = load_run(folder_a)
    name_b, outs_b = load_run(folder_b)
    if name_a != name_b:
        raise ValueError(f"{folder_a} holds {name_a}, {folder_b} holds {name_b}: not comparable")
    models_a = list(dict.fromkeys(o.model for o in outs_a))
    models_b = list(dict.fromkeys(o.model for o in outs_b))
    shared = [m for m in models_a if m in models_b]
    if shared:
        requested = [(f"A:{m}", f"B:{m}") for m in shared]
    elif len(models_a) == 1 and len(models_b) == 1:
        requested = [(f"A:{models_a[0]}", f"B:{models_b[0]}")]
    else:
        raise ValueError(
            f"runs share no model (A: {models_a}, B: {models_b}); compare runs of the same models, "
            "or of one model each"
        )
    summary = evaluations.spec(name_a).summary_module()
    found = summary.compared(
        name_a, _tagged(outs_a, "A") + _tagged(outs_b, "B"), requested, n_resamples, seed
    )
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
    return table, notes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="vlmbench-compare", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("run_a", type=Path, help="results/<evaluation>/<run-id> of run A")
    parser.add_argument("run_b", type=Path, help="the same evaluation's folder of run B")
    parser.add_argument("--bootstrap", type=int, default=1000, help="resamples (1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (0)")
    parser.add_argument("--out", type=Path, help="also write the table to this CSV file")
    args = parser.parse_args(argv)
    try:
        table, notes = compare_runs(args.run_a, args.run_b, args.bootstrap, args.seed)
    except ValueError as exc:
        print(f"vlmbench-compare: {exc}", file=sys.stderr)
        return 2
    print(f"A = {args.run_a}\nB = {args.run_b}")
    print(report_section(table, notes))
    if args.out:
        spreadsheet_safe(table).to_csv(args.out, index=False, float_format="%.6g")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
