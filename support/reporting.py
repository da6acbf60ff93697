"""The reporting kit the summaries share: report.md, interval columns, figures saved atomically,
and a stock summary for evaluations whose outcomes are right or wrong and need nothing else.

- `Report`: report.md of one evaluation's run. The core owns it (`SummaryContext.report`): a
  summary's `write_outputs` adds its markdown, then the core (reports/plugin.py) puts the
  partial-results line first and the comparisons section last and writes the file once.
  Markup is escaped as it is written (`escape_markup`): model names, case ids and answers reach
  report.md in tables and lines of every summary, and a viewer would render their HTML.
- `fit_picture(image)`, `picture_jpeg(image)`: a case's HTML picture (`Evaluation.render`) at
  one size (`PICTURE_PX` on its longer side, before a caption is added) and one JPEG quality.
- `interval_columns(metrics)`: `m, m_lo, m_hi` for each metric, the layout of summary.csv.
- `save_figure(fig, path, dpi)`: a matplotlib figure written as PNG through
  support.files.atomic_write (a reader never sees half a picture), then closed.
- `BINARY`: a `Summary` (support.evaluation) of the share of correct answers per model, with a
  cluster-bootstrap interval (clusters: `Outcome.cluster`); errors are counted apart (`n_error`)
  and unparsable answers count as not correct. An evaluation's spec names it as its summary
  (`summary="support.reporting:BINARY"`, the default) and writes no summary module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from support.files import atomic_write, atomic_write_text
from support.types import Outcome

if TYPE_CHECKING:  # imported where a table or figure is made
    import pandas as pd

    from support.evaluation import SummaryContext

INTERVAL_SUFFIXES = ("", "_lo", "_hi")
PICTURE_PX = 640  # a case picture's image, longer side (px), captions added below it
PICTURE_QUALITY = 75  # its JPEG quality (a pointing picture ~29 KB)
# a `<` that could open raw HTML or an autolink in markdown (a letter, `/`, `!` or `?` follows:
# CommonMark's tag, closing tag, comment/declaration, processing instruction, `<scheme:`), and an
# `&` that would start a character reference; `p < 0.05` and `<0.0001` need no escape
_MARKUP = re.compile(r"<(?=[A-Za-z/!?])|&(?=#?\w+;)")


@dataclass
class Report:
    """report.md's markdown as a summary adds it, in order (each part ends with a newline)."""

    parts: list[str] = field(default_factory=list)

    def add(self, markdown: str) -> None:
        self.parts.append(markdown)

    def text(self) -> str:
        return "".join(self.parts)

    def write(self, path: Path, notice: str | None = None, tail: str = "") -> Path | None:
        """report.md at `path`: the `notice` in bold first (an interrupted run's partial line),
        the summary's parts, then `tail` (the comparisons section). Nothing when neither the
        summary nor the tail has anything to say."""
        body = self.text()
        if not (body or tail):
            return None
        head = f"**{notice}.**\n\n" if notice else ""
        atomic_write_text(path, escape_markup(head + body + tail))
        return path


def escape_markup(markdown: str) -> str:
    """`markdown` in which no HTML tag, autolink or character reference can start: such a `<`
    becomes `&lt;` and such an `&` `&amp;`, so a viewer shows them as the text they are. The
    suite's own report.md text writes none; data (a model name, a case id, an answer) may."""
    return _MARKUP.sub(lambda m: "&lt;" if m.group() == "<" else "&amp;", markdown)


def interval_columns(metrics: Iterable[str]) -> list[str]:
    """`[m, m_lo, m_hi, ...]`: each metric's value and its interval's bounds (summary.csv)."""
    return [f"{m}{suffix}" for m in metrics for suffix in INTERVAL_SUFFIXES]


def fit_picture(image: Any) -> Any:
    """`image` (PIL) shrunk in place to fit PICTURE_PX x PICTURE_PX, aspect kept; returned."""
    image.thumbnail((PICTURE_PX, PICTURE_PX))
    return image


def picture_jpeg(image: Any) -> bytes:
    """A case's picture (PIL, RGB) as the JPEG bytes the HTML report shows."""
    from support.types import encode_image

    return encode_image(image, "JPEG", quality=PICTURE_QUALITY)


def save_figure(fig: Any, path: Path, dpi: int = 110) -> Path:
    """`fig` (a matplotlib Figure) as a PNG at `path`, written atomically, then closed."""
    import matplotlib.pyplot as plt

    try:
        atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=dpi))
    finally:
        plt.close(fig)
    return path


class BinarySummary:
    """The stock summary: accuracy (correct / scored) per model, interval by cluster bootstrap."""

    METRICS = ("accuracy",)
    KEY_METRICS = ("accuracy",)  # the terminal's brief table (reports/terminal.py)

    def summarize(self, outcomes: Sequence[Outcome], ctx: SummaryContext) -> pd.DataFrame:
        """One row per model: n (scored), n_error, accuracy and its interval."""
        import pandas as pd

        from support.metrics import safe_ratio, summarize_groups

        groups = summarize_groups(
            outcomes,
            lambda o: [(o.model,)],
            lambda o: [int(o.status == "correct"), 1],
            lambda s: {"accuracy": safe_ratio(s[..., 0], s[..., 1])},
            ctx.n_resamples,
            ctx.seed,
        )
        rows = [g.row(["model"], self.METRICS) for g in groups]
        columns = ["model", "n", "n_error", *interval_columns(self.METRICS)]
        return pd.DataFrame(rows, columns=columns)

    def headline(self, summary: pd.DataFrame) -> pd.DataFrame:
        return summary

    def write_outputs(
        self,
        outcomes: Sequence[Outcome],
        summary: pd.DataFrame,
        out_dir: Path,
        ctx: SummaryContext,
    ) -> list[Path]:
        """report.md's part: the table with its intervals (no files of its own)."""
        from support.tables import markdown_table, with_intervals

        table = markdown_table(with_intervals(summary, self.METRICS))
        title = f"{ctx.evaluation or 'evaluation'}: accuracy per model"
        ctx.report.add(f"# {title}\n\n{table}\n")
        return []


BINARY = BinarySummary()
