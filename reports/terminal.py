"""What the terminal says at the end of a run, as pure functions of the run's results: every
`Line` of the end-of-run summary (`summary_lines`) and the pieces they are made of. Nothing here
writes; reports.terminal_summary writes these lines.

By default each evaluation gets a heading, a brief table (its key metrics, one column a model,
one row a label combination and metric), one line of counts, and the run prints one line naming
its result folders: about 40 lines for the five quick subsets. `-v` prints the full headline
tables, every file written, the engine statistics and (`--power`) the sample sizes. The brief
table keeps the intervals while it fits the terminal's width and drops them (summary.csv,
report.md keep them) when there are too many models. Then, in any case: the models whose answers
were mostly read by a fallback rule (provenance.csv), the batch lines, the partial-results line
of a run that did not finish, the files not written, the summaries that failed, the pipeline
errors with a command that reruns them, and the failed gates.

Text from outside the suite (a server's error, a model's answer or name) reaches the terminal only
through `printable` (the summary's lines through reports.terminal_summary.PrintableLines): an
escape sequence in it would otherwise retitle, clear or rewrite the user's terminal. The "rerun
what failed" line quotes each argument as a POSIX shell reads it (`rerun_line`), so pasting it
runs pytest and nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from support.printable import printable
from support.reporting.tables import (
    MISSING,
    fmt,
    in_model_order,
    interval_metrics,
    key_metrics,
    label_columns,
    markdown_table,
    with_intervals,
)
from support.settings import RunSettings
from support.storage.run_folder import RAW, folder_of
from support.types import Outcome

if TYPE_CHECKING:
    import pandas as pd

    from reports.result import EvaluationResult, RunResult

MAX_WIDTH = 120  # terminal columns a brief table may take
MAX_ERRORS_LISTED = 3  # distinct pipeline errors named per evaluation
ERROR_CHARS = 160  # characters of one error message shown
MAX_LISTED_FILES = 12  # "wrote PATH" lines per evaluation (-v)
# engine statistics the engine table (-v) leaves out: in manifest.json, or the batch lines
MANIFEST_ONLY_STATS = ("identity", "endpoint", "batch_api")
RED_BOLD = ("red", "bold")


@dataclass(frozen=True)
class Line:
    """One write of the summary: a text (a table's lines in one), or with `sep` a heading drawn
    across the terminal with that character; `markup` names its styles ("red", "bold",
    "yellow")."""

    text: str
    sep: str | None = None
    markup: tuple[str, ...] = ()


def printable_report(report: Any) -> None:
    """A failed or skipped test report, changed in place so pytest prints no escape sequence:
    its failure text (a pipeline error, an exception quoting an earlier round's error) or skip
    reason (a later round skipped quoting it) and its captured sections made `printable`. A
    failure whose text needs no change keeps pytest's own repr."""
    skip = getattr(report, "longrepr", None)
    if getattr(report, "skipped", False) and isinstance(skip, tuple) and len(skip) == 3:
        report.longrepr = (skip[0], skip[1], printable(str(skip[2])))
        return
    if not getattr(report, "failed", False):
        return
    text = report.longreprtext
    if printable(text) != text:
        report.longrepr = printable(text)
    report.sections = [(head, printable(body)) for head, body in report.sections]


def rerun_line(args: Sequence[str], run_id: str, failed_only: bool) -> str:
    """The command that completes run `run_id`'s tables (reports.resume.rerun_command: `pytest
    <args> [--lf] --resume RUN`, redacted and quoted for a POSIX shell), with what it does."""
    from reports.resume import rerun_command

    command = rerun_command(args, run_id, failed_only)
    what = "rerun what failed" if failed_only else "run what is missing"
    return (
        f"{what} and complete the tables of run {run_id}: {command} (answers already received "
        "are cached)"
    )


def interval_label(run: RunSettings) -> str:
    """What the brackets of the printed tables are."""
    if run.statistics.bootstrap <= 0:
        return "no intervals: --bootstrap 0"
    return "95% bootstrap intervals"


def brief_table(
    headline: pd.DataFrame, metrics: Sequence[str], max_width: int = MAX_WIDTH
) -> pd.DataFrame:
    """Rows: (labels..., metric); columns: models; cells: value [lo, hi] (or the value alone
    when the intervals would not fit `max_width` columns)."""
    import pandas as pd

    labels = label_columns(headline)
    models = list(dict.fromkeys(headline["model"])) if "model" in headline else [""]
    table = headline.copy()
    for c in labels:
        table[c] = table[c].fillna("").astype(str)

    def cell(row: pd.Series, m: str, ci: bool) -> str:
        text = fmt(row[m])
        lo, hi = row.get(f"{m}_lo"), row.get(f"{m}_hi")
        if ci and lo is not None and hi is not None and not (pd.isna(lo) or pd.isna(hi)):
            text += f" [{fmt(lo)}, {fmt(hi)}]"
        return text

    def build(ci: bool) -> pd.DataFrame:
        rows: dict[tuple, dict[str, str]] = {}
        for _, row in table.iterrows():
            model = row["model"] if "model" in table else ""
            for m in metrics:
                key = (*(row[c] for c in labels), m)
                rows.setdefault(key, {})[str(model)] = cell(row, m, ci)
        out = [
            {**dict(zip([*labels, "metric"], key, strict=True)), **{str(m): "" for m in models}}
            | cells
            for key, cells in rows.items()
        ]
        frame = pd.DataFrame(out, columns=[*labels, "metric", *map(str, models)])
        if len(metrics) == 1:  # the heading names it
            frame = frame.drop(columns=["metric"])
        return frame

    full = build(ci=True)
    if _width(full) <= max_width:
        return full
    return build(ci=False)


def _width(df: pd.DataFrame) -> int:
    return max((len(line) for line in markdown_table(df).splitlines()), default=0)


def counts_line(outs: Sequence[Outcome], comparisons: pd.DataFrame | None) -> str:
    """`360 cases: 234 correct, 126 wrong · model calls: 360 sent, 0 served from cache ·
    Holm p < 0.05: 3 of 15 comparisons` (and how many outcomes were reused from existing
    results)."""
    statuses = Counter(o.status for o in outs)
    order = ("correct", "wrong", "unparsable", "error")
    parts = [f"{statuses[s]} {s}" for s in order if statuses[s]]
    parts += [f"{n} {s}" for s, n in sorted(statuses.items()) if s not in order]
    sent = sum(o.backend_calls for o in outs)
    cached = sum(o.cache_hits for o in outs)
    pieces = [
        f"{len(outs)} cases: {', '.join(parts) or 'none'}",
        f"model calls: {sent} sent, {cached} served from cache",
    ]
    reused = sum(1 for o in outs if (o.extra or {}).get("reused"))
    if reused:
        pieces.append(f"{reused} reused from kept results (--override re-runs them)")
    if comparisons is not None and len(comparisons) and "p_holm" in comparisons:
        significant = int((comparisons["p_holm"] < 0.05).sum())
        pieces.append(f"Holm p < 0.05: {significant} of {len(comparisons)} comparisons")
    lines = [pieces[0]]
    for piece in pieces[1:]:  # wrapped before MAX_WIDTH columns, between pieces
        if len(lines[-1]) + 3 + len(piece) > MAX_WIDTH:
            lines.append(piece)
        else:
            lines[-1] += " · " + piece
    return "\n".join(lines)


def error_lines(name: str, outs: Iterable[Outcome]) -> list[str]:
    """The pipeline errors of an evaluation, the most frequent first: `model: message (count)`."""
    errors = Counter(
        (
            printable(o.model),
            " ".join(printable(str(o.error or "unknown error")).split())[:ERROR_CHARS],
        )
        for o in outs
        if o.status == "error"
    )
    if not errors:
        return []
    total = sum(errors.values())
    lines = [f"{name}: {total} case(s) failed in the pipeline (not wrong answers):"]
    for (model, message), n in errors.most_common(MAX_ERRORS_LISTED):
        lines.append(f"  {model}: {message} ({n})")
    if len(errors) > MAX_ERRORS_LISTED:
        lines.append(f"  ... {len(errors) - MAX_ERRORS_LISTED} other messages (calls.csv)")
    return lines


def folders_line(files: dict[str, list[Path]], start: Path) -> str:
    """One line naming the run's result folders (relative to `start` when inside it):
    `results/{pgt,pointing}/20261125_130051/ (163 files; report.md in each; -v lists them)`."""
    folders = []
    for paths in files.values():
        if paths:
            folder = paths[0].parent
            folders.append(folder.relative_to(start) if folder.is_relative_to(start) else folder)
    if not folders:
        return "results: none written"
    count = sum(len(p) for p in files.values())
    tail = f"({count} files; report.md in each; -v lists them)"
    parents, runs = {f.parent.parent for f in folders}, {f.name for f in folders}
    if len(folders) > 1 and len(parents) == 1 and len(runs) == 1:  # one results dir, one run id
        names = ",".join(f.parent.name for f in folders)
        return f"results: {next(iter(parents))}/{{{names}}}/{next(iter(runs))}/ {tail}"
    return f"results: {', '.join(f'{f}/' for f in folders)} {tail}"


def dry_run_lines(name: str, table: pd.DataFrame, path: str | None) -> list[str]:
    """The `--dry-run` estimate of one evaluation: a heading, the note on what is counted, the
    table (one row a model; USD "—" for a model without a price) and where it was written."""
    from support.client.dry_run import NOTE

    lines = [f"vlmbench: {name} dry run: requests to send, tokens and cost (USD)", NOTE]
    lines += markdown_table(table).splitlines()
    if path:
        lines.append(f"written: {path}")
    return lines


def dry_run_total_lines(tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """The `--dry-run` grand total over the session's evaluations and models, one line (and one
    naming the models without a price, which the USD totals leave out)."""
    from support.client.dry_run import GRAND_TOTAL, total_row, unpriced

    row = total_row(tables.values(), GRAND_TOTAL)
    models = {m for t in tables.values() for m in t["model"]}

    def usd(value: object) -> str:
        return MISSING if value is None else f"${value:,.4g}"

    lines = [
        f"vlmbench: dry run total over {len(tables)} evaluation(s) and {len(models)} model(s): "
        f"{row['requests_to_send']:,} requests to send ({row['cached']:,} cached), "
        f"{row['input_tokens']:,} input tokens, at most {row['max_output_tokens']:,} output "
        f"tokens; {usd(row['cost_usd'])} at list price, {usd(row['batch_cost_usd'])} by batch"
    ]
    expected = row.get("expected_cost_usd")
    if expected is not None:  # --pilot: the whole run's expected cost, the models' summed
        low, high = row.get("expected_cost_low"), row.get("expected_cost_high")
        spread = f" [{usd(low)}, {usd(high)}]" if low is not None and high is not None else ""
        lines.append(
            f"  expected from the pilot: {usd(expected)}{spread} at list price (95% intervals "
            "of the models summed)"
        )
    missing = unpriced(tables.values())
    if missing:
        lines.append(f"  (no price, not in the USD totals: {', '.join(missing)})")
    return lines


def batch_lines(engine_stats: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """Per model under --batch: the batches this run submitted, waited on and collected, and what
    a rerun will do (send again what failed or expired; collect what is still running)."""
    lines = []
    for process, stats in sorted(engine_stats.items()):
        for s in stats:
            api = s.get("batch_api")
            if not api:
                continue
            where = f" ({process})" if process != "main" else ""
            parts = []
            sent = api.get("submitted") or []
            if sent:
                ids = ", ".join(b["batch_id"] for b in sent[:3]) + (" ..." if len(sent) > 3 else "")
                n = sum(b["requests"] for b in sent)
                parts.append(f"submitted {len(sent)} batch(es), {n} requests ({ids})")
            for b in api.get("collected") or []:
                text = f"collected {b['batch_id']} ({b['ended']}): {b['answered']} answered"
                if b["failed"]:
                    text += f", {b['failed']} failed"
                if b["unanswered"]:
                    text += f", {b['unanswered']} unanswered"
                if b["failed"] or b["unanswered"]:
                    text += " (the next run sends them again)"
                parts.append(text)
            if api.get("waited_s"):
                parts.append(f"waited {api['waited_s']:.0f} s")
            if api.get("mode") != "wait" and sent:
                parts.append("rerun with --batch collect (or the same command) once they end")
            if parts:
                lines.append(f"vlmbench: batches of {s.get('model')}{where}: " + "; ".join(parts))
    return lines


# -- the end-of-run summary ------------------------------------------------------------------------


def summary_lines(
    result: RunResult, run: RunSettings, verbose: int, args: Sequence[str], start: Path
) -> list[Line]:
    """Everything the run prints at its end (module docstring), in order. `verbose`: pytest's -v
    count; `args`: its arguments (the rerun command); `start`: its working folder (the result
    folders are named relative to it)."""
    lines: list[Line] = []
    failed = [r for r in result.evaluations if r.failure is not None]
    if result.summarized or result.engine_stats or failed:  # not --collect-only
        lines += verbose_tables(result, run) if verbose > 0 else brief_tables(result, run, start)
    for r in result.evaluations:  # answers read mostly by a lenient rule (provenance.csv)
        lines += [
            Line(f"vlmbench: {r.name}: {flag}", markup=("yellow", "bold"))
            for flag in r.fallback_flags
        ]
    lines += [Line(line) for line in batch_lines(result.engine_stats)]
    if run.models.thinking_as_is:  # said at configure too, as a warning that scrolls away
        as_is = "; ".join(run.models.thinking_as_is)
        lines.append(
            Line(f"vlmbench: thinking settings: run as they are: {as_is}", markup=("yellow",))
        )
    lines += [Line(line, markup=RED_BOLD) for line in partial_lines(result)]
    for r in result.evaluations:
        lines += [
            Line(f"vlmbench: {r.name}: NOT WRITTEN: {why}", markup=RED_BOLD) for why in r.unwritten
        ]
    lines += [Line(failure_line(r, run), markup=RED_BOLD) for r in failed]
    for r in result.evaluations:
        lines += [Line(line, markup=("red",)) for line in error_lines(r.name, r.outcomes)]
    lines += [Line(f"GATE FAILED: {msg}", markup=RED_BOLD) for msg in result.gate_messages]
    return lines


def brief_tables(result: RunResult, run: RunSettings, start: Path) -> list[Line]:
    """Per evaluation: a heading, the brief table, one line of counts, the usage table; then one
    line naming the result folders."""
    lines: list[Line] = []
    for r in result.summarized:
        metrics = key_metrics(r.headline, r.key_metrics)
        table = brief_table(in_model_order(r.headline, run.models.names), metrics)
        what = [", ".join(metrics)]
        if any(f"{m}_lo" in r.headline.columns for m in metrics):
            shown = any("[" in str(v) for v in table.to_numpy().ravel())
            hidden = not shown and run.statistics.bootstrap  # dropped to fit the terminal
            what.append("intervals: -v, summary.csv" if hidden else interval_label(run))
        if r.data_label:
            what.append(r.data_label.split(";")[0].split("(")[0].strip())
        lines.append(Line(f"vlmbench: {r.name}: {'; '.join(what)}", sep="="))
        lines.append(Line(markdown_table(table)))
        lines.append(Line(counts_line(r.outcomes, r.comparisons)))
        lines += usage_lines(r)
    files = {r.name: list(r.files) for r in result.evaluations}
    if files:
        lines.append(Line(folders_line(files, start)))
    return lines


def verbose_tables(result: RunResult, run: RunSettings) -> list[Line]:
    """Per evaluation: the full headline table with its intervals, counts, usage and the files
    written; then the engine statistics and (`--power`) the sample sizes."""
    import pandas as pd

    from support.statistics.pairing import power_table

    lines: list[Line] = []
    for r in result.summarized:
        metrics = interval_metrics(r.headline)
        label = r.data_label
        heading = interval_label(run) if metrics else "no intervals"
        lines.append(
            Line(f"vlmbench: {r.name} ({heading}){f'; {label}' if label else ''}", sep="=")
        )
        ordered = in_model_order(r.headline, run.models.names)
        lines.append(Line(markdown_table(with_intervals(ordered, metrics))))
        lines.append(Line(counts_line(r.outcomes, r.comparisons)))
        lines += usage_lines(r)
        lines += [Line(f"wrote {path}") for path in r.files[:MAX_LISTED_FILES]]
        if len(r.files) > MAX_LISTED_FILES:
            lines.append(Line(f"... and {len(r.files) - MAX_LISTED_FILES} more files"))
    rows = [
        {"process": p, **{k: v for k, v in s.items() if k not in MANIFEST_ONLY_STATS}}
        for p, stats in sorted(result.engine_stats.items())
        for s in stats
    ]
    if rows:
        lines.append(Line("vlmbench: engine (per process and model)", sep="-"))
        lines.append(Line(markdown_table(pd.DataFrame(rows))))
    if not run.statistics.power:
        return lines
    delta, halfwidth = run.statistics.power_delta, run.statistics.target_halfwidth
    for r in result.evaluations:
        if r.comparisons is None:
            continue
        sizes = power_table(r.comparisons, delta, halfwidth)
        lines.append(Line(f"vlmbench: {r.name} power and sample size (--power)", sep="-"))
        if sizes.empty:
            lines.append(Line("no paired comparison with a bootstrap interval to size"))
            continue
        lines.append(
            Line(
                f"clusters (and pairs) needed to detect a difference of {delta:g} at 80% power "
                f"(two-sided alpha 0.05), and for a 95% interval of half-width {halfwidth:g}; "
                "normal approximation from the paired bootstrap's standard error"
            )
        )
        lines.append(Line(markdown_table(sizes)))
    return lines


def usage_lines(r: EvaluationResult) -> list[Line]:
    """Tokens and cost per model, when the models report tokens (API models do)."""
    if r.usage is None or not (r.usage["input_tokens"] > 0).any():
        return []
    return [
        Line("usage and cost per model (USD; cached answers included):"),
        Line(markdown_table(r.usage)),
    ]


def partial_lines(result: RunResult) -> list[str]:
    """What the run says of tables that are not complete: once when every evaluation's is the
    same, else per evaluation."""
    partial = {r.name: r.completion.partial_line() for r in result.evaluations}
    if len(set(partial.values())) == 1:  # every evaluation's the same: said once, unnamed
        partial = {"": next(iter(partial.values()))}
    return [
        f"vlmbench: {f'{name}: ' if name else ''}{line}; the result files say so (report.md, "
        "manifest.json completion)"
        for name, line in partial.items()
        if line is not None
    ]


def failure_line(r: EvaluationResult, run: RunSettings) -> str:
    """What broke an evaluation's summary, and where its outcomes are kept: an input's fault (an
    OptionError: a file an option names) or a bug of the suite."""
    raw = folder_of(run.output.results_dir, r.name, run.output.run_id) / RAW
    if r.failed_input is not None:
        return (
            f"vlmbench: {r.name}: its summary could not use an input: {r.failed_input}; the "
            f"outcomes are kept in {raw}. Fix that file (or pass another) and run again."
        )
    return (
        f"vlmbench: {r.name}: its summary failed ({r.failure}); the outcomes are kept in {raw}. "
        "This is a bug of the suite: please report it."
    )
