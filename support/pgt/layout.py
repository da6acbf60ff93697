"""Where the source puts a combination's files:
results/pgt/{dataset}/{model}/{phrase}/{mode}/[n=N/].

`baseline` has no mode folder; n=1 has no `n=` folder. Each run adds `reasoning_<ts>.json`,
`performance_<ts>.json` and `evaluation_<ts>.log` there, `<ts>` being the run id (a timestamp
%Y%m%d_%H%M%S unless --run-id names it).
"""

from __future__ import annotations

import re
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")


def path_name(name: str) -> str:
    """A model or dataset name as one folder name: `hf:/models/tiny` -> `hf_models_tiny`."""
    return _UNSAFE.sub("_", name).strip("_.") or "_"


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
