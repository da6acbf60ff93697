"""`--max-cost`: the cap's bookkeeping (support/client/spending.py), the option's usage errors, and
a run through the OpenAI SDK against the loopback server capped at about half its cost: it stops
within the cap, loses nothing, and the rerun without a cap sends exactly the rest."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from support.backends.api_models import cost_usd
from support.client.spending import Ledger, MaxCost, Spending, SpendingCapReached, parse_max_cost
from support.doubles.loopback import LoopbackServer, ScriptRequest
from support.types import Part, Request, Usage
from unit.helpers.api_runs import api_env, run_evaluation

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-loopback-SECRET-cap-7e21a9"
MODEL = "openai:gpt-4o"  # a priced model id, served by the loopback server


def test_parse_max_cost_run_and_per_model_caps():
    caps = parse_max_cost(["2.5", "1@gpt-4o", "$0.5@oracle"], ("gpt-4o", "oracle"))
    assert caps.run == 2.5 and caps.models == {"gpt-4o": 1.0, "oracle": 0.5}
    assert not parse_max_cost([], ("gpt-4o",))
    for bad in (["abc"], ["0"], ["-1"], ["inf"], ["1@"], ["1@claude"], ["1", "2"]):
        with pytest.raises(ValueError, match="--max-cost"):
            parse_max_cost(bad, ("gpt-4o",))


def request(text: str = "x" * 400, max_tokens: int = 100) -> Request:
    return Request(parts=(Part(text=text),), max_tokens=max_tokens)


@pytest.mark.slow
def test_a_request_waits_for_in_flight_answers_then_is_refused_past_the_cap():
    spending = Spending(
        "anthropic", "claude-sonnet-4-20250514", [Ledger(1.0, "--max-cost 1.00 USD")]
    )
    estimate = spending.estimate_usd(request())
    # 100 text tokens (4 chars a token: no offline tokenizer) + 100 output tokens
    assert estimate == pytest.approx(cost_usd("claude-sonnet-4-20250514", Usage(100, 100)))
    ledger = spending.ledgers[0]
    ledger.cap_usd = 2.5 * estimate  # room for two estimates, not three

    async def scenario() -> list[str]:
        events = []
        first = await spending.reserve(request())
        await spending.reserve(request())
        third = asyncio.ensure_future(spending.reserve(request()))
        await asyncio.sleep(0)
        assert not third.done()  # only in-flight estimates stand in the way: it waits
        events.append("waiting")
        spending.settle(first, Usage(100, 10))  # the answer cost less than its estimate
        await third
        events.append("sent")
        spending.settle(first, Usage(100, 100))  # the second and third answers, at their
        spending.settle(first, Usage(100, 100))  # estimates: 2 + a bit recorded, 0 in flight
        with pytest.raises(SpendingCapReached, match=r"--max-cost 1\.00 USD reached"):
            await spending.reserve(request())
        with pytest.raises(SpendingCapReached):  # closed: even a small request is refused
            await spending.reserve(request("x", 1))
        return events

    async def bounded() -> list[str]:
        return await asyncio.wait_for(scenario(), timeout=10)

    assert asyncio.run(bounded()) == ["waiting", "sent"]
    assert ledger.stopped is not None and ledger.recorded_usd <= ledger.cap_usd


@pytest.mark.slow
def test_a_models_cap_stops_that_model_and_the_runs_cap_all_of_them():
    run_cap = Ledger(1.0, "--max-cost 1 USD")
    own = Ledger(1.0, "--max-cost 1 USD for gpt-4o")
    capped = Spending("anthropic", "claude-sonnet-4-20250514", [own, run_cap])
    other = Spending("anthropic", "claude-sonnet-4-20250514", [run_cap])
    estimate = capped.estimate_usd(request())
    own.cap_usd, run_cap.cap_usd = 1.5 * estimate, 3.5 * estimate

    async def scenario() -> None:
        capped.settle(await capped.reserve(request()), Usage(100, 100))
        with pytest.raises(SpendingCapReached, match="for gpt-4o reached"):
            await capped.reserve(request())
        for _ in range(2):  # the other model goes on, within the run's cap
            other.settle(await other.reserve(request()), Usage(100, 100))
        with pytest.raises(SpendingCapReached, match=r"--max-cost 1 USD reached"):
            await other.reserve(request())

    asyncio.run(asyncio.wait_for(scenario(), timeout=10))
    assert run_cap.recorded_usd == pytest.approx(3 * estimate) and own.stopped is not None
    assert run_cap.stats()["in_flight_at_stop_usd"] == 0.0


def answer(request: ScriptRequest) -> str:
    return '{"name": "Liver", "present": 0, "point_canvas": null}'


def run(url: str, data: Path, tmp: Path, run_id: str, cache: str, *extra: str, shared: Path):
    """pointing's quick subset, zero-shot, through the OpenAI SDK, with a junit file; the cache's
    data and derived parts are the session's (`shared`, SHARED_PARTS)."""
    options = [
        f"--api-base={url}",
        f"--cholecseg8k={data}",
        f"--junitxml={tmp / (run_id + '.xml')}",
        "--concurrency=8",
        "-k",
        "zero_shot",
        *extra,
    ]
    env = api_env({"OPENAI_API_KEY": KEY})
    return run_evaluation(
        "pointing", MODEL, tmp, run_id, options, env=env, cache=cache, shared_cache=shared
    )


def recorded_cost(tmp: Path, run_id: str) -> tuple[float, int]:
    """USD of the usage in raw_results.jsonl (gpt-4o's list price), and its outcomes (a run
    with a fresh cache: every answer was received in it)."""
    path = tmp / "results" / "pointing" / run_id / "raw_results.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    usage = sum((Usage(**r["usage"]) for r in rows), Usage())
    return cost_usd("gpt-4o", usage) or 0.0, len(rows)


def junit(tmp: Path, run_id: str) -> tuple[int, list[str]]:
    """Cases that passed, and the skip messages."""
    cases = ET.parse(tmp / f"{run_id}.xml").getroot().iter("testcase")
    passed, skipped = 0, []
    for case in cases:
        skip = case.find("skipped")
        if skip is not None:
            skipped.append(skip.get("message", ""))
        elif case.find("failure") is None and case.find("error") is None:
            passed += 1
    return passed, skipped


@pytest.mark.slow
def test_a_run_capped_at_half_its_cost_stops_within_it_and_the_rerun_completes_it(
    synthetic_cholecseg8k, shared_cache, tmp_path
):
    data = synthetic_cholecseg8k
    with LoopbackServer(answer, api_key=KEY, lifetime_s=240) as server:
        full = run(server.url, data, tmp_path, "full", "cache-full", shared=shared_cache)
        assert full.returncode == 0, full.stdout[-3000:]
        requests = server.stats.attempts
        total_usd, cases = recorded_cost(tmp_path, "full")
        assert requests == cases > 0 and total_usd > 0

        cap = round(total_usd / 2, 6)
        capped = run(
            server.url, data, tmp_path, "capped", "cache", f"--max-cost={cap}", shared=shared_cache
        )
        assert capped.returncode == 0, capped.stdout[-3000:]
        sent_capped = server.stats.attempts - requests
        spent, scored = recorded_cost(tmp_path, "capped")
        passed, skips = junit(tmp_path, "capped")
        assert spent <= cap  # never past the cap
        assert skips and all(f"--max-cost {cap:g} USD reached" in s for s in skips)
        assert passed == scored == sent_capped and scored + len(skips) == cases  # nothing lost

        rerun = run(server.url, data, tmp_path, "rerun", "cache", shared=shared_cache)
        assert rerun.returncode == 0, rerun.stdout[-3000:]
        sent_rerun = server.stats.attempts - requests - sent_capped
    assert sent_rerun == len(skips)  # only the skipped cases' requests (the rest are cached)
    passed, rest = junit(tmp_path, "rerun")
    assert passed == cases and not rest
    stop = re.search(r"([\d.]+) USD recorded \+ ([\d.]+) in flight \+ ([\d.]+)", skips[0])
    assert stop is not None
    print(
        f"cap {cap:.6f} USD of a {total_usd:.6f} USD run ({requests} requests): stopped at "
        f"{spent:.6f} recorded ({spent / cap:.1%} of the cap), at the stop {stop[1]} recorded + "
        f"{stop[2]} in flight + {stop[3]} refused; rerun sent {sent_rerun}"
    )


@pytest.mark.slow
def test_a_bad_max_cost_is_a_usage_error_naming_the_option(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["OPENAI_API_KEY"] = KEY
    base = [
        sys.executable,
        "-m",
        "pytest",
        str(REPO / "evals" / "nyu_distance"),
        f"--rootdir={REPO}",
        f"--cache-dir={tmp_path / 'cache'}",
        "-p",
        "no:cacheprovider",
        "--collect-only",
        "-q",
    ]
    for value in ("abc", "5@gpt-4o"):  # not an amount; a model the run does not evaluate
        bad = subprocess.run(
            [*base, f"--max-cost={value}"], env=env, capture_output=True, text=True
        )
        assert bad.returncode == pytest.ExitCode.USAGE_ERROR
        assert f"--max-cost {value!r}" in bad.stderr
    unpriced = subprocess.run(
        [*base, "--model=openai:loop-model", "--max-cost=1"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert unpriced.returncode == 0, unpriced.stdout[-2000:] + unpriced.stderr[-2000:]
    out = unpriced.stdout + unpriced.stderr
    assert out.count("openai:loop-model has no price") == 1 and KEY not in out


class _Config:
    """What fixtures.models.spending reads of a pytest config: stash (the caps and the run's
    settings) and workerinput."""

    def __init__(self, caps: MaxCost, workers: int | None) -> None:
        from fixtures.api_options import MAX_COST_KEY
        from fixtures.run_settings import SETTINGS_KEY
        from support.settings import RunSettings

        self.stash = {MAX_COST_KEY: caps, SETTINGS_KEY: RunSettings()}
        if workers is not None:
            self.workerinput = {"workercount": workers}


@pytest.mark.parametrize("workers", [None, 1, 4])
def test_each_xdist_worker_holds_an_equal_share_of_the_caps(workers):
    from fixtures.models import spending

    caps = MaxCost(run=2.0, models={"gpt-4o": 1.0})
    config = _Config(caps, workers)
    found = spending(config, "gpt-4o")
    share = 1 / (workers or 1)
    assert [ledger.cap_usd for ledger in found.ledgers] == pytest.approx([1.0 * share, 2.0 * share])
    if workers and workers > 1:
        assert all(f"1/{workers} share" in ledger.label for ledger in found.ledgers)
    other = spending(config, "gpt-4o-mini")  # the run's cap is one ledger for every model
    assert other.ledgers == [found.ledgers[1]]
    assert spending(config, "oracle") is None  # no price: not capped
