"""The vLLM backend's request building, without vLLM installed, and local-model routing."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from support.backends.base import BackendError, BackendUnavailable
from support.backends.registry import BackendOptions, create_backend, model_kind, model_spec
from support.backends.vllm_local import (
    VLLMBackend,
    engine_args,
    image_limit_error,
    sampling_kwargs,
    vllm_input,
)
from support.types import Part, Request

REPO = Path(__file__).resolve().parents[2]


def test_importing_the_backend_imports_no_engine():
    code = (
        "import sys, support.backends.registry, support.backends.vllm_local;"
        "print(any(m in sys.modules for m in ('vllm', 'torch', 'transformers')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_registered_models_and_engine_arguments():
    assert model_spec("qwen25-vl-7b").model_id == "Qwen/Qwen2.5-VL-7B-Instruct"
    assert model_spec("llava-onevision-7b").model_id == "llava-hf/llava-onevision-qwen2-7b-si-hf"
    qwen = model_spec("qwen25-vl-7b")
    assert (qwen.kind, qwen.provider) == ("local-gpu", "vllm")
    assert qwen.family is not None and qwen.family.name == "qwen2_5_vl"  # declared, not here
    # Llama-3.2-Vision: vLLM removed Mllama in 0.10.2, so transformers serves it
    assert model_spec("llama32-vision-11b").provider == "hf"
    assert dict(model_spec("vllm:/models/x").engine) == {}
    args = engine_args(qwen.model_id, gpus=(0, 1), extra={"max_num_seqs": 100}, seed=3)
    assert args["model"] == "Qwen/Qwen2.5-VL-7B-Instruct"
    assert args["max_num_seqs"] == 100
    assert args["tensor_parallel_size"] == 2 and args["seed"] == 3
    assert args["limit_mm_per_prompt"]["image"] >= 4  # few-shot: 3 examples + the query
    assert engine_args("x")["tensor_parallel_size"] == 1
    assert "max_num_seqs" not in engine_args("x")  # vLLM's own default
    # --max-batch is the engine's max_num_seqs, over a registered model's own setting
    mine = engine_args(qwen.model_id, extra={"max_num_seqs": 100}, max_images=8, max_num_seqs=32)
    assert mine["max_num_seqs"] == 32 and mine["limit_mm_per_prompt"] == {"image": 8}


def test_the_image_limit_and_batch_size_shape_the_engine_not_the_identity():
    small = VLLMBackend("vllm:m", "/m", max_images=4, revision="r1")
    wide = VLLMBackend("vllm:m", "/m", max_images=8, max_num_seqs=16, revision="r1")
    assert small.identity == wide.identity
    assert VLLMBackend("vllm:m", "/m", revision="r2").identity != small.identity
    assert VLLMBackend("vllm:m", "/m", seed=1, revision="r1").identity != small.identity
    assert (small.max_images, wide.max_images) == (4, 8)
    # the client keeps the engine's batch full: as many requests in flight as it decodes
    assert small.max_batch is None and wide.default_concurrency == 16
    assert small.default_concurrency == 256


def test_a_request_over_the_image_limit_is_refused_before_the_engine():
    img = Part.of_image(_red())
    nine = Request(parts=(Part.of_text("q"), *[img] * 9))
    message = image_limit_error("vllm:m", nine, 8)
    assert message is not None
    assert "9 images" in message and "at most 8" in message and "--max-images" in message
    assert image_limit_error("vllm:m", nine, 9) is None
    backend = VLLMBackend("vllm:m", "/m", max_images=8)
    with pytest.raises(BackendError, match="at most 8 per prompt"):
        asyncio.run(backend.generate(nine))
    assert backend.submitted == 0 and backend._engine is None  # no engine was started


def _config(**options):
    """A stand-in pytest config: the run's settings with --max-images, --max-batch and --gpus
    from `options`, each evaluation's settings from its own defaults and `options` (its spec's
    configure, as the suite's pytest_configure does)."""
    from types import SimpleNamespace

    from fixtures.run_settings import SETTINGS_KEY
    from support import evaluations
    from support.settings import LocalSettings, RunSettings

    run = RunSettings()
    configured = {}
    for name in evaluations.names():
        spec = evaluations.spec(name)
        values = {o.dest: options.get(o.dest, o.default) for o in spec.options}
        configured[name] = spec.configure(values, run)
    stash = pytest.Stash()
    engine = {k: options[k] for k in ("max_images", "max_batch", "gpus") if k in options}
    stash[SETTINGS_KEY] = RunSettings(evaluations=configured, local=LocalSettings(**engine))
    return SimpleNamespace(stash=stash)


def test_the_default_image_limit_is_the_most_an_evaluation_sends():
    """--max-images defaults to the most images any configured evaluation puts in one request
    (surgvqa's --surgvqa-frames, pointing's few-shot 3 + 1); given, it wins."""
    from fixtures.models import local_engine_options, max_images

    assert max_images(_config()) == 8
    assert max_images(_config(surgvqa_frames=12)) == 12
    assert max_images(_config(surgvqa_frames=2)) == 4  # pointing: 3 examples + the query
    assert max_images(_config(surgvqa_frames=12, max_images=5)) == 5
    extra = dict(local_engine_options(_config(gpus="", max_batch=3, surgvqa_frames=9)))
    assert (extra["max_images"], extra["max_batch"]) == (9, 3)


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--max-images=0", "--max-batch=0", "--max-tokens=0"])
def test_engine_limits_below_one_are_usage_errors(flag):
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", flag, "unit/test_seam.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert out.returncode == pytest.ExitCode.USAGE_ERROR, out.stdout + out.stderr
    assert f"{flag.split('=')[0]} must be at least 1" in out.stderr


def _red():
    from PIL import Image

    return Image.new("RGB", (8, 8), (200, 10, 10))


def test_sampling_parameters_follow_the_request():
    r = Request(parts=(Part.of_text("q"),), temperature=1.0, max_tokens=77, n=5, seed=9)
    assert sampling_kwargs(r) == {"n": 5, "temperature": 1.0, "max_tokens": 77, "seed": 9}
    assert "seed" not in sampling_kwargs(Request(parts=(Part.of_text("q"),)))


def test_missing_vllm_makes_the_models_unavailable():
    for name in ("qwen25-vl-7b", "vllm:/models/anything"):
        assert model_kind(name) == "local-gpu"
        with pytest.raises(BackendUnavailable, match="vLLM"):
            create_backend(name, BackendOptions())


def test_local_models_are_one_xdist_group():
    from types import SimpleNamespace

    from fixtures.groups import group_name
    from support.types import Case

    config = SimpleNamespace(workerinput={"workercount": 4})
    ev = SimpleNamespace(name="pgt", locality=lambda case: case.id)
    cases = [Case(f"c{i}", "pgt") for i in range(40)]
    assert {group_name(config, ev, c, "hf:/m") for c in cases} == {"pgt-hf:/m"}
    assert {group_name(config, ev, c, "qwen25-vl-7b") for c in cases} == {"pgt-qwen25-vl-7b"}
    assert len({group_name(config, ev, c, "gpt-4o") for c in cases}) > 1  # API: spread out


@pytest.fixture(scope="module")
def processor(tmp_path_factory):
    pytest.importorskip("transformers")
    from transformers import AutoProcessor

    from support.doubles.tiny_vlm import ensure_tiny_vlm

    return AutoProcessor.from_pretrained(ensure_tiny_vlm(tmp_path_factory.mktemp("m")))


def test_vllm_input_is_the_rendered_prompt_with_its_images(processor):
    from PIL import Image

    from support.backends.chat_template import render_prompt

    img = Part.of_image(Image.new("RGB", (32, 24), (200, 10, 10)))
    one = Request(parts=(Part.of_text("Organ: Liver"), img), system="SYS", prefill="Let's")
    item = vllm_input(processor, one)
    assert item["prompt"] == render_prompt(processor, one)
    assert item["prompt"].endswith("Let's") and "SYS" in item["prompt"]
    assert item["multi_modal_data"]["image"].size == (32, 24)
    few = Request(parts=(Part.of_text("a"), img, Part.of_text("b"), img, Part.of_text("c"), img))
    assert len(vllm_input(processor, few)["multi_modal_data"]["image"]) == 3
    assert "multi_modal_data" not in vllm_input(processor, Request(parts=(Part.of_text("t"),)))
