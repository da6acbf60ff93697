"""The pytest-html report (reports.html): statuses in the results table, evaluations in run order
with a contents list, numbers as report.md writes them, pictures inlined within a budget.

End to end through pytester subprocess runs of the real suite on the synthetic data; the page is
read back the way pytest-html 4 stores it (rows as JSON in the `data-jsonblob` attribute).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from reports.html import html_table
from support.statistics.pairing import p_text

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def run(run_suite, synthetic_cholecseg8k: Path, tmp_path: Path):
    """run(*args, extra=(), select=...) -> (RunResult, results folder, report.html path):
    pointing's quick gallbladder cases with oracle and chance (chance answers some wrong)."""

    def _run(*args: str, extra: tuple[str, ...] = (), select: str = "gallbladder"):
        page = tmp_path / "html" / "report.html"
        result, results = run_suite(
            "pointing",
            *extra,
            f"--cholecseg8k={synthetic_cholecseg8k}",
            "--model=oracle,chance",
            "-m",
            "quick",
            "-k",
            select,
            f"--html={page}",
            *args,
        )
        assert result.ret == 0, result.stdout.str()[-3000:]
        return result, results, page

    return _run


def rows_of(page: Path) -> dict[str, dict]:
    """nodeid -> the row pytest-html stores (result cells, extras) for the call phase."""
    text = page.read_text(encoding="utf-8")
    blob = re.search(r'data-jsonblob="(.*?)"></div>', text, re.S)
    assert blob, "no data-jsonblob in the page"
    tests = json.loads(html.unescape(blob.group(1)))["tests"]
    return {nodeid: found[-1] for nodeid, found in tests.items()}


def cell(row: dict, column: str) -> str | None:
    for c in row["resultsTableRow"]:
        m = re.match(rf'<td class="col-{column}\b[^"]*">(.*?)</td>', c)
        if m:
            return html.unescape(m.group(1))
    return None


def statuses(results: Path) -> dict[str, str]:
    """case id -> status, from raw_results.jsonl."""
    lines = (results / "pointing" / "r1" / "raw_results.jsonl").read_text().splitlines()
    return {d["case_id"]: d["status"] for d in map(json.loads, lines)}


def first_table(text: str) -> list[list[str]]:
    """The cells' text of the first <table> in `text`, row by row (header row first)."""
    table = re.search(r"<table.*?</table>", text, re.S)
    assert table, "no table"
    rows = re.findall(r"<tr.*?</tr>", table.group(0), re.S)
    return [
        [html.unescape(c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)]
        for r in rows
    ]


def pictures(rows: dict[str, dict]) -> list[str]:
    """Every case picture's src, in row order."""
    found, img = [], re.compile(r'<img class="vlmbench-picture"[^>]*src="([^"]+)"')
    for row in rows.values():
        for extra in row["extras"]:
            if extra["format_type"] == "image":  # pytest-html's own viewer (the old report)
                found.append(extra["content"])
            else:
                found += img.findall(extra["content"])
    return [html.unescape(src) for src in found]


@pytest.mark.slow
def test_a_wrong_answer_shows_as_wrong_in_the_results_table(run):
    """All rows are 'Passed' to pytest (a wrong answer is a measurement); the Status column says
    what the model did, it sorts, and the summary offers a filter per status."""
    _, results, page = run("--self-contained-html")
    truth = statuses(results)
    assert Counter(truth.values())["wrong"] > 0  # chance gets some wrong: the test means something
    rows = rows_of(page)
    assert len(rows) == len(truth)
    for nodeid, row in rows.items():
        case_id = nodeid.split("[", 1)[1].rstrip("]")
        assert cell(row, "result") == "Passed"
        assert cell(row, "status") == truth[case_id], nodeid
        assert row["status"] == truth[case_id]  # what pytest-html sorts on
    text = page.read_text(encoding="utf-8")
    assert '<th class="sortable" data-column-type="status">Status</th>' in text
    wrong = Counter(truth.values())["wrong"]
    assert re.search(rf"vlmbench-hide-wrong', !this.checked\)\"> {wrong} wrong</label>", text)
    assert "body.vlmbench-hide-wrong #results-table tbody:has(td.col-status.vlmbench-wrong)" in text


@pytest.mark.slow
def test_summaries_in_run_order_with_contents_and_report_md_numbers(run):
    """pointing runs before nyu_distance (the order on the command line), so its summary comes
    first, though alphabetically it is second; a contents list links both; the comparison
    table's p-values are report.md's (4 decimals or <0.0001), never 1.000000e+00."""
    nyu = str(REPO / "evals" / "nyu_distance")
    _, results, page = run("--self-contained-html", extra=(nyu,), select="gallbladder or img0000")
    text = page.read_text(encoding="utf-8")
    heads = re.findall(r'<h2 id="(vlmbench-[\w-]+)">vlmbench: (\w+)', text)
    assert [name for _, name in heads] == ["pointing", "nyu_distance"]
    contents = re.search(r'<div class="vlmbench-contents">(.*?)</div>', text, re.S)
    assert contents, "no contents list"
    links = re.findall(r'<a href="#([\w-]+)">(\w+)</a>', contents.group(1))
    assert links == [(a, name) for a, name in heads]
    assert text.index("vlmbench-contents") < text.index('class="run-count"')  # at the top
    pointing = text[text.index('id="vlmbench-pointing"') : text.index('id="vlmbench-nyu')]
    assert "Paired comparisons" in pointing
    assert not re.search(r"\d\.\d+e[+-]\d\d", pointing)  # no scientific notation
    compared = pd.read_csv(results / "pointing" / "r1" / "comparisons.csv")
    header, *body = first_table(pointing[pointing.index("Paired comparisons") :])
    assert [row[header.index("p")] for row in body] == [p_text(p) for p in compared["p_value"]]
    assert header[header.index("b_value") + 1] == "diff [95% CI]"
    # a section says when its data is the synthetic sample (nyu_distance runs on its default
    # data here; pointing is given --cholecseg8k, so it is not labelled), above its numbers
    nyu_section = text[text.index('id="vlmbench-nyu') :]
    labelled = r'^[^<]*</h2>\s*<p class="vlmbench-data"><b>Data: synthetic sample'
    assert re.search(labelled, nyu_section)
    assert "vlmbench-data" not in pointing


@pytest.mark.slow
def test_pictures_past_the_inline_budget_are_linked_files(run):
    """With --self-contained-html the pictures are inlined up to --html-inline-mb; the rest are
    files of the run folder's pictures/ (no assets folder beside the page), loaded lazily, and
    the summary says where they are."""
    _, results, page = run("--self-contained-html", "--html-inline-mb=0.1")
    rows = rows_of(page)
    found = pictures(rows)
    inline = [s for s in found if s.startswith("data:image/jpeg;base64,")]
    linked = [s for s in found if not s.startswith("data:")]
    assert len(found) == len(rows)  # one picture per pointing case
    assert inline and linked and len(inline) + len(linked) == len(found)
    assert sum(len(s.split(",", 1)[1]) for s in inline) <= 100_000  # base64 bytes in the page
    (folder,) = (results / "pointing").iterdir()
    for src in linked:
        assert (page.parent / src).resolve().parent == folder.resolve() / "pictures", src
    assert not (page.parent / "report_assets").exists()  # one page and the run folders
    extras = [e["content"] for row in rows.values() for e in row["extras"]]
    assert sum(e.count('loading="lazy"') for e in extras) == len(found)
    text = page.read_text(encoding="utf-8")
    # the page counts the files it links (a picture two cases show, one image asked of two
    # models, is one file), and the cases showing them when more
    files = {(page.parent / src).resolve() for src in linked}
    note = re.search(r"Case pictures: [^<]*", text).group(0)
    assert (
        f"{len(files)} file{'s' if len(files) != 1 else ''} in the pictures/ folders of the runs"
        in note
    )
    assert (f"shown by {len(linked)} cases" in note) == (len(linked) != len(files))


@pytest.mark.slow
def test_a_report_that_is_not_self_contained_links_every_picture(run):
    _, _, page = run()
    rows = rows_of(page)
    found = pictures(rows)
    assert found and all(s.startswith("report_assets/") for s in found)
    extras = [e["content"] for row in rows.values() for e in row["extras"]]
    assert sum(e.count('loading="lazy"') for e in extras) == len(found)
    assert all((page.parent / s).is_file() for s in found)


@pytest.mark.slow
def test_pointing_picture_is_large_with_a_visible_outline(run):
    """The picture is 640 px wide (the 768 px canvas scaled; a click shows it at full size in
    the page) and the organ's outline is several pixels wide after the scaling."""
    _, _, page = run("--self-contained-html")
    src = next(s for s in pictures(rows_of(page)) if s.startswith("data:"))
    image = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))).convert("RGB")
    assert image.width >= 640
    rgb = np.asarray(image).astype(int)
    green = (rgb[..., 1] > 200) & (rgb[..., 0] < 90) & (rgb[..., 2] < 90)
    rows_with_green = green.any(axis=1)
    # a 1 px outline has about one green pixel where it crosses a row; 5 px, about 5
    per_row = green.sum(axis=1)[rows_with_green]
    assert np.median(per_row) >= 4


def test_html_table_formats_like_report_md():
    df = pd.DataFrame({"model": ["a"], "n": [12.0], "rate": [math.nan], "p": ["<0.0001"]})
    table = html_table(df)
    assert "<td>12</td>" in table and "<td>—</td>" in table and "&lt;0.0001" in table
    assert "NaN" not in table


@pytest.mark.slow
def test_inline_mb_must_be_a_size(run_suite):
    result, _ = run_suite("pointing", "--html-inline-mb=-1", "--collect-only")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--html-inline-mb: -1.0 is not a size in MB*"])


@pytest.mark.parametrize(
    ("fmt", "mime", "ext"), [("JPEG", "image/jpeg", "jpg"), ("PNG", "image/png", "png")]
)
def test_a_picture_is_labelled_as_what_its_bytes_are(fmt, mime, ext):
    """A render's bytes keep their type in the page: a PNG from an outside evaluation is not
    sent as image/jpeg (the five built-in renders make JPEG, support.reporting.kit.picture_jpeg)."""
    from fixtures.case_extras import picture_extra
    from reports.html import PICTURE_KEY
    from support.images import encode_image

    data = encode_image(Image.new("RGB", (8, 8), "red"), fmt)
    extra = picture_extra(data, "case-1-m")
    assert (extra["mime_type"], extra["extension"], extra[PICTURE_KEY]) == (mime, ext, True)
    assert base64.b64decode(extra["content"]) == data and extra["name"] == "case-1-m"


def test_every_case_picture_is_one_size_and_quality():
    """support.reporting.kit fits a picture's image into PICTURE_PX a side and encodes it at one
    JPEG quality: a 1280 x 960 frame comes back 640 x 480, as JPEG."""
    from support.reporting.kit import PICTURE_PX, fit_picture, picture_jpeg

    image = fit_picture(Image.new("RGB", (2 * PICTURE_PX, 3 * PICTURE_PX // 2), "white"))
    with Image.open(io.BytesIO(picture_jpeg(image))) as shown:
        assert (shown.format, shown.size) == ("JPEG", (PICTURE_PX, 3 * PICTURE_PX // 4))


PAYLOAD = "<img src=x onerror=document.title='XSS'>"


def test_a_test_id_from_data_is_text_in_its_cell(tmp_path: Path) -> None:
    """pytest-html 4 writes `<td class="col-testId">{test_id}</td>` unescaped; the row hook
    escapes it (a model name, a case id from a file name), and leaves the other cells be."""
    from types import SimpleNamespace

    from reports.html import HtmlCases

    nodeid = (
        f"evals/surgvqa/test_surgvqa.py::test_surgvqa[vqa-{PAYLOAD}-openai-compatible:{PAYLOAD}]"
    )
    cells = [  # as pytest_html.basereport.BaseReport._process_report makes them
        '<td class="col-result">Passed</td>',
        f'<td class="col-testId">{nodeid}::setup</td>',
        '<td class="col-duration">5 ms</td>',
        '<td class="col-links"></td>',
    ]
    before = list(cells)
    HtmlCases(tmp_path / "report.html", True, 0).pytest_html_results_table_row(
        SimpleNamespace(nodeid=nodeid, when="setup"), cells
    )
    assert cell({"resultsTableRow": cells}, "testId") == f"{nodeid}::setup"  # the same text
    assert "<img" not in cells[2] and html.escape(nodeid) in cells[2]
    assert cells[1].startswith('<td class="col-status')  # the Status column, added
    assert [cells[0], *cells[3:]] == [before[0], *before[2:]]


def test_report_md_shows_markup_from_data_as_text(tmp_path: Path) -> None:
    """report.md (support.reporting.kit.Report) escapes a `<` that could open a tag or an autolink
    and an `&` that starts a reference, wherever they come from; comparisons like `p < 0.05` and
    `<0.0001` stay as they are."""
    from support.reporting.kit import Report
    from support.reporting.tables import markdown_table

    report = Report()
    table = pd.DataFrame({"model": [PAYLOAD, "a&amp;b"], "p": ["<0.0001", "0.5"]})
    report.add(f"# t\n\n{markdown_table(table)}\n- **{PAYLOAD} / zero_shot**: p < 0.05\n")
    path = report.write(tmp_path / "report.md", "partial: <script>x</script>", "<https://e.x>")
    text = path.read_text(encoding="utf-8")
    for raw in ("<img", "<script", "</script", "<https"):
        assert raw not in text
    assert "&lt;img src=x onerror=document.title='XSS'>" in text and "a&amp;amp;b" in text
    assert "| <0.0001 " in text and "p < 0.05" in text


def test_the_assets_count_is_the_files_the_page_links(tmp_path: Path) -> None:
    """Cases showing the same picture (one image asked of two models) link one file: the note
    counts the files (what the folder holds) and says how many cases show them."""
    from reports.html import PICTURE_KEY, HtmlCases

    cases = HtmlCases(tmp_path / "report.html", False, 0)
    red, blue = (
        base64.b64encode(encode_jpeg(Image.new("RGB", (8, 8), c))).decode() for c in ("red", "blue")
    )
    for content in (red, red, blue):  # the red picture shown by two cases
        cases.placed({"content": content, "name": "case", PICTURE_KEY: True})
    files = list((tmp_path / "report_assets").iterdir())
    assert len(files) == 2 and cases.linked == 3
    note = cases.pictures_note()
    assert "2 files in report_assets/ beside this report" in note
    assert "shown by 3 cases" in note
    one = HtmlCases(tmp_path / "one" / "report.html", False, 0)
    one.placed({"content": red, "name": "case", PICTURE_KEY: True})
    assert (
        "1 file in report_assets/" in one.pictures_note() and "shown by" not in one.pictures_note()
    )


def test_metric_tables_are_dark_text_of_normal_size() -> None:
    """pytest-html sets its page's text to 12 px light grey (#999); the summary's tables, its
    contents and notes set their own: dark and at least 13 px."""
    from reports.html import STYLE

    rule = re.search(r"table\.vlmbench \{([^}]*)\}", STYLE)
    assert rule, STYLE
    color = re.search(r"color: #([0-9a-f]{6})", rule.group(1)).group(1)
    assert max(int(color[i : i + 2], 16) for i in (0, 2, 4)) <= 0x40  # dark
    assert int(re.search(r"font-size: (\d+)px", rule.group(1)).group(1)) >= 13
    notes = re.search(r"\.vlmbench-contents, [^{]*\{([^}]*)\}", STYLE)
    assert notes and "color: #1a1a1a" in notes.group(1)


def test_a_summary_lists_models_in_the_command_lines_order() -> None:
    """The headline's rows (sorted by name in summary.csv) in `--model` order on the page."""
    from reports.html import evaluation_section
    from reports.result import EvaluationResult
    from support.settings import ModelSettings, RunSettings

    head = pd.DataFrame(
        {"model": ["alpha", "beta", "zeta"], "n": [3, 3, 3], "f1": [0.5, 0.6, 0.7],
         "f1_lo": [0.4, 0.5, 0.6], "f1_hi": [0.6, 0.7, 0.8]}
    )  # fmt: skip
    result = EvaluationResult("e", (), headline=head)
    page = "".join(
        evaluation_section(
            result, RunSettings(models=ModelSettings(names=("zeta", "alpha", "beta")))
        )
    )
    cells = re.findall(r"<td>(alpha|beta|zeta)</td>", page)
    assert cells == ["zeta", "alpha", "beta"]


def encode_jpeg(image: Image.Image) -> bytes:
    from support.images import encode_image

    return encode_image(image, "JPEG")
