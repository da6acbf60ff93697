"""Questions about how often objects occur (AnyPoint point_qa_generator/number.py): count_object_,
frequent_object_, list_attribute_frequent_, count_attribute_frequent_. A scene holds 2 to 4 kinds
of object, each several times, in the counts COUNT_CONFIGS allows for its number of places."""

from __future__ import annotations

import numpy as np

from support.evaluations.dynamic.candidates import (
    COUNT_CONFIGS,
    Pool,
    Task,
    attribute_values,
    make_options,
    make_task,
    name_task,
    random_attribute,
    values_question,
    values_task,
)


def counted_scene(
    pool: Pool, rng: np.random.Generator
) -> tuple[dict, dict[str, str], list[str], list[int]] | None:
    """(layout, assignment, kinds, counts): a layout of 3..9 places filled by len(kinds)
    distinct objects, kinds[i] in counts[i] places (a COUNT_CONFIGS split, shuffled), or None."""
    layout = pool.layout(rng, 3)
    if layout is None or len(layout["objects"]) not in COUNT_CONFIGS:
        return None
    configs = COUNT_CONFIGS[len(layout["objects"])]
    counts = list(configs[int(rng.integers(len(configs)))])
    counts = [counts[i] for i in rng.permutation(len(counts))]
    kinds = pool.distinct(rng, len(counts))
    if kinds is None:
        return None
    slots = iter(o["name"] for o in layout["objects"])
    assignment = {next(slots): oid for oid, k in zip(kinds, counts, strict=True) for _ in range(k)}
    return layout, assignment, kinds, counts


def count_object(pool: Pool, rng: np.random.Generator, category: str) -> Task | None:
    """Asks "How many {object} in the scene?"."""
    drawn = counted_scene(pool, rng)
    if drawn is None:
        return None
    layout, assignment, kinds, counts = drawn
    target = int(rng.integers(len(kinds)))
    name, count = pool.assets[kinds[target]].name, counts[target]
    question = f"How many {name} in the scene?"
    nearby = [count + d for d in (-2, -1, 1, 2) if count + d >= 0]
    candidates = [str(c) for c in counts] + [str(c) for c in nearby]
    options = make_options(rng, str(count), candidates)
    return make_task(pool, category, layout, assignment, question, str(count), options)


def frequent(pool: Pool, rng: np.random.Generator, category: str) -> Task | None:
    """Asks about the most or least frequent object (the question says which): "What is the
    {kind} frequent object in the scene?" (its name), "List all {attribute}s in the components
    of the {kind} frequent object in the scene?" or "How many {attribute}s are in the components
    of the {kind} frequent object in the scene?". Its count must be unique in the scene."""
    kind = ("most", "least")[int(rng.integers(2))]
    attribute = None if category == "frequent_object_" else random_attribute(rng)
    drawn = counted_scene(pool, rng)
    if drawn is None:
        return None
    layout, assignment, kinds, counts = drawn
    best = counts.index(max(counts) if kind == "most" else min(counts))
    if counts.count(counts[best]) > 1:  # a tie: no single most (least) frequent object
        return None
    assets = [pool.assets[oid] for oid in kinds]
    target, rest = assets[best], [a for i, a in enumerate(assets) if i != best]
    if attribute is None:
        question = f"What is the {kind} frequent object in the scene?"
        return name_task(pool, rng, category, layout, assignment, question, target.name,
                         [a.name for a in rest], {target.name})  # fmt: skip
    subject = f"the {kind} frequent object in the scene"
    question = values_question(category, attribute, subject, list_end="?")
    values = attribute_values(target, attribute)
    scene_values = [
        attribute_values(a, attribute) for a in rest
    ]  # first distractors, as the original
    return values_task(pool, rng, category, (layout, assignment), question, attribute, values,
                       scene_values)  # fmt: skip
