"""Writing a run's files (raw_results.jsonl, summary.csv) and formatting its tables."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:  # imported where a table is built: workers import this module for its writers
    import pandas as pd

from support.types import Outcome, Usage


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
    """One JSON object per case: ids, prompt hash, raw response, parsed answer, truth, status...
    (everything but RUN_FIELDS)."""
    lines = [
        json.dumps({k: v for k, v in o.to_json().items() if k not in HOW_FIELDS}, sort_keys=True)
        for o in outcomes
    ]
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
    return path


def calls_table(outcomes: Iterable[Outcome]) -> pd.DataFrame:
    """calls.csv: per outcome, its model seconds and cache bookkeeping (RUN_FIELDS)."""
    rows = [
        {"model": o.model, "case_id": o.case_id, **{f: getattr(o, f) for f in RUN_FIELDS}}
        for o in outcomes
    ]
    import pandas as pd

    return pd.DataFrame(rows, columns=["model", "case_id", *RUN_FIELDS])


def file_name(text: str) -> str:
    """`text` as a file or folder name: characters other than letters, digits and `._-` become
    `_` (a model name such as `planted:where=0.9,*=0.05` or `hf:/path/model`)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "_"


def write_csv(df: pd.DataFrame, path: Path) -> Path:
    atomic_write_text(path, df.to_csv(index=False, float_format="%.6g"))
    return path


def usage_table(outcomes: Iterable[Outcome]) -> pd.DataFrame:
    """Per model: cases, tokens and cost in USD (from support.backends.prices; empty where the
    model has no price). Cached answers count too: they are what the run would have cost. What
    was answered through a batch API (`Outcome.batch_usage`) is priced at the batch price, and
    `batch_cost_usd` is that part of `cost_usd`."""
    from support.backends.prices import batch_cost_usd, cost_usd
    from support.backends.registry import model_spec

    rows: dict[str, dict] = {}
    for o in outcomes:
        r = rows.setdefault(
            o.model,
            {
                "model": o.model,
                "cases": 0,
                "input_tokens": 0,
                "output_tokens": 0,
                "cost_usd": 0.0,
                "batch_cost_usd": 0.0,
            },
        )
        r["cases"] += 1
        r["input_tokens"] += o.usage.input_tokens
        r["output_tokens"] += o.usage.output_tokens
        model_id = o.model.partition(":")[2] or o.model  # "openai:gpt-4.1" -> "gpt-4.1"
        cost = cost_usd(model_id, o.usage - o.batch_usage)
        batch = 0.0
        if o.batch_usage != Usage():
            batch = batch_cost_usd(model_spec(o.model).provider, model_id, o.batch_usage)
        if cost is None or batch is None or r["cost_usd"] is None:
            r["cost_usd"] = r["batch_cost_usd"] = None
        else:
            r["cost_usd"] += cost + batch
            r["batch_cost_usd"] += batch
    columns = ["model", "cases", "input_tokens", "output_tokens", "cost_usd", "batch_cost_usd"]
    import pandas as pd

    return pd.DataFrame([rows[m] for m in sorted(rows)], columns=columns)


def with_intervals(df: pd.DataFrame, metrics: Iterable[str], digits: int = 3) -> pd.DataFrame:
    """Merge `m`, `m_lo`, `m_hi` columns into one text column `0.812 [0.750, 0.860]`."""
    out = df.copy()
    for m in metrics:
        if m not in out:
            continue
        lo, hi = out.get(f"{m}_lo"), out.get(f"{m}_hi")
        texts = []
        for i, v in enumerate(out[m]):
            text = fmt(v, digits)
            if lo is not None and hi is not None:
                a, b = lo.iloc[i], hi.iloc[i]
                if not (_nan(a) or _nan(b)):
                    text += f" [{fmt(a, digits)}, {fmt(b, digits)}]"
            texts.append(text)
        out[m] = texts
        out = out.drop(columns=[c for c in (f"{m}_lo", f"{m}_hi") if c in out])
    return out


def fmt(v: object, digits: int = 3) -> str:
    """A number for humans: fixed digits, '—' where undefined."""
    if v is None or _nan(v):
        return "—"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _nan(v: object) -> bool:
    return isinstance(v, float) and math.isnan(v)


def report_head(title: str, data: str | None) -> list[str]:
    """The first lines of a report.md: `# title`, and when the data is not the real dataset
    (`data`: the summary module's `data_label(run)`) a title that says so and a line naming it."""
    if data is None:
        return [f"# {title}", ""]
    return [
        f"# {title}: synthetic data",
        "",
        f"**Data: {data}.** These numbers check the pipeline; they say nothing about a model on "
        "the real dataset.",
        "",
    ]


def markdown_table(df: pd.DataFrame) -> str:
    """GitHub-flavoured markdown table (pandas.to_markdown, i.e. tabulate)."""
    return df.to_markdown(index=False)
