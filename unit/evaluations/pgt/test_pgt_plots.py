"""PGT figures: reading a results tree, confidence.json, the three figures, the CLI."""

from __future__ import annotations

import io
import json
import math
import random
import re
import subprocess
import sys
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from support.evaluations.pgt.plots import macro_f1_figure, main, make_all, plot_macro_f1_bars
from support.evaluations.pgt.plots import style as ps
from support.evaluations.pgt.plots.data import (
    ResultsFormatError,
    load_performance,
    method_key,
    method_labels,
    write_confidence,
)
from support.evaluations.pgt.plots.radar import chosen_rows, plot_recall_radar, recall_radar_figure
from support.evaluations.pgt.plots.vocab import plot_vocab_lr, reasoning_documents, vocab_weights

DATASETS = ("d3", "df40")
MODELS = ("qwen25-vl-7b", "llava-onevision-7b")
METHODS = (("baseline", None), ("cot", "prefill"), ("s2", "prefill"))
GENERATORS = ("real", "stylegan2", "sdxl", "midjourney")
# macro F1 by model and phrase: Qwen is best with s2, LLaVa with cot (the radar's default choice)
F1 = {
    "qwen25-vl-7b": {"baseline": 0.60, "cot": 0.70, "s2": 0.80},
    "llava-onevision-7b": {"baseline": 0.55, "cot": 0.75, "s2": 0.65},
}
DATASET_OFFSET = {"d3": 0.0, "df40": -0.05}
TS = "20261121_143022"
CORRELATED, ANTI = "artifacts", "authentic"  # planted words: with ai-generated / with real
FILLER = ["image", "lighting", "texture", "background", "shows", "colors", "edges", "scene"]


def folder(root: Path, dataset, model, phrase, mode, n=1) -> Path:
    path = root / dataset / model / phrase
    path = path / mode if mode else path
    return path / f"n={n}" if n > 1 else path


def performance(dataset, model, phrase, mode, n=1, f1=0.7, generators=GENERATORS) -> dict:
    recall = {
        g: {"recall": round(0.3 + 0.15 * i + (f1 - 0.6), 4), "n": 20, "ci": [0.3, 0.9]}
        for i, g in enumerate(generators)
    }
    return {
        "model": model,
        "dataset": dataset,
        "phrase": phrase,
        "mode": mode,
        "n_responses": n,
        "metrics": {
            "total_examples": 200,
            "correct_predictions": 150,
            "accuracy": f1 + 0.01,
            "macro_f1": f1,
            "class_metrics": {},
            "confusion_matrix": {"TP": 80, "TN": 70, "FP": 30, "FN": 20},
            "per_generator_recall": recall,
            "confidence_intervals": {
                "accuracy": [f1 - 0.04, f1 + 0.06],
                "macro_f1": [round(f1 - 0.05, 4), round(f1 + 0.03, 4)],
            },
            "bootstrap": {"resamples": 1000, "level": 0.95, "seed": 0},
        },
    }


def reasoning(rng: random.Random, k: int = 8) -> list[dict]:
    """k entries; the planted words follow the prediction 90% of the time."""
    entries = []
    for i in range(k):
        pred = "ai-generated" if i % 2 else "real"
        planted = CORRELATED if pred == "ai-generated" else ANTI
        if rng.random() < 0.1:
            planted = ANTI if planted == CORRELATED else CORRELATED
        words = [*rng.sample(FILLER, 4), planted]
        rng.shuffle(words)
        response = {
            "reasoning_response": "The " + " ".join(words) + ".",
            "clean_answer_response": pred,
            "extracted_prediction": pred,
            "score": 1,
        }
        entries.append(
            {
                "image": f"/x/{i}.jpg",
                "generator": "sdxl",
                "question": "Is this image real or AI-generated?",
                "full_prompt": "...",
                "ground_truth": "ai-generated",
                "responses": [response],
                "aggregated_prediction": pred,
                "aggregated_score": 1,
                "vote_distribution": {pred: 1},
            }
        )
    return entries


def write(path: Path, doc) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def build_tree(root: Path, with_reasoning: bool = True) -> dict:
    """2 datasets x 2 models x 3 methods; returns the macro F1 and its interval by key."""
    rng, expected = random.Random(0), {}
    for dataset in DATASETS:
        for model in MODELS:
            for phrase, mode in METHODS:
                f1 = round(F1[model][phrase] + DATASET_OFFSET[dataset], 4)
                doc = performance(dataset, model, phrase, mode, f1=f1)
                where = folder(root, dataset, model, phrase, mode)
                write(where / f"performance_{TS}.json", doc)
                if with_reasoning:
                    write(where / f"reasoning_{TS}.json", reasoning(rng))
                ci = doc["metrics"]["confidence_intervals"]["macro_f1"]
                expected[(dataset, model, phrase)] = (f1, *ci)
    return expected


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("pgt")
    return root, build_tree(root)


@pytest.fixture(scope="module")
def made(tree, tmp_path_factory) -> list[Path]:
    out = tmp_path_factory.mktemp("figures")
    return make_all(tree[0], out)


# reading the tree


def test_load_performance_rows(tree):
    root, expected = tree
    df = load_performance(root)
    assert len(df) == len(DATASETS) * len(MODELS) * len(METHODS)
    assert list(dict.fromkeys(df["dataset"])) == ["d3", "df40"]
    assert list(dict.fromkeys(df["model"])) == ["qwen25-vl-7b", "llava-onevision-7b"]  # name map
    assert list(df["method"][:3]) == ["baseline", "cot", "s2"]
    for r in df.itertuples():
        key = (r.dataset, r.model, r.phrase)
        assert (r.macro_f1, r.macro_f1_lo, r.macro_f1_hi) == expected[key]
        assert r.n == 1 and r.run == TS and r.path.name == f"performance_{TS}.json"
        assert list(r.per_generator_recall) == list(GENERATORS)
    assert df["per_generator_recall"][0]["sdxl"] == {"recall": 0.6, "n": 20, "lo": 0.3, "hi": 0.9}


def test_method_keys_name_mode_and_n(tmp_path):
    combos = [
        ("baseline", None, 1),
        ("baseline", None, 3),
        ("cot", "prefill", 1),
        ("cot", "prompt", 1),
        ("s2", "prefill", 5),
        ("s2", "prefill-pseudo-user", 5),
        ("mine", "instruct", 1),
    ]
    for phrase, mode, n in combos:
        doc = performance("d3", "qwen25-vl-7b", phrase, mode, n)
        write(folder(tmp_path, "d3", "qwen25-vl-7b", phrase, mode, n) / "performance_a.json", doc)
    df = load_performance(tmp_path)
    keys = ["baseline", "baseline/n=3", "cot", "cot/prompt", "s2/n=5"]
    assert list(df["method"]) == [*keys, "s2/prefill-pseudo-user/n=5", "mine/instruct"]
    labels = method_labels(df)
    assert labels["cot/prompt"] == "CoT (prompt)" and labels["s2/n=5"] == "S2 (prefill, n=5)"
    # the default mode is named too: a bare "CoT" hid that it means the prefill mode
    assert labels["cot"] == "CoT (prefill)" and labels["baseline/n=3"] == "Baseline (n=3)"
    assert labels["mine/instruct"] == "mine (instruct)"
    assert method_key("cot", "prefill", 1) == "cot" != method_key("cot", "instruct", 1)
    fig = macro_f1_figure(df)  # seven methods with long names: the legend wraps to fit the width
    fig.savefig(io.BytesIO(), format="png")
    assert 0 <= fig.legends[0].get_window_extent().x0 < fig.legends[0].get_window_extent().x1
    assert fig.legends[0].get_window_extent().x1 <= fig.bbox.width


def test_latest_only_takes_the_newest_run_by_name(tmp_path):
    where = folder(tmp_path, "d3", "qwen25-vl-7b", "cot", "prefill")
    for run, f1 in [("20261121_090000", 0.6), ("20261120_090000", 0.5)]:
        doc = performance("d3", "qwen25-vl-7b", "cot", "prefill", f1=f1)
        write(where / f"performance_{run}.json", doc)
    assert list(load_performance(tmp_path)["macro_f1"]) == [0.6]
    every = load_performance(tmp_path, latest_only=False)
    assert list(every["run"]) == ["20261120_090000", "20261121_090000"]
    write_confidence(every, tmp_path / "c.json")  # several runs: the newest is written
    written = json.loads((tmp_path / "c.json").read_text())
    assert written["d3"]["qwen25-vl-7b"]["cot"]["macro_f1"] == 0.6


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda d: d["metrics"].pop("macro_f1"), "metrics.macro_f1"),
        (lambda d: d.pop("phrase"), "phrase"),
        (lambda d: d.pop("metrics"), "metrics.total_examples"),
        (
            lambda d: d["metrics"]["per_generator_recall"]["sdxl"].pop("recall"),
            "metrics.per_generator_recall.sdxl.recall",
        ),
    ],
)
def test_malformed_performance_names_file_and_key(tmp_path, edit, key):
    doc = performance("d3", "qwen25-vl-7b", "cot", "prefill")
    edit(doc)
    bad = write(folder(tmp_path, "d3", "qwen25-vl-7b", "cot", None) / "performance_x.json", doc)
    with pytest.raises(ResultsFormatError, match=re.escape(f"{bad}: missing key '{key}'")):
        load_performance(tmp_path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["metrics"].update(macro_f1="high"), "'metrics.macro_f1' must be a number"),
        (lambda d: d.update(n_responses=0), "'n_responses' must be an integer >= 1"),
        (lambda d: d["metrics"].update(total_examples=None), "'metrics.total_examples' must be"),
        (lambda d: d["metrics"]["confidence_intervals"].update(macro_f1=[0.1]), "[lo, hi]"),
    ],
)
def test_wrong_values_name_file_and_key(tmp_path, edit, message):
    doc = performance("d3", "qwen25-vl-7b", "cot", "prefill")
    edit(doc)
    bad = write(tmp_path / "d3" / "performance_x.json", doc)
    with pytest.raises(ResultsFormatError, match=re.escape(f"{bad}: ") + ".*" + re.escape(message)):
        load_performance(tmp_path)


def test_invalid_json_names_the_file(tmp_path):
    bad = tmp_path / "d3" / "m" / "cot" / "prefill" / "performance_x.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    with pytest.raises(ResultsFormatError, match=re.escape(str(bad))):
        load_performance(tmp_path)


# confidence.json and the bar chart


def test_confidence_json_equals_the_input_intervals(tree, tmp_path):
    root, expected = tree
    data = json.loads(write_confidence(load_performance(root), tmp_path / "c.json").read_text())
    got = {
        (dataset, model, method): (v["macro_f1"], v["lo"], v["hi"])
        for dataset, models in data.items()
        for model, methods in models.items()
        for method, v in methods.items()
    }
    assert got == expected
    assert data["df40"]["qwen25-vl-7b"]["s2"]["n"] == 200


def test_null_interval_is_null_in_json_and_drawn_without_whisker(tmp_path):
    doc = performance("d3", "qwen25-vl-7b", "cot", "prefill")
    doc["metrics"]["confidence_intervals"]["macro_f1"] = [None, None]
    write(folder(tmp_path, "d3", "qwen25-vl-7b", "cot", "prefill") / "performance_x.json", doc)
    df = load_performance(tmp_path)
    assert math.isnan(df["macro_f1_lo"][0])
    data = json.loads(write_confidence(df, tmp_path / "c.json").read_text())
    assert data["d3"]["qwen25-vl-7b"]["cot"] == {"macro_f1": 0.7, "lo": None, "hi": None, "n": 200}
    assert plot_macro_f1_bars(df, tmp_path / "fig")  # drawn, no error bar


def test_bar_figure_has_acl_width_a_panel_per_dataset_and_s2_minus_cot_markers(tree):
    fig = macro_f1_figure(load_performance(tree[0]))
    assert fig.get_size_inches()[0] == pytest.approx(ps.ACL_FULL_WIDTH)
    axes = fig.get_axes()
    assert [ax.get_title() for ax in axes] == ["D3", "DF40"]
    markers = sorted(t.get_text() for ax in axes for t in ax.texts)
    deltas = [F1[m]["s2"] - F1[m]["cot"] for m in MODELS for _ in DATASETS]
    assert markers == sorted(f"{d:+.2f}" for d in deltas)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["Baseline", "CoT (prefill)", "S2 (prefill)"]
    assert fig.legends[0].get_title().get_text() == ps.METHOD_LEGEND_TITLE


# the files


def _pdf_width_in(path: Path) -> float:
    box = re.search(rb"/MediaBox \[\s*0 0 ([\d.]+) ([\d.]+)\s*\]", path.read_bytes())
    return float(box.group(1)) / 72


@pytest.mark.parametrize(
    ("stem", "width"),
    [
        ("macro_f1_bars", ps.ACL_FULL_WIDTH),
        ("recall_radar", ps.ACL_FULL_WIDTH),
        ("vocab_lr", ps.ACL_FULL_WIDTH),  # two panels: coefficients and the shares heatmap
    ],
)
def test_figure_files_are_valid_and_acl_sized(made, stem, width):
    pdf = next(p for p in made if p.name == f"{stem}.pdf")
    png = pdf.with_suffix(".png")
    assert png in made
    assert pdf.read_bytes().startswith(b"%PDF")
    assert _pdf_width_in(pdf) == pytest.approx(width, abs=0.01)
    with Image.open(png) as im:
        assert im.format == "PNG"
        assert im.size[0] == pytest.approx(width * ps.PREVIEW_DPI, abs=2)


def test_make_all_writes_confidence_and_the_vocab_table(made):
    stems = ("macro_f1_bars", "recall_radar", "vocab_lr")
    figures = [f"{s}.{e}" for s in stems for e in ("pdf", "png")]
    assert sorted(p.name for p in made) == sorted(["confidence.json", "vocab_lr.csv", *figures])
    assert all(p.exists() for p in made)


# recall radar


def test_radar_default_is_each_models_best_method(tree):
    chosen = chosen_rows(load_performance(tree[0]))
    assert dict(zip(chosen["model"], chosen["method"], strict=True)) == {
        "qwen25-vl-7b": "s2",
        "llava-onevision-7b": "cot",
    }
    assert len(chosen) == 4  # a row per dataset and model


def test_radar_draws_a_polygon_per_model_on_polar_axes(tree):
    fig = recall_radar_figure(load_performance(tree[0]), method="cot")
    axes = fig.get_axes()
    assert [ax.name for ax in axes] == ["polar", "polar"]
    assert [len(ax.patches) for ax in axes] == [2, 2]  # a filled polygon per model
    ticks = [t.get_text() for t in axes[0].get_xticklabels()]
    assert ticks == ["real", "midjourney", "sdxl", "stylegan2"]  # real first, then by name
    qwen, llava = (line.get_ydata()[:4] for line in axes[0].lines[:2])  # D3, CoT: f1 0.7, 0.75
    np.testing.assert_allclose(qwen, [0.4, 0.85, 0.7, 0.55])
    np.testing.assert_allclose(llava, [0.45, 0.9, 0.75, 0.6])
    legend = ["Qwen: CoT (prefill)", "LLaVa: CoT (prefill)"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == legend
    one = recall_radar_figure(load_performance(tree[0]), models=["llava-onevision-7b"])
    assert [t.get_text() for t in one.legends[0].get_texts()] == ["LLaVa: CoT (prefill)"]


def test_radar_with_two_generators_falls_back_to_bars(tmp_path):
    doc = performance("d3", "qwen25-vl-7b", "cot", "prefill", generators=("real", "sdxl"))
    write(folder(tmp_path, "d3", "qwen25-vl-7b", "cot", "prefill") / "performance_x.json", doc)
    fig = recall_radar_figure(load_performance(tmp_path))
    (ax,) = fig.get_axes()
    assert ax.name == "rectilinear" and len(ax.patches) == 2


def test_radar_without_recall_or_method_skips(tree, tmp_path):
    doc = performance("d3", "qwen25-vl-7b", "cot", "prefill", generators=())
    write(folder(tmp_path, "d3", "qwen25-vl-7b", "cot", "prefill") / "performance_x.json", doc)
    with pytest.warns(ps.PlotSkipped, match="no per-generator recall"):
        assert plot_recall_radar(load_performance(tmp_path), tmp_path) == []
    with pytest.warns(ps.PlotSkipped, match="no results for method 'nope'"):
        assert plot_recall_radar(load_performance(tree[0]), tmp_path, method="nope") == []
    assert not list(tmp_path.glob("recall_radar*"))


# vocabulary logistic regression


def test_vocab_lr_finds_the_planted_words(tree):
    docs = reasoning_documents(tree[0])
    assert len(docs) == len(DATASETS) * len(MODELS) * len(METHODS) * 8
    weights = vocab_weights(docs, top_k=5)
    top = list(weights["word"])
    assert top[0] == CORRELATED and weights["coefficient"][0] > 0
    assert ANTI not in top
    assert (weights["coefficient"] > 0).all()
    segments = weights[[f"segment:{m}" for m in ("baseline", "cot", "s2")]].sum(axis=1)
    np.testing.assert_allclose(segments, weights["coefficient"])


def test_vocab_segments_follow_each_methods_share_of_documents():
    rows = []
    for method in ("cot", "s2"):
        for i in range(10):
            ai = i % 2 == 1
            text = "glitch warped " if ai and method == "s2" else "warped " if ai else "photo "
            rows.append(
                {
                    "phrase": method,
                    "mode": "prefill",
                    "n": 1,
                    "method": method,
                    "text": text + "image",
                    "label": ai,
                }
            )
    w = vocab_weights(pd.DataFrame(rows)).set_index("word")
    assert w.loc["glitch", "segment:cot"] == 0  # only s2's reasoning says it
    assert w.loc["glitch", "segment:s2"] == pytest.approx(w.loc["glitch", "coefficient"])
    assert w.loc["warped", "segment:cot"] == pytest.approx(w.loc["warped", "segment:s2"])
    assert w.loc["glitch", "share:s2"] == 0.5 and w.loc["warped", "documents"] == 10


def test_a_one_megabyte_answer_word_is_no_vocabulary_word():
    """A 1 MB "word" (a hostile answer) is left out: its tick label hung matplotlib's layout
    for minutes (issue 25)."""
    huge = "w" * 2**20
    rows = [
        {
            "phrase": "cot",
            "mode": "prefill",
            "n": 1,
            "method": "cot",
            "label": i % 2 == 1,
            "text": f"{huge} glitch" if i % 2 else f"{huge} photo",
        }
        for i in range(10)
    ]
    words = set(vocab_weights(pd.DataFrame(rows))["word"])
    assert words and max(map(len, words)) <= 40 and "glitch" in words


def test_vocab_csv_holds_the_top_words(made):
    csv = next(p for p in made if p.name == "vocab_lr.csv")
    header, first = csv.read_text().splitlines()[:2]
    assert header.startswith("word,coefficient,documents,share:baseline")
    assert first.startswith(f"{CORRELATED},")


def _reasoning_file(root: Path, texts_and_preds) -> Path:
    entries = [
        {"responses": [{"reasoning_response": t, "extracted_prediction": p}]}
        for t, p in texts_and_preds
    ]
    return write(folder(root, "d3", "m", "cot", "prefill") / "reasoning_x.json", entries)


@pytest.mark.parametrize(
    ("texts_and_preds", "reason"),
    [
        ([("smooth skin", "ai-generated"), ("odd hands", "ai-generated")], "needs both classes"),
        ([("the and of", "real"), ("it is", "ai-generated")], "no vocabulary"),
        ([("smooth skin", None)], "no reasoning responses"),
    ],
)
def test_vocab_lr_with_too_little_data_skips(tmp_path, texts_and_preds, reason):
    _reasoning_file(tmp_path, texts_and_preds)
    with pytest.warns(ps.PlotSkipped, match=reason):
        assert plot_vocab_lr(tmp_path, tmp_path / "out") == []
    assert not (tmp_path / "out").exists()


def test_vocab_lr_from_listed_files_and_malformed_reasoning(tmp_path):
    good = _reasoning_file(tmp_path, [("odd hands", "ai-generated"), ("clear photo", "real")])
    paths = plot_vocab_lr([good], tmp_path / "out")
    assert {p.name for p in paths} == {"vocab_lr.pdf", "vocab_lr.png", "vocab_lr.csv"}
    bad = write(tmp_path / "d3" / "m" / "s2" / "prefill" / "reasoning_y.json", [{"image": "x"}])
    with pytest.raises(ResultsFormatError, match=re.escape(f"{bad}: missing key '[0].responses'")):
        plot_vocab_lr(tmp_path, tmp_path / "out")


# make_all and the command line


def test_make_all_skips_what_the_data_cannot_make(tmp_path):
    build_tree(tmp_path, with_reasoning=False)
    with pytest.warns(ps.PlotSkipped, match="vocab_lr skipped"):
        written = make_all(tmp_path, tmp_path / "out")
    assert "vocab_lr.pdf" not in {p.name for p in written}
    assert "macro_f1_bars.pdf" in {p.name for p in written}


@pytest.mark.slow
def test_cli_main_writes_and_prints_the_paths(tree, tmp_path, capsys):
    argv = [str(tree[0]), "--out", str(tmp_path), "--models", "qwen25-vl-7b", "--method", "cot"]
    assert main(argv) == 0
    printed = capsys.readouterr().out.split()
    assert str(tmp_path / "recall_radar.pdf") in printed and len(printed) == 8
    assert all(Path(p).exists() for p in printed)


def test_cli_on_an_empty_root_writes_nothing_and_says_why(tmp_path, caplog):
    assert main([str(tmp_path)]) == 1
    reasons = [r.getMessage() for r in caplog.records]
    assert len(reasons) == 4 and all("skipped" in r for r in reasons)
    assert not (tmp_path / "figures").exists()


def test_cli_reports_a_malformed_file(tmp_path, capsys):
    doc = performance("d3", "qwen25-vl-7b", "cot", "prefill")
    del doc["metrics"]["accuracy"]
    write(folder(tmp_path, "d3", "qwen25-vl-7b", "cot", "prefill") / "performance_x.json", doc)
    assert main([str(tmp_path)]) == 2
    assert "performance_x.json: missing key 'metrics.accuracy'" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_module_runs_end_to_end(tmp_path):
    for phrase, mode in METHODS:
        doc = performance("d3", "qwen25-vl-7b", phrase, mode)
        write(folder(tmp_path, "d3", "qwen25-vl-7b", phrase, mode) / "performance_1.json", doc)
    done = subprocess.run(
        [sys.executable, "-m", "support.evaluations.pgt.plots", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    printed = done.stdout.split()
    assert printed[0] == str(tmp_path / "figures" / "confidence.json")
    assert "vocab_lr skipped: no reasoning responses" in done.stderr


# style


def test_publication_style_works_without_latex_and_restores_rc():
    before = dict(matplotlib.rcParams)
    with ps.publication_style(usetex=False):
        assert not matplotlib.rcParams["text.usetex"]
        assert matplotlib.rcParams["mathtext.fontset"] == "cm"
        assert matplotlib.rcParams["font.family"] == ["serif"]
        assert ps.tex_safe("my_run 5%") == "my_run 5%"
    assert ps.publication_rc(usetex=True)["text.usetex"] is True
    with matplotlib.rc_context({"text.usetex": True}):
        assert ps.tex_safe("my_run 5%") == r"my\_run 5\%"
    assert dict(matplotlib.rcParams) == before
    if not ps.usetex_available():
        assert ps.publication_rc()["text.usetex"] is False


def test_names_fall_back_to_the_raw_name():
    assert ps.model_name("qwen25-vl-7b") == "Qwen" and ps.model_name("gpt-4o") == "gpt-4o"
    assert ps.dataset_name("genimage-2k") == "GenImage-2k" and ps.dataset_name("x") == "x"
    keys = ["baseline", "cot", "cot/n=5", "cot/prompt", "s2", "s2/prompt", "mine", "mine/x"]
    styles = ps.method_styles(keys)
    assert styles["cot"]["facecolor"] == ps.COT_COLOR and styles["s2"]["facecolor"] == ps.S2_COLOR
    assert styles["cot/prompt"]["facecolor"] == ps.COT_COLOR  # a variant: the phrase's color...
    assert len({styles[m]["hatch"] for m in ("cot", "cot/prompt", "cot/n=5")}) == 3  # ...hatched
    assert styles["s2/prompt"]["hatch"] == styles["cot/prompt"]["hatch"] != styles["s2"]["hatch"]
    assert styles["mine"]["facecolor"] == styles["mine/x"]["facecolor"] == ps.FALLBACK_COLORS[0]


def test_no_figure_left_open(made):
    import matplotlib.pyplot as plt

    assert made and plt.get_fignums() == []  # figures are plain Figures, never pyplot's


# readable figures (issue 39, item 6)


def _legends_clear_of_axes(fig) -> None:
    """Every figure legend overlaps no axes (the rendered boxes); no legend inside an axes."""
    fig.draw_without_rendering()  # the layout is run (a bare Figure's canvas draws nothing)
    assert all(ax.get_legend() is None for ax in fig.axes)
    for legend in fig.legends:
        for ax in fig.axes:
            assert not legend.get_window_extent().overlaps(ax.get_window_extent())


def test_vocab_figure_draws_one_coefficient_a_word_and_the_shares_apart(tree):
    """No coefficient split and stacked across prompt variants (a sum that means nothing): one
    bar a word, its length the pooled fit's coefficient, and the share of each method's
    responses with the word in a heatmap beside it, the methods by display name."""
    from support.evaluations.pgt.plots.vocab import vocab_figure

    docs = reasoning_documents(tree[0])
    weights = vocab_weights(docs, top_k=5)
    with ps.publication_style():
        fig = vocab_figure(weights, method_labels(docs))
    coef_ax, heat_ax = fig.axes[:2]
    bars = coef_ax.patches
    assert len(bars) == len(weights)  # one bar a word: nothing stacked
    assert all(b.get_x() == 0 for b in bars)  # every bar starts at 0 (a stacked one would not)
    np.testing.assert_allclose([b.get_width() for b in bars], weights["coefficient"])
    assert [t.get_text() for t in coef_ax.get_yticklabels()] == list(weights["word"])
    (image,) = heat_ax.images
    methods = ["baseline", "cot", "s2"]
    np.testing.assert_allclose(image.get_array(), weights[[f"share:{m}" for m in methods]])
    labels = [t.get_text() for t in heat_ax.get_xticklabels()]
    assert labels == ["Baseline", "CoT (prefill)", "S2 (prefill)"]
    assert not fig.legends  # the methods are column labels, not a legend over the data
    _legends_clear_of_axes(fig)


def test_bar_figure_models_in_the_given_order_and_the_legend_outside(tree):
    df = load_performance(tree[0])
    default = macro_f1_figure(df)
    names = [t.get_text() for t in default.axes[0].get_xticklabels()]
    assert names == ["Qwen", "LLaVa"]  # no order given: the known names' order
    fig = macro_f1_figure(df, order=("llava-onevision-7b", "qwen25-vl-7b"))
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["LLaVa", "Qwen"]
    _legends_clear_of_axes(fig)


def test_radar_models_in_the_given_order(tree):
    fig = recall_radar_figure(
        load_performance(tree[0]), method="cot", order=("llava-onevision-7b", "qwen25-vl-7b")
    )
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["LLaVa: CoT (prefill)", "Qwen: CoT (prefill)"]
    _legends_clear_of_axes(fig)


def test_make_all_passes_the_order_to_every_figure(tree, tmp_path, monkeypatch):
    import support.evaluations.pgt.plots as plots

    seen = {}
    monkeypatch.setattr(
        plots, "plot_macro_f1_bars", lambda df, out, order: seen.setdefault("bars", order) and []
    )
    monkeypatch.setattr(
        plots,
        "plot_recall_radar",
        lambda df, out, models, method, order: seen.setdefault("radar", order) and [],
    )
    monkeypatch.setattr(plots, "plot_vocab_lr", lambda root, out, run: [])
    make_all(tree[0], tmp_path, order=("b", "a"))
    assert seen == {"bars": ("b", "a"), "radar": ("b", "a")}
    seen.clear()
    make_all(tree[0], tmp_path, models=["llava-onevision-7b"])  # the CLI's --models: its order
    assert seen == {"bars": ("llava-onevision-7b",), "radar": ("llava-onevision-7b",)}
