"""Edges of pgt's `--compat source` metrics (support/evaluations/pgt/source_metrics.py) against
scikit-learn and against counts worked out by hand from the original's rules (Zero-shot-PGT
f42b715, helpers.py:645-652, compute_confidence_intervals.py:40-134, plot_recall_radar.py)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix, f1_score, precision_recall_fscore_support

from support.evaluations.pgt import source_metrics as sm
from support.evaluations.pgt.answers import AI, REAL

N = None  # an answer that names no label


# ---- the confusion matrix: ai-generated positive, None wrong ------------------------------------
@pytest.mark.parametrize(
    ("truth", "prediction", "code"),
    [
        (AI, AI, 0),  # TP
        (REAL, AI, 1),  # FP
        (REAL, N, 1),  # None on a real image: FP
        (REAL, "maybe", 1),  # any non-label is wrong
        (AI, REAL, 2),  # FN
        (AI, N, 2),  # None on an AI image: FN
        (REAL, REAL, 3),  # TN
    ],
)
def test_confusion_code(truth: str, prediction: object, code: int) -> None:
    assert sm.CONFUSION[code] == ("TP", "FP", "FN", "TN")[code]
    assert sm.confusion_code(truth, prediction) == code


def test_confusion_rows_are_one_hot_integer_counts() -> None:
    rows = sm.confusion_rows([AI, REAL, AI, REAL], [AI, N, REAL, REAL])
    assert rows.dtype == np.int64
    assert rows.tolist() == [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    empty = sm.confusion_rows([], [])  # no image: no row, still four columns
    assert empty.shape == (0, 4)
    with pytest.raises(ValueError):  # a prediction list that does not match the images
        sm.confusion_rows([AI, REAL], [AI])


# ---- zero rules and vectorised metrics against scikit-learn (zero_division=0) --------------------
def test_zero_ratio() -> None:
    got = sm.zero_ratio(np.array([0, 1, 3, 2]), np.array([0, 2, 4, 1]))
    assert got.tolist() == [0.0, 0.5, 0.75, 2.0]  # den 1 divides (not the 0 rule)
    assert sm.zero_ratio(np.array([5.0]), np.array([0.0])).tolist() == [0.0]
    # a fractional denominator divides too (1 / 0.5 = 2): only 0 is special
    assert sm.zero_ratio(np.array([1.0]), np.array([0.5])).tolist() == [2.0]


COUNT_TABLE = [  # (TP, FP, FN, TN): every zero pattern of the two classes' denominators
    (3, 1, 2, 4),
    (1, 0, 0, 0),  # one image, called right
    (0, 1, 0, 0),
    (0, 0, 1, 0),
    (0, 0, 0, 1),
    (2, 2, 0, 0),
    (0, 0, 2, 2),
    (0, 3, 3, 0),  # every answer wrong
    (5, 0, 0, 5),
    (1, 2, 3, 4),
]


def _labels(tp: int, fp: int, fn: int, tn: int) -> tuple[list[str], list[str]]:
    y_true = [AI] * tp + [REAL] * fp + [AI] * fn + [REAL] * tn
    y_pred = [AI] * tp + [AI] * fp + [REAL] * fn + [REAL] * tn
    return y_true, y_pred


def test_class_metrics_and_macro_f1_agree_with_scikit_learn_vectorised() -> None:
    counts = np.array(COUNT_TABLE)
    got = sm.class_metrics(counts[:, 0], counts[:, 1], counts[:, 2], counts[:, 3])
    macro = sm.macro_f1(counts)
    assert macro.shape == (len(COUNT_TABLE),)
    for i, row in enumerate(COUNT_TABLE):
        y_true, y_pred = _labels(*row)
        p, r, f, _ = precision_recall_fscore_support(
            y_true, y_pred, labels=[AI, REAL], zero_division=0
        )
        for j, label in enumerate((AI, REAL)):
            assert got[label]["precision"][i] == pytest.approx(p[j])
            assert got[label]["recall"][i] == pytest.approx(r[j])
            assert got[label]["f1"][i] == pytest.approx(f[j])
        # macro F1 = mean of both classes' F1, absent classes counting 0 (not dropped)
        want = f1_score(y_true, y_pred, labels=[AI, REAL], average="macro", zero_division=0)
        assert macro[i] == pytest.approx(want)


def test_macro_f1_of_a_stack_of_count_tables() -> None:
    # (2, 2, 4): leading axes kept; (3,1,2,4): ai f1 = 2*3/(2*3+1+2) = 2/3, real = 8/11
    stack = np.array([[[3, 1, 2, 4], [0, 0, 0, 1]], [[1, 0, 0, 0], [0, 3, 3, 0]]])
    got = sm.macro_f1(stack)
    assert got.shape == (2, 2)
    assert got.ravel().tolist() == pytest.approx([(2 / 3 + 8 / 11) / 2, 0.5, 0.5, 0.0])


# ---- performance_<run>.json's metrics -----------------------------------------------------------
def test_performance_metrics_against_scikit_learn() -> None:
    y_true = [AI, AI, AI, REAL, REAL, REAL, REAL]
    y_pred = [AI, AI, N, AI, REAL, REAL, N]
    filled = [AI, AI, REAL, AI, REAL, REAL, AI]  # None -> the wrong label
    individual = list(zip(y_pred, y_true, strict=True))  # n = 1: one response an image
    m = sm.performance_metrics(y_true, y_pred, individual)
    tn, fp, fn, tp = confusion_matrix(y_true, filled, labels=[REAL, AI]).ravel()
    assert m["confusion_matrix"] == {"TP": tp, "TN": tn, "FP": fp, "FN": fn}
    assert list(m["confusion_matrix"]) == ["TP", "TN", "FP", "FN"]  # helpers.py's key order
    assert all(type(v) is int for v in m["confusion_matrix"].values())
    assert m["total_examples"] == 7 and m["correct_predictions"] == 4
    assert m["accuracy"] == pytest.approx(4 / 7)
    p, r, f, _ = precision_recall_fscore_support(y_true, filled, labels=[AI, REAL], zero_division=0)
    for j, label in enumerate((AI, REAL)):
        got = m["class_metrics"][label]
        assert list(got) == ["precision", "recall", "f1"]
        assert all(type(v) is float for v in got.values())
        assert [got["precision"], got["recall"], got["f1"]] == pytest.approx([p[j], r[j], f[j]])
    assert type(m["macro_f1"]) is float and m["macro_f1"] == pytest.approx(f.mean())
    assert "individual_responses" not in m  # one response an image (n = 1)


def test_individual_responses_only_with_more_responses_than_images() -> None:
    y_true, y_pred = [AI, REAL], [AI, AI]
    # (prediction, truth) of each response: 4 of 6 right, (AI, AI) and (REAL, REAL) three times
    three = [(AI, AI), (REAL, AI), (N, AI), (REAL, REAL), (REAL, REAL), (REAL, REAL)]
    m = sm.performance_metrics(y_true, y_pred, three)
    assert m["individual_responses"] == {"total": 6, "correct": 4, "accuracy": 4 / 6}
    m = sm.performance_metrics(y_true, y_pred, three[:2])  # as many responses as images
    assert "individual_responses" not in m
    with pytest.raises(ValueError):  # predictions that do not match the images
        sm.performance_metrics([AI, REAL], [AI], [])


# ---- confidence.json: the bootstrap of the macro F1 ---------------------------------------------
def _macro(t: list[str], p: list[str]) -> float:
    """helpers.py:645-652 by hand: per class P, R, F1 with 0 for a zero denominator, then mean."""
    f1s = []
    for pos in (AI, REAL):
        hit = sum(a == pos and b == pos for a, b in zip(t, p, strict=True))
        prec = hit / sum(b == pos for b in p) if pos in p else 0.0
        rec = hit / sum(a == pos for a in t) if pos in t else 0.0
        f1s.append(2 * prec * rec / (prec + rec) if prec + rec > 0 else 0.0)
    return (f1s[0] + f1s[1]) / 2


def _percentile_interval(y_true, y_pred, n_bootstrap: int, level: float, seed: int) -> list:
    """compute_confidence_intervals.py:40-134 written out: RandomState(seed + i).choice(n, n),
    None as the wrong label, np.percentile at 100 * alpha / 2 and 100 * (1 - alpha / 2)."""
    wrong = {AI: REAL, REAL: AI}
    filled = [p if p in (AI, REAL) else wrong[t] for t, p in zip(y_true, y_pred, strict=True)]
    scores = []
    for i in range(n_bootstrap):
        idx = np.random.RandomState(seed + i).choice(len(y_true), size=len(y_true), replace=True)
        scores.append(_macro([y_true[j] for j in idx], [filled[j] for j in idx]))
    alpha = 1 - level
    return [np.percentile(scores, 100 * alpha / 2), np.percentile(scores, 100 * (1 - alpha / 2))]


@pytest.mark.parametrize(("level", "seed"), [(0.8, 3), (0.5, 11)])
def test_bootstrap_level_and_seed_are_the_source_recipe(level: float, seed: int) -> None:
    # no real image called real: no TN, so a count row has only three codes
    y_true = [AI, AI, AI, REAL, AI, REAL, AI, REAL, AI]
    y_pred = [AI, REAL, AI, AI, N, N, AI, AI, AI]
    got = sm.bootstrap_macro_f1(y_true, y_pred, n_bootstrap=60, confidence_level=level,
                                random_seed=seed)  # fmt: skip
    assert got["n_bootstrap"] == 60 and got["confidence_level"] == level
    assert got["ci_95"] == pytest.approx(_percentile_interval(y_true, y_pred, 60, level, seed))
    filled = [AI, REAL, AI, AI, REAL, AI, AI, AI, AI]
    want = f1_score(y_true, filled, labels=[AI, REAL], average="macro", zero_division=0)
    assert got["point"] == pytest.approx(want) == _macro(y_true, filled)


def test_bootstrap_percentiles_between_distinct_resamples() -> None:
    # 40 images: the resamples' macro F1 take many values, so the 25th and 75th percentiles
    # (level 0.5) fall between distinct sorted scores and any shift of either shows
    rng = np.random.RandomState(1)
    y_true = [AI if v else REAL for v in rng.randint(0, 2, 40)]
    y_pred = [[AI, REAL, N][v] for v in rng.randint(0, 3, 40)]
    got = sm.bootstrap_macro_f1(y_true, y_pred, n_bootstrap=50, confidence_level=0.5)
    want = _percentile_interval(y_true, y_pred, 50, 0.5, 0)
    assert got["ci_95"] == pytest.approx(want, rel=1e-12)
    assert want[0] < got["point"] < want[1]


# ---- recall per generator: plot_recall_radar.py:112-178, 204-205 ---------------------------------
def test_generator_counts_and_recall() -> None:
    entries = [
        ("g1", AI, AI),
        ("g1", AI, AI),
        ("g1", AI, REAL),
        ("g1", AI, N),  # in neither
        ("g1", REAL, AI),  # a real image: skipped
        ("g2", AI, REAL),
        ("g2", AI, REAL),
        ("real", AI, AI),  # generator `real`: left out
        ("unknown", AI, AI),  # left out
        ("g3", REAL, REAL),  # no AI image: no entry
    ]
    counts = sm.generator_counts(entries)
    assert counts == {"g1": {"TP": 2, "FN": 1}, "g2": {"TP": 0, "FN": 2}}
    assert sm.recall(2, 1) == pytest.approx(2 / 3)
    assert sm.recall(0, 1) == 0.0 and sm.recall(1, 0) == 1.0
    assert sm.recall(0, 0) == 0.0  # both 0: 0.0, not an error
