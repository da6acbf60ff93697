"""Throughput of API backends: wall time against the ideal N x latency / concurrency.

    pytest benchmarks/test_api_throughput.py --benchmark-only -s

The loopback server runs in its own process with 100 ms latency per response; the suite sends
1,008 pointing cases (84 samples x 12 organs, zero-shot) through the OpenAI SDK with concurrency 32
and no cache. pytest's start-up (imports, collection, data preparation) is measured by a
`--collect-only` run of the same selection and subtracted. Target: within 1.2x of the ideal.

A second measurement isolates the engine: the same number of text-only requests through
ModelClient and the OpenAI SDK, no pytest, no images. Where the first is far from the ideal and
the second is close, the time goes to per-request CPU (image payloads through the SDK and the
server on the same cores), not to how requests are scheduled.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")

REPO = Path(__file__).resolve().parents[1]
LATENCY_S, CONCURRENCY, SAMPLES = 0.1, 32, 84
N_CASES = SAMPLES * 12
KEY = "sk-bench-loopback-0000"
ANSWER = '{"name":"X","present":0,"point_canvas":null}'


@pytest.fixture(scope="module")
def server_url():
    from support.doubles.loopback import server_process

    with server_process(ANSWER, KEY, "--latency", str(LATENCY_S), lifetime_s=900) as url:
        yield url


def _pytest(args: list[str]) -> float:
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    return time.perf_counter() - start


def test_api_wall_time_against_ideal(benchmark, server_url, tmp_path):
    selection = [
        str(REPO / "evals" / "pointing"),
        "--model=openai:bench",
        f"--api-base={server_url}",
        f"--concurrency={CONCURRENCY}",
        f"--samples={SAMPLES}",
        "-k",
        "zero_shot",
        f"--cache-dir={tmp_path / 'cache'}",
        f"--results-dir={tmp_path / 'results'}",
        "--no-cache",
        "--bootstrap=200",
    ]
    _pytest([*selection, "--collect-only"])  # warm-up: synthetic data and plans
    startup = min(_pytest([*selection, "--collect-only"]) for _ in range(2))
    benchmark.pedantic(lambda: _pytest(selection), rounds=2, iterations=1)
    wall = min(benchmark.stats.stats.data)
    ideal = N_CASES * LATENCY_S / CONCURRENCY
    ratio = (wall - startup) / ideal
    benchmark.extra_info.update(
        n_cases=N_CASES,
        wall_s=round(wall, 2),
        startup_s=round(startup, 2),
        ideal_s=round(ideal, 2),
        ratio=round(ratio, 2),
    )
    print(
        f"\n{N_CASES} cases, {LATENCY_S * 1000:.0f} ms latency, concurrency {CONCURRENCY}: "
        f"wall {wall:.2f} s, start-up {startup:.2f} s, ideal {ideal:.2f} s, "
        f"ratio {(wall - startup) / ideal:.2f}x"
    )


def test_engine_alone_against_ideal(benchmark, server_url, monkeypatch):
    from support.backends.registry import BackendOptions, create_backend
    from support.client.engine import ModelClient
    from support.types import Part, Request

    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    async def run_all() -> None:
        backend = create_backend("openai:bench", BackendOptions(api_base=server_url))
        client = ModelClient(backend, cache=None, concurrency=CONCURRENCY)
        requests = [Request(parts=(Part.of_text(f"case {i}"),)) for i in range(N_CASES)]
        await asyncio.gather(*(client.generate(r) for r in requests))
        await client.aclose()

    def once() -> float:
        start = time.perf_counter()
        asyncio.run(run_all())
        return time.perf_counter() - start

    benchmark.pedantic(once, rounds=3, iterations=1)
    wall = min(benchmark.stats.stats.data)
    ideal = N_CASES * LATENCY_S / CONCURRENCY
    benchmark.extra_info.update(n=N_CASES, wall_s=round(wall, 2), ratio=round(wall / ideal, 2))
    print(
        f"\nengine + OpenAI SDK, {N_CASES} text-only requests: wall {wall:.2f} s, "
        f"ideal {ideal:.2f} s, ratio {wall / ideal:.2f}x"
    )
