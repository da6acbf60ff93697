"""A whole evaluation outside the suite's packages: a search for failures in rounds.

The tests copy this module into a pytester folder and register it from a conftest.py
(`support.evaluations.register("rounds", "rounds_evaluation:SPEC")`), which proves the seam: a
new evaluation is a spec (options, settings) and a worker side, and no core file names it. Its
outcomes are right or wrong, so it writes no summary: the stock one
(support.contract.binary_summary:BINARY) reports accuracy per model.

Tasks are integers 0..N_TASKS-1; task t asks for (t * t) % 7. The `oracle` answers right; the
`chance` model draws the truth or a wrong number. Two sequences (`a` over even tasks, `b` over odd
ones) of `--rounds` rounds each are the pytest items `a-round-0`, `a-round-1`, ...: round 0
evaluates the first `--rounds-batch` tasks of its sequence; round k waits for round k-1 and picks
its tasks from the outcomes so far (`next_tasks`): the untested neighbours of each failure, in
order, then the smallest untested tasks. Each round yields one outcome per task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from support.contract.evaluation import CaseClient, Evaluation, EvaluationSpec, Option, OptionError
from support.settings import RunSettings
from support.types import Case, Part, Request, Verdict

N_TASKS = 40
SEQUENCES = {"a": range(0, N_TASKS, 2), "b": range(1, N_TASKS, 2)}


@dataclass(frozen=True)
class RoundsSettings:
    rounds: int = 3
    batch: int = 4


def configure(values: Mapping[str, Any], run: RunSettings) -> RoundsSettings:
    for flag, dest in (("--rounds", "rounds"), ("--rounds-batch", "rounds_batch")):
        if values[dest] < 1:
            raise OptionError(flag, f"{values[dest]}: expected a whole number >= 1")
    return RoundsSettings(rounds=values["rounds"], batch=values["rounds_batch"])


SPEC = EvaluationSpec(
    name="rounds",
    title="rounds (a search for failures in rounds; a unit-test evaluation)",
    evaluation="rounds_evaluation:RoundsEvaluation",
    # no summary module: the stock one (support.contract.binary_summary:BINARY), accuracy per model
    options=(
        Option("--rounds", type=int, default=3, metavar="R", help="rounds per sequence (3)"),
        Option("--rounds-batch", type=int, default=4, metavar="K", help="tasks per round (4)"),
    ),
    configure=configure,
)


@dataclass(frozen=True)
class TwoAnswers:
    """`chance`'s answers: the truth or the truth + 1, evenly."""

    truth: int

    def sample(self, rng: np.random.Generator) -> str:
        return str(self.truth + int(rng.integers(2)))


def truth(task: int) -> int:
    return (task * task) % 7


def next_tasks(pool: Sequence[int], history: Sequence[tuple[int, bool]], k: int) -> list[int]:
    """The next k tasks of a sequence from its (task, failed) history, in the order tested:
    the untested neighbours (in the pool) of each failure, then the smallest untested tasks."""
    tested = {t for t, _ in history}
    step = pool[1] - pool[0] if len(pool) > 1 else 1
    wanted = [n for t, failed in history if failed for n in (t + step, t - step)]
    wanted += list(pool)
    out: list[int] = []
    for t in wanted:
        if t in pool and t not in tested and t not in out:
            out.append(t)
    return out[:k]


class RoundsEvaluation(Evaluation):
    name: ClassVar[str] = "rounds"

    def __init__(self, settings: RoundsSettings) -> None:
        self.settings = settings

    @classmethod
    def load(cls, run: RunSettings, settings: RoundsSettings) -> RoundsEvaluation:
        return cls(settings)

    def cases(self) -> list[Case]:
        out = []
        for seq in SEQUENCES:
            for k in range(self.settings.rounds):
                after = f"{seq}-round-{k - 1}" if k else None
                params = {"sequence": seq, "round": k}
                out.append(Case(f"{seq}-round-{k}", self.name, params, after=after))
        return out

    def is_quick(self, case: Case) -> bool:
        return case.params["round"] < 2

    def locality(self, case: Case) -> str:
        return case.params["sequence"]  # a sequence runs in one process, in order

    async def evaluate(self, case: Case, client: CaseClient) -> list[Verdict]:
        seq = case.params["sequence"]
        history = [(o.extra["task"], o.status != "correct") for o in client.history]
        tasks = next_tasks(list(SEQUENCES[seq]), history, self.settings.batch)
        forks = [client.fork() for _ in tasks]
        answers = await asyncio.gather(
            *(fork.generate(self.request(t)) for fork, t in zip(forks, tasks, strict=True))
        )
        return [
            Verdict(
                status="correct" if a.text.strip() == str(truth(t)) else "wrong",
                scores={"correct": int(a.text.strip() == str(truth(t)))},
                prediction=a.text,
                target=truth(t),
                case_id=f"{case.id}-t{t:02d}",
                group={"sequence": seq},
                cluster=f"t{t:02d}",
                extra={"task": t},
                calls=fork.log,
            )
            for fork, t, a in zip(forks, tasks, answers, strict=True)
        ]

    @staticmethod
    def request(task: int) -> Request:
        return Request(
            parts=(Part.of_text(f"What is ({task} * {task}) mod 7? Answer with the number."),),
            max_tokens=4,
            target=str(truth(task)),
            answer_space=TwoAnswers(truth(task)),
        )
