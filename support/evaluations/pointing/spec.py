"""The pointing evaluation's plugin spec: its options and settings (imported when pytest starts)."""

from __future__ import annotations

import glob
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.contract.data_paths import SYNTHETIC_FIX, built_label, existing_folder, files_below
from support.contract.evaluation import EvaluationSpec, Option, OptionError
from support.evaluations.pointing.parser import READ_RULES
from support.evaluations.pointing.profiles import PROFILES, WRITEUP, PointingProfile
from support.settings import RunSettings


@dataclass(frozen=True)
class PointingSettings:
    """What the pointing evaluation reads of the command line.

    rules, chosen by --compat in configure (profiles.py): WRITEUP, the 768x768 letterbox, the
    write-up's prompts and parser, our own balanced selection and plans; SOURCE, what the
    original's main script computes (native frame as the canvas, its one-line prompt and few-shot
    text, its parser, its selection rules and plans, a failed call scored as absent, max_tokens
    100, per-provider temperatures; the summary adds macro metrics).
    """

    # the raw tree, a save_to_disk folder, parquet file(s) or a downloaded hub id; None: synthetic
    cholecseg8k: str | None = None
    prepared: Path | None = None  # --pointing-prepared: a data_info folder used as it is
    profile: PointingProfile = WRITEUP
    # --pointing-point-frame: how an answer's point is read; "prompt": canvas px as the prompt
    # asks; "model": in the model's own frame where its family has one (task.point_frame)
    point_frame: str = "prompt"


POINT_FRAMES = ("prompt", "model")


CHOLECSEG8K_FIX = (
    "pass the CholecSeg8k root (the folder holding videoNN/), a save_to_disk folder or parquet "
    f"file(s), {SYNTHETIC_FIX}"
)


def check_cholecseg8k(source: str, run: RunSettings) -> None:
    """OptionError naming --cholecseg8k unless `source` names something CholecSeg8k.open reads: a
    glob that matches, a downloaded hub id, a parquet file, or a folder holding a raw tree, a
    save_to_disk copy or parquet files (each looked for as `open` does, stopping at the first)."""
    from support.evaluations.pointing.dataset import find_raw_root, is_hub_id

    flag = "--cholecseg8k"
    if glob.has_magic(source):
        if not glob.glob(source, recursive=True):
            raise OptionError(flag, f"{flag} {source}: no file matches; {CHOLECSEG8K_FIX}")
        return
    if is_hub_id(source):
        from support.evaluations.pointing.download import command, hub_dir

        if find_raw_root(hub_dir(run.output.cache_dir, source)) is None:
            raise OptionError(
                flag,
                f"{flag} {source}: not downloaded (downloading is an explicit step, never done "
                f"while collecting); run: {command(source, run.output.cache_dir)}",
            )
        return
    path = Path(source).expanduser()
    if path.is_file():
        if path.suffix != ".parquet":
            raise OptionError(flag, f"{flag} {source}: a file, not parquet; {CHOLECSEG8K_FIX}")
        return
    folder = existing_folder(flag, source, CHOLECSEG8K_FIX)
    if (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file():
        return
    try:
        if find_raw_root(folder) is not None or next(files_below(folder, "*.parquet"), None):
            return
    except ValueError as exc:  # several raw trees below it
        raise OptionError(flag, f"{flag} {exc}") from None
    raise OptionError(
        flag,
        f"{flag} {source}: holds no CholecSeg8k data (no videoNN/videoNN_*/frame_*_endo.png in "
        f"it or one folder below, no state.json, no parquet); {CHOLECSEG8K_FIX}",
    )


def configure(values: Mapping[str, Any], run: RunSettings) -> PointingSettings:
    source = values.get("cholecseg8k") or None
    if source is not None:
        check_cholecseg8k(source, run)
    prepared = values.get("pointing_prepared") or None
    if prepared is not None:
        fix = (
            "pass a prepared folder (e.g. the original's data_info/cholecseg8k), or leave the "
            "option out to prepare the data here"
        )
        prepared = existing_folder("--pointing-prepared", prepared, fix).resolve()
        if next(prepared.glob("balanced_indices_*.json"), None) is None:
            raise OptionError(
                "--pointing-prepared",
                f"--pointing-prepared {values.get('pointing_prepared')}: no "
                f"balanced_indices_<split>_<n>.json in it (the prepared test rows); {fix}",
            )
    point_frame = values.get("pointing_point_frame") or "prompt"
    if point_frame not in POINT_FRAMES:
        raise OptionError(
            "--pointing-point-frame", f"{point_frame!r}: one of {', '.join(POINT_FRAMES)}"
        )
    return PointingSettings(
        cholecseg8k=source,
        prepared=prepared,
        profile=PROFILES[run.compat],
        point_frame=point_frame,
    )


def data_files(settings: PointingSettings, run: RunSettings) -> list[Path]:
    """What the evaluation reads (for the manifest's fingerprint): the CholecSeg8k source (the
    synthetic sample's folder by default, a hub id's extracted folder, the files of a glob) and
    the --pointing-prepared folder."""
    from support.evaluations.pointing.dataset import is_hub_id

    source = settings.cholecseg8k
    if source is None:
        from support.evaluations.pointing.synthetic import ensure_cholecseg8k

        found = [ensure_cholecseg8k(run.output.cache_dir)]  # built by the run already: as is
    elif is_hub_id(source):
        from support.evaluations.pointing.download import hub_dir

        found = [hub_dir(run.output.cache_dir, source)]
    elif glob.has_magic(source):
        found = sorted(Path(p) for p in glob.glob(source, recursive=True))
    else:
        found = [Path(source).expanduser()]
    if settings.prepared is not None:
        found.append(settings.prepared)
    return found


def data_label(run: RunSettings) -> str | None:
    """What the data is when it is not the real CholecSeg8k (no --cholecseg8k, or a path
    inside a vlmbench cache's synthetic/ folder: the synthetic sample); None for the real
    data."""
    settings = run.evaluations.get("pointing") or PointingSettings()
    if settings.cholecseg8k:
        return built_label(settings.cholecseg8k, run.output.cache_dir, "CholecSeg8k")
    return "synthetic sample (support/evaluations/pointing/synthetic.py; not the real CholecSeg8k)"


SPEC = EvaluationSpec(
    name="pointing",
    title="pointing (CholecSeg8k organ/tool presence and a point)",
    evaluation="support.evaluations.pointing.task:PointingEvaluation",
    summary="support.evaluations.pointing.summary",
    options=(
        Option(
            "--cholecseg8k",
            metavar="PATH",
            help="CholecSeg8k: the raw tree (the Kaggle download or the hub zip extracted), a "
            "save_to_disk folder, parquet files, or the hub id minwoosun/CholecSeg8k once "
            "`python -m support.evaluations.pointing.download` has run; default: the synthetic "
            "sample",
        ),
        Option(
            "--pointing-prepared",
            metavar="DIR",
            help="a prepared folder used as it is, e.g. the original's data_info/cholecseg8k: "
            "balanced_indices_train_100.json (test rows, in its order) and the two few-shot plan "
            "files; rows are rows of --cholecseg8k (default: prepared from the data)",
        ),
        Option(
            "--pointing-point-frame",
            default="prompt",
            metavar="FRAME",
            help="how the numbers of an answer's point are read: prompt (canvas pixels, as the "
            "prompt asks; the default) or model (the model's own frame where its family has one: "
            "Qwen2.5-VL pixels of the canvas as its processor resized it, Qwen2-VL and Qwen3-VL "
            "0-1000; canvas pixels for every other model)",
        ),
    ),
    configure=configure,
    data_files=data_files,
    data_label=data_label,
    read_rules=READ_RULES,
    prompt_modules=("support.evaluations.pointing.prompts",),
    max_images=lambda settings: 4,  # few-shot: up to 3 examples (positive, easy, hard) + query
)
