"""Video frames for SurgVU (PyAV, FFmpeg's bindings): count, pick, decode and write.

Frames are RGB uint8 arrays of shape (H, W, 3), row 0 at the top. A frame index is the 0-based
position of a frame in decode order; in the 1 fps category-1 videos it is also the second and the
COCO image id of that frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import av
import numpy as np


class PastTheEndError(ValueError):
    """Frames asked past the last frame the video decodes (`n_frames` of them)."""

    def __init__(self, path: Path, first_missing: int, n_frames: int) -> None:
        super().__init__(
            f"{path}: frame {first_missing} asked but the video has {n_frames} decodable frames"
        )
        self.n_frames = n_frames


def _open(path: Path) -> av.container.InputContainer:
    """The container with a video stream, or a ValueError naming the file."""
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError) as exc:
        raise ValueError(f"{path}: cannot open the video ({exc})") from exc
    if not container.streams.video:
        container.close()
        raise ValueError(f"{path}: the file has no video stream")
    return container


def frame_count(path: Path) -> int:
    """Number of frames in the video: the stream header's count, else the decoded count."""
    with _open(Path(path)) as container:
        stream = container.streams.video[0]
        if stream.frames > 0:
            return int(stream.frames)
        try:
            return sum(1 for _ in container.decode(stream))
        except av.FFmpegError as exc:
            raise ValueError(f"{path}: the video does not decode ({exc})") from exc


def iter_frames(path: Path, indices: Iterable[int]) -> Iterator[tuple[int, np.ndarray]]:
    """(index, RGB uint8 (H, W, 3) frame) for each distinct index asked, in increasing order, from
    one decode pass that stops after the last one: a whole video's frames without holding them all.
    ValueError naming the file for a file that does not decode, PastTheEndError (a ValueError) for
    an index past the last frame, both raised after every frame before them was yielded."""
    path = Path(path)
    needed = {int(i) for i in indices}
    if any(i < 0 for i in needed):
        raise ValueError(f"{path}: negative frame index in {sorted(needed)}")
    if not needed:
        return
    last, n_seen = max(needed), 0
    with _open(path) as container:
        stream = container.streams.video[0]
        try:
            for k, frame in enumerate(container.decode(stream)):
                n_seen = k + 1
                if k in needed:
                    yield k, frame.to_ndarray(format="rgb24")
                if k >= last:
                    return
        except av.FFmpegError as exc:
            raise ValueError(
                f"{path}: the video does not decode at frame {n_seen} ({exc})"
            ) from exc
    raise PastTheEndError(path, min(i for i in needed if i >= n_seen), n_seen)


def read_frames(path: Path, indices: Sequence[int]) -> list[np.ndarray]:
    """The frames at `indices` (0-based, repeats allowed), RGB uint8 (H, W, 3), in the order asked;
    one decode pass (iter_frames). Holds every frame asked: for many frames of a long video,
    iterate with iter_frames instead."""
    wanted = [int(i) for i in indices]
    got = dict(iter_frames(path, wanted))
    return [got[i] for i in wanted]


def evenly_spaced(n_frames: int, k: int) -> list[int]:
    """k frame indices at the centres of k equal segments of [0, n_frames), increasing; all frames
    when k >= n_frames. The VQA default choice of frames (a clip's start and end are not
    favoured, and no two picks coincide)."""
    if k < 1:
        raise ValueError(f"the number of frames to pick must be >= 1, got {k}")
    if n_frames <= k:
        return list(range(max(n_frames, 0)))
    return [int((2 * i + 1) * n_frames // (2 * k)) for i in range(k)]


def write_video(path: Path, frames: Sequence[np.ndarray], fps: int = 1, crf: int = 12) -> None:
    """Write RGB uint8 frames (all the same even H and W) as an H.264 yuv420p mp4 at `fps`.
    `crf` is x264's constant rate factor (0 lossless in YUV, 23 its default; 12 keeps drawn
    edges within a pixel or two). The output bytes are the same for the same frames."""
    path = Path(path)
    if not frames:
        raise ValueError(f"{path}: no frames to write")
    h, w = frames[0].shape[:2]
    for i, f in enumerate(frames):
        if f.dtype != np.uint8 or f.ndim != 3 or f.shape != (h, w, 3):
            raise ValueError(
                f"{path}: frame {i} is {f.dtype} {f.shape}, expected uint8 {(h, w, 3)}"
            )
    if h % 2 or w % 2:
        raise ValueError(f"{path}: yuv420p needs an even width and height, got {w}x{h}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.options = {"crf": str(crf), "preset": "veryfast"}
        for f in frames:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
