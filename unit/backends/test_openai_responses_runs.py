"""`openai:gpt-6.2-sol --reasoning-effort max` through the whole suite: pointing's and pgt's
quick subsets against the loopback with OpenAI's rules on (loopback_validation: Chat Completions
refuse effort "max" for GPT-6.x Astra and Sol), through the openai SDK. Every request goes to
`/v1/responses`, no outcome is an error, the raw rows keep the reasoning summaries as `thinking`
(never parsed: the decoy in them is not the answer), and usage.csv counts the reasoning tokens.
The same run under `--batch` goes through batches of /v1/responses lines."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from support.doubles.loopback import ScriptAnswer, ScriptRequest
from unit.backends.test_api_thinking_runs import REPO, parseable, rows, run

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("api_thinking_runs")]

pytest.importorskip("openai")

MODEL = "openai:gpt-6.2-sol"
VARIANT = "openai:gpt-6.2-sol+effort-max"
THOUGHT = "I look at the image first. Decoy: the answer is not this sentence."


def summarized(request: ScriptRequest) -> ScriptAnswer:
    """The parseable answer as the text; a summary with a decoy as the thinking."""
    assert (request.thinking or {}).get("effort") == "max", request.thinking
    return ScriptAnswer(parseable(request), thinking=THOUGHT)


@pytest.mark.parametrize("batch", [False, True], ids=["synchronous", "batch"])
def test_max_effort_runs_the_quick_subsets_through_responses(tmp_path, shared_cache, batch):
    extra = ["--batch", "--batch-poll=0.05"] if batch else []
    pgt = str(REPO / "evals" / "pgt")
    proc, stats = run(summarized, [MODEL], tmp_path, shared_cache, "--bootstrap=0",
                      "--reasoning-effort=max", pgt, *extra, evals="evals/pointing")  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    assert stats.refused == 0, stats.refusals
    if batch:  # every item a line of a /v1/responses batch, nothing sent synchronously
        assert stats.batch_items > 0 and not stats.protocols
    else:
        assert stats.protocols["responses"] > 0 and set(stats.protocols) == {"responses"}
    for evaluation in ("pointing", "pgt"):
        found = rows(tmp_path, evaluation)
        assert found and {r["model"] for r in found} == {VARIANT}, evaluation
        errors = [r for r in found if r["status"] == "error"]
        assert not errors, (evaluation, errors[:2])
        assert [r for r in found if r["status"] in ("correct", "wrong")], evaluation
        for r in found:  # the summaries kept apart, never read as the answer
            assert r["thinking"] and all(t == THOUGHT for t in r["thinking"]), r
            assert r["usage"]["reasoning_tokens"] > 0
            assert "Decoy" not in json.dumps(r.get("prediction"))
        usage = pd.read_csv(tmp_path / "results" / evaluation / "r" / "usage.csv")
        mine = usage[usage["model"] == VARIANT]
        assert len(mine) == 1 and mine["reasoning_tokens"].iloc[0] > 0, usage.to_string()
        assert mine["truncated"].iloc[0] == 0
