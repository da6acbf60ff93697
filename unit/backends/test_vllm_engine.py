"""The real-engine lane: vLLM itself (its CPU build here), offline (`vllm:`) and served
(`openai-compatible:` against a vLLM server this module starts on 127.0.0.1 and stops).

Marked `vllm` and skipped where vLLM is not installed (the main job's venv); `.ci/vllm` builds a
venv with vLLM's CPU build and runs `pytest unit -m vllm` in it. Engines start once per backend
where they can: one in-process engine (the checks below), one server (the checks and the served
runs), and one engine in each child `pytest evals` run that is not served from the cache.

The model is the suite's tiny LLaVA (support.doubles.tiny_vlm): its answers are nonsense, so
what is checked is the path, not the scores: every evaluation's quick subset runs with no error
outcome, the prompt the engine sees is the model's chat template, prefill continues the opened
assistant turn, n samples come back, seeds repeat, image limits and failures stay per request,
requests finish independently (continuous batching), and a rerun is served from the cache.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from support.backends.base import BackendError
from support.backends.registry import BackendOptions, create_backend
from support.client.engine import Engine, ModelClient
from support.types import Part, Request
from unit.helpers.suite_runs import (
    EVALUATIONS,
    EVERY_SHAPE,
    LANE_MAX_TOKENS,
    cache_with_shared_data,
    error_outcomes,
    raw_rows,
    run_quick,
)

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(  # in the lane itself (.ci/vllm) a missing vLLM fails instead
        importlib.util.find_spec("vllm") is None and os.environ.get("VLMBENCH_VLLM_LANE") != "1",
        reason="needs vLLM: the real-engine lane (.ci/vllm builds its venv)",
    ),
]

REPO = Path(__file__).resolve().parents[2]
MAX_IMAGES = 8  # surgvqa's VQA frames: the most the evaluations send in one request
SERVER_START_S = 600  # seconds a server may take to answer /health (~45-70 s here)
# the engine's KV cache (GiB): the tiny model needs little, and three engines may live at once
ENGINE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CONFIGURE_LOGGING": "0"}


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(shared_cache: Path) -> Path:
    """The tiny LLaVA folder, built once for the session."""
    from support.doubles.tiny_vlm import ensure_tiny_vlm

    return ensure_tiny_vlm(shared_cache)


@pytest.fixture(scope="module")
def loop() -> Engine:
    """One event loop thread for every in-process call: the async engine lives on it."""
    engine = Engine()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def offline(tiny: Path, loop: Engine, tmp_path_factory: pytest.TempPathFactory) -> ModelClient:
    """`vllm:<tiny>` in this process (one engine start), without a response cache."""
    for key, value in ENGINE_ENV.items():
        os.environ.setdefault(key, value)
    opts = BackendOptions(
        extra=(("max_images", MAX_IMAGES),), cache_dir=str(tmp_path_factory.mktemp("hashes"))
    )
    client = ModelClient(create_backend(f"vllm:{tiny}", opts), cache=None, concurrency=64)
    loop.run(client.backend.start(), timeout=SERVER_START_S)
    yield client
    loop.run(client.aclose(), timeout=120)


@pytest.fixture(scope="module")
def server(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A vLLM OpenAI-compatible server for the tiny model on 127.0.0.1; its base URL (…/v1).
    Stopped (its process group) when the module ends; its log is in the failure message."""
    from support.backends.vllm_server import ServerError, serve

    log = tmp_path_factory.mktemp("server") / "vllm-server.log"
    try:
        with serve(tiny, log, max_images=MAX_IMAGES, env=ENGINE_ENV, start_s=SERVER_START_S) as url:
            yield url
    except ServerError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def served(server: str) -> ModelClient:
    backend = create_backend("openai-compatible:tiny", BackendOptions(api_base=server))
    return ModelClient(backend, cache=None, concurrency=32)


@pytest.fixture(scope="module")
def processor(tiny: Path):
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(tiny)


# -- requests --------------------------------------------------------------------------------------


def _image(k: int) -> Part:
    from PIL import Image

    return Part.of_image(Image.new("RGB", (96, 72), (40 * k % 256, 90, 200 - 20 * k)))


def _request(k: int = 0, images: int = 1, **kw) -> Request:
    parts = [Part.of_text(f"Organ {k}: is it there?")]
    parts += [_image(k + i) for i in range(images)]
    kw.setdefault("max_tokens", 12)
    return Request(parts=tuple(parts), system="Answer in JSON.", **kw)


def _all(loop: Engine, client: ModelClient, requests: list[Request]) -> list:
    """Each request's Response or its exception, sent together."""

    async def main():
        return await asyncio.gather(*(client.generate(r) for r in requests), return_exceptions=True)

    return loop.run(main(), timeout=600)


# -- the checks ------------------------------------------------------------------------------------


def test_the_engine_sees_the_models_chat_template(offline, loop, processor):
    from support.backends.chat_template import render_prompt, request_images

    for request in (_request(1), _request(2, images=3, prefill="Let me look: ")):
        (response,) = _all(loop, offline, [request])
        assert response.prompt == render_prompt(processor, request)
        # the same text and images through the model's own processor: the engine's prompt has
        # exactly as many tokens (the template's, and each <image> expanded to its patches)
        ids = processor(
            text=[response.prompt],
            images=request_images(request),
            add_special_tokens=False,  # the template writes the BOS itself
            return_tensors="np",
        )["input_ids"][0]
        assert response.usage.input_tokens == len(ids)


def test_served_and_offline_see_the_same_prompt_and_answer(offline, served, loop):
    """Greedy answers and prompt token counts agree between the two paths: the server renders
    the same template, and under prefill it continues the opened assistant turn
    (`continue_final_message`) instead of opening a new one."""
    requests = [_request(3), _request(4, images=2, prefill='{"name": "Liver", "present": ')]
    for request in requests:
        (mine,) = _all(loop, offline, [request])
        (theirs,) = _all(loop, served, [request])
        assert theirs.usage.input_tokens == mine.usage.input_tokens, request.prefill
        assert theirs.texts == mine.texts, request.prefill
    opened = _request(4, images=2)  # the same request without the prefill: a different prompt
    (plain,) = _all(loop, served, [opened])
    prefilled_tokens = _all(loop, served, [requests[1]])[0].usage.input_tokens
    assert prefilled_tokens > plain.usage.input_tokens


@pytest.mark.parametrize("path", ["offline", "served"])
def test_n_samples_and_seeds(path, request, loop):
    client = request.getfixturevalue(path)
    seeded = _request(5, temperature=1.0, n=3, seed=11, max_tokens=16)
    first, again, other = _all(
        loop, client, [seeded, seeded, _request(5, temperature=1.0, n=3, seed=12, max_tokens=16)]
    )
    assert len(first.texts) == 3
    assert first.texts == again.texts  # the same seed at temperature 1: the same samples
    assert first.texts != other.texts  # another seed: other samples
    assert len(set(first.texts)) > 1  # n samples, not one copied


def test_too_many_images_fail_their_request_only(offline, served, loop):
    over = _request(6, images=MAX_IMAGES + 1)
    fine = _request(7, images=MAX_IMAGES)
    before = offline.backend.submitted
    refused, answered = _all(loop, offline, [over, fine])
    assert isinstance(refused, BackendError)
    assert f"at most {MAX_IMAGES} per prompt" in str(refused) and "--max-images" in str(refused)
    assert offline.backend.submitted == before + 1  # refused before it reached the engine
    assert answered.texts and answered.usage.input_tokens > 0
    refused, answered = _all(loop, served, [over, fine])  # the server refuses it (400)
    assert isinstance(refused, BackendError) and answered.texts


def test_one_failing_request_never_fails_the_others(offline, loop):
    """A prompt longer than the model's context fails inside the engine; the requests beside
    it finish."""
    too_long = Request(parts=(Part.of_text("liver " * 6000),), max_tokens=4)
    results = _all(loop, offline, [_request(k) for k in range(4)] + [too_long])
    assert isinstance(results[-1], BackendError), results[-1]
    assert all(r.texts for r in results[:-1])


@pytest.mark.parametrize("path", ["offline", "served"])
def test_seeded_samples_prefilled_together_keep_the_engine_alive(path, request, loop):
    """PGT's stage 1 at scale: many seeded n > 1 prompts at once overflow one step's token
    budget; with chunked prefill, vLLM's CPU build then dies rewinding a CPU generator
    (support.backends.vllm_local, CPU_ENGINE_ARGS) and every request fails. Each must come back
    with its n samples, the same ones again."""
    client = request.getfixturevalue(path)
    heavy = [
        _request(20 + k, images=4, temperature=1.0, n=5, seed=k, max_tokens=8)
        for k in range(40)  # ~40 x 90 prompt tokens: over a 2,048-token step
    ]
    first = _all(loop, client, heavy)
    assert all(not isinstance(r, BaseException) for r in first), first
    assert all(len(r.texts) == 5 for r in first)
    assert [r.texts for r in _all(loop, client, heavy)] == [r.texts for r in first]


def test_requests_finish_independently(offline, loop):
    """Continuous batching: short requests sent beside a long one come back before it."""
    done: list[str] = []

    async def timed(tag: str, request: Request):
        await offline.generate(request)
        done.append(tag)

    async def main():
        long = _request(8, max_tokens=400, temperature=1.0, seed=3)
        shorts = [_request(9 + k, max_tokens=2) for k in range(6)]
        short = [timed(f"s{k}", r) for k, r in enumerate(shorts)]
        await asyncio.gather(timed("long", long), *short)

    loop.run(main(), timeout=600)
    assert done.index("long") == len(done) - 1, done


def test_cache_identity_follows_weights_not_engine_limits(tiny, tmp_path):
    """New weights at the same path are a new identity; the image limit and batch size are not."""
    base = create_backend(f"vllm:{tiny}", BackendOptions(extra=(("max_images", 4),)))
    wider = create_backend(
        f"vllm:{tiny}", BackendOptions(extra=(("max_images", 9), ("max_batch", 7)))
    )
    assert wider.identity == base.identity
    copy = tmp_path / "model"
    shutil.copytree(tiny, copy)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # the last byte of the last tensor: same size, other weights
    weights.write_bytes(bytes(data))
    moved = create_backend(f"vllm:{copy}", BackendOptions())
    shutil.copy(tiny / "model.safetensors", weights)
    restored = create_backend(f"vllm:{copy}", BackendOptions())
    assert moved.identity["revision"] != restored.identity["revision"]
    assert restored.identity["revision"] == base.identity["revision"]


# -- every evaluation through the real engines -----------------------------------------------------


def _check_suite(tmp: Path, shared_cache: Path, models: list[str], *args: str) -> None:
    """Every evaluation's quick subset for `models`, cut to every request shape, in one child
    session (the session's start and data paid once): no error outcome; then the same command
    again, every request from the cache and the same raw rows."""
    args = (*(f"--model={m}" for m in models), *args, LANE_MAX_TOKENS, "-k", EVERY_SHAPE)
    cache = cache_with_shared_data(tmp, shared_cache)
    first = run_quick(tmp, cache, "r1", *args, env=ENGINE_ENV)
    assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-3000:]
    errors = error_outcomes(raw_rows(tmp / "results", "r1"))
    assert not errors, {ev: (len(e), e[0]) for ev, e in errors.items()}
    # the same command again (pgt keeps finished results unless --override): every request
    # from the cache, the same raw rows
    again = run_quick(tmp, cache, "r2", "--override", *args, env=ENGINE_ENV)
    assert again.returncode == 0, again.stdout[-6000:] + again.stderr[-3000:]
    for ev in EVALUATIONS:
        manifest = json.loads((tmp / "results" / ev / "r2" / "manifest.json").read_text())
        for model in models:
            counts = manifest["models"][model]["outcomes"]
            assert counts["sent"] == 0 and counts["cache_hits"] > 0, (ev, model, counts)
        r1 = (tmp / "results" / ev / "r1" / "raw_results.jsonl").read_bytes()
        assert (tmp / "results" / ev / "r2" / "raw_results.jsonl").read_bytes() == r1, ev


@pytest.mark.slow
def test_every_evaluation_runs_offline_and_served(tiny, server, tmp_path, shared_cache):
    """`vllm:` and `openai-compatible:` (the module's server) side by side in one session."""
    models = [f"vllm:{tiny}", "openai-compatible:tiny"]
    _check_suite(tmp_path, shared_cache, models, f"--api-base={server}")
