"""The surgvqa evaluation's plugin spec: its options and settings (imported at start-up)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.contract.data_paths import SYNTHETIC_FIX, built_label, existing_folder, holds_data
from support.contract.evaluation import EvaluationSpec, Option, OptionError
from support.evaluations.surgvqa.leaderboard import TEXT_SCORES
from support.evaluations.surgvqa.profiles import PROFILES, WRITEUP, SurgvqaProfile
from support.evaluations.surgvqa.read_rules import READ_RULES
from support.evaluations.surgvqa.semantic import (
    BERTSCORE_ID,
    NLI_ID,
    NO_BASELINE,
    ModelNotFound,
    ScorerInputError,
    ScoringModels,
    find_models,
)
from support.settings import RunSettings

VQA_FRAMES = 8  # frames of a question's clip shown to the model (30-s clips: one every ~4 s)
# --surgvqa-input: frames (the clip as --surgvqa-frames still images, the write-up's way) or
# video (the clip as one video part, sampled at --surgvqa-fps)
INPUTS = ("frames", "video")
VIDEO_FPS = 1.0  # frames/s a clip is sampled at as video: SurgVU's "@ 1FPS"
BOX_FRAMES = ("model", "auto", "pixels", "norm1000", "gemini")
# what --surgvqa-root must hold below it: a category-2 question or a category-1 video
DATA_FILES = ("*_question.json", "*_fps1.mp4")
# --surgvqa-metrics: 2025 = the write-up's BLEU; 2026 = the current official set (BERTScore-F1,
# NLI entailment, NLI x BERT, BLEU, ROUGE-1/2/L); auto = 2026's metrics whose models are here
METRIC_PROFILES = ("auto", "2025", "2026")
TEXT_METRICS = {"2025": ("bleu",), "2026": TEXT_SCORES, "auto": TEXT_SCORES}


@dataclass(frozen=True)
class SurgvqaSettings:
    root: str | None = None  # extracted SurgVU data; None: the synthetic sample
    frames: int = VQA_FRAMES  # per VQA question, evenly spaced over the clip
    input: str = "frames"  # --surgvqa-input: how a question's clip is sent (INPUTS)
    fps: float = VIDEO_FPS  # --surgvqa-fps: the video input's sampling rate (frames/s)
    box_frame: str = "model"  # how answers' box numbers are read; "model": by the model's name
    # by --compat (profiles.py); source: map_video_mean as the official category-1 evaluator, and
    # the 2026 VQA scorer's behaviour on empty answers and softmax overflow (semantic.py)
    profile: SurgvqaProfile = WRITEUP
    metrics: str = "auto"  # --surgvqa-metrics, as given
    text_metrics: tuple[str, ...] = TEXT_METRICS["auto"]  # scored per case, on the workers
    # BERTScore and NLI models (scored on the controller, summary.score_outcomes); None: not scored
    scoring: ScoringModels | None = None
    left_out: str | None = None  # why `auto` scores no BERTScore and NLI (the missing model)


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
    sent = values.get("surgvqa_input") or "frames"
    if sent not in INPUTS:
        raise OptionError("--surgvqa-input", f"{sent!r}: one of {', '.join(INPUTS)}")
    fps = values.get("surgvqa_fps")
    fps = VIDEO_FPS if fps is None else fps
    if not isinstance(fps, (int, float)) or not 0 < fps <= MAX_FPS:
        raise OptionError("--surgvqa-fps", f"{fps!r}: expected frames/s > 0 and <= {MAX_FPS:g}")
    if sent == "video":
        refuse_models_without_video(run)
    box_frame = values.get("surgvqa_box_frame") or "model"
    if box_frame not in BOX_FRAMES:
        raise OptionError("--surgvqa-box-frame", f"{box_frame!r}: one of {', '.join(BOX_FRAMES)}")
    # `compat` changes map_video_mean and the 2026 scorer's edge cases (profiles.py)
    rules = PROFILES[run.compat]
    profile = values.get("surgvqa_metrics") or "auto"
    if profile not in METRIC_PROFILES:
        raise OptionError("--surgvqa-metrics", f"{profile!r}: one of {', '.join(METRIC_PROFILES)}")
    scoring, left_out = None, None
    if profile != "2025":
        scoring, left_out = scoring_models(values, required=profile == "2026")
    return SurgvqaSettings(
        root=root,
        frames=frames,
        input=sent,
        fps=float(fps),
        box_frame=box_frame,
        profile=rules,
        metrics=profile,
        text_metrics=TEXT_METRICS[profile],
        scoring=scoring,
        left_out=left_out,
    )


MAX_FPS = 30.0  # --surgvqa-fps's ceiling (frames/s): vLLM's Qwen video loaders cap there too


def refuse_models_without_video(run: RunSettings) -> None:
    """OptionError naming --surgvqa-input when a --model takes no video (its modalities: a local
    family without a video processor, a `python:` model that declares none), with the
    alternative. Names the registry does not know are left to the model options' own check."""
    from support.backends.registry import model_spec

    refused = []
    for name in run.models.names:
        try:
            reads = model_spec(name).modalities
        except ValueError:
            continue
        if "video" not in reads:
            refused.append(f"{name} (reads {', '.join(sorted(reads))})")
    if refused:
        raise OptionError(
            "--surgvqa-input",
            f"video: {'; '.join(refused)} take no video; send the clip as still frames with "
            "--surgvqa-input frames",
        )


MODEL_OPTIONS = ("surgvqa_bertscore_model", "surgvqa_nli_model", "surgvqa_bertscore_layers",
                 "surgvqa_bertscore_baseline")  # fmt: skip


def scoring_models(
    values: Mapping[str, Any], required: bool
) -> tuple[ScoringModels | None, str | None]:
    """The BERTScore and NLI models, found on disk, their files and the rescale baseline's
    looked at (semantic.find_models); when one is missing or cannot work, a usage error if they
    are `required` or a model option was given, else (None, why) for `auto` to say (the default
    models, or bert-score's baseline, broken in this machine's caches)."""
    layers = values.get("surgvqa_bertscore_layers")
    if layers is not None and (not isinstance(layers, int) or layers < 0):
        raise OptionError("--surgvqa-bertscore-layers", f"{layers!r}: expected a whole number >= 0")
    try:
        return find_models(
            values.get("surgvqa_bertscore_model") or BERTSCORE_ID,
            values.get("surgvqa_nli_model") or NLI_ID,
            layers,
            values.get("surgvqa_bertscore_baseline") or None,
        ), None
    except (ModelNotFound, ScorerInputError) as exc:
        if required or any(values.get(k) is not None for k in MODEL_OPTIONS):
            raise
        return None, str(exc)


def data_files(settings: SurgvqaSettings, run: RunSettings) -> list[Path]:
    """What the evaluation reads (for the manifest's fingerprint): the synthetic sample's folder,
    or, below --surgvqa-root, each case's question, answers and clip and each test video with its
    ground truth (the files support.evaluations.surgvqa.dataset opens, not the rest of the
    folder)."""
    if settings.root is None:
        from support.evaluations.surgvqa.synthetic import ensure_surgvu

        return [ensure_surgvu(run.output.cache_dir)]  # built by the run already: returned as is
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
        return built_label(settings.root, run.output.cache_dir, "SurgVU")
    return "synthetic sample (support/evaluations/surgvqa/synthetic.py; not the real SurgVU)"


def notes(settings: SurgvqaSettings | None) -> list[str]:
    """The loading lines' note: the 2026 metrics `auto` leaves out, and why."""
    if settings is None or not settings.left_out:
        return []
    return [
        "BERTScore-F1, NLI entailment and NLI x BERT (SurgVU 2026) are not scored: "
        f"{settings.left_out}"
    ]


SPEC = EvaluationSpec(
    name="surgvqa",
    title="surgvqa (SurgVU: surgical VQA by BERTScore, NLI, BLEU and ROUGE, tool detection by "
    "COCO mAP)",
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
            "--surgvqa-input",
            default="frames",
            metavar="HOW",
            help="how a question's clip is sent: frames (--surgvqa-frames still images, the "
            "write-up's way) or video (the clip as one video part sampled at --surgvqa-fps, as "
            "each engine takes video; a model that takes none is refused) (frames)",
        ),
        Option(
            "--surgvqa-fps",
            type=float,
            default=VIDEO_FPS,
            metavar="F",
            help=f"frames per second a clip is sampled at under --surgvqa-input video "
            f"({VIDEO_FPS:g}, SurgVU's rate)",
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
        Option(
            "--surgvqa-metrics",
            default="auto",
            metavar="PROFILE",
            help="the VQA metrics: 2025 (the write-up's max sentence-BLEU), 2026 (SurgVU 2026's "
            "official set: BERTScore-F1, NLI entailment, NLI x BERT, BLEU-4, ROUGE-1/2/L; the "
            "BERTScore and NLI models must be on this machine), auto (2026's metrics whose "
            "models are here; the run says which are left out and why) (auto)",
        ),
        Option(
            "--surgvqa-bertscore-model",
            metavar="ID|DIR",
            help=f"BERTScore's model: a hub id in the local Hugging Face cache or a folder "
            f"({BERTSCORE_ID}, as the official evaluator; never downloaded)",
        ),
        Option(
            "--surgvqa-bertscore-layers",
            type=int,
            metavar="N",
            help="the hidden layer BERTScore takes (default: bert_score's table for the model, "
            "or for the --surgvqa-bertscore-baseline id; roberta-large: 17)",
        ),
        Option(
            "--surgvqa-bertscore-baseline",
            metavar="ID|TSV|none",
            help="BERTScore's rescale baseline: the id of a model whose English baseline ships "
            f"with bert-score (e.g. {BERTSCORE_ID} for a folder holding it), a TSV file, or "
            f"{NO_BASELINE} (unrescaled; the tables say so) (default: the one shipped for the "
            "model's id)",
        ),
        Option(
            "--surgvqa-nli-model",
            metavar="ID|DIR",
            help=f"the NLI cross-encoder: a hub id in the local Hugging Face cache or a folder "
            f"({NLI_ID}, as the official evaluator; never downloaded)",
        ),
    ),
    configure=configure,
    data_files=data_files,
    data_label=data_label,
    prompt_modules=("support.evaluations.surgvqa.prompts",),
    max_images=lambda settings: settings.frames,  # a VQA question's frames
    notes=notes,
    read_rules=READ_RULES,
)
