"""What surgvqa asks the model, and what the reference models answer.

The challenge publishes no prompt (participants send the clip and the question to their own
systems), so both prompts are the suite's own, fixed, and recorded with every case's prompt hash.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from support.evaluations.surgvqa.bleu import tokens, yes_no, yes_no_truth
from support.evaluations.surgvqa.tools import TOOL_CLASSES

VQA_MAX_TOKENS = 128  # one sentence
BOX_MAX_TOKENS = 1024  # a JSON list of up to ~20 boxes
TEMPERATURE = 0.0


def vqa_prompt(question: str, n_frames: int) -> str:
    """The text after the clip's frames."""
    return (
        f"The {n_frames} images above are frames, in time order, sampled evenly from a clip of a "
        "robotic surgery video.\n"
        f"Question: {question}\n"
        "Answer the question in one short sentence. For a yes/no question, begin with Yes or No."
    )


def vqa_video_prompt(question: str, seconds: float, fps: float) -> str:
    """The text after the clip, when it is sent as one video (--surgvqa-input video)."""
    return (
        f"The video above is a {seconds:g}-second clip of a robotic surgery video, sampled at "
        f"{fps:g} frames per second.\n"
        f"Question: {question}\n"
        "Answer the question in one short sentence. For a yes/no question, begin with Yes or No."
    )


def box_prompt(width: int, height: int) -> str:
    """The text after the frame: every instrument as a labelled box in the frame's pixels."""
    classes = "; ".join(TOOL_CLASSES)
    return (
        f"This is a {width}x{height} pixel frame of a robotic surgery video. Find every surgical "
        f"instrument visible in it. Instrument classes: {classes}.\n"
        'Answer with only a JSON list, one item per instrument: {"label": <class name>, '
        '"bbox_2d": [x1, y1, x2, y2]}, where (x1, y1) is the top-left and (x2, y2) the '
        "bottom-right corner of the instrument's box in pixels (origin at the top-left of the "
        "image, x to the right, y down). Answer [] if no instrument is visible."
    )


def oracle_answer(references: Sequence[str]) -> str:
    """The answer a perfect model gives: the longest reference (4+ tokens reach BLEU 1.0), among
    those that open with the yes/no word when the references give one (so exact match holds)."""
    truth = yes_no_truth(references)
    pool = [r for r in references if truth is None or yes_no(r) == truth] or list(references)
    return max(pool, key=lambda r: len(tokens(r)))


@dataclass(frozen=True)
class VqaAnswerSpace:
    """`chance`'s answers: a yes/no sentence or a sentence naming a random tool."""

    def sample(self, rng: np.random.Generator) -> str:
        tool = TOOL_CLASSES[int(rng.integers(len(TOOL_CLASSES)))]
        choices = (
            "Yes.",
            "No.",
            f"Yes, a {tool} was used.",
            f"No, a {tool} was not used.",
            f"A {tool} is used in this clip.",
        )
        return choices[int(rng.integers(len(choices)))]


@dataclass(frozen=True)
class BoxAnswerSpace:
    """`chance`'s boxes: 0-3 boxes of random classes, uniform corners in the frame's pixels."""

    width: int
    height: int

    def sample(self, rng: np.random.Generator) -> str:
        items = []
        for _ in range(int(rng.integers(0, 4))):
            xs = np.sort(rng.uniform(0, self.width, 2))
            ys = np.sort(rng.uniform(0, self.height, 2))
            label = TOOL_CLASSES[int(rng.integers(len(TOOL_CLASSES)))]
            bbox = [round(float(v)) for v in (xs[0], ys[0], xs[1], ys[1])]
            items.append({"label": label, "bbox_2d": bbox})
        return json.dumps(items)
