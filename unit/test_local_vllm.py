"""The vLLM backend's request building, without vLLM installed, and local-model routing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.backends.base import BackendUnavailable
from support.backends.registry import BackendOptions, create_backend, model_kind, model_spec
from support.backends.vllm_local import engine_args, sampling_kwargs, vllm_input
from support.types import Part, Request

REPO = Path(__file__).resolve().parents[1]


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
    llama = model_spec("llama32-vision-11b")
    assert (llama.kind, llama.provider) == ("local-gpu", "vllm")
    assert dict(llama.engine) == {"max_num_seqs": 100}
    assert dict(model_spec("vllm:/models/x").engine) == {}
    args = engine_args(llama.model_id, gpus=(0, 1), extra=llama.engine, seed=3)
    assert args["model"] == "meta-llama/Llama-3.2-11B-Vision-Instruct"
    assert args["max_num_seqs"] == 100
    assert args["tensor_parallel_size"] == 2 and args["seed"] == 3
    assert args["limit_mm_per_prompt"]["image"] >= 4  # few-shot: 3 examples + the query
    assert engine_args("x")["tensor_parallel_size"] == 1


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

    from fixtures.distribution import group_name
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

    from support.synthetic.tiny_vlm import ensure_tiny_vlm

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
