"""Data that used to be accepted in silence is named (issue 25, item 10: the NYU and pointing
readers): a NYU file whose depths give no point pair, images that give none among good ones, a
CholecSeg8k frame name that holds no file, and a truncated watershed mask.

Each test builds small valid data in tmp_path, breaks one thing, and checks what is said.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support.evaluations.nyu_distance.folder import NyuFolderError
from support.evaluations.nyu_distance.mat import NyuMatError
from support.evaluations.nyu_distance.spec import NyuSettings
from support.evaluations.nyu_distance.synthetic import write_nyu_mat
from support.evaluations.nyu_distance.task import NyuDistanceEvaluation
from support.evaluations.pointing.dataset import CholecSeg8k, CholecSeg8kFileError
from support.evaluations.pointing.synthetic import build_cholecseg8k
from support.settings import OutputSettings, RunSettings

H, W = 480, 640  # NYU image px


def _two_depths() -> np.ndarray:
    """A (480, 640) depth in metres with pairs to sample: 2 m on the left half, 4 m on the right."""
    depth = np.full((H, W), 2.0, dtype=np.float32)
    depth[:, W // 2 :] = 4.0
    return depth


def _mat(path: Path, depths: list[np.ndarray]) -> Path:
    n = len(depths)
    images = [np.full((H, W, 3), 90, dtype=np.uint8)] * n
    return write_nyu_mat(path, images, depths, [np.zeros((H, W), dtype=np.uint16)] * n)


def _load(tmp_path: Path, **settings) -> NyuDistanceEvaluation:
    run = RunSettings(
        output=OutputSettings(cache_dir=tmp_path / "cache", results_dir=tmp_path / "results")
    )
    return NyuDistanceEvaluation.load(run, NyuSettings(**settings))


# ---- NYU -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, 0.0, -1.0, np.inf])
def test_nyu_mat_without_valid_depth_names_the_file(tmp_path, bad):
    mat = _mat(tmp_path / "nyu.mat", [np.full((H, W), bad, dtype=np.float32)] * 2)
    with pytest.raises(NyuMatError, match=r"nyu\.mat: none of the 2 images .*no finite positive"):
        _load(tmp_path, mat=str(mat))


def test_nyu_folder_without_valid_depth_names_the_folder(tmp_path):
    root = tmp_path / "nyu"
    (root / "rgb").mkdir(parents=True)
    (root / "depth").mkdir()
    Image.new("RGB", (W, H), (90, 90, 90)).save(root / "rgb" / "0000.png")
    np.save(root / "depth" / "0000.npy", np.zeros((H, W), dtype=np.float32))
    with pytest.raises(NyuFolderError, match=rf"{re.escape(str(root))}: none of the 1 images"):
        _load(tmp_path, folder=str(root))


def test_nyu_images_without_pairs_among_good_ones_are_named_once(tmp_path):
    flat = np.full((H, W), 2.0, dtype=np.float32)  # valid depths, none 0.2 m apart
    nan = np.full((H, W), np.nan, dtype=np.float32)
    mat = _mat(tmp_path / "nyu.mat", [_two_depths(), flat, nan, _two_depths()])
    with pytest.warns(UserWarning) as caught:
        ev = _load(tmp_path, mat=str(mat))
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert "nyu.mat: 2 of 4 images yield no point pair" in messages[0]
    assert "images 2: no finite positive depth" in messages[0]
    assert "images 1: no two valid points" in messages[0]
    assert ev.images == [0, 1, 2, 3] and {c.params["image_idx"] for c in ev.cases()} == {0, 3}


@pytest.mark.slow
def test_nyu_mat_without_valid_depth_stops_the_run_naming_it(run_suite, tmp_path):
    mat = _mat(tmp_path / "nyu.mat", [np.full((H, W), np.nan, dtype=np.float32)])
    result, _ = run_suite("nyu_distance", "--model=oracle", f"--nyu-mat={mat}", "-m", "quick")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), text
    assert f"{mat}: none of the 1 images read yields a point pair" in text
    assert "no finite positive depth" in text


# ---- CholecSeg8k -----------------------------------------------------------------------------


@pytest.fixture
def raw(tmp_path) -> Path:
    return build_cholecseg8k(tmp_path / "raw", n_videos=1, frames_per_video=3)


def _frames(root: Path) -> list[Path]:
    return sorted(root.glob("video*/video*_*/frame_*_endo.png"))


@pytest.mark.parametrize("kind", ["folder", "loop", "dangling"])
def test_a_frame_that_is_no_file_is_named_not_dropped(raw, kind):
    frame = _frames(raw)[1]
    frame.unlink()
    if kind == "folder":
        frame.mkdir()
    elif kind == "loop":
        os.symlink(frame.name, frame)  # the link points at itself
    else:
        os.symlink(frame.with_name("nowhere.png"), frame)
    why = "a folder" if kind == "folder" else "a symbolic link that leads to no file"
    with pytest.raises(CholecSeg8kFileError, match=re.escape(f"{frame}: {why}")):
        CholecSeg8k.open(raw)


def test_a_truncated_watershed_mask_is_named_when_its_frame_is_read(raw):
    ds = CholecSeg8k.open(raw)
    path = raw / ds.frame_paths()[1].replace(".png", "_watershed_mask.png")
    path.write_bytes(path.read_bytes()[:200])
    ds = CholecSeg8k.open(raw)  # the file changed: opened again, as a new run does
    ds.image(0)  # its neighbours are untouched
    with pytest.raises(CholecSeg8kFileError, match=re.escape(f"{path}: not a readable image")):
        ds.image(1)


def test_a_watershed_mask_of_another_size_is_named_when_its_frame_is_read(raw):
    ds = CholecSeg8k.open(raw)
    path = raw / ds.frame_paths()[2].replace(".png", "_watershed_mask.png")
    Image.new("L", (10, 10), 50).save(path)
    with pytest.raises(CholecSeg8kFileError, match=re.escape(f"{path}: mask is 10x10 px")):
        CholecSeg8k.open(raw).image(2)
