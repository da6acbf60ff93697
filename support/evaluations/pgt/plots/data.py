"""A PGT results tree as tables for the plots, and confidence.json (the bar chart's error bars).

The PGT evaluation writes, under a results root:

    {dataset}/{model}/{phrase}/{mode}/[n={n}/]performance_<run>.json   (+ reasoning_<run>.json)

(baseline has no {mode} folder; n=1 no n= folder; <run> is a timestamp or run id; a folder may hold
several runs, the newest being the last by name). The files' own fields (dataset, model, phrase,
mode, n_responses) say what they hold; the folders only serve to find them.

Method key: the folders below the model with the defaults left out, i.e. the phrase, then the mode
unless it is the default 'prefill' (or None: baseline), then 'n={n}' when n > 1, joined by '/':
'baseline', 'cot' (prefill, n=1), 'cot/prompt', 's2/n=5' (prefill, n=5), 's2/instruct/n=5'. A key
means the same whatever else the root holds, so figures of different roots stay comparable.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from support.evaluations.pgt.plots.style import (
    DATASET_NAMES,
    DEFAULT_MODE,
    METHOD_NAMES,
    MODEL_NAMES,
    MODES,
    method_name,
)

PERFORMANCE_PREFIX = "performance_"
CONFIDENCE_FILE = "confidence.json"  # a combination folder's interval file (--compat source)
REASONING_PREFIX = "reasoning_"
COLUMNS = [
    *("dataset", "model", "phrase", "mode", "n", "method", "run", "total_examples"),
    *("accuracy", "accuracy_lo", "accuracy_hi", "macro_f1", "macro_f1_lo", "macro_f1_hi"),
    *("per_generator_recall", "path"),
]


class ResultsFormatError(ValueError):
    """A results file not in the PGT format; the message names the file and the faulty key."""


def method_key(phrase: str, mode: str | None, n: int) -> str:
    """The method key of a (phrase, mode, n) combination (rule in the module docstring)."""
    parts = [phrase]
    parts += [mode] if isinstance(mode, str) and mode != DEFAULT_MODE else []  # None/NaN: none
    parts += [f"n={n}"] if n > 1 else []
    return "/".join(parts)


def method_rank(phrase: str, mode: str | None, n: int) -> tuple:
    """Sort key of methods: known phrases in METHOD_NAMES order, then others by name; within a
    phrase, modes in the source's order (prefill first), then n."""
    known = list(METHOD_NAMES)
    p = (known.index(phrase), "") if phrase in known else (len(known), phrase)
    m = _rank(mode, MODES) if isinstance(mode, str) else (-1, "")
    return (p, m, n)


def result_files(
    root: Path, prefix: str, latest_only: bool = True, run: str | None = None
) -> list[Path]:
    """`{prefix}<run>.json` files under root; with latest_only, the newest (last by name) of each
    folder; with `run`, only that run's files."""
    pattern = f"{prefix}{run}.json" if run else f"{prefix}*.json"
    files = sorted(p for p in Path(root).rglob(pattern) if p.is_file())
    if not latest_only:
        return files
    newest = {p.parent: p for p in files}  # sorted: the last of a folder wins
    return sorted(newest.values())


def read_json(path: Path) -> object:
    """The parsed file; ResultsFormatError naming it when it is not JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ResultsFormatError(f"{path}: not valid JSON ({e})") from e


def load_performance(root: Path, latest_only: bool = True, run: str | None = None) -> pd.DataFrame:
    """One row per performance file under root (COLUMNS), sorted by dataset, model and method.

    `*_lo`/`*_hi` are the 95% bootstrap bounds (NaN when absent or null); per_generator_recall is
    a dict {generator: {"recall", "n", "lo", "hi"}} ({} when the file has none). `run` keeps one
    run's files (performance_<run>.json) only. Raises
    ResultsFormatError naming the file and key for a file missing a required key."""
    files = result_files(root, PERFORMANCE_PREFIX, latest_only, run)
    rows = [performance_row(p) for p in files]
    df = pd.DataFrame(rows, columns=COLUMNS)
    df["mode"] = none_for_missing(df["mode"])
    return sort_rows(df).reset_index(drop=True)


def performance_row(path: Path) -> dict:
    """One performance file as a row of load_performance's table."""
    doc = read_json(path)

    def get(key: str) -> object:
        return _get(doc, key, path)

    def number(key: str) -> float:
        return _number(_get(doc, key, path), key, path)

    n = _count(get("n_responses"), "n_responses", path, minimum=1)
    phrase, mode = str(get("phrase")), get("mode")
    mode = None if mode is None else str(mode)
    row = {
        "dataset": str(get("dataset")),
        "model": str(get("model")),
        "phrase": phrase,
        "mode": mode,
        "n": n,
        "method": method_key(phrase, mode, n),
        "run": Path(path).stem.removeprefix(PERFORMANCE_PREFIX),
        "total_examples": _count(get("metrics.total_examples"), "metrics.total_examples", path),
        "path": Path(path),
    }
    intervals = doc["metrics"].get("confidence_intervals") or {}
    if not isinstance(intervals, dict):
        raise ResultsFormatError(f"{path}: 'metrics.confidence_intervals' must be an object")
    if "macro_f1" not in intervals:  # the source's files: the interval is in confidence.json
        intervals = {**intervals, "macro_f1": confidence_interval(Path(path).parent)}
    for metric in ("accuracy", "macro_f1"):
        row[metric] = number(f"metrics.{metric}")
        key = f"metrics.confidence_intervals.{metric}"
        row[f"{metric}_lo"], row[f"{metric}_hi"] = _interval(intervals.get(metric), key, path)
    row["per_generator_recall"] = _recalls(doc["metrics"].get("per_generator_recall") or {}, path)
    return row


def confidence_interval(folder: Path) -> list | None:
    """The macro-F1 interval of a folder's confidence.json (the source's
    results/compute_confidence_intervals.py: {"macro_f1": {"ci_95": [lo, hi], ...}}), or None
    when the folder has none."""
    path = Path(folder) / CONFIDENCE_FILE
    if not path.is_file():
        return None
    doc = read_json(path)
    return _get(doc, "macro_f1.ci_95", path)  # type: ignore[return-value]


def none_for_missing(column: pd.Series) -> pd.Series:
    """A text column with None (not pandas' NaN) where a value is missing (the baseline's mode)."""
    return column.astype(object).where(column.notna(), None)


def sort_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in display order: datasets and models as in the name maps (others after, by name),
    methods by method_rank, then runs oldest first."""
    keys = [
        (_rank(d, DATASET_NAMES), _rank(m, MODEL_NAMES), method_rank(p, mode, n), run)
        for d, m, p, mode, n, run in zip(
            df["dataset"], df["model"], df["phrase"], df["mode"], df["n"], df["run"], strict=True
        )
    ]
    return df.iloc[sorted(range(len(df)), key=keys.__getitem__)]


def latest_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The newest run of each (dataset, model, method): what the figures draw when a table was
    loaded with latest_only=False."""
    df = sort_rows(df)
    return df.drop_duplicates(["dataset", "model", "method"], keep="last").reset_index(drop=True)


def method_order(df: pd.DataFrame) -> list[str]:
    """The table's method keys in method_rank order."""
    triples = {(r.phrase, r.mode, r.n): r.method for r in df.itertuples()}
    return [triples[t] for t in sorted(triples, key=lambda t: method_rank(*t))]


def method_labels(df: pd.DataFrame) -> dict[str, str]:
    """Display name of each method key of the table ('cot/prompt' -> 'CoT (prompt)')."""
    return {r.method: method_name(r.phrase, r.mode, r.n) for r in df.itertuples()}


def recall_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per-generator recall, long: dataset, model, method, generator, recall, n, lo, hi."""
    rows = [
        {"dataset": r.dataset, "model": r.model, "method": r.method, "generator": g, **v}
        for r in df.itertuples()
        for g, v in r.per_generator_recall.items()
    ]
    cols = ["dataset", "model", "method", "generator", "recall", "n", "lo", "hi"]
    return pd.DataFrame(rows, columns=cols)


def write_confidence(df: pd.DataFrame, path: Path) -> Path:
    """confidence.json: {dataset: {model: {method: {"macro_f1", "lo", "hi", "n"}}}} with n the
    number of examples and null for an undefined value (newest run of each method)."""
    from support.storage.files import atomic_write_text

    out: dict = {}
    for r in latest_runs(df).itertuples():
        out.setdefault(r.dataset, {}).setdefault(r.model, {})[r.method] = {
            "macro_f1": _json_number(r.macro_f1),
            "lo": _json_number(r.macro_f1_lo),
            "hi": _json_number(r.macro_f1_hi),
            "n": int(r.total_examples),
        }
    path = Path(path)
    atomic_write_text(path, json.dumps(out, indent=2, allow_nan=False) + "\n")
    return path


def _rank(value: str, known) -> tuple[int, str]:
    known = list(known)
    return (known.index(value), "") if value in known else (len(known), value)


def _get(doc: object, dotted: str, path: Path) -> object:
    value = doc
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            raise ResultsFormatError(f"{path}: missing key '{dotted}'")
        value = value[key]
    return value


def _number(value: object, key: str, path: Path) -> float:
    """A metric as float; null -> NaN (undefined metric)."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ResultsFormatError(f"{path}: '{key}' must be a number or null, got {value!r}")
    return float(value)


def _count(value: object, key: str, path: Path, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ResultsFormatError(f"{path}: '{key}' must be an integer >= {minimum}, got {value!r}")
    return value


def _interval(value: object, key: str, path: Path) -> tuple[float, float]:
    if value is None:
        return math.nan, math.nan
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ResultsFormatError(f"{path}: '{key}' must be [lo, hi] or null")
    return _number(value[0], key, path), _number(value[1], key, path)


def _recalls(table: object, path: Path) -> dict[str, dict]:
    if not isinstance(table, dict):
        raise ResultsFormatError(f"{path}: 'metrics.per_generator_recall' must be an object")
    out = {}
    for generator, v in table.items():
        key = f"metrics.per_generator_recall.{generator}"
        if not isinstance(v, dict) or "recall" not in v:
            raise ResultsFormatError(f"{path}: missing key '{key}.recall'")
        recall = _number(v["recall"], f"{key}.recall", path)
        lo, hi = _interval(v.get("ci"), f"{key}.ci", path)
        n = None if v.get("n") is None else _count(v["n"], f"{key}.n", path)
        out[str(generator)] = {"recall": recall, "n": n, "lo": lo, "hi": hi}
    return out


def _json_number(v: float) -> float | None:
    return None if v is None or math.isnan(v) else float(v)
