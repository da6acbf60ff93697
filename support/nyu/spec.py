"""The nyu_distance evaluation's plugin spec: its options and settings (imported at start-up)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from support.evaluation import EvaluationSpec, Option, OptionError
from support.settings import RunSettings

PAIRS_PER_IMAGE = 3  # as the source


@dataclass(frozen=True)
class NyuSettings:
    mat: str | None = None  # nyu_depth_v2_labeled.mat; None: the synthetic sample
    pairs_per_image: int = PAIRS_PER_IMAGE


def configure(values: Mapping[str, Any], run: RunSettings) -> NyuSettings:
    k = values.get("pairs_per_image")
    k = PAIRS_PER_IMAGE if k is None else k
    if not isinstance(k, int) or k < 1:
        raise OptionError("--pairs-per-image", f"{k!r}: expected a whole number >= 1")
    return NyuSettings(mat=values.get("nyu_mat") or None, pairs_per_image=k)


SPEC = EvaluationSpec(
    name="nyu_distance",
    title="nyu_distance (NYU Depth V2 3D distance between two marked points)",
    evaluation="support.nyu.task:NyuDistanceEvaluation",
    summary="support.nyu.summary",
    options=(
        Option(
            "--nyu-mat",
            metavar="PATH",
            help="NYU Depth V2 nyu_depth_v2_labeled.mat (MATLAB v7.3; fetch it with "
            "`python -m support.nyu.download --to DIR`); default: the synthetic sample",
        ),
        Option(
            "--pairs-per-image",
            type=int,
            default=PAIRS_PER_IMAGE,
            metavar="K",
            help=f"point pairs sampled per image, seeded by --seed ({PAIRS_PER_IMAGE}, as the "
            "source)",
        ),
    ),
    configure=configure,
)
