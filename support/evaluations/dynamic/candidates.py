"""What the question builders (generators/) share: the task record (Task), the objects indexed
for sampling (Pool), and the helpers that draw scenes, rank objects and compose options.

questions.py drives the builders (`generate`) and names the categories; the builders import this
module, never questions.py, so the two never import each other.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from support.evaluations.dynamic.assets import ATTRIBUTES, Asset
from support.evaluations.dynamic.scenes import random_layout

NUM_OPTIONS = 4
GAP = 1.15  # closest/farthest and largest/smallest: the runner-up differs by >= 15 %
MAX_ENUMERATED = 256  # list distractors: enumerate the value sets up to this many, else sample
MAX_RANDOM_OBJECTS = 6  # random layouts have 2..6 objects
# AnyPoint utils.py NUMBER_GENERATOR_CONFIGS: objects in the scene -> (kinds, how many of each)
COUNT_CONFIGS: dict[int, tuple[tuple[int, ...], ...]] = {
    3: ((1, 2),),
    4: ((1, 3),),
    5: ((1, 4), (2, 3)),
    6: ((1, 5), (2, 4), (1, 2, 3)),
    7: ((2, 5), (3, 4), (1, 2, 4)),
    8: ((3, 5), (1, 2, 5), (1, 3, 4)),
    9: ((4, 5), (1, 2, 6), (1, 3, 5), (2, 3, 4), (1, 2, 2, 4)),
}
_PLACEHOLDER = re.compile(r"\[([^\[\]]+)\]")


@dataclass(frozen=True)
class Task:
    """One candidate question about one scene (a layout with objects assigned to its places)."""

    key: str  # content hash of layout id, assignment, category and question (dedupe)
    category: str  # e.g. "where_distance_closest", "what_attribute_"
    question: str
    options: tuple[str, ...]  # NUM_OPTIONS distinct texts, shuffled, the answer among them once
    answer: str
    layout: dict
    assignment: dict[str, str]  # layout object name ("obj_0") -> object_id
    layout_description: str  # the description with [obj_i] replaced by object names


def evaluator_category(category: str) -> str:
    """The category as AnyPoint's dynamic evaluator writes it (`_infer_category`: no trailing "_"
    when there is no distance type, e.g. "what_attribute")."""
    return category[:-1] if category.endswith("_") else category


def describe(description: str, names: Mapping[str, str]) -> str:
    """description with each [placeholder] replaced by names[placeholder] (unknown ones kept)."""
    return _PLACEHOLDER.sub(lambda m: names.get(m.group(1), m.group(0)), description)


def task_key(layout_id: object, assignment: Mapping[str, str], category: str, question: str) -> str:
    """A stable content key: same layout, objects, category and question -> same key."""
    text = json.dumps([str(layout_id), sorted(assignment.items()), category, question])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


class Pool:
    """The assets, indexed once for cheap sampling."""

    def __init__(self, assets: Mapping[str, Asset], layouts: Sequence[dict] | None) -> None:
        if not assets:
            raise ValueError("assets: no objects to build scenes from")
        self.assets = assets
        by_name: dict[str, list[str]] = {}
        for object_id in sorted(assets):
            by_name.setdefault(assets[object_id].name, []).append(object_id)
        self.by_name = by_name
        self.names = sorted(by_name)
        self.values = {a: self._values(a) for a in ATTRIBUTES}  # attribute -> sorted values
        # (object_id, component index) with a value for the attribute, in id order
        self.with_attr = {
            a: [
                (oid, i)
                for oid in sorted(assets)
                for i, c in enumerate(assets[oid].components)
                if c.attribute(a)
            ]
            for a in ATTRIBUTES
        }
        # attribute -> the object ids with a value for it, in id order
        self.described = {
            a: list(dict.fromkeys(oid for oid, _ in self.with_attr[a])) for a in ATTRIBUTES
        }
        self.layouts = list(layouts) if layouts is not None else None

    def _values(self, attribute: str) -> list[str]:
        found = {c.attribute(attribute) for a in self.assets.values() for c in a.components}
        return sorted(v for v in found if v)

    def layout(self, rng: np.random.Generator, min_objects: int) -> dict | None:
        """A layout with >= min_objects objects: from the given ones, else a random one."""
        if self.layouts is None:
            return random_layout(
                rng, int(rng.integers(max(2, min_objects), MAX_RANDOM_OBJECTS + 1))
            )
        fit = [x for x in self.layouts if len(x["objects"]) >= min_objects]
        return fit[int(rng.integers(len(fit)))] if fit else None

    def distinct(
        self, rng: np.random.Generator, k: int, first: str | None = None
    ) -> list[str] | None:
        """k object ids with k different names (the first one `first` when given), or None."""
        names = [n for n in self.names if first is None or n != self.assets[first].name]
        need = k - (first is not None)
        if need > len(names):
            return None
        picked = [names[i] for i in rng.choice(len(names), need, replace=False)] if need else []
        ids = [self.by_name[n][int(rng.integers(len(self.by_name[n])))] for n in picked]
        return ([first] if first is not None else []) + ids


def make_options(
    rng: np.random.Generator, answer: str, candidates: Sequence[str]
) -> tuple[str, ...] | None:
    """The answer and NUM_OPTIONS - 1 distinct distractors drawn from candidates, shuffled."""
    pool = [c for c in dict.fromkeys(candidates) if c != answer]
    if len(pool) < NUM_OPTIONS - 1:
        return None
    picked = [pool[i] for i in rng.choice(len(pool), NUM_OPTIONS - 1, replace=False)]
    options = [answer, *picked]
    return tuple(options[i] for i in rng.permutation(NUM_OPTIONS))


def names_of(pool: Pool, assignment: Mapping[str, str]) -> dict[str, str]:
    return {slot: pool.assets[oid].name for slot, oid in assignment.items()}


def make_task(
    pool: Pool,
    category: str,
    layout: dict,
    assignment: dict[str, str],
    question: str,
    answer: str,
    options: tuple[str, ...] | None,
) -> Task | None:
    if options is None:
        return None
    return Task(
        key=task_key(layout["id"], assignment, category, question),
        category=category,
        question=question,
        options=options,
        answer=answer,
        layout=layout,
        assignment=assignment,
        layout_description=describe(layout["description"], names_of(pool, assignment)),
    )


def assign_objects(
    pool: Pool, rng: np.random.Generator, layout: dict, first: str | None = None
) -> dict | None:
    slots = [o["name"] for o in layout["objects"]]
    ids = pool.distinct(rng, len(slots), first)
    return None if ids is None else dict(zip(slots, ids, strict=True))


def scene_with(
    pool: Pool, rng: np.random.Generator, object_id: str
) -> tuple[dict, dict[str, str]] | None:
    """A layout of at least 2 objects with `object_id` at its first place (obj_0, as the
    original puts the asked object) and other objects in the rest, or None (redraw)."""
    layout = pool.layout(rng, 2)
    if layout is None:
        return None
    assignment = assign_objects(pool, rng, layout, first=object_id)
    return None if assignment is None else (layout, assignment)


def draw_scene(
    pool: Pool, rng: np.random.Generator, min_objects: int
) -> tuple[dict, dict[str, str]] | None:
    """A layout of at least `min_objects` objects with objects assigned to it, or None (redraw)."""
    layout = pool.layout(rng, min_objects)
    if layout is None:
        return None
    assignment = assign_objects(pool, rng, layout)
    return None if assignment is None else (layout, assignment)


def scene_first(
    rng: np.random.Generator, in_scene: Sequence[str], others: Sequence[str], exclude: set[str]
) -> list[str]:
    """Distractor candidates: the scene's first (as the original), then as many of `others`,
    drawn at random, as fill NUM_OPTIONS - 1; none of them in `exclude`."""
    scene = [n for n in dict.fromkeys(in_scene) if n not in exclude]
    need = NUM_OPTIONS - 1 - len(scene)
    if need <= 0:
        return scene
    rest = [n for n in dict.fromkeys(others) if n not in exclude and n not in scene]
    if len(rest) < need:
        return scene + rest
    return scene + [rest[i] for i in rng.choice(len(rest), need, replace=False)]


def distractor_names(
    pool: Pool, rng: np.random.Generator, in_scene: list[str], exclude: set[str]
) -> list[str]:
    """Scene objects' names first (as the original); other names only when fewer than needed."""
    return scene_first(rng, in_scene, pool.names, exclude)


def name_task(
    pool: Pool,
    rng: np.random.Generator,
    category: str,
    layout: dict,
    assignment: dict[str, str],
    question: str,
    answer: str,
    scene: list[str],
    exclude: set[str],
) -> Task | None:
    """A task whose answer is an object's name, distractors drawn from the scene first."""
    candidates = distractor_names(pool, rng, scene, exclude)
    options = make_options(rng, answer, candidates)
    return make_task(pool, category, layout, assignment, question, answer, options)


def ranked(values: list[float], kind: str) -> int | None:
    """Index of the smallest (kind closest/smallest) or largest value when it leads by GAP."""
    order = sorted(range(len(values)), key=values.__getitem__)
    if kind in ("closest", "smallest"):
        best = order[0]
        clear = len(order) == 1 or values[order[1]] >= GAP * values[best]
    else:
        best = order[-1]
        clear = len(order) == 1 or values[best] >= GAP * values[order[-2]]
    return best if clear else None


def by_distance(objects: Sequence[dict], ref: int, kind: str) -> int | None:
    """Index of the layout object closest to (kind "closest") or farthest from objects[ref],
    by the Euclidean distance of their positions (layout frame, metres), when clear (GAP)."""
    others = [i for i in range(len(objects)) if i != ref]
    ref_pos = objects[ref]["position"]
    dists = [
        sum((a - b) ** 2 for a, b in zip(objects[i]["position"], ref_pos, strict=True)) ** 0.5
        for i in others
    ]
    pick = ranked(dists, kind)
    return None if pick is None else others[pick]


def random_attribute(rng: np.random.Generator) -> str:
    """One of ATTRIBUTES, uniformly (the original's `rng.choice(ATTRIBUTES)`)."""
    return ATTRIBUTES[int(rng.integers(len(ATTRIBUTES)))]


def attribute_values(asset: Asset, attribute: str) -> list[str]:
    """The asset's distinct non-empty values of an attribute over its components, sorted."""
    return sorted({c.attribute(attribute) for c in asset.components} - {""})


def list_text(values: Iterable[str]) -> str:
    """A list answer as the original writes it: the values sorted, joined by ", "."""
    return ", ".join(sorted(values))


def value_sets(rng: np.random.Generator, values: Sequence[str], k: int) -> list[str]:
    """List texts of k of `values` (sorted, distinct): all of them when there are at most
    MAX_ENUMERATED, else 4 * NUM_OPTIONS random draws (no rng use when enumerating)."""
    if k > len(values):
        return []
    if math.comb(len(values), k) <= MAX_ENUMERATED:
        return [", ".join(c) for c in itertools.combinations(sorted(values), k)]
    draws = [rng.choice(len(values), k, replace=False) for _ in range(4 * NUM_OPTIONS)]
    return [list_text(values[int(i)] for i in draw) for draw in draws]


def count_candidates(count: int, scene_counts: Sequence[int] = ()) -> list[str]:
    """Count distractors: other scene objects' counts first, then the nearest other
    non-negative numbers (+1, -1, +2, -2, ...) until there are NUM_OPTIONS - 1, as the original."""
    found = [c for c in dict.fromkeys(scene_counts) if c != count]
    offset = 1
    while len(found) < NUM_OPTIONS - 1:
        for c in (count + offset, count - offset):
            if c >= 0 and c not in found and len(found) < NUM_OPTIONS - 1:
                found.append(c)
        offset += 1
    return [str(c) for c in found]


def values_question(category: str, attribute: str, subject: str, list_end: str = ".") -> str:
    """The original's list_* question "List all {attribute}s in the components of {subject}"
    (ending in `list_end`: "." or "?" as each original generator writes it) or its count_*
    question "How many {attribute}s are in the components of {subject}?", by category."""
    if category.startswith("list_"):
        return f"List all {attribute}s in the components of {subject}{list_end}"
    return f"How many {attribute}s are in the components of {subject}?"


def values_task(
    pool: Pool,
    rng: np.random.Generator,
    category: str,
    scene: tuple[dict, dict[str, str]],
    question: str,
    attribute: str,
    values: Sequence[str],
    scene_values: Sequence[Sequence[str]] = (),
) -> Task | None:
    """A list_* task (answer: the values' list text; distractors: `scene_values`' lists first,
    then same-size sets of the attribute's values, each differing as a set from the answer) or a
    count_* task (answer: how many values; distractors per count_candidates), by category."""
    layout, assignment = scene
    if not values:
        return None
    if category.startswith("list_"):
        answer = list_text(values)
        firsts = [list_text(v) for v in scene_values if v]
        others = value_sets(rng, pool.values[attribute], len(values))
        candidates = scene_first(rng, firsts, others, {answer})
    else:
        answer = str(len(values))
        candidates = count_candidates(len(values), [len(v) for v in scene_values if v])
    options = make_options(rng, answer, candidates)
    return make_task(pool, category, layout, assignment, question, answer, options)
