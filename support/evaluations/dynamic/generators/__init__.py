"""The question builders, one module per AnyPoint generator file (point_qa_generator/distance.py,
attribute.py, number.py, size.py). A builder takes (pool, rng, category) and returns a Task, or
None to reject the draw (generate draws again)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from support.evaluations.dynamic.candidates import Pool, Task
from support.evaluations.dynamic.generators.attribute import attribute_of, what_attribute
from support.evaluations.dynamic.generators.distance import attribute_by_distance, distance
from support.evaluations.dynamic.generators.number import count_object, frequent
from support.evaluations.dynamic.generators.size import attribute_by_size, size

Builder = Callable[[Pool, np.random.Generator, str], Task | None]

BUILDERS: dict[str, Builder] = {
    "what_distance_closest": distance,
    "what_distance_farthest": distance,
    "where_distance_closest": distance,
    "where_distance_farthest": distance,
    "list_attribute_distance_closest": attribute_by_distance,
    "list_attribute_distance_farthest": attribute_by_distance,
    "count_attribute_distance_closest": attribute_by_distance,
    "count_attribute_distance_farthest": attribute_by_distance,
    "what_attribute_": what_attribute,
    "list_attribute_": attribute_of,
    "count_attribute_": attribute_of,
    "count_object_": count_object,
    "frequent_object_": frequent,
    "list_attribute_frequent_": frequent,
    "count_attribute_frequent_": frequent,
    "what_size_": size,
    "list_attribute_size_": attribute_by_size,
    "count_attribute_size_": attribute_by_size,
    "where_size_": size,
}
