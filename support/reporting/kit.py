"""The reporting kit the summaries share: report.md, interval columns, figures saved atomically,
for every summary (the stock one, support.contract.binary_summary, included).

- `Report` (support.reporting.markdown): report.md of one evaluation's run. The core owns it
  (`SummaryContext.report`): a summary's `write_outputs` adds its markdown, then the core
  (reports/evaluation_files.py) puts the partial-results line first and the comparisons section
  last and writes the file once. Markup is escaped as it is written (`escape_markup`): model
  names, case ids and answers reach report.md in tables and lines of every summary, and a viewer
  would render their HTML.
- `fit_picture(image)`, `picture_jpeg(image)`: a case's HTML picture (`Evaluation.render`) at
  one size (`PICTURE_PX` on its longer side, before a caption is added) and one JPEG quality.
- `interval_columns(metrics)`: `m, m_lo, m_hi` for each metric, the layout of summary.csv.
- `save_figure(fig, path, dpi)`: a matplotlib figure written as PNG through
  support.storage.files.atomic_write (a reader never sees half a picture), then closed.
- Models in a table or figure come in the run's order (`ModelSettings.names`, as `--model` gave
  them): support.reporting.tables.model_order, in_model_order.
- `integer_axis(axis)`, `legend_outside(fig, handles)`: a count axis with whole-number ticks,
  and a figure's legend above its axes (never over the data).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from support.reporting.markdown import Report, escape_markup
from support.storage.files import atomic_write

if TYPE_CHECKING:  # imported where a table or figure is made
    pass

__all__ = [
    "PICTURE_PX",
    "Report",  # report.md's markdown (support.reporting.markdown)
    "escape_markup",
    "fit_picture",
    "integer_axis",
    "interval_columns",
    "legend_outside",
    "picture_jpeg",
    "save_figure",
]

INTERVAL_SUFFIXES = ("", "_lo", "_hi")
PICTURE_PX = 640  # a case picture's image, longer side (px), captions added below it
PICTURE_QUALITY = 75  # its JPEG quality (a pointing picture ~29 KB)


def interval_columns(metrics: Iterable[str]) -> list[str]:
    """`[m, m_lo, m_hi, ...]`: each metric's value and its interval's bounds (summary.csv)."""
    return [f"{m}{suffix}" for m in metrics for suffix in INTERVAL_SUFFIXES]


def fit_picture(image: Any) -> Any:
    """`image` (PIL) shrunk in place to fit PICTURE_PX x PICTURE_PX, aspect kept; returned."""
    image.thumbnail((PICTURE_PX, PICTURE_PX))
    return image


def picture_jpeg(image: Any) -> bytes:
    """A case's picture (PIL, RGB) as the JPEG bytes the HTML report shows."""
    from support.images import encode_image

    return encode_image(image, "JPEG", quality=PICTURE_QUALITY)


def save_figure(fig: Any, path: Path, dpi: int = 110) -> Path:
    """`fig` (a matplotlib Figure) as a PNG at `path`, written atomically, then closed."""
    import matplotlib.pyplot as plt

    try:
        atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=dpi))
    finally:
        plt.close(fig)
    return path


def integer_axis(axis: Any) -> None:
    """Whole-number ticks on a matplotlib Axis of counts (never "2.5 tasks")."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def legend_outside(fig: Any, handles: Sequence[Any], ncols: int | None = None, **kw: Any) -> Any:
    """One legend for the whole figure, above its axes: the figure must use the constrained
    layout (`layout="constrained"`), which makes room for it. `ncols`: entries side by side
    (default: all of them, at most 4)."""
    ncols = ncols or max(1, min(len(handles), 4))
    return fig.legend(handles=handles, loc="outside upper center", ncols=ncols, frameon=False, **kw)
