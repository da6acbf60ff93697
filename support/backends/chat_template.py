"""One code path that renders a Request for any local model (transformers and vLLM backends).

The request becomes HF chat messages (a system turn, then one user turn whose text and image
items keep the parts' order), the model's own processor renders them with its chat template and
opens the assistant turn, and the request's prefill (if any) is appended verbatim: the answer
continues right after it, as in the source's prefill mode.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from PIL import Image

from support.backends.families import Family
from support.backends.thinking import THINK_CLOSE, span_open
from support.images import decode_image
from support.types import Part, Request

SYSTEM_JOINER = "\n\n"  # between a folded system text and the user turn's first part


def chat_messages(request: Request, family: Family | None = None) -> list[dict[str, Any]]:
    """HF chat format: `[system?, user]`, content items `{"type": "text"|"image"|"video"}` in
    part order; no assistant turn (the prefill is not a message: see `render_prompt`). The system
    content is a list of one text part, the form every family's template reads (LLaVA-OneVision's
    reads only a list's parts: a plain string there renders as nothing, the text dropped).

    For a family whose template refuses a system message beside an image (Llama-3.2-Vision), a
    request with both sends the system text as the user turn's first text, then SYSTEM_JOINER."""
    content: list[dict[str, Any]] = [
        {"type": "image"}
        if p.is_image
        else {"type": "video"}
        if p.video is not None
        else {"type": "text", "text": p.text or ""}
        for p in request.parts
    ]
    messages: list[dict[str, Any]] = []
    if request.system:
        folded = family is not None and not family.system_with_images and request.images
        if folded:
            content.insert(0, {"type": "text", "text": request.system + SYSTEM_JOINER})
        else:
            messages.append(
                {"role": "system", "content": [{"type": "text", "text": request.system}]}
            )
    messages.append({"role": "user", "content": content})
    return messages


def render_prompt(processor: Any, request: Request, family: Family | None = None) -> str:
    """The prompt text as the model sees it: the processor's (or tokenizer's) chat template with
    the assistant turn opened, then `request.prefill` verbatim. Image placeholders are the
    template's own (e.g. one `<image>` per image), expanded later by the processor or engine.

    A prefill is answer text the model continues: where the template opened a `<think>` span
    (a thinking model's), the span is closed empty before it ("<think>\n\n</think>\n\n", the
    form Qwen3's templates write for no thinking), so the continuation is read as the answer,
    not as thinking."""
    prompt = processor.apply_chat_template(
        chat_messages(request, family), add_generation_prompt=True, tokenize=False
    )
    if not isinstance(prompt, str):  # a template that returned a batch of one
        prompt = prompt[0]
    if request.prefill and span_open(prompt):
        prompt = prompt.rstrip("\n") + "\n\n" + THINK_CLOSE + "\n\n"
    return prompt + (request.prefill or "")


def request_videos(request: Request) -> list[tuple[Any, dict[str, Any]]]:
    """The request's clips as the engines take them, in part order: each clip's frames as one
    (T, H, W, 3) uint8 RGB array and its metadata (support.videos.Clip.metadata: source fps,
    frame indices, ...), from which a family's processor times its frames (Qwen2.5-VL's
    `second_per_grid_ts`, Qwen3-VL's timestamps)."""
    return [(clip.array(), clip.metadata()) for clip in request.clips]


DECODED_IMAGES = 128  # decoded images kept (RGB; a 768x768 canvas is 1.7 MB: 220 MB at most)
_decoded: OrderedDict[str, Image.Image] = OrderedDict()  # image sha256 -> decoded, LRU order
_decoded_lock = threading.Lock()


def request_images(request: Request) -> list[Image.Image]:
    """The request's images decoded as RGB PIL images, in part order. Decoded images are kept
    by content (the last DECODED_IMAGES), since requests share them: a PGT case's stage-2
    requests show its stage-1 image, pointing shows a frame once per organ and condition and its
    few-shot examples again and again (a 768x768 PNG costs 5-8 ms to decode here). The engines
    read the images and never change them."""
    return [_decode(part) for part in request.images]


def _decode(part: Part) -> Image.Image:
    assert part.image is not None
    with _decoded_lock:
        found = _decoded.get(part.image_sha256)
        if found is not None:
            _decoded.move_to_end(part.image_sha256)
            return found
    image = decode_image(part.image, "an image part")
    with _decoded_lock:
        _decoded[part.image_sha256] = image
        while len(_decoded) > DECODED_IMAGES:
            _decoded.popitem(last=False)
    return image
