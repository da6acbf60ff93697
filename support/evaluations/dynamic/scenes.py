"""Scene layouts in AnyPoint's `layouts.json` format, spatial relations, and scene assembly.

A layout item: `{"id", "description": "The [obj_0] is on the [obj_1]...", "objects": [{"name":
"obj_0", "position": [x, y, z], "rotation": degrees, "size": [hx, hy, hz]}], "relations":
[{"subject", "relation", "reference"}]}`. Frame: metres, Y up, +z is "in front of" (towards the
viewer), +x is "to the right of"; `position` is the centre of the object's box, `size` its
half-extents in the object's own frame, `rotation` a turn about +Y in degrees (x turns towards -z).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from support.evaluations.dynamic.assets import Asset

# The six relations with a crisp geometric reading: (axis index, sign of target - reference).
DIRECTIONAL: dict[str, tuple[int, int]] = {
    "to the right of": (0, 1),
    "to the left of": (0, -1),
    "above": (1, 1),
    "below": (1, -1),
    "in front of": (2, 1),
    "behind": (2, -1),
}
# AnyPoint layout_generator/constants.py VALID_RELATIONS, in its order (14 relations)
VALID_RELATIONS: tuple[str, ...] = (
    "in front of",
    "behind",
    "to the left of",
    "to the right of",
    "beside",
    "next to",
    "near",
    "far from",
    "on",
    "above",
    "below",
    "under",
    "surrounding",
    "at the center of",
)
DOMINANCE = 1.5  # a relation is clear when its axis' |delta| is >= 1.5 x every other axis' |delta|
FALSE_SLACK = 0.25  # a directional relation is false when its signed delta <= 0.25 x the largest
FLOOR_BOUNDS = 4.0  # random layouts: centres within [-4, 4] m in x and z
GAP = 0.2  # random layouts: minimum clearance between footprint circles, metres
MAX_METRES = 1e4  # layouts read: |position| and half-extents at most this, metres (no 1e308)


def relation_between(target: Sequence[float], reference: Sequence[float]) -> str:
    """The original's rule: the relation on the axis of largest |target - reference|, the first
    axis on a tie.

    AnyPoint point_qa_generator/utils.py calculate_relation_from_positions.
    """
    delta = [t - r for t, r in zip(target, reference, strict=True)]
    axis = max(range(3), key=lambda i: abs(delta[i]))
    for name, (a, sign) in DIRECTIONAL.items():
        if a == axis and sign * delta[a] > 0:
            return name
    return next(name for name, (a, sign) in DIRECTIONAL.items() if a == axis and sign < 0)


def clear_relation(
    target: Sequence[float], reference: Sequence[float], dominance: float = DOMINANCE
) -> str | None:
    """relation_between, or None when the dominant axis does not dominate by `dominance`."""
    size = sorted((abs(t - r) for t, r in zip(target, reference, strict=True)), reverse=True)
    if size[0] == 0 or size[0] < dominance * size[1]:
        return None
    return relation_between(target, reference)


def false_relations(
    target: Sequence[float], reference: Sequence[float], slack: float = FALSE_SLACK
) -> list[str]:
    """The directional relations clearly false of target w.r.t. reference, in DIRECTIONAL order.

    False: the signed offset along the relation's axis is <= slack x the largest |offset| (the
    opposite side, or hardly displaced along that axis at all).
    """
    delta = [t - r for t, r in zip(target, reference, strict=True)]
    largest = max(abs(d) for d in delta)
    return [n for n, (a, sign) in DIRECTIONAL.items() if sign * delta[a] <= slack * largest]


# --- layouts.json -------------------------------------------------------------------------------


def _numbers(where: str, value: object, count: int) -> list[float]:
    if (
        not isinstance(value, list)
        or len(value) != count
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        or not all(math.isfinite(v) for v in value)
    ):
        raise ValueError(f"{where}: expected a list of {count} finite numbers, got {value!r}")
    return [float(v) for v in value]


def check_layout(item: object, where: str) -> dict:
    """A validated copy of one layout item; a ValueError names `where` and the field."""
    if not isinstance(item, dict):
        raise ValueError(f"{where}: expected an object")
    if "id" not in item:
        raise ValueError(f"{where}: field 'id' is missing")
    where = f"{where} (id {item['id']!r})"
    description = item.get("description", "")
    if not isinstance(description, str):
        raise ValueError(f"{where}: field 'description' is not a string")
    raw_objects = item.get("objects")
    if not isinstance(raw_objects, list) or not raw_objects:
        raise ValueError(f"{where}: field 'objects' is missing or empty")
    objects, names = [], set()
    for j, obj in enumerate(raw_objects):
        at = f"{where}: objects[{j}]"
        if not isinstance(obj, dict):
            raise ValueError(f"{at}: expected an object")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{at}.name: missing or not a string")
        if name in names:
            raise ValueError(f"{at}.name: {name!r} appears twice")
        names.add(name)
        rotation = obj.get("rotation", 0)  # the original reads it with a default of 0
        if (
            isinstance(rotation, bool)
            or not isinstance(rotation, int | float)
            or not math.isfinite(rotation)
        ):
            raise ValueError(f"{at}.rotation: expected finite degrees, got {rotation!r}")
        size = _numbers(f"{at}.size", obj.get("size"), 3)
        if min(size) <= 0 or max(size) > MAX_METRES:
            raise ValueError(
                f"{at}.size: half-extents must be in (0, {MAX_METRES:g}] m, got {size}"
            )
        position = _numbers(f"{at}.position", obj.get("position"), 3)
        if max(map(abs, position)) > MAX_METRES:
            raise ValueError(f"{at}.position: beyond +-{MAX_METRES:g} m, got {position}")
        objects.append(
            {
                "name": name,
                "position": position,
                "rotation": float(rotation),
                "size": size,
            }
        )
    relations = item.get("relations", [])
    if not isinstance(relations, list):
        raise ValueError(f"{where}: field 'relations' is not a list")
    for j, rel in enumerate(relations):
        if not isinstance(rel, dict) or not all(
            isinstance(rel.get(k), str) for k in ("subject", "relation", "reference")
        ):
            raise ValueError(
                f"{where}: relations[{j}]: expected strings 'subject', 'relation', 'reference'"
            )
    return {
        "id": item["id"],
        "description": description,
        "objects": objects,
        "relations": [dict(r) for r in relations],
    }


def read_layouts(path: Path) -> list[dict]:
    """Validated layouts from a layouts.json (a JSON list); errors name the file and the item."""
    path = Path(path)
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON (line {error.lineno}: {error.msg})") from error
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text (byte {error.start})") from None
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply") from None
    if not isinstance(items, list):
        raise ValueError(f"{path}: expected a JSON list of layouts")
    return [check_layout(item, f"{path}: item {i}") for i, item in enumerate(items)]


def write_layouts(layouts: Sequence[Mapping], path: Path) -> Path:
    """Write layouts as the original's layouts.json (a JSON list)."""
    Path(path).write_text(json.dumps(list(layouts), indent=2) + "\n", encoding="utf-8")
    return Path(path)


def random_layout(rng: np.random.Generator, n_objects: int) -> dict:
    """A layout of n_objects boxes standing on the floor (y = 0), footprints apart by >= GAP.

    Half-extents 0.25-1.0 m per axis, centres within +-FLOOR_BOUNDS in x and z, any rotation.
    `relations` and the description state, for each object after the first, its relation to an
    earlier one (relation_between). The id is a hash of the content.
    """
    if not 1 <= n_objects <= 12:
        raise ValueError(f"n_objects: expected 1..12, got {n_objects}")
    tries = 60  # candidate centres per object
    while True:  # every draw is made up front in fixed-size blocks: cheap, and seed-stable
        sizes = np.round(rng.uniform(0.25, 1.0, (n_objects, 3)), 2).tolist()
        centres = np.round(rng.uniform(-FLOOR_BOUNDS, FLOOR_BOUNDS, (n_objects, tries, 2)), 2)
        turns = np.round(rng.uniform(0, 360, n_objects), 1).tolist()
        placed: list[tuple[float, float, float]] = []  # (x, z, footprint radius)
        for (hx, _, hz), candidates in zip(sizes, centres.tolist(), strict=True):
            radius = math.hypot(hx, hz)  # any rotation about Y stays inside this circle
            spot = next(
                (
                    (x, z)
                    for x, z in candidates
                    if all(math.hypot(x - px, z - pz) >= radius + pr + GAP for px, pz, pr in placed)
                ),
                None,
            )
            if spot is None:
                break  # no room: draw the layout again
            placed.append((*spot, radius))
        if len(placed) == n_objects:
            break
    objects = [
        {"name": f"obj_{i}", "position": [x, hy, z], "rotation": turn, "size": [hx, hy, hz]}
        for i, ((x, z, _), (hx, hy, hz), turn) in enumerate(zip(placed, sizes, turns, strict=True))
    ]
    relations, sentences = [], []
    for i, u in enumerate(rng.random(n_objects).tolist()[1:], start=1):
        j = int(u * i)  # an earlier object
        rel = relation_between(objects[i]["position"], objects[j]["position"])
        relations.append({"subject": f"obj_{i}", "relation": rel, "reference": f"obj_{j}"})
        sentences.append(f"The [obj_{i}] is {rel} the [obj_{j}].")
    if n_objects == 1:
        sentences.append("The [obj_0] stands on the floor.")
    digest = hashlib.sha256(repr(objects).encode()).hexdigest()[:12]
    return {
        "id": f"random-{digest}",
        "description": " ".join(sentences),
        "objects": objects,
        "relations": relations,
    }


# --- assembly -----------------------------------------------------------------------------------


def rotation_y(degrees: float) -> np.ndarray:
    """3x3 rotation about +Y by `degrees` (the original's matrix: x turns towards -z)."""
    a = math.radians(degrees)
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _subsample(cloud: np.ndarray, k: int) -> np.ndarray:
    """k points spread evenly over the cloud's rows (repeats when it has fewer than k)."""
    return cloud[np.linspace(0, len(cloud) - 1, k).round().astype(int)] if k else cloud[:0]


def assemble(
    layout: Mapping, assignment: Mapping[str, Asset], n_points: int | None = None
) -> np.ndarray:
    """The scene as (N, 6) float64: each object's cloud normalised to [-0.5, 0.5]^3 (its own
    axis-aligned box, per axis), scaled by size * 2, turned about Y by rotation, moved to position.

    As AnyPoint point_qa_generator/base.py _create_point_cloud_from_layout (:91-154), float64 as
    there: its float64 sizes and positions promote the coordinates, and stacking them with the
    float32 colours promotes those too (values kept exactly). One difference: the original
    normalises a float32 object cloud in float32 before the float64 steps, this in float64, so
    coordinates differ by float32 rounding (<= 2.5e-7 m over 193 scenes); doing it the original's
    way would move 8 of 261 rendered pictures by a pixel, and with them the response cache's keys.
    n_points=None keeps every point (the original); an int gives each object an equal share of
    n_points.
    """
    objects = layout["objects"]
    shares = [None] * len(objects)
    if n_points is not None:
        base, extra = divmod(int(n_points), len(objects))
        shares = [base + (i < extra) for i in range(len(objects))]
    parts = []
    for obj, share in zip(objects, shares, strict=True):
        try:
            asset = assignment[obj["name"]]
        except KeyError:
            raise KeyError(
                f"layout {layout.get('id')!r}: no object assigned to {obj['name']!r}"
            ) from None
        cloud = asset.load_points()
        if share is not None:
            cloud = _subsample(cloud, share)
        xyz = cloud[:, :3].astype(np.float64)
        low, high = xyz.min(axis=0), xyz.max(axis=0)
        extent = np.where(high - low > 1e-6, high - low, 1.0)  # a flat axis stays at 0
        xyz = (xyz - low) / extent - 0.5
        xyz = xyz * (np.asarray(obj["size"], float) * 2)
        xyz = xyz @ rotation_y(float(obj.get("rotation", 0))).T
        xyz = xyz + np.asarray(obj["position"], float)
        parts.append(np.hstack([xyz, cloud[:, 3:6].astype(np.float64)]))
    return np.vstack(parts) if parts else np.zeros((0, 6), np.float64)


def build_scene(
    layout: Mapping, assignment: Mapping[str, str], assets: Mapping[str, Asset]
) -> np.ndarray:
    """The (N, 6) float64 scene of a task (every point of every object, as AnyPoint saves it)."""
    missing = sorted(set(assignment.values()) - set(assets))
    if missing:
        raise KeyError(f"layout {layout.get('id')!r}: objects {missing} are not in the asset set")
    return assemble(layout, {name: assets[oid] for name, oid in assignment.items()})
