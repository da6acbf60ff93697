"""vocab_lr.pdf/.png/.csv: the words of the reasoning that go with calling an image AI-generated.

Documents: every response of the reasoning files (n > 1 gives n documents per image), its
reasoning_response as text; label: extracted_prediction == "ai-generated". Unparsable responses
(extracted_prediction null) have no label and are left out. Features: word presence
(CountVectorizer, binary, English stop words removed, words in at least 2 documents; 1 when there
are fewer than MIN_DF_DOCS documents; words of 2 to MAX_WORD_CHARS word characters: sklearn's own
pattern bounded, since a 1 MB answer is one "word" whose tick label hung matplotlib's layout).
A logistic regression (L2, C=1) fit on all documents pooled over datasets, models and methods;
the top_k words by positive coefficient are drawn as horizontal bars of that length, one bar a
word (the fit is pooled: a word has one coefficient, not one per method), and beside them a
heatmap of the share of each method's documents containing the word (shares, not counts, so
that an n=5 method's five times more documents do not outweigh the others). vocab_lr.csv also
keeps `segment:<method>`, the coefficient split in proportion to those shares; the figure does
not stack them (a sum across prompt variants means nothing).

A reasoning file's dataset, model, phrase, mode and n come from its folders (the layout in
plot_data).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from support.evaluations.pgt.plots import style as ps
from support.evaluations.pgt.plots.data import (
    REASONING_PREFIX,
    ResultsFormatError,
    method_key,
    method_labels,
    method_order,
    none_for_missing,
    read_json,
    result_files,
)
from support.storage.files import spreadsheet_safe

POSITIVE = "ai-generated"
MIN_DF_DOCS = 10
BAR_HEIGHT = 0.7
HEATMAP_ROW = 0.16  # inches per word (7 pt tick labels)
COEFFICIENT_COLOR = "#7F7F7F"  # grey: the pooled fit belongs to no method
SHARE_CMAP = "Blues"
MAX_PRINTED_METHODS = 12  # more heatmap columns than this: shares are not printed in the cells


def plot_vocab_lr(
    source: Path | Iterable[Path], out_dir: Path, top_k: int = 20, run: str | None = None
) -> list[Path]:
    """Write vocab_lr.pdf, .png and .csv from a results root (its newest reasoning file of each
    folder, or run `run`'s) or from reasoning files; [] (with the reason logged and warned)
    without enough data."""
    docs = reasoning_documents(source, run)
    try:
        weights = vocab_weights(docs, top_k)
    except ps.NotEnoughData as e:
        return ps.skip("vocab_lr", str(e))
    csv = Path(out_dir) / "vocab_lr.csv"
    csv.parent.mkdir(parents=True, exist_ok=True)
    spreadsheet_safe(weights).to_csv(csv, index=False)  # words from answers: never formulas
    with ps.publication_style():
        fig = vocab_figure(weights, method_labels(docs))
        return [*ps.save_figure(fig, out_dir, "vocab_lr"), csv]


def reasoning_documents(source: Path | Iterable[Path], run: str | None = None) -> pd.DataFrame:
    """One row per response: dataset, model, phrase, mode, n, method, text, label (bool)."""
    if isinstance(source, str | Path) and Path(source).is_dir():
        files = result_files(Path(source), REASONING_PREFIX, run=run)
    else:
        files = [Path(source)] if isinstance(source, str | Path) else [Path(p) for p in source]
    rows = [row for path in files for row in _file_documents(path)]
    cols = ["dataset", "model", "phrase", "mode", "n", "method", "text", "label"]
    docs = pd.DataFrame(rows, columns=cols)
    docs["mode"] = none_for_missing(docs["mode"])
    return docs


MAX_WORD_CHARS = 40  # longer "words" are left out (no English word comes near)
WORD_PATTERN = rf"(?u)\b\w{{2,{MAX_WORD_CHARS}}}\b"  # sklearn's default is (?u)\b\w\w+\b


def vocab_weights(docs: pd.DataFrame, top_k: int = 20) -> pd.DataFrame:
    """The top_k words by positive coefficient: word, coefficient, documents (containing it), then
    per method `share:<method>` (its documents containing the word) and `segment:<method>` (the
    bar's part); NotEnoughData when the documents cannot support a fit."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    if docs.empty:
        raise ps.NotEnoughData("no reasoning responses with a parsed prediction")
    if docs["label"].nunique() < 2:
        only = POSITIVE if docs["label"].iloc[0] else f"not {POSITIVE}"
        raise ps.NotEnoughData(f"every parsed prediction is {only}: needs both classes")
    min_df = 2 if len(docs) >= MIN_DF_DOCS else 1
    vectorizer = CountVectorizer(
        binary=True, stop_words="english", min_df=min_df, token_pattern=WORD_PATTERN
    )
    try:
        x = vectorizer.fit_transform(docs["text"])
    except ValueError as e:  # sklearn: "empty vocabulary; perhaps the documents only contain..."
        raise ps.NotEnoughData(f"no vocabulary in the reasoning ({e})") from e
    y = docs["label"].to_numpy(dtype=int)
    coef = LogisticRegression(max_iter=1000).fit(x, y).coef_[0]
    top = np.argsort(-coef, kind="stable")[:top_k]
    top = top[coef[top] > 0]
    if not len(top):
        raise ps.NotEnoughData("no word has a positive coefficient")
    x = x.tocsc()[:, top]
    table = pd.DataFrame(
        {
            "word": vectorizer.get_feature_names_out()[top],
            "coefficient": coef[top],
            "documents": np.asarray(x.sum(axis=0)).ravel(),
        }
    )
    return _with_method_segments(table, x.tocsr(), docs)


def _with_method_segments(table: pd.DataFrame, x, docs: pd.DataFrame) -> pd.DataFrame:
    """`share:<method>` and `segment:<method>` columns; x: documents x the table's words (0/1)."""
    methods = method_order(docs)
    shares = np.column_stack(
        [np.asarray(x[(docs["method"] == m).to_numpy()].mean(axis=0)).ravel() for m in methods]
    )
    parts = table["coefficient"].to_numpy()[:, None] * shares / shares.sum(axis=1, keepdims=True)
    shares_cols = {f"share:{m}": shares[:, k] for k, m in enumerate(methods)}
    parts_cols = {f"segment:{m}": parts[:, k] for k, m in enumerate(methods)}
    return table.assign(**shares_cols, **parts_cols)


def vocab_figure(weights: pd.DataFrame, labels: dict[str, str] | None = None) -> Figure:
    """Two panels sharing the words (ACL full width), the strongest word on top: left, each
    word's coefficient as one bar (the fit pools every method, so a word has one coefficient);
    right, a heatmap of the share of each method's documents containing the word (`share:`
    columns), a column per method labelled with its display name (`labels`), shares printed in
    the cells. No legend over the data: the methods are the heatmap's column labels and the
    colorbar says what a shade is."""
    methods = [c.removeprefix("share:") for c in weights if c.startswith("share:")]
    labels = labels or {}
    names = [ps.tex_safe(labels.get(m, m)) for m in methods]
    shares = (
        weights[[f"share:{m}" for m in methods]].to_numpy(dtype=float).reshape(len(weights), -1)
    )
    longest = max(map(len, names), default=1)  # characters: room for the rotated column labels
    height = 0.5 + HEATMAP_ROW * len(weights) + 0.06 * longest  # inches
    heat_width = max(1.0, 0.3 * len(methods))  # relative to the coefficient panel's 1.5
    fig = Figure(figsize=(ps.ACL_FULL_WIDTH, height), layout="constrained")
    coef_ax, heat_ax = fig.subplots(
        1, 2, sharey=True, gridspec_kw={"width_ratios": [1.5, heat_width]}
    )
    y = np.arange(len(weights))
    coef_ax.barh(
        y,
        weights["coefficient"].to_numpy(dtype=float),
        BAR_HEIGHT,
        color=COEFFICIENT_COLOR,
        edgecolor="black",
        linewidth=ps.BAR_EDGE_WIDTH,
    )
    coef_ax.set_yticks(y, [ps.tex_safe(w) for w in weights["word"]])
    coef_ax.set_ylim(len(weights) - 0.5, -0.5)  # the strongest word on top
    coef_ax.set_xlabel("LR coefficient\n(toward ai-generated)")
    coef_ax.set_title("One fit, all methods pooled")
    coef_ax.grid(axis="x", alpha=ps.GRID_ALPHA, color=ps.GRID_COLOR, linestyle=ps.GRID_LINESTYLE)
    coef_ax.set_axisbelow(True)
    image = heat_ax.imshow(
        shares, aspect="auto", cmap=SHARE_CMAP, vmin=0, vmax=1, interpolation="nearest"
    )
    heat_ax.set_xticks(np.arange(len(methods)), names, rotation=45, ha="right")
    heat_ax.tick_params(axis="y", left=False)
    heat_ax.set_title("Share of each method's responses with the word")
    heat_ax.set_xlabel(ps.tex_safe(f"method: {ps.METHOD_LEGEND_TITLE}"))
    if len(methods) <= MAX_PRINTED_METHODS:
        for (i, j), share in np.ndenumerate(shares):
            heat_ax.text(
                j,
                i,
                f"{share:.2f}".lstrip("0") if share < 1 else "1",
                ha="center",
                va="center",
                fontsize=ps.ANNOTATION_FONT_SIZE - 1,
                color="white" if share > 0.6 else "black",
            )
    bar = fig.colorbar(image, ax=heat_ax, fraction=0.08, pad=0.02)
    bar.set_label("share")
    return fig


def _file_documents(path: Path) -> list[dict]:
    context = _context(path)
    entries = read_json(path)
    if not isinstance(entries, list):
        raise ResultsFormatError(f"{path}: expected a list of entries")
    rows = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("responses"), list):
            raise ResultsFormatError(f"{path}: missing key '[{i}].responses'")
        for j, response in enumerate(entry["responses"]):
            for key in ("reasoning_response", "extracted_prediction"):
                if not isinstance(response, dict) or key not in response:
                    raise ResultsFormatError(f"{path}: missing key '[{i}].responses[{j}].{key}'")
            if response["extracted_prediction"] is None:
                continue  # unparsable: no label
            label = response["extracted_prediction"] == POSITIVE
            rows.append(context | {"text": response["reasoning_response"] or "", "label": label})
    return rows


def _context(path: Path) -> dict:
    """dataset, model, phrase, mode, n, method from the folders of a reasoning file."""
    parts = list(Path(path).resolve().parent.parts)
    n = 1
    if parts and parts[-1].startswith("n="):
        try:
            n = int(parts.pop()[2:])
        except ValueError as e:
            raise ResultsFormatError(f"{path}: folder 'n=' without an integer") from e
    mode = parts.pop() if parts and parts[-1] in ps.MODES else None
    if len(parts) < 3:
        raise ResultsFormatError(f"{path}: not under {{dataset}}/{{model}}/{{phrase}}/")
    dataset, model, phrase = parts[-3:]
    return {
        "dataset": dataset,
        "model": model,
        "phrase": phrase,
        "mode": mode,
        "n": n,
        "method": method_key(phrase, mode, n),
    }
