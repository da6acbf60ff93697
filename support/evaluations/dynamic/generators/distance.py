"""Questions about the object closest to or farthest from a reference object (AnyPoint
point_qa_generator/distance.py): what_distance_*, where_distance_*, list_attribute_distance_*,
count_attribute_distance_*, each closest or farthest (the category's suffix)."""

from __future__ import annotations

import numpy as np

from support.evaluations.dynamic.candidates import (
    Pool,
    Task,
    attribute_values,
    by_distance,
    draw_scene,
    make_options,
    make_task,
    name_task,
    names_of,
    random_attribute,
    values_question,
    values_task,
)
from support.evaluations.dynamic.scenes import clear_relation, false_relations


def reference_and_target(
    pool: Pool, rng: np.random.Generator, min_objects: int, kind: str
) -> tuple[tuple[dict, dict[str, str]], int, int] | None:
    """(scene, ref, target): a scene of at least `min_objects` objects, a reference object
    drawn at random and the object closest to or farthest from it (`kind`, clear by GAP), as
    indices of the layout's objects; or None (redraw)."""
    scene = draw_scene(pool, rng, min_objects)
    if scene is None:
        return None
    objects = scene[0]["objects"]
    ref = int(rng.integers(len(objects)))
    target = by_distance(objects, ref, kind)
    return None if target is None else (scene, ref, target)


def distance(pool: Pool, rng: np.random.Generator, category: str) -> Task | None:
    """Asks "What is the object that is {kind} from the {reference}?" (its name) or "Where is
    the object that is {kind} from the {reference}?" (its clear relation to the reference)."""
    kind = category.rsplit("_", 1)[1]  # closest | farthest
    what = category.startswith("what_")
    found = reference_and_target(pool, rng, 3 if what else 2, kind)
    if found is None:
        return None
    (layout, assignment), ref, target = found
    objects = layout["objects"]
    ref_pos = objects[ref]["position"]
    names = names_of(pool, assignment)
    ref_name, target_name = names[objects[ref]["name"]], names[objects[target]["name"]]
    if what:
        question = f"What is the object that is {kind} from the {ref_name}?"
        rest = [names[o["name"]] for i, o in enumerate(objects) if i not in (ref, target)]
        return name_task(pool, rng, category, layout, assignment, question, target_name,
                         rest, {target_name, ref_name})  # fmt: skip
    answer = clear_relation(objects[target]["position"], ref_pos)
    if answer is None:
        return None
    question = f"Where is the object that is {kind} from the {ref_name}?"
    candidates = false_relations(objects[target]["position"], ref_pos)
    options = make_options(rng, answer, candidates)
    return make_task(pool, category, layout, assignment, question, answer, options)


def attribute_by_distance(pool: Pool, rng: np.random.Generator, category: str) -> Task | None:
    """Asks "List all {attribute}s in the components of the object {kind} from the
    {reference}." or "How many {attribute}s are in the components of the object {kind} from the
    {reference}?". The object is the closest (farthest) of all, by GAP; unlike the original,
    which ranks only the objects having the attribute, it must have the attribute itself."""
    kind = category.rsplit("_", 1)[1]  # closest | farthest
    attribute = random_attribute(rng)
    found = reference_and_target(pool, rng, 2, kind)
    if found is None:
        return None
    scene, ref, target = found
    layout, assignment = scene
    objects = layout["objects"]
    asset = pool.assets[assignment[objects[target]["name"]]]
    ref_name = pool.assets[assignment[objects[ref]["name"]]].name
    question = values_question(category, attribute, f"the object {kind} from the {ref_name}")
    values = attribute_values(asset, attribute)
    return values_task(pool, rng, category, scene, question, attribute, values)
