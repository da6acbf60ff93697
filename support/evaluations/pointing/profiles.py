"""What differs between pointing's two profiles, as values and functions: `WRITEUP` and `SOURCE`.

`configure` picks one (`PointingSettings.profile`) from `--compat`; the task calls its fields
instead of branching on the profile. The functions themselves live beside each other in the module
of their concern (prompts, parser, prepare, the evaluation's own methods); this module only picks.
It is imported at start-up (configure), so it imports only light modules: the heavy ones (the
data, preparation, the evaluation) are imported when a rule is called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from support.evaluations.pointing.parser import (
    PointingAnswer,
    parse_pointing,
    parse_pointing_source,
)
from support.evaluations.pointing.prompts import (
    MAX_TOKENS,
    SOURCE_MAX_TOKENS,
    Example,
    few_shot_parts,
    source_few_shot_parts,
    source_temperature,
    source_zero_shot_parts,
    temperature,
    zero_shot_parts,
)
from support.settings import Compat
from support.types import Part

if TYPE_CHECKING:
    from support.evaluations.pointing.dataset import CholecSeg8k
    from support.evaluations.pointing.prepare import Prepared


class ExampleSource(Protocol):
    """What a profile's `examples` asks of the evaluation (task.PointingEvaluation)."""

    def writeup_examples(
        self, plan: dict[str, list[int]], organ: int, condition: str
    ) -> list[Example]: ...

    def source_examples(self, plan: dict[str, list[int]], organ: int) -> list[Example]: ...

    def writeup_example_rows(
        self, plan: dict[str, list[int]], organ: int, condition: str
    ) -> list[int]: ...

    def source_example_rows(self, plan: dict[str, list[int]], organ: int) -> list[int]: ...


@dataclass(frozen=True)
class PointingProfile:
    """One profile's rules (see `WRITEUP` and `SOURCE` for each value)."""

    compat: Compat  # the profile's name, as --compat spells it
    case_params: Mapping[str, str]  # added to every case's params (recorded, not read)
    # the test rows and few-shot plans, made from the data when --pointing-prepared is not given:
    # (data, the dataset's data_info folder, number of test rows) -> Prepared
    prepare: Callable[[CholecSeg8k, Path, int], Prepared]
    # True: the frame letterboxed onto the 768x768 canvas (stored canvases and targets, the
    # letterbox's hit test); False: the frame itself is the canvas (row 0's size), sent as it is,
    # hit by the original's test
    letterbox: bool
    # (evaluation, the condition's plan for the organ, organ id, condition) -> few-shot examples
    examples: Callable[[ExampleSource, dict[str, list[int]], int, str], list[Example]]
    # the same, the examples' rows only (what the evaluation prepares before the run)
    example_rows: Callable[[ExampleSource, dict[str, list[int]], int, str], list[int]]
    zero_shot: Callable[[str, Part], tuple[Part, ...]]  # (organ name, image) -> user turn
    few_shot: Callable[[str, Sequence[Example], Part], tuple[Part, ...]]  # with examples first
    temperature: Callable[[str], float]  # the model's provider -> temperature
    max_tokens: int
    parse: Callable[[Any, tuple[int, int]], PointingAnswer]  # (answer text, canvas) -> answer
    failed_call_absent: bool  # a failed call (BackendError) scored as the answer "" (not an error)


def _prepare(ds: CholecSeg8k, folder: Path, n_test: int) -> Prepared:
    """Our own balanced selection and plans (prepare.prepare), in the dataset's folder."""
    from support.evaluations.pointing.prepare import prepare

    return prepare(ds, folder, n_test)


def _prepare_source(ds: CholecSeg8k, folder: Path, n_test: int) -> Prepared:
    """The original's files made by its rules (prepare.prepare_source), in `source/` below it."""
    from support.evaluations.pointing.prepare import prepare_source

    return prepare_source(ds, folder / "source", n_test)


def _examples(
    ev: ExampleSource, plan: dict[str, list[int]], organ: int, condition: str
) -> list[Example]:
    """PointingEvaluation.writeup_examples."""
    return ev.writeup_examples(plan, organ, condition)


def _example_rows(
    ev: ExampleSource, plan: dict[str, list[int]], organ: int, condition: str
) -> list[int]:
    """PointingEvaluation.writeup_example_rows."""
    return ev.writeup_example_rows(plan, organ, condition)


def _source_example_rows(
    ev: ExampleSource, plan: dict[str, list[int]], organ: int, condition: str
) -> list[int]:
    """PointingEvaluation.source_example_rows."""
    return ev.source_example_rows(plan, organ)


def _source_examples(
    ev: ExampleSource, plan: dict[str, list[int]], organ: int, condition: str
) -> list[Example]:
    """PointingEvaluation.source_examples (the condition only picks the plan)."""
    return ev.source_examples(plan, organ)


WRITEUP = PointingProfile(
    compat="writeup",
    case_params={},
    prepare=_prepare,
    letterbox=True,
    examples=_examples,  # positive, easy negative, [hard or near-miss negative], true points
    example_rows=_example_rows,
    zero_shot=zero_shot_parts,
    few_shot=few_shot_parts,
    temperature=temperature,  # 0
    max_tokens=MAX_TOKENS,  # 256
    parse=parse_pointing,  # the write-up's parser (JSON, JSON in text, then a regex)
    failed_call_absent=False,  # a failed call is an `error` outcome
)

# the original's main script, eval_pointing_original_size.py
SOURCE = PointingProfile(
    compat="source",
    case_params={"compat": "source"},  # recorded in raw_results.jsonl; the summary reads ctx.compat
    prepare=_prepare_source,  # presence at >= 50 px, seeds 42/43/45 (prepare_fewshot_examples.py)
    letterbox=False,  # the native frame, lossless, hit at int(canvas px) (pointing_metrics.py:277)
    # every positive showing the organ with the canvas-centre placeholder point, every easy and
    # hard negative, no near miss (eval/evaluator.py prepare_few_shot_examples, :238)
    examples=_source_examples,
    example_rows=_source_example_rows,
    zero_shot=source_zero_shot_parts,  # its one-line user prompt
    few_shot=source_few_shot_parts,  # its few-shot text
    temperature=source_temperature,  # per provider: openai 1.0, anthropic/google 0.1, else 0
    max_tokens=SOURCE_MAX_TOKENS,  # 100 for every model (eval/evaluator.py:93-159)
    parse=parse_pointing_source,  # eval/parser.py:35-78; never unparsable
    failed_call_absent=True,  # its adapters return "" after their retries
)

PROFILES: dict[Compat, PointingProfile] = {"writeup": WRITEUP, "source": SOURCE}
