"""Speed of a whole API run against a bare client on the same requests (issue 15, P1 and P2).

    pytest benchmarks/test_api_speed.py --benchmark-only -s -p no:randomly
    BENCH_RUNS=1 pytest benchmarks/test_api_speed.py --benchmark-only -s -p no:randomly

Workload: the pointing evaluation on the synthetic CholecSeg8k-format data, `--samples 30`, all
three conditions (30 x 12 organs x 3 = 1,080 requests), `--concurrency 32`, through the OpenAI SDK
(`openai-compatible:bench`) to the loopback server (`python -m support.doubles.loopback`) in its own
process, at 0 ms and 100 ms server latency. Each run gets a fresh server and a fresh response cache
(a new --cache-dir holding hard links to the prepared synthetic data; no responses and no stored
canvases, label maps or targets, so the run prepares every row it uses before its first request:
the preparation is counted in the run).

Clients, each a whole subprocess timed from outside:
- vlmbench: `pytest evals/pointing ... -p no:randomly -q` (no -n).
- bare: benchmarks/bare_client.py POSTing the very bodies vlmbench sent (recorded by the server in
  an untimed first run), 32 in flight. Its bodies are read into memory before its first request;
  that read (wall and CPU) is subtracted, so its whole wall is interpreter start-up, imports,
  requests and exit.
- vlmbench+canvases: the same command with the rows an earlier run prepared kept in the cache dir
  (canvases, label maps, targets: a second model, or a second run, on the same data): a run with
  prepared data, and so what preparing costs a run.
- inspect_ai: benchmarks/inspect_client.py replaying the same recorded requests through
  inspect_ai's eval() (`max_connections` 32, its default logging), when an interpreter has
  inspect_ai: `BENCH_INSPECT_PYTHON` (e.g. a venv of its own: `pip install inspect_ai openai`),
  else this one if it can import it. Not a dependency; skipped otherwise. A run takes ~100 s at
  1,080 requests here, so it runs in the first `BENCH_INSPECT_ROUNDS` rounds only (default 1).
  Its sample loading (reading and parsing the bodies, building the samples) is subtracted as
  the bare client's is.

P4: after the 0 ms run, the same command again against the same server and cache (every answer
cached, 0 requests sent: asserted), against a bare parametrized pytest of the same size
(`test_bare_cases.py`, written here: 1,080 cases that assert a number) plus vlmbench's report time
(the 0 ms run's last response to exit). Goal: cached <= 1.5 x (bare pytest + report time).

Every child runs without PYTHONDONTWRITEBYTECODE (which this project's sandbox sets): a user's
Python caches bytecode and pytest caches its rewritten test and plugin modules; without those
caches every run compiles the suite and rewrites ~150 plugin modules again (~2 s more a run here).
The untimed recording run writes the caches.

The server reports when the first request arrived and the last response was written (wall-clock
time, shared by all processes on the machine), which splits a run into start-up to the first
request, the request span, and the time from the last response to the process's exit (P2, whose
goals are start-up <= 1.5 s + a bare `pytest --collect-only` of 1,080 cases, timed beside the
bare pytest, and <= 1.5 s from the last response to exit).
Client CPU is user + system of the client process (getrusage of reaped children, before/after).
Runs alternate between clients and latencies; tables show the median and min-max over
BENCH_RUNS rounds (default 3). Everything goes into benchmark.extra_info. The benchmark asserts
only that every request was answered and the counts match; times are never asserted.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

pytest.importorskip("openai")

from bare_client import available_library  # benchmarks/ is on sys.path (pytest's rootdir mode)
from tabulate import tabulate

REPO = Path(__file__).resolve().parents[1]
BARE_CLIENT = REPO / "benchmarks" / "bare_client.py"
INSPECT_CLIENT = REPO / "benchmarks" / "inspect_client.py"
KEY = "sk-bench-loopback-0000"
ANSWER = '{"name":"X","present":0,"point_canvas":null}'
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "30"))  # smaller for a smoke run only
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
CONCURRENCY = 32
LATENCIES_MS = (0, 100)
N_ORGANS, N_CONDITIONS = 12, 3
N_REQUESTS = SAMPLES * N_ORGANS * N_CONDITIONS  # one request per case: 1,080 at 30 samples
TIMEOUT_S = 1800
BARE_LIBRARY = available_library()
INSPECT_ROUNDS = int(os.environ.get("BENCH_INSPECT_ROUNDS", "1"))


@functools.cache
def inspect_python() -> str | None:
    """An interpreter that can import inspect_ai: BENCH_INSPECT_PYTHON, else this one; None if
    neither can. Probed once, when the benchmark runs (not when pytest collects this module)."""
    for python in (os.environ.get("BENCH_INSPECT_PYTHON"), sys.executable):
        if not python:
            continue
        probe = (
            "import importlib.util, sys; sys.exit(importlib.util.find_spec('inspect_ai') is None)"
        )
        if subprocess.run([python, "-c", probe], capture_output=True, timeout=120).returncode == 0:
            return python
    return None


INSPECT_SKIP = (
    "skipped: inspect_ai is not importable (not a dependency of vlmbench; "
    "BENCH_INSPECT_PYTHON names an interpreter that has it)"
)


@dataclass
class Run:
    """One client's run at one latency. Times in seconds; `*_at` are time.time() epochs."""

    client: str
    latency_ms: int
    round: int
    started_at: float  # just before the subprocess started
    ended_at: float  # just after it exited
    first_request_at: float  # at the server
    last_response_at: float  # at the server
    cpu_s: float  # client process user + system
    server_cpu_s: float
    requests: int  # answered by the server
    peak_in_flight: int  # at the server
    excluded_s: float = 0.0  # wall not counted in `whole_s` (the bare client's body load)

    @property
    def whole_s(self) -> float:
        return self.ended_at - self.started_at - self.excluded_s

    @property
    def startup_s(self) -> float:  # process start -> first request at the server
        return self.first_request_at - self.started_at - self.excluded_s

    @property
    def span_s(self) -> float:  # first request -> last response, at the server
        return self.last_response_at - self.first_request_at

    @property
    def tail_s(self) -> float:  # last response -> process exit
        return self.ended_at - self.last_response_at

    def as_dict(self) -> dict:
        derived = ("whole_s", "startup_s", "span_s", "tail_s")
        return {**asdict(self), **{k: round(getattr(self, k), 3) for k in derived}}


@contextmanager
def loopback(latency_ms: int, record: Path | None = None) -> Iterator[str]:
    """A fresh loopback server process; yields its root URL."""
    from support.doubles.loopback import server_process

    options = ["--latency", str(latency_ms / 1000), *(("--record", str(record)) if record else ())]
    with server_process(ANSWER, KEY, *options, lifetime_s=TIMEOUT_S) as url:
        yield url


def server_stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/_loopback/stats", timeout=30) as resp:
        return json.load(resp)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # reaped children only
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str]) -> tuple[float, float, float, subprocess.CompletedProcess]:
    """Run `cmd` in the repo; (started_at, ended_at, CPU seconds of it and its children, proc)."""
    env = {**os.environ, "VLMBENCH_API_KEY": KEY}  # openai-compatible:'s key, and the replays'
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a user's machine (module docstring)
    cpu0 = children_cpu_s()
    started_at = time.time()
    proc = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )  # fmt: skip
    ended_at = time.time()
    return started_at, ended_at, children_cpu_s() - cpu0, proc


def vlmbench_cmd(url: str, cache_dir: Path, results_dir: Path) -> list[str]:
    return [
        *(sys.executable, "-m", "pytest", str(REPO / "evals" / "pointing")),
        *(f"--samples={SAMPLES}", f"--concurrency={CONCURRENCY}"),
        *("--model=openai-compatible:bench", f"--api-base={url}/v1"),
        *(f"--cache-dir={cache_dir}", f"--results-dir={results_dir}"),
        *("-p", "no:randomly", "-p", "no:cacheprovider", "-q"),
    ]


def fresh_cache(prepared: Path, dest: Path, canvases: bool = False) -> Path:
    """`dest` with hard links to the prepared data of `prepared`, without its responses and,
    unless `canvases`, without the stored canvases (a fresh run encodes every frame; the cached
    rerun reads them)."""
    skip = ("responses.sqlite*",) if canvases else ("responses.sqlite*", "canvases")
    shutil.copytree(prepared, dest, copy_function=os.link, ignore=shutil.ignore_patterns(*skip))
    return dest


def measure(url: str, client: str, latency_ms: int, rnd: int, cmd: list[str]) -> tuple[Run, str]:
    """Run one client against the server at `url`; the Run and the client's stdout."""
    started_at, ended_at, cpu_s, proc = timed(cmd)
    assert proc.returncode == 0, f"{client} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    stats = server_stats(url)
    assert stats["first_request_at"] is not None, f"{client}: the server saw no request"
    run = Run(
        client, latency_ms, rnd, started_at, ended_at, stats["first_request_at"],
        stats["last_response_at"], cpu_s, stats["cpu_s"], stats["answered"],
        stats["peak_in_flight"],
    )  # fmt: skip
    # every request answered once: no retries, no faults, each distinct body exactly once
    assert stats["attempts"] == stats["answered"] == N_REQUESTS, (client, stats["attempts"])
    assert len(stats["bodies"]) == N_REQUESTS and set(stats["bodies"].values()) == {1}, client
    return run, proc.stdout


def run_vlmbench(
    work: Path,
    prepared: Path,
    latency_ms: int,
    rnd: int,
    rerun: bool = False,
    canvases: bool = False,
) -> tuple[Run, float | None]:
    """A fresh-cache run (with `canvases`, the stored canvases kept); with `rerun`, also the
    whole wall (s) of the same command again with every answer cached (same server: the cache
    identity holds its URL)."""
    client = "vlmbench+canvases" if canvases else "vlmbench"
    tag = f"{client}-{latency_ms}-{rnd}"
    cache = fresh_cache(prepared, work / f"cache-{tag}", canvases)
    try:
        with loopback(latency_ms) as url:
            cmd = vlmbench_cmd(url, cache, work / f"results-{tag}")
            run, out = measure(url, client, latency_ms, rnd, cmd)
            assert f"{N_REQUESTS} passed" in out, out[-2000:]
            if not rerun:
                return run, None
            started_at, ended_at, _, proc = timed(cmd)
            assert proc.returncode == 0 and f"{N_REQUESTS} passed" in proc.stdout, proc.stdout
            assert server_stats(url)["attempts"] == N_REQUESTS  # the rerun sent nothing
            return run, ended_at - started_at
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(work / f"results-{tag}", ignore_errors=True)


BARE_CASES = f"""
import pytest


@pytest.mark.parametrize("i", range({N_REQUESTS}))
def test_case(i):
    assert i >= 0
"""


def run_bare_pytest(work: Path, collect_only: bool = False) -> float:
    """Whole wall (s) of a bare parametrized pytest with as many cases as the workload (with
    `collect_only`, of collecting them: P2's bare collection)."""
    path = work / "test_bare_cases.py"
    path.write_text(BARE_CASES, encoding="utf-8")
    cmd = [sys.executable, "-m", "pytest", str(path), "-q", "-p", "no:randomly",
           "-p", "no:cacheprovider", f"--rootdir={work}"]  # fmt: skip
    started_at, ended_at, _, proc = timed([*cmd, "--collect-only"] if collect_only else cmd)
    expected = f"{N_REQUESTS} tests collected" if collect_only else f"{N_REQUESTS} passed"
    assert proc.returncode == 0 and expected in proc.stdout, proc.stdout[-2000:]
    return ended_at - started_at


def run_replay(
    client: str, python: str, script: Path, bodies: Path, latency_ms: int, rnd: int
) -> Run:
    """A replaying client (bare_client.py, inspect_client.py) on the recorded bodies."""
    with loopback(latency_ms) as url:
        cmd = [python, str(script), url, str(bodies), f"--concurrency={CONCURRENCY}"]
        run, out = measure(url, client, latency_ms, rnd, cmd)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["n"] == result["ok"] == N_REQUESTS, result
    run.client = f"{client} ({result['library']})"
    run.excluded_s = result["load_s"]  # bodies in memory before the clock starts
    run.cpu_s -= result["load_cpu_s"]
    return run


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Iterator[tuple[Path, Path, Path]]:
    """(work dir, prepared cache, recorded bodies): one untimed vlmbench run at 0 ms builds the
    synthetic data and has the server record every request body."""
    work = tmp_path_factory.mktemp("api_speed")
    cache, bodies = work / "prepared-cache", work / "bodies"
    try:
        with loopback(0, record=bodies) as url:
            cmd = vlmbench_cmd(url, cache, work / "results-rec")
            measure(url, "vlmbench (recording)", 0, -1, cmd)
        yield work, cache, bodies
    finally:  # ~1.4 GB of bodies and ~0.2 GB of data: not left for pytest's basetemp rotation
        for path in (bodies, cache, work / "results-rec"):
            shutil.rmtree(path, ignore_errors=True)


def med(values: list[float]) -> str:
    """median (min-max), 2 decimals; a lone value as is."""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def by(runs: list[Run], client: str, latency_ms: int | None = None) -> list[Run]:
    return [
        r for r in runs
        if r.client.split(" ")[0] == client and latency_ms in (None, r.latency_ms)
    ]  # fmt: skip


def ratios(
    runs: list[Run], attr: str, latency_ms: int, top: str = "vlmbench", bottom: str = "bare"
) -> list[float]:
    """`top` / `bottom` of `attr`, one ratio per round (the rounds pair the clients)."""
    a = {r.round: getattr(r, attr) for r in by(runs, top, latency_ms)}
    b = {r.round: getattr(r, attr) for r in by(runs, bottom, latency_ms)}
    return [a[k] / b[k] for k in sorted(a.keys() & b.keys())]


def report(
    runs: list[Run], reruns: list[tuple[float, ...]], load: list[list[float]]
) -> tuple[str, dict]:
    """The printed tables and the summary for extra_info; `reruns`: (cached rerun, bare pytest,
    report time, bare collection, start-up) seconds per round, the last three of vlmbench's run
    at 0 ms; `load`: load averages before, after."""
    clients = ["vlmbench", "vlmbench+canvases", "bare", "inspect_ai"]
    names = {c: by(runs, c)[0].client for c in clients if by(runs, c)}
    rows = []
    for c in clients:
        if c not in names:
            continue
        rows.append([
            names[c],
            *(med([r.whole_s for r in by(runs, c, ms)]) for ms in LATENCIES_MS),
            med([r.cpu_s for r in by(runs, c)]),
            med([r.span_s for r in by(runs, c, 100)]),
        ])  # fmt: skip
    if inspect_python() is None:
        rows.append(["inspect_ai", *["skipped"] * 4])  # INSPECT_SKIP, printed below the table
    head = ["client", "whole wall @0 ms (s)", "whole wall @100 ms (s)",
            "client CPU, both latencies (s)", "request span @100 ms (s)"]  # fmt: skip
    main = tabulate(rows, head, tablefmt="github")

    phase_rows = [
        [names[c], f"{ms} ms", med([r.startup_s for r in by(runs, c, ms)]),
         med([r.span_s for r in by(runs, c, ms)]), med([r.tail_s for r in by(runs, c, ms)]),
         med([r.server_cpu_s for r in by(runs, c, ms)]),
         f"{max(r.peak_in_flight for r in by(runs, c, ms))}"]
        for c in names for ms in LATENCIES_MS
    ]  # fmt: skip
    phases = tabulate(
        phase_rows,
        ["client", "latency", "start-up to first request (s)", "request span (s)",
         "last response to exit (s)", "server CPU (s)", "peak in flight"],
        tablefmt="github",
    )  # fmt: skip

    summary: dict = {"n_requests": N_REQUESTS, "runs": RUNS}
    inspect_ran = f"ran in the first {INSPECT_ROUNDS} round(s): {names.get('inspect_ai')}"
    summary["inspect_ai"] = inspect_ran if inspect_python() else INSPECT_SKIP
    summary["load_average_before_after"] = load
    summary["bare"] = BARE_LIBRARY or "skipped: none of aiohttp, httpx, httpx2 is importable"
    ratio_rows = []
    if "bare" in names:
        goals = [("whole", "whole_s", 0, 1.5), ("whole", "whole_s", 100, 1.5),
                 ("span", "span_s", 0, 1.2), ("span", "span_s", 100, 1.2)]  # fmt: skip
        for label, attr, ms, goal in goals:
            values = ratios(runs, attr, ms)
            key = f"ratio_{label}_{ms}ms"
            summary[key] = round(statistics.median(values), 3)
            summary[key + "_range"] = [round(min(values), 3), round(max(values), 3)]
            ratio_rows.append([f"vlmbench {label} / bare {label} @{ms} ms", med(values), goal])
    if "vlmbench+canvases" in names and "bare" in names:
        for ms in LATENCIES_MS:
            values = ratios(runs, "whole_s", ms, "vlmbench+canvases")
            summary[f"ratio_whole_canvases_{ms}ms"] = round(statistics.median(values), 3)
            ratio_rows.append([f"vlmbench+canvases whole / bare whole @{ms} ms", med(values), ""])
    if "inspect_ai" in names:
        for ms in LATENCIES_MS:
            values = ratios(runs, "whole_s", ms, "vlmbench", "inspect_ai")
            summary[f"ratio_whole_inspect_{ms}ms"] = round(statistics.median(values), 3)
            ratio_rows.append([f"vlmbench whole / inspect_ai whole @{ms} ms", med(values), ""])
    for c in names:
        per_req = [r.cpu_s / N_REQUESTS * 1000 for r in by(runs, c)]
        summary[f"cpu_ms_per_request_{c}"] = round(statistics.median(per_req), 3)
        ratio_rows.append([f"client CPU per request, {names[c]} (ms)", med(per_req), ""])
    if reruns:
        cached, bare_pytest, report_s, bare_collect, startup = (
            list(x) for x in zip(*reruns, strict=True)
        )
        p4 = [c / (b + r) for c, b, r, _, _ in reruns]
        extra_startup = [s - b for _, _, _, b, s in reruns]  # P2: start-up beyond bare collection
        summary.update(
            cached_rerun_s=round(statistics.median(cached), 3),
            bare_pytest_s=round(statistics.median(bare_pytest), 3),
            bare_collection_s=round(statistics.median(bare_collect), 3),
            report_s=round(statistics.median(report_s), 3),
            startup_beyond_bare_collection_s=round(statistics.median(extra_startup), 3),
            ratio_cached_rerun=round(statistics.median(p4), 3),
            ratio_cached_rerun_range=[round(min(p4), 3), round(max(p4), 3)],
        )
        ratio_rows += [
            [f"bare pytest, {N_REQUESTS} cases, --collect-only, whole (s)", med(bare_collect), ""],
            ["vlmbench start-up to first request @0 ms (s)", med(startup), ""],
            ["P2: start-up - bare collection @0 ms (s)", med(extra_startup), 1.5],
            ["P2: vlmbench report time (last response to exit) @0 ms (s)", med(report_s), 1.5],
            ["cached rerun, whole (s)", med(cached), ""],
            [f"bare pytest, {N_REQUESTS} cases, whole (s)", med(bare_pytest), ""],
            ["P4: cached rerun / (bare pytest + report time)", med(p4), 1.5],
        ]
    ratio_table = tabulate(ratio_rows, ["ratio", "median (min-max)", "goal <="], tablefmt="github")
    for c in names:
        for ms in LATENCIES_MS:
            for attr in ("whole_s", "startup_s", "span_s", "tail_s", "cpu_s"):
                values = [getattr(r, attr) for r in by(runs, c, ms)]
                summary[f"{c}_{ms}ms_{attr}"] = round(statistics.median(values), 3)
    text = (
        f"\n{N_REQUESTS} requests per run (pointing, {SAMPLES} samples x {N_ORGANS} organs x "
        f"{N_CONDITIONS} conditions), concurrency {CONCURRENCY}, medians (min-max) of "
        f"{RUNS} alternating round(s); load average (1, 5, 15 min) before {load[0]}, after "
        f"{load[1]}; bare client: {summary['bare']}\n"
        f"{main}\ninspect_ai: {summary['inspect_ai']}\n\n"
        f"phases (P2; server-side times)\n{phases}\n\n{ratio_table}\n"
    )
    return text, summary


def test_api_speed_against_bare_client(benchmark, prepared):
    work, cache, bodies = prepared
    assert len(list(bodies.glob("*.json"))) == N_REQUESTS  # what the bare client replays
    runs: list[Run] = []
    reruns: list[tuple[float, ...]] = []  # (cached rerun, bare pytest, report, bare collection,
    # start-up): see report()
    load_before = [round(x, 2) for x in os.getloadavg()]

    def one_round() -> None:
        rnd = len({r.round for r in runs})
        for ms in LATENCIES_MS:  # alternating: each client once per latency per round
            run, cached_s = run_vlmbench(work, cache, ms, rnd, rerun=ms == 0)
            runs.append(run)
            if cached_s is not None:
                bare_s, collect_s = run_bare_pytest(work), run_bare_pytest(work, collect_only=True)
                reruns.append((cached_s, bare_s, run.tail_s, collect_s, run.startup_s))
            if BARE_LIBRARY is not None:
                runs.append(run_replay("bare", sys.executable, BARE_CLIENT, bodies, ms, rnd))
            runs.append(run_vlmbench(work, cache, ms, rnd, canvases=True)[0])
            if inspect_python() is not None and rnd < INSPECT_ROUNDS:
                runs.append(
                    run_replay("inspect_ai", inspect_python(), INSPECT_CLIENT, bodies, ms, rnd)
                )

    benchmark.pedantic(one_round, rounds=RUNS, iterations=1)
    load_after = [round(x, 2) for x in os.getloadavg()]
    text, summary = report(runs, reruns, [load_before, load_after])
    benchmark.extra_info.update(summary, all_runs=[r.as_dict() for r in runs])
    print(text)
