"""NYU distance scoring and metrics in process: statuses, metric definitions against numpy, the
median's cluster-bootstrap interval against a brute-force resample, the results JSON rows."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support.contract.evaluation import OptionError, SummaryContext
from support.contract.runner import LoggedClient
from support.evaluations.nyu_distance.parser import parse_answer
from support.evaluations.nyu_distance.spec import SPEC, NyuSettings, configure
from support.evaluations.nyu_distance.summary import (
    median_interval,
    result_rows,
    summarize,
    write_marked_images,
)
from support.evaluations.nyu_distance.task import NyuDistanceEvaluation, delta_ratio, pair_of
from support.settings import OutputSettings, RunSettings
from support.types import Outcome


@pytest.fixture(scope="module")
def ev(tmp_path_factory) -> NyuDistanceEvaluation:
    root = tmp_path_factory.mktemp("nyu")
    settings = RunSettings(
        samples=3,
        output=OutputSettings(cache_dir=root / "cache", results_dir=root / "results", run_id="r"),
    )
    return NyuDistanceEvaluation.load(settings, NyuSettings())


def test_cases_pairs_and_quick_subset(ev: NyuDistanceEvaluation) -> None:
    cases = ev.cases()
    assert [c.id for c in cases][:4] == ["img0000-pair0", "img0000-pair1", "img0000-pair2",
                                        "img0003-pair0"]  # fmt: skip
    assert ev.images == [0, 3, 7]  # --samples 3 of 8: evenly spaced
    assert {c.params["image_idx"] for c in cases if ev.is_quick(c)} == {0, 7}
    for c in cases:
        p = c.params
        assert p["gt_distance"] == pair_of(p).distance() > 0
        assert ev.locality(c) == c.cluster == f"img{p['image_idx']}"
        assert ev.mat.depth(p["image_idx"])[p["point1"][1], p["point1"][0]] == p["depth1"]


def test_pairs_per_image_option(tmp_path: Path, ev: NyuDistanceEvaluation) -> None:
    output = OutputSettings(
        cache_dir=ev.mat.path.parents[2],  # the synthetic file of `ev`, not rebuilt
        results_dir=tmp_path,
    )
    settings = RunSettings(samples=2, output=output)
    own = configure({"pairs_per_image": 5}, settings)
    five = NyuDistanceEvaluation.load(settings, own)
    assert [len(five.pairs[i]) for i in five.images] == [5, 5]
    assert NyuDistanceEvaluation.load(settings, own).pairs == five.pairs
    for bad in (0, -1, "x"):
        with pytest.raises(OptionError, match="--pairs-per-image"):
            configure({"pairs_per_image": bad}, settings)


def test_request_is_the_marked_image_and_the_prompt(
    ev: NyuDistanceEvaluation, tmp_path: Path
) -> None:
    case = ev.cases()[1]
    req = ev.request(case)
    assert req.parts[0].mime == "image/jpeg" and req.parts[1].text.startswith("Estimate the 3D")
    assert req.temperature == 0.0 and parse_answer(req.target).metres == case.params["gt_distance"]
    img = np.asarray(Image.open(io.BytesIO(req.parts[0].image)).convert("RGB")).astype(int)
    (u1, v1), (u2, v2) = case.params["point1"], case.params["point2"]
    assert img[v1, u1, 0] > 180 and img[v1, u1, 2] < 90  # red cross at A
    assert img[v2, u2, 2] > 180 and img[v2, u2, 0] < 90  # blue cross at B
    # the controller draws the same picture again from the outcome's params (workers write none)
    o = Outcome(f"{case.id}-m", "nyu_distance", "m", "correct", params=dict(case.params))
    run = RunSettings(output=OutputSettings(cache_dir=ev.mat.path.parents[2]))
    ctx = SPEC.summary_context(run)  # the data reopened through the spec
    (saved,) = write_marked_images([o], ctx, tmp_path / "marked_images")
    assert saved.name == "img0000_pair1.jpg" and saved.read_bytes() == req.parts[0].image


@pytest.mark.parametrize(
    ("text", "status"),
    [("{gt}", "correct"), ("{gt_1_2}", "correct"), ("{gt_1_3}", "wrong"), ("0", "wrong"),
     ("I cannot tell.", "unparsable")],
)  # fmt: skip
def test_status(ev: NyuDistanceEvaluation, text: str, status: str) -> None:
    case = ev.cases()[0]
    gt = case.params["gt_distance"]
    text = text.format(gt=gt, gt_1_2=gt * 1.2, gt_1_3=gt * 1.3)
    v = ev.score(case, parse_answer(text))
    assert v.status == status
    assert v.target["distance_m"] == gt
    o = Outcome(f"{case.id}-m", "nyu_distance", "m", v.status, prediction=v.prediction)
    picture = ev.render(case, o)
    assert picture[:3] == b"\xff\xd8\xff"


def test_delta_ratio() -> None:
    assert delta_ratio(2.0, 2.0) == 1.0
    assert delta_ratio(1.0, 2.0) == delta_ratio(4.0, 2.0) == 2.0
    assert delta_ratio(0.0, 2.0) == np.inf


def test_evaluate_with_the_oracle(ev: NyuDistanceEvaluation) -> None:
    from support.backends.reference import OracleBackend
    from support.client.engine import ModelClient

    client = LoggedClient(ModelClient(OracleBackend(), None, concurrency=1))
    v = asyncio.run(ev.evaluate(ev.cases()[2], client))
    assert v.status == "correct" and v.scores["abs_error"] == 0.0
    assert len(client.log.responses) == 1  # one call, logged for the core's bookkeeping


def _outcome(model: str, image: int, pair: int, gt: float, pred: float | None, status=None):
    scores = {"gt": gt, "pred": pred, "abs_error": None if pred is None else abs(pred - gt)}
    return Outcome(
        case_id=f"img{image:04d}-pair{pair}-{model}",
        evaluation="nyu_distance",
        model=model,
        status=status or ("unparsable" if pred is None else "wrong"),
        cluster=f"img{image}",
        scores=scores,
        target={"distance_m": gt, "point1": [40, 40], "point2": [200, 120]},
        raw="" if pred is None else str(pred),
        params={
            "image_idx": image,
            "pair_idx": pair,
            "point1": [40, 40],
            "point2": [200, 120],
            "gt_distance": gt,
        },
    )


def test_metrics_match_their_definitions() -> None:
    rng = np.random.default_rng(3)
    outs, abs_errors, signed, rel = [], [], [], []
    for image in range(6):
        for pair in range(3):
            gt = float(rng.uniform(0.5, 5))
            pred = None if (image, pair) in {(1, 1), (4, 0)} else float(rng.uniform(0.2, 6))
            outs.append(_outcome("a", image, pair, gt, pred))
            if pred is not None:
                abs_errors.append(abs(pred - gt))
                signed.append(pred - gt)
                rel.append(abs(pred - gt) / gt)
    outs.append(_outcome("a", 7, 0, 2.0, None, status="error"))
    row = summarize(outs, SummaryContext.of(n_resamples=200)).iloc[0]
    assert (row["n"], row["n_error"], row["n_answered"]) == (18, 1, 16)
    assert row["response_rate"] == pytest.approx(16 / 18)
    assert row["mae"] == pytest.approx(np.mean(abs_errors))
    assert row["median_abs_error"] == pytest.approx(np.median(abs_errors))
    assert row["std_error"] == pytest.approx(np.std(abs_errors))
    assert row["bias"] == pytest.approx(np.mean(signed))
    assert row["rmse"] == pytest.approx(np.sqrt(np.mean(np.square(signed))))
    assert row["mean_relative_error"] == pytest.approx(np.mean(rel))
    for m in ("mae", "median_abs_error", "std_error", "response_rate"):
        assert row[f"{m}_lo"] <= row[m] <= row[f"{m}_hi"], m
    assert row["mae_lo"] < row["mae_hi"]


def test_median_interval_equals_brute_force_cluster_resampling() -> None:
    rng = np.random.default_rng(5)
    clusters = [f"c{i}" for i in range(7) for _ in range(int(rng.integers(1, 4)))]
    errors = rng.exponential(1.0, len(clusters))
    lo, hi = median_interval(errors, clusters, n_resamples=300, seed=11)
    names = sorted(set(clusters))
    draw = np.random.default_rng(11)
    medians = []
    for start in range(0, 300, 256):
        block = draw.integers(0, len(names), (min(256, 300 - start), len(names)))
        for row in block:
            sample = np.concatenate([errors[[c == names[k] for c in clusters]] for k in row])
            medians.append(np.median(sample))
    assert (lo, hi) == pytest.approx(tuple(np.quantile(medians, [0.025, 0.975])))
    assert median_interval(errors, ["one"] * len(errors), 100, 0) == (
        pytest.approx(np.nan, nan_ok=True),
        pytest.approx(np.nan, nan_ok=True),
    )


def test_results_rows_have_the_source_fields() -> None:
    outs = [
        _outcome("b", 1, 0, 2.0, 2.5),
        _outcome("b", 0, 1, 1.0, None),
        _outcome("a", 0, 0, 3, 3),
    ]
    rows = result_rows(outs)
    assert list(rows) == ["a", "b"]
    assert [(r["image_idx"], r["pair_idx"]) for r in rows["b"]] == [(0, 1), (1, 0)]
    assert rows["b"][0] == {
        "image_idx": 0,
        "pair_idx": 1,
        "point1": [40, 40],
        "point2": [200, 120],
        "gt_distance": 1.0,
        "predicted_distance": None,
        "raw_response": "",
        "model": "b",
    }
