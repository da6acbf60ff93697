"""The prompts. A request is one user turn: the marked image first, then the text.

`PROMPT` is the seed write-up's (the default, `--compat writeup`), with its line breaks; the
model gets temperature 0. `source_prompt` is what the original script sends
(ukataria/IronsiteHackathon eval/nyu_distance/eval_nyu_distance.py, `query_vlm_distance`): the
pixel positions of A and B and the "MUST provide" rules, with at most 10 tokens back and the
provider's default temperature (1.0 for both of the original's providers, OpenAI and Anthropic).
"""

from __future__ import annotations

PROMPT = (
    "Estimate the 3D Euclidean distance in meters between\n"
    "the two marked points (A and B) in this indoor scene.\n"
    "\n"
    "Output ONLY a number in meters."
)
MAX_TOKENS = 64  # the answer is one number; room for a unit or a short hedge
TEMPERATURE = 0.0

SOURCE_MAX_TOKENS = 10
SOURCE_TEMPERATURE = 1.0  # the original sets none: OpenAI's and Anthropic's default is 1.0


def prompt(point1: tuple[int, int], point2: tuple[int, int]) -> str:
    """The write-up's prompt: PROMPT, the same for every pair (the crosses mark the points)."""
    return PROMPT


def source_prompt(point1: tuple[int, int], point2: tuple[int, int]) -> str:
    """The original's prompt for A at `point1` and B at `point2`, (u, v) = (column, row) px."""
    (u1, v1), (u2, v2) = point1, point2
    return "\n".join(
        [
            "You are analyzing an indoor scene image with two points marked:",
            f"- Point A (red cross) at pixel position ({u1}, {v1})",
            f"- Point B (blue cross) at pixel position ({u2}, {v2})",
            "",
            "TASK: Estimate the 3D Euclidean distance in meters between the two marked points.",
            "",
            "CRITICAL REQUIREMENTS:",
            "- You MUST provide a numeric estimate - refusal is not acceptable",
            "- Consider depth, perspective, and typical indoor object sizes",
            "- Base your estimate on visual cues in the image",
            "- This is a real indoor scene captured with RGB-D camera",
            "",
            "OUTPUT FORMAT:",
            "- Respond with ONLY a single number in meters",
            "- NO explanations, NO refusals, NO disclaimers",
            "- Just the number",
            '- Examples: "1.5" or "0.8" or "2.3"',
            "",
            "Your distance estimate in meters (number only):",
        ]
    )
