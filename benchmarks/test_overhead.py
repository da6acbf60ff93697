"""Per-case overhead of a fully cached evaluation run against a bare parametrized pytest run.

    pytest benchmarks/test_overhead.py --benchmark-only

Both sides are whole `pytest` subprocesses over the same number of cases (the pointing quick
subset with oracle and chance: 5 samples x 12 organs x 3 conditions x 2 models = 360), so start-up,
collection and reporting are included on both. The cached side has answered every case before
(a warm-up run fills the cache), so it measures the suite's own cost: data access, request
building, cache lookups, scoring, outcome recording and the reports. The ratio and the per-case
difference are printed and stored in the benchmark's extra_info.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
N_CASES = 5 * 12 * 3 * 2

BARE = f"""
import pytest

@pytest.mark.parametrize("i", range({N_CASES}))
def test_bare(i):
    assert i >= 0
"""


def _pytest(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return elapsed


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("overhead")
    (d / "test_bare.py").write_text(BARE)
    return d


def test_cached_run_overhead_per_case(benchmark, workdir):
    cache, results = workdir / "cache", workdir / "results"
    suite = [
        str(REPO / "evals" / "pointing"),
        f"--rootdir={REPO}",
        "-m",
        "quick",
        f"--cache-dir={cache}",
        f"--results-dir={results}",
    ]
    _pytest(suite, REPO)  # warm-up: builds the synthetic data and plans, fills the cache
    bare = [_pytest([str(workdir / "test_bare.py")], workdir) for _ in range(3)]
    cached = benchmark.pedantic(lambda: _pytest(suite, REPO), rounds=3, iterations=1)
    t_bare = min(bare)
    t_cached = min(benchmark.stats.stats.data) if benchmark.stats else cached
    per_case_ms = (t_cached - t_bare) / N_CASES * 1000
    benchmark.extra_info.update(
        n_cases=N_CASES,
        bare_s=round(t_bare, 3),
        cached_s=round(t_cached, 3),
        ratio=round(t_cached / t_bare, 2),
        overhead_ms_per_case=round(per_case_ms, 2),
    )
    print(
        f"\n{N_CASES} cases: bare pytest {t_bare:.2f} s, fully cached suite {t_cached:.2f} s, "
        f"ratio {t_cached / t_bare:.2f}x, overhead {per_case_ms:.1f} ms per case"
    )
