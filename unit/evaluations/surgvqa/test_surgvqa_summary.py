"""surgvqa's tables and files (support/evaluations/surgvqa/summary.py) on small hand-built
outcomes: VQA means and yes/no accuracy by hand, box matches by the IoU arithmetic, COCO AP from
pycocotools (coco.evaluate, itself checked against pycocotools in test_surgvqa_coco.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support.contract.evaluation import SummaryContext
from support.evaluations.surgvqa import spec
from support.evaluations.surgvqa import summary as s
from support.evaluations.surgvqa.coco import evaluate
from support.evaluations.surgvqa.spec import SurgvqaSettings
from support.evaluations.surgvqa.task import frame_truth
from support.evaluations.surgvqa.tools import TOOL_CLASSES
from support.settings import RunSettings, StatisticsSettings
from support.types import Outcome

STAPLER, CLIP = TOOL_CLASSES.index("stapler"), TOOL_CLASSES.index("clip applier")
RESAMPLES = 40  # bootstrap resamples: ordered intervals, cheap
Xywh = tuple[float, float, float, float]


def vqa(
    k: int, bleu: float, yes_no: int | None, *, model: str = "m", error: bool = False
) -> Outcome:
    kind = "open" if yes_no is None else "yes_no"
    return Outcome(
        case_id=f"vqa-{k:03d}-{model}",
        evaluation="surgvqa",
        model=model,
        status="error" if error else "correct" if bleu > 0.5 else "wrong",
        group={"category": "vqa", "kind": kind},
        cluster=f"video-{k % 3}",
        scores={} if error else {"bleu": bleu, "yes_no_correct": yes_no},
        params={"category": "vqa"},
        error="boom" if error else None,
    )


def tools(
    video: str,
    k: int,
    truth: list[tuple[int, Xywh]],
    predicted: list[tuple[int, Xywh]],
    counts: tuple[int, int, int],
    *,
    model: str = "m",
    error: bool = False,
) -> Outcome:
    """A scored frame as a run records it; counts = (tp50, n_dt, n_gt) worked out by hand."""
    params = {
        "category": "tools",
        "video": video,
        "frame": k,
        "file_name": f"{k:010d}.jpg",
        "width": 640,
        "height": 512,
        "boxes": [{"label": TOOL_CLASSES[c], "category_id": c, "bbox": list(b)} for c, b in truth],
    }
    tp, n_dt, n_gt = counts
    return Outcome(
        case_id=f"tools-v{video}-f{k:05d}-{model}",
        evaluation="surgvqa",
        model=model,
        status="error" if error else "wrong",
        group={"category": "tools", "kind": "boxes"},
        cluster=f"video-{video}",
        scores={} if error else {"tp50": tp, "n_dt": n_dt, "n_gt": n_gt},
        prediction=None
        if error
        else {"boxes": [{"label": TOOL_CLASSES[c], "bbox": list(b)} for c, b in predicted]},
        params=params,
        error="boom" if error else None,
    )


A: Xywh = (100, 100, 100, 100)
B: Xywh = (300, 300, 50, 50)
NEAR: Xywh = (100, 100, 100, 60)  # IoU with A = 6000 / 10000 = 0.6


def tool_outcomes(model: str = "m") -> list[Outcome]:
    return [
        tools("1", 0, [(STAPLER, A)], [(STAPLER, A)], (1, 1, 1), model=model),  # found
        tools("1", 1, [(CLIP, B)], [(CLIP, NEAR)], (0, 1, 1), model=model),  # elsewhere: missed
        tools("2", 0, [(STAPLER, A)], [(STAPLER, NEAR)], (1, 1, 1), model=model),  # IoU 0.6
        tools("2", 1, [], [(CLIP, A)], (0, 1, 0), model=model),  # no truth: a false positive
        tools("3", 0, [(STAPLER, B)], [], (0, 0, 1), model=model),
        tools("3", 1, [(STAPLER, B)], [], (0, 0, 0), model=model, error=True),
    ]


def vqa_outcomes(model: str = "m") -> list[Outcome]:
    return [
        vqa(0, 1.0, 1, model=model),
        vqa(1, 0.0, 0, model=model),
        vqa(2, 0.5, 1, model=model),
        vqa(3, 0.25, None, model=model),
        vqa(4, 0.75, None, model=model),
        vqa(5, 0.0, None, model=model, error=True),
    ]


# ---- counts -----------------------------------------------------------------------------------
def test_vqa_and_match_counts_and_their_metrics() -> None:
    assert s.vqa_counts(vqa(0, 0.4, 1)) == [1.0, 0.4, 1.0, 1.0]
    assert s.vqa_counts(vqa(0, 0.4, 0)) == [1.0, 0.4, 1.0, 0.0]
    assert s.vqa_counts(vqa(0, 0.4, None)) == [1.0, 0.4, 0.0, 0.0]  # an open question
    got = s.vqa_reduce(np.array([[4.0, 2.0, 3.0, 1.0], [2.0, 1.0, 0.0, 0.0]]))
    assert got["bleu"].tolist() == [0.5, 0.5]
    assert got["yes_no_accuracy"][0] == pytest.approx(1 / 3) and np.isnan(got["yes_no_accuracy"][1])
    frame = tool_outcomes()[2]
    assert s.match_counts(frame) == [1.0, 1.0, 1.0]
    # 3 matches of 4 boxes named and 6 true: P = 3/4, R = 3/6, F1 = 2*3 / (4 + 6) = 0.6
    m = s.match_reduce(np.array([3.0, 4.0, 6.0]))
    assert (float(m["precision50"]), float(m["recall50"]), float(m["f1_50"])) == (0.75, 0.5, 0.6)
    none = s.match_reduce(np.array([0.0, 0.0, 2.0]))
    assert math.isnan(none["precision50"]) and float(none["recall50"]) == 0.0
    assert float(none["f1_50"]) == 0.0  # 0 / (0 + 2)
    assert math.isnan(s.match_reduce(np.zeros(3))["f1_50"])


def test_paired_counts_put_both_categories_in_one_row() -> None:
    assert s.paired_counts(vqa(0, 0.4, 1)) == [1.0, 0.4, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert s.paired_counts(tool_outcomes()[0]) == [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    got = s.paired_reduce(np.array([2.0, 1.5, 1.0, 1.0, 3.0, 4.0, 6.0]))
    assert list(got) == ["bleu", "yes_no_accuracy", "precision50", "recall50", "f1_50"]
    assert [float(got[k]) for k in got] == [0.75, 1.0, 0.75, 0.5, 0.6]
    assert s.yes_no_correct(vqa(0, 0.4, 0)) == 0.0 and s.yes_no_correct(vqa(0, 0.4, 1)) == 1.0
    assert math.isnan(s.yes_no_correct(vqa(0, 0.4, None)))
    assert math.isnan(s.yes_no_correct(tool_outcomes()[0]))
    scores = s.comparisons_spec().scores(tool_outcomes()[0])  # a BLEU-only run's
    assert math.isnan(scores["bleu"]) and math.isnan(scores["yes_no_accuracy"])
    assert s.comparisons_spec().scores(vqa(0, 0.4, 1)) == {"yes_no_accuracy": 1.0, "bleu": 0.4}


# ---- summary.csv ------------------------------------------------------------------------------
def test_summary_columns_rows_and_values() -> None:
    outs = vqa_outcomes() + tool_outcomes() + [vqa(9, 1.0, 1, model="b")]
    table = s.summarize(outs, SummaryContext.of(n_resamples=RESAMPLES, seed=2))
    metrics = ["bleu", "yes_no_accuracy", "map", "ap50", "ap75", "precision50", "recall50"]
    cols = ["model", "category", "subset", "n", "n_error"]
    for m in [*metrics, "f1_50"]:
        cols += [m, f"{m}_lo", f"{m}_hi"] + (["map_video_mean"] if m == "ap75" else [])
    assert list(table.columns) == cols
    keys = [tuple(r) for r in table[["model", "category", "subset"]].values]
    assert keys == [
        ("b", "vqa", "all"),
        ("b", "vqa", "yes_no"),
        ("m", "tools", "all"),
        ("m", "tools", "clip applier"),  # classes with truth, in TOOL_CLASSES order (id 4, 5)
        ("m", "tools", "stapler"),
        ("m", "vqa", "all"),
        ("m", "vqa", "yes_no"),
        ("m", "vqa", "open"),
    ]
    row = {k: table.iloc[i] for i, k in enumerate(keys)}
    all_q = row[("m", "vqa", "all")]
    assert (all_q["n"], all_q["n_error"]) == (5, 1)
    assert all_q["bleu"] == pytest.approx((1 + 0 + 0.5 + 0.25 + 0.75) / 5)
    assert all_q["yes_no_accuracy"] == pytest.approx(2 / 3)  # questions 0 and 2 of 0-2
    assert row[("m", "vqa", "open")]["bleu"] == pytest.approx(0.5)
    assert math.isnan(row[("m", "vqa", "open")]["yes_no_accuracy"])
    assert row[("m", "vqa", "yes_no")]["n"] == 3
    frames = row[("m", "tools", "all")]
    assert (frames["n"], frames["n_error"]) == (5, 1)
    # matches: 2 of 4 boxes named, 2 of 4 true boxes
    assert (frames["precision50"], frames["recall50"], frames["f1_50"]) == (0.5, 0.5, 0.5)
    scored = [o for o in tool_outcomes() if o.status != "error"]
    gt, results, _ = s.coco_files(scored)
    want = evaluate(gt, results)
    assert frames["map"] == pytest.approx(want.stats["AP"])
    assert frames["ap50"] == pytest.approx(want.stats["AP50"])
    assert frames["ap75"] == pytest.approx(want.stats["AP75"])
    for m in ("map", "ap50", "f1_50"):
        assert frames[f"{m}_lo"] <= frames[f"{m}_hi"]
    stapler = row[("m", "tools", "stapler")]
    assert stapler["map"] == pytest.approx(want.per_class_ap["stapler"])
    assert stapler["ap50"] == pytest.approx(want.per_class_ap50["stapler"])
    assert math.isnan(stapler["n"]) and math.isnan(stapler["map_lo"])  # no count, no interval
    assert not math.isnan(frames["map_video_mean"])


def test_tool_rows_with_every_frame_an_error_have_counts_only() -> None:
    outs = [tools("1", 0, [(STAPLER, A)], [], (0, 0, 0), error=True)]
    table = s.summarize(outs, SummaryContext.of(n_resamples=0))
    assert len(table) == 1
    row = table.iloc[0]
    assert (row["n"], row["n_error"]) == (0, 1) and math.isnan(row["map"])
    assert s.summarize([], SummaryContext.of(n_resamples=0)).empty


def test_video_mean_map_by_video() -> None:
    scored = [o for o in tool_outcomes() if o.status != "error"]
    gt, results, cluster_of = s.coco_files(scored)
    assert cluster_of == {1: "video-1", 2: "video-1", 3: "video-2", 4: "video-2", 5: "video-3"}
    assert [r["image_id"] for r in results] == [1, 2, 3, 4]  # one box each, frames 1-4
    per_video = []
    for ids in ({1, 2}, {3, 4}, {5}):
        sub = dict(
            gt,
            images=[i for i in gt["images"] if i["id"] in ids],
            annotations=[a for a in gt["annotations"] if a["image_id"] in ids],
        )
        per_video.append(evaluate(sub, [r for r in results if r["image_id"] in ids]).stats["AP"])
    # video 3: truth, no box -> AP 0, counted
    assert per_video[2] == 0.0
    assert s.video_mean_map(gt, results, cluster_of) == pytest.approx(np.mean(per_video))
    # a video with no truth at all is left out of the mean
    gt2, results2, clusters2 = s.coco_files(scored[3:4] + scored[:1])
    only = evaluate(
        dict(gt2, images=gt2["images"][:1], annotations=gt2["annotations"]),
        [r for r in results2 if r["image_id"] == 1],
    ).stats["AP"]
    assert s.video_mean_map(gt2, results2, clusters2) == pytest.approx(only)
    gt3, results3, clusters3 = s.coco_files(scored[3:4])
    assert math.isnan(s.video_mean_map(gt3, results3, clusters3))


def test_coco_files_in_case_order() -> None:
    scored = [o for o in tool_outcomes() if o.status != "error"]
    gt, results, _ = s.coco_files(list(reversed(scored)))
    assert [i["file_name"] for i in gt["images"]] == [o.params["file_name"] for o in scored]
    assert gt["images"][0] == {
        "id": 1,
        "width": 640,
        "height": 512,
        "file_name": frame_truth(1, scored[0].params).file_name,
    }
    assert results[0]["score"] == 1.0 and results[0]["bbox"] == list(A)


# ---- the headline -----------------------------------------------------------------------------
def test_headline_one_row_per_model_counting_questions_and_frames_apart() -> None:
    outs = [*vqa_outcomes(), vqa(6, 0.5, None), *tool_outcomes(), vqa(9, 1.0, 1, model="b")]
    table = s.summarize(outs, SummaryContext.of(n_resamples=0))
    head = s.headline(table)
    assert list(head.columns) == [
        "model", "n_questions", "n_frames", "n_error",
        "bleu", "bleu_lo", "bleu_hi", "yes_no_accuracy", "yes_no_accuracy_lo",
        "yes_no_accuracy_hi", "map", "map_lo", "map_hi", "ap50", "ap50_lo", "ap50_hi",
        "f1_50", "f1_50_lo", "f1_50_hi",
    ]  # fmt: skip
    assert head["model"].tolist() == ["b", "m"]
    b, m = head.iloc[0], head.iloc[1]
    assert (b["n_questions"], b["n_frames"], b["n_error"]) == (1, 0, 0)
    assert b["bleu"] == 1.0 and math.isnan(b["map"])  # no frames: no AP
    assert (m["n_questions"], m["n_frames"], m["n_error"]) == (6, 5, 2)  # one error each
    main = table[(table.model == "m") & (table.subset == "all")]
    assert m["map"] == main[main.category == "tools"]["map"].iloc[0]
    assert m["bleu"] == main[main.category == "vqa"]["bleu"].iloc[0]
    assert s.headline(table.iloc[0:0]).empty


# ---- files ------------------------------------------------------------------------------------
def test_write_outputs_per_model(tmp_path: Path) -> None:
    outs = vqa_outcomes() + tool_outcomes() + [vqa(9, 0.5, 1, model="hf:/x y")]
    outs.append(vqa(8, 0.5, 1, model="z", error=True))  # a model with errors only: no folder
    run = RunSettings(statistics=StatisticsSettings(bootstrap=0))
    ctx = SummaryContext(run, SurgvqaSettings(), data_label=spec.data_label(run))
    written = s.write_outputs(outs, s.summarize(outs, ctx), tmp_path, ctx)
    assert s.model_dir(tmp_path, "hf:/x y") == tmp_path / "by_model" / "hf_x_y"
    assert written == [
        tmp_path / "metrics_by_model.png",  # the run folder's plot first
        tmp_path / "by_model" / "hf_x_y" / "metrics.json",
        tmp_path / "by_model" / "m" / "metrics.json",
        tmp_path / "by_model" / "m" / "coco_ground_truth.json",
        tmp_path / "by_model" / "m" / "coco_results.json",
        tmp_path / "by_model" / "m" / "cocoeval.json",
    ]
    metrics = json.loads(written[2].read_text())
    # the evaluator's file: the five answered questions in case order, and their mean
    assert [r["bleu_score"] for r in metrics["results"]] == [1.0, 0.0, 0.5, 0.25, 0.75]
    assert metrics["aggregates"]["bleu_score"] == pytest.approx(0.5)
    gt = json.loads(written[3].read_text())
    assert len(gt["images"]) == 5 and len(gt["annotations"]) == 4  # the error left out
    assert gt == s.coco_files([o for o in tool_outcomes() if o.status != "error"])[0]
    stats = json.loads(written[5].read_text())
    assert list(stats) == ["stats", "per_class_ap", "per_class_ap50"]
    assert written[5].read_text() == json.dumps(stats, indent=2) + "\n"
    report = ctx.report.text()
    assert "## Headline" in report and "## AP per tool class (pooled frames)" in report
    assert "synthetic sample" in report


def test_data_label_and_report_without_class_rows() -> None:
    assert "synthetic sample" in spec.data_label(RunSettings())
    real = RunSettings(evaluations={"surgvqa": SurgvqaSettings(root="/data/surgvu")})
    assert spec.data_label(real) is None
    table = s.summarize(vqa_outcomes(), SummaryContext.of(n_resamples=0))
    text = s.report_text(table)
    assert "AP per tool class" not in text and "## By category and question kind" in text
    assert text.endswith("\n")
    table = s.summarize(vqa_outcomes() + tool_outcomes(), SummaryContext.of(n_resamples=0))
    text = s.report_text(table, "synthetic sample")
    head, rest = text.split("## By category and question kind")
    main, classes = rest.split("## AP per tool class (pooled frames)")

    def rows(section: str) -> list[list[str]]:  # a markdown table's body rows, cells stripped
        return [[c.strip() for c in ln.split("|")[1:-1]] for ln in section.splitlines()
                if ln.startswith("| m ")]  # fmt: skip

    assert [r[0] for r in rows(head)] == ["m"] and "synthetic sample" in head
    assert [r[1:3] for r in rows(main)] == [
        ["tools", "all"], ["vqa", "all"], ["vqa", "yes_no"], ["vqa", "open"]
    ]  # fmt: skip
    assert [r[1] for r in rows(classes)] == ["clip applier", "stapler"]
    assert "| tool " in classes and isinstance(table, pd.DataFrame)
