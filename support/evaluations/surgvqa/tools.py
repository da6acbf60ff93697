"""The SurgVU tool classes and the one place that turns a tool's name into its class.

Class names and ids are the official category-1 evaluation's (rgnespolo-intusurg/
surgvu24-category-1-eval, gc_to_coco.py): COCO category ids 0-13 in this order. The training labels
and the models spell some differently ("monopolar curved scissors", "permanent cautery
hook/spatula", "tip-up fenestrated grasper"), so names are compared after `name_key`.
"""

from __future__ import annotations

import re

TOOL_CLASSES: tuple[str, ...] = (
    "grasping retractor",
    "cadiere forceps",
    "bipolar forceps",
    "force bipolar",
    "clip applier",
    "stapler",
    "permanent cautery hook spatula",
    "monopolar curved scissor",
    "vessel sealer",
    "tip up fenestrated grasper",
    "bipolar dissector",
    "needle driver",
    "prograsp forceps",
    "suction irrigator",
)
CATEGORY_ID: dict[str, int] = {name: i for i, name in enumerate(TOOL_CLASSES)}  # COCO ids 0-13


def name_key(name: str) -> str:
    """A tool name compared loosely: lower case, `-_/` and punctuation as spaces, single spaces,
    a trailing plural "s" dropped from each word ("Monopolar Curved Scissors" -> "monopolar
    curved scissor", "tip-up" -> "tip up", "hook/spatula" -> "hook spatula")."""
    words = re.sub(r"[^a-z0-9]+", " ", name.lower()).split()
    return " ".join(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
                    for w in words)  # fmt: skip


_KEYS: dict[str, str] = {name_key(name): name for name in TOOL_CLASSES}
# names seen in the challenge's label files and in models' answers for the same class
_ALIASES: dict[str, str] = {
    name_key("large needle driver"): "needle driver",
    name_key("permanent cautery hook"): "permanent cautery hook spatula",
    name_key("cautery hook"): "permanent cautery hook spatula",
    name_key("monopolar scissors"): "monopolar curved scissor",
    name_key("suction irrigation"): "suction irrigator",
    name_key("fenestrated grasper"): "tip up fenestrated grasper",
}


def canonical_tool(name: object) -> str | None:
    """The class in TOOL_CLASSES that `name` spells, or None (never raises: names come from
    label files and model answers)."""
    if not isinstance(name, str):
        return None
    key = name_key(name)
    return _KEYS.get(key) or _ALIASES.get(key)
