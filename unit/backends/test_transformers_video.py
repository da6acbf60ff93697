"""The transformers backend (`hf:`) takes a clip: on the tiny Qwen2.5-VL, Qwen3-VL and
LLaVA-OneVision checkpoints (support.doubles.tiny_families), a request with a video part runs
through the backend, and the prompt the model is given holds exactly the tokens the family's
processor expands the clip to, counted here from the prompt's parts: the template's text, the
video grid (frames over the temporal patch of 2, the resized frame in patches, merged 2 x 2),
Qwen2.5-VL's seconds per temporal patch, Qwen3-VL's per-frame timestamps. A family without a
video processor (LLaVA) refuses a clip, request by request.

The Qwen and LLaVA-OneVision video processors import torchvision, which the unit lane's venv
lacks: those tests are skipped there and run in the real-engine lane's venv (marked `vllm`, as
.ci/vllm selects them; no vLLM is used). The modalities and the refusal need no torchvision.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")  # HF_HUB_OFFLINE: unit/conftest.py

from support.backends.base import BackendError
from support.backends.chat_template import render_prompt
from support.backends.families import FAMILIES
from support.backends.transformers_local import TransformersBackend
from support.client.engine import ModelClient
from support.evaluations.surgvqa.video import write_video
from support.types import Part, Request
from support.videos import Clip, read_clip
from unit.helpers.video_families import VIDEO_FAMILIES, needs_torchvision

FRAMES, WIDTH, HEIGHT = 8, 640, 512  # the test clip: 8 frames of 640x512 px at 1 fps
QUESTION = "What happens in the clip?"


def frames(n: int) -> list[np.ndarray]:
    """`n` frames of a gradient that shifts each frame (small as H.264)."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    return [
        np.stack([(x + 16 * k) % 256, (y + 8 * k) % 256, np.full_like(x, 40 * k % 256)], -1).astype(
            np.uint8
        )
        for k in range(n)
    ]


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Clip:
    """8 frames at 1 fps read at 1 fps: every frame kept (do_sample_frames True)."""
    path = tmp_path_factory.mktemp("clip") / "clip.mp4"
    write_video(path, frames(FRAMES), fps=1)
    return read_clip(path, fps=1.0)


@pytest.fixture(scope="module")
def sparse_clip(tmp_path_factory) -> Clip:
    """8 frames at 2 fps read at 1 fps: frames 0, 2, 4, 6 (do_sample_frames False)."""
    path = tmp_path_factory.mktemp("clip") / "clip2fps.mp4"
    write_video(path, frames(FRAMES), fps=2)
    return read_clip(path, fps=1.0)


@pytest.fixture(scope="module")
def folders(shared_cache: Path) -> dict[str, Path]:
    from support.doubles.tiny_families import ensure_family

    return {f: ensure_family(shared_cache, f) for f in VIDEO_FAMILIES}


@pytest.fixture(scope="module")
def backends(folders) -> dict[str, TransformersBackend]:
    """Each family's backend, loaded once (the models are tiny: a second or so each)."""
    out = {}
    for family, folder in folders.items():
        b = TransformersBackend(f"hf:{family}", str(folder))
        b.load()
        out[family] = b
    return out


def video_request(clip: Clip) -> Request:
    return Request(parts=(Part.of_video(clip), Part.of_text(QUESTION)), max_tokens=3)


def generated(backend, monkeypatch, requests: list[Request]) -> tuple[list, list[dict]]:
    """The responses to `requests` (one batch) and each model.generate call's inputs."""
    seen: list[dict] = []
    real = backend.model.generate

    def spy(**kwargs):
        seen.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(backend.model, "generate", spy)
    return asyncio.run(backend.generate_batch(requests)), seen


def unexpanded(backend, request: Request) -> int:
    """Tokens of the rendered prompt with each placeholder one token (nothing expanded)."""
    prompt = render_prompt(backend.processor, request, backend.family)
    return len(backend.processor.tokenizer(prompt)["input_ids"])


def video_grid(backend, clip: Clip, **kwargs) -> tuple[int, int, int]:
    """(t, h, w) patches of the clip from the family's video processor alone."""
    out = backend.processor.video_processor(videos=[clip.array()], return_tensors="pt", **kwargs)
    t, h, w = (int(v) for v in out["video_grid_thw"][0])
    return t, h, w


# -- which families read video: no torchvision needed ---------------------------------------------


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_a_family_with_a_video_processor_reads_video(family, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": [family.architecture]}))
    backend = TransformersBackend("hf:m", str(tmp_path))  # the family read off config.json
    want = {"text", "image", "video"} if family.video else {"text", "image"}
    assert backend.modalities == want
    assert (family.name in VIDEO_FAMILIES) <= family.video


def test_a_family_without_video_refuses_a_clip_per_request(shared_cache, clip):
    from support.doubles.tiny_vlm import ensure_tiny_vlm

    llava = ensure_tiny_vlm(shared_cache)
    client = ModelClient(TransformersBackend(f"hf:{llava}", str(llava)), cache=None, concurrency=1)

    async def go():
        text = Request(parts=(Part.of_text(QUESTION),), max_tokens=2)
        return await asyncio.gather(
            client.generate(video_request(clip)), client.generate(text), return_exceptions=True
        )

    refused, answered = asyncio.run(go())
    assert isinstance(refused, BackendError)
    assert f"hf:{llava} reads image, text; this request holds video" in str(refused)
    assert not isinstance(answered, Exception) and answered.usage.input_tokens > 0


# -- the prompt the model is given ----------------------------------------------------------------


@needs_torchvision
def test_qwen2_5_vl_prompt_holds_the_expanded_clip(backends, clip, monkeypatch):
    b = backends["qwen2_5_vl"]
    request = video_request(clip)
    (response,), (call,) = generated(b, monkeypatch, [request])
    t, h, w = video_grid(b, clip, video_metadata=[metadata(clip)])
    merge = b.processor.video_processor.merge_size  # 2: 2 x 2 patches a token
    assert t == math.ceil(FRAMES / 2)  # temporal patch 2
    video_tokens = t * h * w // merge**2
    assert response.usage.input_tokens == unexpanded(b, request) - 1 + video_tokens
    assert int(call["attention_mask"].sum()) == response.usage.input_tokens
    # seconds a temporal patch: 2 frames at the sampled 1 fps (not the processor's default 2 fps)
    assert call["second_per_grid_ts"].tolist() == [2.0]
    assert call["video_grid_thw"].tolist() == [[t, h, w]]


def metadata(clip: Clip) -> dict:
    return {k: v for k, v in clip.metadata().items() if k != "do_sample_frames"}


def qwen3_expansion(b, clip: Clip, times: list[float], sample: bool) -> int:
    """Tokens Qwen3-VL's processor writes for a clip: per merged frame pair its time as text,
    then vision start, the pair's tokens, vision end."""
    t, h, w = video_grid(b, clip, video_metadata=[metadata(clip)], do_sample_frames=sample)
    assert t == len(times)
    per_pair = h * w // b.processor.video_processor.merge_size**2
    tok = b.processor.tokenizer
    stamps = sum(
        len(tok(f"<{s:.1f} seconds>", add_special_tokens=False)["input_ids"]) for s in times
    )
    return stamps + t * (1 + per_pair + 1)


@needs_torchvision
def test_qwen3_vl_prompt_shows_each_frame_pairs_timestamp(backends, clip, sparse_clip, monkeypatch):
    b = backends["qwen3_vl"]
    full, sparse = video_request(clip), video_request(sparse_clip)
    responses, calls = generated(b, monkeypatch, [full, sparse])
    assert len(calls) == 2  # the clips differ in do_sample_frames: one processor call each
    # every frame kept (indices 0..7 at 1 fps): pairs at 0.5, 2.5, 4.5, 6.5 s
    full_times = [0.5, 2.5, 4.5, 6.5]
    # frames 0, 2, 4, 6 of a 2 fps stream: 0 and 1 s, then 2 and 3 s
    sparse_times = [0.5, 2.5]
    for response, call, request, c, times, sample in (
        (responses[0], calls[0], full, clip, full_times, True),
        (responses[1], calls[1], sparse, sparse_clip, sparse_times, False),
    ):
        n = unexpanded(b, request) - 1 + qwen3_expansion(b, c, times, sample)
        assert response.usage.input_tokens == n
        text = b.processor.tokenizer.decode(call["input_ids"][0])
        stamps = [f"<{s:.1f} seconds><|vision_start|><|video_pad|>" for s in times]
        assert all(s in text for s in stamps), text[:300]
        assert text.count("seconds>") == len(times)


@needs_torchvision
def test_llava_onevision_prompt_holds_each_frames_pooled_tokens(backends, clip, monkeypatch):
    b = backends["llava_onevision"]
    request = video_request(clip)
    (response,), (call,) = generated(b, monkeypatch, [request])
    vision = b.model.config.vision_config
    side = math.ceil(vision.image_size // vision.patch_size / 2)  # patches a side, pooled 2 x 2
    video_tokens = FRAMES * side * side + 1  # and one newline token for the clip
    assert response.usage.input_tokens == unexpanded(b, request) - 1 + video_tokens
    assert tuple(call["pixel_values_videos"].shape[:2]) == (1, FRAMES)  # every frame, not sampled
