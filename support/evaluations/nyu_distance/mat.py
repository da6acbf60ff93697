"""Lazy reader of `nyu_depth_v2_labeled.mat` (MATLAB v7.3, i.e. HDF5 behind a 512-byte header).

MATLAB stores arrays column-major, so h5py sees every array with its axes reversed:

    dataset   MATLAB shape        h5py shape           one image as read here
    images    480x640x3x1449      (N, 3, 640, 480)     (480, 640, 3) uint8 RGB  = images[i].T
    depths    480x640x1449        (N, 640, 480)        (480, 640) float32 m    = depths[i].T

`depths` are the labeled set's filled (inpainted) Z depths in metres, aligned with the RGB image.
The file is 2.8 GB: nothing is read until asked, one image (or a strided grid of depths) at a time.
The HDF5 file is opened on first use in each process (an open handle must not cross a fork) and
every read holds a lock, so threads of one process may share a reader.

    mat = NyuMat("nyu_depth_v2_labeled.mat")   # checks the layout, reads no image
    rgb, depth = mat.image(0), mat.depth(0)    # (480, 640, 3) uint8, (480, 640) float32 metres
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import numpy as np

from support.evaluations.nyu_distance.camera import NYU_KINECT, Intrinsics

HEIGHT, WIDTH = 480, 640  # image px, as the Kinect RGB frames
IMAGES_SHAPE = (3, WIDTH, HEIGHT)  # h5py shape of one image (channel, column, row)
DEPTHS_SHAPE = (WIDTH, HEIGHT)  # h5py shape of one depth map (column, row)
FILE_NAME = "nyu_depth_v2_labeled.mat"
DOWNLOAD_HINT = "python -m support.evaluations.nyu_distance.download --to DIR"


class NyuMatError(ValueError):
    """The file is not a readable NYU Depth V2 labeled .mat: the message names the file and what
    is missing or wrong."""


class NyuMat:
    """Read access to the labeled NYU Depth V2 file: `len`, `image(i)`, `depth(i)`, `depth_at`."""

    intrinsics: Intrinsics = NYU_KINECT  # the labeled set's Kinect RGB camera

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._h5 = None  # h5py.File, opened per process
        self._pid = -1
        with self._lock:
            self.n = self._check(self._file())

    # ---- opening and checking ----------------------------------------------------------------
    def _file(self):
        """The open h5py.File of this process (caller holds the lock)."""
        if self._h5 is not None and self._pid == os.getpid():
            return self._h5
        import h5py

        if not self.path.is_file():
            raise FileNotFoundError(
                f"{self.path}: NYU Depth V2 file not found (expected {FILE_NAME}, MATLAB v7.3); "
                f"fetch it with `{DOWNLOAD_HINT}`, or leave --nyu-mat out for the synthetic sample"
            )
        try:
            self._h5 = h5py.File(self.path, "r")
        except OSError as exc:
            raise NyuMatError(f"{self.path}: {_why_unreadable(self.path, exc)}") from None
        self._pid = os.getpid()
        return self._h5

    def _check(self, f) -> int:
        """Number of images; NyuMatError unless `images` and `depths` have the real layout."""
        import h5py

        found = ", ".join(sorted(f.keys())) or "nothing"
        expect = {
            "images": (IMAGES_SHAPE, "uint8 RGB images", lambda dt: dt == np.uint8),
            "depths": (DEPTHS_SHAPE, "float depths in metres", lambda dt: dt.kind == "f"),
        }
        n = None
        for name, (one, what, dtype_ok) in expect.items():
            want = f"(N, {', '.join(map(str, one))})"
            if name not in f or not isinstance(f[name], h5py.Dataset):
                raise NyuMatError(
                    f"{self.path}: dataset {name!r} missing (found: {found}); expected {what} "
                    f"of h5py shape {want} as in {FILE_NAME}"
                )
            ds = f[name]
            if ds.ndim != len(one) + 1 or tuple(ds.shape[1:]) != one:
                raise NyuMatError(
                    f"{self.path}: dataset {name!r} has shape {tuple(ds.shape)}, expected {want} "
                    f"({what}, MATLAB's column-major layout of {HEIGHT}x{WIDTH} images)"
                )
            if not dtype_ok(ds.dtype):
                raise NyuMatError(
                    f"{self.path}: dataset {name!r} has dtype {ds.dtype}, expected {what}"
                )
            if n is not None and ds.shape[0] != n:
                raise NyuMatError(
                    f"{self.path}: 'images' holds {n} images but 'depths' {ds.shape[0]} maps"
                )
            n = int(ds.shape[0])
        return int(n or 0)

    def close(self) -> None:
        with self._lock:
            if self._h5 is not None and self._pid == os.getpid():
                self._h5.close()
            self._h5 = None

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"NyuMat({str(self.path)!r}, n={self.n})"

    # ---- reading -----------------------------------------------------------------------------
    def _index(self, i: int) -> int:
        if not 0 <= int(i) < self.n:
            raise IndexError(f"{self.path}: image index {i} outside 0..{self.n - 1}")
        return int(i)

    def _read(self, name: str, selection: tuple) -> np.ndarray:
        with self._lock:
            try:
                return np.asarray(self._file()[name][selection])
            except (OSError, KeyError) as exc:  # a file cut short after its header, say
                raise NyuMatError(f"{self.path}: cannot read {name!r}: {exc}") from None

    def image(self, i: int) -> np.ndarray:
        """(480, 640, 3) uint8 RGB of image i (row, column, channel)."""
        return np.ascontiguousarray(self._read("images", (self._index(i),)).transpose(2, 1, 0))

    def depth(self, i: int) -> np.ndarray:
        """(480, 640) float32 Z depth in metres of image i (row, column)."""
        d = self._read("depths", (self._index(i),)).T
        return np.ascontiguousarray(d, dtype=np.float32)

    def depth_at(self, i: int, us: np.ndarray, vs: np.ndarray) -> np.ndarray:
        """(len(vs), len(us)) float32 depths in metres at the grid of columns `us` x rows `vs`
        (each evenly spaced and increasing): one strided read, not the whole map."""
        us, vs = np.asarray(us, dtype=int), np.asarray(vs, dtype=int)
        sel = (self._index(i), _strided(us, WIDTH, "columns"), _strided(vs, HEIGHT, "rows"))
        return np.ascontiguousarray(self._read("depths", sel).T, dtype=np.float32)


def _strided(idx: np.ndarray, size: int, what: str) -> slice:
    """The slice that selects exactly the evenly spaced, increasing indices `idx` of [0, size)."""
    step = int(idx[1] - idx[0]) if len(idx) > 1 else 1
    if (
        len(idx) == 0
        or step < 1
        or idx[0] < 0
        or idx[-1] >= size
        or not np.array_equal(idx, np.arange(idx[0], idx[-1] + 1, step))
    ):
        raise ValueError(f"{what} must be evenly spaced increasing indices in [0, {size})")
    return slice(int(idx[0]), int(idx[-1]) + 1, step)


def _why_unreadable(path: Path, exc: OSError) -> str:
    """A human reason a file did not open as HDF5: what was found instead."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(128)
    text = str(exc)
    if head.startswith(b"MATLAB 5.0 MAT-file"):
        return (
            "a MATLAB v5 MAT-file, not v7.3 (HDF5); the NYU labeled file is v7.3: re-download "
            f"it with `{DOWNLOAD_HINT}`"
        )
    if "truncated" in text.lower() or (head.startswith(b"MATLAB 7.3 MAT-file") and size < 2**20):
        stored = re.search(r"stored_eof\s*=\s*(\d+)", text)
        of = f" of the {stored.group(1)} its header announces" if stored else ""
        return (
            f"truncated MATLAB v7.3 / HDF5 file: {size} bytes{of} (the real {FILE_NAME} is "
            f"about 2.8 GB); resume the download with `{DOWNLOAD_HINT}` ({text})"
        )
    return (
        f"not an HDF5 / MATLAB v7.3 file ({size} bytes, starts {head[:20]!r}); "
        f"expected {FILE_NAME} ({text})"
    )
