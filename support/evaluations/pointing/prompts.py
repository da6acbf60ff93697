"""The source's prompts, verbatim, and the zero-/few-shot request layouts.

Coordinates in every prompt and answer are on the canvas: (x, y), origin top-left, integers. The
write-up's canvas is 768x768 (a letterbox); `--compat source` uses the frame itself (854x480 for
CholecSeg8k) with the original's one-line user prompt and its few-shot text (`source_*` below).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from support.types import Part

# the three prompt conditions, in the source's order
CONDITIONS: tuple[str, ...] = ("zero_shot", "fewshot_standard", "fewshot_hard_negatives")
MAX_TOKENS = 256
SOURCE_MAX_TOKENS = 100  # the original's max_tokens for every model (eval/evaluator.py:93-159)
# the original's temperature by provider: OpenAI's API default (it sends none), 0.1 for Claude
# and Gemini (their adapters' defaults), 0 for the local models; 0 for any other provider here
SOURCE_TEMPERATURE = {"openai": 1.0, "anthropic": 0.1, "google": 0.1}


def temperature(provider: str) -> float:
    """The write-up's temperature, for a model of any provider: 0."""
    return 0.0


def source_temperature(provider: str) -> float:
    """The temperature the original uses for a model of `provider` (0 for local models)."""
    return SOURCE_TEMPERATURE.get(provider, 0.0)


def system_prompt(width: int, height: int) -> str:
    """The system prompt for a canvas of width x height px (prompts/builders.py:16-23)."""
    return (
        "You are a surgical vision validator looking at ONE image on a fixed canvas.\n"
        'Return STRICT JSON only: {"name":"<organ>", "present":0|1, "point_canvas":[x,y] or null}\n'
        f"- Coordinates: origin=(0,0) is top-left of the CANVAS, x∈[0,{width - 1}], "
        f"y∈[0,{height - 1}], integers only.\n"
        "- present=1 ONLY if any visible part of the named structure is in view.\n"
        "- If present=1, point_canvas MUST be inside the structure; else use null.\n"
        "- No extra text or markdown."
    )


SYSTEM_PROMPT = system_prompt(768, 768)


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


# ---- the original's layout (`--compat source`) ---------------------------------------------------


def source_user_prompt(organ_name: str) -> str:
    """The original's user prompt: one line (prompts/builders.py:102-105)."""
    return (
        f'Organ: "{organ_name}". '
        f'Return exactly: {{"name":"{organ_name}", "present":0|1, "point_canvas":[x,y] or null}}'
    )


def source_answer(organ_name: str, present: int, point: Sequence[int] | None) -> str:
    """An example's response as the original writes it (no spaces; `null` without a point)."""
    where = f"[{point[0]},{point[1]}]" if point else "null"
    return f'{{"name":"{organ_name}","present":{present},"point_canvas":{where}}}'


def source_zero_shot_parts(organ_name: str, image: Part) -> tuple[Part, ...]:
    """The original's zero-shot user turn: the one-line prompt, then the image."""
    return (Part.of_text(source_user_prompt(organ_name)), image)


def source_few_shot_parts(
    organ_name: str, examples: Sequence[Example], image: Part
) -> tuple[Part, ...]:
    """The original's few-shot user turn (eval/pointing.py:74-103): a header, then per example
    `\nExample k: <user prompt>`, its image and `\nResponse: <answer>\n`, then
    `\nNow for the actual query: <user prompt>` and the image."""
    prompt = source_user_prompt(organ_name)
    parts: list[Part] = [Part.of_text("Here are some examples:\n")]
    for k, ex in enumerate(examples, start=1):
        parts += [
            Part.of_text(f"\nExample {k}: {prompt}"),
            ex.image,
            Part.of_text(f"\nResponse: {ex.answer}\n"),
        ]
    parts += [Part.of_text(f"\nNow for the actual query: {prompt}"), image]
    return tuple(parts)
