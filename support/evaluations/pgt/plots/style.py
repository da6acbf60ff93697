"""Shared look of the PGT figures (the source's plot_config.py): colors, ACL sizes, fonts, names,
and how a figure is saved or skipped.

Every PGT plot imports its constants from here so the figures of one paper agree. Sizes are in
inches (ACL: 6.3 in for a figure spanning both columns, 3.0 in for one column); font sizes in
points. Figures are saved at their exact size (no bbox tightening): a PDF is as wide as the ACL
column or page it is meant for.
"""

from __future__ import annotations

import itertools
import logging
import shutil
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

from support.storage.files import atomic_write

log = logging.getLogger("support.evaluations.pgt.plots")

# Colors (colorblind-friendly): one per known phrase, then a fallback palette for added ones
BASELINE_COLOR = "#2A9D8F"  # teal
COT_COLOR = "#E76F51"  # coral
S2_COLOR = "#7F4CA5"  # purple
PHRASE_COLORS = {"baseline": BASELINE_COLOR, "cot": COT_COLOR, "s2": S2_COLOR}
# Okabe-Ito (minus black and the colors too close to the three above), then tab10's extras
FALLBACK_COLORS = (
    "#0072B2",
    "#E69F00",
    "#56B4E9",
    "#009E73",
    "#F0E442",
    "#CC79A7",
    "#8C564B",
    "#7F7F7F",
    "#BCBD22",
    "#17BECF",
)

# ACL figure dimensions (inches) and resolution
ACL_FULL_WIDTH = 6.3
ACL_COLUMN_WIDTH = 3.0
PUBLICATION_DPI = 300  # the PDFs (their raster parts)
PREVIEW_DPI = 150  # the PNGs shown in the HTML report

# Font sizes (points)
TITLE_FONT_SIZE = 8
LEGEND_FONT_SIZE = 8
AXIS_LABEL_FONT_SIZE = 8
TICK_LABEL_FONT_SIZE = 7
ANNOTATION_FONT_SIZE = 6

# Bars and grid
BAR_WIDTH = 0.25
BAR_ALPHA = 0.85
BAR_EDGE_WIDTH = 0.5
GRID_ALPHA = 0.3
GRID_COLOR = "gray"
GRID_LINESTYLE = "--"
HATCHES = ("", "////", "....", "xxxx", "\\\\\\\\", "++++", "oo")  # variants of one phrase

# Display names; anything unknown shows under its raw name
MODEL_NAMES = {"qwen25-vl-7b": "Qwen", "llava-onevision-7b": "LLaVa", "llama32-vision-11b": "Llama"}
DATASET_NAMES = {
    "d3": "D3",
    "d3-2k": "D3-2k",
    "df40": "DF40",
    "df40-2k": "DF40-2k",
    "genimage": "GenImage",
    "genimage-2k": "GenImage-2k",
}
METHOD_NAMES = {"baseline": "Baseline", "cot": "CoT", "s2": "S2"}
# what a method's display name says (method_name), above the legends that list methods
METHOD_LEGEND_TITLE = "phrase (phrase mode, n = responses voted)"
# The source's phrase modes, in its order; prefill is the default (left out of method keys)
MODES = ("prefill", "prefill-pseudo-system", "prefill-pseudo-user", "prompt", "instruct")
DEFAULT_MODE = "prefill"

_TEX_SPECIALS = {c: "\\" + c for c in "&%$#_{}"}


def model_name(model: str) -> str:
    """Display name of a model ('qwen25-vl-7b' -> 'Qwen'); the raw name when unknown."""
    return MODEL_NAMES.get(model, model)


def dataset_name(dataset: str) -> str:
    """Display name of a dataset ('df40' -> 'DF40'); the raw name when unknown."""
    return DATASET_NAMES.get(dataset, dataset)


def method_name(phrase: str, mode: str | None = None, n: int = 1) -> str:
    """Display name of a method, its phrase mode always named (the default, prefill, too: a
    bare 'CoT' would hide it): 'Baseline', 'CoT (prefill)', 'CoT (prompt)', 'S2 (prefill,
    n=5)', 'S2 (instruct, n=5)'. Baseline has no phrase, so no mode (None)."""
    extras = [mode] if isinstance(mode, str) else []  # None/NaN: no phrase mode
    extras += [f"n={n}"] if n > 1 else []
    base = METHOD_NAMES.get(phrase, phrase)
    return f"{base} ({', '.join(extras)})" if extras else base


def ordered(names: Iterable[str], known: Iterable[str]) -> list[str]:
    """The distinct names: those in `known` in its order first, then the others sorted."""
    names, known = set(names), list(dict.fromkeys(known))
    return [k for k in known if k in names] + sorted(names - set(known))


def model_order(names: Iterable[str], order: Iterable[str] = ()) -> list[str]:
    """The distinct models: those in `order` first (the run's `--model` order), then the known
    models in MODEL_NAMES order, then the others sorted."""
    return ordered(names, [*order, *MODEL_NAMES])


def method_styles(methods: Iterable[str]) -> dict[str, dict]:
    """Bar style (Axes.bar / Patch keywords) per method key: the phrase's color (a fallback color
    per added phrase) and a hatch per variant (the key's mode and n part), the same for every
    phrase, in the order first seen, plain for the first: 'cot' and 's2' plain, 'cot/prompt' and
    's2/prompt' both hatched '////'."""
    colors, spare, variants, styles = dict(PHRASE_COLORS), itertools.cycle(FALLBACK_COLORS), {}, {}
    for m in methods:
        phrase, _, variant = m.partition("/")  # method keys: phrase[/mode][/n=k]
        if phrase not in colors:
            colors[phrase] = next(spare)
        k = variants.setdefault(variant, len(variants))
        styles[m] = {
            "facecolor": colors[phrase],
            "hatch": HATCHES[k % len(HATCHES)] or None,
            "alpha": BAR_ALPHA,
            "edgecolor": "black",
            "linewidth": BAR_EDGE_WIDTH,
        }
    return styles


def model_colors(models: Iterable[str]) -> dict[str, str]:
    """A color per model, from the fallback palette in the order given (the phrase colors are the
    methods')."""
    return dict(zip(models, itertools.cycle(FALLBACK_COLORS), strict=False))


def legend_columns(labels: list[str], width: float, fontsize: float = LEGEND_FONT_SIZE) -> int:
    """How many legend entries fit side by side in `width` inches: each takes about its handle
    and padding (0.45 in) plus 0.55 em per character of the longest label."""
    entry = 0.45 + 0.55 * fontsize / 72 * max(map(len, labels), default=1)
    return max(1, min(len(labels), int(width // entry)))


def usetex_available() -> bool:
    """Whether a LaTeX install is on PATH (matplotlib's usetex needs `latex`)."""
    return shutil.which("latex") is not None


def tex_safe(text: str) -> str:
    """`text` with LaTeX's special characters escaped when usetex is on (raw names like 'my_run'
    would otherwise break the LaTeX run); unchanged otherwise."""
    if not matplotlib.rcParams["text.usetex"]:
        return text
    return "".join(_TEX_SPECIALS.get(c, c) for c in text)


def publication_rc(usetex: bool | None = None) -> dict:
    """rcParams of the publication style: LaTeX with Computer Modern when LaTeX is installed
    (or `usetex` says so), else serif text with Computer Modern math (mathtext 'cm')."""
    usetex = usetex_available() if usetex is None else usetex
    rc = {
        "font.family": "serif",
        "mathtext.fontset": "cm",
        "font.size": TICK_LABEL_FONT_SIZE,
        "axes.titlesize": TITLE_FONT_SIZE,
        "axes.labelsize": AXIS_LABEL_FONT_SIZE,
        "xtick.labelsize": TICK_LABEL_FONT_SIZE,
        "ytick.labelsize": TICK_LABEL_FONT_SIZE,
        "legend.fontsize": LEGEND_FONT_SIZE,
        "axes.linewidth": 0.6,
        "hatch.linewidth": 0.4,
        "pdf.fonttype": 42,  # TrueType in the PDF: the fonts stay text (ACL's checker wants them)
        "savefig.dpi": PUBLICATION_DPI,
    }
    if usetex:
        rc |= {"text.usetex": True, "font.serif": ["Computer Modern Roman"]}
    else:
        rc |= {"text.usetex": False, "font.serif": ["CMU Serif", "Computer Modern", "DejaVu Serif"]}
    return rc


@contextmanager
def publication_style(usetex: bool | None = None) -> Iterator[None]:
    """Context in which figures are built and saved in the publication style; restores the
    previous rcParams on exit. Never needs LaTeX: without it, mathtext stands in."""
    with matplotlib.rc_context(publication_rc(usetex)):
        yield


class NotEnoughData(Exception):
    """The data cannot make this figure; the message says why."""


class PlotSkipped(UserWarning):
    """Warning category of a figure skipped for lack of data."""


def skip(figure: str, reason: str) -> list[Path]:
    """Log and warn that `figure` was not drawn, and why; returns no paths."""
    message = f"{figure} skipped: {reason}"
    log.warning(message)
    warnings.warn(message, PlotSkipped, stacklevel=3)
    return []


def save_figure(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """`stem`.pdf (PUBLICATION_DPI) and `stem`.png (PREVIEW_DPI, for the HTML report) in out_dir,
    both at the figure's exact size, each written atomically
    (support.storage.files.atomic_write)."""
    out_dir = Path(out_dir)
    paths = [out_dir / f"{stem}.pdf", out_dir / f"{stem}.png"]
    for path, dpi in zip(paths, (PUBLICATION_DPI, PREVIEW_DPI), strict=True):
        fmt = path.suffix.lstrip(".")
        atomic_write(path, lambda f, fmt=fmt, dpi=dpi: fig.savefig(f, format=fmt, dpi=dpi))
    return paths
