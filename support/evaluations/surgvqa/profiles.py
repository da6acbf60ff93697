"""What differs between surgvqa's two profiles: `WRITEUP` and `SOURCE`.

`configure` picks one (`SurgvqaSettings.profile`) from `--compat`. The differences are all in the
summary, which reads the profile from `SummaryContext.compat`: map_video_mean as the official
category-1 evaluator computes it (support.evaluations.surgvqa.coco.official_inputs), and the 2026
VQA scorer's edge cases as the official category-2 evaluator has them (an empty answer's BERTScore
and NLI, softmax overflow: support.evaluations.surgvqa.semantic); evals/surgvqa/README.md. The task
adds `case_params` to the tool cases' params, so raw_results.jsonl records the profile.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from support.settings import Compat


@dataclass(frozen=True)
class SurgvqaProfile:
    """One profile's rules (see `WRITEUP` and `SOURCE` for each value)."""

    compat: Compat  # the profile's name, as --compat spells it
    case_params: Mapping[str, str]  # added to every tool case's params (recorded, not read)


WRITEUP = SurgvqaProfile(compat="writeup", case_params={})
# the official category-1 evaluator's map_video_mean (the summary)
SOURCE = SurgvqaProfile(compat="source", case_params={"compat": "source"})

PROFILES: dict[Compat, SurgvqaProfile] = {"writeup": WRITEUP, "source": SOURCE}
