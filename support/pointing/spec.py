"""The pointing evaluation's plugin spec: its options and settings (imported when pytest starts)."""

from __future__ import annotations

import glob
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.evaluation import EvaluationSpec, Option, OptionError
from support.settings import Compat, RunSettings


@dataclass(frozen=True)
class PointingSettings:
    """What the pointing evaluation reads of the command line.

    compat "writeup": the 768x768 letterbox, the write-up's prompts and parser, our own balanced
    selection and plans. "source": what the original's main script computes (native frame as the
    canvas, its one-line prompt and few-shot text, its parser, its selection rules and plans, a
    failed call scored as absent, max_tokens 100, per-provider temperatures, macro metrics).
    """

    # the raw tree, a save_to_disk folder, parquet file(s) or a downloaded hub id; None: synthetic
    cholecseg8k: str | None = None
    prepared: Path | None = None  # --pointing-prepared: a data_info folder used as it is
    compat: Compat = "writeup"

    @property
    def source(self) -> bool:
        return self.compat == "source"


def configure(values: Mapping[str, Any], run: RunSettings) -> PointingSettings:
    prepared = values.get("pointing_prepared") or None
    if prepared is not None:
        prepared = Path(prepared).expanduser().resolve()
        if not prepared.is_dir():
            raise OptionError("--pointing-prepared", f"{prepared} is not a folder")
    return PointingSettings(
        cholecseg8k=values.get("cholecseg8k") or None, prepared=prepared, compat=run.compat
    )


def data_files(settings: PointingSettings, run: RunSettings) -> list[Path]:
    """What the evaluation reads (for the manifest's fingerprint): the CholecSeg8k source (the
    synthetic sample's folder by default, a hub id's extracted folder, the files of a glob) and
    the --pointing-prepared folder."""
    from support.pointing.dataset import is_hub_id

    source = settings.cholecseg8k
    if source is None:
        from support.synthetic.cholecseg8k import ensure_cholecseg8k

        found = [ensure_cholecseg8k(run.cache_dir)]  # built by the run already: returned as is
    elif is_hub_id(source):
        from support.pointing.download import hub_dir

        found = [hub_dir(run.cache_dir, source)]
    elif glob.has_magic(source):
        found = sorted(Path(p) for p in glob.glob(source, recursive=True))
    else:
        found = [Path(source).expanduser()]
    if settings.prepared is not None:
        found.append(settings.prepared)
    return found


SPEC = EvaluationSpec(
    name="pointing",
    title="pointing (CholecSeg8k organ/tool presence and a point)",
    evaluation="support.pointing.task:PointingEvaluation",
    summary="support.pointing.summary",
    options=(
        Option(
            "--cholecseg8k",
            metavar="PATH",
            help="CholecSeg8k: the raw tree (the Kaggle download or the hub zip extracted), a "
            "save_to_disk folder, parquet files, or the hub id minwoosun/CholecSeg8k once "
            "`python -m support.pointing.download` has run; default: the synthetic sample",
        ),
        Option(
            "--pointing-prepared",
            metavar="DIR",
            help="a prepared folder used as it is, e.g. the original's data_info/cholecseg8k: "
            "balanced_indices_train_100.json (test rows, in its order) and the two few-shot plan "
            "files; rows are rows of --cholecseg8k (default: prepared from the data)",
        ),
    ),
    configure=configure,
    data_files=data_files,
    prompt_modules=("support.pointing.prompts",),
    max_images=lambda settings: 4,  # few-shot: up to 3 examples (positive, easy, hard) + query
)
