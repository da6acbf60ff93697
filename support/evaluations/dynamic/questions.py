"""Multiple-choice questions about generated 3D scenes: the dynamic evaluation's candidate tasks.

Categories follow AnyPoint's naming `f"{generator_type}_{distance_type or ''}"` (point_qa_generator/
generator.py, the tasks.jsonl writer): the size generators' largest/smallest lives in `size_type`,
which the name leaves out, so `what_size_` covers both (the question says which). Question texts
are the original generators'. Unlike the original, an unclear scene is regenerated (closest and
farthest, largest and smallest need a >= 15 % gap; a relation's axis must dominate, see
scenes.clear_relation), where_* distractors are only relations false in the scene, and no option
repeats the answer. No point cloud is built here: a task is cheap; scenes.assemble builds it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from support.evaluations.dynamic.assets import ATTRIBUTES, Asset
from support.evaluations.dynamic.scenes import clear_relation, false_relations, random_layout

CATEGORIES: tuple[str, ...] = (
    "what_attribute_",
    "count_object_",
    "what_distance_closest",
    "what_distance_farthest",
    "where_distance_closest",
    "where_distance_farthest",
    "what_size_",
    "where_size_",
)
NUM_OPTIONS = 4
GAP = 1.15  # closest/farthest and largest/smallest: the runner-up differs by >= 15 %
MIN_OBJECTS = {"count_object_": 3, "what_distance_closest": 3, "what_distance_farthest": 3}
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


class _Pool:
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


def _options(
    rng: np.random.Generator, answer: str, candidates: Sequence[str]
) -> tuple[str, ...] | None:
    """The answer and NUM_OPTIONS - 1 distinct distractors drawn from candidates, shuffled."""
    pool = [c for c in dict.fromkeys(candidates) if c != answer]
    if len(pool) < NUM_OPTIONS - 1:
        return None
    picked = [pool[i] for i in rng.choice(len(pool), NUM_OPTIONS - 1, replace=False)]
    options = [answer, *picked]
    return tuple(options[i] for i in rng.permutation(NUM_OPTIONS))


def _names_of(pool: _Pool, assignment: Mapping[str, str]) -> dict[str, str]:
    return {slot: pool.assets[oid].name for slot, oid in assignment.items()}


def _make(
    pool: _Pool,
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
        layout_description=describe(layout["description"], _names_of(pool, assignment)),
    )


def _assign(
    pool: _Pool, rng: np.random.Generator, layout: dict, first: str | None = None
) -> dict | None:
    slots = [o["name"] for o in layout["objects"]]
    ids = pool.distinct(rng, len(slots), first)
    return None if ids is None else dict(zip(slots, ids, strict=True))


def _scene(
    pool: _Pool, rng: np.random.Generator, min_objects: int
) -> tuple[dict, dict[str, str]] | None:
    """A layout of at least `min_objects` objects with objects assigned to it, or None (redraw)."""
    layout = pool.layout(rng, min_objects)
    if layout is None:
        return None
    assignment = _assign(pool, rng, layout)
    return None if assignment is None else (layout, assignment)


def _distractor_names(
    pool: _Pool, rng: np.random.Generator, in_scene: list[str], exclude: set[str]
) -> list[str]:
    """Scene objects' names first (as the original); other names only when fewer than needed."""
    scene = [n for n in dict.fromkeys(in_scene) if n not in exclude]
    need = NUM_OPTIONS - 1 - len(scene)
    if need <= 0:
        return scene
    others = [n for n in pool.names if n not in exclude and n not in scene]
    if len(others) < need:
        return scene + others
    return scene + [others[i] for i in rng.choice(len(others), need, replace=False)]


def _name_task(
    pool: _Pool,
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
    candidates = _distractor_names(pool, rng, scene, exclude)
    return _make(pool, category, layout, assignment, question, answer,
                 _options(rng, answer, candidates))  # fmt: skip


# --- one builder per generator; each returns None to reject (the caller draws again) ---------


def _what_attribute(pool: _Pool, rng: np.random.Generator, category: str) -> Task | None:
    attribute = ATTRIBUTES[int(rng.integers(len(ATTRIBUTES)))]
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
    layout = pool.layout(rng, 2)
    if layout is None:
        return None
    assignment = _assign(
        pool, rng, layout, first=object_id
    )  # the asked object at obj_0, as the original
    if assignment is None:
        return None
    question = f"What is the {attribute} of the {component.name} in the {asset.name}?"
    options = _options(rng, answer, pool.values[attribute])
    return _make(pool, category, layout, assignment, question, answer, options)


def _count_object(pool: _Pool, rng: np.random.Generator, category: str) -> Task | None:
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
    target = int(rng.integers(len(kinds)))
    name, count = pool.assets[kinds[target]].name, counts[target]
    question = f"How many {name} in the scene?"
    nearby = [count + d for d in (-2, -1, 1, 2) if count + d >= 0]
    candidates = [str(c) for c in counts] + [str(c) for c in nearby]
    return _make(
        pool,
        category,
        layout,
        assignment,
        question,
        str(count),
        _options(rng, str(count), candidates),
    )


def _ranked(values: list[float], kind: str) -> int | None:
    """Index of the smallest (kind closest/smallest) or largest value when it leads by GAP."""
    order = sorted(range(len(values)), key=values.__getitem__)
    if kind in ("closest", "smallest"):
        best = order[0]
        clear = len(order) == 1 or values[order[1]] >= GAP * values[best]
    else:
        best = order[-1]
        clear = len(order) == 1 or values[best] >= GAP * values[order[-2]]
    return best if clear else None


def _distance(pool: _Pool, rng: np.random.Generator, category: str) -> Task | None:
    kind = category.rsplit("_", 1)[1]  # closest | farthest
    what = category.startswith("what_")
    scene = _scene(pool, rng, 3 if what else 2)
    if scene is None:
        return None
    layout, assignment = scene
    objects = layout["objects"]
    ref = int(rng.integers(len(objects)))
    others = [i for i in range(len(objects)) if i != ref]
    ref_pos = objects[ref]["position"]
    dists = [
        sum((a - b) ** 2 for a, b in zip(objects[i]["position"], ref_pos, strict=True)) ** 0.5
        for i in others
    ]
    pick = _ranked(dists, kind)
    if pick is None:
        return None
    target = others[pick]
    names = _names_of(pool, assignment)
    ref_name, target_name = names[objects[ref]["name"]], names[objects[target]["name"]]
    if what:
        question = f"What is the object that is {kind} from the {ref_name}?"
        scene = [names[objects[i]["name"]] for i in others if i != target]
        return _name_task(pool, rng, category, layout, assignment, question, target_name,
                          scene, {target_name, ref_name})  # fmt: skip
    answer = clear_relation(objects[target]["position"], ref_pos)
    if answer is None:
        return None
    question = f"Where is the object that is {kind} from the {ref_name}?"
    candidates = false_relations(objects[target]["position"], ref_pos)
    return _make(
        pool, category, layout, assignment, question, answer, _options(rng, answer, candidates)
    )


def _size(pool: _Pool, rng: np.random.Generator, category: str) -> Task | None:
    kind = ("largest", "smallest")[int(rng.integers(2))]
    scene = _scene(pool, rng, 2)
    if scene is None:
        return None
    layout, assignment = scene
    objects = layout["objects"]
    volumes = [8 * o["size"][0] * o["size"][1] * o["size"][2] for o in objects]  # box volume, m^3
    target = _ranked(volumes, kind)
    if target is None:
        return None
    names = _names_of(pool, assignment)
    target_name = names[objects[target]["name"]]
    if category.startswith("what_"):
        question = f"What is the {kind} object in the scene?"
        scene = [names[o["name"]] for i, o in enumerate(objects) if i != target]
        return _name_task(pool, rng, category, layout, assignment, question, target_name,
                          scene, {target_name})  # fmt: skip
    others = [i for i in range(len(objects)) if i != target]
    ref = others[int(rng.integers(len(others)))]
    answer = clear_relation(objects[target]["position"], objects[ref]["position"])
    if answer is None:
        return None
    ref_name = names[objects[ref]["name"]]
    question = f"Where is the {kind} object in the scene with respect to the {ref_name}?"
    candidates = false_relations(objects[target]["position"], objects[ref]["position"])
    return _make(
        pool, category, layout, assignment, question, answer, _options(rng, answer, candidates)
    )


_BUILDERS = {
    "what_attribute_": _what_attribute,
    "count_object_": _count_object,
    "what_distance_closest": _distance,
    "what_distance_farthest": _distance,
    "where_distance_closest": _distance,
    "where_distance_farthest": _distance,
    "what_size_": _size,
    "where_size_": _size,
}


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
    unknown = [c for c in chosen if c not in _BUILDERS]
    if unknown:
        raise ValueError(f"categories: unknown {unknown}; known: {list(CATEGORIES)}")
    if n < 0:
        raise ValueError(f"n: expected a non-negative count, got {n}")
    pool = _Pool(assets, layouts)
    tasks: list[Task] = []
    seen: set[str] = set()
    base, extra = divmod(n, len(chosen)) if chosen else (0, 0)
    for index, category in enumerate(chosen):
        want = base + (index < extra)
        build = _BUILDERS[category]
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
