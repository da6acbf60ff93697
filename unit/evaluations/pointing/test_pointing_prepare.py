"""Preparation of the pointing evaluation: presence matrix, balanced test rows, few-shot plans."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.evaluations.pointing.classes import ORGAN_IDS, presence_vector
from support.evaluations.pointing.dataset import CholecSeg8k
from support.evaluations.pointing.prepare import (
    build_fewshot_plan,
    build_presence_matrix,
    file_names,
    load_prepared,
    prepare,
    select_balanced,
)
from support.evaluations.pointing.selection import jaccard
from support.evaluations.pointing.synthetic import build_cholecseg8k

# one worker runs this module: its costly module fixtures are built once, not once a worker
pytestmark = pytest.mark.xdist_group("pointing_prepare")

ROOT = Path(__file__).resolve().parents[3]
N_TEST, GAP = 12, 2  # test rows drawn from the 120-row sample, min rows between picks of a video
ROLES = ("positives", "negatives_easy", "negatives_hard")


@pytest.fixture(scope="session")
def small(tmp_path_factory: pytest.TempPathFactory) -> CholecSeg8k:
    out = tmp_path_factory.mktemp("prep")
    # parquet keeps the videoNN/ folders of the image paths: four videos of 30 frames
    path = build_cholecseg8k(out / "small", seed=0, n_videos=4, frames_per_video=30, fmt="parquet")
    return CholecSeg8k.open(path, cache_dir=str(out / "hf"))


@pytest.fixture(scope="session")
def prepared_dir(small: CholecSeg8k, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("prepared")
    prepare(small, out, n_test=N_TEST, min_gap=GAP)
    return out


def _spaced(rows: list[int], video_ids: list[str], gap: int) -> bool:
    """No two rows of one video closer than gap (and no row twice)."""
    rows = sorted(rows)
    return all(
        b - a >= max(gap, 1)
        for i, a in enumerate(rows)
        for b in rows[i + 1 :]
        if video_ids[a] == video_ids[b]
    )


def _picks(plan: dict) -> list[int]:
    return [r for entry in plan.values() for role in ROLES for r in entry[role]]


def _check_plan(plan_json: dict, Y: np.ndarray, vids: list[str], test: list[int]) -> None:
    plan = plan_json["plan"]
    assert list(plan) == [str(c) for c in ORGAN_IDS]
    assert not set(_picks(plan)) & set(test)
    assert _spaced(_picks(plan) + list(test), vids, plan_json["min_gap"])
    for j, cid in enumerate(ORGAN_IDS):
        entry = plan[str(cid)]
        assert all(Y[r, j] == 1 for r in entry["positives"])
        assert all(Y[r, j] == 0 for r in entry["negatives_easy"] + entry["negatives_hard"])
        assert len(entry["positives"]) <= plan_json["n_pos"]
        assert len(entry["negatives_easy"]) <= plan_json["n_neg_easy"]
        assert len(entry["negatives_hard"]) <= plan_json["n_neg_hard"]
    n_short = sum(
        len(plan[str(c)][role]) < plan_json[key]
        for c in ORGAN_IDS
        for role, key in zip(ROLES, ("n_pos", "n_neg_easy", "n_neg_hard"), strict=True)
    )
    assert (n_short > 0) <= (len(plan_json["warnings"]) > 0)


def test_presence_matrix_matches_rows(small: CholecSeg8k) -> None:
    Y = build_presence_matrix(small, progress=False)
    assert Y.shape == (len(small), 12) and Y.dtype == np.uint8
    for i in (0, 17, 31, 119):
        np.testing.assert_array_equal(Y[i], presence_vector(small.labels(i)))
    np.testing.assert_array_equal(Y, build_presence_matrix(small, workers=1, progress=False))


def test_select_balanced(small: CholecSeg8k, prepared_dir: Path) -> None:
    p = load_prepared(prepared_dir, N_TEST)
    Y, vids = p.presence.astype(int), p.video_ids
    sel = select_balanced(Y, vids, N_TEST, min_gap=GAP)
    assert sel == p.test_indices == sorted(set(sel)) and len(sel) == N_TEST
    assert _spaced(sel, vids, GAP)

    def imbalance(rows: list[int]) -> int:  # distance from half positive per organ
        return int(np.abs(Y[rows].sum(axis=0) - N_TEST / 2).sum())

    assert imbalance(sel) < imbalance(list(range(N_TEST)))
    assert len({vids[i] for i in sel}) == 4


def test_select_balanced_small_matrix() -> None:
    # 4 organs always present, organ 5 in 3 rows: balance takes 2 of them (a third is left over
    # for the few-shot plans)
    Y = np.zeros((30, 12), np.uint8)
    Y[:, :4] = 1
    Y[[5, 12, 20], 4] = 1
    vids = ["a"] * 15 + ["b"] * 15
    sel = select_balanced(Y, vids, 6, min_gap=2)
    assert len({5, 12, 20} & set(sel)) == 2 and _spaced(sel, vids, 2)
    assert select_balanced(Y, vids, 6, min_gap=2) == sel  # deterministic
    few = select_balanced(Y, vids, 100, min_gap=10)  # spacing allows at most 2 rows per video
    assert 2 <= len(few) <= 4 and _spaced(few, vids, 10)


def test_plans(small: CholecSeg8k, prepared_dir: Path) -> None:
    p = load_prepared(prepared_dir, N_TEST)
    names = file_names(len(small), N_TEST)
    for name in ("standard", "hard_negatives"):
        plan_json = json.loads((prepared_dir / names[name]).read_text())
        # our files hold rows per role; the loaded plans add the (empty) near_miss role
        assert {c: {**e, "near_miss": []} for c, e in plan_json["plan"].items()} == p.plans[name]
        assert plan_json["excluded"] == N_TEST and plan_json["min_gap"] == GAP
        _check_plan(plan_json, p.presence, p.video_ids, p.test_indices)
    std, hard = p.plans["standard"], p.plans["hard_negatives"]
    assert all(len(e["negatives_hard"]) == 0 for e in std.values())
    assert sum(len(e["negatives_hard"]) for e in hard.values()) >= 10
    assert sum(len(e["positives"]) for e in std.values()) >= 10


def test_hard_negatives_are_near_misses(prepared_dir: Path) -> None:
    p = load_prepared(prepared_dir, N_TEST)
    Y, test = p.presence, set(p.test_indices)
    hard_sim, typical_sim = [], []
    for j, cid in enumerate(ORGAN_IDS):
        entry = p.plans["hard_negatives"][str(cid)]
        if not entry["positives"] or not entry["negatives_hard"]:
            continue
        others = np.delete(Y, j, axis=1)
        ref = others[entry["positives"][0]]
        negatives = [i for i in np.flatnonzero(Y[:, j] == 0) if i not in test]
        hard_sim.append(jaccard(others[entry["negatives_hard"]], ref).mean())
        typical_sim.append(jaccard(others[negatives], ref).mean())
    assert len(hard_sim) >= 10
    assert np.mean(hard_sim) > np.mean(typical_sim)
    assert all(h >= t for h, t in zip(hard_sim, typical_sim, strict=True))


def test_plans_reproducible(prepared_dir: Path) -> None:
    p = load_prepared(prepared_dir, N_TEST)
    args = (p.presence, p.video_ids, p.test_indices)
    a = json.dumps(build_fewshot_plan(*args, seed=43), indent=2)
    assert a == json.dumps(build_fewshot_plan(*args, seed=43), indent=2)
    assert a != json.dumps(build_fewshot_plan(*args, seed=44), indent=2)


def test_prepare_reuses_and_is_byte_identical(small: CholecSeg8k, prepared_dir: Path, tmp_path):
    files = sorted(prepared_dir.iterdir())
    assert [f.name for f in files] == sorted(file_names(len(small), N_TEST).values())
    stamps = {f: f.stat().st_mtime_ns for f in files}
    again = prepare(small, prepared_dir, n_test=N_TEST, min_gap=GAP)  # all four reused
    assert {f: f.stat().st_mtime_ns for f in files} == stamps
    assert again.test_indices == load_prepared(prepared_dir, N_TEST).test_indices
    fresh = tmp_path / "fresh"
    prepare(small, fresh, n_test=N_TEST, min_gap=GAP)
    for f in files:
        assert (fresh / f.name).read_bytes() == f.read_bytes() or f.suffix == ".npz"
    np.testing.assert_array_equal(np.load(fresh / files[-1].name)["Y"], again.presence)
    # other parameters: the derived files are rebuilt, not reused
    wider = prepare(small, fresh, n_test=N_TEST, min_gap=5)
    assert _spaced(wider.test_indices, wider.video_ids, 5)
    plan_file = fresh / file_names(len(small), N_TEST)["standard"]
    assert json.loads(plan_file.read_text())["min_gap"] == 5


def test_prepare_in_parallel(small: CholecSeg8k, tmp_path: Path) -> None:
    results, errors = [], []

    def run() -> None:
        try:
            results.append(prepare(small, tmp_path, n_test=N_TEST, min_gap=GAP))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 3
    assert all(r.test_indices == results[0].test_indices for r in results)
    assert all(r.plans == results[0].plans for r in results)
    assert not [f for f in tmp_path.iterdir() if f.name.startswith(".")]  # no temp files left


def test_source_files_are_used_as_they_are(small: CholecSeg8k, prepared_dir: Path, tmp_path):
    names = file_names(len(small), N_TEST)
    for key, name in names.items():
        data = (prepared_dir / name).read_bytes()
        if key != "presence":  # as the source wrote them: no provenance record
            obj = json.loads(data)
            obj = {k: v for k, v in obj.items() if k not in ("presence_sha256", "test_sha256")}
            data = json.dumps(obj).encode()
        (tmp_path / name).write_bytes(data)
    balanced = json.loads((tmp_path / names["balanced"]).read_text())
    balanced["indices"] = balanced["indices"][:5]
    (tmp_path / names["balanced"]).write_text(json.dumps(balanced))
    assert prepare(small, tmp_path, n_test=N_TEST, min_gap=GAP).test_indices == balanced["indices"]


def test_load_prepared_missing_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"balanced_indices_train_100\.json.*--out"):
        load_prepared(tmp_path)


@pytest.mark.slow
def test_cli(small: CholecSeg8k, tmp_path: Path) -> None:
    out = tmp_path / "cli"
    module = "support.evaluations.pointing.prepare"
    cmd = [sys.executable, "-m", module, "--cholecseg8k", small.source,
           "--out", str(out), "--n-test", str(N_TEST), "--min-gap", str(GAP)]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    names = file_names(len(small), N_TEST).values()
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    assert all(f"written  {out / n}" in res.stdout for n in names)
    assert len(load_prepared(out, N_TEST).test_indices) == N_TEST


@st.composite
def presence_problems(draw):
    """A random small presence matrix, videos as runs of consecutive rows, and settings."""
    n = draw(st.integers(1, 40))
    density = draw(st.floats(0.0, 1.0))
    seed = draw(st.integers(0, 2**32 - 1))
    Y = (np.random.default_rng(seed).random((n, 12)) < density).astype(np.uint8)
    cuts = sorted(draw(st.sets(st.integers(1, max(1, n - 1)), max_size=4)))
    vids = [f"v{sum(i >= c for c in cuts)}" for i in range(n)]
    return Y, vids, draw(st.integers(0, 30)), draw(st.integers(0, 5)), seed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(presence_problems(), st.integers(0, 2))
def test_selection_invariants(problem, n_hard: int) -> None:
    Y, vids, n_test, gap, seed = problem
    test = select_balanced(Y, vids, n_test, min_gap=gap)
    assert len(test) <= n_test and test == sorted(set(test)) and _spaced(test, vids, gap)
    plan = build_fewshot_plan(Y, vids, test, seed=seed, n_neg_hard=n_hard, min_gap=gap)
    assert plan["excluded"] == len(test)
    _check_plan(plan, Y, vids, test)
    assert plan == build_fewshot_plan(Y, vids, test, seed=seed, n_neg_hard=n_hard, min_gap=gap)
