"""`pytest evals/... --batch` end to end: real runs in subprocesses, through the OpenAI SDK to the
loopback server's Batch API (127.0.0.1 only)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from support.doubles.loopback import LoopbackServer, ScriptRequest
from support.doubles.loopback_batches import BatchPlan

pytestmark = pytest.mark.slow  # every test here runs the suite in a subprocess

KEY = "sk-batch-runs-7c1d55e0"


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    from support.evaluations.pgt.synthetic import build_pgt_sample

    return build_pgt_sample(tmp_path_factory.mktemp("pgt"))


def answer(request: ScriptRequest) -> str:
    return "It looks real." if request.prefill is None else " Real"


def skips(result) -> list[str]:
    """The -rs summary's lines (one a reason, counted: `SKIPPED [6] ...`)."""
    return [line for line in result.outlines if line.startswith("SKIPPED")]


def skipped(result) -> int:
    return result.parseoutcomes().get("skipped", 0)


def test_pgt_two_stages_over_submit_and_collect_runs(run_suite, sample, monkeypatch, tmp_path):
    """Stage 1 is submitted, collected; stage 2 is submitted only then, and a waiting run scores
    every case with the bytes a synchronous run writes, having sent nothing synchronously."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    plans = [BatchPlan(polls=0), BatchPlan(polls=60)]  # stage 2's batch: ~3 s of 0.05 s polls
    with LoopbackServer(answer, api_key=KEY, lifetime_s=300, batches=plans) as s:
        base = (
            f"--pgt-dataset={sample}",
            "--model=openai:gpt-4o",
            f"--api-base={s.url}/v1",
            "-m",
            "quick",
            "--pgt-phrase=cot",
            "--pgt-mode=prompt",
            "--batch-poll=0.05",
            "-rs",
        )
        first, _ = run_suite("pgt", *base, "--batch=submit", run_id="r1")
        assert first.ret == 0, first.stdout.str()[-3000:]
        cases = skipped(first)
        assert cases > 0 and all("in openai batch batch_" in line for line in skips(first))
        assert s.batch_store.created == 1
        first.stdout.fnmatch_lines(["*batches of openai:gpt-4o: submitted 1 batch(es)*"])

        collect, _ = run_suite("pgt", *base, "--batch=collect", run_id="r2")
        assert collect.ret == 0, collect.stdout.str()[-3000:]
        assert s.batch_store.created == 1  # stage 1 collected; stage 2 not submitted
        assert skipped(collect) == cases
        assert all("--batch collect submits nothing" in line for line in skips(collect))

        second, _ = run_suite("pgt", *base, "--batch=submit", run_id="r3")
        assert s.batch_store.created == 2 and skipped(second) == cases

        done, root = run_suite("pgt", *base, "--batch", run_id="r4")
        assert done.ret == 0, done.stdout.str()[-3000:]
        done.assert_outcomes(passed=cases)
        done.stdout.fnmatch_lines(["vlmbench: openai:gpt-4o: waiting on 1 batch(es) (batch_*"])
        stats = s.stats_json()
        assert stats["attempts"] == 0 and stats["batch_items"] == 2 * cases

        sync, _ = run_suite("pgt", *base, "--override", run_id="r5", cache="sync")
        assert sync.ret == 0 and s.stats_json()["attempts"] == 2 * cases
    folder = root / "pgt"
    for name in ("raw_results.jsonl", "summary.csv", "comparisons.csv"):
        assert (folder / "r4" / name).read_bytes() == (folder / "r5" / name).read_bytes(), name
    usage = {
        r: next(csv.DictReader((folder / r / "usage.csv").read_text().splitlines()))
        for r in ["r4", "r5"]
    }
    batch_cost, sync_cost = float(usage["r4"]["cost_usd"]), float(usage["r5"]["cost_usd"])
    assert batch_cost == pytest.approx(sync_cost / 2)
    assert float(usage["r4"]["batch_cost_usd"]) == batch_cost
    records = [json.loads(p.read_text()) for p in (tmp_path / "cache" / "batches").glob("*/*.json")]
    assert sorted(r["state"] for r in records) == ["collected", "collected"]


def test_batch_options_are_checked(run_suite):
    result, _ = run_suite("pgt", "--batch", "--no-cache", "--collect-only")
    assert result.ret == 4 and "--batch needs the response cache" in result.stderr.str()
    result, _ = run_suite("pgt", "--batch=later", "--collect-only")
    assert result.ret == 4 and "--batch" in result.stderr.str()
    result, _ = run_suite("pgt", "--batch", "--batch-poll=0", "--collect-only")
    assert result.ret == 4 and "--batch-poll must be a positive" in result.stderr.str()
