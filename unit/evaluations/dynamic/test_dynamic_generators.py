"""The dynamic evaluation's nineteen categories: AnyPoint's fifteen generator types, and the
answers of the list, count and frequency ones recomputed from the layout and the objects'
metadata (support/evaluations/dynamic/questions.py, generators/)."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from support.evaluations.dynamic.assets import Asset, Component, build_assets, read_assets
from support.evaluations.dynamic.questions import CATEGORIES, generate

# AnyPoint point_qa_generator/generator.py:35-58 (`self.generators`, in this order); the distance
# generators take distance_type closest or farthest (distance.py:17-20), the others none, and a
# task's category is f"{generator_type}_{distance_type or ''}" (generator.py:249).
ANYPOINT_GENERATORS = [
    ("what_distance", ("closest", "farthest")),
    ("where_distance", ("closest", "farthest")),
    ("list_attribute_distance", ("closest", "farthest")),
    ("count_attribute_distance", ("closest", "farthest")),
    ("what_attribute", ("",)),
    ("list_attribute", ("",)),
    ("count_attribute", ("",)),
    ("count_object", ("",)),
    ("frequent_object", ("",)),
    ("list_attribute_frequent", ("",)),
    ("count_attribute_frequent", ("",)),
    ("what_size", ("",)),
    ("list_attribute_size", ("",)),
    ("count_attribute_size", ("",)),
    ("where_size", ("",)),
]
ATTRIBUTE = r"(material|color|shape|texture)"  # AnyPoint utils.py:10 ATTRIBUTES
# The question f-strings of the new generators, as patterns (groups: attribute, then the subject)
QUESTIONS = {
    # distance.py:302
    "list_attribute_distance": rf"List all {ATTRIBUTE}s in the components of the object "
    r"(closest|farthest) from the (.+)\.",
    # distance.py:415
    "count_attribute_distance": rf"How many {ATTRIBUTE}s are in the components of the object "
    r"(closest|farthest) from the (.+)\?",
    # attribute.py:156
    "list_attribute": rf"List all {ATTRIBUTE}s in the components of the (.+)\.",
    # attribute.py:265
    "count_attribute": rf"How many {ATTRIBUTE}s are in the components of the (.+)\?",
    # number.py:190 (no attribute)
    "frequent_object": r"What is the (most|least) frequent object in the scene\?",
    # number.py:298
    "list_attribute_frequent": rf"List all {ATTRIBUTE}s in the components of the "
    r"(most|least) frequent object in the scene\?",
    # number.py:424
    "count_attribute_frequent": rf"How many {ATTRIBUTE}s are in the components of the "
    r"(most|least) frequent object in the scene\?",
    # size.py:169
    "list_attribute_size": rf"List all {ATTRIBUTE}s in the components of the "
    r"(largest|smallest) object in the scene\?",
    # size.py:265
    "count_attribute_size": rf"How many {ATTRIBUTE}s are in the components of the "
    r"(largest|smallest) object in the scene\?",
}
NEW = [c for c in CATEGORIES if c.rstrip("_").removesuffix("_closest").removesuffix("_farthest")
       in QUESTIONS]  # fmt: skip


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Asset]:
    return read_assets(build_assets(tmp_path_factory.mktemp("assets")))


@pytest.fixture(scope="module")
def tasks(assets: dict[str, Asset]) -> list:
    """The default: every category from the 13 procedural objects and random layouts."""
    return generate(np.random.default_rng(21), assets, 1000)


def generator_type(category: str) -> str:
    return category.rstrip("_").removesuffix("_closest").removesuffix("_farthest")


def values(asset: Asset, attribute: str) -> set[str]:
    """The test's own reading: the distinct non-empty values of the attribute over components."""
    return {getattr(c, attribute) for c in asset.components if getattr(c, attribute)}


def items(text: str) -> list[str]:
    return text.split(", ")


def in_slot(task, assets, slot: str) -> Asset:
    return assets[task.assignment[slot]]


def slot_named(task, assets, name: str) -> dict:
    slots = [s for s, oid in task.assignment.items() if assets[oid].name == name]
    assert len(slots) == 1, f"{name!r} is not unique in the scene"
    return next(o for o in task.layout["objects"] if o["name"] == slots[0])


def clear_best(scores: list[float], smallest: bool) -> int:
    """The index of the smallest (largest) score, checked to lead the runner-up by 15 %."""
    order = sorted(range(len(scores)), key=scores.__getitem__)
    best, runner = (order[0], order[1:2]) if smallest else (order[-1], order[-2:-1])
    for r in runner:
        low, high = sorted((scores[best], scores[r]))
        assert high >= 1.15 * low - 1e-9, scores
    return best


def subject(task, assets, groups: tuple[str, ...]) -> tuple[Asset, list[Asset]]:
    """The object the question asks about, recomputed from the layout and the assignment, and
    the other kinds of object in the scene."""
    kind = generator_type(task.category)
    objects = task.layout["objects"]
    if kind in ("list_attribute", "count_attribute"):
        asked = in_slot(task, assets, "obj_0")  # the asked object at obj_0 (attribute.py:147)
        assert asked.name == groups[-1]
    elif kind.endswith("_distance"):
        ref = slot_named(task, assets, groups[-1])
        others = [o for o in objects if o is not ref]
        dist = [math.dist(o["position"], ref["position"]) for o in others]
        asked = in_slot(task, assets, others[clear_best(dist, groups[1] == "closest")]["name"])
    elif kind.endswith("_size"):
        vols = [float(np.prod(o["size"]) * 8) for o in objects]  # half-extents -> box, m^3
        asked = in_slot(task, assets, objects[clear_best(vols, groups[-1] == "smallest")]["name"])
    else:  # frequent: by how many places each kind of object fills
        counts = Counter(assets[oid].name for oid in task.assignment.values())
        pick = max if groups[-1] == "most" else min
        best = pick(counts.values())
        assert list(counts.values()).count(best) == 1, counts  # a unique most/least
        name = next(n for n, c in counts.items() if c == best)
        asked = next(assets[oid] for oid in task.assignment.values() if assets[oid].name == name)
    rest = {assets[oid].name: assets[oid] for oid in task.assignment.values()}
    rest.pop(asked.name)
    return asked, list(rest.values())


def test_categories_are_anypoints_in_its_order() -> None:
    expected = [f"{g}_{d}" for g, kinds in ANYPOINT_GENERATORS for d in kinds]
    assert list(CATEGORIES) == expected
    assert len(CATEGORIES) == 19 and len(NEW) == 11


def test_a_default_pool_holds_every_category(tasks) -> None:
    # generate splits n evenly, the first categories taking the remainder: 1000 = 19 * 52 + 12
    counts = Counter(t.category for t in tasks)
    assert counts == {c: 52 + (i < 12) for i, c in enumerate(CATEGORIES)}
    assert len({t.key for t in tasks}) == len(tasks) == 1000
    for t in tasks:
        assert len(t.options) == 4 and len(set(t.options)) == 4, t
        assert t.options.count(t.answer) == 1, t


@pytest.mark.parametrize("category", NEW)
def test_question_forms(tasks, category: str) -> None:
    mine = [t for t in tasks if t.category == category]
    assert mine
    pattern = QUESTIONS[generator_type(category)]
    for t in mine:
        match = re.fullmatch(pattern, t.question)
        assert match, t.question
        if category.endswith(("_closest", "_farthest")):
            assert match.group(2) == category.rsplit("_", 1)[1]
    if category.endswith("_"):  # the kind is in the question, not the name: both are asked
        kinds = {re.fullmatch(pattern, t.question).groups()[-1] for t in mine}
        if category not in ("list_attribute_", "count_attribute_"):
            assert len(kinds) == 2, kinds


def check_attribute_task(t, assets: dict[str, Asset]) -> None:
    """A list_* or count_* task's answer and distractors, recomputed from the scene."""
    groups = re.fullmatch(QUESTIONS[generator_type(t.category)], t.question).groups()
    attribute = groups[0]
    every = set().union(*(values(x, attribute) for x in assets.values()))
    asked, rest = subject(t, assets, groups)
    truth = values(asked, attribute)
    assert truth, t.question  # the object asked about has the attribute
    wrong = [o for o in t.options if o != t.answer]
    if t.category.startswith("list_"):
        assert t.answer == ", ".join(sorted(truth)), t.question
        scene_lists = [sorted(values(x, attribute)) for x in rest]
        for option in wrong:
            assert items(option) == sorted(set(items(option))), option  # sorted, distinct
            assert set(items(option)) <= every, option
            assert set(items(option)) != truth, option  # really wrong
            same_size = len(items(option)) == len(truth)
            assert same_size or items(option) in scene_lists, (t.question, option)
    else:
        assert t.answer == str(len(truth)), t.question
        for option in wrong:
            assert option.isdigit() and int(option) != len(truth), option


@pytest.mark.parametrize("category", [c for c in NEW if c != "frequent_object_"])
def test_attribute_answers_match_the_scene(tasks, assets, category: str) -> None:
    mine = [t for t in tasks if t.category == category]
    assert len(mine) >= 52
    for t in mine:
        check_attribute_task(t, assets)


def test_the_object_asked_about_is_the_closest_or_largest_of_all(assets, tmp_path: Path) -> None:
    # five objects without components: the closest (largest) object of a scene may lack the
    # attribute; the question is then drawn again, never asked of a runner-up that has it
    bare = {f"b{i}": Asset(f"b{i}", f"blank{i}", (), tmp_path / f"b{i}.npy") for i in range(5)}
    mixed = {**assets, **bare}
    kinds = [c for c in NEW if "_distance_" in c or c.endswith("_size_")]
    got = generate(np.random.default_rng(5), mixed, 40 * len(kinds), categories=kinds)
    assert any(mixed[oid].name.startswith("blank") for t in got for oid in t.assignment.values())
    for t in got:
        check_attribute_task(t, mixed)


def test_many_values_are_sampled_not_enumerated(tmp_path: Path) -> None:
    # 30 colours, three a object: C(30, 3) = 4060 sets, more than are enumerated
    colours = [f"colour{i:02d}" for i in range(30)]

    def parts(i: int) -> tuple[Component, ...]:
        return tuple(
            Component(f"part{j}", "wood", colours[(3 * i + j) % 30], "cuboid", "matte")
            for j in range(3)
        )

    assets = {
        f"o{i}": Asset(f"o{i}", f"thing{i}", parts(i), tmp_path / f"o{i}.npy") for i in range(10)
    }
    got = generate(np.random.default_rng(2), assets, 60, categories=["list_attribute_"])
    assert any(len(items(t.answer)) == 3 for t in got)
    for t in got:
        check_attribute_task(t, assets)
        assert len({frozenset(items(o)) for o in t.options}) == 4


def test_frequent_object_answers_match_the_scene(tasks, assets) -> None:
    names = {a.name for a in assets.values()}
    for t in (t for t in tasks if t.category == "frequent_object_"):
        groups = re.fullmatch(QUESTIONS["frequent_object"], t.question).groups()
        asked, rest = subject(t, assets, groups)
        assert t.answer == asked.name
        assert set(t.options) <= names
        # the scene's other kinds first (number.py:194-213)
        assert {x.name for x in rest} <= set(t.options)


def test_a_category_without_material_says_which(tmp_path: Path) -> None:
    bare = {
        f"o{i}": Asset(f"o{i}", f"thing{i}", (), tmp_path / f"o{i}.npy") for i in range(8)
    }  # no components: nothing to list or count
    with pytest.raises(ValueError, match="list_attribute_: only 0 of 5"):
        generate(np.random.default_rng(0), bare, 5, categories=["list_attribute_"], max_tries=5)
    with pytest.raises(ValueError, match="count_attribute_size_: only 0 of 5"):
        generate(
            np.random.default_rng(0), bare, 5, categories=["count_attribute_size_"], max_tries=5
        )
    # the other kinds need no attributes
    got = generate(np.random.default_rng(0), bare, 6, categories=["frequent_object_"])
    assert len(got) == 6
