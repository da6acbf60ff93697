"""Objects for the dynamic evaluation's scenes, in AnyPoint's formats (metadata.jsonl + {id}.npy).

A small procedural set ships in code (nothing downloads): each object is a few components, each
component one or more primitives (box, cylinder, sphere, cone) sampled on their surfaces as points
of the component's colour. `read_assets(dir)` reads the same files, or the original's real ones
(`--dynamic-data DIR`).

Files (as AnyPoint point_qa_generator/metadata.py `_load_metadata` reads them):
- `metadata.jsonl`: one JSON object per line, `{object_id: {"object": name, "components":
  [{"name", "material", "color", "shape", "texture"}, ...]}}`;
- `{object_id}.npy`: float32 (N, 6), x y z then r g b in [0, 1]; (N, 3) clouds are accepted and
  get zero colours, as the original's scene assembly does.

Object frame: metres, Y up, the object standing on y = 0; scene assembly re-normalises each cloud
to its axis-aligned box anyway, so only proportions matter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from support.storage.files import build_once

VERSION = "v1"  # bump when the shapes, colours or point counts change: it names the cache folder
METADATA_FILE = "metadata.jsonl"
POINTS_PER_OBJECT = 2048
ATTRIBUTES = ("material", "color", "shape", "texture")  # AnyPoint utils.py ATTRIBUTES, same order

# colour names and their RGB in [0, 1]
COLORS: dict[str, tuple[float, float, float]] = {
    "red": (0.85, 0.12, 0.10),
    "green": (0.15, 0.62, 0.20),
    "blue": (0.12, 0.30, 0.85),
    "yellow": (0.95, 0.85, 0.10),
    "orange": (0.95, 0.50, 0.05),
    "purple": (0.50, 0.18, 0.65),
    "brown": (0.50, 0.30, 0.12),
    "black": (0.08, 0.08, 0.08),
    "gray": (0.55, 0.55, 0.55),
    "white": (0.92, 0.92, 0.90),
    "pink": (0.95, 0.55, 0.70),
    "cyan": (0.10, 0.75, 0.80),
}


@dataclass(frozen=True)
class Component:
    """One named part of an object and its four attributes (empty string: unknown)."""

    name: str
    material: str
    color: str
    shape: str
    texture: str

    def attribute(self, attribute: str) -> str:
        """The value of one of ATTRIBUTES."""
        return str(getattr(self, attribute))


@dataclass(frozen=True)
class Asset:
    """One object: its id, its name (the answer text) and components; its cloud stays on disk."""

    object_id: str
    name: str
    components: tuple[Component, ...]
    path: Path  # the {object_id}.npy file

    def load_points(self) -> np.ndarray:
        """(N, 6) float32: xyz then rgb in [0, 1] (zeros for an (N, 3) cloud)."""
        return _load_cloud(self.path)


# --- the procedural set -------------------------------------------------------------------------
# A primitive: (shape, centre xyz, half-extents xyz), object frame, metres. Cylinders and cones
# stand along Y (a cone's apex up); a sphere with unequal half-extents is an ellipsoid.
Primitive = tuple[str, tuple[float, float, float], tuple[float, float, float]]


@dataclass(frozen=True)
class _Part:
    name: str
    material: str
    color: str
    texture: str
    primitives: tuple[Primitive, ...]


def _legs(x: float, z: float, h: float, r: float) -> tuple[Primitive, ...]:
    """Four cylinder legs of half-height h/2 at (+-x, +-z)."""
    return tuple(
        ("cylinder", (sx * x, h / 2, sz * z), (r, h / 2, r)) for sx in (-1, 1) for sz in (-1, 1)
    )


def _shape_of(primitives: tuple[Primitive, ...]) -> str:
    """The component's shape attribute: its primitive's name ("box" reads "cuboid")."""
    name = primitives[0][0]
    return "cuboid" if name == "box" else name


OBJECTS: tuple[tuple[str, tuple[_Part, ...]], ...] = (
    (
        "chair",
        (
            _Part("seat", "wood", "brown", "smooth", (("box", (0, 0.45, 0), (0.22, 0.03, 0.22)),)),
            _Part(
                "backrest", "wood", "red", "smooth", (("box", (0, 0.75, -0.2), (0.22, 0.27, 0.02)),)
            ),
            _Part("legs", "metal", "black", "glossy", _legs(0.19, 0.19, 0.42, 0.02)),
        ),
    ),
    (
        "table",
        (
            _Part(
                "tabletop", "wood", "yellow", "smooth", (("box", (0, 0.72, 0), (0.6, 0.03, 0.4)),)
            ),
            _Part("legs", "metal", "gray", "matte", _legs(0.54, 0.34, 0.69, 0.03)),
        ),
    ),
    (
        "lamp",
        (
            _Part(
                "base", "metal", "black", "matte", (("cylinder", (0, 0.02, 0), (0.15, 0.02, 0.15)),)
            ),
            _Part(
                "pole", "metal", "gray", "glossy", (("cylinder", (0, 0.5, 0), (0.02, 0.46, 0.02)),)
            ),
            _Part(
                "shade", "fabric", "white", "rough", (("cone", (0, 1.05, 0), (0.22, 0.15, 0.22)),)
            ),
        ),
    ),
    (
        "mug",
        (
            _Part(
                "body",
                "ceramic",
                "blue",
                "glossy",
                (("cylinder", (0, 0.05, 0), (0.04, 0.05, 0.04)),),
            ),
            _Part(
                "handle",
                "ceramic",
                "white",
                "glossy",
                (("box", (0.055, 0.05, 0), (0.015, 0.03, 0.006)),),
            ),
        ),
    ),
    (
        "crate",
        (
            _Part("body", "wood", "orange", "rough", (("box", (0, 0.2, 0), (0.3, 0.2, 0.25)),)),
            _Part("lid", "wood", "brown", "rough", (("box", (0, 0.415, 0), (0.31, 0.015, 0.26)),)),
        ),
    ),
    (
        "ball",
        (
            _Part(
                "shell", "rubber", "red", "matte", (("sphere", (0, 0.12, 0), (0.12, 0.12, 0.12)),)
            ),
        ),
    ),
    (
        "bottle",
        (
            _Part(
                "body", "glass", "green", "glossy", (("cylinder", (0, 0.1, 0), (0.04, 0.1, 0.04)),)
            ),
            _Part(
                "neck", "glass", "green", "glossy", (("cone", (0, 0.24, 0), (0.04, 0.04, 0.04)),)
            ),
            _Part(
                "cap",
                "plastic",
                "yellow",
                "matte",
                (("cylinder", (0, 0.29, 0), (0.013, 0.012, 0.013)),),
            ),
        ),
    ),
    (
        "traffic cone",
        (
            _Part(
                "cone", "plastic", "orange", "matte", (("cone", (0, 0.37, 0), (0.15, 0.33, 0.15)),)
            ),
            _Part("base", "rubber", "black", "rough", (("box", (0, 0.02, 0), (0.2, 0.02, 0.2)),)),
        ),
    ),
    (
        "tree",
        (
            _Part(
                "trunk", "wood", "brown", "rough", (("cylinder", (0, 0.4, 0), (0.08, 0.4, 0.08)),)
            ),
            _Part("crown", "leaf", "green", "rough", (("cone", (0, 1.2, 0), (0.45, 0.5, 0.45)),)),
        ),
    ),
    (
        "snowman",
        (
            _Part(
                "body",
                "snow",
                "white",
                "matte",
                (
                    ("sphere", (0, 0.3, 0), (0.3, 0.3, 0.3)),
                    ("sphere", (0, 0.78, 0), (0.2, 0.2, 0.2)),
                ),
            ),
            _Part(
                "hat",
                "fabric",
                "black",
                "smooth",
                (("cylinder", (0, 1.05, 0), (0.12, 0.08, 0.12)),),
            ),
            _Part(
                "nose",
                "vegetable",
                "orange",
                "smooth",
                (("cone", (0, 0.8, 0.22), (0.03, 0.06, 0.03)),),
            ),
        ),
    ),
    (
        "stool",
        (
            _Part(
                "seat",
                "plastic",
                "purple",
                "smooth",
                (("cylinder", (0, 0.6, 0), (0.18, 0.03, 0.18)),),
            ),
            _Part("legs", "wood", "brown", "smooth", _legs(0.12, 0.12, 0.57, 0.02)),
        ),
    ),
    (
        "bookshelf",
        (
            _Part(
                "frame", "wood", "white", "smooth", (("box", (0, 0.9, -0.15), (0.45, 0.9, 0.02)),)
            ),
            _Part(
                "shelves",
                "wood",
                "gray",
                "smooth",
                tuple(("box", (0, y, 0), (0.45, 0.02, 0.15)) for y in (0.02, 0.6, 1.2, 1.78)),
            ),
            _Part(
                "books",
                "paper",
                "cyan",
                "rough",
                (
                    ("box", (-0.2, 0.75, 0), (0.2, 0.13, 0.12)),
                    ("box", (0.15, 1.33, 0), (0.25, 0.11, 0.12)),
                ),
            ),
        ),
    ),
    (
        "vase",
        (
            _Part(
                "body", "ceramic", "pink", "glossy", (("sphere", (0, 0.15, 0), (0.12, 0.15, 0.12)),)
            ),
            _Part(
                "rim",
                "ceramic",
                "purple",
                "glossy",
                (("cylinder", (0, 0.33, 0), (0.05, 0.04, 0.05)),),
            ),
        ),
    ),
)


def _surface_area(shape: str, h: np.ndarray) -> float:
    """Approximate surface area (m^2) of a primitive with half-extents h, for point budgets."""
    a, b, c = (float(v) for v in h)
    if shape == "box":
        return 8 * (a * b + b * c + a * c)
    if shape == "cylinder":
        r = (a + c) / 2
        return 2 * np.pi * r * 2 * b + 2 * np.pi * r * r
    if shape == "cone":
        r = (a + c) / 2
        return np.pi * r * (r + np.hypot(r, 2 * b))
    # ellipsoid: Knud Thomsen's approximation
    p = 1.6075
    return 4 * np.pi * (((a * b) ** p + (a * c) ** p + (b * c) ** p) / 3) ** (1 / p)


def _sample_surface(shape: str, h: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 3) points on the surface of a primitive centred at 0 with half-extents h."""
    u = rng.random((n, 3))
    if shape == "box":
        faces = np.array(
            [h[1] * h[2], h[0] * h[2], h[0] * h[1]]
        )  # area of the faces normal to x, y, z
        axis = rng.choice(3, size=n, p=faces / faces.sum())
        pts = (u * 2 - 1) * h
        pts[np.arange(n), axis] = np.where(rng.random(n) < 0.5, -1.0, 1.0) * h[axis]
        return pts
    if shape in ("cylinder", "cone"):
        theta = u[:, 0] * 2 * np.pi
        r, b = (h[0] + h[2]) / 2, h[1]  # mean radius and half-height, for the area split
        if shape == "cylinder":
            side, flat = 2 * np.pi * r * 2 * b, 2 * np.pi * r * r  # lateral, both caps
        else:
            side, flat = np.pi * r * np.hypot(r, 2 * b), np.pi * r * r  # lateral, base
        on_side = rng.random(n) < side / (side + flat)
        disc = np.sqrt(u[:, 2])  # area-uniform radius on a cap
        if shape == "cylinder":
            radius = np.where(on_side, 1.0, disc)
            y = np.where(on_side, u[:, 1] * 2 - 1, np.where(u[:, 1] < 0.5, -1.0, 1.0))
        else:
            frac = 1 - np.sqrt(u[:, 1])  # 0 base .. 1 apex, area-uniform on the lateral surface
            radius = np.where(on_side, 1 - frac, disc)
            y = np.where(on_side, frac * 2 - 1, -1.0)
        return np.stack([radius * np.cos(theta) * h[0], y * h[1], radius * np.sin(theta) * h[2]], 1)
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return direction * h


def _object_cloud(parts: tuple[_Part, ...], n_points: int, rng: np.random.Generator) -> np.ndarray:
    """(n_points, 6) float32 cloud: points spread over primitives by surface area."""
    prims = [
        (part, s, np.array(c, float), np.array(h, float))
        for part in parts
        for s, c, h in part.primitives
    ]
    areas = np.array([_surface_area(s, h) for _, s, _, h in prims])
    counts = np.floor(areas / areas.sum() * n_points).astype(int)
    counts[np.argmax(areas)] += n_points - counts.sum()
    chunks = []
    for (part, shape, centre, half), k in zip(prims, counts, strict=True):
        xyz = _sample_surface(shape, half, int(k), rng) + centre
        rgb = np.clip(np.array(COLORS[part.color]) + rng.normal(0, 0.03, (int(k), 3)), 0, 1)
        chunks.append(np.hstack([xyz, rgb]))
    return np.vstack(chunks).astype(np.float32)


def build_assets(out_dir: Path, seed: int = 0) -> Path:
    """Write the procedural set (metadata.jsonl + one .npy per object) into out_dir; return it."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    lines = []
    for index, (name, parts) in enumerate(OBJECTS):
        object_id = f"proc{index:02d}_{name.replace(' ', '_')}"
        components = [
            {
                "name": p.name,
                "material": p.material,
                "color": p.color,
                "shape": _shape_of(p.primitives),
                "texture": p.texture,
            }
            for p in parts
        ]
        lines.append(json.dumps({object_id: {"object": name, "components": components}}))
        np.save(out_dir / f"{object_id}.npy", _object_cloud(parts, POINTS_PER_OBJECT, rng))
    (out_dir / METADATA_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out_dir


def ensure_assets(cache_dir: Path, seed: int = 0) -> Path:
    """The procedural set under cache_dir, built on first use (safe across processes)."""
    target = Path(cache_dir) / "synthetic" / f"dynamic-assets-seed{seed}-{VERSION}"
    return build_once(target, lambda folder: build_assets(folder, seed=seed))


# --- reading ------------------------------------------------------------------------------------


def _load_cloud(path: Path) -> np.ndarray:
    """An object's cloud as (N, 6) float32, or a ValueError naming the file."""
    try:
        cloud = np.load(path)
    except (OSError, ValueError, EOFError) as error:
        raise ValueError(f"{path}: cannot read a point cloud ({error})") from None
    _check_cloud_header(path, cloud)
    cloud = cloud.astype(np.float32, copy=False)
    if not np.isfinite(cloud[:, :6]).all():
        raise ValueError(f"{path}: the point cloud holds NaN or infinite values")
    if cloud.shape[1] == 3:  # no colour: zeros, as AnyPoint's scene assembly does
        cloud = np.hstack([cloud, np.zeros((len(cloud), 3), np.float32)])
    return cloud[:, :6]


def _check_cloud_header(path: Path, cloud: np.ndarray) -> None:
    shape = cloud.shape
    if len(shape) != 2 or shape[1] < 3 or shape[0] == 0:
        raise ValueError(f"{path}: expected a point cloud of shape (N, 3) or (N, 6), got {shape}")
    if cloud.dtype.kind not in "fiu":  # coordinates: numbers, never text or objects
        raise ValueError(f"{path}: point cloud dtype {cloud.dtype}, expected numbers")


def _cloud_path(folder: Path, object_id: str, at: str) -> Path:
    """folder/{object_id}.npy, refused when the id leads outside the folder (../, /abs, links)."""
    path = folder / f"{object_id}.npy"
    if not path.resolve().is_relative_to(folder.resolve()):
        raise ValueError(f"{at}: object id leads outside {folder} (to {path})")
    return path


def _component(where: str, index: int, raw: object) -> Component:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: components[{index}] is not an object")
    values = {}
    for field in ("name", *ATTRIBUTES):
        value = raw.get(field, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise ValueError(f"{where}: components[{index}].{field} is not a string: {value!r}")
        values[field] = value
    if not values["name"]:
        raise ValueError(f"{where}: components[{index}].name is missing or empty")
    return Component(**values)


def read_assets(folder: Path) -> dict[str, Asset]:
    """Objects by id from folder/metadata.jsonl and folder/{object_id}.npy.

    Every cloud's header is checked here (shape (N, 3) or (N, 6)); errors name the file and the
    line or field. Clouds themselves are read by Asset.load_points.
    """
    folder = Path(folder)
    meta = folder / METADATA_FILE
    if not meta.is_file():
        raise FileNotFoundError(f"{meta}: no object metadata file (one JSON object per line)")
    assets: dict[str, Asset] = {}
    try:
        text = meta.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{meta}: not UTF-8 text (byte {error.start})") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{meta}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where}: not valid JSON ({error.msg})") from error
        except RecursionError:
            raise ValueError(f"{where}: JSON nested too deeply") from None
        if not isinstance(row, dict) or not row:
            raise ValueError(f"{where}: expected {{object_id: {{...}}}}")
        for object_id, data in row.items():
            at = f"{where}: {object_id}"
            if not isinstance(data, dict):
                raise ValueError(f"{at}: expected an object with 'object' and 'components'")
            name = data.get("object")
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"{at}: field 'object' (the name) is missing or empty")
            raw = data.get("components", [])
            if not isinstance(raw, list):
                raise ValueError(f"{at}: field 'components' is not a list")
            if object_id in assets:
                raise ValueError(f"{at}: object id appears twice")
            path = _cloud_path(folder, object_id, at)
            if not path.is_file():
                raise FileNotFoundError(f"{at}: its point cloud {path} does not exist")
            try:
                header = np.load(path, mmap_mode="r")  # reads the header only
            except (OSError, ValueError, EOFError) as error:
                raise ValueError(f"{path}: cannot read a point cloud ({error})") from None
            _check_cloud_header(path, header)
            comps = tuple(_component(at, i, c) for i, c in enumerate(raw))
            assets[object_id] = Asset(object_id, name.strip(), comps, path)
    if not assets:
        raise ValueError(f"{meta}: no objects")
    return assets
