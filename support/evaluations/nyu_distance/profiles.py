"""What differs between nyu_distance's two profiles, as values and functions: `WRITEUP`, `SOURCE`.

`configure` picks one (`NyuSettings.profile`) from `--compat`; the task calls its fields instead of
branching on the profile. The functions themselves live beside each other in the module of their
concern (pairs, prompts, parser, the task's crosses); this module only picks. It is imported at
start-up (configure), so it imports only light modules: the crosses (PIL) are imported when drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from support.evaluations.nyu_distance.pairs import (
    DepthAt,
    Sampled,
    sample_images,
    sample_images_source,
)
from support.evaluations.nyu_distance.parser import (
    DistanceAnswer,
    parse_answer,
    parse_first_number,
)
from support.evaluations.nyu_distance.prompts import (
    MAX_TOKENS,
    SOURCE_MAX_TOKENS,
    SOURCE_TEMPERATURE,
    TEMPERATURE,
    prompt,
    source_prompt,
)
from support.settings import Compat

if TYPE_CHECKING:
    from PIL import ImageDraw


@dataclass(frozen=True)
class NyuProfile:
    """One profile's rules (see `WRITEUP` and `SOURCE` for each value)."""

    compat: Compat  # the profile's name, as --compat spells it
    # the images and their pairs: (depth_at, n images, k, --samples, --seed, source images)
    sample: Callable[[DepthAt, int, int, int | None, int, int], Sampled]
    cross: Callable[..., None]  # (draw, (u, v), colour, label) -> draws one mark
    jpeg_quality: int  # the marked image's JPEG quality
    prompt: Callable[[tuple[int, int], tuple[int, int]], str]  # (A, B) px -> the text
    temperature: float
    max_tokens: int
    parse: Callable[[Any], DistanceAnswer]  # answer text -> metres


def _cross(draw: ImageDraw.ImageDraw, point, colour, label: str) -> None:
    """crosses.draw_cross: white-outlined, labelled in 18 px."""
    from support.evaluations.nyu_distance.crosses import draw_cross

    draw_cross(draw, point, colour, label)


def _cross_source(draw: ImageDraw.ImageDraw, point, colour, label: str) -> None:
    """crosses.draw_cross_source: the original's mark."""
    from support.evaluations.nyu_distance.crosses import draw_cross_source

    draw_cross_source(draw, point, colour, label)


WRITEUP = NyuProfile(
    compat="writeup",
    sample=sample_images,  # --samples images spread evenly, seeded pairs at our grid
    cross=_cross,
    jpeg_quality=95,
    prompt=prompt,  # PROMPT, the same for every pair
    temperature=TEMPERATURE,  # 0
    max_tokens=MAX_TOKENS,  # 64: one number, room for a unit or a short hedge
    parse=parse_answer,  # units, ranges and words read (parser.py)
)

# the original script (nyu distance evaluation, see README's table for its files)
SOURCE = NyuProfile(
    compat="source",
    sample=sample_images_source,  # the first N images (its --num_images), its cell sampler
    cross=_cross_source,  # a 3-px cross, the label 15 px up and right, no outline
    jpeg_quality=75,  # it saves its marked images with PIL's default quality
    prompt=source_prompt,  # its prompt, naming both points' pixels
    temperature=SOURCE_TEMPERATURE,  # it sets none: the APIs' default, 1.0
    max_tokens=SOURCE_MAX_TOKENS,  # 10
    parse=parse_first_number,  # the first number in the text
)

PROFILES: dict[Compat, NyuProfile] = {"writeup": WRITEUP, "source": SOURCE}
