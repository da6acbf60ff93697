"""Where the source puts a combination's files:
results/pgt/{dataset}/{model}/{phrase}/{mode}/[n=N/].

`baseline` has no mode folder; n=1 has no `n=` folder. Each run adds `reasoning_<ts>.json`,
`performance_<ts>.json` and `evaluation_<ts>.log` there, `<ts>` being the run id (a timestamp
%Y%m%d_%H%M%S_<microseconds>_<4 hex digits> unless --run-id names it).

Under `--compat source` the files are the source's: `reasoning_<ts>.json`,
`performance_fixed_<ts>.json` and `confidence.json` in that folder, and the log in the same
hierarchy under results/pgt/logs/ (the source's logs/ beside its output/, config.py
`get_logs_dir`).
"""

from __future__ import annotations

import re
from pathlib import Path

from support.storage.files import fit_name

_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")


def path_name(name: str) -> str:
    """A model or dataset name as one folder name: `hf:/models/tiny` -> `hf_models_tiny`; an
    over-long one shortened with a hash (support.storage.files.fit_name)."""
    return fit_name(_UNSAFE.sub("_", name).strip("_.") or "_", name)


def result_dir(
    results_dir: Path, dataset: str, model: str, phrase: str, mode: str | None, n: int
) -> Path:
    """The combination's folder under results_dir/pgt (mode None or "": baseline)."""
    folder = Path(results_dir) / "pgt" / path_name(dataset) / path_name(model) / phrase
    if mode:
        folder = folder / mode
    if n > 1:
        folder = folder / f"n={n}"
    return folder


def performance_name(run_id: str, source: bool = False) -> str:
    """The file name of a run's metrics in a combination folder: `performance_<ts>.json`, or the
    source's `performance_fixed_<ts>.json` under `--compat source` (helpers.py:776)."""
    return f"performance_fixed_{run_id}.json" if source else f"performance_{run_id}.json"


LOGS = "logs"  # --compat source: the log tree's folder under results_dir/pgt


def log_dir(
    results_dir: Path, dataset: str, model: str, phrase: str, mode: str | None, n: int
) -> Path:
    """`--compat source`: the combination's log folder, results_dir/pgt/logs/{dataset}/..."""
    combination = result_dir(results_dir, dataset, model, phrase, mode, n)
    return Path(results_dir) / "pgt" / LOGS / combination.relative_to(Path(results_dir) / "pgt")
