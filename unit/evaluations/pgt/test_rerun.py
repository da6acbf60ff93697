"""A rerun shows the same tables as the first run (issue 24, item 4): pgt's kept results are read
back into the run as passed cases (no model call, the kept files untouched), not skipped; an
image the kept files lack is evaluated; --override re-runs everything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ARGS = ("--model=chance", "-m", "quick", "-k", "baseline")
COMBINATION = "pgt/synthetic/chance/baseline"  # the default sample's baseline folder


def pgt_table(stdout: str) -> tuple[list[str], str]:
    """The pgt section of the terminal summary: its heading and table, and its model-calls line."""
    lines = stdout.splitlines()
    start = next(
        i for i, line in enumerate(lines) if line.startswith("=") and "vlmbench: pgt" in line
    )
    end = next(i for i in range(start + 1, len(lines)) if "model calls:" in lines[i])
    table = [lines[start], *(line for line in lines[start + 1 : end] if line.startswith("|"))]
    return table, lines[end]


def raw_rows(results: Path, run_id: str) -> list[dict]:
    path = results / "pgt" / run_id / "raw_results.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_a_rerun_reads_kept_results_back_into_the_same_tables(run_suite):
    first, results = run_suite("pgt", *ARGS, run_id="a")
    assert first.ret == 0, first.stdout.str()[-3000:]
    first.assert_outcomes(passed=6)
    kept = results / COMBINATION / "reasoning_a.json"
    kept_bytes, kept_mtime = kept.read_bytes(), kept.stat().st_mtime_ns
    # no response cache: whatever the rerun shows comes from the kept results
    again, _ = run_suite("pgt", *ARGS, "-n", "2", "--no-cache", run_id="b")
    assert again.ret == 0, again.stdout.str()[-3000:]
    again.assert_outcomes(passed=6)  # not skipped
    summary = (results / "pgt" / "a" / "summary.csv").read_bytes()
    assert (results / "pgt" / "b" / "summary.csv").read_bytes() == summary
    (before, _), (after, calls) = pgt_table(first.stdout.str()), pgt_table(again.stdout.str())
    assert len(before) > 3 and after == before  # the heading and the table
    assert "model calls: 0 sent, 0 served from cache" in calls
    rows = raw_rows(results, "b")
    assert {r["extra"].get("reused") for r in rows} == {str(kept)}
    # the outcomes are the first run's, but for the marker
    for row in rows:
        del row["extra"]["reused"]
    assert rows == raw_rows(results, "a")
    # the source's rule: the kept file is not written again
    assert kept.read_bytes() == kept_bytes and kept.stat().st_mtime_ns == kept_mtime


@pytest.mark.slow
def test_images_the_kept_results_lack_are_evaluated_and_override_reruns(run_suite):
    first, results = run_suite("pgt", *ARGS, run_id="a")
    assert first.ret == 0, first.stdout.str()[-3000:]
    wider, _ = run_suite("pgt", "--model=chance", "-k", "baseline", run_id="b")
    assert wider.ret == 0, wider.stdout.str()[-3000:]
    wider.assert_outcomes(passed=48)
    assert sum("reused" in r["extra"] for r in raw_rows(results, "b")) == 6
    assert "model calls: 84 sent, 0 served from cache" in wider.stdout.str()  # 42 images x 2
    forced, _ = run_suite(
        "pgt", "--model=chance", "-k", "baseline", "--override", "--no-cache", run_id="c"
    )
    assert forced.ret == 0, forced.stdout.str()[-3000:]
    forced.assert_outcomes(passed=48)
    assert not any("reused" in r["extra"] for r in raw_rows(results, "c"))
    assert "model calls: 96 sent" in forced.stdout.str()
    # the run that reused 6 images has the summary of the one that evaluated all 48
    summary = (results / "pgt" / "c" / "summary.csv").read_bytes()
    assert (results / "pgt" / "b" / "summary.csv").read_bytes() == summary
    # each run's performance file beside the kept results, none written over
    performance = sorted(p.name for p in (results / COMBINATION).glob("performance_*.json"))
    assert performance == ["performance_a.json", "performance_b.json", "performance_c.json"]


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "{}",
        '[{"image": "x.png"}]',
        '[{"image": "x.png", "responses": "no", "aggregated_prediction": "real"}]',
        '[{"image": "x.png", "responses": [{"reasoning_response": 1}]}]',
    ],
)
def test_a_malformed_kept_file_is_evaluated_again_not_an_error(tmp_path, text):
    from support.evaluations.pgt.task import kept_entries

    path = tmp_path / "reasoning_a.json"
    path.write_text(text, encoding="utf-8")
    assert kept_entries(str(path)) == {}
    assert kept_entries(str(tmp_path / "missing.json")) == {}
