"""Hostile data files: nothing read from data is executed, and every reader error is the reader's
own error naming the file (issue 25, items 1, 9 and the reader half of 10).

Each test builds a small valid folder in tmp_path, breaks one file, and checks the reader's error.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from PIL import Image

from support.evaluations.dynamic.assets import build_assets, read_assets
from support.evaluations.dynamic.scenes import random_layout, read_layouts
from support.evaluations.nyu_distance.folder import NyuFolder, NyuFolderError
from support.evaluations.pointing.dataset import CholecSeg8kFileError, RawTree
from support.evaluations.pointing.synthetic import build_cholecseg8k
from support.evaluations.surgvqa.dataset import SurgvuDataError, read_vqa
from support.evaluations.surgvqa.synthetic import build_surgvu
from support.storage.pickled_npy import PickledNpyError, load_npy

# ---- NYU extracted folder ------------------------------------------------------------------------


def _nyu_folder(root):
    """A minimal valid extracted NYU folder: one landscape image and its depth (metres)."""
    (root / "rgb").mkdir(parents=True)
    (root / "depth").mkdir()
    Image.new("RGB", (640, 480), (90, 90, 90)).save(root / "rgb" / "0000.png")
    np.save(root / "depth" / "0000.npy", np.full((480, 640), 2.0, dtype=np.float32))
    return root


class _WritesFile:
    """A pickle payload: unpickling it calls builtins.open(path, "w"), creating the file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


class _RunsShell:
    """A pickle payload: unpickling it runs `touch path` through os.system."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _hostile_npy(path, payload) -> None:
    """An .npy file whose object array's pickle carries `payload` (np.save's own layout)."""
    arr = np.empty((), dtype=object)
    arr[()] = {"fx": payload}
    with open(path, "wb") as fp:
        np.lib.format.write_array(fp, arr, allow_pickle=True)


@pytest.mark.parametrize("payload", [_WritesFile, _RunsShell])
def test_pickled_intrinsics_never_run(tmp_path, payload):
    folder = _nyu_folder(tmp_path / "nyu")
    marker = tmp_path / "pwned"
    _hostile_npy(folder / "intrinsics.npy", payload(str(marker)))
    with pytest.raises(NyuFolderError, match=r"intrinsics\.npy.*refused"):
        NyuFolder(folder)
    assert not marker.exists()


def test_load_npy_refuses_any_global(tmp_path):
    path = tmp_path / "x.npy"
    _hostile_npy(path, _WritesFile(str(tmp_path / "pwned")))
    with pytest.raises(PickledNpyError, match=r"x\.npy: refused to unpickle \S*open"):
        load_npy(path)
    assert not (tmp_path / "pwned").exists()


def test_original_pickled_intrinsics_dict_still_read(tmp_path):
    """The original's np.save of a plain dict (and numpy scalars in it) reads as before."""
    folder = _nyu_folder(tmp_path / "nyu")
    values = {"fx": np.float64(500.0), "fy": 501.0, "cx": 320.0, "cy": 240.0, "width": 640}
    np.save(folder / "intrinsics.npy", {**values, "height": np.int64(480)})
    k = NyuFolder(folder).intrinsics
    assert (k.fx, k.fy, k.cx, k.cy, k.width, k.height) == (500.0, 501.0, 320.0, 240.0, 640, 480)


_GOOD = {"fx": 518.0, "fy": 519.0, "cx": 325.0, "cy": 253.0, "width": 640, "height": 480}


@pytest.mark.parametrize(
    "change",
    [{"fx": 0}, {"fy": float("nan")}, {"cx": "325"}, {"fx": "abc"}, {"width": -1}, {"cy": 1e400}],
    ids=["fx0", "fy-nan", "cx-str", "fx-str", "width-neg", "cy-inf"],
)
def test_bad_intrinsics_json_named_at_read(tmp_path, change):
    folder = _nyu_folder(tmp_path / "nyu")
    text = json.dumps({**_GOOD, **change}).replace("Infinity", "1e400")
    (folder / "camera_intrinsics.json").write_text(text)
    with pytest.raises(NyuFolderError, match=r"camera_intrinsics\.json: unreadable intrinsics"):
        NyuFolder(folder)


def test_deep_intrinsics_json_named(tmp_path):
    folder = _nyu_folder(tmp_path / "nyu")
    (folder / "camera_intrinsics.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(NyuFolderError, match=r"camera_intrinsics\.json"):
        NyuFolder(folder)


@pytest.mark.parametrize("bad", ["text", "empty"])
def test_bad_depth_named(tmp_path, bad):
    folder = _nyu_folder(tmp_path / "nyu")
    depth = folder / "depth" / "0000.npy"
    if bad == "text":
        np.save(depth, np.full((480, 640), "abc"))
    else:
        depth.write_bytes(b"")
    with pytest.raises(NyuFolderError, match=r"0000\.npy"):
        NyuFolder(folder).depth(0)


# ---- dynamic: metadata.jsonl, {object_id}.npy, layouts.json -------------------------------------


@pytest.fixture
def assets_dir(tmp_path):
    return build_assets(tmp_path / "assets")


def _first_id(folder) -> str:
    return next(iter(json.loads((folder / "metadata.jsonl").read_text().splitlines()[0])))


def test_metadata_not_utf8_named(assets_dir):
    meta = assets_dir / "metadata.jsonl"
    meta.write_bytes(meta.read_bytes() + b'{"\xff\xfe": 1}\n')
    with pytest.raises(ValueError, match=r"metadata\.jsonl: not UTF-8") as info:
        read_assets(assets_dir)
    assert not isinstance(info.value, UnicodeDecodeError)


def test_metadata_deep_json_named(assets_dir):
    meta = assets_dir / "metadata.jsonl"
    meta.write_text(meta.read_text() + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ValueError, match=r"metadata\.jsonl:\d+: JSON nested too deeply"):
        read_assets(assets_dir)


@pytest.mark.parametrize("bad", ["empty", "text"])
def test_bad_cloud_named(assets_dir, bad):
    path = assets_dir / f"{_first_id(assets_dir)}.npy"
    if bad == "empty":
        path.write_bytes(b"")
    else:
        np.save(path, np.full((10, 6), "abc"))
    with pytest.raises(ValueError, match=re.escape(str(path))):
        read_assets(assets_dir)


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_cloud_named(assets_dir, value):
    path = assets_dir / f"{_first_id(assets_dir)}.npy"
    cloud = np.load(path)
    cloud[3, 1] = value
    np.save(path, cloud)
    asset = read_assets(assets_dir)[_first_id(assets_dir)]
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*NaN or infinite"):
        asset.load_points()


@pytest.mark.parametrize("object_id", ["../outside", "ABSOLUTE"])
def test_object_id_outside_folder_refused(tmp_path, assets_dir, object_id):
    outside = tmp_path / "outside.npy"
    np.save(outside, np.zeros((8, 6), np.float32))
    object_id = str(tmp_path / "outside") if object_id == "ABSOLUTE" else object_id
    row = {object_id: {"object": "thief", "components": [{"name": "body"}]}}
    meta = assets_dir / "metadata.jsonl"
    meta.write_text(meta.read_text() + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="object id leads outside"):
        read_assets(assets_dir)


def _layouts_file(tmp_path, change: dict | None = None, text: str | None = None):
    layout = random_layout(np.random.default_rng(0), 2)
    layout["objects"][0].update(change or {})
    path = tmp_path / "layouts.json"
    path.write_text(text if text is not None else json.dumps([layout]))
    return path


@pytest.mark.parametrize(
    "change",
    [
        {"rotation": float("inf")},
        {"rotation": float("nan")},
        {"size": [1e308, 1.0, 1.0]},
        {"position": [1e308, 0.0, 0.0]},
    ],
    ids=["rot-inf", "rot-nan", "size-1e308", "pos-1e308"],
)
def test_absurd_layout_values_named(tmp_path, change):
    path = _layouts_file(tmp_path, change)
    with pytest.raises(ValueError, match=r"layouts\.json: item 0 .*objects\[0\]"):
        read_layouts(path)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "\xff"], ids=["deep", "not-utf8"])
def test_layouts_deep_or_not_utf8_named(tmp_path, text):
    path = tmp_path / "layouts.json"
    if text == "\xff":
        path.write_bytes(b'[{"id": "\xff"}]')
    else:
        path.write_text(text)
    with pytest.raises(
        ValueError, match=r"layouts\.json: (JSON nested too deeply|not UTF-8)"
    ) as info:
        read_layouts(path)
    assert not isinstance(info.value, UnicodeDecodeError)


# ---- surgvqa and pointing -----------------------------------------------------------------------


def test_surgvu_deep_json_named(tmp_path):
    root = build_surgvu(tmp_path / "surgvu")
    question = root / "SURGVU25_cat_2_sample_set_public" / "case001" / "case001_question.json"
    question.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SurgvuDataError, match=r"case001_question\.json: JSON nested too deeply"):
        read_vqa(root)


def test_cholecseg8k_non_utf8_video_folder_named(tmp_path):
    root = build_cholecseg8k(tmp_path / "raw", n_videos=1, frames_per_video=2)
    video = next(p for p in root.iterdir() if p.name.startswith("video"))
    os.rename(os.fsencode(video), os.fsencode(video) + b"\xff")
    with pytest.raises(CholecSeg8kFileError, match=r"not UTF-8"):
        RawTree.scan(root)
