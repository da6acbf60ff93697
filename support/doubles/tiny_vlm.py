"""A tiny randomly initialised LLaVA-style VLM, built in code and saved like a user's model.

The folder loads offline with `AutoProcessor.from_pretrained(path)` and
`AutoModelForImageTextToText.from_pretrained(path)`, and vLLM loads it too (`vllm:DIR`, the
CPU build included): a CLIP vision tower (64x64 px input, 16 px patches: 16 image tokens per
image), a 2-layer Llama text model, a byte-level BPE tokenizer trained here on the pointing
prompts, a CLIP image processor that shrinks the 768x768 canvases to 64x64, and a role-tagged chat
template. Its answers are nonsense text: it exists so the local backends' whole path (template,
processor, batching, generate, decode) runs in seconds on a CPU. Deterministic from the seed;
about 1.1 MB on disk (vocabulary 1024 tokens).

Two things make one folder serve both engines: the text model's attention heads are 32 wide
(vLLM's CPU attention has no kernel for head_dim 16), and the weights are saved under the hub
checkpoints' tensor names (`vision_tower.vision_model.*`, as llava-hf/llava-1.5-7b-hf), which
vLLM's LLaVA loader expects and transformers maps back on load.

    python -m support.doubles.tiny_vlm --out DIR [--seed S]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from support.evaluations.pointing.classes import CLASS_NAMES
from support.evaluations.pointing.parser import format_pointing
from support.evaluations.pointing.prompts import SYSTEM_PROMPT, user_prompt
from support.storage.files import build_once

VERSION = "v2"  # bump when the architecture, tokenizer or template changes: it names the folder
IMAGE_SIZE = 64  # px, the vision tower's square input
PATCH_SIZE = 16  # px -> (64 / 16)^2 = 16 patch tokens per image (+1 CLS, dropped by "default")
VOCAB_SIZE = 1024  # tokens of the trained BPE vocabulary, special tokens included
SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<image>", "<|system|>", "<|user|>", "<|assistant|>")
END_TOKEN = "<|end|>"  # closes each turn in the template

# role-tagged turns: "<|role|>\n...<|end|>\n"; text and image items in order; one <image> each
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'text' %}{{ item['text'] }}"
    "{% elif item['type'] == 'image' %}<image>{% endif %}"
    "{% endfor %}{% endif %}"
    "<|end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def corpus() -> list[str]:
    """Training text of the tokenizer: the pointing prompts, JSON answers, digits, prose."""
    lines = [SYSTEM_PROMPT, "Here are some examples:\n", "Now for the actual query: "]
    for k, name in enumerate(CLASS_NAMES.values()):
        lines.append(user_prompt(name))
        lines.append(f"Example {k % 3 + 1}: Organ: {name}")
        lines.append(f"Response: {format_pointing(name, 1, (37 * k % 768, 91 * k % 768))}")
        lines.append(format_pointing(name, 0, None))
        lines.append(f'```json\n{{"name": "{name}", "present": 1, "point_canvas": [{k}, {k * 7}]}}')
    lines += [" ".join(str(i) for i in range(768)), "0123456789 true false null [ ] { } , :"]
    lines.append("The image shows the liver, the gallbladder and a grasper. I cannot tell.")
    return lines


def build_tokenizer() -> object:
    """A byte-level BPE tokenizer trained on `corpus()`, as a PreTrainedTokenizerFast."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[*SPECIAL_TOKENS, END_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus() * 3, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": "<image>"},
        model_max_length=4096,
    )


def build_tiny_vlm(out_dir: Path, seed: int = 0) -> Path:
    """Write the tiny model, processor and generation config to `out_dir`; returns it."""
    import torch
    import transformers
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    # the PIL image processor: no torchvision needed (transformers 4.x: CLIPImageProcessor is it)
    image_processor_class = getattr(transformers, "CLIPImageProcessorPil", None)
    image_processor_class = image_processor_class or transformers.CLIPImageProcessor

    out_dir = Path(out_dir)
    tokenizer = build_tokenizer()
    image_processor = image_processor_class(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="default",  # drops the CLS token...
        num_additional_image_tokens=1,  # ...that the CLIP tower adds: 16 + 1 - 1 = 16 tokens
        chat_template=CHAT_TEMPLATE,
    )
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in (*SPECIAL_TOKENS, END_TOKEN)}
    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        projection_dim=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=IMAGE_SIZE,
        patch_size=PATCH_SIZE,
    )
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,  # head_dim 64 / 2 = 32: the smallest vLLM's CPU attention runs
        num_key_value_heads=2,
        max_position_embeddings=4096,  # tokens
        bos_token_id=ids["<s>"],
        eos_token_id=ids["</s>"],
        pad_token_id=ids["<pad>"],
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=ids["<image>"],
        image_seq_length=(IMAGE_SIZE // PATCH_SIZE) ** 2,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    gen = model.generation_config
    gen.bos_token_id, gen.pad_token_id = ids["<s>"], ids["<pad>"]
    gen.eos_token_id = [ids["</s>"], ids[END_TOKEN]]  # end of text or of the assistant turn
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    hub_tensor_names(out_dir / "model.safetensors")
    processor.save_pretrained(out_dir)
    return out_dir


def hub_tensor_names(weights: Path) -> None:
    """Rename the vision tower's tensors in a saved LLaVA file to the hub checkpoints' names:
    transformers 5 writes `vision_tower.embeddings.*`, the llava-hf checkpoints (and vLLM's
    loader) have `vision_tower.vision_model.embeddings.*`; transformers loads either."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    with safe_open(str(weights), "pt") as f:
        metadata = f.metadata()
    prefix, hub = "vision_tower.", "vision_tower.vision_model."
    tensors = {
        hub + k[len(prefix) :] if k.startswith(prefix) and not k.startswith(hub) else k: v
        for k, v in load_file(str(weights)).items()
    }
    save_file(tensors, str(weights), metadata=metadata)


def ensure_tiny_vlm(cache_dir: Path, seed: int = 0) -> Path:
    """The tiny model under `cache_dir/models`, built once (safe across processes)."""
    target = Path(cache_dir) / "models" / f"tiny-vlm-seed{seed}-{VERSION}"
    return build_once(target, lambda folder: build_tiny_vlm(folder, seed=seed))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m support.doubles.tiny_vlm", description=__doc__)
    ap.add_argument("--out", required=True, type=Path, help="folder to write (must not exist)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        ap.error(f"{args.out} exists and is not empty")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: all is built here
    t0 = time.perf_counter()
    build_tiny_vlm(args.out, args.seed)
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"wrote {args.out} ({size / 1e6:.2f} MB) in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
