"""PGT on the tiny transformers model: the rendered prompt of each phrase mode, and the two
stages batched across cases by the engine (n=5 over 20 images)."""

from __future__ import annotations

import asyncio
import math
import os
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")  # HF_HUB_OFFLINE: unit/conftest.py

from support.backends.chat_template import render_prompt
from support.backends.transformers_local import TransformersBackend
from support.client.engine import ModelClient
from support.contract.runner import LoggedClient
from support.doubles.tiny_vlm import ensure_tiny_vlm
from support.evaluations.pgt.phrases import FINAL_ANSWER_CUE, PHRASES, QUESTION
from support.evaluations.pgt.spec import configure
from support.evaluations.pgt.synthetic import build_pgt_sample
from support.evaluations.pgt.task import PgtEvaluation
from support.settings import OutputSettings, RunSettings

# one worker runs this module: its costly module fixtures are built once, not once a worker
pytestmark = pytest.mark.xdist_group("pgt_local")

ASSISTANT = "<|assistant|>\n"  # the tiny model's chat template opens the assistant turn so
COT = PHRASES["cot"]


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    return build_pgt_sample(tmp_path_factory.mktemp("pgt"))


@pytest.fixture(scope="module")
def backend(tmp_path_factory) -> TransformersBackend:
    tiny = ensure_tiny_vlm(tmp_path_factory.mktemp("cache"))
    b = TransformersBackend(f"hf:{tiny}", str(tiny), max_batch=8)
    b.load()
    return b


def evaluation(sample: Path, tmp_path: Path, **values: object) -> PgtEvaluation:
    run = RunSettings(output=OutputSettings(cache_dir=tmp_path, results_dir=tmp_path))
    return PgtEvaluation.load(run, configure({"pgt_dataset": str(sample), **values}, run))


def turns(prompt: str) -> dict[str, str]:
    """`<|role|>\\ntext<|end|>` turns of the tiny template -> {role: text}."""
    return dict(re.findall(r"<\|(system|user|assistant)\|>\n(.*?)(?:<\|end\|>\n|$)", prompt, re.S))


def test_each_mode_renders_as_the_source_specifies(sample, tmp_path, backend):
    ev = evaluation(sample, tmp_path, pgt_phrase=["baseline", "cot"])
    prompts = {}
    for case in ev.cases():
        if case.params["row"] == 0:
            method = case.params["mode"] or "baseline"
            prompts[method] = render_prompt(backend.processor, ev.stage1_request(case))
    assert sorted(prompts) == sorted(["baseline", *ev.settings.modes])
    start = f'Please start your response with "{COT}"'

    # prefill: the phrase right after the opened assistant turn, nowhere else
    assert prompts["prefill"].endswith(ASSISTANT + COT)
    assert prompts["prefill"].count(COT) == 1
    assert turns(prompts["prefill"])["user"] == f"<image>{QUESTION}"
    # pseudo-system and instruct: a system turn, the question unchanged
    for mode, system in (
        ("prefill-pseudo-system", start),
        ("instruct", "Please think step by step."),
    ):
        t = turns(prompts[mode])
        assert t["system"] == system, mode
        assert t["user"] == f"<image>{QUESTION}"
        assert prompts[mode].endswith(ASSISTANT)
    # pseudo-user and prompt: the user text carries the instruction
    assert turns(prompts["prefill-pseudo-user"])["user"] == f"<image>{QUESTION} {start}"
    assert turns(prompts["prompt"])["user"] == f"<image>{QUESTION} Please think step by step."
    for mode in ("prefill-pseudo-user", "prompt"):
        assert "system" not in turns(prompts[mode]) and prompts[mode].endswith(ASSISTANT)
    # baseline: the bare question, whatever the mode
    assert turns(prompts["baseline"]) == {"user": f"<image>{QUESTION}", "assistant": ""}


def test_stage_two_continues_the_reasoning_after_the_cue(sample, tmp_path, backend):
    ev = evaluation(sample, tmp_path, pgt_phrase=["cot"], pgt_mode="prefill")
    case = ev.cases()[0]
    first = ev.stage1_request(case)
    second = ev.stage2_request(first, " It looks smooth.", case.params["label"])
    rendered = render_prompt(backend.processor, second)
    assert rendered.endswith(ASSISTANT + COT + " It looks smooth." + FINAL_ANSWER_CUE)
    assert second.temperature == 0.0 and second.n == 1 and second.parts == first.parts


def test_n5_over_20_images_is_batched_in_both_stages(sample, tmp_path, backend, monkeypatch):
    monkeypatch.setattr(
        "support.evaluations.pgt.task.STAGE1_MAX_TOKENS", 24
    )  # nonsense text: keep it short
    ev = evaluation(sample, tmp_path, pgt_phrase=["cot"], pgt_mode="prefill", pgt_n="5")
    cases = ev.cases()[:20]
    assert len(cases) == 20 and {c.params["n"] for c in cases} == {5}
    client = ModelClient(backend, cache=None, concurrency=1)
    calls: list[tuple[int, int]] = []  # (requests in the call, sequences per request)
    real = backend.model.generate

    def counting(**kwargs):
        calls.append((len(kwargs["input_ids"]), kwargs.get("num_return_sequences", 1)))
        return real(**kwargs)

    monkeypatch.setattr(backend.model, "generate", counting)

    async def main():
        return await asyncio.gather(*(ev.evaluate(c, LoggedClient(client)) for c in cases))

    outcomes = asyncio.run(main())
    assert all(len(o.extra["responses"]) == 5 for o in outcomes)
    assert all(o.status in ("correct", "wrong", "unparsable") for o in outcomes)
    stage1 = [c for c in calls if c[1] == 5]
    stage2 = [c for c in calls if c[1] == 1]
    assert sum(r for r, _ in stage1) == 20 and sum(r for r, _ in stage2) == 100
    # one request per image for its 5 samples, then 100 extractions, in batches of 8
    assert len(stage1) <= math.ceil(20 / 8) + 1, stage1
    assert len(stage2) <= math.ceil(100 / 8) + 1, stage2
    assert max(r for r, _ in stage2) == 8
    print(f"stage 1 calls {[r for r, _ in stage1]}, stage 2 calls {[r for r, _ in stage2]}")
