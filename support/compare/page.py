"""The comparison page: `vlmbench-compare A B --html out.html` (the CLI is support.compare.runs).

One static HTML file, with no server, no network and nothing outside it but the case pictures the
runs' HTML reports already wrote (linked, never copied). From the top:

- **Sides.** What A and B are, per evaluation: the run folder, the model, and from each run's
  manifest.json (support.compare.leaderboard.read_run) the date, the `--compat` profile and the data
  fingerprint; an evaluation whose two sides differ in data or profile is marked not comparable.
- **Paired metrics.** Each evaluation's paired table, the numbers `vlmbench-compare` prints.
- **Cases.** Every pair (one item id, A's outcome and B's), flipped first. A pair is
  "A right, B wrong" when A's status is `correct` and B's is `wrong` or `unparsable`,
  "B right, A wrong" the reverse, "error" when either side is `error`, and "same" otherwise
  (FLIP_KINDS, in the page's order). Items found on one side only are counted, not listed.
  A row shows the evaluation, the item id, its group values, and per side the status, the raw
  answer (cut as the HTML report cuts it: support.reporting.shown_text), the parsed value
  (`prediction`), the parser rule that read it (`read_by`, "—" where a row has none) and the
  picture; then the target.

Pictures come from each run folder's pictures.json (reports.html writes it under --html): a file
is linked relative to the page, lazily loaded, shown once when both sides show the same file; a
picture inlined in a self-contained report has no file, and the row says so; a run without
pictures.json (no --html, or a later run without it over the same folder) shows none, and the
page says why once.

The rows travel as JSON in a `<script type="application/json">` (every `<` written `\\u003c`, so
no text closes it) and the page's script builds PAGE_ROWS rows at a time from DOM nodes and
`textContent` only, never markup from data; it removes the data element once read. Everything
else written from data (folders, models, notes, the metrics table) is HTML-escaped here.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from support.reporting.shown_text import shown as cut
from support.reporting.tables import MISSING
from support.storage.files import atomic_write_text
from support.storage.run_folder import Pictures, read_pictures
from support.types import Outcome

if TYPE_CHECKING:
    import pandas as pd

    from support.compare.leaderboard import Run, Skipped

PAGE_ROWS = 200  # rows the page's script adds at a time ("show more" adds as many again)
SHORT_CHARS = 300  # a longer text shows its start and a "more" toggle
# (code, label) in the page's order: flipped first
FLIP_KINDS = (
    ("a_right", "A right, B wrong"),
    ("b_right", "B right, A wrong"),
    ("error", "error"),
    ("same", "same"),
)
WRONG = frozenset({"wrong", "unparsable"})


def flip_kind(status_a: str, status_b: str) -> str:
    """The pair's kind (module docstring): a_right, b_right, error or same."""
    if status_a == "correct" and status_b in WRONG:
        return "a_right"
    if status_b == "correct" and status_a in WRONG:
        return "b_right"
    if "error" in (status_a, status_b):
        return "error"
    return "same"


@dataclass(frozen=True)
class Compared:
    """One evaluation compared: each side's folder and model (None: all of the run's), the
    outcomes picked, the model pairs compared ((A's model, B's model), as support.compare.runs
    pairs them), the paired table and its notes."""

    evaluation: str
    folder_a: Path
    folder_b: Path
    model_a: str | None
    model_b: str | None
    outcomes_a: tuple[Outcome, ...]
    outcomes_b: tuple[Outcome, ...]
    model_pairs: tuple[tuple[str, str], ...]
    table: pd.DataFrame
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pair:
    """One row of the page: an item's outcome in A and in B."""

    evaluation: str
    item_id: str
    kind: str  # flip_kind
    a: Outcome
    b: Outcome


def pairs_of(compared: Compared) -> tuple[list[Pair], list[str], list[str]]:
    """The evaluation's pairs (model pair by model pair, in A's row order) and the item ids
    found only in A and only in B (the items support.compare.runs counts as unmatched)."""
    pairs = []
    for model_a, model_b in compared.model_pairs:
        b_by_item = {o.item_id: o for o in compared.outcomes_b if o.model == model_b}
        for a in compared.outcomes_a:
            b = b_by_item.get(a.item_id) if a.model == model_a else None
            if b is not None:
                kind = flip_kind(a.status, b.status)
                pairs.append(Pair(compared.evaluation, a.item_id, kind, a, b))
    items_a = {o.item_id for o in compared.outcomes_a}
    items_b = {o.item_id for o in compared.outcomes_b}
    return pairs, sorted(items_a - items_b), sorted(items_b - items_a)


# --- pictures -------------------------------------------------------------------------------------


def _src(path: Path, page_dir: Path) -> str:
    """`path` as a relative URL from the page's folder (each character that is not a plain
    path character percent-encoded: no scheme, query or fragment can come from a path)."""
    rel = os.path.relpath(path.absolute(), page_dir)
    return quote(rel.replace(os.sep, "/"), safe="/")


# --- what the page shows --------------------------------------------------------------------------


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _side(o: Outcome) -> list[str]:
    """[status, raw answer, parsed value, read by, error] of one side, cut for the page."""
    return [
        o.status,
        cut(o.raw) if o.raw else "",
        cut(_json_text(o.prediction)),
        o.read_by or MISSING,
        cut(o.error or ""),
    ]


def _target(a: Outcome, b: Outcome) -> str:
    text = _json_text(a.target)
    if b.target != a.target:
        text += f"\n(B's target: {_json_text(b.target)})"
    return cut(text)


class _PictureLinks:
    """Each row's pictures: [[who, src], ...] and a note, from both sides' pictures.json."""

    def __init__(self, page_dir: Path) -> None:
        self.page_dir = page_dir
        self.indexes: dict[Path, Pictures] = {}
        self.srcs: dict[Path, str | None] = {}  # picture file -> its src (None: no such file)

    def index(self, folder: Path) -> Pictures:
        if folder not in self.indexes:
            self.indexes[folder] = read_pictures(folder)
        return self.indexes[folder]

    def src(self, path: Path) -> str | None:
        if path not in self.srcs:
            self.srcs[path] = _src(path, self.page_dir) if path.is_file() else None
        return self.srcs[path]

    def of(self, pair: Pair, compared: Compared) -> tuple[list[list[str]], str]:
        shown: dict[str, list[str]] = {}  # src -> who shows it
        notes = []
        for who, o, folder in (("A", pair.a, compared.folder_a), ("B", pair.b, compared.folder_b)):
            found = self.index(folder)
            if found.missing:
                continue  # said once, above the cases
            if o.case_id in found.inlined:
                notes.append(f"{who}: inlined in the report (no file)")
            elif o.case_id not in found.files:
                notes.append(f"{who}: no picture")
            elif (src := self.src(found.files[o.case_id])) is None:
                notes.append(f"{who}: picture file missing")
            else:
                shown.setdefault(src, []).append(who)
        return [[" and ".join(w), s] for s, w in shown.items()], "; ".join(notes)


def page_data(compared: Sequence[Compared], page_dir: Path) -> tuple[dict[str, Any], dict]:
    """The page's JSON data, and what the header counts: per evaluation, pairs by kind and
    the items found on one side only, and the pictures' notes."""
    links = _PictureLinks(page_dir.absolute())
    evaluations = [c.evaluation for c in compared]
    keys: list[str] = []
    model_pairs: list[list[str]] = []
    rows = []
    counts: dict[str, dict[str, Any]] = {}
    all_pairs: list[tuple[Pair, Compared]] = []
    for c in compared:
        pairs, only_a, only_b = pairs_of(c)
        counts[c.evaluation] = {
            "kinds": Counter(p.kind for p in pairs),
            "pairs": len(pairs),
            "only_a": len(only_a),
            "only_b": len(only_b),
        }
        for p in pairs:
            for k in (*p.a.group, *p.b.group):
                if k not in keys:
                    keys.append(k)
        all_pairs += [(p, c) for p in pairs]
    kind_index = {code: i for i, (code, _) in enumerate(FLIP_KINDS)}
    rank = {c.evaluation: i for i, c in enumerate(compared)}
    all_pairs.sort(key=lambda pc: (kind_index[pc[0].kind], rank[pc[0].evaluation]))
    for p, c in all_pairs:
        models = [p.a.model, p.b.model]
        if models not in model_pairs:
            model_pairs.append(models)
        group = {**p.b.group, **p.a.group}
        pictures, note = links.of(p, c)
        rows.append(
            [
                evaluations.index(p.evaluation),
                p.item_id,
                [None if group.get(k) is None else str(group[k]) for k in keys],
                kind_index[p.kind],
                model_pairs.index(models),
                _side(p.a),
                _side(p.b),
                _target(p.a, p.b),
                pictures,
                note,
            ]
        )
    data = {
        "evaluations": evaluations,
        "groupKeys": keys,
        "kinds": [label for _, label in FLIP_KINDS],
        "modelPairs": model_pairs,
        "pageRows": PAGE_ROWS,
        "shortChars": SHORT_CHARS,
        "rows": rows,
    }
    missing = {folder: found.missing for folder, found in links.indexes.items() if found.missing}
    dropped = {folder: found.dropped for folder, found in links.indexes.items() if found.dropped}
    return data, {
        "counts": counts,
        "pictures_missing": missing,
        "pictures_dropped": dropped,
        "indexes": links.indexes,
    }


def data_script(data: Mapping[str, Any]) -> str:
    """The JSON as the text of a `<script type="application/json">`: `<` written `\\u003c`
    (ASCII only, so a lone surrogate from a JSON answer cannot fail the write)."""
    return json.dumps(data, ensure_ascii=True, separators=(",", ":")).replace("<", "\\u003c")


# --- the page -------------------------------------------------------------------------------------

STYLE = """
body{font-family:system-ui,sans-serif;margin:16px;color:#1a1a1a;font-size:14px}
h1{font-size:20px}h2{font-size:17px;margin-top:22px}h3{font-size:15px}
table{border-collapse:collapse;margin:6px 0 12px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f0f0f0}
.warn{color:#a40;font-weight:bold}.note{color:#555}
#filters label{margin-right:12px;white-space:nowrap}
#cases{width:100%;table-layout:fixed}
#cases td{overflow-wrap:anywhere}
#cases pre{white-space:pre-wrap;margin:2px 0;font-size:12px;max-height:24em;overflow:auto}
#cases .k0,#cases .k1{background:#fff6e5}
#cases .k2{background:#fde8e8}
.st{font-weight:bold}.st-correct{color:#2a7d2a}.st-wrong{color:#c25e00}
.st-unparsable{color:#8a2be2}.st-error{color:#d00}
.lab{color:#666;font-size:12px}
.item{font-family:monospace}
table.sides td{white-space:pre-line}
details{margin:4px 0}summary{cursor:pointer}
.pics{display:flex;gap:4px;align-items:flex-start}.pics figure{margin:0;flex:1 1 0;min-width:0}
img.pic{max-width:100%;max-height:260px;height:auto;display:block}
button.more{font-size:11px;margin-left:4px}
"""

SCRIPT = """
(function () {
  'use strict';
  const holder = document.getElementById('vlmbench-data');
  const data = JSON.parse(holder.textContent);
  holder.remove();  // read once: the rows live in script from here
  const rows = data.rows, keys = data.groupKeys;
  const $ = (id) => document.getElementById(id);
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function option(select, value, text) {
    const o = el('option', null, text);
    o.value = value;
    select.appendChild(o);
  }
  function labelled(text, control) {
    const l = el('label', null, text + ' ');
    l.appendChild(control);
    return l;
  }
  const filters = $('filters');
  const fEval = el('select');
  option(fEval, '', 'all');
  data.evaluations.forEach((name, i) => option(fEval, String(i), name));
  filters.appendChild(labelled('evaluation', fEval));
  const fKind = el('select');
  option(fKind, '', 'all');
  option(fKind, 'flipped', 'flipped (either way)');
  data.kinds.forEach((name, i) => option(fKind, String(i), name));
  filters.appendChild(labelled('flip', fKind));
  const fGroups = keys.map((key, k) => {
    const values = new Set();
    for (const r of rows) if (r[2][k] !== null) values.add(r[2][k]);
    const s = el('select');
    option(s, '', 'any');
    Array.from(values).sort().forEach((v) => option(s, v, v));
    filters.appendChild(labelled(key, s));
    return s;
  });
  const fText = el('input');
  fText.type = 'search';
  fText.placeholder = 'part of an item id';
  filters.appendChild(labelled('item', fText));

  function matches(r) {
    if (fEval.value !== '' && r[0] !== Number(fEval.value)) return false;
    if (fKind.value === 'flipped' && r[3] > 1) return false;
    if (fKind.value !== '' && fKind.value !== 'flipped' && r[3] !== Number(fKind.value)) {
      return false;
    }
    for (let k = 0; k < fGroups.length; k++) {
      if (fGroups[k].value !== '' && r[2][k] !== fGroups[k].value) return false;
    }
    return fText.value === '' || r[1].includes(fText.value);
  }
  function text(parent, value) {  // a long text: its start and a toggle
    const pre = el('pre');
    if (value.length <= data.shortChars) {
      pre.textContent = value;
      parent.appendChild(pre);
      return;
    }
    const short = value.slice(0, data.shortChars) + '\\u2026';
    pre.textContent = short;
    const b = el('button', 'more', 'more');
    b.type = 'button';
    b.addEventListener('click', () => {
      const open = pre.textContent === short;
      pre.textContent = open ? value : short;
      b.textContent = open ? 'less' : 'more';
    });
    parent.appendChild(pre);
    parent.appendChild(b);
  }
  function side(td, s) {  // [status, raw, parsed, read_by, error]
    td.appendChild(el('div', 'st st-' + s[0], s[0]));
    td.appendChild(el('div', 'lab', 'answer'));
    text(td, s[1] === '' ? '(no answer)' : s[1]);
    td.appendChild(el('div', 'lab', 'parsed'));
    text(td, s[2]);
    td.appendChild(el('div', 'lab', 'read by: ' + s[3]));
    if (s[4] !== '') {
      td.appendChild(el('div', 'lab', 'error'));
      text(td, s[4]);
    }
  }
  function row(r) {
    const tr = el('tr', 'case k' + r[3]);
    tr.dataset.kind = String(r[3]);
    const c = el('td', 'case-id');
    c.appendChild(el('div', 'ev', data.evaluations[r[0]]));
    c.appendChild(el('div', 'item', r[1]));
    keys.forEach((key, k) => {
      if (r[2][k] !== null) c.appendChild(el('div', 'lab', key + ': ' + r[2][k]));
    });
    if (data.modelPairs.length > 1) {
      const m = data.modelPairs[r[4]];
      c.appendChild(el('div', 'lab', 'A: ' + m[0] + ' / B: ' + m[1]));
    }
    tr.appendChild(c);
    tr.appendChild(el('td', 'kind', data.kinds[r[3]]));
    const a = el('td', 'side-a'), b = el('td', 'side-b');
    side(a, r[5]);
    side(b, r[6]);
    tr.appendChild(a);
    tr.appendChild(b);
    const t = el('td', 'target');
    text(t, r[7]);
    tr.appendChild(t);
    const p = el('td', 'pictures'), pics = el('div', 'pics');
    for (const [who, src] of r[8]) {
      const fig = el('figure'), link = el('a'), img = el('img', 'pic');
      link.href = src;
      link.target = '_blank';
      img.loading = 'lazy';
      img.alt = who + "'s picture";
      img.src = src;
      link.appendChild(img);
      fig.appendChild(link);
      fig.appendChild(el('figcaption', 'lab', who));
      pics.appendChild(fig);
    }
    p.appendChild(pics);
    if (r[9] !== '') p.appendChild(el('div', 'lab', r[9]));
    tr.appendChild(p);
    return tr;
  }
  const body = $('case-rows'), more = $('show-more'), count = $('shown-count');
  let matched = [], shown = 0;
  function showMore() {
    const end = Math.min(shown + data.pageRows, matched.length);
    const part = document.createDocumentFragment();
    for (let i = shown; i < end; i++) part.appendChild(row(matched[i]));
    body.appendChild(part);
    shown = end;
    count.textContent = shown + ' of ' + matched.length + ' matching rows shown (' +
      rows.length + ' pairs in all)';
    more.hidden = shown >= matched.length;
  }
  function refilter() {
    matched = rows.filter(matches);
    body.replaceChildren();
    shown = 0;
    showMore();
  }
  for (const s of [fEval, fKind, ...fGroups]) s.addEventListener('change', refilter);
  fText.addEventListener('input', refilter);
  more.addEventListener('click', showMore);
  $('no-script').remove();
  refilter();
})();
"""


def _esc(value: object) -> str:
    return html.escape(str(value))


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return MISSING
    if isinstance(value, float):
        return format(value, "g")
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]], cls: str = "") -> str:
    """An HTML table, every cell escaped."""
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{_esc(_cell(v))}</td>" for v in r) + "</tr>" for r in rows
    )
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def read_run_facts(folder: Path) -> Run | Skipped:
    """What the run's manifest says (support.compare.leaderboard.read_run, partial runs read too),
    or why it cannot be read."""
    from support.compare.leaderboard import read_run

    return read_run(folder, partial=True)


def _warnings(a: Run | Skipped, b: Run | Skipped) -> list[str]:
    """What the reader must know before reading an evaluation's pairs: a side whose facts cannot
    be read, a side whose tables are partial, other data (not comparable), another profile (a
    comparison of profiles: the pairs show how each reads and scores the same cases)."""
    from support.compare.leaderboard import Skipped

    if isinstance(a, Skipped) or isinstance(b, Skipped):
        unknown = [f"{w}: {f.why}" for w, f in (("A", a), ("B", b)) if isinstance(f, Skipped)]
        return ["cannot tell whether the sides are comparable (" + "; ".join(unknown) + ")"]
    found = [f"{w}: {f.incomplete}" for w, f in (("A", a), ("B", b)) if f.incomplete]
    if (a.data_sha256, a.data_label) != (b.data_sha256, b.data_label):
        found.append("not comparable: the data fingerprint differs")
    if a.profile != b.profile:
        found.append(
            f"the profile differs (A {a.profile}, B {b.profile}): the pairs show how each "
            "profile reads and scores the same cases"
        )
    return found


def _both(a: str, b: str) -> str:
    """One cell for both sides: the value once when they agree, else each side's."""
    return a if a == b else f"A: {a}\nB: {b}"


def _sides_section(
    compared: Sequence[Compared], indexes: Mapping[Path, Pictures], page_dir: Path
) -> list[str]:
    """A row per evaluation: each side's folder and model, the runs' date, profile and data
    (once where both agree), and a warning where the sides are not comparable."""
    from support.compare.leaderboard import Skipped, fingerprint_text, short_date

    facts: dict[Path, Run | Skipped] = {}
    rows, warnings = [], []
    for c in compared:
        shown = []
        for folder, outcomes in ((c.folder_a, c.outcomes_a), (c.folder_b, c.outcomes_b)):
            if folder not in facts:
                facts[folder] = read_run_facts(folder)
            f = facts[folder]
            models = ", ".join(dict.fromkeys(o.model for o in outcomes)) or MISSING
            if isinstance(f, Skipped):
                known = (f"({f.why})",) * 3
            else:
                known = (short_date(f.start), f.profile or MISSING, fingerprint_text(f))
            shown.append((f"{folder}\n{models}", *known))
        (where_a, *facts_a), (where_b, *facts_b) = shown
        both = [_both(x, y) for x, y in zip(facts_a, facts_b, strict=True)]
        rows.append((c.evaluation, where_a, where_b, *both))
        for warning in _warnings(facts[c.folder_a], facts[c.folder_b]):
            warnings.append(f'<p class="warn">{_esc(c.evaluation)}: {_esc(warning)}</p>')
    parts = [
        _table(
            ["evaluation", "A: folder, model", "B: folder, model", "date (UTC)", "profile", "data"],
            rows,
            "sides",
        ),
        *warnings,
    ]
    reports = {}  # a report -> the run folders whose pictures it shows
    for folder, found in indexes.items():
        if found.report is not None:
            reports.setdefault(found.report.absolute(), []).append(folder)
    if reports:
        links = [
            f'<a href="{_esc(_src(report, page_dir))}">{_esc(report.name)}</a> '
            f"({', '.join(f'<code>{_esc(f)}</code>' for f in folders)})"
            for report, folders in reports.items()
        ]
        parts.append("<p>Pictures as in the HTML report: " + "; ".join(links) + ".</p>")
    return parts


def page_html(
    compared: Sequence[Compared],
    label_a: str,
    label_b: str,
    page_dir: Path,
    notes: Sequence[str] = (),
) -> tuple[str, dict[str, Any]]:
    """The page, and what it counts (`counts` per evaluation, `flipped`)."""
    from support.statistics.pairing import shown_comparisons

    data, found = page_data(compared, page_dir)
    counts = found["counts"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{_esc(policy())}">',
        "<title>vlmbench comparison</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>vlmbench comparison</h1>",
        f"<p><b>A</b> = <code>{_esc(label_a)}</code><br>",
        f"<b>B</b> = <code>{_esc(label_b)}</code></p>",
        "<h2>Sides</h2>",
        *_sides_section(compared, found["indexes"], page_dir),
    ]
    if notes:
        parts.append("<ul>" + "".join(f"<li>{_esc(n)}</li>" for n in notes) + "</ul>")
    parts.append(
        "<h2>Paired metrics (b - a)</h2><p>Differences b - a with 95% paired cluster-bootstrap "
        "intervals; p from the named test, <code>p_holm</code> Holm-adjusted over each table "
        '(as <code>vlmbench-compare</code> prints them). <a href="#cases-section">The cases'
        "</a>.</p>"
    )
    for c in compared:
        rows = len(c.table)
        told = f"{rows} comparison{'s' if rows != 1 else ''}"
        opened = " open" if len(compared) == 1 else ""
        parts.append(f"<details{opened}><summary><b>{_esc(c.evaluation)}</b>: {told}</summary>")
        if rows:
            shown = shown_comparisons(c.table)
            parts.append(_table(list(shown.columns), shown.itertuples(index=False)))
        if c.notes:
            parts.append("<ul>" + "".join(f"<li>{_esc(n)}</li>" for n in c.notes) + "</ul>")
        parts.append("</details>")

    totals: Counter[str] = Counter()
    kind_rows = []
    for name, n in counts.items():
        totals.update(n["kinds"])
        kind_rows.append(
            (name, n["pairs"], *(n["kinds"][k] for k, _ in FLIP_KINDS), n["only_a"], n["only_b"])
        )
    flipped = totals["a_right"] + totals["b_right"]
    n_pairs = sum(n["pairs"] for n in counts.values())
    parts += [
        '<h2 id="cases-section">Cases</h2>',
        "<p>A pair is one item id with A's outcome and B's. <b>A right, B wrong</b>: A's status "
        "is correct and B's is wrong or unparsable; <b>B right, A wrong</b>: the reverse; "
        "<b>error</b>: either side's status is error; <b>same</b>: any other pair. Items found "
        "on one side only are counted here, not listed.</p>",
        f'<p>Flipped: <b id="flipped-count">{flipped}</b> of {n_pairs} pairs '
        f'(A right, B wrong: <span id="count-a_right">{totals["a_right"]}</span>; '
        f'B right, A wrong: <span id="count-b_right">{totals["b_right"]}</span>).</p>',
        _table(
            ["evaluation", "pairs", *(label for _, label in FLIP_KINDS), "only in A", "only in B"],
            kind_rows,
            "kinds",
        ),
    ]
    if found["pictures_missing"]:
        told = "; ".join(f"{folder}: {why}" for folder, why in found["pictures_missing"].items())
        parts.append(
            f'<p class="note">No pictures for some runs ({_esc(told)}). pictures.json is written '
            "by a run with --html; with --self-contained-html, --html-inline-mb 0 links every "
            "picture.</p>"
        )
    for folder, dropped in found["pictures_dropped"].items():
        told = "; ".join(dropped[:5]) + (
            f"; and {len(dropped) - 5} more" if len(dropped) > 5 else ""
        )
        parts.append(
            f'<p class="note">Pictures not shown from {_esc(str(folder))}/pictures.json: '
            f"{_esc(told)} (a picture must be a raster image inside the run folder or the "
            "report's assets folder).</p>"
        )
    parts += [
        '<div id="filters"></div>',
        '<p id="shown-count"></p>',
        '<p id="no-script">The case rows are built by this page\'s script: enable JavaScript '
        "to see them.</p>",
        '<table id="cases"><colgroup><col style="width:13%"><col style="width:6%">'
        '<col style="width:19%"><col style="width:19%"><col style="width:11%">'
        '<col style="width:32%"></colgroup><thead><tr><th>case</th><th>flip</th>'
        "<th>A</th><th>B</th><th>target</th><th>picture</th></tr></thead>"
        '<tbody id="case-rows"></tbody></table>',
        '<p><button type="button" id="show-more">show more</button></p>',
        f'<script type="application/json" id="vlmbench-data">{data_script(data)}</script>',
        f"<script>{SCRIPT}</script>",
        "</body></html>",
    ]
    kinds = {k: totals[k] for k, _ in FLIP_KINDS}
    return "\n".join(parts) + "\n", {"counts": counts, "kinds": kinds, "flipped": flipped}


def policy() -> str:
    """The page's Content-Security-Policy: its own script only (by hash), inline style, pictures
    from files; nothing else loads (no network)."""
    script = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
    return (
        f"default-src 'none'; script-src 'sha256-{script}'; style-src 'unsafe-inline'; "
        "img-src 'self' file: data:"
    )


def write_page(
    path: Path,
    compared: Sequence[Compared],
    label_a: str,
    label_b: str,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """Write the page to `path` (atomic); what it counts (page_html) and its size in bytes."""
    path = Path(path)
    text, summary = page_html(compared, label_a, label_b, path.absolute().parent, notes)
    atomic_write_text(path, text)
    return {**summary, "bytes": path.stat().st_size}
