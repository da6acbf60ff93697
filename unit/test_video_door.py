"""support.videos, the one video door: the header checked before decoding (allow-lists and caps),
frames sampled at a rate or as a count with their timestamps, every bad file a VideoDecodeError
naming it; and the video Part: keyed by the clip's content and sampling, never its pixels."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from support import videos
from support.evaluations.surgvqa.video import write_video
from support.types import Part, Request
from support.videos import VideoDecodeError, probe_video, read_clip, sample_times

W, H = 96, 64  # px


def clip_file(path: Path, n: int = 6, fps: int = 1) -> Path:
    """An H.264 mp4 of `n` frames at `fps`, frame k a flat grey of 40 * k (k from the pixels)."""
    write_video(path, [np.full((H, W, 3), 40 * k, np.uint8) for k in range(n)], fps=fps)
    return path


def grey(frame: np.ndarray) -> int:
    """Which frame this is: its mean grey / 40, rounded (H.264 moves a flat grey by a unit)."""
    return round(float(frame.mean()) / 40)


@pytest.fixture(scope="module")
def six(tmp_path_factory) -> Path:
    return clip_file(tmp_path_factory.mktemp("video") / "six.mp4")


def test_the_header_is_read_without_decoding(six):
    info = probe_video(six)
    assert (info.container, info.codec, info.width, info.height) == (
        "mov,mp4,m4a,3gp,3g2,mj2",
        "h264",
        W,
        H,
    )
    assert info.fps == 1.0 and info.frames == 6 and info.seconds == pytest.approx(6.0)
    assert info.size == six.stat().st_size


def test_frames_at_a_rate_carry_their_timestamps(six):
    clip = read_clip(six, fps=0.5)  # one frame every 2 s: 0, 2, 4
    assert clip.timestamps == (0.0, 2.0, 4.0)
    assert [grey(f) for f in clip.frames] == [0, 2, 4]
    assert clip.frames[0].shape == (H, W, 3) and clip.frames[0].dtype == np.uint8
    assert (clip.fps, clip.count, clip.source_fps, clip.mime) == (0.5, None, 1.0, "video/mp4")
    every = read_clip(six, fps=1)
    assert every.timestamps == (0.0, 1.0, 2.0, 3.0, 4.0, 5.0)
    assert [grey(f) for f in every.frames] == [0, 1, 2, 3, 4, 5]


def test_frames_as_a_count_come_from_the_centres_of_equal_spans(six):
    clip = read_clip(six, count=3)  # spans of 2 s: centres 1, 3, 5
    assert clip.timestamps == (1.0, 3.0, 5.0)
    assert [grey(f) for f in clip.frames] == [1, 3, 5]
    many = read_clip(six, count=12)  # more than the clip has: each frame once
    assert many.timestamps == (0.0, 1.0, 2.0, 3.0, 4.0, 5.0)


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({}, "one of the two"),
        ({"fps": 1, "count": 2}, "one of the two"),
        ({"fps": 0}, "> 0"),
        ({"fps": float("nan")}, "> 0"),
        ({"count": 0}, ">= 1"),
        ({"fps": 1000}, "MAX_SAMPLED"),
    ],
)
def test_a_bad_sampling_is_refused(kw, says):
    with pytest.raises(ValueError, match=says):
        sample_times(6.0, **kw)


def test_the_identity_is_content_and_sampling_not_pixels(six, tmp_path):
    a, b = read_clip(six, fps=1), read_clip(six, fps=1)
    assert Part.of_video(a) == Part.of_video(b)
    assert Part.of_video(a).canonical() == Part.of_video(b).canonical()
    other_rate = Part.of_video(read_clip(six, fps=0.5))
    assert other_rate != Part.of_video(a)
    other_file = Part.of_video(read_clip(clip_file(tmp_path / "seven.mp4", n=7), fps=1))
    assert other_file.canonical()["video_sha256"] != Part.of_video(a).canonical()["video_sha256"]
    canonical = Part.of_video(a).canonical()
    assert set(canonical) == {"video_sha256", "mime", "sampling", "timestamps"}
    request = Request(parts=(Part.of_text("What happens?"), Part.of_video(a)))
    assert request.modalities == frozenset({"text", "video"})
    assert Part.of_video(a).kind == "video" and not Part.of_video(a).is_image
    with pytest.raises(ValueError, match="exactly one"):
        Part(text="x", video=a)


def test_a_broken_file_is_named(tmp_path, six):
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video at all" * 10)
    with pytest.raises(VideoDecodeError, match=r"junk\.mp4: cannot open the video"):
        read_clip(junk, count=2)
    missing = tmp_path / "missing.mp4"
    with pytest.raises(VideoDecodeError, match=r"missing\.mp4: cannot read the video"):
        probe_video(missing)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(six.read_bytes()[: six.stat().st_size // 3])
    with pytest.raises(VideoDecodeError, match=r"cut\.mp4"):
        read_clip(cut, fps=1)
    with pytest.raises(VideoDecodeError, match=r"^clip 7: "):
        read_clip(junk, count=2, label="clip 7")


def test_a_container_or_codec_off_the_lists_is_refused(tmp_path):
    path = tmp_path / "mjpeg.avi"
    with av.open(str(path), mode="w", format="avi") as out:
        stream = out.add_stream("mpeg2video", rate=1)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        for k in range(3):
            frame = av.VideoFrame.from_ndarray(np.full((H, W, 3), 40 * k, np.uint8), "rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    with pytest.raises(VideoDecodeError, match=r"mjpeg\.avi: codec 'mpeg2video' is not taken"):
        probe_video(path)


@pytest.mark.parametrize(
    ("cap", "value", "says"),
    [
        ("MAX_BYTES", 100, "MAX_BYTES"),
        ("MAX_SECONDS", 5.0, "MAX_SECONDS"),
        ("MAX_FRAMES", 5, "MAX_FRAMES"),
        ("MAX_FRAME_PIXELS", W * H - 1, "MAX_FRAME_PIXELS"),
    ],
)
def test_each_cap_is_checked_from_the_header(six, monkeypatch, cap, value, says):
    monkeypatch.setattr(videos, cap, value)
    with pytest.raises(VideoDecodeError, match=says):
        probe_video(six)
    monkeypatch.undo()
    probe_video(six)  # within the caps: read


@pytest.mark.parametrize(("cap", "value"), [("MAX_FRAMES", 3), ("MAX_FRAME_PIXELS", W * H - 1)])
def test_a_header_that_lies_is_caught_while_decoding(six, monkeypatch, cap, value):
    """A header that passed the caps (here: its check skipped) does not let larger frames or
    more of them through: the decode checks each frame too, and names the file."""
    monkeypatch.setattr(videos, "_check", lambda info, where: None)
    monkeypatch.setattr(videos, cap, value)
    with pytest.raises(VideoDecodeError, match=rf"^{six}: frame \d+ decodes at .*{cap}"):
        read_clip(six, fps=1.0)
    monkeypatch.undo()
    assert len(read_clip(six, fps=1.0).frames) == 6
