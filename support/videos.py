"""The one video door: every clip a model is sent is read here (PyAV, FFmpeg's bindings).

A clip is looked at from its header before any frame is decoded (`probe_video`): the container
and codec must be on the allow-lists (`CONTAINERS`, `CODECS`), and its bytes, duration, frame
count and frame size within the caps (`MAX_BYTES`, `MAX_SECONDS`, `MAX_FRAMES`,
`MAX_FRAME_PIXELS`). A file that fails any of it, or does not decode, is a VideoDecodeError naming
the file and what was found. No external program runs.

`read_clip` then samples frames at a stated rate (`fps`: the frame nearest each multiple of
1/fps s of the clip's presentation time) or as a stated count (`count`: the frames nearest the
centres of `count` equal spans of the clip), decodes only those, and returns a `Clip`: the
file's bytes (for the engines that take the file itself), the frames as RGB uint8 (H, W, 3)
arrays (row 0 at the top), each frame's timestamp in seconds from the clip's start, and the
sampling. A Clip's identity (`Clip.canonical`, what enters cache keys and prompt hashes) is the
sha256 of the file's bytes plus the sampling and the timestamps it gave, never the pixel values.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# what `av.open(...).format.name` says of the containers taken (FFmpeg's demuxer names)
CONTAINERS = frozenset({"mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm", "avi"})
# what the video stream's codec is called (FFmpeg's decoder names)
CODECS = frozenset({"h264", "hevc", "vp8", "vp9", "av1", "mpeg4", "mjpeg"})
MIME_OF = {
    "mov,mp4,m4a,3gp,3g2,mj2": "video/mp4",
    "matroska,webm": "video/webm",
    "avi": "video/x-msvideo",
}
MAX_BYTES = 1 << 30  # a clip's file, bytes (1 GiB)
MAX_SECONDS = 2 * 3600.0  # a clip's duration, seconds
MAX_FRAMES = 2 * 3600 * 60  # frames in the stream (two hours at 60 fps)
MAX_FRAME_PIXELS = 4096 * 2304  # width x height of one frame (4K and a little)
MAX_SAMPLED = 1024  # frames one Clip holds


class VideoDecodeError(ValueError):
    """A clip that is not read: refused container or codec, over a cap, unreadable or broken.
    The message names the file and what was found."""


@dataclass(frozen=True)
class VideoInfo:
    """What a clip's header says: container and codec (FFmpeg's names), frame size (px), the
    stream's average frame rate (frames/s), frame count (0: not in the header), duration (s) and
    the file's size (bytes)."""

    container: str
    codec: str
    width: int
    height: int
    fps: float
    frames: int
    seconds: float
    size: int


@dataclass(frozen=True, eq=False)
class Clip:
    """A sampled video clip, as a Part carries it (module docstring). `fps` or `count` says how
    it was sampled (the other None); `timestamps` are seconds from the clip's start, one per
    frame, increasing; `source_fps` is the stream's own rate."""

    data: bytes = field(repr=False)
    mime: str
    frames: tuple[np.ndarray, ...] = field(repr=False)
    timestamps: tuple[float, ...]
    fps: float | None
    count: int | None
    source_fps: float
    # each frame's index in the stream (0 = the first decoded frame), as `frames`
    indices: tuple[int, ...] = ()
    total_frames: int = (
        0  # frames in the stream (decoded up to the last sampled one, else the header)
    )
    seconds: float = 0.0  # the clip's duration from its header (s)

    @functools.cached_property
    def sha256(self) -> str:
        """sha256 of the file's bytes (once per clip)."""
        return hashlib.sha256(self.data).hexdigest()

    def canonical(self) -> dict[str, Any]:
        """What determines an answer: the file's content and the sampling (never pixels)."""
        return {
            "video_sha256": self.sha256,
            "mime": self.mime,
            "sampling": {"fps": self.fps, "count": self.count},
            "timestamps": [round(t, 6) for t in self.timestamps],
        }

    def metadata(self) -> dict[str, Any]:
        """The clip's video metadata as transformers' video processors and vLLM take it (the
        fields of vLLM's `VideoLoader.create_hf_metadata`, vllm/multimodal/video.py, which a vLLM
        server makes for a clip it decodes itself): the source's frame count, fps and duration,
        the sampled frames' indices, and `do_sample_frames`, True only where every frame was
        kept (the processor may then sample at its own rate, as it does for the server's clip)."""
        return {
            "total_num_frames": self.total_frames,
            "fps": self.source_fps,
            "duration": self.seconds,
            "video_backend": "pyav",
            "frames_indices": list(self.indices),
            "do_sample_frames": len(self.indices) == self.total_frames,
        }

    def array(self) -> np.ndarray:
        """The frames as one (T, H, W, 3) uint8 RGB array, in time order."""
        return np.stack(self.frames)


def _where(path: Path, label: str | None) -> str:
    return label or str(path)


def probe_video(path: Path, label: str | None = None) -> VideoInfo:
    """The clip's header, checked against the allow-lists and the caps; VideoDecodeError naming
    the file (`label`, else the path) otherwise. Decodes nothing."""
    import av

    path, where = Path(path), _where(Path(path), label)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise VideoDecodeError(f"{where}: cannot read the video ({exc.strerror or exc})") from None
    if size > MAX_BYTES:
        raise VideoDecodeError(f"{where}: {size:,} bytes, over the limit MAX_BYTES = {MAX_BYTES:,}")
    try:
        with av.open(str(path)) as container:
            name = container.format.name
            if not container.streams.video:
                raise VideoDecodeError(f"{where}: the file has no video stream ({name})")
            stream = container.streams.video[0]
            codec = stream.codec_context.name
            width, height = int(stream.width), int(stream.height)
            rate = stream.average_rate or stream.guessed_rate
            fps = float(rate) if rate else 0.0
            frames = int(stream.frames or 0)
            if stream.duration is not None and stream.time_base is not None:
                seconds = float(stream.duration * stream.time_base)
            elif container.duration is not None:
                seconds = container.duration / 1_000_000  # av.time_base: microseconds
            else:
                seconds = frames / fps if fps else 0.0
    except VideoDecodeError:
        raise
    except (av.FFmpegError, OSError, ValueError) as exc:
        raise VideoDecodeError(f"{where}: cannot open the video ({exc})") from None
    info = VideoInfo(name, codec, width, height, fps, frames, seconds, size)
    _check(info, where)
    return info


def _check(info: VideoInfo, where: str) -> None:
    if info.container not in CONTAINERS:
        taken = ", ".join(sorted(CONTAINERS))
        raise VideoDecodeError(f"{where}: container {info.container!r} is not taken ({taken})")
    if info.codec not in CODECS:
        taken = ", ".join(sorted(CODECS))
        raise VideoDecodeError(f"{where}: codec {info.codec!r} is not taken ({taken})")
    if info.width <= 0 or info.height <= 0:
        raise VideoDecodeError(f"{where}: the header gives no frame size")
    if info.width * info.height > MAX_FRAME_PIXELS:
        raise VideoDecodeError(
            f"{where}: frames of {info.width}x{info.height} px, over the limit "
            f"MAX_FRAME_PIXELS = {MAX_FRAME_PIXELS:,}"
        )
    if info.frames > MAX_FRAMES:
        raise VideoDecodeError(
            f"{where}: {info.frames:,} frames, over the limit MAX_FRAMES = {MAX_FRAMES:,}"
        )
    if not math.isfinite(info.seconds) or info.seconds > MAX_SECONDS:
        raise VideoDecodeError(
            f"{where}: {info.seconds:g} s long, over the limit MAX_SECONDS = {MAX_SECONDS:g}"
        )


def sample_times(seconds: float, fps: float | None = None, count: int | None = None) -> list[float]:
    """The times (s from the start) to sample a clip of `seconds` at: every 1/fps s from 0
    (`fps`), or the centres of `count` equal spans (`count`). Exactly one of the two; ValueError
    otherwise, or when more than MAX_SAMPLED times would be asked."""
    if (fps is None) == (count is None):
        raise ValueError("sample a clip at a rate (fps) or as a count, one of the two")
    if fps is not None:
        if not (math.isfinite(fps) and fps > 0):
            raise ValueError(f"a sampling rate must be a number > 0 frames/s, got {fps!r}")
        n = max(1, math.ceil(seconds * fps - 1e-9))
        times = [k / fps for k in range(n)]
    else:
        if count is None or count < 1:
            raise ValueError(f"a frame count must be >= 1, got {count!r}")
        times = [(2 * k + 1) * seconds / (2 * count) for k in range(count)]
    if len(times) > MAX_SAMPLED:
        raise ValueError(
            f"{len(times)} frames asked of one clip; at most MAX_SAMPLED = {MAX_SAMPLED}"
        )
    return times


def read_clip(
    path: Path, *, fps: float | None = None, count: int | None = None, label: str | None = None
) -> Clip:
    """The clip at `path` sampled at `fps` or as `count` frames (sample_times): for each time,
    the frame whose presentation time is nearest it (a tie: the earlier; the last frame for a
    time past the end; a frame picked twice is kept once, with its own timestamp). Probed first
    (probe_video); VideoDecodeError naming the file for one that fails or does not decode."""
    import av

    path, where = Path(path), _where(Path(path), label)
    info = probe_video(path, label)
    try:
        times = sample_times(info.seconds, fps, count)
    except ValueError as exc:
        raise VideoDecodeError(f"{where}: {exc}") from None
    picked: list[tuple[float, int, np.ndarray]] = []

    def pick(t: float, index: int, frame: Any) -> None:
        if not picked or picked[-1][1] != index:  # a frame nearest two times is kept once
            picked.append((t, index, frame.to_ndarray(format="rgb24")))

    prev: tuple[float, int, Any] | None = None
    want = decoded = 0
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            for index, frame in enumerate(container.decode(stream)):
                decoded = index + 1
                # a header can lie: the caps hold for what decodes too
                if frame.width * frame.height > MAX_FRAME_PIXELS or decoded > MAX_FRAMES:
                    raise VideoDecodeError(
                        f"{where}: frame {index} decodes at {frame.width}x{frame.height} px, "
                        f"past the caps its header passed (MAX_FRAME_PIXELS = "
                        f"{MAX_FRAME_PIXELS:,}, MAX_FRAMES = {MAX_FRAMES:,})"
                    )
                t = float(frame.time) if frame.time is not None else 0.0
                while want < len(times) and t + 1e-6 >= times[want]:
                    # the nearer of this frame and the one before it; a tie goes to the earlier
                    if prev is not None and times[want] - prev[0] <= t - times[want]:
                        pick(*prev)
                    else:
                        pick(t, index, frame)
                    want += 1
                if want == len(times):
                    break
                prev = (t, index, frame)
    except VideoDecodeError:
        raise
    except (av.FFmpegError, OSError, ValueError) as exc:
        raise VideoDecodeError(f"{where}: the video does not decode ({exc})") from None
    if want < len(times):  # times past the last frame: the last frame
        if prev is None:
            raise VideoDecodeError(f"{where}: no frame decodes")
        pick(*prev)
    data = path.read_bytes()
    return Clip(
        data=data,
        mime=MIME_OF[info.container],
        frames=tuple(f for _, _, f in picked),
        timestamps=tuple(t for t, _, _ in picked),
        fps=float(fps) if fps is not None else None,
        count=int(count) if count is not None else None,
        source_fps=info.fps,
        indices=tuple(i for _, i, _ in picked),
        total_frames=max(info.frames, decoded),
        seconds=info.seconds,
    )
