"""surgvqa's clip as frames against as video: decode speed, and prompt tokens per family.

    python benchmarks/surgvqa_video.py [--cache-dir DIR] [--repeats 5]

A plain script, not a pytest module (CI never runs it). The token table needs the families'
video processors, which import torchvision: run it with the real-engine lane's venv
(`.ci/vllm-venv`); without torchvision it prints the decode table alone.

Decode. Two clips of 640x512 H.264 frames (the synthetic sample's, support.evaluations.surgvqa
.synthetic): a question's clip as the sample has it (8 s at 1 fps) and a 30-s clip at 30 fps (the
real category-2 clips' length; 900 frames). For each, the median over `--repeats` of the
milliseconds a clip takes to become what a request carries: under `frames` (the default) the 8
frames at the centres of 8 equal spans decoded and JPEG-encoded (task.SurgvqaEvaluation.clip);
under `video` the clip read through the video door at 1 fps (support.videos.read_clip: header
checks, then frames decoded up to the last one sampled). Frames/s is the stream's frames decoded
per second of that time.

Tokens. For each tiny family checkpoint the suite builds (support.doubles.tiny_families: the
family's real processor classes with small pixel limits, so absolute counts are the tiny
checkpoints', not the released models'), a VQA request of the 8-s clip as `hf:` renders and
processes it (support.backends.local_tokens.processor_inputs, the call vLLM's counts were checked
equal to in the real-engine lane): the prompt's tokens under `frames` (8 JPEG frames and the
frames prompt) and under `video` (the clip at 1 fps and the video prompt).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from support.evaluations.surgvqa.synthetic import ensure_surgvu  # noqa: E402
from support.evaluations.surgvqa.task import jpeg  # noqa: E402
from support.evaluations.surgvqa.video import (  # noqa: E402
    evenly_spaced,
    frame_count,
    read_frames,
    write_video,
)
from support.videos import probe_video, read_clip  # noqa: E402

FRAMES = 8  # --surgvqa-frames' default
FPS = 1.0  # --surgvqa-fps' default
FAMILIES = ("qwen2_5_vl", "qwen3_vl", "llava_onevision")


def as_frames(path: Path) -> list[bytes]:
    """What `frames` sends: 8 evenly spaced frames as JPEG (task.SurgvqaEvaluation.clip)."""
    indices = evenly_spaced(frame_count(path), FRAMES)
    return [jpeg(rgb) for rgb in read_frames(path, indices)]


def timed(fn, repeats: int) -> float:
    """Median milliseconds of `fn()` over `repeats` calls."""
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(runs)


def long_clip(where: Path, like: Path) -> Path:
    """A 30-s clip at 30 fps from the sample clip's frames (each held 30 frames, then moved)."""
    path = where / "clip-30s-30fps.mp4"
    if not path.exists():
        base = read_clip(like, fps=FPS).frames
        frames = [np.roll(base[(k // 30) % len(base)], k % 30, axis=1) for k in range(900)]
        write_video(path, frames, fps=30)
    return path


def decode_table(clips: dict[str, Path], repeats: int) -> None:
    print("| clip | input | ms a clip | frames sent | stream frames decoded | frames/s |")
    print("|---|---|---|---|---|---|")
    for name, path in clips.items():
        info = probe_video(path)
        ms = timed(lambda p=path: as_frames(p), repeats)
        last = evenly_spaced(info.frames, FRAMES)[-1] + 1
        print(f"| {name} | frames | {ms:.1f} | {FRAMES} | {last} | {last / ms * 1000:.0f} |")
        ms = timed(lambda p=path: read_clip(p, fps=FPS), repeats)
        clip = read_clip(path, fps=FPS)
        last = clip.indices[-1] + 1
        print(
            f"| {name} | video | {ms:.1f} | {len(clip.frames)} | {last} | {last / ms * 1000:.0f} |"
        )


def prompt_tokens(processor, family, request, clips=()) -> int:
    """The prompt's tokens as `hf:` processes `request` (its images and `clips` included)."""
    from support.backends.chat_template import render_prompt, request_images
    from support.backends.local_tokens import processor_inputs

    prompt = render_prompt(processor, request, family)
    images = request_images(request) or None
    inputs = processor(**processor_inputs(processor, family, [prompt], images, clips))
    return int(inputs["attention_mask"][0].sum())


def token_table(cache: Path, path: Path) -> None:
    from support.backends.families import family_of
    from support.backends.local_tokens import local_processor
    from support.doubles.tiny_families import ensure_family
    from support.evaluations.surgvqa.prompts import vqa_prompt, vqa_video_prompt
    from support.types import Part, Request

    question = "Was a needle driver used during the surgery?"
    clip = read_clip(path, fps=FPS)
    frames_request = Request(
        parts=(
            *(Part.of_image(j) for j in as_frames(path)),
            Part.of_text(vqa_prompt(question, FRAMES)),
        )
    )
    video_request = Request(
        parts=(Part.of_video(clip), Part.of_text(vqa_video_prompt(question, clip.seconds, FPS)))
    )
    text_request = Request(parts=(Part.of_text(vqa_prompt(question, FRAMES)),))
    print("| family | frames: prompt tokens | video: prompt tokens | video / frames |")
    print("|---|---|---|---|")
    for name in FAMILIES:
        folder = str(ensure_family(cache, name))
        family = family_of(folder)
        processor = local_processor(folder)

        frames = prompt_tokens(processor, family, frames_request)
        video = prompt_tokens(processor, family, video_request, [clip])
        text = prompt_tokens(processor, family, text_request)
        print(
            f"| {name} | {frames} ({frames - text} for the frames) | {video} | "
            f"{video / frames:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        cache = args.cache_dir or Path(scratch)
        short = next(ensure_surgvu(cache).rglob("case001.mp4"))
        clips = {"8 s at 1 fps (the sample's)": short, "30 s at 30 fps": long_clip(cache, short)}
        decode_table(clips, args.repeats)
        print()
        if importlib.util.find_spec("torchvision") is None:
            print("tokens: torchvision is not installed here (run with .ci/vllm-venv's python)")
            return
        token_table(cache, short)


if __name__ == "__main__":
    main()
