"""`--batch` on the pointing workload against the loopback server (issue 28, "Done means").

    python benchmarks/batch_pointing.py [--samples 30] [--work DIR] [--md FILE]

A plain script, not a pytest module (its name does not match `test_*.py`; CI never runs it).
Workload: `pytest evals/pointing --model openai:gpt-4o --samples N` (N samples x 12 organs x 3
conditions: 1,080 cases at N = 30) through the OpenAI SDK against `python -m
support.doubles.loopback` in its own process (one server a scenario, killed in a finally), every run
on the same synthetic CholecSeg8k (built once, passed as --cholecseg8k), each with its own run id
and results dir, `--bootstrap 0`, `--batch-poll 0.2`. The server answers every request with one
valid pointing JSON.

Scenarios (server counts from GET <url>/_loopback/stats: `attempts` = synchronous requests,
`batch_items` = batch items the server processed, which it does when a batch ends, i.e. at the
status read that ends it: a batch submitted by one run and ended at the next run's read counts in
the next run; batches submitted from the run's "vlmbench: batches of" terminal line):
1. sync: no --batch, fresh cache.                2. batch: --batch, another fresh cache.
3. batch-rerun: 2 again, same cache.             4. --fault-rate 0.2 (item failures), then a rerun.
5. the first batch expires (--batch-ends expired,completed), then a rerun.
6. --batch submit, then --batch collect twice (server --batch-polls 1: the batch is still in
   progress at the first collect's status read, ended at the second's).
Prints a table of the runs and the checks, and writes both to the --md file.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-loopback-bench-batch-5c1d"
MODEL = "openai:gpt-4o"
ANSWER = '{"name": "Liver", "present": 0, "point_canvas": null}'
POLL_S = 0.2  # seconds between batch status reads (--batch-poll)
RUN_TIMEOUT_S = 600  # seconds one pytest run may take


@dataclass
class Run:
    """One pytest run: what it scored, what the server saw during it, and its files."""

    name: str
    options: list[str]
    rc: int = 0
    wall_s: float = 0.0  # seconds, the whole pytest process
    statuses: Counter = field(default_factory=Counter)  # raw_results.jsonl status -> cases
    passed: int = 0  # junit test cases that passed
    skips: list[str] = field(default_factory=list)  # junit skip messages
    sync_requests: int = 0  # server stats delta: attempts
    batch_items: int = 0  # server stats delta: batch_items
    item_errors: int = 0  # server stats delta: batch_item_errors
    batches: int = 0  # "submitted N batch(es)" in the terminal summary
    batch_line: str = ""
    usage: dict[str, str] = field(default_factory=dict)  # usage.csv's row
    results: Path = Path()

    @property
    def scored(self) -> int:
        return sum(n for s, n in self.statuses.items() if s != "error")

    @property
    def errors(self) -> int:
        return self.statuses.get("error", 0)


def loopback(*options: str):
    """A loopback server in its own process; yields its URL, stopped on the way out."""
    sys.path.insert(0, str(REPO))
    from support.doubles.loopback import server_process

    return server_process(ANSWER, KEY, *options, lifetime_s=1200)


def server_stats(url: str) -> dict[str, int]:
    """The counts this benchmark reads from the server."""
    with urllib.request.urlopen(f"{url}/_loopback/stats", timeout=10) as resp:
        data = json.load(resp)
    return {k: int(data[k]) for k in ("attempts", "batch_items", "batch_item_errors")}


def build_data(work: Path) -> Path:
    """The synthetic CholecSeg8k, built once (a raw tree), shared by every run."""
    sys.path.insert(0, str(REPO))
    from support.evaluations.pointing.synthetic import ensure_cholecseg8k

    return ensure_cholecseg8k(work / "shared")


def pytest_run(
    name: str, url: str, data: Path, work: Path, cache: str, samples: int, *extra: str
) -> Run:
    """`pytest evals/pointing` with `extra`; results in work/<name>/, cache work/<cache>."""
    options = [f"--samples={samples}", *extra]
    out = work / name
    args = [
        *(str(REPO / "evals" / "pointing"), f"--rootdir={REPO}", f"--model={MODEL}"),
        *(f"--cholecseg8k={data}", f"--api-base={url}/v1", f"--cache-dir={work / cache}"),
        *(f"--results-dir={out / 'results'}", f"--run-id={name}", "--bootstrap=0"),
        *(f"--junitxml={out / 'junit.xml'}", "-p", "no:cacheprovider", "-q", *options),
    ]
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(OPENAI_API_KEY=KEY, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", MPLBACKEND="Agg")
    before = server_stats(url)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    run = Run(name, [f"--cache-dir=<{cache}>", *options], rc=proc.returncode)
    run.wall_s = time.perf_counter() - t0
    after = server_stats(url)
    run.sync_requests = after["attempts"] - before["attempts"]
    run.batch_items = after["batch_items"] - before["batch_items"]
    run.item_errors = after["batch_item_errors"] - before["batch_item_errors"]
    text = proc.stdout + proc.stderr
    (out / "stdout.txt").parent.mkdir(parents=True, exist_ok=True)
    (out / "stdout.txt").write_text(text)
    if KEY in text:
        raise RuntimeError(f"{name}: the API key appears in the run's output")
    lines = [ln for ln in text.splitlines() if ln.startswith("vlmbench: batches of")]
    run.batch_line = "\n".join(lines)
    run.batches = sum(int(m) for m in re.findall(r"submitted (\d+) batch\(es\)", run.batch_line))
    run.results = out / "results" / "pointing" / name
    raw = run.results / "raw_results.jsonl"
    if raw.exists():
        run.statuses = Counter(json.loads(ln)["status"] for ln in raw.read_text().splitlines())
    usage = run.results / "usage.csv"
    if usage.exists():
        run.usage = next(csv.DictReader(usage.open()), {})
    junit = out / "junit.xml"
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            skip = case.find("skipped")
            if skip is not None:
                run.skips.append(skip.get("message", ""))
            elif case.find("failure") is None and case.find("error") is None:
                run.passed += 1
    print(f"  {name}: exit {run.rc}, {run.wall_s:.1f} s, {dict(run.statuses)}", flush=True)
    return run


def same(a: Run, b: Run, file: str) -> bool:
    """Whether the two runs wrote `file` byte for byte the same (cmp)."""
    return subprocess.run(["cmp", "-s", a.results / file, b.results / file]).returncode == 0


def scenarios(data: Path, work: Path, samples: int) -> tuple[list[Run], list[tuple[str, bool]]]:
    """Run the six scenarios; returns the runs and the checks (text, held)."""
    runs: list[Run] = []
    checks: list[tuple[str, bool]] = []
    batch = ["--batch", f"--batch-poll={POLL_S}"]

    def go(name: str, url: str, cache: str, *extra: str) -> Run:
        runs.append(pytest_run(name, url, data, work, cache, samples, *extra))
        return runs[-1]

    cases = samples * 12 * 3
    with loopback() as url:
        sync = go("1-sync", url, "cache-sync")
        checks += [
            (f"1: {cases} cases, all scored, {cases} synchronous requests, exit 0",
             sync.rc == 0 and sync.scored == cases == sync.sync_requests and not sync.errors),
        ]  # fmt: skip
        b = go("2-batch", url, "cache-batch", *batch)
        cost, batch_cost = float(b.usage.get("cost_usd") or 0), b.usage.get("batch_cost_usd")
        half = round(float(sync.usage.get("cost_usd") or 0) / 2, 6)
        checks += [
            ("2: 0 synchronous requests, every case a batch item, exit 0",
             b.rc == 0 and b.sync_requests == 0 and b.batch_items == cases == b.scored),
            *((f"2: {f} byte-identical to 1", same(sync, b, f))
              for f in ("raw_results.jsonl", "summary.csv", "comparisons.csv")),
            (f"2: usage.csv cost_usd {cost} = half of 1's ({half}) = batch_cost_usd",
             abs(cost - half) <= 2e-6 and batch_cost is not None and float(batch_cost) == cost),
        ]  # fmt: skip
        again = go("3-batch-rerun", url, "cache-batch", *batch)
        checks += [
            ("3: rerun sends nothing (server stats unchanged), exit 0",
             again.rc == 0 and again.sync_requests == again.batch_items == again.batches == 0),
            ("3: raw_results.jsonl byte-identical to 2", same(b, again, "raw_results.jsonl")),
        ]  # fmt: skip
    with loopback("--fault-rate", "0.2") as url:
        faulty = go("4-faults", url, "cache-faults", *batch)
        fixed = go("4-faults-rerun", url, "cache-faults", *batch)
        share = faulty.errors / cases
        checks += [
            (f"4: {faulty.errors} of {cases} cases errored ({share:.1%}; about 20%), exit 1",
             faulty.rc == 1 and 0.1 < share < 0.3 and faulty.errors == faulty.item_errors),
            (f"4: rerun scores every case, sends only the {faulty.errors} failed, exit 0",
             fixed.rc == 0 and fixed.scored == cases and fixed.batch_items == faulty.errors
             and fixed.sync_requests == 0),
            ("4: rerun's raw_results.jsonl byte-identical to 1",
             same(sync, fixed, "raw_results.jsonl")),
        ]  # fmt: skip
    done = cases // 10  # items the expired batch answered before it expired
    expire = ["--batch-ends", "expired,completed", "--batch-done-before-end", str(done)]
    with loopback(*expire) as url:
        expired = go("5-expired", url, "cache-expired", *batch)
        after = go("5-expired-rerun", url, "cache-expired", *batch)
        checks += [
            (f"5: expired batch reported, its {expired.errors} unanswered cases errored, exit 1",
             expired.rc == 1 and "(expired)" in expired.batch_line and expired.errors > 0
             and expired.scored + expired.errors == cases),
            (f"5: rerun scores every case, sends only the {expired.errors} unanswered, exit 0",
             after.rc == 0 and after.scored == cases and after.batch_items == expired.errors
             and after.sync_requests == 0),
            ("5: rerun's raw_results.jsonl byte-identical to 1",
             same(sync, after, "raw_results.jsonl")),
        ]  # fmt: skip
    with loopback("--batch-polls", "1") as url:
        submit = go("6-submit", url, "cache-submit", "--batch=submit", f"--batch-poll={POLL_S}")
        # the batch stays in progress for its first status read (--batch-polls 1): the first
        # collect finds it running and skips every case again; the second collects it
        early = go("6-collect-early", url, "cache-submit", "--batch=collect")
        collect = go("6-collect", url, "cache-submit", "--batch=collect")
        named = all(re.search(r"batch_\w+", s) for s in submit.skips)
        running = all("in_progress" in s for s in early.skips)
        checks += [
            ("6: submit: every case skipped, each reason naming its batch, exit 0",
             submit.rc == 0 and len(submit.skips) == cases and named and not submit.statuses),
            ("6: first collect (batch still in progress): every case skipped, nothing sent",
             early.rc == 0 and len(early.skips) == cases and running
             and early.batch_items == early.sync_requests == 0),
            ("6: collect scores every case, submits 0 batches, sends 0 requests, exit 0",
             collect.rc == 0 and collect.scored == cases
             and collect.batches == collect.sync_requests == 0),
            ("6: collect's raw_results.jsonl byte-identical to 1",
             same(sync, collect, "raw_results.jsonl")),
        ]  # fmt: skip
    return runs, checks


NOTES = [
    "Several batches a round: OpenAI's batch input file holds at most 200 MiB "
    "(`OPENAI_BATCH_LIMITS` in support/backends/openai_chat.py) and each pointing request carries "
    "its 1-4 images as base64, so a round of 1,080 is cut into batches of about 150, uploaded "
    "one after another: most of a --batch run's wall time on loopback is that upload and the "
    "server parsing it (a real provider's batch takes minutes to hours anyway).",
    "`batch items` counts what the server processed during the run; the loopback processes a "
    "batch's items at the status read that ends it, so 6-submit's batches count in 6-collect "
    "(which submitted none: its `batches` is 0).",
    "4: a failed item costs nothing (4-faults' cost is that of the answered items); "
    "5: the first batch expired after answering --batch-done-before-end items.",
    "Wall times are of a 2-core machine shared with other sessions: compare within a table only.",
]


def table(runs: list[Run]) -> str:
    """The runs as a markdown table."""
    head = (
        "| run | options | exit | scored | errored | skipped | sync requests | batch items "
        "| batches | wall s | cost_usd | batch_cost_usd |"
    )
    rows = [head, "|" + "---|" * 12]
    for r in runs:
        rows.append(
            f"| {r.name} | {' '.join(r.options)} | {r.rc} | {r.scored} | {r.errors} "
            f"| {len(r.skips)} | {r.sync_requests} | {r.batch_items} | {r.batches} "
            f"| {r.wall_s:.1f} | {r.usage.get('cost_usd', '')} "
            f"| {r.usage.get('batch_cost_usd', '')} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--samples", type=int, default=30, help="samples a test set (30: 1,080 cases)")
    ap.add_argument("--work", type=Path, default=None, help="folder for caches and results")
    ap.add_argument("--md", type=Path, default=REPO / "benchmarks" / "batch_pointing.md")
    args = ap.parse_args(argv)
    if args.samples < 1:
        ap.error(f"--samples {args.samples}: at least 1")
    work = args.work or Path(tempfile.mkdtemp(prefix="batch_pointing-"))
    t0 = time.perf_counter()
    data = build_data(work)
    print(f"data: {data}; runs in {work}", flush=True)
    runs, checks = scenarios(data, work, args.samples)
    total_s = time.perf_counter() - t0
    lines = [f"- [{'x' if ok else ' '}] {text}" for text, ok in checks]
    command = f"python benchmarks/batch_pointing.py --samples {args.samples}"
    machine = f"{platform.machine()} {os.cpu_count()}-core CPU, Python {platform.python_version()}"
    md = "\n".join(
        [
            "# `--batch` on the pointing workload (loopback server)",
            "",
            f"Date {date.today().isoformat()}; machine: {machine} (shared); "
            f"command: `{command}` ({total_s:.0f} s in all).",
            f"Workload: `pytest evals/pointing --model {MODEL} --samples {args.samples}` "
            f"({args.samples * 36} cases) through the OpenAI SDK against "
            "`python -m support.doubles.loopback` in its own process, `--batch-poll 0.2`, "
            "`--bootstrap 0`,"
            " synthetic CholecSeg8k. Server counts: `attempts` (synchronous requests) and "
            "`batch_items` (items the server processed, when a batch ends: at the status read "
            "that ends it) of GET /_loopback/stats, as deltas over each run; batches: those the "
            "run submitted, from its `vlmbench: batches of` line.",
            "",
            table(runs),
            "",
            "Checks:",
            "",
            *lines,
            "",
            "Notes:",
            "",
            *(f"- {n}" for n in NOTES),
            "",
            "Batch lines of the runs:",
            "",
            *(f"- {r.name}: `{r.batch_line}`" for r in runs if r.batch_line),
            "",
        ]
    )
    print(md)
    args.md.write_text(md)
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
