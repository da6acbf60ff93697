"""The dynamic evaluation's tasks: assets, layouts, scene assembly, questions, rendering."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from support.evaluations.dynamic.assets import (
    OBJECTS,
    Asset,
    build_assets,
    ensure_assets,
    read_assets,
)
from support.evaluations.dynamic.questions import CATEGORIES, evaluator_category, generate
from support.evaluations.dynamic.render import render
from support.evaluations.dynamic.scenes import assemble, random_layout, read_layouts, write_layouts

# The test's own reading of the six directional relations: (axis, sign of target - reference).
# Frame: Y up, +x "to the right of", +z "in front of" (AnyPoint layout_generator/constants.py
# RELATION_DIRECTIONS: "in front of" (0, 1) = +z, "to the right of" (1, 0) = +x).
AXES = {
    "to the right of": (0, 1),
    "to the left of": (0, -1),
    "above": (1, 1),
    "below": (1, -1),
    "in front of": (2, 1),
    "behind": (2, -1),
}


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Asset]:
    return read_assets(build_assets(tmp_path_factory.mktemp("assets")))


@pytest.fixture(scope="module")
def tasks(assets: dict[str, Asset]) -> list:
    return generate(np.random.default_rng(11), assets, 100 * len(CATEGORIES))  # 100 each


def names_in(task, assets) -> dict[str, str]:
    return {slot: assets[oid].name for slot, oid in task.assignment.items()}


def slot_named(task, assets, name: str) -> dict:
    slots = [s for s, n in names_in(task, assets).items() if n == name]
    assert len(slots) == 1, f"{name!r} is not unique in the scene"
    return next(o for o in task.layout["objects"] if o["name"] == slots[0])


def volume(obj: dict) -> float:
    return float(np.prod(obj["size"]) * 8)


# --- assets ---------------------------------------------------------------------------------------


def test_assets_round_trip(tmp_path: Path) -> None:
    folder = build_assets(tmp_path / "a", seed=3)
    rows = [json.loads(x) for x in (folder / "metadata.jsonl").read_text().splitlines()]
    assets = read_assets(folder)
    assert len(assets) == len(rows) == len(OBJECTS) >= 12
    for row in rows:
        ((object_id, data),) = row.items()
        asset = assets[object_id]
        assert asset.name == data["object"]
        assert [vars(c) for c in asset.components] == data["components"]
        cloud = asset.load_points()
        assert cloud.dtype == np.float32 and cloud.shape[1] == 6 and len(cloud) > 1000
        assert cloud[:, 3:].min() >= 0 and cloud[:, 3:].max() <= 1
        assert np.array_equal(cloud, np.load(folder / f"{object_id}.npy"))
    # every component is its own colour/material/shape: at least 4 values of each attribute
    for attribute in ("material", "color", "shape", "texture"):
        values = {getattr(c, attribute) for a in assets.values() for c in a.components}
        assert len(values) >= 4, attribute


def test_same_seed_same_files(tmp_path: Path) -> None:
    one, two = build_assets(tmp_path / "1", seed=5), build_assets(tmp_path / "2", seed=5)
    for path in sorted(one.iterdir()):
        assert path.read_bytes() == (two / path.name).read_bytes(), path.name


def test_ensure_assets_builds_once(tmp_path: Path) -> None:
    first = ensure_assets(tmp_path)
    assert first.parent == tmp_path / "synthetic" and first.name.startswith("dynamic-assets-")
    stamp = (first / "metadata.jsonl").stat().st_mtime_ns
    assert ensure_assets(tmp_path) == first
    assert (first / "metadata.jsonl").stat().st_mtime_ns == stamp


def test_xyz_only_cloud_gets_zero_colours(tmp_path: Path) -> None:
    (tmp_path / "metadata.jsonl").write_text(
        json.dumps({"o1": {"object": "rock", "components": []}})
    )
    np.save(tmp_path / "o1.npy", np.random.default_rng(0).random((50, 3)))
    cloud = read_assets(tmp_path)["o1"].load_points()
    assert cloud.shape == (50, 6) and not cloud[:, 3:].any()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"metadata\.jsonl:2: not valid JSON"),
        ('{"o2": {"components": []}}', r"metadata\.jsonl:2: o2: field 'object'"),
        (
            '{"o2": {"object": "cup", "components": [{"name": "body", "color": 3}]}}',
            r"metadata\.jsonl:2: o2: components\[0\]\.color",
        ),
        (
            '{"o3": {"object": "cup", "components": []}}',
            r"metadata\.jsonl:2: o3: its point cloud .*o3\.npy",
        ),
    ],
)
def test_bad_metadata_names_file_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    good = json.dumps({"o1": {"object": "rock", "components": []}})
    (tmp_path / "metadata.jsonl").write_text(good + "\n" + line + "\n")
    for name in ("o1", "o2"):
        np.save(tmp_path / f"{name}.npy", np.zeros((4, 6), np.float32))
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        read_assets(tmp_path)


def test_bad_cloud_shape_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "metadata.jsonl").write_text(json.dumps({"o1": {"object": "rock"}}))
    np.save(tmp_path / "o1.npy", np.zeros((4, 2), np.float32))
    with pytest.raises(ValueError, match=r"o1\.npy: expected a point cloud of shape"):
        read_assets(tmp_path)


# --- layouts --------------------------------------------------------------------------------------


def test_random_layouts_stand_apart_on_the_floor() -> None:
    rng = np.random.default_rng(0)
    for n in (2, 3, 6):
        for _ in range(20):
            layout = random_layout(rng, n)
            objs = layout["objects"]
            assert [o["name"] for o in objs] == [f"obj_{i}" for i in range(n)]
            for o in objs:
                assert o["position"][1] == pytest.approx(o["size"][1])  # resting on y = 0
            for i, a in enumerate(objs):
                for b in objs[i + 1 :]:
                    gap = math.dist(a["position"][::2], b["position"][::2])
                    assert gap > math.hypot(*a["size"][::2]) + math.hypot(*b["size"][::2])
            assert len(layout["relations"]) == n - 1
            assert re.findall(r"\[(obj_\d+)\]", layout["description"])


def test_layouts_json_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    layouts = [random_layout(rng, n) for n in (2, 4, 6)]
    path = write_layouts(layouts, tmp_path / "layouts.json")
    assert read_layouts(path) == layouts


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda item: item["objects"][0].update(size=[1, 1]),
            r"item 1 \(id 'b'\): objects\[0\]\.size",
        ),
        (
            lambda item: item["objects"][1].update(size=[1, 0, 1]),
            r"item 1 \(id 'b'\): objects\[1\]\.size: half-extents",
        ),
        (
            lambda item: item["objects"][0].pop("position"),
            r"item 1 \(id 'b'\): objects\[0\]\.position",
        ),
        (lambda item: item.pop("id"), r"item 1: field 'id'"),
        (
            lambda item: item["relations"].append({"subject": "obj_0"}),
            r"item 1 \(id 'b'\): relations\[1\]",
        ),
    ],
)
def test_bad_layout_names_file_item_and_field(tmp_path: Path, edit, message: str) -> None:
    rng = np.random.default_rng(2)
    items = [random_layout(rng, 2), random_layout(rng, 2)]
    items[0]["id"], items[1]["id"] = "a", "b"
    edit(items[1])
    path = tmp_path / "layouts.json"
    path.write_text(json.dumps(items))
    with pytest.raises(ValueError, match=r"layouts\.json: " + message):
        read_layouts(path)


def test_layouts_json_syntax_error_names_line(tmp_path: Path) -> None:
    path = tmp_path / "layouts.json"
    path.write_text('[\n{"id": 1,\n}\n]')
    with pytest.raises(ValueError, match=r"layouts\.json: not valid JSON \(line 3"):
        read_layouts(path)


# --- scene assembly -------------------------------------------------------------------------------


def test_assemble_by_hand(tmp_path: Path) -> None:
    # The 8 corners of [0, 2] x [0, 1] x [0, 1]: normalised to [-0.5, 0.5]^3 per axis, scaled by
    # size * 2, turned 90 degrees about Y with AnyPoint base.py's matrix [[c,0,s],[0,1,0],[-s,0,c]]
    # (x' = z, z' = -x), then moved: corner (2, 0, 0) -> (0.5, -0.5, -0.5) -> (1, -0.5, -0.25)
    # -> (-0.25, -0.5, -1) -> + (3, 0.5, -2) = (2.75, 0, -3).
    corners = np.array([[x, y, z] for x in (0, 2) for y in (0, 1) for z in (0, 1)], float)
    (tmp_path / "metadata.jsonl").write_text(json.dumps({"c": {"object": "brick"}}))
    np.save(tmp_path / "c.npy", corners)
    layout = {
        "id": 0,
        "description": "",
        "objects": [
            {"name": "obj_0", "position": [3, 0.5, -2], "rotation": 90, "size": [1, 0.5, 0.25]}
        ],
        "relations": [],
    }
    scene = assemble(layout, {"obj_0": read_assets(tmp_path)["c"]})
    assert scene.shape == (8, 6) and scene.dtype == np.float64  # the generator's dtype
    assert np.allclose(scene[4, :3], [2.75, 0.0, -3.0], atol=1e-6)  # corners[4] = (2, 0, 0)
    assert np.allclose(scene[:, :3].min(0), [2.75, 0, -3]) and np.allclose(
        scene[:, :3].max(0), [3.25, 1, -1]
    )


def test_assemble_puts_each_object_inside_its_box(assets: dict[str, Asset]) -> None:
    rng = np.random.default_rng(4)
    ids = sorted(assets)
    for _ in range(5):
        layout = random_layout(rng, 5)
        chosen = {o["name"]: assets[ids[int(rng.integers(len(ids)))]] for o in layout["objects"]}
        scene = assemble(layout, chosen)
        start = 0
        for obj in layout["objects"]:
            count = len(chosen[obj["name"]].load_points())
            part = scene[start : start + count, :3].astype(float)
            start += count
            a = math.radians(obj["rotation"])
            turn = np.array(
                [[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]]
            )
            local = (part - obj["position"]) @ turn / obj["size"]  # back to the unit box, [-1, 1]
            assert np.abs(local).max() <= 1 + 1e-4
            assert np.allclose(np.abs(local).max(axis=0), 1, atol=1e-4)  # and it fills the box
        assert start == len(scene)
    assert len(assemble(layout, chosen, n_points=1001)) == 1001


# --- questions ------------------------------------------------------------------------------------


def test_every_category_gets_its_share(tasks) -> None:
    counts = {c: sum(t.category == c for t in tasks) for c in CATEGORIES}
    assert counts == dict.fromkeys(CATEGORIES, 100)
    assert len({t.key for t in tasks}) == len(tasks)
    assert evaluator_category("what_attribute_") == "what_attribute"
    assert evaluator_category("where_distance_closest") == "where_distance_closest"


def test_four_distinct_options_with_the_answer_once(tasks) -> None:
    for t in tasks:
        assert len(t.options) == 4 and len(set(t.options)) == 4, t
        assert t.options.count(t.answer) == 1, t
        assert "[" not in t.layout_description and t.layout_description


def test_answers_sit_anywhere(tasks) -> None:
    positions = {t.options.index(t.answer) for t in tasks}
    assert positions == {0, 1, 2, 3}


def _reference(task, assets) -> dict:
    name = re.search(r"(?:from|respect to) the (.+)\?$", task.question).group(1)
    return slot_named(task, assets, name)


def _target(task, assets) -> dict:
    objs = task.layout["objects"]
    if "_distance_" in task.category:
        ref = _reference(task, assets)
        others = [o for o in objs if o is not ref]
        dist = [math.dist(o["position"], ref["position"]) for o in others]
        order = np.argsort(dist)
        best, runner = (
            (order[0], order[1:2]) if "closest" in task.category else (order[-1], order[-2:-1])
        )
        for r in runner:  # a clear winner: >= 15 % apart
            assert max(dist[best], dist[r]) >= 1.15 * min(dist[best], dist[r]) - 1e-9
        return others[best]
    vols = [volume(o) for o in objs]
    order = np.argsort(vols)
    best, runner = (order[-1], order[-2]) if "largest" in task.question else (order[0], order[1])
    assert max(vols[best], vols[runner]) >= 1.15 * min(vols[best], vols[runner]) - 1e-9
    return objs[best]


def test_what_answers_match_the_geometry(tasks, assets) -> None:
    for t in tasks:
        names = names_in(t, assets)
        if t.category.startswith(("what_distance", "what_size")):
            assert names[_target(t, assets)["name"]] == t.answer, t.question
        elif t.category == "count_object_":
            asked = re.fullmatch(r"How many (.+) in the scene\?", t.question).group(1)
            assert str(list(names.values()).count(asked)) == t.answer
        elif t.category == "what_attribute_":
            attr, part, obj = re.fullmatch(
                r"What is the (\w+) of the (.+) in the (.+)\?", t.question
            ).groups()
            asset = next(assets[i] for s, i in t.assignment.items() if names[s] == obj)
            assert {getattr(c, attr) for c in asset.components if c.name == part} == {t.answer}
            assert names["obj_0"] == obj


def test_where_answers_are_clear_and_distractors_false(tasks, assets) -> None:
    where = [t for t in tasks if t.category.startswith("where_")]
    assert len(where) == 300
    for t in where:
        delta = np.subtract(_target(t, assets)["position"], _reference(t, assets)["position"])
        size = np.sort(np.abs(delta))[::-1]
        axis, sign = AXES[t.answer]
        assert sign * delta[axis] == size[0] and size[0] >= 1.5 * size[1], t.question
        for option in t.options:
            if option != t.answer:
                axis, sign = AXES[option]  # only directional relations are offered
                assert sign * delta[axis] <= 0.25 * size[0], (t.question, option, delta)


def test_same_seed_same_tasks(assets) -> None:
    def run(seed: int) -> list:
        return [
            (t.key, t.options, t.answer) for t in generate(np.random.default_rng(seed), assets, 120)
        ]

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_given_layouts_are_used(assets, tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    layouts = read_layouts(
        write_layouts([random_layout(rng, n) for n in (3, 4, 5)], tmp_path / "l.json")
    )
    got = generate(np.random.default_rng(0), assets, 40, layouts=layouts)
    assert {t.layout["id"] for t in got} <= {x["id"] for x in layouts}


def test_impossible_category_says_which(assets) -> None:
    two = dict(list(assets.items())[:2])  # two names: no 3-object scene of distinct objects
    with pytest.raises(ValueError, match="what_distance_closest: only 0 of 5"):
        generate(
            np.random.default_rng(0), two, 5, categories=["what_distance_closest"], max_tries=20
        )
    with pytest.raises(ValueError, match="unknown"):
        generate(np.random.default_rng(0), assets, 5, categories=["what_colour"])


# --- rendering ------------------------------------------------------------------------------------


def test_render_empty_is_white() -> None:
    image = np.asarray(render(np.zeros((0, 6), np.float32), size=64))
    assert image.shape == (64, 64, 3) and (image == 255).all()


def test_render_draws_objects_where_the_camera_text_says(assets) -> None:
    ball = next(a for a in assets.values() if a.name == "ball")  # red
    mug = next(a for a in assets.values() if a.name == "mug")  # mostly blue
    objects = [
        {"name": "obj_0", "position": [3, 0.5, 0], "rotation": 0, "size": [0.5, 0.5, 0.5]},  # right
        {"name": "obj_1", "position": [-3, 0.5, 0], "rotation": 0, "size": [0.5, 0.5, 0.5]},  # left
    ]
    layout = {"id": "t", "description": "", "objects": objects, "relations": []}
    image = np.asarray(render(assemble(layout, {"obj_0": ball, "obj_1": mug}), size=256)).astype(
        int
    )
    red = (image[..., 0] > 150) & (image[..., 1] < 90) & (image[..., 2] < 90)
    blue = (image[..., 2] > 150) & (image[..., 0] < 90)
    assert red.sum() > 200 and blue.sum() > 200
    assert np.nonzero(red)[1].mean() > 128 > np.nonzero(blue)[1].mean()  # +x is to the right
    # +z (in front) is nearer the camera and lower in the image
    objects[0]["position"], objects[1]["position"] = [0, 0.5, 3], [0, 0.5, -3]
    image = np.asarray(render(assemble(layout, {"obj_0": ball, "obj_1": mug}), size=256)).astype(
        int
    )
    red = (image[..., 0] > 150) & (image[..., 1] < 90) & (image[..., 2] < 90)
    blue = (image[..., 2] > 150) & (image[..., 0] < 90)
    assert np.nonzero(red)[0].mean() > np.nonzero(blue)[0].mean()
    assert red.sum() > blue.sum()  # nearer looks larger
