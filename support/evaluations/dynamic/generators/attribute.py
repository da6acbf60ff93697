"""Questions about one object's component attributes (AnyPoint point_qa_generator/attribute.py):
what_attribute_, list_attribute_, count_attribute_. The asked object stands at obj_0 of a random
layout, as in the original."""

from __future__ import annotations

import numpy as np

from support.evaluations.dynamic.candidates import (
    Pool,
    Task,
    attribute_values,
    make_options,
    make_task,
    random_attribute,
    scene_with,
    values_question,
    values_task,
)


def what_attribute(pool: Pool, rng: np.random.Generator, category: str) -> Task | None:
    """Asks "What is the {attribute} of the {component} in the {object}?" (one part's value)."""
    attribute = random_attribute(rng)
    pairs = pool.with_attr[attribute]
    if not pairs:
        return None
    object_id, index = pairs[int(rng.integers(len(pairs)))]
    asset = pool.assets[object_id]
    component = asset.components[index]
    answer = component.attribute(attribute)
    same_name = {c.attribute(attribute) for c in asset.components if c.name == component.name}
    if len(same_name) > 1:  # two parts of one name disagree: the question has no single answer
        return None
    scene = scene_with(pool, rng, object_id)
    if scene is None:
        return None
    question = f"What is the {attribute} of the {component.name} in the {asset.name}?"
    options = make_options(rng, answer, pool.values[attribute])
    return make_task(pool, category, *scene, question, answer, options)


def attribute_of(pool: Pool, rng: np.random.Generator, category: str) -> Task | None:
    """Asks "List all {attribute}s in the components of the {object}." (list_attribute_) or
    "How many {attribute}s are in the components of the {object}?" (count_attribute_)."""
    attribute = random_attribute(rng)
    described = pool.described[attribute]
    if not described:
        return None
    object_id = described[int(rng.integers(len(described)))]
    asset = pool.assets[object_id]
    scene = scene_with(pool, rng, object_id)
    if scene is None:
        return None
    question = values_question(category, attribute, f"the {asset.name}")
    values = attribute_values(asset, attribute)
    return values_task(pool, rng, category, scene, question, attribute, values)
