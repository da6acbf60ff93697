"""The source's prompts, verbatim, and the zero-/few-shot request layouts.

Coordinates in every prompt and answer are on the 768x768 canvas: (x, y), origin top-left, integers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from support.types import Part

# the three prompt conditions, in the source's order
CONDITIONS: tuple[str, ...] = ("zero_shot", "fewshot_standard", "fewshot_hard_negatives")

SYSTEM_PROMPT = """You are a surgical vision validator looking at ONE image on a fixed canvas.
Return STRICT JSON only: {"name":"<organ>", "present":0|1, "point_canvas":[x,y] or null}
- Coordinates: origin=(0,0) is top-left of the CANVAS, x∈[0,767], y∈[0,767], integers only.
- present=1 ONLY if any visible part of the named structure is in view.
- If present=1, point_canvas MUST be inside the structure; else use null.
- No extra text or markdown."""


def user_prompt(organ_name: str) -> str:
    """The source's user prompt (the trailing space on its first line is the source's)."""
    return (
        f'Organ: "{organ_name}". \n'
        f'Return exactly: {{"name":"{organ_name}", "present":0|1, "point_canvas":[x,y] or null}}'
    )


@dataclass(frozen=True)
class Example:
    """One few-shot example: the letterboxed canvas image and the answer shown for it."""

    image: Part
    answer: str  # compact JSON, e.g. {"name":"Liver","present":1,"point_canvas":[384,400]}


def zero_shot_parts(organ_name: str, image: Part) -> tuple[Part, ...]:
    """User turn of the zero-shot request: the user prompt, then the image."""
    return (Part.of_text(user_prompt(organ_name)), image)


def few_shot_parts(organ_name: str, examples: Sequence[Example], image: Part) -> tuple[Part, ...]:
    """User turn of a few-shot request, interleaving example images and their answers (source
    layout), then the query: the user prompt and the image."""
    parts: list[Part] = [Part.of_text("Here are some examples:\n")]
    for k, ex in enumerate(examples, start=1):
        parts += [
            Part.of_text(f"Example {k}: Organ: {organ_name}"),
            ex.image,
            Part.of_text(f"Response: {ex.answer}"),
        ]
    parts += [Part.of_text(f"Now for the actual query: {user_prompt(organ_name)}"), image]
    return tuple(parts)
