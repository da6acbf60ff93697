"""Questions about the largest or smallest object (AnyPoint point_qa_generator/size.py):
what_size_, list_attribute_size_, count_attribute_size_, where_size_. Size is the layout box's
volume, 8 * hx * hy * hz from the half-extents (m^3); the question says largest or smallest."""

from __future__ import annotations

import numpy as np

from support.evaluations.dynamic.candidates import (
    Pool,
    Task,
    attribute_values,
    draw_scene,
    make_options,
    make_task,
    name_task,
    names_of,
    random_attribute,
    ranked,
    values_question,
    values_task,
)
from support.evaluations.dynamic.scenes import clear_relation, false_relations


def volumes(objects: list[dict]) -> list[float]:
    """Each layout object's box volume, m^3 (size holds half-extents, metres)."""
    return [8 * o["size"][0] * o["size"][1] * o["size"][2] for o in objects]


def ranked_scene(
    pool: Pool, rng: np.random.Generator, kind: str
) -> tuple[tuple[dict, dict[str, str]], int] | None:
    """(scene, target): a scene of at least 2 objects and the index of its largest or smallest
    object (`kind`, clear by GAP); or None (redraw)."""
    scene = draw_scene(pool, rng, 2)
    if scene is None:
        return None
    target = ranked(volumes(scene[0]["objects"]), kind)
    return None if target is None else (scene, target)


def size(pool: Pool, rng: np.random.Generator, category: str) -> Task | None:
    """Asks "What is the {kind} object in the scene?" (its name) or "Where is the {kind} object
    in the scene with respect to the {reference}?" (its clear relation to a random other)."""
    kind = ("largest", "smallest")[int(rng.integers(2))]
    found = ranked_scene(pool, rng, kind)
    if found is None:
        return None
    (layout, assignment), target = found
    objects = layout["objects"]
    names = names_of(pool, assignment)
    target_name = names[objects[target]["name"]]
    if category.startswith("what_"):
        question = f"What is the {kind} object in the scene?"
        rest = [names[o["name"]] for i, o in enumerate(objects) if i != target]
        return name_task(pool, rng, category, layout, assignment, question, target_name,
                         rest, {target_name})  # fmt: skip
    others = [i for i in range(len(objects)) if i != target]
    ref = others[int(rng.integers(len(others)))]
    answer = clear_relation(objects[target]["position"], objects[ref]["position"])
    if answer is None:
        return None
    ref_name = names[objects[ref]["name"]]
    question = f"Where is the {kind} object in the scene with respect to the {ref_name}?"
    candidates = false_relations(objects[target]["position"], objects[ref]["position"])
    options = make_options(rng, answer, candidates)
    return make_task(pool, category, layout, assignment, question, answer, options)


def attribute_by_size(pool: Pool, rng: np.random.Generator, category: str) -> Task | None:
    """Asks "List all {attribute}s in the components of the {kind} object in the scene?" or "How
    many {attribute}s are in the components of the {kind} object in the scene?". The object is
    the largest (smallest) of all, by GAP; unlike the original, which ranks only the objects
    having the attribute, it must have the attribute itself."""
    kind = ("largest", "smallest")[int(rng.integers(2))]
    attribute = random_attribute(rng)
    found = ranked_scene(pool, rng, kind)
    if found is None:
        return None
    scene, target = found
    layout, assignment = scene
    asset = pool.assets[assignment[layout["objects"][target]["name"]]]
    subject = f"the {kind} object in the scene"
    question = values_question(category, attribute, subject, list_end="?")
    values = attribute_values(asset, attribute)
    return values_task(pool, rng, category, scene, question, attribute, values)
