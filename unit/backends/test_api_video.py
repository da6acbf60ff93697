"""A clip through each API provider, by the real SDKs against the loopback (127.0.0.1).

OpenAI and Anthropic take no video: the clip goes as its frames, each after a text stating its
time, and the outcome records the adaptation. Gemini takes it as one inline video part with the
rate it was sampled at. An openai-compatible server takes the file as its `video_url`. A clip
the vendor would refuse (over Anthropic's images a request, over Gemini's inline limit) is a
per-request error naming the limit, and nothing is sent. The dry run counts a clip's tokens.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

from support.backends import api_models as am
from support.backends.anthropic_messages import AnthropicBackend
from support.backends.base import BackendError, BackendOptions
from support.backends.gemini import GEMINI_INLINE_BYTES, GeminiBackend
from support.backends.openai_chat import (
    OpenAIChatBackend,
    OpenAICompatibleBackend,
    _dumps,
    openai_body,
    openai_params,
)
from support.backends.registry import model_spec
from support.backends.tokens import (
    anthropic_image_tokens,
    openai_image_tokens,
    request_tokens,
    text_tokens,
)
from support.doubles.loopback import LoopbackServer, ScriptRequest
from support.evaluations.surgvqa.video import write_video
from support.types import Part, Request
from support.videos import Clip, read_clip

KEY = "sk-video-test-0123456789"
QUESTION = "What happens in the clip?"
SIZE = (48, 64)  # (H, W) of each frame, px


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Clip:
    """Three 64x48 frames at 1 fps as H.264 mp4, read back at 1 fps."""
    path = tmp_path_factory.mktemp("clip") / "clip.mp4"
    frames = [np.full((*SIZE, 3), 40 * (i + 1), dtype=np.uint8) for i in range(3)]
    write_video(path, frames, fps=1)
    return read_clip(path, fps=1.0)


def video_request(clip: Clip) -> Request:
    return Request(parts=(Part.of_video(clip), Part.of_text(QUESTION)), max_tokens=16)


seen: list[ScriptRequest] = []


def script(request: ScriptRequest) -> str:
    seen.append(request)
    return "B"


def ask(backend, request: Request):
    async def go():
        try:
            return await backend.generate(request)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def bodies(folder: Path) -> list[dict]:
    return [json.loads(p.read_bytes()) for p in sorted(folder.glob("*.json"))]


def build(kind: str, model_id: str, url: str):
    """A backend of `kind` for `model_id` at the loopback's `url`."""
    if kind == "openai":
        return OpenAIChatBackend(f"openai:{model_id}", model_id, api_key=KEY, base_url=url + "/v1")
    if kind == "openai-compatible":
        name = f"openai-compatible:{model_id}"
        return OpenAICompatibleBackend(name, model_id, api_key=KEY, base_url=url + "/v1")
    if kind == "anthropic":
        return AnthropicBackend(f"anthropic:{model_id}", model_id, api_key=KEY, base_url=url)
    return GeminiBackend(f"google:{model_id}", model_id, api_key=KEY, base_url=url)


def sent(kind: str, model_id: str, request: Request, tmp_path: Path):
    """(response, the one body the loopback received, what its script saw)."""
    seen.clear()
    with LoopbackServer(script, api_key=KEY, record_dir=tmp_path / "bodies") as server:
        response = ask(build(kind, model_id, server.url), request)
        assert server.stats.refused == 0, server.stats.refusals
    (body,) = bodies(tmp_path / "bodies")
    return response, body, seen[-1]


def labels(clip: Clip) -> list[str]:
    return [am.FRAME_LABEL.format(seconds=t) for t in clip.timestamps]


def test_the_clip_is_three_frames_a_second_apart(clip):
    assert len(clip.frames) == 3 and clip.timestamps == pytest.approx((0.0, 1.0, 2.0))
    assert labels(clip) == ["Frame at 0.0 s:", "Frame at 1.0 s:", "Frame at 2.0 s:"]


@pytest.mark.parametrize("model_id", ["gpt-4o", "gpt-5.4"])
def test_openai_gets_the_frames_each_after_its_time(clip, tmp_path, model_id):
    response, body, request = sent("openai", model_id, video_request(clip), tmp_path)
    assert response.texts == ("B",)
    # gpt-5.4, a reasoning model, goes through the Responses API (api_models.RESPONSES)
    responses = am.rules_for("openai", model_id).api == am.RESPONSES
    text, image = ("input_text", "input_image") if responses else ("text", "image_url")
    content = (body["input"] if responses else body["messages"])[-1]["content"]
    assert [c["type"] for c in content] == [text, image] * 3 + [text]
    assert [c["text"] for c in content if c["type"] == text] == [*labels(clip), QUESTION]
    urls = [c["image_url"] if responses else c["image_url"]["url"] for c in content
            if c["type"] == image]  # fmt: skip
    assert all(u.startswith("data:image/jpeg;base64,/9j/") for u in urls)  # JPEG frames
    assert "video_url" not in json.dumps(body)
    assert (request.n_images, request.n_videos) == (3, 0)
    assert "video sent as 3 frames with their timestamps (the API takes no video)" in (
        response.adapted
    )


def test_openai_body_splices_each_frame_as_the_sdk_would_send_it(clip):
    request = video_request(clip)
    rules = am.rules_for("openai", "gpt-4o")
    spliced = json.loads(openai_body(request, "gpt-4o", False, rules=rules))
    plain = json.loads(_dumps(openai_params(request, "gpt-4o", False, rules=rules)))
    assert spliced == plain


def test_anthropic_gets_the_frames_each_after_its_time(clip, tmp_path):
    response, body, request = sent("anthropic", "claude-sonnet-4-6", video_request(clip), tmp_path)
    content = body["messages"][0]["content"]
    assert [c["type"] for c in content] == ["text", "image"] * 3 + ["text"]
    assert [c["text"] for c in content if c["type"] == "text"] == [*labels(clip), QUESTION]
    sources = [c["source"] for c in content if c["type"] == "image"]
    assert {s["media_type"] for s in sources} == {"image/jpeg"}
    assert (request.n_images, request.n_videos) == (3, 0)
    assert am.VIDEO_AS_FRAMES.format(frames=3) in response.adapted


def test_gemini_gets_one_inline_video_part_at_its_sampling_rate(clip, tmp_path):
    response, body, request = sent("google", "gemini-2.5-flash", video_request(clip), tmp_path)
    parts = body["contents"][0]["parts"]
    assert len(parts) == 2 and parts[1] == {"text": QUESTION}
    video = parts[0]
    blob = video["inlineData"]  # google-genai 3.x writes the blob's type in snake case
    assert blob.get("mimeType", blob.get("mime_type")) == "video/mp4"
    assert base64.urlsafe_b64decode(blob["data"]) == clip.data  # the SDK's URL-safe base64
    assert video["videoMetadata"] == {"fps": 1.0}
    assert (request.n_images, request.n_videos) == (0, 1)
    assert not any("video" in a for a in response.adapted)


def test_openai_compatible_gets_the_file_as_its_video_url(clip, tmp_path):
    response, body, request = sent("openai-compatible", "loop-model", video_request(clip), tmp_path)
    content = body["messages"][-1]["content"]
    assert [c["type"] for c in content] == ["video_url", "text"]
    url = content[0]["video_url"]["url"]
    assert url == "data:video/mp4;base64," + base64.b64encode(clip.data).decode("ascii")
    assert (request.n_images, request.n_videos) == (0, 1) and response.adapted == ()


def test_a_server_that_takes_no_video_is_sent_the_frames_under_server_video_frames(
    clip, tmp_path, monkeypatch
):
    """`--server-video frames`: the clip as its timestamped frames, recorded as adapted, and the
    answers cached apart from the native path's (the identity says so; the default's does not)."""
    seen.clear()
    monkeypatch.setenv("VLMBENCH_API_KEY", KEY)
    opts = BackendOptions(api_base="http://unused/v1", server_video="frames")
    with LoopbackServer(script, api_key=KEY, record_dir=tmp_path / "bodies") as server:
        opts = dataclasses.replace(opts, api_base=server.url + "/v1")
        backend = OpenAICompatibleBackend.create("openai-compatible:loop-model", "loop-model", opts)
        response = ask(backend, video_request(clip))
    (body,) = bodies(tmp_path / "bodies")
    content = body["messages"][-1]["content"]
    assert [c["type"] for c in content] == ["text", "image_url"] * 3 + ["text"]
    assert [c["text"] for c in content if c["type"] == "text"] == [*labels(clip), QUESTION]
    assert response.adapted == (
        "video sent as 3 frames with their timestamps (the API takes no video)",
    )
    assert backend.identity["video"] == "frames"
    native = OpenAICompatibleBackend.create(
        "openai-compatible:loop-model",
        "loop-model",
        dataclasses.replace(opts, server_video="native"),
    )
    assert "video" not in native.identity and native.rules.video == am.NATIVE


def fake_clip(frames: int, data: bytes = b"\0" * 64, mime: str = "video/mp4") -> Clip:
    """A Clip made in place (what read_clip returns), for sizes no test should write."""
    pixels = tuple(np.zeros((*SIZE, 3), np.uint8) for _ in range(frames))
    times = tuple(float(t) for t in range(frames))
    return Clip(data, mime, pixels, times, 1.0, None, 1.0, tuple(range(frames)), frames, frames)


def refused(kind: str, model_id: str, request: Request) -> str:
    """The per-request error of `request`, checked to have sent nothing."""
    with LoopbackServer(script, api_key=KEY) as server:
        with pytest.raises(BackendError) as caught:
            ask(build(kind, model_id, server.url), request)
        assert server.stats.attempts == 0  # refused before it was sent
    return str(caught.value)


def test_a_clip_over_anthropics_images_a_request_is_refused_naming_the_limit():
    message = refused("anthropic", "claude-haiku-4-5", video_request(fake_clip(101)))
    assert "101 images in one request" in message and "at most 100" in message
    assert "clip's frames" in message


def test_a_clip_over_geminis_inline_limit_is_refused_naming_it_and_the_file_size():
    big = fake_clip(3, data=b"\0" * (GEMINI_INLINE_BYTES * 3 // 4 + 3))
    message = refused("google", "gemini-2.5-flash", video_request(big))
    assert "at most 100 MB inline" in message and "the clip's file: 75.0 MB" in message


def test_a_clip_of_a_type_gemini_does_not_take_is_refused():
    odd = fake_clip(3, mime="video/x-matroska")
    assert "video/x-matroska" in refused("google", "gemini-2.5-flash", video_request(odd))


def test_each_api_provider_reads_video():
    for name in ("openai:gpt-4o", "anthropic:claude-opus-4-7", "google:gemini-2.5-flash"):
        assert "video" in model_spec(name).modalities, name
        assert model_spec(name).traits["modalities"] == "text,image,video"


def test_frames_are_encoded_once_a_clip(clip):
    rules = am.rules_for("anthropic", "claude-opus-4-7")
    first = am.plan(video_request(clip), rules).request.parts[:6]
    second = am.plan(video_request(clip), rules).request.parts[:6]
    assert [p.kind for p in first] == ["text", "image"] * 3
    assert all(a is b for a, b in zip(first, second, strict=True))


def test_a_request_without_a_clip_is_planned_as_before():
    request = Request(parts=(Part.of_text("q"),))
    for provider in ("openai", "anthropic", "google"):
        planned = am.plan(request, am.rules_for(provider, "gpt-4o"))
        assert planned.request is request and planned.adapted == ()


# -- the dry run's count ---------------------------------------------------------------------


def test_dry_run_counts_a_clip_as_each_provider_is_sent_it(clip):
    request = video_request(clip)
    h, w = SIZE
    stated = sum(text_tokens("openai", t) for t in labels(clip))
    count = request_tokens("openai", request, "gpt-4o")
    assert count.video == 3 * openai_image_tokens(w, h) + stated == 3 * 255 + stated
    assert count.total == count.text + count.image + count.video and count.image == 0
    stated = sum(text_tokens("anthropic", t) for t in labels(clip))
    assert request_tokens("anthropic", request).video == 3 * 5 + stated  # ceil(64*48/750)
    assert anthropic_image_tokens(w, h) == 5
    seconds = math.ceil(clip.seconds)
    assert request_tokens("google", request, "gemini-2.5-flash").video == 3 * 258 + 32 * seconds
    assert request_tokens("google", request, "gemini-3.6-flash").video == 3 * 70 + 32 * seconds


def test_a_local_model_without_its_processor_counts_the_frames_as_images(clip):
    count = request_tokens("vllm", video_request(clip), "no-such-org/no-such-model")
    assert count.video == 3 * openai_image_tokens(*SIZE[::-1])


def test_a_request_without_a_clip_counts_as_before():
    count = request_tokens("openai", Request(parts=(Part.of_text("abcd" * 10),)), "gpt-4o")
    assert count.video == 0 and count.total == count.text
