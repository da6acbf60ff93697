"""Golden prompts of the tiny family checkpoints' chat templates (support.doubles.tiny_families).

Each tiny folder ships a chat template written to render its family's documented layout. These
tests pin the rendered strings, character for character, against the prompts the families
document: vLLM's examples (vLLM 0.32.0's sdist), Meta's Llama 3.2 Vision prompt format and the
hub templates. Each expected string is a literal with its source beside it.

The folders load their template through `AutoTokenizer` (the Qwen and LLaVA-OneVision processors
import torchvision at load, which this venv lacks; the tokenizer reads the same
chat_template.jinja). Per family: a system message as a string and as a list of text parts
(both render the same), no image, one image, four images (vLLM's multi-image layout, and
few-shot: image, text, image, text, ...), the generation prompt, a continued final assistant
message; then each family's quirks, and `render_prompt` (the suite's own path) against the
vLLM example of a one-image request.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from PIL import Image

from support.backends.chat_template import render_prompt
from support.backends.families import BY_NAME, family_of
from support.doubles.tiny_families import (
    FAMILIES,
    LLAVA_ONEVISION_TEMPLATE,
    MLLAMA_TEMPLATE,
    QWEN2_5_VL_TEMPLATE,
    QWEN3_VL_TEMPLATE,
    QWEN3_VL_THINKING_TEMPLATE,
)
from support.types import Part, Request

TEMPLATES = {
    "qwen2_5_vl": QWEN2_5_VL_TEMPLATE,
    "qwen3_vl": QWEN3_VL_TEMPLATE,
    "qwen3_vl_thinking": QWEN3_VL_THINKING_TEMPLATE,
    "llava_onevision": LLAVA_ONEVISION_TEMPLATE,
    "mllama": MLLAMA_TEMPLATE,
}
# the suite's family of each folder (read from its config.json): the thinking variant is a Qwen3-VL
SUITE_FAMILY = {
    "qwen2_5_vl": "qwen2_5_vl",
    "qwen3_vl": "qwen3_vl",
    "qwen3_vl_thinking": "qwen3_vl",
    "llava_onevision": "llava_onevision",
    "mllama": "mllama",
}

# vllm-0.32.0 sdist, examples/generate/multimodal/vision_language_offline.py:2294
QUESTION = "What is the content of this image?"
# vllm-0.32.0 sdist, examples/generate/multimodal/vision_language_multi_image_offline.py:22
MULTI_QUESTION = "What is the content of each image?"
# meta-llama/llama-models 8d29d93fa5700a60532e0061a02ffa89d0acd3fc,
# models/llama3_2/vision_prompt_format.md:35
MLLAMA_QUESTION = "Describe this image in two sentences"
DEFAULT_SYSTEM = "You are a helpful assistant."  # vision_language_offline.py:1808, 1899
SYSTEM = "Answer with one point per image."
SHOTS = (  # few-shot pointing: image, text, image, text, ... (the last text is the query)
    "Example 1: the liver is at (0.40, 0.55).",
    "Example 2: the liver is at (0.62, 0.31).",
    "Example 3: the liver is at (0.25, 0.70).",
    "Now you: where is the liver?",
)
PREFILL = "The answer is"

QWEN_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"  # vision_language_offline.py:1796
QWEN_IMAGES = QWEN_IMAGE + QWEN_IMAGE + QWEN_IMAGE + QWEN_IMAGE

# -- the golden prompts ---------------------------------------------------------------------------
# case -> prompt, per family. Cases: `one_image` (no system), `one_image_system` (system
# DEFAULT_SYSTEM), `multi_image` (vLLM's multi-image messages: the four images, then
# MULTI_QUESTION), `few_shot` (system SYSTEM; image and text interleaved, SHOTS), `text_system`
# (system SYSTEM, the question as text, no image), `continue` (one image and QUESTION, then an
# assistant message PREFILL continued: continue_final_message=True, add_generation_prompt=False).
# Every case but `continue` opens the assistant turn (add_generation_prompt=True).

GOLDEN: dict[str, dict[str, str]] = {
    "qwen2_5_vl": {
        # vllm-0.32.0 sdist, examples/generate/multimodal/vision_language_offline.py:1808-1811
        # (run_qwen2_5_vl; the default system turn is Qwen2.5-VL's own: see
        # https://huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct/blob/main/chat_template.json)
        "one_image": (
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
            "What is the content of this image?<|im_end|>\n"
            "<|im_start|>assistant\n"
        ),
        # the same prompt, its system turn given (vision_language_offline.py:1808-1811)
        "one_image_system": (
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
            "What is the content of this image?<|im_end|>\n"
            "<|im_start|>assistant\n"
        ),
        # vllm-0.32.0 sdist, examples/generate/multimodal/vision_language_multi_image_offline.py:
        # 1041-1050 (load_qwen2_5_vl: the system string, the images, the question) rendered with
        # the hub template (each image in place, text items verbatim)
        "multi_image": (
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n" + QWEN_IMAGES + "What is the content of each image?<|im_end|>\n"
            "<|im_start|>assistant\n"
        ),
        # hub template (URL above): images stay in place between the texts
        "few_shot": (
            "<|im_start|>system\nAnswer with one point per image.<|im_end|>\n"
            "<|im_start|>user\n"
            "<|vision_start|><|image_pad|><|vision_end|>Example 1: the liver is at (0.40, 0.55)."
            "<|vision_start|><|image_pad|><|vision_end|>Example 2: the liver is at (0.62, 0.31)."
            "<|vision_start|><|image_pad|><|vision_end|>Example 3: the liver is at (0.25, 0.70)."
            "<|vision_start|><|image_pad|><|vision_end|>Now you: where is the liver?<|im_end|>\n"
            "<|im_start|>assistant\n"
        ),
        "text_system": (
            "<|im_start|>system\nAnswer with one point per image.<|im_end|>\n"
            "<|im_start|>user\nWhat is the content of this image?<|im_end|>\n"
            "<|im_start|>assistant\n"
        ),
        # vision_language_offline.py:1808-1811, the answer continued after the opened turn
        "continue": (
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
            "What is the content of this image?<|im_end|>\n"
            "<|im_start|>assistant\nThe answer is"
        ),
    },
    "qwen3_vl": {
        # vllm-0.32.0 sdist, examples/generate/multimodal/vision_language_offline.py:1899-1902
        # (run_qwen3_vl) without the system turn the example writes out: Qwen3-VL's template adds
        # none (https://huggingface.co/Qwen/Qwen3-VL-8B-Instruct/blob/main/chat_template.json)
        "one_image": (
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
            "What is the content of this image?<|im_end|>\n"
            "<|im_start|>assistant\n"
        ),
        # vllm-0.32.0 sdist, examples/generate/multimodal/vision_language_offline.py:1899-1902
        "one_image_system": (
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
            "What is the content of this image?<|im_end|>\n"
            "<|im_start|>assistant\n"
        ),
        # vision_language_multi_image_offline.py:1041-1050's messages without the system turn
        "multi_image": (
            "<|im_start|>user\n" + QWEN_IMAGES + "What is the content of each image?<|im_end|>\n"
            "<|im_start|>assistant\n"
        ),
        "few_shot": (
            "<|im_start|>system\nAnswer with one point per image.<|im_end|>\n"
            "<|im_start|>user\n"
            "<|vision_start|><|image_pad|><|vision_end|>Example 1: the liver is at (0.40, 0.55)."
            "<|vision_start|><|image_pad|><|vision_end|>Example 2: the liver is at (0.62, 0.31)."
            "<|vision_start|><|image_pad|><|vision_end|>Example 3: the liver is at (0.25, 0.70)."
            "<|vision_start|><|image_pad|><|vision_end|>Now you: where is the liver?<|im_end|>\n"
            "<|im_start|>assistant\n"
        ),
        "text_system": (
            "<|im_start|>system\nAnswer with one point per image.<|im_end|>\n"
            "<|im_start|>user\nWhat is the content of this image?<|im_end|>\n"
            "<|im_start|>assistant\n"
        ),
        "continue": (
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
            "What is the content of this image?<|im_end|>\n"
            "<|im_start|>assistant\nThe answer is"
        ),
    },
    "qwen3_vl_thinking": {
        # as qwen3_vl, the opened assistant turn "<|im_start|>assistant\n<think>\n"
        # (https://huggingface.co/Qwen/Qwen3-VL-8B-Thinking/blob/main/chat_template.json)
        "one_image": (
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
            "What is the content of this image?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n"
        ),
        "one_image_system": (
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
            "What is the content of this image?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n"
        ),
        "multi_image": (
            "<|im_start|>user\n" + QWEN_IMAGES + "What is the content of each image?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n"
        ),
        "few_shot": (
            "<|im_start|>system\nAnswer with one point per image.<|im_end|>\n"
            "<|im_start|>user\n"
            "<|vision_start|><|image_pad|><|vision_end|>Example 1: the liver is at (0.40, 0.55)."
            "<|vision_start|><|image_pad|><|vision_end|>Example 2: the liver is at (0.62, 0.31)."
            "<|vision_start|><|image_pad|><|vision_end|>Example 3: the liver is at (0.25, 0.70)."
            "<|vision_start|><|image_pad|><|vision_end|>Now you: where is the liver?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n"
        ),
        "text_system": (
            "<|im_start|>system\nAnswer with one point per image.<|im_end|>\n"
            "<|im_start|>user\nWhat is the content of this image?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n"
        ),
        # a continued assistant message is the message's own turn: no "<think>\n" (only the
        # generation prompt opens with it)
        "continue": (
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
            "What is the content of this image?<|im_end|>\n"
            "<|im_start|>assistant\nThe answer is"
        ),
    },
    "llava_onevision": {
        # vllm-0.32.0 sdist, examples/generate/multimodal/vision_language_offline.py:1214
        # (run_llava_onevision)
        "one_image": (
            "<|im_start|>user <image>\nWhat is the content of this image?<|im_end|>"
            "<|im_start|>assistant\n"
        ),
        # the hub template (as transformers' test holds it: huggingface/transformers
        # 1a6e6ad97a7c5f6e196300a77ff1f6618a73155c,
        # tests/models/llava_onevision/test_processing_llava_onevision.py:68): a turn is
        # "<|im_start|>{role} ", its images, then "\n" + each text, "<|im_end|>" and no newline
        "one_image_system": (
            "<|im_start|>system \nYou are a helpful assistant.<|im_end|>"
            "<|im_start|>user <image>\nWhat is the content of this image?<|im_end|>"
            "<|im_start|>assistant\n"
        ),
        # vllm-0.32.0 sdist, examples/generate/multimodal/vision_language_multi_image_offline.py:
        # 676-685 (load_llava_onevision) rendered with the hub template (test_processing_...:68)
        "multi_image": (
            "<|im_start|>user <image><image><image><image>\n"
            "What is the content of each image?<|im_end|>"
            "<|im_start|>assistant\n"
        ),
        # test_processing_llava_onevision.py:68: all the turn's images first, then the texts
        "few_shot": (
            "<|im_start|>system \nAnswer with one point per image.<|im_end|>"
            "<|im_start|>user <image><image><image><image>"
            "\nExample 1: the liver is at (0.40, 0.55)."
            "\nExample 2: the liver is at (0.62, 0.31)."
            "\nExample 3: the liver is at (0.25, 0.70)."
            "\nNow you: where is the liver?<|im_end|>"
            "<|im_start|>assistant\n"
        ),
        "text_system": (
            "<|im_start|>system \nAnswer with one point per image.<|im_end|>"
            "<|im_start|>user \nWhat is the content of this image?<|im_end|>"
            "<|im_start|>assistant\n"
        ),
        # test_processing_llava_onevision.py:68: an assistant message's turn is
        # "<|im_start|>assistant " then "\n" + text: a space before the newline, where the
        # generation prompt has none
        "continue": (
            "<|im_start|>user <image>\nWhat is the content of this image?<|im_end|>"
            "<|im_start|>assistant \nThe answer is"
        ),
    },
    "mllama": {
        # meta-llama/llama-models 8d29d93fa5700a60532e0061a02ffa89d0acd3fc,
        # models/llama3_2/vision_prompt_format.md:33-35 (with MLLAMA_QUESTION)
        "one_image": (
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
            "<|image|>Describe this image in two sentences<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
        ),
        # vision_prompt_format.md:33-35's layout with vLLM's multi-image messages
        # (vision_language_multi_image_offline.py:676-685's shape): each <|image|> in place
        "multi_image": (
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
            "<|image|><|image|><|image|><|image|>What is the content of each image?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
        ),
        # images in place between the texts, as transformers' own Mllama processor test renders
        # them (huggingface/transformers 060988b644b98c9e87b381c6000f29c4ab8477ba,
        # tests/models/mllama/test_processing_mllama.py, test_apply_chat_template: "test image in
        # multiple locations"); no system: the template refuses one beside an image
        "few_shot": (
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
            "<|image|>Example 1: the liver is at (0.40, 0.55)."
            "<|image|>Example 2: the liver is at (0.62, 0.31)."
            "<|image|>Example 3: the liver is at (0.25, 0.70)."
            "<|image|>Now you: where is the liver?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
        ),
        # no image: the dated system turn of the Llama 3.1/3.2 template, then the system text
        # (vllm-0.32.0 sdist, examples/tool_chat_template_llama3.2_json.jinja:12 (the default date),
        # :51-52 (the two dated lines), :62-63; the hub's
        # https://huggingface.co/meta-llama/Llama-3.2-11B-Vision-Instruct/blob/main/chat_template.json
        # renders the same turn when no image is present, dated today through strftime_now where
        # it is defined, 26 Jul 2024 otherwise; the tiny template keeps the fixed date)
        "text_system": (
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
            "Answer with one point per image.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n"
            "What is the content of this image?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
        ),
        # vision_prompt_format.md:33-35, the answer continued after the assistant header
        "continue": (
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
            "<|image|>What is the content of this image?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nThe answer is"
        ),
    },
}
SYSTEM_CASES = ("one_image_system", "few_shot", "text_system")


def _question(family: str) -> str:
    return MLLAMA_QUESTION if family == "mllama" else QUESTION


def _system(text: str, form: str) -> dict:
    content = text if form == "string" else [{"type": "text", "text": text}]
    return {"role": "system", "content": content}


def _image() -> dict:
    return {"type": "image"}


def _text(text: str) -> dict:
    return {"type": "text", "text": text}


def chat(family: str, case: str, form: str = "parts") -> tuple[list[dict], dict]:
    """The messages of `case` and the apply_chat_template flags (`form`: the system content as a
    "string" or as a list of text "parts")."""
    opened = {"add_generation_prompt": True}
    if case == "one_image":
        return [{"role": "user", "content": [_image(), _text(_question(family))]}], opened
    if case == "one_image_system":
        user = {"role": "user", "content": [_image(), _text(QUESTION)]}
        return [_system(DEFAULT_SYSTEM, form), user], opened
    if case == "multi_image":  # vLLM's multi-image messages: images (with their url), question
        images = [{"type": "image", "image": f"https://example.org/{i}.jpg"} for i in range(4)]
        return [{"role": "user", "content": [*images, _text(MULTI_QUESTION)]}], opened
    if case == "few_shot":
        content = [item for shot in SHOTS for item in (_image(), _text(shot))]
        user = {"role": "user", "content": content}
        return ([] if family == "mllama" else [_system(SYSTEM, form)]) + [user], opened
    if case == "text_system":
        return [_system(SYSTEM, form), {"role": "user", "content": [_text(QUESTION)]}], opened
    assert case == "continue"
    return [
        {"role": "user", "content": [_image(), _text(QUESTION)]},
        {"role": "assistant", "content": PREFILL},
    ], {"add_generation_prompt": False, "continue_final_message": True}


def _cases() -> list:
    params = []
    for family, cases in GOLDEN.items():
        for case in cases:
            has_system = case in SYSTEM_CASES and not (family == "mllama" and case == "few_shot")
            forms = ("string", "parts") if has_system else ("-",)
            params += [
                pytest.param(
                    family, case, form, id=f"{family}-{case}" + ("" if form == "-" else f"-{form}")
                )
                for form in forms
            ]
    return params


def png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (180, 40, 40)).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def folders(shared_cache: Path) -> dict[str, Path]:
    """Every family's tiny checkpoint, built once for the session (a few seconds each)."""
    from support.doubles.tiny_families import ensure_family

    return {f: ensure_family(shared_cache, f) for f in FAMILIES}


@pytest.fixture(scope="module")
def tokenizers(folders) -> dict:
    from transformers import AutoTokenizer

    return {f: AutoTokenizer.from_pretrained(folder) for f, folder in folders.items()}


def render(tokenizer, messages: list[dict], **flags) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, **flags)


# -- the folders ship the module's templates ------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_the_tokenizer_loads_the_folders_template(tokenizers, folders, family):
    assert (folders[family] / "chat_template.jinja").read_text() == TEMPLATES[family]
    assert tokenizers[family].chat_template == TEMPLATES[family]
    assert family_of(str(folders[family])) is BY_NAME[SUITE_FAMILY[family]]


# -- golden prompts -------------------------------------------------------------------------------


@pytest.mark.parametrize(("family", "case", "form"), _cases())
def test_golden_prompt(tokenizers, family, case, form):
    messages, flags = chat(family, case, "string" if form == "-" else form)
    assert render(tokenizers[family], messages, **flags) == GOLDEN[family][case]


@pytest.mark.parametrize(
    ("family", "case"),
    [
        (family, case)
        for family in FAMILIES
        for case in SYSTEM_CASES
        # Llama-3.2-Vision refuses a system message beside an image: its only system case
        if family != "mllama" or case == "text_system"
    ],
)
def test_a_system_string_and_a_list_of_text_parts_render_the_same(tokenizers, family, case):
    tok = tokenizers[family]
    as_string, flags = chat(family, case, "string")
    as_parts, _ = chat(family, case, "parts")
    assert render(tok, as_string, **flags) == render(tok, as_parts, **flags)


@pytest.mark.parametrize("content", ["string", "parts"])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_continued_assistant_message_ends_exactly_with_its_prefill(tokenizers, family, content):
    messages, flags = chat(family, "continue")
    if content == "parts":
        messages[-1]["content"] = [_text(PREFILL)]
    rendered = render(tokenizers[family], messages, **flags)
    assert rendered.endswith(PREFILL)
    assert rendered == GOLDEN[family]["continue"]


# -- family quirks --------------------------------------------------------------------------------


def test_qwen2_5_vl_adds_a_default_system_turn_qwen3_vl_does_not(tokenizers):
    messages = [{"role": "user", "content": [_text(QUESTION)]}]
    flags = {"add_generation_prompt": True}
    qwen25 = render(tokenizers["qwen2_5_vl"], messages, **flags)
    assert qwen25 == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"  # offline.py:1808
        "<|im_start|>user\nWhat is the content of this image?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    for family in ("qwen3_vl", "qwen3_vl_thinking"):
        rendered = render(tokenizers[family], messages, **flags)
        assert rendered.startswith("<|im_start|>user\n") and "system" not in rendered
    # a given system replaces the default: one system turn, the given one
    own = render(tokenizers["qwen2_5_vl"], [_system(SYSTEM, "string"), *messages], **flags)
    assert own.count("<|im_start|>system\n") == 1 and DEFAULT_SYSTEM not in own


def test_qwen3_vl_thinking_opens_the_assistant_turn_with_think(tokenizers):
    messages, flags = chat("qwen3_vl", "one_image")
    thinking = render(tokenizers["qwen3_vl_thinking"], messages, **flags)
    instruct = render(tokenizers["qwen3_vl"], messages, **flags)
    assert thinking.endswith("<|im_start|>assistant\n<think>\n")
    assert thinking == instruct + "<think>\n"
    # without the generation prompt, the two templates are the same
    assert render(tokenizers["qwen3_vl_thinking"], messages) == render(
        tokenizers["qwen3_vl"], messages
    )


def test_llava_onevision_renders_all_images_first_so_few_shot_images_lose_their_place(tokenizers):
    messages, flags = chat("llava_onevision", "few_shot")
    rendered = render(tokenizers["llava_onevision"], messages, **flags)
    user = rendered.split("<|im_start|>user ", 1)[1].split("<|im_end|>", 1)[0]
    # the four images, then each text after "\n": no text sits between its image and the next
    assert user == "<image>" * 4 + "".join("\n" + shot for shot in SHOTS)
    assert user.rindex("<image>") < user.index(SHOTS[0])
    # the order of the parts does not matter: texts first renders the same
    texts_first = [
        messages[0],
        {"role": "user", "content": [*(_text(s) for s in SHOTS), *(_image() for _ in SHOTS)]},
    ]
    assert render(tokenizers["llava_onevision"], texts_first, **flags) == rendered


@pytest.mark.parametrize("form", ["string", "parts"])
def test_mllama_refuses_a_system_message_beside_an_image(tokenizers, form):
    # https://github.com/vllm-project/vllm/issues/8854 (the hub template's refusal)
    messages = [_system(SYSTEM, form), {"role": "user", "content": [_image(), _text(QUESTION)]}]
    with pytest.raises(Exception, match="Prompting with images is incompatible with system"):
        render(tokenizers["mllama"], messages, add_generation_prompt=True)


def test_mllama_adds_the_dated_system_turn_only_without_an_image(tokenizers):
    tok = tokenizers["mllama"]
    flags = {"add_generation_prompt": True}
    text_only = render(tok, [{"role": "user", "content": [_text(QUESTION)]}], **flags)
    # tool_chat_template_llama3.2_json.jinja:12, :51-52 (vllm-0.32.0 sdist): an empty system text
    assert text_only == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\n"
        "What is the content of this image?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    dated = render(tok, [{"role": "user", "content": [_text(QUESTION)]}], date_string="1 Jan 2025")
    assert "Today Date: 1 Jan 2025\n\n" in dated
    with_image, _ = chat("mllama", "one_image")
    assert "Cutting Knowledge Date" not in render(tok, with_image, **flags)


def test_render_prompt_folds_mllamas_system_text_into_the_user_turn(tokenizers):
    tok = tokenizers["mllama"]
    request = Request(parts=(Part.of_image(png()), Part.of_text(QUESTION)), system=SYSTEM)
    assert render_prompt(tok, request, BY_NAME["mllama"]) == (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
        "Answer with one point per image.\n\n<|image|>What is the content of this image?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    # without the family the system turn goes to the template, which refuses it
    with pytest.raises(Exception, match="incompatible with system messages"):
        render_prompt(tok, request, None)
    # no image: the system text stays in the (dated) system turn
    text_only = Request(parts=(Part.of_text(QUESTION),), system=SYSTEM)
    assert render_prompt(tok, text_only, BY_NAME["mllama"]) == GOLDEN["mllama"]["text_system"]


# -- the suite's own rendering path ---------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_render_prompt_gives_the_vllm_example_prompt(tokenizers, folders, family):
    """A one-image request without system through `render_prompt`, the family read from the
    folder's config as the backends read it: the vLLM example's prompt (Qwen2.5-VL with its
    default system turn; Llama-3.2-Vision's from Meta's prompt format)."""
    request = Request(parts=(Part.of_image(png()), Part.of_text(_question(family))))
    rendered = render_prompt(tokenizers[family], request, family_of(str(folders[family])))
    assert rendered == GOLDEN[family]["one_image"]
    with_prefill = Request(parts=request.parts, prefill=PREFILL)
    # a prefill is answer text: a thinking template's opened <think> span is closed empty
    # first, in the form Qwen3's templates write for no thinking (chat_template.render_prompt)
    closed = "\n</think>\n\n" if family == "qwen3_vl_thinking" else ""
    assert render_prompt(tokenizers[family], with_prefill, family_of(str(folders[family]))) == (
        GOLDEN[family]["one_image"] + closed + PREFILL
    )


@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl", "qwen3_vl_thinking"])
def test_render_prompt_with_the_examples_system_gives_its_prompt(tokenizers, folders, family):
    # vllm-0.32.0 sdist, vision_language_offline.py:1808-1811 and :1899-1902 write the system
    # turn out: with it given, the Qwen prompts are the examples' exactly
    request = Request(parts=(Part.of_image(png()), Part.of_text(QUESTION)), system=DEFAULT_SYSTEM)
    rendered = render_prompt(tokenizers[family], request, family_of(str(folders[family])))
    assert rendered == GOLDEN[family]["one_image_system"]
