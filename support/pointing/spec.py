"""The pointing evaluation's plugin spec: its option and settings (imported when pytest starts)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from support.evaluation import EvaluationSpec, Option
from support.settings import RunSettings


@dataclass(frozen=True)
class PointingSettings:
    cholecseg8k: str | None = (
        None  # save_to_disk folder, parquet file(s) or hub id; None: synthetic
    )


def configure(values: Mapping[str, Any], run: RunSettings) -> PointingSettings:
    return PointingSettings(cholecseg8k=values.get("cholecseg8k") or None)


SPEC = EvaluationSpec(
    name="pointing",
    title="pointing (CholecSeg8k organ/tool presence and a point)",
    evaluation="support.pointing.task:PointingEvaluation",
    summary="support.pointing.summary",
    options=(
        Option(
            "--cholecseg8k",
            metavar="PATH",
            help="CholecSeg8k: a save_to_disk folder, parquet files, or the hub id "
            "minwoosun/CholecSeg8k (network); default: the synthetic sample",
        ),
    ),
    configure=configure,
)
