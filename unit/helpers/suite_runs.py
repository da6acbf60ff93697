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


# a cache folder's parts that hold the same bytes for every run of the same data, whatever the
# model: the synthetic datasets, and what is derived from their content alone (pointing's prepared
# tables in `data_info/` and its canvases and targets in `canvases/`, keyed by the dataset's
# fingerprint; dynamic's caption embeddings in `embeddings/`, keyed by text and embedder). Each is
# written atomically or under a file lock, so runs that share one folder never see a part-written
# file. A cold pointing run spends ~9 s of CPU on its tables and canvases, a cold dynamic run ~15 s
# on its embeddings: linked, each session makes them once.
SHARED_PARTS = ("synthetic", "data_info", "canvases", "embeddings")


def link_shared_data(cache: Path, shared_cache: Path) -> Path:
    """`cache` (made where missing) with each of SHARED_PARTS a link to `shared_cache`'s, where
    the session makes them once; a part already there (a link or a folder) is kept. A test that
    damages one of these parts must use a cache of its own, not a linked one."""
    cache.mkdir(parents=True, exist_ok=True)
    for part in SHARED_PARTS:
        link = cache / part
        if not link.exists() and not link.is_symlink():
            (shared_cache / part).mkdir(parents=True, exist_ok=True)
            link.symlink_to(shared_cache / part, target_is_directory=True)
    return cache


def files_following_links(root: Path) -> list[Path]:
    """Every file under `root`, sorted, a linked cache's SHARED_PARTS included (links to folders
    followed): what a scan of everything a run wrote must read."""
    return sorted(
        Path(top) / name for top, _, names in os.walk(root, followlinks=True) for name in names
    )


def cache_with_shared_data(tmp: Path, shared_cache: Path) -> Path:
    """A fresh response cache under `tmp` whose data and derived parts are `shared_cache`'s
    (made once: SHARED_PARTS)."""
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
