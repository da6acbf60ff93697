"""PGT figures from a results root: confidence.json, macro_f1_bars, recall_radar, vocab_lr.

    python -m support.evaluations.pgt.plots results/pgt [--out DIR] [--models a,b] [--method s2]
    [--run ID]

The pieces live in data (reading the tree; method keys), bars, radar, vocab and style (colors,
sizes, fonts); this module gathers them. A figure the data cannot make is
skipped with its reason logged (and warned, category PlotSkipped); a malformed results file stops
everything with a ResultsFormatError naming the file and key.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from support.evaluations.pgt.plots.bars import macro_f1_figure, plot_macro_f1_bars
from support.evaluations.pgt.plots.data import (
    ResultsFormatError,
    load_performance,
    write_confidence,
)
from support.evaluations.pgt.plots.radar import plot_recall_radar, recall_radar_figure
from support.evaluations.pgt.plots.style import PlotSkipped, log, skip
from support.evaluations.pgt.plots.vocab import plot_vocab_lr, vocab_figure

__all__ = [
    "PlotSkipped",
    "ResultsFormatError",
    "load_performance",
    "macro_f1_figure",
    "main",
    "make_all",
    "plot_macro_f1_bars",
    "plot_recall_radar",
    "plot_vocab_lr",
    "recall_radar_figure",
    "vocab_figure",
    "write_confidence",
]


def make_all(
    root: Path,
    out_dir: Path | None = None,
    models: Sequence[str] | None = None,
    method: str | None = None,
    run: str | None = None,
    reasoning_run: str | None = None,
    order: Sequence[str] = (),
) -> list[Path]:
    """Every figure from one results root into out_dir (default root/figures); the paths written.
    `models` and `method` select what the recall radar draws; `order` is the models' order in
    every figure (the run's `--model` order; default: `models`, then style.model_order's);
    `run` draws one run's files only
    (performance_<run>.json; default: the newest file of each folder); `reasoning_run` the
    reasoning files' run for the vocabulary figure when it differs (`--compat source` writes
    performance_fixed_<ts>.json beside reasoning_<ts>.json)."""
    root = Path(root)
    out_dir = Path(out_dir) if out_dir is not None else root / "figures"
    df = load_performance(root, run=run)
    order = tuple(order) or tuple(models or ())
    written = []
    if df.empty:
        skip("confidence.json", f"no performance_*.json under {root}")
    else:
        written.append(write_confidence(df, out_dir / "confidence.json"))
    written += plot_macro_f1_bars(df, out_dir, order)
    written += plot_recall_radar(df, out_dir, models=models, method=method, order=order)
    written += plot_vocab_lr(root, out_dir, run=reasoning_run or run)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: make_all, then the written paths, one a line. Exit status 0; 1 when
    nothing could be written; 2 for a malformed results file."""
    parser = argparse.ArgumentParser(
        prog="python -m support.evaluations.pgt.plots", description=__doc__
    )
    parser.add_argument("root", type=Path, help="results root (e.g. results/pgt)")
    parser.add_argument("--out", type=Path, help="output folder (default ROOT/figures)")
    parser.add_argument(
        "--models",
        help="models drawn in the recall radar, comma separated; their order is every figure's",
    )
    parser.add_argument(
        "--method", help="method key drawn in the recall radar (default: each model's best)"
    )
    parser.add_argument("--run", help="one run's files only (its run id); default: the newest")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"no such folder: {args.root}")
    logging.basicConfig(format="%(message)s")
    log.setLevel(logging.INFO)
    models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlotSkipped)  # already logged
        try:
            written = make_all(args.root, args.out, models, args.method, args.run)
        except ResultsFormatError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    for path in written:
        print(path)
    return 0 if written else 1  # nothing could be drawn: the reasons are logged above
