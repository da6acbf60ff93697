"""Per-case overhead of a fully cached evaluation run against a bare parametrized pytest run.

    pytest benchmarks/test_overhead.py --benchmark-only

Both sides are whole `pytest` subprocesses over the same number of cases (the pointing quick
subset with oracle and chance, 5 samples x 12 organs x 3 conditions x 2 models = 360, and the full
run, 100 samples: 7,200), so start-up, collection and reporting are included on both. The cached
side has answered every case before (a warm-up run fills the cache), so it measures the suite's
own cost: data access, request building, cache lookups, scoring, outcome recording and reports.
The ratio and the per-case difference are printed and stored in the benchmark's extra_info.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# subset -> (pytest selection args, cases): 5 or 100 samples x 12 organs x 3 conditions x 2 models
SUBSETS = {"quick": (["-m", "quick"], 5 * 36 * 2), "full": ([], 100 * 36 * 2)}

BARE = """
import pytest

@pytest.mark.parametrize("i", range({n}))
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
        timeout=900,
    )
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return elapsed


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("overhead")


@pytest.mark.parametrize("subset", list(SUBSETS))
def test_cached_run_overhead_per_case(benchmark, workdir, subset):
    selection, n_cases = SUBSETS[subset]
    bare_file = workdir / f"test_bare_{subset}.py"
    bare_file.write_text(BARE.format(n=n_cases))
    suite = [
        str(REPO / "evals" / "pointing"),
        f"--rootdir={REPO}",
        *selection,
        f"--cache-dir={workdir / 'cache'}",
        f"--results-dir={workdir / 'results'}",
    ]
    _pytest(suite, REPO)  # warm-up: builds the synthetic data and plans, fills the cache
    t_bare = min(_pytest([str(bare_file)], workdir) for _ in range(3))
    benchmark.pedantic(lambda: _pytest(suite, REPO), rounds=3, iterations=1)
    t_cached = min(benchmark.stats.stats.data)
    per_case_ms = (t_cached - t_bare) / n_cases * 1000
    benchmark.extra_info.update(
        n_cases=n_cases,
        bare_s=round(t_bare, 3),
        cached_s=round(t_cached, 3),
        ratio=round(t_cached / t_bare, 2),
        overhead_ms_per_case=round(per_case_ms, 2),
    )
    print(
        f"\n{subset}: {n_cases} cases: bare pytest {t_bare:.2f} s, fully cached suite "
        f"{t_cached:.2f} s, ratio {t_cached / t_bare:.2f}x, overhead {per_case_ms:.1f} ms per case"
    )
