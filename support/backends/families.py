"""Model families of the local backends (`hf:`, `vllm:`): what a family is, read from its config.

A local model's family is its config.json's architecture (`architectures[0]`), never the
`--model` name a user chose: a folder named "my-qwen" holding a LLaVA is a LLaVA. The family
carries the traits the suite asks of the model:

- `box_frame`: how it writes a bounding box when asked for one (support.evaluations.surgvqa.boxes
  BoxFrame): Qwen2-VL and Qwen3-VL answer [x1, y1, x2, y2] relative in 0-1000 ("norm1000");
  Qwen2.5-VL answers absolute pixels of the image as its processor resized it ("resized": read
  back through the processor's own resize); others have no documented grounding format ("auto").
- `video`: whether its processor takes a video input (a clip as one input, not frames).
- `system_with_images`: False where the family's template refuses a system message beside an
  image (Llama-3.2-Vision); the system text then opens the user turn (chat_template.py).
- `default_system`: the system turn its template adds when the chat has none (Qwen2.5-VL).
- `vllm`: whether current vLLM loads it (vLLM 0.10.2 removed Mllama, its last encoder-decoder VLM).
- `needs_torchvision`: whether its processor imports torchvision when it loads (transformers 5
  builds the video processor with the processor; without torchvision AutoProcessor raises).

Where the config is found: a local folder's config.json; for a hub id, the config of its snapshot
in the local Hugging Face cache (offline, never the network); for a registered name whose weights
are not here yet, the architecture its registry entry declares (registry.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """One model family and the traits the suite reads of it."""

    name: str  # short name: "qwen2_5_vl", "qwen3_vl", "llava_onevision", "mllama", ...
    architecture: str  # config.json's `architectures[0]`
    box_frame: str = "auto"  # "norm1000", "resized", "pixels" or "auto" (boxes.BoxFrame)
    video: bool = False  # takes a video input
    system_with_images: bool = True  # False: a system turn beside an image is refused
    default_system: str | None = None  # the system turn its template adds when none is given
    vllm: bool = True  # current vLLM (0.32) loads it
    needs_torchvision: bool = False  # its transformers processor imports torchvision at load
    # its transformers processor takes a batch's images as one list per prompt (a flat list of
    # two prompts' images is refused: "the number of image tokens in each text ([1, 1]) should
    # be the same as the number of provided images per batch ([2])"); the others take them flat
    # (LLaVA-OneVision: flat is what vLLM does too, each image tiled, "anyres")
    nested_images: bool = False


FAMILIES: tuple[Family, ...] = (
    Family("llava", "LlavaForConditionalGeneration"),
    Family("qwen2_vl", "Qwen2VLForConditionalGeneration", "norm1000", True,
           default_system="You are a helpful assistant.", needs_torchvision=True),
    Family("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration", "resized", True,
           default_system="You are a helpful assistant.", needs_torchvision=True),
    Family("qwen3_vl", "Qwen3VLForConditionalGeneration", "norm1000", True,
           needs_torchvision=True),
    Family("qwen3_vl_moe", "Qwen3VLMoeForConditionalGeneration", "norm1000", True,
           needs_torchvision=True),
    Family("llava_onevision", "LlavaOnevisionForConditionalGeneration", "auto", True,
           needs_torchvision=True),
    Family("mllama", "MllamaForConditionalGeneration", "auto", False,
           system_with_images=False, vllm=False, nested_images=True),
)  # fmt: skip
BY_ARCHITECTURE = {f.architecture: f for f in FAMILIES}
BY_NAME = {f.name: f for f in FAMILIES}


def family_modalities(base: frozenset[str], family: Family | None) -> frozenset[str]:
    """What a local model reads: its engine's `base` modalities, and "video" where its family's
    processor takes a clip (`Family.video`)."""
    return base | {"video"} if family is not None and family.video else base


def family_of_config(config: dict) -> Family | None:
    """The family of a parsed config.json (its first architecture), or None when unknown."""
    archs = config.get("architectures") or []
    return BY_ARCHITECTURE.get(archs[0]) if archs and isinstance(archs[0], str) else None


def config_of(model_id: str) -> dict | None:
    """config.json of a local folder or of a hub id's local snapshot; None when there is none
    here (never touches the network) or it is not JSON."""
    from support.backends.model_folder import model_json

    found = model_json(model_id, "config.json")
    return found[1] if found is not None else None


def family_of(model_id: str, declared: str | None = None) -> Family | None:
    """The family of `model_id`: its config's architecture where the config is here, else the
    `declared` architecture (a registered model's); None when neither names a known family."""
    config = config_of(model_id)
    if config is not None:
        return family_of_config(config)
    return BY_ARCHITECTURE.get(declared or "")
