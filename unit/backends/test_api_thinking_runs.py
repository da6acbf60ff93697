"""Every registered API model through every evaluation's quick subset, against the loopback
server with each vendor's request rules on (support/doubles/loopback_validation.py: a request the
real API would refuse is answered with its 400), through the vendors' SDKs.

- No error outcome for any registered model: the suite never sends what a rule refuses.
- Thinking is never the answer: the same answer given as the final text is parsed; given as the
  model's thinking (the final text empty) it is scored exactly as an empty answer, and it is kept
  in the raw row's `thinking`.
- A thinking model's answer budget is its own: the loopback spends 64 tokens thinking, and pgt's
  16-token stage 2 still gets its answer (the limit grew by the room for thinking).
- `--reasoning-effort` is an axis: comparisons.csv pairs the levels, with intervals.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from support.backends.api_models import API_MODELS
from support.doubles.loopback import LoopbackServer, ScriptAnswer, ScriptRequest
from unit.helpers.suite_runs import link_shared_data

# the suite in a subprocess; one worker runs this module, so its costly module fixtures
# are built once, not once a worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("api_thinking_runs")]

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-loopback-thinking-SECRET-41c9"
EVALUATIONS = ("pointing", "pgt", "nyu_distance", "surgvqa", "dynamic")
# a `-k` expression for `-m quick`: one case of each request shape of the five evaluations (these
# tests are about what each vendor/model accepts, not about counts over cases): pointing's image
# s0238 with Liver (present there) in its three conditions (zero-shot, standard and hard-negative
# few-shot), pgt's first image in all eleven modes, one nyu_distance pair, one surgvqa question of
# each kind (case001 yes/no, case006 open) and one box frame, dynamic's random search's two
# rounds: 20 cases a model where suite_runs.EVERY_SHAPE (the real-engine lane's) has 43
SHAPES = (
    "(not pointing or (({pointing}) and not ligament)) and (not pgt or r00000)"
    " and (not nyu_distance or img0000-pair0)"
    " and (not surgvqa or vqa-case001 or vqa-case006 or tools-v1-f00000)"
    " and (not dynamic or random)"
)
QUICKER = SHAPES.format(pointing="s0238-liver")
# the settings run also pairs pointing's levels with a bootstrap interval, which needs two
# clusters (videos), and a Liver that is there, so that answering differs from saying nothing in
# f1: s0238 (video12) and s0354 (video18)
QUICKER_TWO_VIDEOS = SHAPES.format(pointing="s0238-liver or s0354-liver")


def parseable(request: ScriptRequest) -> str:
    """An answer each evaluation's parser reads, from its prompt."""
    last = request.texts[-1] if request.texts else ""
    organ = re.findall(r'Organ: "([^"]+)"', last)
    if organ:  # pointing
        return json.dumps({"name": organ[-1], "present": 1, "point_canvas": [384, 384]})
    if "real or AI-generated" in " ".join(request.texts) or request.prefill:  # pgt
        return "The image is real."
    if "distance in meters" in last:  # nyu_distance
        return "2.0"
    if "surgical instrument" in last:  # surgvqa boxes
        return json.dumps([{"label": "needle driver", "bbox_2d": [10, 10, 60, 60]}])
    if "Question:" in last:  # surgvqa questions
        return "Yes, a needle driver was used."
    return "A"  # dynamic's options


def as_text(request: ScriptRequest) -> ScriptAnswer:
    return ScriptAnswer(parseable(request), thinking="Let me look closely.")


def as_thinking(request: ScriptRequest) -> ScriptAnswer:
    return ScriptAnswer("", thinking=parseable(request) + "\nThat is my answer.")


def empty(request: ScriptRequest) -> ScriptAnswer:
    return ScriptAnswer("", thinking="Let me look closely.")


# three settings of each vendor's reasoning model, told apart by what their requests carry: the
# decoy answer as the text, the decoy as the thinking (the text empty), nothing
SETTINGS = {"low": as_text, "medium": as_thinking, "high": empty}
BUDGETS = {"1024": as_text, "2048": as_thinking, "4096": empty}
VARIANTS = {
    "text": (
        "gpt-6.2-sol+effort-low",
        "claude-sonnet-5-5+effort-low",
        "gemini-2.5-flash+budget-1024",
    ),
    "thinking": (
        "gpt-6.2-sol+effort-medium",
        "claude-sonnet-5-5+effort-medium",
        "gemini-2.5-flash+budget-2048",
    ),
    "empty": (
        "gpt-6.2-sol+effort-high",
        "claude-sonnet-5-5+effort-high",
        "gemini-2.5-flash+budget-4096",
    ),
}


def by_setting(request: ScriptRequest) -> ScriptAnswer:
    """`as_text`, `as_thinking` or `empty`, by the request's effort level or budget."""
    settings = request.thinking or {}
    if settings.get("budget") is not None:
        return BUDGETS[str(settings["budget"])](request)
    return SETTINGS[str(settings.get("effort"))](request)


def run(script, models: list[str], tmp: Path, shared: Path, *extra: str, evals: str = "evals"):
    """`pytest evals -m quick` with `models` against a loopback with the rules on; the cache's
    data and derived parts are the session's (`shared`, SHARED_PARTS)."""
    link_shared_data(tmp / "cache", shared)
    with LoopbackServer(script, api_key=KEY, lifetime_s=900) as server:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env |= {
            "OPENAI_API_KEY": KEY,
            "ANTHROPIC_API_KEY": KEY,
            "GEMINI_API_KEY": KEY,
            "OPENAI_BASE_URL": server.url + "/v1",
            "ANTHROPIC_BASE_URL": server.url,
            "GOOGLE_GEMINI_BASE_URL": server.url,
        }
        args = [
            str(REPO / evals),
            f"--rootdir={REPO}",
            f"--model={','.join(models)}",
            f"--cache-dir={tmp / 'cache'}",
            f"--results-dir={tmp / 'results'}",
            "--run-id=r",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-m",
            "quick",
            *extra,
        ]
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        return proc, server.stats


def rows(tmp: Path, evaluation: str) -> list[dict]:
    path = tmp / "results" / evaluation / "r" / "raw_results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_registered_api_model_runs_every_quick_subset_without_an_error(
    tmp_path, shared_cache
):
    models = [m.model_id for m in API_MODELS]
    proc, stats = run(as_text, models, tmp_path, shared_cache, "--bootstrap=0", "-k", QUICKER)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert stats.refused == 0, stats.refusals
    for evaluation in EVALUATIONS:
        found = rows(tmp_path, evaluation)
        assert {r["model"] for r in found} == set(models), evaluation
        errors = [r for r in found if r["status"] == "error"]
        assert not errors, (evaluation, errors[:2])
        parsed = [r for r in found if r["status"] in ("correct", "wrong")]
        assert parsed, evaluation  # the answers were read
    # pgt: what each mode sent, per model, in report.md; a prefill on Claude 4.6+ reported
    report = (tmp_path / "results" / "pgt" / "r" / "report.md").read_text()
    assert "## What each mode sent" in report
    sent = {
        (r["model"], r["params"]["mode"]): r.get("adapted", [])
        for r in rows(tmp_path, "pgt")
        if r["params"]["mode"] in ("prefill", None)
    }
    assert any("prefill sent as a user-turn instruction" in a[0] for a in sent.values() if a)
    assert not sent.get(("gpt-4o", "prefill"), sent.get(("gpt-4o", None)))


@pytest.fixture(scope="module")
def settings_run(tmp_path_factory, shared_cache) -> Path:
    """The quick subsets with three settings of each vendor's reasoning model (VARIANTS)."""
    tmp = tmp_path_factory.mktemp("settings")
    models = [m.split("+")[0] for m in VARIANTS["text"]]
    proc, stats = run(
        by_setting,
        models,
        tmp,
        shared_cache,
        "--reasoning-effort=low,medium,high",
        "--thinking-budget=1024,2048,4096",
        "--bootstrap=200",
        "-k",
        QUICKER_TWO_VIDEOS,
    )
    assert proc.returncode in (0, 1), proc.stdout[-3000:]  # wrong answers fail their tests
    assert stats.refused == 0, stats.refusals
    return tmp


def scored(found: list[dict], model: str) -> list[tuple]:
    """What was scored of `model`'s outcomes, by item."""
    mine = [r for r in found if r["model"] == model]
    assert mine, model
    return [
        (r["case_id"].removesuffix(model), r["status"], r["prediction"], r["scores"]) for r in mine
    ]


def test_thinking_is_never_parsed_as_the_answer(settings_run):
    for evaluation in EVALUATIONS:
        found = rows(settings_run, evaluation)
        assert not [r for r in found if r["status"] == "error"], evaluation
        for text_model, thought_model, empty_model in zip(*VARIANTS.values(), strict=True):
            thought = scored(found, thought_model)
            # the thinking changed nothing that is scored; the same text as the answer did
            assert thought == scored(found, empty_model), (evaluation, thought_model)
            assert thought != scored(found, text_model), (evaluation, text_model)
            kept = [r for r in found if r["model"] == thought_model]
            if not thought_model.startswith("claude"):  # Anthropic gives no count apart
                assert all(r["usage"].get("reasoning_tokens", 0) > 0 for r in kept)
            # OpenAI's reasoning models: the Responses API's reasoning summary
            assert all(parseable_in(r.get("thinking", [])) for r in kept), thought_model


def parseable_in(thinking: list[str]) -> bool:
    """Whether the kept thinking holds the decoy answer (it came back, apart)."""
    return bool(thinking) and all("That is my answer." in t for t in thinking)


def test_effort_levels_pair_in_comparisons(settings_run):
    table = pd.read_csv(settings_run / "results" / "pointing" / "r" / "comparisons.csv")
    low, high = "gpt-6.2-sol+effort-low", "gpt-6.2-sol+effort-high"
    pair = table[(table["field"] == "model") & table["a"].isin([low, high])]
    pair = pair[pair["b"].isin([low, high]) & (pair["metric"] == "f1")]
    assert len(pair) == 1 and pair[["diff_lo", "diff_hi"]].notna().all().all()
    assert abs(pair["diff"].iloc[0]) > 0  # the low variant answered, the high one said nothing
    sent = {r["model"] for r in rows(settings_run, "pointing")}
    assert sent == {m for v in VARIANTS.values() for m in v}


def long_final_answer(request: ScriptRequest) -> str:
    """pgt: a reasoning, then a final answer that names the label and runs past stage 2's
    16-token limit (the loopback cuts a thinking request's answer at its limit)."""
    if "Final" in " ".join(request.texts) or "Final" in (request.prefill or ""):
        return " real" + " because the light falls naturally" * 20
    return "The image is real."


def test_a_cut_answer_is_reported_with_its_finish_reason(tmp_path, shared_cache):
    # a 128-token budget: stage 2's limit is 16 + 128 tokens, the loopback thinks 64 of them
    proc, stats = run(long_final_answer, ["gemini-2.5-flash+budget-128"], tmp_path,
                      shared_cache, "--bootstrap=0", evals="evals/pgt")  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout[-3000:]
    assert stats.refused == 0, stats.refusals
    found = rows(tmp_path, "pgt")
    assert found and all(r["status"] == "unparsable" for r in found)  # pgt: a cut answer
    for r in found:
        assert "MAX_TOKENS" in r["finish_reasons"], r  # stage 2's, as Gemini spells it
        assert all(x["clean_answer_response"].startswith(" real") for x in r["extra"]["responses"])
    usage = pd.read_csv(tmp_path / "results" / "pgt" / "r" / "usage.csv")
    assert usage["truncated"].iloc[0] == len(found)
