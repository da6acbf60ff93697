"""Reader of an extracted NYU Depth V2 folder: the one the original's download script writes
(ukataria/IronsiteHackathon data/nyu_depth_v2/download_nyu.py) and the one
`python -m support.evaluations.nyu_distance.download --extract N` writes.

    rgb/0000.jpg | rgb/00000.png     RGB images, numbered from 0 (sorted by number)
    depth/0000.npy                   Z depth in metres, same number
    intrinsics.npy | camera_intrinsics.json   fx, fy, cx, cy, width, height (optional)

The original's script wrote two bugs into its folder, and this reader undoes both, so the ground
truth is right: it transposed the MATLAB arrays once too often (images and depths are portrait,
(640, 480), the image mirrored about its diagonal), and multiplied the uint8 colours by 255, which
wraps modulo 256 to (-x) mod 256. A portrait folder is read as the original's: both arrays
transposed back and the colours negated again modulo 256 (exact up to the JPEG's own error; pure
black, which the wrap keeps at 0, may come back as near-white specks). A landscape folder is read as
it is. The same interface as support.evaluations.nyu_distance.mat.NyuMat: `len`, `image`, `depth`,
`depth_at`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np

from support.evaluations.nyu_distance.camera import NYU_KINECT, Intrinsics
from support.evaluations.nyu_distance.mat import HEIGHT, WIDTH
from support.images import ImageDecodeError, decode_image
from support.storage.pickled_npy import load_npy

_INTRINSICS = ("fx", "fy", "cx", "cy", "width", "height")
_NUMBERED = re.compile(r"^(\d+)\.(?:jpg|jpeg|png)$", re.IGNORECASE)


class NyuFolderError(ValueError):
    """The folder is not an extracted NYU sample: the message names the file and the problem."""


def is_nyu_folder(path: str | os.PathLike) -> bool:
    p = Path(path)
    return p.is_dir() and (p / "rgb").is_dir() and (p / "depth").is_dir()


class NyuFolder:
    """An extracted NYU folder: images (480, 640, 3) uint8 and depths (480, 640) metres."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if not is_nyu_folder(self.path):
            raise NyuFolderError(
                f"{self.path}: expected an extracted NYU folder with rgb/ and depth/"
            )
        numbered = sorted(
            (int(m.group(1)), f)
            for f in (self.path / "rgb").iterdir()
            if (m := _NUMBERED.match(f.name))
        )
        if not numbered:
            raise NyuFolderError(f"{self.path / 'rgb'}: no numbered images (0000.jpg, ...)")
        self.rgb_files = [f for _, f in numbered]
        self.depth_files = []
        for _, f in numbered:
            d = self.path / "depth" / f"{f.stem}.npy"
            if not d.is_file():
                raise NyuFolderError(f"{d}: missing (the depth of {f})")
            self.depth_files.append(d)
        self.intrinsics = self._intrinsics()
        try:
            shape = np.load(self.depth_files[0], mmap_mode="r").shape
        except (OSError, ValueError, EOFError) as exc:
            raise NyuFolderError(f"{self.depth_files[0]}: unreadable depth ({exc})") from None
        if shape not in ((HEIGHT, WIDTH), (WIDTH, HEIGHT)):
            raise NyuFolderError(f"{self.depth_files[0]}: depth shape {shape}, expected (480, 640)")
        self.transposed = shape == (WIDTH, HEIGHT)  # the original's portrait extraction

    def _intrinsics(self) -> Intrinsics:
        npy, js = self.path / "intrinsics.npy", self.path / "camera_intrinsics.json"
        if npy.is_file():
            name = npy
        elif js.is_file():
            name = js
        else:
            return NYU_KINECT
        try:
            if name == npy:  # the original's np.save of a dict: unpickled with numpy names only
                arr = load_npy(npy)
                values = arr.item() if arr.dtype.hasobject and arr.shape == () else None
            else:
                values = json.loads(js.read_text(encoding="utf-8"))
            if not isinstance(values, dict):
                raise ValueError(f"expected a dict of {', '.join(_INTRINSICS)}")
            missing = [k for k in _INTRINSICS if k not in values]
            if missing:
                raise ValueError(f"missing {', '.join(missing)}")
            return Intrinsics(**{k: values[k] for k in _INTRINSICS})
        except (KeyError, TypeError, ValueError, OSError, RecursionError) as exc:
            raise NyuFolderError(f"{name}: unreadable intrinsics ({str(exc)[:300]})") from None

    def __len__(self) -> int:
        return len(self.rgb_files)

    def __repr__(self) -> str:
        return f"NyuFolder({str(self.path)!r}, n={len(self)}, transposed={self.transposed})"

    def _index(self, i: int) -> int:
        if not 0 <= int(i) < len(self):
            raise IndexError(f"{self.path}: image index {i} outside 0..{len(self) - 1}")
        return int(i)

    def image(self, i: int) -> np.ndarray:
        """(480, 640, 3) uint8 RGB of image i (row, column, channel)."""
        f = self.rgb_files[self._index(i)]
        try:  # through the image door: allowed formats only, pixel limit, modes scaled
            rgb = np.asarray(decode_image(f))
        except ImageDecodeError as exc:
            raise NyuFolderError(str(exc)) from None
        if self.transposed:  # undo the original's extra transpose and its x * 255 (mod 256)
            rgb = (-rgb.transpose(1, 0, 2).astype(np.int16)) % 256
        if rgb.shape != (HEIGHT, WIDTH, 3):
            raise NyuFolderError(f"{f}: image shape {rgb.shape[:2]}, expected 480 x 640")
        return np.ascontiguousarray(rgb, dtype=np.uint8)

    def depth(self, i: int) -> np.ndarray:
        """(480, 640) float32 Z depth in metres of image i (row, column)."""
        f = self.depth_files[self._index(i)]
        try:
            d = np.load(f)
        except (OSError, ValueError, EOFError) as exc:
            raise NyuFolderError(f"{f}: unreadable depth ({exc})") from None
        if d.dtype.kind not in "fiu":  # metres: a float or integer array, never text or objects
            raise NyuFolderError(f"{f}: depth dtype {d.dtype}, expected numbers (metres)")
        d = d.T if self.transposed else d
        if d.shape != (HEIGHT, WIDTH):
            raise NyuFolderError(f"{f}: depth shape {np.shape(d)}, expected (480, 640)")
        return np.ascontiguousarray(d, dtype=np.float32)

    def depth_at(self, i: int, us: np.ndarray, vs: np.ndarray) -> np.ndarray:
        """(len(vs), len(us)) float32 depths in metres at the grid columns `us` x rows `vs`."""
        return self.depth(i)[np.ix_(np.asarray(vs, dtype=int), np.asarray(us, dtype=int))]
