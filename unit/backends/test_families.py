"""Model families: read from a model's config, never its --model name; their traits reach the
registry, the prompt and the engines' refusals (support/backends/families.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.backends.base import BackendOptions
from support.backends.chat_template import SYSTEM_JOINER, chat_messages
from support.backends.families import BY_NAME, FAMILIES, family_of, family_of_config
from support.backends.registry import availability, model_spec
from support.backends.vllm_local import engine_args
from support.types import Part, Request


def _folder(tmp_path: Path, name: str, architecture: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": [architecture]}))
    return folder


def test_the_family_is_the_configs_architecture_not_the_name(tmp_path):
    # a folder named like a Qwen holding a LLaVA-OneVision is a LLaVA-OneVision
    folder = _folder(tmp_path, "my-qwen2.5-vl", "LlavaOnevisionForConditionalGeneration")
    assert family_of(str(folder)).name == "llava_onevision"
    spec = model_spec(f"vllm:{folder}")
    assert spec.box_convention == "auto"  # not Qwen2.5-VL's "resized"
    assert spec.traits["family"] == "llava_onevision"
    qwen = _folder(tmp_path, "plain", "Qwen2_5_VLForConditionalGeneration")
    assert model_spec(f"hf:{qwen}").traits == {
        "box_convention": "resized",
        "prefill": "native",
        "modalities": "text,image,video",  # its family's processor takes a clip
        "family": "qwen2_5_vl",
    }
    llava = _folder(tmp_path, "llava", "LlavaForConditionalGeneration")
    assert model_spec(f"vllm:{llava}").traits["modalities"] == "text,image"  # no video input
    assert family_of(str(_folder(tmp_path, "other", "SomethingNew"))) is None
    assert family_of_config({}) is None and family_of_config({"architectures": [3]}) is None


def test_a_registered_model_not_downloaded_has_its_declared_family():
    assert model_spec("qwen25-vl-7b").family.name == "qwen2_5_vl"
    assert model_spec("qwen3-vl-8b-thinking").family.name == "qwen3_vl"
    assert model_spec("llava-onevision-7b-ov-chat").box_convention == "auto"
    assert model_spec("gpt-4o").family is None  # API models have no local family


def test_every_family_is_one_architecture():
    assert len({f.architecture for f in FAMILIES}) == len(FAMILIES)
    assert {f.box_frame for f in FAMILIES} <= {"auto", "pixels", "norm1000", "resized"}
    assert not BY_NAME["mllama"].vllm and not BY_NAME["mllama"].system_with_images


def test_llama_vision_is_transformers_on_a_gpu_and_says_so(monkeypatch):
    spec = model_spec("llama32-vision-11b")
    assert (spec.provider, spec.kind) == ("hf", "local-gpu")
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    why = availability("llama32-vision-11b")
    assert why is not None and "--device cuda" in why and "no CUDA device" in why
    # --device cpu overrides the registered default: then it can run (slowly) on the CPU
    cpu = BackendOptions(extra=(("device", "cpu"),))
    assert availability("llama32-vision-11b", cpu) is None


def test_vllm_refuses_a_family_it_removed_naming_the_way_that_works(tmp_path, monkeypatch):
    import support.backends.base as base

    monkeypatch.setattr(base, "missing_module", lambda modules: None)  # as if vLLM were here
    folder = _folder(tmp_path, "llama", "MllamaForConditionalGeneration")
    why = availability(f"vllm:{folder}")
    assert why is not None and "removed in vLLM 0.10.2" in why and f"hf:{folder}" in why
    assert availability(f"vllm:{_folder(tmp_path, 'q', 'Qwen3VLForConditionalGeneration')}") is None


def test_hf_names_torchvision_for_a_family_whose_processor_needs_it(tmp_path, monkeypatch):
    import support.backends.transformers_local as hf

    monkeypatch.setattr(
        hf, "missing_module", lambda modules: "torchvision" if "torchvision" in modules else None
    )
    folder = _folder(tmp_path, "q", "Qwen2_5_VLForConditionalGeneration")
    why = availability(f"hf:{folder}", BackendOptions(extra=(("device", "cpu"),)))
    assert why is not None and "needs torchvision" in why
    mllama = _folder(tmp_path, "m", "MllamaForConditionalGeneration")  # no video processor
    assert availability(f"hf:{mllama}", BackendOptions(extra=(("device", "cpu"),))) is None


def _image() -> Part:
    from PIL import Image

    return Part.of_image(Image.new("RGB", (8, 8), (1, 2, 3)))


def test_a_system_beside_an_image_opens_the_user_turn_where_the_template_refuses_it():
    request = Request(parts=(_image(), Part.of_text("Is it real?")), system="Be brief.")
    folded = chat_messages(request, BY_NAME["mllama"])
    assert [m["role"] for m in folded] == ["user"]
    assert folded[0]["content"][0] == {"type": "text", "text": "Be brief." + SYSTEM_JOINER}
    assert folded[0]["content"][1:] == [{"type": "image"}, {"type": "text", "text": "Is it real?"}]
    # the other families, and Mllama without an image, keep the system turn
    for family in (None, BY_NAME["qwen2_5_vl"]):
        kept = chat_messages(request, family)
        assert kept[0] == {"role": "system", "content": [{"type": "text", "text": "Be brief."}]}
    text_only = Request(parts=(Part.of_text("Hi"),), system="Be brief.")
    assert chat_messages(text_only, BY_NAME["mllama"])[0]["role"] == "system"


def test_dtype_reaches_the_engines_and_their_cache_identity(tmp_path):
    assert "dtype" not in engine_args("m") and "dtype" not in engine_args("m", dtype="auto")
    assert engine_args("m", dtype="float32")["dtype"] == "float32"
    pytest.importorskip("torch")
    from support.backends.transformers_local import TransformersBackend

    folder = _folder(tmp_path, "llava", "LlavaForConditionalGeneration")
    auto = TransformersBackend("hf:m", str(folder))
    half = TransformersBackend("hf:m", str(folder), dtype="bfloat16")
    assert "dtype" not in auto.identity and half.identity["dtype"] == "bfloat16"
    assert TransformersBackend("hf:m", str(folder), dtype="auto").identity == auto.identity


def test_a_batch_of_llama_vision_requests_is_one_generate_call(shared_cache):
    """Mllama's processor takes a batch's images as one list per prompt (a flat list of several
    prompts' images is refused); a batch answers as its requests do one by one."""
    import asyncio

    pytest.importorskip("torch")
    from PIL import Image

    from support.backends.transformers_local import TransformersBackend
    from support.doubles.tiny_families import ensure_family

    backend = TransformersBackend("hf:m", str(ensure_family(shared_cache, "mllama")), device="cpu")
    requests = [
        Request(
            parts=(Part.of_image(Image.new("RGB", (64, 48), (k * 60, 10, 200))), Part.of_text("Q")),
            system="Be brief.",
            max_tokens=4,
        )
        for k in range(3)
    ]
    together = asyncio.run(backend.generate_batch(requests))
    alone = [asyncio.run(backend.generate_batch([r]))[0] for r in requests]
    assert backend.batch_sizes == [3, 1, 1, 1]
    assert [r.text for r in together] == [r.text for r in alone]
    assert all("Be brief.\n\n<|image|>Q" in r.prompt for r in together)  # the folded system text
