"""A clip's prompt tokens on the local engines (support.backends.local_tokens): what each family's
processor is handed with a clip (as vLLM 0.32 hands it), the count `local_video_tokens` makes
with the model's own processor against what the `hf:` backend's prompt holds, its memos, and the
LookupError naming a model whose processor does not load.

Counting a clip needs the family's video processor, which imports torchvision: those tests are
skipped in the unit lane's venv and run in the real-engine lane's (marked `vllm`, as .ci/vllm
selects them; no vLLM is used).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")  # HF_HUB_OFFLINE: unit/conftest.py

from support.backends import local_tokens
from support.backends.families import BY_NAME
from support.backends.local_tokens import (
    clip_sampling,
    local_processor,
    local_video_tokens,
    video_kwargs,
)
from support.types import Part, Request
from support.videos import Clip, read_clip
from unit.helpers.video_families import VIDEO_FAMILIES, needs_torchvision

QUESTION = "What happens in the clip?"


def made_clip(indices: tuple[int, ...], total: int, fps: float = 2.0) -> Clip:
    """A Clip as read_clip makes it, holding frames `indices` of a `total`-frame stream."""
    frame = np.zeros((4, 6, 3), np.uint8)
    return Clip(
        data=b"not decoded here",
        mime="video/mp4",
        frames=tuple(frame for _ in indices),
        timestamps=tuple(i / fps for i in indices),
        fps=1.0,
        count=None,
        source_fps=fps,
        indices=indices,
        total_frames=total,
        seconds=total / fps,
    )


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Clip:
    """8 frames of 640x512 px at 1 fps, read at 1 fps (every frame kept)."""
    from support.evaluations.surgvqa.video import write_video

    y, x = np.mgrid[0:512, 0:640]
    frames = [
        np.stack([(x + 16 * k) % 256, (y + 8 * k) % 256, np.full_like(x, 30 * k)], -1).astype(
            np.uint8
        )
        for k in range(8)
    ]
    path = tmp_path_factory.mktemp("clip") / "clip.mp4"
    write_video(path, frames, fps=1)
    return read_clip(path, fps=1.0)


# -- what a family's processor is handed (vLLM's call) ---------------------------------------------


def test_each_family_is_handed_what_vllm_hands_it():
    sparse = made_clip((0, 2, 4, 6), total=8)  # every other frame: the processor keeps them
    full = made_clip(tuple(range(8)), total=8)  # every frame: the processor may sample anew
    qwen2_5 = video_kwargs(BY_NAME["qwen2_5_vl"], [sparse])
    assert set(qwen2_5) == {"videos", "video_metadata"}  # its own do_sample_frames (False)
    assert qwen2_5["videos"][0].shape == (4, 4, 6, 3)
    assert qwen2_5["video_metadata"] == [
        {
            "total_num_frames": 8,
            "fps": 2.0,  # the stream's: the processor reads the sampled rate, 4 / 8 * 2 = 1 fps
            "duration": 4.0,
            "video_backend": "pyav",
            "frames_indices": [0, 2, 4, 6],
        }
    ]
    for family, clip, sample in (("qwen3_vl", sparse, False), ("qwen3_vl_moe", full, True)):
        kwargs = video_kwargs(BY_NAME[family], [clip])
        assert kwargs["do_sample_frames"] is sample
        assert kwargs["video_metadata"][0]["frames_indices"] == list(clip.indices)
    for family in ("qwen2_vl", "llava_onevision"):  # vLLM's parser drops their metadata
        assert set(video_kwargs(BY_NAME[family], [sparse])) == {"videos"}
    assert video_kwargs(BY_NAME["qwen3_vl"], []) == {}


def test_one_processor_call_takes_one_sampling():
    sparse, full = made_clip((0, 2), total=4), made_clip((0, 1, 2, 3), total=4)
    qwen3 = BY_NAME["qwen3_vl"]
    assert clip_sampling(qwen3, [sparse, sparse]) is False
    assert clip_sampling(BY_NAME["qwen2_5_vl"], [sparse, full]) is None  # not given one
    with pytest.raises(ValueError, match="must agree on do_sample_frames"):
        video_kwargs(qwen3, [sparse, full])


# -- what cannot be counted ------------------------------------------------------------------------


def test_a_model_whose_processor_does_not_load_is_a_lookup_error_naming_it(tmp_path):
    clip = made_clip((0, 1), total=2)
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(LookupError, match="no-such-model: its processor does not load"):
        local_video_tokens(missing, None, clip)
    bare = tmp_path / "config-only"  # a Qwen3-VL's config and nothing else
    bare.mkdir()
    arch = BY_NAME["qwen3_vl"].architecture
    (bare / "config.json").write_text(json.dumps({"architectures": [arch]}))
    with pytest.raises(LookupError, match="config-only: its processor does not load"):
        local_video_tokens(str(bare), None, clip)


def test_a_family_without_video_is_a_lookup_error(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"architectures": [BY_NAME["llava"].architecture]})
    )
    with pytest.raises(LookupError, match="LlavaForConditionalGeneration takes no video"):
        local_video_tokens(str(tmp_path), None, made_clip((0,), total=1))


def test_the_processor_loads_once_per_model(shared_cache):
    pytest.importorskip("torch")
    from support.doubles.tiny_vlm import ensure_tiny_vlm

    model = str(ensure_tiny_vlm(shared_cache))  # a LLaVA: its processor needs no torchvision
    assert local_processor(model) is local_processor(model)


# -- the count against the hf: backend's prompt ----------------------------------------------------


@pytest.fixture(scope="module")
def folders(shared_cache: Path) -> dict[str, Path]:
    from support.doubles.tiny_families import ensure_family

    return {f: ensure_family(shared_cache, f) for f in VIDEO_FAMILIES}


@needs_torchvision
@pytest.mark.parametrize("family", VIDEO_FAMILIES)
def test_the_count_is_what_the_clip_adds_to_the_hf_prompt(folders, clip, family):
    from support.backends.transformers_local import TransformersBackend

    model = str(folders[family])
    backend = TransformersBackend(f"hf:{family}", model)
    with_clip = Request(parts=(Part.of_video(clip), Part.of_text(QUESTION)), max_tokens=1)
    text_only = Request(parts=(Part.of_text(QUESTION),), max_tokens=1)
    answers = asyncio.run(backend.generate_batch([with_clip, text_only]))
    added = answers[0].usage.input_tokens - answers[1].usage.input_tokens
    count = local_video_tokens(model, BY_NAME[family], clip)
    assert count == added > 8 * 4  # at least 4 tokens a frame (LLaVA-OneVision's pooled 2 x 2)
    assert local_video_tokens(model, None, clip) == count  # the family read off the folder


@needs_torchvision
def test_a_count_is_made_once_per_model_and_clip(folders, clip, monkeypatch):
    model = str(folders["qwen3_vl"])
    first = local_video_tokens(model, None, clip)

    def counted_again(*args, **kwargs):
        raise AssertionError("the processor ran again for a counted clip")

    monkeypatch.setattr(local_tokens, "prompt_tokens", counted_again)
    assert local_video_tokens(model, None, clip) == first
    other = made_clip((0, 1, 2, 3), total=4)  # another clip is counted: the processor runs
    with pytest.raises(AssertionError, match="ran again"):
        local_video_tokens(model, None, other)
