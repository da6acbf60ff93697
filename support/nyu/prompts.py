"""The source's prompt, verbatim (line breaks included). A request is one user turn: the marked
image first, then this text (no system prompt, temperature 0)."""

from __future__ import annotations

PROMPT = (
    "Estimate the 3D Euclidean distance in meters between\n"
    "the two marked points (A and B) in this indoor scene.\n"
    "\n"
    "Output ONLY a number in meters."
)
MAX_TOKENS = 64  # the answer is one number; room for a unit or a short hedge
