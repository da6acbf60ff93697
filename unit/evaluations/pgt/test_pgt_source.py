"""`--compat source` for pgt: golden tests against the original's rules (Zero-shot-PGT, commit
f42b715; file:line in each comment), and the source profile end to end.

Expected values are worked out by hand from the original's code, never produced by the code under
test."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from support.evaluations.pgt import source_metrics as sm
from support.evaluations.pgt.answers import (
    AI,
    LABELS,
    REAL,
    extract_prediction,
    extract_prediction_source,
    majority_vote,
    majority_vote_source,
)
from support.evaluations.pgt.dataset import source_order
from support.evaluations.pgt.phrases import (
    PHRASES,
    QUESTION,
    build_prompt,
    instruction_version_source,
)
from support.settings import OutputSettings, RunSettings
from support.types import Outcome

N = None  # an answer that names no label


# ---- label extraction: helpers.py:519-538 -------------------------------------------------------
# text.lower().strip(); 'real' in t and 'ai-generated' not in t -> real; any of ai-generated /
# artificial / fake / generated in t and 'real' not in t -> ai-generated; 'real' in t -> real;
# else None.
SOURCE_ANSWERS = [
    (" real", REAL),
    (" ai-generated", AI),
    ("AI-Generated.", AI),
    ("**Real**", REAL),
    ("The image is fake.", AI),  # 'fake', no 'real'
    ("synthetic", N),  # not one of the source's terms
    ("AI", N),  # 'ai' alone is not a term
    ("AI generated image", AI),  # 'generated'
    ("ai_generated", AI),  # 'generated'
    ("computer-generated", AI),
    ("Artificially created", AI),  # 'artificial' is a substring
    ("It is not real.", REAL),  # substring 'real': the negation is not read
    ("This image isn't AI-generated; it is a photo.", AI),  # 'ai-generated', no 'real'
    ("Is this image real or AI-generated? It is real", REAL),  # both present -> real
    ("real or ai-generated: ai-generated", REAL),  # both present -> real
    ("Final Answer: AI-generated (not real)", REAL),  # both present -> real
    ("unrealistic", REAL),  # 'real' inside 'unrealistic'
    ("Unrealistic lighting, so AI-generated", REAL),  # both present -> real
    ("REALLY fake", REAL),  # 'real' inside 'really' wins before 'fake'
    ("  ai-generated  \n", AI),
    ("The answer is: authentic", N),
    ("I cannot tell.", N),
    ("", N),
    ("fake, generated, artificial", AI),
]


@pytest.mark.parametrize(("text", "label"), SOURCE_ANSWERS)
def test_source_label_extraction(text, label):
    assert extract_prediction_source(text) == label


def test_the_two_extractors_differ_where_the_source_reads_substrings():
    # the write-up's reader (support.evaluations.pgt.answers.extract_prediction) reads negations and
    # synonyms; the source's does not: 11 of these 24 answers read differently
    differ = [t for t, _ in SOURCE_ANSWERS if extract_prediction(t) != extract_prediction_source(t)]
    assert "It is not real." in differ and "synthetic" in differ
    assert len(differ) == 11


@given(st.one_of(st.text(max_size=300), st.none(), st.integers()))
def test_source_extraction_never_raises(text):
    assert extract_prediction_source(text) in (*LABELS, None)


# ---- the vote: helpers.py:498-509 ---------------------------------------------------------------
# Counter(predictions) with None a candidate; more than one distinct value and the top two
# most_common(2) tied -> 'real' (whatever the two are); else most_common(1)[0][0] (may be None);
# vote_distribution = dict(Counter) in first-appearance order, None written as "null" by json.dump.
SOURCE_VOTES = [
    ([AI], AI, {"ai-generated": 1}),
    ([N], N, {"null": 1}),
    ([AI, REAL], REAL, {"ai-generated": 1, "real": 1}),
    ([AI, N], REAL, {"ai-generated": 1, "null": 1}),  # a tie with None goes to real
    ([N, N, AI], N, {"null": 2, "ai-generated": 1}),  # None wins outright
    ([AI, AI, N], AI, {"ai-generated": 2, "null": 1}),
    ([REAL, AI, N], REAL, {"real": 1, "ai-generated": 1, "null": 1}),  # three-way tie
    ([AI, AI, REAL, REAL, N], REAL, {"ai-generated": 2, "real": 2, "null": 1}),
    ([N, AI, AI, REAL], AI, {"null": 1, "ai-generated": 2, "real": 1}),
    ([N, N, AI, AI, REAL], REAL, {"null": 2, "ai-generated": 2, "real": 1}),  # None/ai tie
    ([AI, AI, AI, N, N], AI, {"ai-generated": 3, "null": 2}),
    ([REAL, N, N], N, {"real": 1, "null": 2}),
]


@pytest.mark.parametrize(("predictions", "winner", "distribution"), SOURCE_VOTES)
def test_source_vote(predictions, winner, distribution):
    vote = majority_vote_source(predictions)
    assert vote.prediction == winner
    assert vote.distribution == distribution
    assert list(vote.distribution) == list(distribution)  # first-appearance order


def test_the_votes_differ_where_none_is_a_candidate():
    # the write-up's vote ignores None: [ai, None] is ai there, real in the source
    assert majority_vote([AI, N]).prediction == AI
    assert majority_vote([N, N, AI]).prediction == AI
    assert majority_vote_source([]).prediction is None  # no responses (the source writes '')


# ---- stage 2, prompts, sampling: helpers.py:432, 378; config.py:142-159 -------------------------
@pytest.fixture
def tiny_csv(tmp_path: Path) -> Path:
    rows = []
    for i, label in enumerate(("real", "ai-generated", "real")):
        Image.new("RGB", (16, 16), (i * 40, 0, 0)).save(tmp_path / f"{i}.png")
        rows.append(f"{i}.png,{label}")
    csv = tmp_path / "tiny.csv"
    csv.write_text("image_path,label\n" + "\n".join(rows) + "\n")
    return csv


def evaluation(csv: Path, tmp_path: Path, compat: str = "source", **values):
    from support.evaluations.pgt.spec import configure
    from support.evaluations.pgt.task import PgtEvaluation

    run = RunSettings(
        compat=compat, output=OutputSettings(cache_dir=tmp_path, results_dir=tmp_path / "results")
    )
    settings = configure({"pgt_dataset": str(csv), **values}, run)
    return PgtEvaluation.load(run, settings)


def test_stage2_continues_with_a_space_and_the_answer_phrase(tiny_csv, tmp_path):
    ev = evaluation(tiny_csv, tmp_path, pgt_phrase=["cot"], pgt_mode="prefill", pgt_n="5")
    case = next(c for c in ev.cases() if c.params["n"] == 5)
    first = ev.stage1_request(case)
    assert first.prefill == "Let's think step by step"
    assert (first.temperature, first.max_tokens, first.n, first.seed) == (1.0, 512, 5, 0)
    second = ev.stage2_request(first, " It looks smooth.", case.params["label"])
    # helpers.py:432: example['prompt'] + reasoning + " " + config.ANSWER_PHRASE
    assert second.prefill == (
        "Let's think step by step It looks smooth. Final Answer (real/ai-generated):"
    )
    assert (second.temperature, second.max_tokens, second.n) == (0.0, 512, 1)
    assert second.system == first.system and second.parts == first.parts
    # without a prefill (prompt mode) stage 2's prefill is the reasoning and the phrase
    ev = evaluation(tiny_csv, tmp_path, pgt_phrase=["cot"], pgt_mode="prompt")
    case = ev.cases()[0]
    first = ev.stage1_request(case)
    assert (first.temperature, first.seed) == (0.0, None)  # n=1: greedy, as the source
    assert first.parts[1].text == QUESTION + " Please think step by step."
    second = ev.stage2_request(first, " Smooth.", "real")
    assert second.prefill == " Smooth. Final Answer (real/ai-generated):"
    # the write-up's cue and token limit stay as they were
    ev = evaluation(tiny_csv, tmp_path, compat="writeup", pgt_phrase=["cot"], pgt_mode="prompt")
    second = ev.stage2_request(ev.stage1_request(ev.cases()[0]), " Smooth.", "real")
    assert second.prefill == " Smooth.\n\nFinal Answer (real/ai-generated):"
    assert second.max_tokens == 16


def test_all_sixteen_phrases_and_the_default_three():
    # config.py:142-159, verbatim
    assert list(PHRASES) == [
        "baseline", "cot", "artifacts", "style", "o2", "s2", "s3", "s4", "s5", "s6", "s7",
        "details", "flaws", "pixel", "zoom", "texture",
    ]  # fmt: skip
    assert PHRASES["s7"] == "Let's examine the synthesis artifacts and the style"
    assert PHRASES["pixel"] == "Let's examine pixel by pixel"
    assert PHRASES["texture"] == "Let's examine the textures"
    from support.evaluations.pgt.spec import PgtSettings

    assert list(PgtSettings().phrases) == ["baseline", "cot", "s2"]


def test_source_instruction_version():
    # config.py get_phrase_instruction_version: replace("Let's", "Please"), then "." unless the
    # text ends with one
    assert instruction_version_source("Let's zoom in") == "Please zoom in."
    assert instruction_version_source("let's look.") == "let's look."  # case-sensitive
    assert instruction_version_source("Let's see! Let's go") == "Please see! Please go."
    assert instruction_version_source("") == ""
    for text in PHRASES.values():  # the registered phrases read the same in both profiles
        for mode in ("prompt", "instruct"):
            assert build_prompt(text, mode, instruct=instruction_version_source) == build_prompt(
                text, mode
            )


# ---- order: helpers.py:54-55 --------------------------------------------------------------------
def test_source_order_is_the_seed0_shuffle():
    # Python 3.11's random.seed(0); random.shuffle(list(range(10))) gives this permutation
    assert source_order(10) == [7, 8, 1, 5, 3, 4, 2, 0, 9, 6]
    # helpers.py:54-55 IS `random.seed(0); random.shuffle(examples)` on the module generator: the
    # same call sequence gives the same order for any length (a shuffle's permutation depends on
    # the length only)
    for n in (0, 1, 2, 5, 48, 101):
        expected = list(range(n))
        random.seed(0)
        random.shuffle(expected)
        assert source_order(n) == expected


def test_source_order_leaves_the_global_generator_alone():
    random.seed(123)
    a = random.random()
    random.seed(123)
    source_order(50)
    assert random.random() == a


def test_debug_takes_the_first_five_of_the_source_order(tmp_path):
    from support.evaluations.pgt.synthetic import build_pgt_sample

    csv = build_pgt_sample(tmp_path / "sample")
    ev = evaluation(csv, tmp_path, pgt_debug=True)
    assert [e.row for e in ev.examples] == [1, 33, 36, 0, 20]  # source_order(48)[:5]
    assert [c.params["order"] for c in ev.cases()][:3] == [0, 0, 0]  # baseline, cot, ...
    writeup = evaluation(csv, tmp_path, compat="writeup", pgt_debug=True)
    assert [e.row for e in writeup.examples] == [0, 1, 2, 3, 4]
    assert "compat" not in writeup.cases()[0].params  # the write-up's cases are as before
    # --samples and the quick subset take the same images in both profiles
    ev, writeup = (evaluation(csv, tmp_path, compat=c) for c in ("source", "writeup"))
    quick = [{c.params["row"] for c in e.cases() if e.is_quick(c)} for e in (ev, writeup)]
    assert quick[0] == quick[1] and len(quick[0]) == 6
    assert [e.row for e in ev.examples] == source_order(48)


# ---- metrics: helpers.py:645-652, compute_confidence_intervals.py:40-134 ------------------------
def test_zero_denominators_are_zero():
    # only real images, all called real: TP = FP = FN = 0, TN = 4
    m = sm.class_metrics(0, 0, 0, 4)
    assert {k: float(v) for k, v in m[AI].items()} == {"precision": 0, "recall": 0, "f1": 0}
    assert {k: float(v) for k, v in m[REAL].items()} == {"precision": 1, "recall": 1, "f1": 1}
    assert float(sm.macro_f1(np.array([0, 0, 0, 4]))) == 0.5  # the write-up's rule gives 1.0
    # nothing predicted ai-generated but AI images missed: precision 0 (write-up: 1.0 or NaN)
    m = sm.class_metrics(0, 0, 3, 2)
    assert float(m[AI]["precision"]) == 0.0 and float(m[AI]["f1"]) == 0.0
    perf = sm.performance_metrics([REAL, REAL], [REAL, REAL], [(REAL, REAL), (REAL, REAL)])
    assert perf["macro_f1"] == 0.5 and perf["class_metrics"][AI]["recall"] == 0
    assert "individual_responses" not in perf  # n=1: as many responses as images


def test_performance_metrics_are_the_source_file_with_none_wrong():
    y_true = [AI, AI, REAL, REAL, AI]
    y_pred = [AI, N, N, REAL, REAL]
    individual = [(AI, AI), (N, AI), (N, REAL), (REAL, REAL), (REAL, AI), (AI, AI)]
    m = sm.performance_metrics(y_true, y_pred, individual)
    # helpers.py calculate_metrics: keys in this order; None is FN for an AI image, FP for a real
    assert list(m) == [
        "total_examples", "correct_predictions", "accuracy", "confusion_matrix",
        "class_metrics", "macro_f1", "individual_responses",
    ]  # fmt: skip
    assert m["confusion_matrix"] == {"TP": 1, "TN": 1, "FP": 1, "FN": 2}
    assert m["correct_predictions"] == 2 and m["accuracy"] == 0.4
    assert list(m["class_metrics"]) == [AI, REAL]
    # ai: p = 1/2, r = 1/3, f1 = 2*(1/2)*(1/3)/(1/2+1/3) = 0.4; real: p = 1/3, r = 1/2, f1 = 0.4
    assert m["class_metrics"][AI]["f1"] == pytest.approx(0.4)
    assert m["macro_f1"] == pytest.approx(0.4)
    assert m["individual_responses"] == {"total": 6, "correct": 3, "accuracy": 0.5}


@settings(deadline=None)  # the first call imports scikit-learn
@given(st.lists(st.tuples(st.sampled_from(LABELS), st.sampled_from([*LABELS, None])), min_size=1))
def test_source_class_metrics_agree_with_scikit_learn_zero_division_0(pairs):
    from sklearn.metrics import precision_recall_fscore_support

    y_true = [t for t, _ in pairs]
    y_pred = [p for _, p in pairs]
    wrong = {AI: REAL, REAL: AI}  # a None vote is the wrong label for the source
    filled = [p if p is not None else wrong[t] for t, p in pairs]
    p, r, f, _ = precision_recall_fscore_support(y_true, filled, labels=[AI, REAL], zero_division=0)
    m = sm.performance_metrics(y_true, y_pred, [])
    for i, label in enumerate((AI, REAL)):
        assert m["class_metrics"][label]["precision"] == pytest.approx(p[i])
        assert m["class_metrics"][label]["recall"] == pytest.approx(r[i])
        assert m["class_metrics"][label]["f1"] == pytest.approx(f[i])


def _source_confidence(y_true, y_pred, n_bootstrap, level=0.95, seed=0):
    """compute_confidence_intervals.py's recipe written out: RandomState(seed + i).choice(n, n)
    per resample, list indexing, the macro F1 of helpers.py on the lists, np.percentile."""

    def macro(preds, truth):
        tp = sum(t == AI and p == AI for p, t in zip(preds, truth, strict=True))
        tn = sum(t == REAL and p == REAL for p, t in zip(preds, truth, strict=True))
        fp = sum(t == REAL and p != REAL for p, t in zip(preds, truth, strict=True))
        fn = sum(t == AI and p != AI for p, t in zip(preds, truth, strict=True))
        f1s = []
        for a, b, c in ((tp, fp, fn), (tn, fn, fp)):
            prec = a / (a + b) if (a + b) > 0 else 0
            rec = a / (a + c) if (a + c) > 0 else 0
            f1s.append(2 * prec * rec / (prec + rec) if (prec + rec) > 0 else 0)
        return (f1s[1] + f1s[0]) / 2

    scores = []
    for i in range(n_bootstrap):
        idx = np.random.RandomState(seed + i).choice(len(y_pred), size=len(y_pred), replace=True)
        scores.append(macro([y_pred[j] for j in idx], [y_true[j] for j in idx]))
    alpha = 1 - level
    return {
        "point": float(macro(y_pred, y_true)),
        "ci_95": [
            float(np.percentile(scores, (alpha / 2) * 100)),
            float(np.percentile(scores, (1 - alpha / 2) * 100)),
        ],
        "n_bootstrap": n_bootstrap,
        "confidence_level": level,
    }


def test_confidence_interval_is_the_source_recipe():
    rng = random.Random(7)
    y_true = [rng.choice(LABELS) for _ in range(37)]
    y_pred = [rng.choice([*LABELS, None]) for _ in range(37)]
    got = sm.bootstrap_macro_f1(y_true, y_pred, n_bootstrap=400)
    assert got == _source_confidence(y_true, y_pred, 400)  # exactly: same draws, same floats
    assert list(got) == ["point", "ci_95", "n_bootstrap", "confidence_level"]
    assert sm.N_BOOTSTRAP == 10_000  # compute_confidence_intervals.py: N_BOOTSTRAP
    assert got["ci_95"][0] < got["point"] < got["ci_95"][1]


# ---- recall per generator: plot_recall_radar.py:112-178, 204-205 ---------------------------------
def outcome(row: int, generator: str, label: str, predicted: str | None) -> Outcome:
    return Outcome(
        case_id=f"r{row}",
        evaluation="pgt",
        model="m",
        status="unparsable" if predicted is None else "correct" if predicted == label else "wrong",
        group={
            "dataset": "d",
            "phrase": "cot",
            "mode": "prefill",
            "n": "1",
            "generator": generator,
        },
        cluster=f"r{row:05d}",
        scores={"y_true": label, "y_pred": predicted},
        params={"row": row, "label": label, "compat": "source", "order": row},
    )


def test_recall_per_generator_counts_ai_images_and_drops_none():
    from support.evaluations.pgt.summary import generator_recall

    outs = [
        outcome(0, "image_gen0", AI, AI),
        outcome(1, "image_gen0", AI, N),  # dropped from TP and FN
        outcome(2, "image_gen0", AI, REAL),
        outcome(3, "image_gen1", AI, N),  # TP = FN = 0 -> recall 0.0
        outcome(4, "real", REAL, REAL),  # real images are skipped
        outcome(5, "unknown", AI, AI),  # the radar leaves 'unknown' out
    ]
    got = generator_recall(outs, n_resamples=50, source=True)
    assert set(got) == {"image_gen0", "image_gen1"}
    assert got["image_gen0"]["recall"] == 0.5 and got["image_gen0"]["n"] == 2  # TP 1, FN 1
    assert got["image_gen1"]["recall"] == 0.0 and got["image_gen1"]["n"] == 0
    writeup = [Outcome(**{**o.__dict__, "params": {"row": 0, "label": o.params["label"]}})
               for o in outs]  # fmt: skip
    assert generator_recall(writeup, n_resamples=50)["image_gen0"]["recall"] == pytest.approx(1 / 3)


# ---- end to end (pytester subprocess runs) ------------------------------------------------------
@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    from support.evaluations.pgt.synthetic import build_pgt_sample

    return build_pgt_sample(tmp_path_factory.mktemp("pgt"))


def read(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_quick_oracle_run_is_perfect_in_both_profiles(run_suite):
    for compat, run_id in (("source", "s"), ("writeup", "w")):
        result, root = run_suite(  # --override: the first run's files would be kept results
            "pgt",
            "-m",
            "quick",
            f"--compat={compat}",
            "--model=oracle",
            "--override",
            run_id=run_id,
        )
        assert result.ret == 0, result.stdout.str()[-3000:]
        summary = pd.read_csv(root / "pgt" / run_id / "summary.csv")
        assert len(summary) == 11 and (summary["n"] == 6).all()
        assert (summary["accuracy"] == 1.0).all() and (summary["macro_f1"] == 1.0).all()


@pytest.mark.slow
def test_source_files(run_suite, sample, tmp_path):
    result, root = run_suite(
        "pgt",
        f"--pgt-dataset={sample}",
        "--compat=source",
        "--model=oracle,chance",
        "--pgt-phrase=baseline,cot",
        "--pgt-mode=prefill",
        "--pgt-n=1,3",
        "-m",
        "quick",
    )
    assert result.ret == 0, result.stdout.str()[-3000:]
    base = root / "pgt" / "synthetic_sample"
    folder = base / "chance" / "cot" / "prefill" / "n=3"
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["confidence.json", "performance_fixed_r1.json", "reasoning_r1.json"]
    assert (root / "pgt/logs/synthetic_sample/chance/cot/prefill/n=3/evaluation_r1.log").is_file()
    perf = read(folder / "performance_fixed_r1.json")
    assert list(perf) == ["model", "dataset", "phrase", "mode", "n_responses", "metrics"]
    assert set(perf["metrics"]) == {
        "total_examples", "correct_predictions", "accuracy", "confusion_matrix",
        "class_metrics", "macro_f1", "individual_responses",
    }  # fmt: skip
    entries = read(folder / "reasoning_r1.json")
    assert list(entries[0]) == [
        "image", "question", "full_prompt", "ground_truth", "responses",
        "aggregated_prediction", "aggregated_score", "vote_distribution",
    ]  # fmt: skip
    # the images in the source's order: the quick rows sorted by their place in source_order
    order = source_order(48)
    csv_rows = pd.read_csv(sample)["image_path"].tolist()
    got_rows = [csv_rows.index(str(Path(e["image"]).relative_to(sample.parent))) for e in entries]
    assert got_rows == sorted(got_rows, key=order.index)
    # confidence.json recomputed from the reasoning file by the source's recipe
    confidence = read(folder / "confidence.json")
    y_true = [e["ground_truth"] for e in entries]
    y_pred = [e["aggregated_prediction"] for e in entries]
    assert confidence["macro_f1"] == _source_confidence(y_true, y_pred, 10_000)
    assert confidence["metadata"] == {
        "dataset": "synthetic_sample", "model": "chance", "phrase": "cot", "mode": "prefill",
        "n_responses": 3, "n_examples": 6,
    }  # fmt: skip
    assert perf["metrics"]["macro_f1"] == confidence["macro_f1"]["point"]
    # baseline records the default mode, as the source's --mode
    assert read(base / "oracle/baseline/performance_fixed_r1.json")["mode"] == "prefill"
    # the bar chart reads the source's files (error bars from confidence.json)
    from support.evaluations.pgt.plots.data import load_performance

    df = load_performance(root / "pgt", run="fixed_r1")
    assert len(df) == 2 * 2 * 2 and df["macro_f1_lo"].notna().all()


@pytest.mark.slow
def test_d3_as_published_runs_end_to_end_in_both_profiles(run_suite, tmp_path):
    # the repository's data/d3 CSVs: `image,answer`, absolute /data3/zkachwal/ELSA_D3 paths
    data, images = tmp_path / "data", tmp_path / "ELSA_D3"
    (data / "d3").mkdir(parents=True)
    images.mkdir()
    names = ["0_real.png", "2_image_gen0.png", "7_image_gen1.png", "9_image_gen2.png"]
    names += ["11_real.png", "6_image_gen3.png", "12_real.png", "14_image_gen1.png"]
    lines = ["image,answer"]
    for i, name in enumerate(names):
        Image.new("RGB", (32, 32), (i * 30, 90, 0)).save(images / name)
        lines.append(
            f"/data3/zkachwal/ELSA_D3/{name},{'real' if 'real' in name else 'ai-generated'}"
        )
    (data / "d3" / "2k_sample.csv").write_text("\n".join(lines) + "\n")
    args = ["--pgt-dataset=d3-2k", f"--pgt-root={data}", "--model=oracle"]
    args += [f"--pgt-path-map=/data3/zkachwal/ELSA_D3={images}", "--pgt-phrase=baseline"]
    for compat in ("source", "writeup"):
        result, root = run_suite("pgt", *args, f"--compat={compat}", "--override", run_id=compat)
        assert result.ret == 0, result.stdout.str()[-3000:]
        summary = pd.read_csv(root / "pgt" / compat / "summary.csv")
        assert summary[["n", "accuracy", "macro_f1"]].values.tolist() == [[8, 1.0, 1.0]]
        recall = pd.read_csv(root / "pgt" / compat / "generator_recall.csv")
        expected = {"image_gen0": 1, "image_gen1": 2, "image_gen2": 1, "image_gen3": 1}
        if compat == "writeup":
            expected["real"] = 3  # the write-up reports the real images' recall too
        assert dict(zip(recall["generator"], recall["n"], strict=True)) == expected
        assert (recall["recall"] == 1.0).all()
    entries = read(root / "pgt/d3-2k/oracle/baseline/reasoning_source.json")
    assert [Path(e["image"]).name for e in entries] == [names[i] for i in source_order(8)]


def test_one_profile_never_skips_the_others_results(tmp_path):
    """A writeup run keeps reasoning files beside performance_<ts>.json, a source run beside
    performance_fixed_<ts>.json: each profile's keep-existing check sees only its own."""
    import json as _json

    from support.evaluations.pgt.spec import kept_results

    entries = [{"image": "a.png", "error": None}, {"image": "b.png", "error": "boom"}]
    for stamp, perf in (("w1", "performance_w1.json"), ("s1", "performance_fixed_s1.json")):
        (tmp_path / f"reasoning_{stamp}.json").write_text(_json.dumps(entries))
        (tmp_path / perf).write_text("{}")
    (tmp_path / "reasoning_orphan.json").write_text(_json.dumps(entries))  # no performance file
    writeup = kept_results(tmp_path, source=False)
    source = kept_results(tmp_path, source=True)
    assert [p.rsplit("/", 1)[-1] for p, _ in writeup] == ["reasoning_w1.json"]
    assert [p.rsplit("/", 1)[-1] for p, _ in source] == ["reasoning_s1.json"]
    assert writeup[0][1] == frozenset({"a.png"})
