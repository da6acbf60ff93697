"""The surgvqa evaluation's plugin spec: its options and settings (imported at start-up)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.data_paths import SYNTHETIC_FIX, built_label, existing_folder, holds_data
from support.evaluation import EvaluationSpec, Option, OptionError
from support.evaluations.surgvqa.rules import PROFILES, WRITEUP, SurgvqaRules
from support.settings import RunSettings

VQA_FRAMES = 8  # frames of a question's clip shown to the model (30-s clips: one every ~4 s)
BOX_FRAMES = ("model", "auto", "pixels", "norm1000", "gemini")
# what --surgvqa-root must hold below it: a category-2 question or a category-1 video
DATA_FILES = ("*_question.json", "*_fps1.mp4")


@dataclass(frozen=True)
class SurgvqaSettings:
    root: str | None = None  # extracted SurgVU data; None: the synthetic sample
    frames: int = VQA_FRAMES  # per VQA question, evenly spaced over the clip
    box_frame: str = "model"  # how answers' box numbers are read; "model": by the model's name
    # by --compat (rules.py); source: map_video_mean as the official category-1 evaluator
    rules: SurgvqaRules = WRITEUP


def configure(values: Mapping[str, Any], run: RunSettings) -> SurgvqaSettings:
    root = values.get("surgvqa_root") or None
    if root:
        fix = f"pass the folder the SurgVU data was extracted to, {SYNTHETIC_FIX}"
        folder = existing_folder("--surgvqa-root", root, fix)
        what = "no caseNNN_question.json (category 2), no N_fps1.mp4 (category 1)"
        holds_data("--surgvqa-root", folder, DATA_FILES, what, fix)
    frames = values.get("surgvqa_frames")
    frames = VQA_FRAMES if frames is None else frames
    if not isinstance(frames, int) or frames < 1:
        raise OptionError("--surgvqa-frames", f"{frames!r}: expected a whole number >= 1")
    box_frame = values.get("surgvqa_box_frame") or "model"
    if box_frame not in BOX_FRAMES:
        raise OptionError("--surgvqa-box-frame", f"{box_frame!r}: one of {', '.join(BOX_FRAMES)}")
    # `compat` changes only map_video_mean (rules.py)
    rules = PROFILES[run.compat]
    return SurgvqaSettings(root=root, frames=frames, box_frame=box_frame, rules=rules)


def data_files(settings: SurgvqaSettings, run: RunSettings) -> list[Path]:
    """What the evaluation reads (for the manifest's fingerprint): the synthetic sample's folder,
    or, below --surgvqa-root, each case's question, answers and clip and each test video with its
    ground truth (the files support.evaluations.surgvqa.dataset opens, not the rest of the
    folder)."""
    if settings.root is None:
        from support.evaluations.surgvqa.synthetic import ensure_surgvu

        return [ensure_surgvu(run.cache_dir)]  # built by the run already: returned as is
    from support.evaluations.surgvqa.dataset import read_tools, read_vqa

    root = Path(settings.root)
    found: list[Path] = []
    for item in read_vqa(root):  # caseNNN_question.json, caseNNN.json, caseNNN.mp4: one folder
        folder = item.video.parent
        found += [folder / f"{item.case}_question.json", folder / f"{item.case}.json", item.video]
    for video in read_tools(root):  # N_fps1.mp4 with N_fps1_coco.json, else N_fps1_gc.json
        stem = str(video.video.with_suffix(""))
        coco = Path(f"{stem}_coco.json")
        found += [video.video, coco if coco.is_file() else Path(f"{stem}_gc.json")]
    return found


def data_label(run: RunSettings) -> str | None:
    """What the data is when it is not the real SurgVU (no --surgvqa-root, or a root inside a
    vlmbench cache's synthetic/ folder: the synthetic sample); None for the real data."""
    settings = run.evaluations.get("surgvqa") or SurgvqaSettings()
    if settings.root:
        return built_label(settings.root, run.cache_dir, "SurgVU")
    return "synthetic sample (support/evaluations/surgvqa/synthetic.py; not the real SurgVU)"


SPEC = EvaluationSpec(
    name="surgvqa",
    title="surgvqa (SurgVU: surgical VQA by max sentence-BLEU, tool detection by COCO mAP)",
    evaluation="support.evaluations.surgvqa.task:SurgvqaEvaluation",
    summary="support.evaluations.surgvqa.summary",
    options=(
        Option(
            "--surgvqa-root",
            metavar="DIR",
            help="extracted SurgVU data: the category-2 sample (caseNNN/ with caseNNN.mp4, "
            "caseNNN_question.json, caseNNN.json) and/or the category-1 test set (N_fps1.mp4 "
            "with N_fps1_coco.json or N_fps1_gc.json), found anywhere below DIR; default: the "
            "synthetic sample",
        ),
        Option(
            "--surgvqa-frames",
            type=int,
            default=VQA_FRAMES,
            metavar="N",
            help=f"frames of a question's clip shown with it, at the centres of N equal "
            f"segments of the clip ({VQA_FRAMES})",
        ),
        Option(
            "--surgvqa-box-frame",
            default="model",
            metavar="FRAME",
            help="how the numbers of an answer's boxes are read: model (the model's trait: "
            "Gemini box_2d 0-1000; a local model's family: Qwen2/Qwen3-VL 0-1000, Qwen2.5-VL "
            "pixels of its processor's resized input; else auto), auto (box_2d as Gemini, "
            "anything else as pixels), pixels, norm1000, gemini",
        ),
    ),
    configure=configure,
    data_files=data_files,
    data_label=data_label,
    prompt_modules=("support.evaluations.surgvqa.prompts",),
    max_images=lambda settings: settings.frames,  # a VQA question's frames
)
