"""The size at which a local model sees an image: its processor's resize, read from the processor.

Qwen2.5-VL answers boxes and points in absolute pixels of the image *as its processor resized it*
(families.py, box frame "resized"), so reading such an answer needs that size. `input_size` gives
it: the (width, height) px the model's image processor resizes a `width` x `height` px image to.

How it is found, never re-implemented here:

- the processor settings are the model's own: its image processor class (`Qwen2VLImageProcessorPil`,
  the one transformers' AutoImageProcessor picks for Qwen2-VL, Qwen2.5-VL and Qwen3-VL; the PIL
  one, which loads without torchvision) built from the model's preprocessor_config.json, in a
  local folder or in the hub id's snapshot in the local Hugging Face cache (offline, never the
  network). The class's own rules apply (legacy `min_pixels` / `max_pixels` keys override
  `size`, missing keys take the class defaults);
- for a hub id whose config is not here (or a folder without a readable one), the family's hub
  defaults (HUB_DEFAULTS: the released checkpoints' preprocessor_config.json, each source named);
- the resize is transformers' own `smart_resize` (transformers.models.qwen2_vl.
  image_processing_pil_qwen2_vl), called as the processor calls it (`resize`,
  `get_number_of_image_patches`, which vLLM uses too): factor patch_size * merge_size, pixels
  within size["shortest_edge"] .. size["longest_edge"]. Each side becomes a multiple of the
  factor and the area stays in the bounds: with the hub's Qwen2.5-VL limits (3136 ..
  12845056 px, factor 28) a 640x512 frame becomes 644x504.

qwen-vl-utils (the Qwen families' own reference for smart_resize; 0.0.14) gives the same sizes as
transformers on every size unit/backends/test_model_frames.py pins but one: a sliver whose short
side rounds to 0 (300x7: 308x28 there, 392x28 in transformers), where the model sees transformers'
size. It is not used here: it imports torchvision when imported. It also resizes before the
processor when a client uses it (`fetch_image`); the suite's backends do not, so the processor's
settings alone decide.

Families without such a resize (LLaVA, LLaVA-OneVision, Llama-3.2-Vision; no family): the size
given (identity). Their answers have no documented pixel frame, so nothing reads this size.

An engine option that overrides the processor's limits (vLLM's `mm_processor_kwargs`) is not
seen here; the suite's backends pass none.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from support.backends.families import Family

# preprocessor_config.json of the released checkpoints, for a hub id whose config is not here.
# Qwen2-VL and Qwen2.5-VL: min_pixels 4 * 28 * 28, max_pixels 16384 * 28 * 28 (also qwen-vl-utils'
# defaults for factor 28: 4 and 16384 tokens of 28 x 28 px); Qwen3-VL: size 65536 .. 16777216
# (= 16384 * 32 * 32), patch 16.
_QWEN2_VL = {
    "min_pixels": 3136,
    "max_pixels": 12845056,
    "patch_size": 14,
    "merge_size": 2,
    "temporal_patch_size": 2,
}
_QWEN3_VL = {
    "size": {"shortest_edge": 65536, "longest_edge": 16777216},
    "patch_size": 16,
    "merge_size": 2,
    "temporal_patch_size": 2,
}
HUB_DEFAULTS: dict[str, tuple[str, Mapping[str, Any]]] = {  # family -> (source, settings)
    "qwen2_vl": ("Qwen/Qwen2-VL-7B-Instruct preprocessor_config.json", _QWEN2_VL),
    "qwen2_5_vl": ("Qwen/Qwen2.5-VL-7B-Instruct preprocessor_config.json", _QWEN2_VL),
    "qwen3_vl": ("Qwen/Qwen3-VL-8B-Instruct preprocessor_config.json", _QWEN3_VL),
    "qwen3_vl_moe": ("Qwen/Qwen3-VL-30B-A3B-Instruct preprocessor_config.json", _QWEN3_VL),
}
CONFIG_FILE = "preprocessor_config.json"


@dataclass(frozen=True)
class ResizeRule:
    """A model's image resize: smart_resize with these settings, read from `source`."""

    factor: int  # patch_size * merge_size: each side becomes a multiple of it (px)
    min_pixels: int  # the processor's size["shortest_edge"] (an area, px)
    max_pixels: int  # the processor's size["longest_edge"] (an area, px)
    source: str  # the config file read, or the hub default's source

    def size(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) px of a `width` x `height` px image after the resize."""
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

        h, w = smart_resize(height, width, self.factor, self.min_pixels, self.max_pixels)
        return int(w), int(h)


def _family_name(family: Family | str | None) -> str | None:
    return family.name if isinstance(family, Family) else family


def input_size(
    model_id: str, family: Family | str | None, width: int, height: int
) -> tuple[int, int]:
    """(width, height) px of a `width` x `height` px image as `model_id`'s processor resizes it
    (a local folder or a hub id); the size itself for a family without such a resize. Computed
    once per model, family and size. ValueError where the processor refuses the image (an
    aspect ratio over 200) or the size is not positive."""
    return _input_size(model_id, _family_name(family), int(width), int(height))


@functools.lru_cache(maxsize=1024)
def _input_size(model_id: str, family: str | None, width: int, height: int) -> tuple[int, int]:
    if width < 1 or height < 1:
        raise ValueError(f"input_size: {width}x{height} px is not an image size")
    rule = resize_rule(model_id, family)
    return (width, height) if rule is None else rule.size(width, height)


def resize_rule(model_id: str, family: Family | str | None) -> ResizeRule | None:
    """The resize of `model_id`'s image processor, None for a family without a smart resize
    (read once per model and family). ValueError naming the config file where the processor
    class refuses its settings."""
    return _resize_rule(model_id, _family_name(family))


@functools.lru_cache(maxsize=64)
def _resize_rule(model_id: str, family: str | None) -> ResizeRule | None:
    if family not in HUB_DEFAULTS:
        return None
    from support.backends.model_folder import model_json

    found = model_json(model_id, CONFIG_FILE)
    if found is None:
        source, defaults = HUB_DEFAULTS[family]
        return _rule(copy.deepcopy(dict(defaults)), f"hub default ({source})")
    path, settings = found
    return _rule(settings, str(path))


def _rule(settings: dict[str, Any], source: str) -> ResizeRule:
    """The settings read through the family's image processor class (its own key rules)."""
    from transformers import Qwen2VLImageProcessorPil

    try:
        processor = Qwen2VLImageProcessorPil.from_dict(settings)
        size = processor.size
        return ResizeRule(
            factor=int(processor.patch_size) * int(processor.merge_size),
            min_pixels=int(size["shortest_edge"]),
            max_pixels=int(size["longest_edge"]),
            source=source,
        )
    except Exception as exc:  # a config the processor class cannot take
        raise ValueError(
            f"{source}: not an image processor config Qwen2-VL's takes ({exc})"
        ) from exc
