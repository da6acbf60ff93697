"""The NYU .mat loader on files written in the real MATLAB v7.3 layout, and its errors on broken
ones (each names the file and what is missing); the synthetic file built on first use."""

from __future__ import annotations

import threading
from pathlib import Path

import h5py
import numpy as np
import pytest

from support.evaluations.nyu_distance.mat import FILE_NAME, NyuMat, NyuMatError
from support.evaluations.nyu_distance.synthetic import (
    MATLAB_HEADER,
    N_IMAGES,
    USERBLOCK,
    ensure_nyu_mat,
    write_nyu_mat,
)


@pytest.fixture(scope="module")
def arrays() -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Two random (480, 640, 3) images, depths and labels: no symmetry a transpose could hide."""
    rng = np.random.default_rng(7)
    images = [rng.integers(0, 256, (480, 640, 3), dtype=np.uint8) for _ in range(2)]
    depths = [rng.uniform(0.5, 10, (480, 640)).astype(np.float32) for _ in range(2)]
    labels = [rng.integers(0, 895, (480, 640)).astype(np.uint16) for _ in range(2)]
    return images, depths, labels


@pytest.fixture(scope="module")
def mat_path(tmp_path_factory, arrays) -> Path:
    return write_nyu_mat(tmp_path_factory.mktemp("mat") / FILE_NAME, *arrays)


def test_written_in_the_real_layout(mat_path: Path, arrays) -> None:
    images, depths, _ = arrays
    assert mat_path.read_bytes()[:128] == MATLAB_HEADER
    assert mat_path.read_bytes()[:19] == b"MATLAB 7.3 MAT-file"
    with h5py.File(mat_path, "r") as f:
        assert f.userblock_size == USERBLOCK
        assert f["images"].shape == (2, 3, 640, 480) and f["images"].dtype == np.uint8
        assert f["depths"].shape == (2, 640, 480) and f["depths"].dtype == np.float32
        assert f["images"].chunks == (1, 3, 640, 480)  # one image per chunk
        assert f["depths"].attrs["MATLAB_class"] == b"single"
        # h5py index (i, channel, column, row) <-> array (row, column, channel)
        for row, col, ch in [(0, 0, 0), (479, 0, 1), (0, 639, 2), (123, 456, 1)]:
            assert f["images"][1, ch, col, row] == images[1][row, col, ch]
            assert f["depths"][0, col, row] == depths[0][row, col]


def test_reads_back_what_was_written(mat_path: Path, arrays) -> None:
    images, depths, _ = arrays
    mat = NyuMat(mat_path)
    assert len(mat) == 2
    for i in range(2):
        image, depth = mat.image(i), mat.depth(i)
        assert image.shape == (480, 640, 3) and image.dtype == np.uint8
        assert depth.shape == (480, 640) and depth.dtype == np.float32
        assert np.array_equal(image, images[i])
        assert np.array_equal(depth, depths[i])
    us, vs = np.arange(40, 601, 40), np.arange(40, 441, 40)
    assert np.array_equal(mat.depth_at(1, us, vs), depths[1][np.ix_(vs, us)])
    with pytest.raises(IndexError, match=r"outside 0\.\.1"):
        mat.image(2)
    with pytest.raises(ValueError, match="evenly spaced"):
        mat.depth_at(0, np.array([1, 2, 4]), vs)


def test_threads_share_one_reader(mat_path: Path, arrays) -> None:
    mat = NyuMat(mat_path)
    errors, results = [], []

    def read(i: int) -> None:
        try:
            for _ in range(5):
                results.append(bool(np.array_equal(mat.depth(i % 2), arrays[1][i % 2])))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and len(results) == 30 and all(results)


def test_reopens_in_another_process(mat_path: Path, arrays) -> None:
    mat = NyuMat(mat_path)
    first = mat._h5
    mat._pid = -1  # as if forked: the handle belongs to another process
    assert np.array_equal(mat.image(0), arrays[0][0])
    assert mat._h5 is not first


# ---- broken files: clear errors that name the file and what is wrong ---------------------------
def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope" / FILE_NAME
    with pytest.raises(FileNotFoundError) as err:
        NyuMat(path)
    assert str(path) in str(
        err.value
    ) and "python -m support.evaluations.nyu_distance.download" in str(err.value)


@pytest.mark.parametrize("keep", [1000, 600, "half", "all but 10"])
def test_truncated_file(tmp_path: Path, mat_path: Path, keep) -> None:
    data = mat_path.read_bytes()
    n = {"half": len(data) // 2, "all but 10": len(data) - 10}.get(keep, keep)
    path = tmp_path / FILE_NAME
    path.write_bytes(data[:n])
    with pytest.raises(NyuMatError) as err:
        NyuMat(path)
    message = str(err.value)
    assert str(path) in message and "truncated" in message and f"{n} bytes" in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"hello, not a mat file", "not an HDF5 / MATLAB v7.3 file"),
        (b"MATLAB 5.0 MAT-file, Platform: PCWIN64".ljust(128) + b"\0" * 2000, "MATLAB v5"),
        (b"", "not an HDF5"),
    ],
)
def test_not_hdf5(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "x.mat"
    path.write_bytes(content)
    with pytest.raises(NyuMatError, match=expected) as err:
        NyuMat(path)
    assert str(path) in str(err.value)


def _h5(path: Path, **datasets) -> Path:
    with h5py.File(path, "w", userblock_size=512) as f:
        for name, (shape, dtype) in datasets.items():
            f.create_dataset(name, shape, dtype=dtype)
    return path


@pytest.mark.parametrize(
    ("datasets", "expected"),
    [
        ({"images": ((2, 3, 640, 480), "u1")}, r"dataset 'depths' missing \(found: images\)"),
        ({"depths": ((2, 640, 480), "f4")}, r"dataset 'images' missing \(found: depths\)"),
        ({}, r"dataset 'images' missing \(found: nothing\)"),
        (  # not transposed: a (480, 640) array written row-major
            {"images": ((2, 3, 480, 640), "u1"), "depths": ((2, 640, 480), "f4")},
            r"'images' has shape \(2, 3, 480, 640\), expected \(N, 3, 640, 480\)",
        ),
        (
            {"images": ((2, 3, 640, 480), "u1"), "depths": ((2, 480, 640), "f4")},
            r"'depths' has shape \(2, 480, 640\), expected \(N, 640, 480\)",
        ),
        (
            {"images": ((2, 3, 640, 480), "u1"), "depths": ((640, 480), "f4")},
            r"'depths' has shape \(640, 480\)",
        ),
        (
            {"images": ((2, 3, 640, 480), "f4"), "depths": ((2, 640, 480), "f4")},
            "'images' has dtype float32, expected uint8 RGB images",
        ),
        (
            {"images": ((2, 3, 640, 480), "u2"), "depths": ((2, 640, 480), "f4")},
            "'images' has dtype uint16, expected uint8 RGB images",
        ),
        (
            {"images": ((2, 3, 640, 480), "u1"), "depths": ((2, 640, 480), "i2")},
            "'depths' has dtype int16, expected float depths in metres",
        ),
        (
            {"images": ((2, 3, 640, 480), "u1"), "depths": ((3, 640, 480), "f4")},
            "'images' holds 2 images but 'depths' 3 maps",
        ),
    ],
)
def test_wrong_layout(tmp_path: Path, datasets, expected: str) -> None:
    path = _h5(tmp_path / FILE_NAME, **datasets)
    with pytest.raises(NyuMatError, match=expected) as err:
        NyuMat(path)
    assert str(path) in str(err.value)


def test_a_group_is_not_a_dataset(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    with h5py.File(path, "w") as f:
        f.create_group("depths")
        f.create_dataset("images", (1, 3, 640, 480), dtype="u1")
    with pytest.raises(NyuMatError, match="dataset 'depths' missing"):
        NyuMat(path)


# ---- the synthetic default -------------------------------------------------------------------
@pytest.mark.slow
def test_synthetic_file_built_once(tmp_path: Path) -> None:
    path = ensure_nyu_mat(tmp_path)  # its build time: benchmarks/test_nyu_speed.py
    assert path.name == FILE_NAME and path.read_bytes()[:19] == b"MATLAB 7.3 MAT-file"
    mtime = path.stat().st_mtime_ns
    assert ensure_nyu_mat(tmp_path) == path and path.stat().st_mtime_ns == mtime  # not rebuilt
    mat = NyuMat(path)
    assert len(mat) == N_IMAGES
    depth = mat.depth(0)
    assert np.isfinite(depth).all() and depth[depth > 0].min() > 0.3 and depth.max() < 10
    assert (mat.depth(1) == 0).any()  # a window: invalid depth, as a Kinect hole
    other = tmp_path / "again"
    assert ensure_nyu_mat(other).read_bytes() == path.read_bytes()  # deterministic
