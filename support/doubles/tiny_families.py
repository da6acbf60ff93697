"""Tiny random-weight checkpoints of the VLM families users run, built in code, saved as the hub.

One builder, one section a family: Qwen2.5-VL, Qwen3-VL (an instruct and a thinking variant),
LLaVA-OneVision and Llama-3.2-Vision (Mllama). Each folder holds what a hub checkpoint holds:
config.json with the family's architecture, model.safetensors under the hub checkpoints' tensor
names, a byte-level BPE tokenizer with the family's special tokens, the family's real processor
classes (patch size, merge size and resize rules as the family's; small max_pixels), and a chat
template written here to render the layout the family documents (the expected strings, with their
sources, are pinned in unit/backends/test_family_templates.py). The answers are nonsense text: the
folders exist so the suite's local paths (`hf:`, `vllm:`, a vLLM server) run each family's template,
processor and engine code in seconds on a CPU.

Shared across families: text models 64 wide, 2 layers, 2 query heads of 32 (vLLM's CPU attention
has no kernel below head_dim 32), 2-layer vision towers 32 wide; the tokenizer of
`support.doubles.tiny_vlm` (trained on the pointing prompts) with each family's special tokens.
The processor files are written as JSON (not through the processor classes, whose video
processors import torchvision at construction), so a folder builds where torchvision is missing
and loads wherever the family's processor can (transformers with torchvision, vLLM).

Where each family runs: all load in transformers (Mllama and the image path of the others without
torchvision; the Qwen and LLaVA-OneVision processors need torchvision at load); all but Mllama load
in vLLM (vLLM dropped MllamaForConditionalGeneration in 0.10.2).

    python -m support.doubles.tiny_families --family qwen2_5_vl --out DIR [--seed S]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.doubles.tiny_vlm import hub_tensor_names
from support.storage.files import build_once

VERSION = "v1"  # bump when an architecture, tokenizer, processor or template changes
TEXT = {  # the text model's shape in every family
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,  # head_dim 64 / 2 = 32: the smallest vLLM's CPU attention runs
    "num_key_value_heads": 2,
    "max_position_embeddings": 8192,  # tokens
}

# -- chat templates (written here: each renders the layout its family documents) ------------------
# No whitespace control ({%- -%}) anywhere: it would also eat the layouts' literal newlines.

# ChatML turns "<|im_start|>{role}\n{content}<|im_end|>\n"; an image is
# "<|vision_start|><|image_pad|><|vision_end|>" in place, a video the same with <|video_pad|>.
_QWEN_CONTENT = (
    "{% macro render(content) %}"
    "{% if content is string %}{{ content }}"
    "{% else %}{% for item in content %}"
    "{% if item['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif item['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}"
    "{% endif %}{% endfor %}{% endif %}"
    "{% endmacro %}"
)


def _qwen_template(default_system: str | None, generation_prompt: str) -> str:
    first = (
        "{% if messages[0]['role'] != 'system' %}"
        "<|im_start|>system\n" + default_system + "<|im_end|>\n"
        "{% endif %}"
        if default_system
        else ""
    )
    return (
        _QWEN_CONTENT + first + "{% for message in messages %}"
        "<|im_start|>{{ message['role'] }}\n{{ render(message['content']) }}<|im_end|>\n"
        "{% endfor %}"
        "{% if add_generation_prompt %}" + generation_prompt + "{% endif %}"
    )


# Qwen2.5-VL: a default system turn when the chat has none (vLLM's run_qwen2_5_vl prompt)
QWEN2_5_VL_TEMPLATE = _qwen_template("You are a helpful assistant.", "<|im_start|>assistant\n")
# Qwen3-VL Instruct: no default system turn; Thinking: the assistant turn opens "<think>\n"
QWEN3_VL_TEMPLATE = _qwen_template(None, "<|im_start|>assistant\n")
QWEN3_VL_THINKING_TEMPLATE = _qwen_template(None, "<|im_start|>assistant\n<think>\n")

# LLaVA-OneVision (llava-hf, Qwen2 text): "<|im_start|>{role} " then every image of the turn as
# <image>, every video as <video>, then each text item as "\n" + text, "<|im_end|>" with no
# newline between turns; images come first whatever their place among the texts
LLAVA_ONEVISION_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }} "
    "{% if message['content'] is string %}{{ '\n' + message['content'] }}"
    "{% else %}"
    "{% for item in message['content'] if item['type'] == 'image' %}<image>{% endfor %}"
    "{% for item in message['content'] if item['type'] == 'video' %}<video>{% endfor %}"
    "{% for item in message['content'] if item['type'] == 'text' %}"
    "{{ '\n' + item['text'] }}{% endfor %}"
    "{% endif %}"
    "<|im_end|>"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Llama-3.2-Vision: "<|begin_of_text|>", turns "<|start_header_id|>{role}<|end_header_id|>\n\n"
# ... "<|eot_id|>", an image is "<|image|>"; a system message beside an image is refused; a chat
# with no image opens with a dated system turn (knowledge cutoff, today's date, the system text)
MLLAMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% if date_string is not defined %}{% set date_string = '26 Jul 2024' %}{% endif %}"
    "{% if messages[0]['role'] == 'system' %}"
    "{% if messages[0]['content'] is string %}"
    "{% set system_message = messages[0]['content'] | trim %}"
    "{% else %}{% set system_message = messages[0]['content'][0]['text'] | trim %}{% endif %}"
    "{% set messages = messages[1:] %}"
    "{% else %}{% set system_message = '' %}{% endif %}"
    "{% set ns = namespace(has_images=false) %}"
    "{% for message in messages %}{% if message['content'] is not string %}"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}"
    "{% set ns.has_images = true %}{% endif %}{% endfor %}{% endif %}{% endfor %}"
    "{% if ns.has_images and system_message != '' %}"
    "{{ raise_exception('Prompting with images is incompatible with system messages.') }}"
    "{% endif %}"
    "{% if not ns.has_images %}"
    "<|start_header_id|>system<|end_header_id|>\n\n"
    "Cutting Knowledge Date: December 2023\nToday Date: {{ date_string }}\n\n"
    "{{ system_message }}<|eot_id|>"
    "{% endif %}"
    "{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{% if message['content'] is string %}{{ message['content'] | trim }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<|image|>"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "<|eot_id|>"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

# -- tokenizers ------------------------------------------------------------------------------------

QWEN_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
LLAVA_ONEVISION_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<video>")
MLLAMA_TOKENS = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|finetune_right_pad_id|>",
    "<|image|>",
)
VOCAB_SIZE = 1024  # tokens of the trained BPE vocabulary, special tokens included


def build_tokenizer(special: tuple[str, ...], **named: Any) -> Any:
    """A byte-level BPE tokenizer trained on the tiny LLaVA's corpus with `special` tokens, as a
    PreTrainedTokenizerFast (`named`: bos_token, eos_token, pad_token, extra tokens)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from support.doubles.tiny_vlm import corpus

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(special),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus() * 3, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=8192, **named)


# -- one section a family --------------------------------------------------------------------------


def _ids(tokenizer: Any, tokens: tuple[str, ...]) -> dict[str, int]:
    return {t: tokenizer.convert_tokens_to_ids(t) for t in tokens}


def _write_json(path: Path, value: dict[str, Any]) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")


def _qwen_tokenizer() -> Any:
    return build_tokenizer(QWEN_TOKENS, eos_token="<|im_end|>", pad_token="<|endoftext|>")


def _qwen_processor_files(
    out: Path, processor: str, image_processor: str, video_processor: str, vision: dict[str, Any]
) -> None:
    """preprocessor_config.json and video_preprocessor_config.json as the Qwen checkpoints hold
    them: patch, merge and temporal patch sizes and the min/max pixels of the resize."""
    common = {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "rescale_factor": 1 / 255,
        "patch_size": vision["patch_size"],
        "merge_size": vision["merge_size"],
        "temporal_patch_size": vision["temporal_patch_size"],
        "min_pixels": vision["min_pixels"],
        "max_pixels": vision["max_pixels"],
        "size": {"shortest_edge": vision["min_pixels"], "longest_edge": vision["max_pixels"]},
        "processor_class": processor,
    }
    image = {**common, "image_processor_type": image_processor}
    _write_json(out / "preprocessor_config.json", image)
    _write_json(
        out / "video_preprocessor_config.json",
        {**common, "video_processor_type": video_processor, "fps": 2.0, "do_sample_frames": False},
    )


def _qwen_text(tokenizer: Any, ids: dict[str, int], rope: dict[str, Any], **more: Any) -> dict:
    """A Qwen text config: TEXT's shape, the tokenizer's vocabulary, M-RoPE `rope`."""
    return {
        **TEXT,
        **more,
        "vocab_size": len(tokenizer),
        "rope_parameters": {"rope_type": "default", **rope},
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }


def _qwen_vision(patch: int, **more: Any) -> dict:
    """A Qwen vision tower: 2 layers 32 wide, `patch` px patches merged 2 x 2, into TEXT."""
    return {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": TEXT["hidden_size"],
        "patch_size": patch,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        **more,
    }


def _qwen_tokens(ids: dict[str, int]) -> dict[str, int]:
    """The config's ids of the image, video and vision-span tokens."""
    return {
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
    }


def _qwen_limits(patch: int) -> dict[str, int]:
    """The processor's sizes: `patch` px patches merged 2 x 2, 4 to 64 tokens an image."""
    token = patch * 2  # px a side of one merged token
    return {
        "patch_size": patch,
        "merge_size": 2,
        "temporal_patch_size": 2,
        "min_pixels": token * token * 4,
        "max_pixels": token * token * 64,
    }


def build_qwen2_5_vl(out: Path, seed: int = 0) -> Path:
    """Qwen2.5-VL: patch 14, merge 2 (28 px a token), windowed vision attention; boxes are pixels
    of the resized input. max_pixels 28*28*64: at most 64 image tokens an image."""
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    tokenizer = _qwen_tokenizer()
    ids = _ids(tokenizer, QWEN_TOKENS)
    config = Qwen2_5_VLConfig(
        text_config=_qwen_text(
            tokenizer,
            ids,
            {"mrope_section": [4, 6, 6], "rope_theta": 1000000.0},  # sections sum to head_dim / 2
        ),
        vision_config=_qwen_vision(14, window_size=112, fullatt_block_indexes=[1]),
        **_qwen_tokens(ids),
    )
    config.architectures = ["Qwen2_5_VLForConditionalGeneration"]
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    _save(out, model, tokenizer, QWEN2_5_VL_TEMPLATE, ids, ("<|im_end|>", "<|endoftext|>"))
    _qwen_processor_files(
        out,
        "Qwen2_5_VLProcessor",
        "Qwen2VLImageProcessor",
        "Qwen2VLVideoProcessor",
        _qwen_limits(14),
    )
    return out


def build_qwen3_vl(out: Path, seed: int = 0, thinking: bool = False) -> Path:
    """Qwen3-VL: patch 16, merge 2 (32 px a token), DeepStack features from vision layer 1;
    boxes relative in 0-1000. The thinking variant's template opens the answer with <think>."""
    import torch
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    tokenizer = _qwen_tokenizer()
    ids = _ids(tokenizer, QWEN_TOKENS)
    rope = {"mrope_section": [6, 5, 5], "mrope_interleaved": True, "rope_theta": 5000000.0}
    config = Qwen3VLConfig(
        text_config=_qwen_text(tokenizer, ids, rope, head_dim=32),  # sections sum to 32 / 2
        vision_config=_qwen_vision(
            16,
            num_position_embeddings=144,  # a 12 x 12 grid of learned positions, interpolated
            deepstack_visual_indexes=[1],
        ),
        **_qwen_tokens(ids),
    )
    config.architectures = ["Qwen3VLForConditionalGeneration"]
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config).eval()
    template = QWEN3_VL_THINKING_TEMPLATE if thinking else QWEN3_VL_TEMPLATE
    _save(out, model, tokenizer, template, ids, ("<|im_end|>", "<|endoftext|>"))
    _qwen_processor_files(
        out, "Qwen3VLProcessor", "Qwen2VLImageProcessor", "Qwen3VLVideoProcessor", _qwen_limits(16)
    )
    return out


LLAVA_OV_TILE = 64  # px, the SigLIP tower's square input: (64 / 16)^2 = 16 tokens a tile
LLAVA_OV_PINPOINTS = [[64, 64], [64, 128], [128, 64], [128, 128], [128, 192], [192, 128]]


def build_llava_onevision(out: Path, seed: int = 0) -> Path:
    """LLaVA-OneVision (llava-hf layout): a SigLIP tower, anyres tiling over LLAVA_OV_PINPOINTS
    (each image: a base tile plus the tiles of the best-fitting grid), a Qwen2 text model."""
    import torch
    from transformers import LlavaOnevisionConfig, LlavaOnevisionForConditionalGeneration

    tokenizer = build_tokenizer(
        LLAVA_ONEVISION_TOKENS, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    ids = _ids(tokenizer, LLAVA_ONEVISION_TOKENS)
    config = LlavaOnevisionConfig(
        vision_config={
            "model_type": "siglip_vision_model",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": LLAVA_OV_TILE,
            "patch_size": 16,
        },
        text_config={
            **TEXT,
            "model_type": "qwen2",
            "vocab_size": len(tokenizer),
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        image_token_index=ids["<image>"],
        video_token_index=ids["<video>"],
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        image_grid_pinpoints=LLAVA_OV_PINPOINTS,
        vision_aspect_ratio="anyres_max_9",
    )
    config.architectures = ["LlavaOnevisionForConditionalGeneration"]
    torch.manual_seed(seed)
    model = LlavaOnevisionForConditionalGeneration(config).eval()
    _save(out, model, tokenizer, LLAVA_ONEVISION_TEMPLATE, ids, ("<|im_end|>", "<|endoftext|>"))
    hub_tensor_names(out / "model.safetensors")  # vision_tower.vision_model.*, as llava-hf's
    siglip = {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "rescale_factor": 1 / 255,
        "resample": 3,  # bicubic
        "size": {"height": LLAVA_OV_TILE, "width": LLAVA_OV_TILE},
        "processor_class": "LlavaOnevisionProcessor",
    }
    _write_json(
        out / "preprocessor_config.json",
        {
            **siglip,
            "image_processor_type": "LlavaOnevisionImageProcessor",
            "do_pad": True,
            "image_grid_pinpoints": LLAVA_OV_PINPOINTS,
        },
    )
    _write_json(
        out / "video_preprocessor_config.json",
        {
            **siglip,
            "video_processor_type": "LlavaOnevisionVideoProcessor",
            "do_sample_frames": False,
        },
    )
    _write_json(
        out / "processor_config.json",
        {
            "processor_class": "LlavaOnevisionProcessor",
            "num_image_tokens": (LLAVA_OV_TILE // 16) ** 2,
            "vision_feature_select_strategy": "full",
            "vision_aspect_ratio": "anyres_max_9",
        },
    )
    return out


MLLAMA_TILE = 28  # px, one tile's side (two 14 px patches)


def build_mllama(out: Path, seed: int = 0) -> Path:
    """Llama-3.2-Vision (Mllama): images cut into up to 4 tiles of MLLAMA_TILE px, read by the text
    model through cross-attention (layer 1), one <|image|> token an image. transformers only."""
    import torch
    from transformers import MllamaConfig, MllamaForConditionalGeneration

    tokenizer = build_tokenizer(
        MLLAMA_TOKENS,
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        pad_token="<|finetune_right_pad_id|>",
    )
    ids = _ids(tokenizer, MLLAMA_TOKENS)
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_global_layers": 1,
        "attention_heads": 2,
        "image_size": MLLAMA_TILE,
        "patch_size": 14,
        "max_num_tiles": 4,
        "intermediate_layers_indices": [0],
        "vision_output_dim": 32 * 2,  # the last layer's output and one intermediate layer's
        "supported_aspect_ratios": [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]],
    }
    config = MllamaConfig(
        vision_config=vision,
        text_config={
            **TEXT,
            "vocab_size": len(tokenizer) + 8,  # the hub's lm head has 8 rows past the vocabulary
            "cross_attention_layers": [1],
            "bos_token_id": ids["<|begin_of_text|>"],
            "eos_token_id": [ids["<|eot_id|>"], ids["<|end_of_text|>"]],
            "pad_token_id": ids["<|finetune_right_pad_id|>"],
        },
        image_token_index=ids["<|image|>"],
    )
    config.architectures = ["MllamaForConditionalGeneration"]
    torch.manual_seed(seed)
    model = MllamaForConditionalGeneration(config).eval()
    _save(out, model, tokenizer, MLLAMA_TEMPLATE, ids, ("<|eot_id|>", "<|end_of_text|>"))
    _write_json(
        out / "preprocessor_config.json",
        {
            "image_processor_type": "MllamaImageProcessor",
            "processor_class": "MllamaProcessor",
            "do_convert_rgb": True,
            "do_normalize": True,
            "do_pad": True,
            "do_rescale": True,
            "do_resize": True,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711],
            "rescale_factor": 1 / 255,
            "resample": 2,  # bilinear
            "max_image_tiles": 4,
            "size": {"height": MLLAMA_TILE, "width": MLLAMA_TILE},
        },
    )
    return out


def _save(
    out: Path,
    model: Any,
    tokenizer: Any,
    template: str,
    ids: dict[str, int],
    eos: tuple[str, ...],
) -> None:
    """Weights under the hub's tensor names, the tokenizer, the template and a generation config
    that stops at the end of the assistant's turn."""
    gen = model.generation_config
    gen.eos_token_id = [ids[t] for t in eos]
    gen.pad_token_id = tokenizer.pad_token_id
    if tokenizer.bos_token_id is not None:
        gen.bos_token_id = tokenizer.bos_token_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "chat_template.jinja").write_text(template)


# -- the families ----------------------------------------------------------------------------------

BUILDERS: dict[str, Callable[[Path, int], Path]] = {
    "qwen2_5_vl": build_qwen2_5_vl,
    "qwen3_vl": build_qwen3_vl,
    "qwen3_vl_thinking": lambda out, seed=0: build_qwen3_vl(out, seed, thinking=True),
    "llava_onevision": build_llava_onevision,
    "mllama": build_mllama,
}
FAMILIES = tuple(BUILDERS)
# families vLLM loads (0.10.2 removed Mllama, with its other encoder-decoder models)
VLLM_FAMILIES = ("qwen2_5_vl", "qwen3_vl", "qwen3_vl_thinking", "llava_onevision")


def build_family(family: str, out_dir: Path, seed: int = 0) -> Path:
    """Write the tiny checkpoint of `family` (one of FAMILIES) to `out_dir`; returns it."""
    if family not in BUILDERS:
        raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    return BUILDERS[family](Path(out_dir), seed)


def ensure_family(cache_dir: Path, family: str, seed: int = 0) -> Path:
    """The tiny checkpoint of `family` under `cache_dir/models`, built once (safe across
    processes)."""
    target = Path(cache_dir) / "models" / f"tiny-{family}-seed{seed}-{VERSION}"
    return build_once(target, lambda folder: build_family(family, folder, seed))


def main(argv: list[str] | None = None) -> int:
    prog = "python -m support.doubles.tiny_families"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__)
    ap.add_argument("--family", required=True, choices=FAMILIES)
    ap.add_argument("--out", required=True, type=Path, help="folder to write (must not exist)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        ap.error(f"{args.out} exists and is not empty")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: all is built here
    t0 = time.perf_counter()
    build_family(args.family, args.out, args.seed)
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"wrote {args.out} ({size / 1e6:.2f} MB) in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
