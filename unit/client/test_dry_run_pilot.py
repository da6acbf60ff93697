"""`--dry-run --pilot N`: a few real requests per model, and the whole run's expected cost.

The estimator against scipy's own t-interval; then, through the openai SDK against the loopback
(OpenAI's Responses API, the vendor's rules on), gpt-6.2-sol at two effort levels whose thinking
differs (the script thinks more at `high`, each effort's requests cycling through three lengths,
so a pilot of three sees the spread the run has): the dry run sends 3 requests per variant,
caches their answers, and prints expected costs that differ between the levels; the real run
then sends the rest, and its cost (usage.csv, cached answers included) lies inside the printed
interval of each variant.
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from support.client.dry_run import PilotCall, expectation
from support.doubles.loopback import LoopbackServer, ScriptAnswer, ScriptRequest
from unit.helpers.api_runs import api_env, run_evaluation

pytest.importorskip("openai")

KEY = "sk-loopback-pilot-SECRET-5e02"
MODEL = "openai:gpt-6.2-sol"
THINKING = {"low": 400, "high": 2400}  # the script's mean thinking tokens a request, per effort
SPREAD = (-200, 0, 200)  # each effort's requests cycle through these offsets (tokens)


def test_the_expected_share_is_the_pilots_mean_with_its_t_interval():
    calls = [PilotCall("m", 1000, out, 0.5) for out in (100, 200, 300)]
    found = expectation(calls)
    low, high = stats.t.interval(0.95, 2, loc=0.2, scale=stats.sem([0.1, 0.2, 0.3]))
    assert found.n == 3 and found.share == pytest.approx(0.2)
    assert found.low == pytest.approx(max(0.0, low)) and found.high == pytest.approx(high)
    assert found.pilot_usd == pytest.approx(1.5)
    one = expectation(calls[:1])
    assert one.low is None and one.high is None and one.share == pytest.approx(0.1)
    assert expectation([PilotCall("m", 0, 5, None)]) is None  # no bound: nothing to scale


def scripted_thinking():
    """A loopback script thinking THINKING[effort] + the next of SPREAD tokens a request."""
    counters = {effort: itertools.cycle(SPREAD) for effort in THINKING}
    lock = threading.Lock()

    def script(request: ScriptRequest) -> ScriptAnswer:
        effort = (request.thinking or {}).get("effort", "high")
        with lock:
            offset = next(counters[effort])
        thought = "t" * 4 * (THINKING[effort] + offset)  # 4 characters a token (the loopback)
        return ScriptAnswer('{"name": "Liver", "present": 0, "point_canvas": null}', thought)

    return script


@pytest.mark.slow
def test_a_pilot_expects_what_the_run_then_costs(synthetic_cholecseg8k, shared_cache, tmp_path):
    env = api_env({"OPENAI_API_KEY": KEY})
    common = ["--reasoning-effort=low,high", f"--cholecseg8k={synthetic_cholecseg8k}"]
    common += ["-k", "zero_shot", "-p", "no:randomly"]
    with LoopbackServer(scripted_thinking(), api_key=KEY, lifetime_s=240) as server:
        options = [f"--api-base={server.url}/v1", *common]
        dry = run_evaluation(
            "pointing", MODEL, tmp_path, "dry", [*options, "--dry-run", "--pilot=3"],
            env=env, shared_cache=shared_cache,
        )  # fmt: skip
        out = dry.stdout
        assert dry.returncode == 0, out[-3000:]
        assert server.stats.attempts == 6  # 3 a variant, sent for real
        assert f"pilot: {MODEL}+effort-low: 3 request(s) sent for real" in out
        assert "expected from the pilot:" in out
        table = pd.read_csv(tmp_path / "results" / "pointing" / "dry" / "dry_run.csv")
        rows = table.set_index("model")
        low, high = rows.loc[f"{MODEL}+effort-low"], rows.loc[f"{MODEL}+effort-high"]
        assert low["expected_cost_usd"] < high["expected_cost_usd"] < high["cost_usd"]
        real = run_evaluation(
            "pointing", MODEL, tmp_path, "real", options, env=env, shared_cache=shared_cache
        )
        assert real.returncode == 0, real.stdout[-3000:]
        sent = server.stats.attempts - 6
    to_send = int(low["requests_to_send"] + high["requests_to_send"])
    assert sent == to_send - 6  # the pilot's answers came from the cache
    usage = pd.read_csv(tmp_path / "results" / "pointing" / "real" / "usage.csv")
    cost = usage.set_index("model")["cost_usd"]
    for row in (low, high):
        assert row["expected_cost_low"] <= cost[row.name] <= row["expected_cost_high"], (
            row.name,
            cost[row.name],
            row[["expected_cost_low", "expected_cost_usd", "expected_cost_high"]].to_dict(),
        )


def test_pilot_goes_with_dry_run_only(tmp_path):
    done = run_evaluation(
        "pointing", "oracle", tmp_path, "r", ["--pilot=3"], env=api_env(), timeout_s=60
    )
    assert done.returncode == 4 and "--pilot N goes with --dry-run" in done.stderr + done.stdout


def test_pilot_cost_is_read_back_from_the_file(tmp_path):
    from support.client.dry_run import append_pilot, pilot_file, read_pilots

    path = pilot_file(tmp_path, "r1")
    for call in (PilotCall("a", 10, 5, 0.1), PilotCall("b", 10, 2, None)):
        append_pilot(path, call)
    path.write_text(path.read_text() + "not json\n")
    assert read_pilots(path) == {
        "a": [PilotCall("a", 10, 5, 0.1)],
        "b": [PilotCall("b", 10, 2, None)],
    }
    assert read_pilots(Path(tmp_path / "none.jsonl")) == {}


def test_the_pilot_stops_where_max_cost_would_refuse_it():
    """The pilot's requests go through the real run's --max-cost ledgers: reserved at their
    bound, settled at what they cost; the first one refused ends the pilot, and the rest of the
    dry run is placeholders."""
    import asyncio

    from support.backends.api_models import cost_usd, output_bound, rules_for
    from support.backends.base import Backend
    from support.client.dry_run import PLACEHOLDER, DryRunBackend
    from support.client.spending import Ledger, Spending
    from support.types import Part, Request, Response, Usage

    class Paid(Backend):
        def __init__(self) -> None:
            self.name = "paid"
            self.identity = {"provider": "test", "model": "paid"}
            self.calls = 0

        async def generate(self, request: Request) -> Response:
            self.calls += 1
            return Response(texts=("B",), model="paid", usage=Usage(0, request.max_tokens))

    request = Request(parts=(Part.of_text("Is it real?"),), max_tokens=100)
    rules = rules_for("openai", "gpt-4o")
    each = cost_usd("gpt-4o", Usage(0, output_bound(request, rules)))  # what one answer costs
    ledger = Ledger(2.5 * each, "--max-cost for the test")
    inner = Paid()
    spending = Spending("openai", "gpt-4o", [ledger], rules=rules)
    dry = DryRunBackend(inner, "openai", "gpt-4o", rules, pilot=3, spending=spending)

    async def five():
        return [await dry.generate(request) for _ in range(5)]

    answers = asyncio.run(five())
    assert inner.calls == 2 and dry.piloted == 2  # the third would pass the cap
    assert [a.texts[0] == "B" for a in answers] == [True, True, False, False, False]
    assert answers[2].texts[0].startswith(PLACEHOLDER)
    assert ledger.recorded_usd == pytest.approx(2 * each) and ledger.in_flight_usd == 0
