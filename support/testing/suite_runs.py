"""Child `pytest evals -m quick` runs for the real-engine lane: run the five evaluations' quick
subsets against one model in a fresh process and read back their raw rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EVALUATIONS = ("pointing", "pgt", "nyu_distance", "surgvqa", "dynamic")
CHILD_RUN_S = 1500  # seconds a child run may take
# a `-k` expression for `-m quick`: every request shape of the five evaluations at a fraction of
# their cases: pointing cut to one organ (Liver) in all three conditions, few-shot included (15
# of 180 cases), pgt to its first image in all eleven modes (11 of 66), dynamic to its random
# strategy's two rounds (the search's rounds send the same shape); nyu_distance and surgvqa whole
# the real-engine lane's cap on every answer: engines are compared on what they were sent, which
# shows from the first token; the random weights' 512-token pgt reasonings were most of its time
LANE_MAX_TOKENS = "--max-tokens=32"
EVERY_SHAPE = (
    "(not pointing or (liver and not ligament)) and (not pgt or r00000) and (not dynamic or random)"
)


def run_quick(
    tmp: Path, cache: Path, run_id: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`pytest evals -m quick` in `tmp` with `--cache-dir=cache`, results under tmp/results."""
    argv = [
        sys.executable,
        "-m",
        "pytest",
        str(REPO / "evals"),
        f"--rootdir={REPO}",
        "-m",
        "quick",
        f"--cache-dir={cache}",
        f"--results-dir={tmp / 'results'}",
        f"--run-id={run_id}",
        "--bootstrap=0",
        "-p",
        "no:cacheprovider",
        "-q",
        *args,
    ]
    env = {**os.environ, **(env or {}), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run(
        argv, cwd=tmp, capture_output=True, text=True, timeout=CHILD_RUN_S, env=env
    )


def raw_rows(results: Path, run_id: str) -> dict[str, list[dict]]:
    """Each evaluation's raw_results.jsonl rows (AssertionError when one is missing)."""
    rows = {}
    for ev in EVALUATIONS:
        path = results / ev / run_id / "raw_results.jsonl"
        assert path.is_file(), f"{ev}: no raw_results.jsonl"
        rows[ev] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def link_shared_data(cache: Path, shared_cache: Path) -> Path:
    """`cache` (made where missing) with its `synthetic/` a link to `shared_cache`'s, where the
    session's synthetic datasets are built once; a link already there is kept."""
    link = cache / "synthetic"
    if not link.exists():
        (shared_cache / "synthetic").mkdir(parents=True, exist_ok=True)
        cache.mkdir(parents=True, exist_ok=True)
        link.symlink_to(shared_cache / "synthetic", target_is_directory=True)
    return cache


def cache_with_shared_data(tmp: Path, shared_cache: Path) -> Path:
    """A fresh response cache under `tmp` whose synthetic data is `shared_cache`'s (built once)."""
    cache = tmp / "cache"
    cache.mkdir()
    return link_shared_data(cache, shared_cache)


def error_outcomes(rows: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The error outcomes of each evaluation that has any (and an evaluation with no rows)."""
    found: dict[str, list[dict]] = {}
    for ev, outcomes in rows.items():
        errors = [o for o in outcomes if o["status"] == "error"]
        if errors or not outcomes:
            found[ev] = errors or [{"status": "error", "error": "no outcomes"}]
    return found
