"""The nyu_distance evaluation's plugin spec: its options and settings (imported at start-up)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.contract.data_paths import SYNTHETIC_FIX, built_label, existing_file, existing_folder
from support.contract.evaluation import EvaluationSpec, Option, OptionError
from support.evaluations.nyu_distance.parser import READ_RULES
from support.evaluations.nyu_distance.profiles import PROFILES, WRITEUP, NyuProfile
from support.settings import Compat, RunSettings

PAIRS_PER_IMAGE = 3  # as the source
SOURCE_IMAGES = 10  # `--compat source` evaluates the first 10 images, as the original's default


@dataclass(frozen=True)
class NyuSettings:
    mat: str | None = None  # nyu_depth_v2_labeled.mat; None: `folder`, else the synthetic sample
    pairs_per_image: int = PAIRS_PER_IMAGE
    folder: str | None = None  # an extracted folder (rgb/, depth/), e.g. the original's
    profile: NyuProfile = WRITEUP  # by --compat (profiles.py): the prompt, pairs, marks and parser
    source_images: int = SOURCE_IMAGES  # source: the first N images (its --num_images)

    @property
    def compat(self) -> Compat:
        """The profile's name (--compat), as the summary's marked images ask for it."""
        return self.profile.compat


def check_mat(mat: str) -> None:
    """OptionError naming --nyu-mat unless the file exists and opens as the labeled NYU file
    (HDF5 with `images` and `depths` of the real shapes: its header and metadata, no pixels)."""
    from support.evaluations.nyu_distance.mat import DOWNLOAD_HINT, NyuMat, NyuMatError

    fix = f"fetch the file with `{DOWNLOAD_HINT}`, {SYNTHETIC_FIX}"
    path = existing_file("--nyu-mat", mat, fix)
    try:
        NyuMat(path).close()
    except NyuMatError as exc:
        raise OptionError("--nyu-mat", f"--nyu-mat {exc}") from None


def check_folder(folder: str) -> None:
    """OptionError naming --nyu-dir unless the folder holds rgb/ and depth/."""
    fix = f"pass an extracted NYU folder (rgb/NNNN.jpg, depth/NNNN.npy), {SYNTHETIC_FIX}"
    path = existing_folder("--nyu-dir", folder, fix)
    missing = [f"{sub}/" for sub in ("rgb", "depth") if not (path / sub).is_dir()]
    if missing:
        raise OptionError("--nyu-dir", f"--nyu-dir {folder}: no {' or '.join(missing)}; {fix}")


def configure(values: Mapping[str, Any], run: RunSettings) -> NyuSettings:
    k = values.get("pairs_per_image")
    k = PAIRS_PER_IMAGE if k is None else k
    if not isinstance(k, int) or k < 1:
        raise OptionError("--pairs-per-image", f"{k!r}: expected a whole number >= 1")
    mat, folder = values.get("nyu_mat") or None, values.get("nyu_dir") or None
    if mat and folder:
        raise OptionError("--nyu-dir", "give --nyu-mat or --nyu-dir, not both")
    if folder:
        check_folder(folder)
    if mat:
        check_mat(mat)
    return NyuSettings(mat=mat, pairs_per_image=k, folder=folder, profile=PROFILES[run.compat],
                       source_images=run.samples or SOURCE_IMAGES)  # fmt: skip


def data_files(settings: NyuSettings, run: RunSettings) -> list[Path]:
    """What the evaluation reads (for the manifest's fingerprint): --nyu-dir, --nyu-mat, or the
    synthetic .mat file."""
    if settings.folder:
        return [Path(settings.folder)]
    if settings.mat:
        return [Path(settings.mat)]
    from support.evaluations.nyu_distance.synthetic import ensure_nyu_mat

    return [ensure_nyu_mat(run.output.cache_dir)]  # built by the run already: returned as is


def data_label(run: RunSettings) -> str | None:
    """What the data is when it is not the real NYU Depth V2 (no --nyu-mat or --nyu-dir: the
    synthetic sample, or a path inside a vlmbench cache's synthetic/ folder); None for the real
    data."""
    settings = run.evaluations.get("nyu_distance") or NyuSettings()
    if settings.mat or settings.folder:
        return built_label(settings.mat or settings.folder, run.output.cache_dir, "NYU Depth V2")
    where = "support/evaluations/nyu_distance/synthetic.py"
    return f"synthetic sample ({where}; not the real NYU Depth V2)"


def open_nyu(settings: NyuSettings, cache_dir: str | Path) -> Any:
    """The images and depths (a NyuFolder or a NyuMat): --nyu-dir, --nyu-mat, or the synthetic
    sample (built in `cache_dir` on first use)."""
    from support.evaluations.nyu_distance.folder import NyuFolder
    from support.evaluations.nyu_distance.mat import NyuMat
    from support.evaluations.nyu_distance.synthetic import ensure_nyu_mat

    if settings.folder:
        return NyuFolder(settings.folder)
    return NyuMat(settings.mat or ensure_nyu_mat(cache_dir))


def open_data(settings: NyuSettings | None, run: RunSettings) -> Any:
    """The images and depths opened again (the summary draws the marked images from them)."""
    return open_nyu(settings or NyuSettings(), run.output.cache_dir)


SPEC = EvaluationSpec(
    name="nyu_distance",
    title="nyu_distance (NYU Depth V2 3D distance between two marked points)",
    evaluation="support.evaluations.nyu_distance.task:NyuDistanceEvaluation",
    summary="support.evaluations.nyu_distance.summary",
    options=(
        Option(
            "--nyu-mat",
            metavar="PATH",
            help="NYU Depth V2 nyu_depth_v2_labeled.mat (MATLAB v7.3; fetch it with "
            "`python -m support.evaluations.nyu_distance.download --to DIR`); default: the "
            "synthetic sample",
        ),
        Option(
            "--nyu-dir",
            metavar="DIR",
            help="an extracted NYU folder (rgb/NNNN.jpg, depth/NNNN.npy, intrinsics.npy), such as "
            "the original's download script writes (its transposed, colour-wrapped images are "
            "read back right)",
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
    data_files=data_files,
    data_label=data_label,
    open_data=open_data,
    read_rules=READ_RULES,
    prompt_modules=("support.evaluations.nyu_distance.prompts",),
)
