"""`pytest evals/surgvqa` end to end, through pytester subprocess runs of the real suite: the
oracle reads 1.0 everywhere, the write-up's printed numbers come out of the suite's own scoring
path, mAP equals pycocotools run directly on the files the run wrote, and empty answers score 0."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from support.evaluations.surgvqa.video import write_video
from support.storage.files import file_name
from unit.helpers.surgvu_writeup import PRINTED_MEAN, PRINTED_SCORES, REFERENCES

# one worker runs this module: the quick run that two tests read (a module fixture) is made once
pytestmark = pytest.mark.xdist_group("surgvqa_suite")


@pytest.fixture
def run(run_suite):
    """run(*args, run_id=...) -> (RunResult, results folder of the surgvqa run)."""

    def _run(*args: str, run_id: str = "r1"):
        result, results = run_suite("surgvqa", *args, run_id=run_id)
        return result, results / "surgvqa" / run_id

    return _run


def pycocotools_map(folder: Path) -> float:
    """AP@[.5:.95] of the run's own files, by pycocotools alone (COCO, loadRes, COCOeval)."""
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(folder / "coco_ground_truth.json"))
        dt = gt.loadRes(str(folder / "coco_results.json"))
        e = COCOeval(gt, dt, "bbox")
        e.evaluate()
        e.accumulate()
        e.summarize()
    return float(e.stats[0])


# the oracle's answers but a wrong one for half the requests (support/backends/planted.py): on
# the quick subset its AP intervals are wide (mAP 0.55 in [0.34, 0.68] with 200 resamples),
# where the oracle's [1, 1] and chance's [0, 0] cannot tell a bound from the other
PLANTED = "planted:*=0.5"
SILENT = "scripted:answers:silent"  # answers every request with "" (ANSWERS_SCRIPT)


@pytest.fixture(scope="module")
def quick_run(module_run_suite, tmp_path_factory):
    """(RunResult, run folder, report.html) of one quick run of the oracle, chance, PLANTED and
    SILENT, gated on the oracle's BLEU and mAP; read (not changed) by the tests that use it."""
    where = tmp_path_factory.mktemp("surgvqa-quick")
    (where / "answers.py").write_text(ANSWERS_SCRIPT)
    html = where / "report.html"
    gates = ("--min-metric", "surgvqa.bleu@oracle=1", "--min-metric", "surgvqa.map@oracle=1")
    models = f"--model=oracle,chance,{PLANTED},{SILENT}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", str(where))
        result, results = module_run_suite(
            "surgvqa", models, "-m", "quick", f"--html={html}", "--self-contained-html", *gates
        )
    return result, results / "surgvqa" / "r1", html


@pytest.mark.slow
def test_quick_run_oracle_reads_one_and_map_is_pycocotools(quick_run):
    result, out, html = quick_run
    assert result.ret == 0, result.stdout.str()
    s = pd.read_csv(out / "summary.csv")
    head = s[s.subset == "all"].set_index(["model", "category"])
    oracle_vqa, oracle_tools = head.loc[("oracle", "vqa")], head.loc[("oracle", "tools")]
    assert oracle_vqa["n"] == 3 and oracle_tools["n"] == 6  # the quick subset
    assert oracle_vqa["bleu"] == 1.0 and oracle_vqa["yes_no_accuracy"] == 1.0
    for m in ("map", "ap50", "ap75", "map_video_mean", "precision50", "recall50", "f1_50"):
        assert oracle_tools[m] == 1.0, m
    chance = head.loc[("chance", "tools")]
    assert chance["map"] < 0.1 and head.loc[("chance", "vqa")]["bleu"] < 0.9
    planted = head.loc[(PLANTED, "tools")]
    for m in ("map", "ap50", "ap75"):  # pycocotools' APs resampled by video: wide, in order
        assert planted[f"{m}_lo"] < planted[m] < planted[f"{m}_hi"], m
    for model in ("oracle", "chance", PLANTED):
        folder = out / "by_model" / file_name(model)
        row = head.loc[(model, "tools")]
        direct = pycocotools_map(folder)
        assert direct == json.loads((folder / "cocoeval.json").read_text())["stats"]["AP"]
        assert direct == pytest.approx(row["map"], abs=1e-6)  # summary.csv: 6 digits
        assert row["map_lo"] <= row["map"] <= row["map_hi"]
        metrics = json.loads((folder / "metrics.json").read_text())
        bleus = [r["bleu_score"] for r in metrics["results"]]
        assert metrics["aggregates"]["bleu_score"] == pytest.approx(np.mean(bleus))
        vqa_bleu = head.loc[(model, "vqa")]["bleu"]
        assert metrics["aggregates"]["bleu_score"] == pytest.approx(vqa_bleu, rel=1e-5)  # csv
    results = json.loads((out / "by_model" / "chance" / "coco_results.json").read_text())
    assert all(set(r) == {"image_id", "category_id", "bbox", "score"} for r in results)
    page = html.read_text()
    assert page.count("data:image/jpeg;base64") >= 9  # one picture per case and model at least
    assert (out / "report.md").read_text().startswith("# surgvqa")


def write_case(root: Path, case: str, question: str, answers: list[str]) -> None:
    """One category-2 case in the published sample's layout (a tiny 4-frame clip)."""
    folder = root / case
    folder.mkdir(parents=True)
    frames = [np.full((64, 64, 3), 40 * i, dtype=np.uint8) for i in range(4)]
    write_video(folder / f"{case}.mp4", frames, fps=1)
    (folder / f"{case}_question.json").write_text(json.dumps(question))
    (folder / f"{case}.json").write_text(json.dumps(answers))


ANSWERS_SCRIPT = """
ANSWERS = {"during the surgery?": "kakaka force", "during the procedure?": "no",
           "during the operation?": "No."}

def reply(request):
    text = request.parts[-1].text
    return next((a for q, a in ANSWERS.items() if q in text), "")

def silent(request):
    return ""
"""


@pytest.mark.slow
def test_writeup_numbers_through_the_suite(run, pytester, monkeypatch, tmp_path):
    root = tmp_path / "surgvu"
    for case, where in (("case001", "surgery"), ("case002", "procedure"), ("case003", "operation")):
        write_case(root, case, f"Was a large needle driver used during the {where}?", REFERENCES)
    pytester.makepyfile(answers=ANSWERS_SCRIPT)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    result, out = run("--model=scripted:answers:reply", f"--surgvqa-root={root}")
    assert result.ret == 0, result.stdout.str()
    rows = [json.loads(line) for line in (out / "raw_results.jsonl").read_text().splitlines()]
    by_case = {f"vqa-{r['params']['case']}": r for r in rows}
    # "kakaka force": the write-up's printed candidate tokens ['kakaka', 'force'] match nothing
    assert by_case["vqa-case001"]["scores"]["bleu"] == 0
    assert by_case["vqa-case002"]["scores"]["reference_bleu"] == PRINTED_SCORES
    assert by_case["vqa-case003"]["scores"]["bleu"] == 0.1778279410038923
    folder = out / "by_model" / "scripted_answers_reply"
    metrics = json.loads((folder / "metrics.json").read_text())
    assert [(r["case_id"], r["bleu_score"]) for r in metrics["results"]] == [
        ("case001", 0),
        ("case002", 0.1778279410038923),
        ("case003", 0.1778279410038923),
    ]
    assert metrics["aggregates"]["bleu_score"] == PRINTED_MEAN
    # the official key order (evaluate.py's METRIC_KEYS), ROUGE with BLEU (no BERTScore model)
    keys = ["bleu_score", "rouge1_score", "rouge2_score", "rougeL_score"]
    assert list(metrics["aggregates"]) == keys
    assert all(list(r) == ["case_id", *keys] for r in metrics["results"])
    assert set(metrics) == {"results", "aggregates"}  # the evaluator's file, nothing more
    csv_mean = pd.read_csv(out / "summary.csv").query("subset == 'all'")["bleu"].item()
    assert csv_mean == pytest.approx(PRINTED_MEAN, rel=1e-5)  # summary.csv: 6 digits


@pytest.mark.slow
def test_empty_answers_score_zero_and_nothing_crashes(quick_run):
    """SILENT's cases in the shared quick run (beside the other models)."""
    result, out, _ = quick_run
    assert result.ret == 0, result.stdout.str()  # wrong answers are measurements, not failures
    s = pd.read_csv(out / "summary.csv").query("subset == 'all' and model == @SILENT")
    s = s.set_index("category")
    assert s.loc["vqa", "bleu"] == 0.0 and s.loc["vqa", "n"] == 3
    assert s.loc["tools", "map"] == 0.0 and s.loc["tools", "recall50"] == 0.0
    assert pycocotools_map_of_empty(out / "by_model" / "scripted_answers_silent") == 0.0


def pycocotools_map_of_empty(folder: Path) -> float:
    """An empty results file is what the run wrote; pycocotools' loadRes raises on it, so the
    direct check scores the truth with no detections as 0 by definition of AP."""
    assert json.loads((folder / "coco_results.json").read_text()) == []
    stats = json.loads((folder / "cocoeval.json").read_text())["stats"]
    return stats["AP"]


@pytest.mark.slow
def test_bad_options_and_files_are_named(run, tmp_path):
    result, _ = run("--surgvqa-root", str(tmp_path / "missing"))
    assert result.ret == 4
    assert "--surgvqa-root" in result.stderr.str() + result.stdout.str()
    root = tmp_path / "broken"
    write_case(root, "case001", "Was a stapler used?", ["No"] * 5)
    (root / "case001" / "case001.json").write_text('["No", "No", 3, "No", "No"]')
    result, _ = run(f"--surgvqa-root={root}")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret != 0 and "case001.json" in text


def test_a_frame_of_another_size_than_its_annotation_is_named(tmp_path):
    from support.evaluations.surgvqa.dataset import SurgvuDataError
    from support.evaluations.surgvqa.spec import SurgvqaSettings
    from support.evaluations.surgvqa.task import SurgvqaEvaluation
    from support.evaluations.surgvqa.tools import TOOL_CLASSES
    from support.settings import OutputSettings, RunSettings

    write_video(tmp_path / "1_fps1.mp4", [np.zeros((64, 64, 3), np.uint8)] * 2, fps=1)
    coco = {
        "images": [{"id": 1, "width": 640, "height": 512, "file_name": "0000000001.jpg"}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 11, "bbox": [1, 1, 10, 10],
                         "area": 100, "iscrowd": 0}],
        "categories": [{"id": i, "name": n} for i, n in enumerate(TOOL_CLASSES)],
    }  # fmt: skip
    (tmp_path / "1_fps1_coco.json").write_text(json.dumps(coco))
    settings = SurgvqaSettings(root=str(tmp_path))
    ev = SurgvqaEvaluation.load(
        RunSettings(output=OutputSettings(cache_dir=tmp_path / "cache")), settings
    )
    (case,) = ev.cases()
    with pytest.raises(SurgvuDataError, match=r"1_fps1.mp4: frame 1 is 64x64 px .* 640x512"):
        ev.request(case)
