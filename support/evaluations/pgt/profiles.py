"""What differs between pgt's two profiles, as values and functions: `WRITEUP` and `SOURCE`.

`configure` picks one (`PgtSettings.profile`) from `--compat`; the task calls its fields instead of
branching on the profile. The functions themselves live beside each other in the module of their
concern (dataset, phrases, answers; the summary's metrics in source_metrics.py); this module only
picks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from support.evaluations.pgt.answers import (
    Vote,
    majority_vote,
    majority_vote_source,
    read_label,
    read_label_source,
)
from support.evaluations.pgt.dataset import row_order, source_order
from support.evaluations.pgt.phrases import (
    FINAL_ANSWER_CUE,
    FINAL_ANSWER_CUE_SOURCE,
    instruction_version,
    instruction_version_source,
)
from support.settings import Compat


@dataclass(frozen=True)
class PgtProfile:
    """One profile's rules (see `WRITEUP` and `SOURCE` for each value)."""

    compat: Compat  # the profile's name, as --compat spells it
    case_params: Callable[[int], dict[str, Any]]  # image position -> added to its cases' params
    order: Callable[[int], list[int]]  # n CSV rows -> the evaluation order
    instruct: Callable[[str], str]  # phrase -> its instruction (phrases.build_prompt)
    seed: Callable[[int], int]  # --seed -> the seed of a stage-1 request with n > 1
    cue: str  # stage 2 continues the stage-1 prompt and the reasoning after it
    stage2_max_tokens: int
    # stage-2 text -> (label, the READ_RULES code of the rule that read it)
    read: Callable[[object], tuple[str | None, str]]
    vote: Callable[[Sequence[str | None]], Vote]  # the n labels -> the prediction
    source_files: bool  # the source's file names (layout.performance_name) for kept results


def _no_params(position: int) -> dict[str, Any]:
    """Nothing added: the write-up's cases carry no profile."""
    return {}


def _source_params(position: int) -> dict[str, Any]:
    """The profile (recorded in raw_results.jsonl; the summary reads `ctx.compat`) and the
    image's place in the source's order (the summary sorts the source's files by it)."""
    return {"compat": "source", "order": position}


def _run_seed(seed: int) -> int:
    """The run's --seed."""
    return seed


def _source_seed(seed: int) -> int:
    """The source's vLLM engine seed, 0 (helpers.py, LLM(seed=0)), whatever --seed says."""
    return 0


WRITEUP = PgtProfile(
    compat="writeup",
    case_params=_no_params,
    order=row_order,  # the CSV's own order
    instruct=instruction_version,  # "Let's ..." in any case or quote becomes "Please ..."
    seed=_run_seed,
    cue=FINAL_ANSWER_CUE,  # a blank line, then the answer phrase
    stage2_max_tokens=16,  # the label
    read=read_label,  # the first label word, synonyms and negations read
    vote=majority_vote,  # ties go to `real`
    source_files=False,  # performance_<ts>.json
)

# the original script, Zero-shot-PGT f42b715 (helpers.py, config.py)
SOURCE = PgtProfile(
    compat="source",
    case_params=_source_params,
    order=source_order,  # random.seed(0), shuffle (helpers.py:54-55)
    instruct=instruction_version_source,  # config.py get_phrase_instruction_version
    seed=_source_seed,
    cue=FINAL_ANSWER_CUE_SOURCE,  # " " + the answer phrase (helpers.py:432)
    stage2_max_tokens=512,  # its stage 2 calls its stage-1 generator with n=1
    read=read_label_source,  # its substring label rules
    vote=majority_vote_source,  # None is a candidate
    source_files=True,  # performance_fixed_<ts>.json (helpers.py:776)
)

PROFILES: dict[Compat, PgtProfile] = {"writeup": WRITEUP, "source": SOURCE}
