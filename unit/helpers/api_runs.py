"""`pytest evals/<evaluation> -m quick` in a subprocess, as the API-model tests run it against
the loopback server: an environment holding no key but the one given, and the shared options
(this test's cache and results folders, a run id, no bootstrap, no pytest cache)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from unit.helpers.suite_runs import link_shared_data

REPO = Path(__file__).resolve().parents[2]


def api_env(keys: dict[str, str] | None = None) -> dict[str, str]:
    """os.environ without any `*_API_KEY` variable, plus `keys` (variable -> value)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**env, **(keys or {})}


def run_evaluation(
    evaluation: str,
    model: str,
    tmp: Path,
    run_id: str,
    extra: Sequence[str] = (),
    *,
    env: dict[str, str],
    cache: str = "cache",
    shared_cache: Path | None = None,
    timeout_s: float = 240,
) -> subprocess.CompletedProcess[str]:
    """Its quick subset with `model`; results in tmp/results/<evaluation>/<run_id>. With
    `shared_cache`, the cache folder's data and derived parts are the session's (SHARED_PARTS)."""
    if shared_cache is not None:
        link_shared_data(tmp / cache, shared_cache)
    args = [
        str(REPO / "evals" / evaluation),
        f"--rootdir={REPO}",
        f"--model={model}",
        f"--cache-dir={tmp / cache}",
        f"--results-dir={tmp / 'results'}",
        f"--run-id={run_id}",
        "--bootstrap=0",
        "-p",
        "no:cacheprovider",
        "-m",
        "quick",
        *extra,
    ]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
