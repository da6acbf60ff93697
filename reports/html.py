"""pytest-html on the controller: a status column, the case pictures, each evaluation's summary.

- **Status column.** pytest-html shows a wrong answer as "Passed" (a wrong answer is a
  measurement, not a failed test); the "Status" column says correct / wrong / unparsable / error
  (the worst of an item's outcomes, with counts when it has several). It sorts like pytest-html's
  own columns, and the summary has a checkbox per status that hides rows (CSS only, so it
  survives pytest-html redrawing its table).
- **Pictures.** fixtures.case_extras marks each case's picture (`PICTURE_KEY`); here it becomes a
  lazily loaded `<img>` in the case's details, shown up to `PICTURE_WIDTH_PX` wide (a click shows
  it at full size). With --self-contained-html a picture is inlined while the run's inlined
  picture bytes stay within --html-inline-mb, and the rest are files of its run folder's
  `pictures/` (the page and the run folders are all there is); every picture of a report that
  is not self-contained goes to `<report name>_assets/` beside the report (files named by content:
  cases showing the same picture, e.g. one image asked of two models, share one file, and the
  page counts the files, not the links).
- **Where each picture is.** At session finish each evaluation's run folder gets `pictures.json`:
  the report's path and, per outcome case id, its picture's file (paths relative to the run
  folder). A picture the report inlined is also written into the run folder's `pictures/` (named
  by content), so the comparison page shows every picture whatever --self-contained-html did. Its
  format has one owner, support.storage.run_folder (`write_pictures` here, `read_pictures` for
  `vlmbench-compare A B --html`, which links the same files); a file that cannot be written is a
  line of the terminal summary, never a failed run.
- **Summary.** A contents list first (each evaluation with its counts by status), then each
  evaluation in run order (the order its first outcome arrived): its headline table, paired
  comparisons and plots, numbers formatted as in report.md, models in `--model` order, in
  dark text of the page's normal size (pytest-html's own grey 12 px is for its results table).
- **Data is text.** A test id carries a model name and a case id (from data file names), and
  pytest-html 4 puts it into its row cell unescaped (`<td class="col-testId">{test_id}</td>`),
  which its page then parses as HTML: `escaped_test_id` escapes that cell in the row hook. Every
  cell and extra the suite adds escapes what it shows (fixtures.case_extras: answers, errors).
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from reports.plugin import OUTCOMES_ATTR, REPORT_PLUGIN_KEY
from reports.terminal import interval_label
from support.storage.run_folder import (
    PICTURES,
    folder_of,
    write_picture_files,
    write_pictures,
)

if TYPE_CHECKING:
    import pandas as pd

    from reports.result import EvaluationResult
    from support.settings import RunSettings

PICTURE_KEY = "vlmbench_picture"  # key of a pytest-html image extra that is a case's picture
STATUSES = ("error", "unparsable", "wrong", "correct")  # worst first
NO_STATUS = "none"  # an item without outcomes (skipped, or broken before its case ran)
DEFAULT_INLINE_MB = 8.0  # MB (1e6 bytes) of base64 pictures a self-contained report inlines
PICTURE_WIDTH_PX = 640  # how wide a picture shows in a case's details (CSS px); a click: full
HTML_KEY = pytest.StashKey["HtmlCases"]()
TEST_ID_CELL = '<td class="col-testId">'  # how pytest-html 4 opens the Test cell of a row
ZOOM = "vlmbenchZoom(this)"  # a picture's onclick: full size and back (defined in the summary)

HIDING = "\n".join(  # a status's checkbox unticked: the body gets vlmbench-hide-<status>
    f"body.vlmbench-hide-{s} #results-table tbody:has(td.col-status.vlmbench-{s}) {{display: none}}"
    for s in (*STATUSES, NO_STATUS)
)
STYLE = f"""<style>
table.vlmbench {{color: #1a1a1a; font-size: 14px; border-collapse: collapse; margin: 6px 0 14px}}
table.vlmbench td, table.vlmbench th {{padding: 3px 10px; text-align: right; white-space: nowrap;
  border-bottom: 1px solid #ddd}}
table.vlmbench th {{background: #f0f0f0; font-weight: bold; border-bottom: 2px solid #bbb}}
table.vlmbench tbody tr:nth-child(even) {{background: #fafafa}}
.vlmbench-contents, .vlmbench-filter, .vlmbench-data, .vlmbench-note {{color: #1a1a1a;
  font-size: 14px}}
.vlmbench-contents a {{color: #0b5cad}}
td.col-status {{font-weight: bold}}
td.col-status.vlmbench-correct {{color: #2a7d2a}}
td.col-status.vlmbench-wrong {{color: #c25e00}}
td.col-status.vlmbench-unparsable {{color: #8a2be2}}
td.col-status.vlmbench-error {{color: #d00}}
td.col-status.vlmbench-none {{color: #888; font-weight: normal}}
img.vlmbench-picture {{max-width: min({PICTURE_WIDTH_PX}px, 100%); height: auto; margin: 4px;
  cursor: zoom-in; vertical-align: top}}
img.vlmbench-picture.vlmbench-full {{max-width: none; cursor: zoom-out}}
.vlmbench-filter label {{margin-right: 12px}}
{HIDING}
</style>"""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vlmbench")
    group.addoption(
        "--html-inline-mb",
        type=float,
        default=DEFAULT_INLINE_MB,
        metavar="MB",
        help="with --html --self-contained-html: inline case pictures up to this many MB of "
        "the page in all; the rest are files of their run folders' pictures/, loaded "
        f"lazily (0: link every picture) ({DEFAULT_INLINE_MB:g})",
    )


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    budget_mb = config.getoption("html_inline_mb", DEFAULT_INLINE_MB)
    if budget_mb is None or not budget_mb >= 0:  # NaN too
        raise pytest.UsageError(f"--html-inline-mb: {budget_mb} is not a size in MB (>= 0)")
    path = getattr(config.option, "htmlpath", None)
    if not path or hasattr(config, "workerinput"):  # pictures are placed on the controller
        return
    cases = HtmlCases(
        Path(os.path.expandvars(path)).expanduser().absolute(),
        bool(config.getoption("self_contained_html", False)),
        int(budget_mb * 1e6),
        lambda evaluation: run_folder_of(config, evaluation),
    )
    config.stash[HTML_KEY] = cases
    config.pluginmanager.register(cases, "vlmbench-html-cases")


def run_folder_of(config: pytest.Config, evaluation: str) -> Path | None:
    """The run folder the reporter writes `evaluation`'s files to (None: no reporter)."""
    plugin = config.stash.get(REPORT_PLUGIN_KEY, None)
    if plugin is None:
        return None
    return folder_of(plugin.run.output.results_dir, evaluation, plugin.run.output.run_id)


class HtmlCases:
    """The controller's view of the results table: each item's status, and where its pictures
    go (inline or a file) under the run's inline budget."""

    def __init__(
        self,
        report: Path,
        self_contained: bool,
        budget_bytes: int,
        run_folder: Callable[[str], Path | None] | None = None,
    ) -> None:
        self.report = report
        # an evaluation's run folder: where a self-contained report's pictures past its budget go
        self.run_folder = run_folder or (lambda _evaluation: None)
        self.beside = 0  # pictures linked to a file of a run folder's pictures/
        self.beside_files: set[Path] = set()
        self.assets = report.parent / f"{report.stem}_assets"
        self.self_contained = self_contained
        self.budget_bytes = budget_bytes  # bytes of base64 pictures a report may inline
        self.inline_bytes = 0  # bytes of base64 pictures inlined so far
        self.inlined = 0  # pictures inlined
        self.linked = 0  # pictures linked to a file of self.assets (one file may serve several)
        self.asset_files: set[str] = set()  # the distinct files of self.assets linked
        self.statuses: dict[str, Counter[str]] = {}  # nodeid -> outcome statuses counted
        # evaluation -> outcome case id -> its picture's file in the assets folder (absolute)
        self.pictures: dict[str, dict[str, Path | None]] = {}
        # evaluation -> outcome case id -> an inlined picture's (bytes, extension), written into
        # the run folder at session finish
        self.inlined_data: dict[str, dict[str, tuple[bytes, str]]] = {}
        self.index_problems: list[str] = []  # pictures.json files not written, and why

    @pytest.hookimpl(tryfirst=True)  # before pytest-html reads the report's extras
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        found = getattr(report, OUTCOMES_ATTR, None)
        if found:
            counts = self.statuses.setdefault(report.nodeid, Counter())
            counts.update(str(d.get("status")) for d in found if isinstance(d, dict))
        extras = getattr(report, "extras", None)
        if extras:
            # a picture's name is its outcome's case id; the outcomes ride on the same report
            evaluation_of = {
                str(d.get("case_id")): str(d.get("evaluation"))
                for d in found or ()
                if isinstance(d, dict)
            }
            report.extras = [
                self.placed(e, evaluation_of.get(str(e.get("name")))) if e.get(PICTURE_KEY) else e
                for e in extras
            ]

    def placed(self, extra: Mapping[str, Any], evaluation: str | None = None) -> dict[str, Any]:
        """A picture extra (base64 JPEG) as an html extra: an <img> inlined or linked. With
        `evaluation`, where it went is kept for that evaluation's pictures.json."""
        encoded = str(extra.get("content", ""))
        mime = str(extra.get("mime_type") or "image/jpeg")
        file: Path | None = None
        extension = str(extra.get("extension") or "jpg")
        if self.self_contained and self.inline_bytes + len(encoded) <= self.budget_bytes:
            self.inline_bytes += len(encoded)  # what the page grows by: base64 text
            self.inlined += 1
            src = f"data:{mime};base64,{encoded}"
            if evaluation is not None and extra.get("name") is not None:
                kept = self.inlined_data.setdefault(evaluation, {})
                kept[str(extra["name"])] = (base64.b64decode(encoded), extension)
        elif self.self_contained and (file := self.beside_run(extra, evaluation, extension)):
            src = Path(os.path.relpath(file, self.report.parent)).as_posix()
        else:
            data = base64.b64decode(encoded)
            src = self.write_asset(data, extension)
            file = self.assets / src.rpartition("/")[2]
            self.linked += 1
        if evaluation is not None and extra.get("name") is not None:
            self.pictures.setdefault(evaluation, {})[str(extra["name"])] = file
        name = html.escape(str(extra.get("name") or "picture"))
        return {
            "name": extra.get("name"),
            "format_type": "html",
            "content": f'<img class="vlmbench-picture" loading="lazy" alt="{name}" '
            f'src="{html.escape(src)}" onclick="{ZOOM}">',
            "mime_type": None,
            "extension": None,
        }

    def beside_run(
        self, extra: Mapping[str, Any], evaluation: str | None, extension: str
    ) -> Path | None:
        """A self-contained report's picture past the budget, written into its run folder's
        pictures/ (where the comparison page finds it too); None, for the assets folder, when
        the run folder is unknown or cannot be written."""
        folder = self.run_folder(evaluation) if evaluation is not None else None
        if folder is None or extra.get("name") is None:
            return None
        name = str(extra["name"])
        data = base64.b64decode(str(extra.get("content", "")))
        try:
            file = write_picture_files(folder, {name: (data, extension)})[name]
        except OSError:
            return None
        self.beside += 1
        self.beside_files.add(file)
        return file

    def write_asset(self, data: bytes, extension: str) -> str:
        """The picture's file in the assets folder (named by content), relative to the report."""
        self.assets.mkdir(parents=True, exist_ok=True)
        name = f"{hashlib.sha256(data).hexdigest()[:20]}.{extension}"
        path = self.assets / name
        if not path.is_file():
            path.write_bytes(data)
        self.asset_files.add(name)
        return f"{self.assets.name}/{name}"

    @pytest.hookimpl(trylast=True)  # after the reporter wrote the run folders
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        plugin = session.config.stash.get(REPORT_PLUGIN_KEY, None)
        if plugin is None or plugin.result is None:  # --dry-run, or no session result
            return
        for r in plugin.result.evaluations:
            folder = plugin.run.output.results_dir / r.name / plugin.run.output.run_id
            if not folder.is_dir():  # its files could not be written: nothing to index
                continue
            try:
                files = write_picture_files(folder, self.inlined_data.get(r.name, {}))
                write_pictures(folder, self.report, {**self.pictures.get(r.name, {}), **files})
            except (OSError, ValueError) as exc:  # the index is an extra: never the run's fate
                self.index_problems.append(f"{folder / PICTURES}: {exc}")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        for problem in self.index_problems:
            terminalreporter.write_line(f"vlmbench: pictures index not written: {problem}")

    def status_cell(self, nodeid: str) -> str:
        """The Status cell: the worst status of the item's outcomes (counts when several)."""
        counts = self.statuses.get(nodeid)
        if not counts:
            return f'<td class="col-status vlmbench-{NO_STATUS}">—</td>'
        worst = next((s for s in STATUSES if counts[s]), NO_STATUS)
        total = sum(counts.values())
        text = worst if total == 1 else f"{worst} ({counts[worst]} of {total})"
        return f'<td class="col-status vlmbench-{worst}">{html.escape(text)}</td>'

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_header(self, cells: list) -> None:
        cells.insert(1, '<th class="sortable" data-column-type="status">Status</th>')

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list) -> None:
        # Escaped here, in pytest-html's own hook, rather than in a patched copy of its
        # template or app.js: the hook sees each row's cells before pytest-html stores them for
        # the table and for sorting (_hydrate_data), and it survives an upgrade of pytest-html.
        cells[:] = [escaped_test_id(c) for c in cells]
        cells.insert(1, self.status_cell(report.nodeid))

    def pictures_note(self) -> str:
        """Where the pictures are, when some are not in the report itself: the files of the
        assets folder this page links (what `ls` counts there), and how many case pictures
        link to them when cases share a file."""
        parts = []
        assets = f"{self.assets.name}/ beside this report (keep the folder with it)"
        runs = "the pictures/ folders of the runs (keep them beside this report)"
        for shown, files, where in (
            (self.linked, len(self.asset_files), assets),
            (self.beside, len(self.beside_files), runs),
        ):
            if shown:
                part = f"{files} file{'s' if files != 1 else ''} in {where}"
                if shown != files:
                    part += f", shown by {shown} cases (cases with the same picture share a file)"
                parts.append(part)
        if not parts:
            return ""
        linked = "; ".join(parts)
        if not self.self_contained:
            return f'<p class="vlmbench-note">Case pictures: {html.escape(linked)}.</p>'
        return (
            f'<p class="vlmbench-note">Case pictures: {self.inlined} inlined '
            f"({self.inline_bytes / 1e6:.1f} MB, --html-inline-mb {self.budget_bytes / 1e6:g}), "
            f"{html.escape(linked)}.</p>"
        )


def escaped_test_id(cell: object) -> object:
    """pytest-html's Test cell with its text (the raw test id: model names, case ids from file
    names) HTML-escaped, so markup in it shows as text; any other cell as it is. Escaping what
    is inside the cell (not rebuilding it from the node id) keeps pytest-html's own text, e.g.
    its `::setup` suffix; should a later pytest-html escape it too, the page would show `&lt;`,
    still never markup."""
    if not (isinstance(cell, str) and cell.startswith(TEST_ID_CELL) and cell.endswith("</td>")):
        return cell
    return f"{TEST_ID_CELL}{html.escape(cell[len(TEST_ID_CELL) : -len('</td>')])}</td>"


@pytest.hookimpl(optionalhook=True)
def pytest_html_results_summary(prefix: list, summary: list, postfix: list, session) -> None:
    plugin = session.config.stash.get(REPORT_PLUGIN_KEY, None)
    cases = session.config.stash.get(HTML_KEY, None)
    prefix.append(STYLE)
    prefix.append(
        "<script>function vlmbenchZoom(img) {img.classList.toggle('vlmbench-full')}</script>"
    )
    if cases is not None:
        prefix.append(status_filter(cases.statuses.values()))
        prefix.append(cases.pictures_note())
    result = plugin.result if plugin is not None else None
    if result is None:
        return
    names = [r.name for r in result.evaluations]  # run order: as its first outcome arrived
    counts = {r.name: Counter(o.status for o in r.outcomes) for r in result.evaluations}
    prefix.append(contents(names, counts))
    for r in result.evaluations:
        postfix.extend(evaluation_section(r, plugin.run))


def anchor(name: str) -> str:
    return "vlmbench-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in name)


def contents(names: list[str], counts: Mapping[str, Counter[str]]) -> str:
    """The contents list: a link to each evaluation's section, with its outcomes by status."""
    items = []
    for name in names:
        c = counts.get(name, Counter())
        told = ", ".join(f"{c[s]} {s}" for s in reversed(STATUSES) if c[s])
        items.append(
            f'<li><a href="#{anchor(name)}">{html.escape(name)}</a>'
            f"{f': {sum(c.values())} outcomes ({told})' if c else ''}</li>"
        )
    return f'<div class="vlmbench-contents"><h3>Evaluations</h3><ul>{"".join(items)}</ul></div>'


def status_filter(found: Iterable[Counter[str]]) -> str:
    """Checkboxes that hide the rows of a status (the worst of the row's outcomes)."""
    rows = Counter(next((s for s in STATUSES if c[s]), NO_STATUS) for c in found)
    if not rows:
        return ""
    boxes = "".join(
        f'<label><input type="checkbox" checked onchange="document.body.classList.toggle('
        f"'vlmbench-hide-{s}', !this.checked)\"> {rows[s]} {s}</label>"
        for s in (*reversed(STATUSES), NO_STATUS)
        if rows[s]
    )
    return f'<p class="vlmbench-filter">Show rows whose status is: {boxes}</p>'


def evaluation_section(result: EvaluationResult, run: RunSettings) -> list[str]:
    """An evaluation's headline, comparisons and plots."""
    from support.reporting.tables import in_model_order, with_intervals
    from support.statistics.pairing import (
        shown_comparisons,  # pandas: imported at report time only
    )

    name, headline = result.name, result.headline
    if headline is None:
        return [f'<h2 id="{anchor(name)}">vlmbench: {html.escape(name)}: no summary</h2>']
    metrics = [c for c in headline.columns if f"{c}_lo" in headline.columns]
    bounded = [c for c in metrics if headline[[f"{c}_lo", f"{c}_hi"]].notna().all(axis=1).any()]
    label = f" ({interval_label(run)})" if bounded or run.statistics.bootstrap <= 0 else ""
    parts = [f'<h2 id="{anchor(name)}">vlmbench: {html.escape(name)}{html.escape(label)}</h2>']
    data = result.data_label  # e.g. the synthetic sample: said above its numbers
    if data:
        parts.append(f'<p class="vlmbench-data"><b>Data: {html.escape(data)}</b></p>')
    parts.append(html_table(with_intervals(in_model_order(headline, run.models.names), metrics)))
    compared = result.comparisons
    if compared is not None and len(compared):
        parts.append("<h3>Paired comparisons (b - a; p Holm-adjusted in p_holm)</h3>")
        parts.append(html_table(shown_comparisons(compared)))
    for path in result.files:
        if path.suffix == ".png" and path.is_file():
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            parts.append(
                f'<p><img alt="{html.escape(path.name)}" style="max-width:100%" '
                f'src="data:image/png;base64,{data}"></p>'
            )
    return parts


def html_table(df: pd.DataFrame) -> str:
    """A table as report.md writes its numbers: text as it is (intervals, p-values already
    formatted), other numbers in `g` format (tabulate's default), `—` where undefined."""
    shown = df.astype(object).map(cell_text)
    return shown.to_html(index=False, border=0, classes="vlmbench", escape=True)


def cell_text(v: object) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "—"
    if isinstance(v, float):
        return format(v, "g")
    return str(v)
