"""The planted answer to a dynamic task: right, or a wrong option where a PlantedRule fails it.

The rule itself (`pattern=rate` parts over the category names of questions.CATEGORIES, first match
wins) lives in support/backends/planted.py, beside the `planted:RULE` reference model; it is
re-exported here. Whether a task fails is a deterministic draw from (seed, task key), so the same
task fails in every run and under every strategy of a search.
"""

from __future__ import annotations

from support.backends.planted import PlantedRule, stable_uniform
from support.evaluations.dynamic.questions import Task

__all__ = ["PlantedRule", "planted_answer"]


def planted_answer(task: Task, rule: PlantedRule, seed: int = 0) -> str:
    """The correct option, or, when the rule fails the task, a wrong option picked from
    (seed, key). A task with no wrong option gets a text that is none of its options."""
    if not rule.fails(task.category, task.key, seed):
        return task.answer
    wrong = [option for option in task.options if option != task.answer]
    if not wrong:
        return "none of the options"
    return wrong[int(stable_uniform("wrong", seed, task.key) * len(wrong))]
