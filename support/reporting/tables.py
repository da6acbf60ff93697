"""A run's tables: usage.csv and calls.csv from outcomes, interval columns as text, report.md's
heading and markdown tables (rows in the run's model order, `MISSING` where a value is
undefined)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported where a table is built
    import pandas as pd

from support.storage.files import RUN_FIELDS
from support.types import Outcome, Usage

MISSING = "—"  # the one mark of an undefined value in every table a person reads


# calls.csv's columns of `Outcome.batch_usage`: the tokens answered through a batch API
BATCH_COLUMNS = ("batch_input_tokens", "batch_output_tokens", "batch_reasoning_tokens")


def calls_table(outcomes: Iterable[Outcome]) -> pd.DataFrame:
    """calls.csv: per outcome, its model seconds and cache bookkeeping (RUN_FIELDS), and the
    tokens answered through a batch API (BATCH_COLUMNS): how each answer was obtained, what
    `--resume` reads back with raw_results.jsonl."""
    rows = [
        {
            "model": o.model,
            "case_id": o.case_id,
            **{f: getattr(o, f) for f in RUN_FIELDS},
            "batch_input_tokens": o.batch_usage.input_tokens,
            "batch_output_tokens": o.batch_usage.output_tokens,
            "batch_reasoning_tokens": o.batch_usage.reasoning_tokens,
        }
        for o in outcomes
    ]
    import pandas as pd

    return pd.DataFrame(rows, columns=["model", "case_id", *RUN_FIELDS, *BATCH_COLUMNS])


def usage_table(outcomes: Iterable[Outcome]) -> pd.DataFrame:
    """Per model: cases, tokens (output = reasoning + answer; thinking is billed as output) and
    cost in USD (from support.backends.api_models; empty where the model has no price), and
    the outcomes whose answer the token limit cut. Cached answers count too: they are what the
    run would have cost. What was answered through a batch API (`Outcome.batch_usage`) is
    priced at the batch price, and `batch_cost_usd` is that part of `cost_usd`."""
    from support.backends.api_models import batch_cost_usd, cost_usd
    from support.backends.registry import spec_or_unregistered

    rows: dict[str, dict] = {}
    for o in outcomes:
        r = rows.setdefault(
            o.model,
            {
                "model": o.model,
                "cases": 0,
                "input_tokens": 0,
                "output_tokens": 0,
                "reasoning_tokens": 0,
                "answer_tokens": 0,
                "truncated": 0,
                "cost_usd": 0.0,
                "batch_cost_usd": 0.0,
            },
        )
        r["cases"] += 1
        r["input_tokens"] += o.usage.input_tokens
        r["output_tokens"] += o.usage.output_tokens
        r["reasoning_tokens"] += o.usage.reasoning_tokens
        r["answer_tokens"] += o.usage.answer_tokens
        r["truncated"] += int(o.truncated)
        spec = spec_or_unregistered(o.model)  # the price is the model id's ("gpt-4.1")
        cost = cost_usd(spec.model_id, o.usage - o.batch_usage)
        batch = 0.0
        if o.batch_usage != Usage():
            batch = batch_cost_usd(spec.provider, spec.model_id, o.batch_usage)
        if cost is None or batch is None or r["cost_usd"] is None:
            r["cost_usd"] = r["batch_cost_usd"] = None
        else:
            r["cost_usd"] += cost + batch
            r["batch_cost_usd"] += batch
    columns = [
        "model",
        "cases",
        "input_tokens",
        "output_tokens",  # every token written and billed: reasoning + answer
        "reasoning_tokens",
        "answer_tokens",
        "truncated",  # outcomes with an answer cut by the token limit
        "cost_usd",
        "batch_cost_usd",
    ]
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
    """A number for humans: fixed digits, MISSING where undefined."""
    if v is None or _nan(v):
        return MISSING
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _nan(v: object) -> bool:
    return isinstance(v, float) and math.isnan(v)


def report_head(title: str, data: str | None) -> list[str]:
    """The first lines of a report.md: `# title`, and when the data is not the real dataset
    (`data`: the evaluation spec's `data_label(run)`) a title that says so and a line naming it."""
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
    """GitHub-flavoured markdown table (pandas.to_markdown, i.e. tabulate); an undefined value
    (NaN, None, NA) shows as MISSING, numbers keep tabulate's format."""
    shown = df.astype(object).where(df.notna(), None)  # tabulate marks None, prints NaN as "nan"
    return shown.to_markdown(index=False, missingval=MISSING)


def model_order(found: Iterable[str], models: Sequence[str] = ()) -> list[str]:
    """The distinct names of `found`: those in `models` (the run's `--model` order) first, in
    that order, then the others by name."""
    names = set(found)
    first = [m for m in dict.fromkeys(models) if m in names]
    return first + sorted(names - set(first))


def in_model_order(df: pd.DataFrame, models: Sequence[str], column: str = "model") -> pd.DataFrame:
    """`df`'s rows with `column` in the run's model order (`ModelSettings.names`, as given on the
    command line; model_order), the rows of one model kept in their order.
    For what a person reads: summary.csv and the other CSVs keep their own row order."""
    if column not in df or df.empty:
        return df
    rank = {m: i for i, m in enumerate(model_order(df[column], models))}
    keys = [rank[m] for m in df[column]]
    return df.iloc[sorted(range(len(df)), key=keys.__getitem__)]


# -- a headline's columns (the terminal's brief table, the leaderboard of runs) -----------------


def interval_metrics(headline: pd.DataFrame) -> list[str]:
    """The headline's metrics that carry an interval (`m`, `m_lo`, `m_hi`)."""
    return [c for c in headline.columns if f"{c}_lo" in headline.columns]


def label_columns(headline: pd.DataFrame) -> list[str]:
    """The columns that name a row (text columns other than the model), in table order."""
    import pandas as pd

    return [
        c
        for c in headline.columns
        if c != "model"
        and not str(c).endswith(("_lo", "_hi"))
        and not pd.api.types.is_numeric_dtype(headline[c])
    ]


def key_metrics(headline: pd.DataFrame, declared: Sequence[str] | None) -> list[str]:
    """The metrics of the brief table: the summary module's KEY_METRICS that the headline has,
    else its first metric with an interval, else its first numeric rate-like column."""
    found = [m for m in declared or () if m in headline.columns]
    if found:
        return found
    with_ci = interval_metrics(headline)
    if with_ci:
        return with_ci[:1]
    labels = label_columns(headline)
    numeric = [
        c
        for c in headline.columns
        if c not in labels and c != "model" and headline[c].dtype.kind == "f"
    ]
    return numeric[:1]
