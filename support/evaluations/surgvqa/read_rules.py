"""How surgvqa's answers were read (support.contract.provenance): its READ_RULES and the VQA codes.

A VQA answer is scored as the text it is ("text"); a yes/no question's answer is read by its
first word ("yes-no"; "not-yes-no" when it opens with neither: unparsable). A tool answer's code
is how its boxes were found (boxes.FORMS), then `@<frame>` when its numbers were read in a frame
other than the frame's pixels (`@norm1000`, `@gemini`, `@resized`): parse_boxes's `read_by`.
The codes are the same under both profiles (they differ in the summary only).
"""

from __future__ import annotations

from support.contract.provenance import ReadRule
from support.evaluations.surgvqa.boxes import FORMS, FRAMES_READ

_FRAME_MEANING = {
    "resized": "pixels of the frame as the model's processor resized it",
    "norm1000": "0-1000 across the frame",
    "gemini": "Gemini's box_2d, [ymin, xmin, ymax, xmax] in 0-1000",
}

VQA_READ_RULES = (
    ReadRule("text", "primary", "an open question's answer, scored as the text it is"),
    ReadRule("yes-no", "primary", "a yes/no question's answer opening with yes or no"),
    ReadRule("not-yes-no", "unread", "a yes/no question's answer opening with neither"),
    ReadRule("empty", "unread", "an empty answer"),
)
BOX_READ_RULES = (
    *(
        ReadRule(
            code if frame == "pixels" else f"{code}@{frame}",
            kind,  # type: ignore[arg-type]
            meaning if frame == "pixels" else f"{meaning}; {_FRAME_MEANING[frame]}",
        )
        for frame in FRAMES_READ
        for code, kind, meaning in FORMS
    ),
    ReadRule("none", "unread", "no list of boxes, or no usable box: unparsable"),
)
READ_RULES = (*VQA_READ_RULES, *BOX_READ_RULES)


def vqa_rule(answer: str, yes_no_question: bool, said: str | None) -> str:
    """The code of a VQA answer: `said` is the yes/no its first word gives (None: neither)."""
    if not answer.strip():
        return "empty"
    if not yes_no_question:
        return "text"
    return "yes-no" if said is not None else "not-yes-no"
