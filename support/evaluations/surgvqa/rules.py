"""What differs between surgvqa's two profiles: `WRITEUP` and `SOURCE`.

`configure` picks one (`SurgvqaSettings.rules`) from `--compat`. The only difference is in the
summary (map_video_mean as the official category-1 evaluator computes it,
support.evaluations.surgvqa.coco.official_inputs; evals/surgvqa/README.md), which reads the profile
from `SummaryContext.compat`; the task adds `case_params` to the tool cases' params, so
raw_results.jsonl records the profile.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from support.settings import Compat


@dataclass(frozen=True)
class SurgvqaRules:
    """One profile's rules (see `WRITEUP` and `SOURCE` for each value)."""

    compat: Compat  # the profile's name, as --compat spells it
    case_params: Mapping[str, str]  # added to every tool case's params (recorded, not read)


WRITEUP = SurgvqaRules(compat="writeup", case_params={})
# the official category-1 evaluator's map_video_mean (the summary)
SOURCE = SurgvqaRules(compat="source", case_params={"compat": "source"})

PROFILES: dict[Compat, SurgvqaRules] = {"writeup": WRITEUP, "source": SOURCE}
