"""Multiple-choice questions about generated 3D scenes: the dynamic evaluation's candidate tasks.

All fifteen of AnyPoint's generator types (point_qa_generator/: distance.py, attribute.py,
number.py, size.py), as nineteen categories named as its tasks.jsonl writer names them,
`f"{generator_type}_{distance_type or ''}"` (generator.py:249): the distance generators'
closest/farthest is in the name, the size generators' largest/smallest and the frequency
generators' most/least are not (`what_size_`, `frequent_object_`: the question says which).
Question texts and answer forms are the original generators': an object name, a relation, a
number, or a list "metal, wood" (the object's distinct values of one attribute, sorted, joined
with ", "). The builders live in generators/ (one module per original file), what they share in
candidates.py (Task, Pool, option helpers); this module holds the categories and `generate`.

Unlike the original, an unclear scene is regenerated: closest and farthest, largest and smallest
need a >= 15 % gap (GAP); the list_/count_attribute_distance and _size questions rank all objects
and their winner must have the attribute asked (the original ranks only those having it, so its
"closest object" may not be the closest); most and least frequent must be unique; a relation's
axis must dominate (scenes.clear_relation). where_* distractors are only relations false in the
scene, list distractors differ as sets from the answer, count distractors are other numbers, and
no option repeats the answer. No point cloud is built here: a task is cheap; scenes.assemble
builds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from support.evaluations.dynamic.assets import Asset
from support.evaluations.dynamic.candidates import Pool, Task, evaluator_category
from support.evaluations.dynamic.generators import BUILDERS

__all__ = ["CATEGORIES", "Task", "evaluator_category", "generate"]

# AnyPoint's generator order (generator.py:35-58, `self.generators`), closest before farthest
CATEGORIES: tuple[str, ...] = (
    "what_distance_closest",
    "what_distance_farthest",
    "where_distance_closest",
    "where_distance_farthest",
    "list_attribute_distance_closest",
    "list_attribute_distance_farthest",
    "count_attribute_distance_closest",
    "count_attribute_distance_farthest",
    "what_attribute_",
    "list_attribute_",
    "count_attribute_",
    "count_object_",
    "frequent_object_",
    "list_attribute_frequent_",
    "count_attribute_frequent_",
    "what_size_",
    "list_attribute_size_",
    "count_attribute_size_",
    "where_size_",
)


def generate(
    rng: np.random.Generator,
    assets: Mapping[str, Asset],
    n: int,
    categories: Sequence[str] | None = None,
    layouts: Sequence[dict] | None = None,
    max_tries: int = 100,
) -> list[Task]:
    """n distinct candidate tasks spread evenly over categories (the first ones get the remainder),
    in an order shuffled by rng. Scenes come from `layouts` (read_layouts) when given, else from
    scenes.random_layout. Same rng state -> same tasks. A category that cannot produce its share
    within max_tries draws per task raises a ValueError naming it.
    """
    chosen = list(CATEGORIES if categories is None else categories)
    unknown = [c for c in chosen if c not in CATEGORIES]
    if unknown:
        raise ValueError(f"categories: unknown {unknown}; known: {list(CATEGORIES)}")
    if n < 0:
        raise ValueError(f"n: expected a non-negative count, got {n}")
    pool = Pool(assets, layouts)
    tasks: list[Task] = []
    seen: set[str] = set()
    base, extra = divmod(n, len(chosen)) if chosen else (0, 0)
    for index, category in enumerate(chosen):
        want = base + (index < extra)
        build = BUILDERS[category]
        got, tries = 0, 0
        while got < want:
            tries += 1
            if tries > max_tries * want:
                raise ValueError(
                    f"{category}: only {got} of {want} tasks after {tries - 1} draws; the objects "
                    "or layouts give too few clear, distinct questions of this kind"
                )
            task = build(pool, rng, category)
            if task is None or task.key in seen:
                continue
            seen.add(task.key)
            tasks.append(task)
            got += 1
    return [tasks[i] for i in rng.permutation(len(tasks))]
