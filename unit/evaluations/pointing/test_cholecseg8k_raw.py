"""CholecSeg8k as published: the raw `videoNN/videoNN_SSSSS/frame_K_endo*.png` tree, its mask
encodings, the hub row order, the zip download (against a zip the test builds, never the hub) and
a whole pointing run on such a tree."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from support.evaluations.pointing import download as dl
from support.evaluations.pointing.classes import (
    CLASS_TO_COLOR,
    CLASS_TO_WATERSHED,
    COLOR_TO_CLASS,
    IGNORE,
    WATERSHED_TO_CLASS,
    color_mask_to_labels,
    watershed_mask_to_labels,
)
from support.evaluations.pointing.dataset import (
    CholecSeg8k,
    CholecSeg8kFileError,
    find_raw_root,
    raw_frame_paths,
    raw_to_dataset,
)

W, H = 96, 54  # px: small frames keep the tree fast; the reader takes any size

# Frames of the test tree: (video, clip, frame number, organs shown, RGBA watershed?). Organs are
# drawn as vertical bands left to right after a background band; the frame border is 255 in the
# watershed mask and the colour mask has no border (as real masks: the border is a watershed thing).
FRAMES: list[tuple[str, str, int, tuple[int, ...], bool]] = [
    ("video01", "video01_00080", 80, (2, 10), False),
    ("video01", "video01_00080", 99, (2, 5), False),
    ("video01", "video01_00080", 100, (1, 2, 4), True),  # the RGBA watershed mask
    ("video01", "video01_00080", 159, (2, 9, 10), False),
    ("video01", "video01_00240", 240, (3, 4), False),
    ("video12", "video12_00000", 0, (11,), False),
    ("video12", "video12_00000", 1, (7, 8), False),
    ("video12", "video12_00000", 2, (6, 12), False),
    ("video12", "video12_00000", 10, (2, 11), False),
    ("video09", "video09_01760", 1760, (1, 5, 9), False),
]
# The hub row order, written out by hand from the rule "names sorted as strings at each level"
# (support.evaluations.pointing.dataset.raw_frame_paths): 100 < 159 < 80 < 99 and 0 < 10 < 1 < 2 as
# strings.
HUB_ORDER = [
    "video01/video01_00080/frame_100_endo.png",
    "video01/video01_00080/frame_159_endo.png",
    "video01/video01_00080/frame_80_endo.png",
    "video01/video01_00080/frame_99_endo.png",
    "video01/video01_00240/frame_240_endo.png",
    "video09/video09_01760/frame_1760_endo.png",
    "video12/video12_00000/frame_0_endo.png",
    "video12/video12_00000/frame_10_endo.png",
    "video12/video12_00000/frame_1_endo.png",
    "video12/video12_00000/frame_2_endo.png",
]


def label_image(organs: tuple[int, ...]) -> np.ndarray:
    """(H, W) uint8 class ids: a background band, then one vertical band per organ."""
    labels = np.zeros((H, W), np.uint8)
    width = W // (len(organs) + 1)
    for k, organ in enumerate(organs, start=1):
        labels[:, k * width : (k + 1) * width] = organ
    return labels


def watershed_of(labels: np.ndarray, rgba: bool) -> np.ndarray:
    """The real encoding: grey ids R=G=B, 255 on the 1-px frame border and the band boundaries."""
    grey = np.vectorize(CLASS_TO_WATERSHED.__getitem__, otypes=[np.uint8])(labels)
    grey[:, 1:][labels[:, 1:] != labels[:, :-1]] = 255  # first column of each new band
    grey[0, :] = grey[-1, :] = grey[:, 0] = grey[:, -1] = 255
    planes = [grey, grey, grey] + ([np.full_like(grey, 255)] if rgba else [])
    return np.stack(planes, axis=-1)


def png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def write_tree(root: Path) -> Path:
    """Write FRAMES as a raw tree under root; returns root."""
    for video, clip, k, organs, rgba in FRAMES:
        folder = root / video / clip
        folder.mkdir(parents=True, exist_ok=True)
        labels = label_image(organs)
        colour = np.array([CLASS_TO_COLOR[c] for c in range(13)], np.uint8)[labels]
        image = (colour // 2 + 20).astype(np.uint8)  # any RGB picture
        stem = folder / f"frame_{k}_endo"
        Path(f"{stem}.png").write_bytes(png(image))
        Path(f"{stem}_color_mask.png").write_bytes(png(colour))
        Path(f"{stem}_watershed_mask.png").write_bytes(png(watershed_of(labels, rgba)))
        annotation = np.dstack([labels, labels, labels, np.full_like(labels, 255)])
        Path(f"{stem}_mask.png").write_bytes(png(annotation))
    (root / "video01" / "video01_00080" / "notes.txt").write_text("not a frame")
    return root


def organs_of(path: str) -> tuple[int, ...]:
    for video, clip, k, organs, _ in FRAMES:
        if path == f"{video}/{clip}/frame_{k}_endo.png":
            return organs
    raise KeyError(path)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hub zip's layout: the videoNN folders below one `CholecSeg8k/` folder."""
    top = tmp_path_factory.mktemp("raw")
    write_tree(top / "CholecSeg8k")
    return top


@pytest.fixture(scope="module")
def ds(tree: Path) -> CholecSeg8k:
    return CholecSeg8k.open(tree)


# ---- mask encodings --------------------------------------------------------------------------
def test_watershed_table_is_the_dataset_cards() -> None:
    # the ids of torch_em's cholecseg8k.py LABEL_MAPS and mhjd/cholecseg8k-deeplabv3 src/masks.py
    assert WATERSHED_TO_CLASS == {
        50: 0, 11: 1, 21: 2, 13: 3, 12: 4, 31: 5, 23: 6, 24: 7, 25: 8, 32: 9, 22: 10, 33: 11, 5: 12,
    }  # fmt: skip


def test_watershed_decoding() -> None:
    labels = label_image((2, 5, 12))
    for rgba in (False, True):
        arr = watershed_of(labels, rgba)
        got = watershed_mask_to_labels(arr)
        edge = arr[..., 0] == 255
        assert edge.any() and (got[edge] == IGNORE).all()  # boundaries and border ignored
        np.testing.assert_array_equal(got[~edge], labels[~edge])
    grey = np.array([[50, 11, 255, 0, 7]], np.uint8)  # 0 and 7 are no class ids
    assert watershed_mask_to_labels(grey).tolist() == [[0, 1, IGNORE, IGNORE, IGNORE]]
    colour = np.array([[CLASS_TO_COLOR[2]]], np.uint8)  # a colour mask given as watershed
    with pytest.raises(ValueError, match="differ"):
        watershed_mask_to_labels(colour)
    with pytest.raises(ValueError, match="shape"):
        watershed_mask_to_labels(np.zeros((2, 2, 2), np.uint8))


def test_colour_decoding_alpha_zero_is_ignored() -> None:
    # the original ignores transparent pixels of an RGBA colour mask (llm_cholec_organ
    # src/endopoint/datasets/cholecseg8k.py `_color_mask_to_labels`: labels[alpha == 0] = -1)
    rgba = np.array(
        [[(*CLASS_TO_COLOR[2], 255), (*CLASS_TO_COLOR[2], 0), (1, 2, 3, 255)]], np.uint8
    )
    assert color_mask_to_labels(rgba).tolist() == [[2, IGNORE, IGNORE]]
    assert color_mask_to_labels(rgba[..., :3]).tolist() == [[2, 2, IGNORE]]
    assert set(COLOR_TO_CLASS.values()) == set(range(13))


# ---- the raw tree ----------------------------------------------------------------------------
def test_layout_is_found_at_or_one_level_above(tree: Path) -> None:
    assert find_raw_root(tree) == tree / "CholecSeg8k"
    assert find_raw_root(tree / "CholecSeg8k") == tree / "CholecSeg8k"
    assert find_raw_root(tree / "CholecSeg8k" / "video01") is None
    assert CholecSeg8k.open(tree / "CholecSeg8k").fingerprint == CholecSeg8k.open(tree).fingerprint


def test_rows_are_in_hub_order(ds: CholecSeg8k, tree: Path) -> None:
    assert raw_frame_paths(tree / "CholecSeg8k") == HUB_ORDER
    assert ds.frame_paths() == HUB_ORDER and ds.image_paths() == HUB_ORDER
    assert len(ds) == len(FRAMES)


def test_videos_come_from_folders(ds: CholecSeg8k) -> None:
    assert ds.video_ids() == ["video01"] * 5 + ["video09"] + ["video12"] * 4


def test_labels_presence_and_watershed(ds: CholecSeg8k) -> None:
    for i, path in enumerate(ds.frame_paths()):
        organs = organs_of(path)
        expect = label_image(organs)
        np.testing.assert_array_equal(ds.labels(i), expect)
        present = [j + 1 for j in np.flatnonzero(ds.presence(i))]
        assert present == sorted(organs), path
        ws = ds.watershed_labels(i)
        keep = ws != IGNORE
        assert (~keep).sum() > 2 * (W + H)  # border and band boundaries are 255 -> ignored
        np.testing.assert_array_equal(ws[keep], expect[keep])
    assert ds.image(0).mode == "RGB" and ds.image(0).size == (W, H)


def test_rgba_watershed_mask_reads(ds: CholecSeg8k) -> None:
    i = HUB_ORDER.index("video01/video01_00080/frame_100_endo.png")
    path = ds.raw_root / "video01" / "video01_00080" / "frame_100_endo_watershed_mask.png"
    assert Image.open(path).mode == "RGBA"
    assert set(np.unique(ds.watershed_labels(i)).tolist()) == {IGNORE, 0, 1, 2, 4}


def test_converted_copies_keep_rows_and_paths(ds: CholecSeg8k, tree: Path, tmp_path: Path) -> None:
    copy = raw_to_dataset(tree / "CholecSeg8k", cache_dir=tmp_path / "hf")
    copy.to_parquet(str(tmp_path / "p" / "train.parquet"))
    pq = CholecSeg8k.open(tmp_path / "p", cache_dir=str(tmp_path / "hf"))
    assert pq.frame_paths() == HUB_ORDER and pq.video_ids() == ds.video_ids()
    for i in (0, 3, 9):
        np.testing.assert_array_equal(pq.labels(i), ds.labels(i))
        np.testing.assert_array_equal(pq.watershed_labels(i), ds.watershed_labels(i))


# ---- bad files -------------------------------------------------------------------------------
@pytest.fixture
def copy_tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "tree")


def test_missing_mask_names_the_file(copy_tree: Path) -> None:
    gone = copy_tree / "video12" / "video12_00000" / "frame_10_endo_watershed_mask.png"
    gone.unlink()
    with pytest.raises(FileNotFoundError, match=r"frame_10_endo_watershed_mask\.png"):
        CholecSeg8k.open(copy_tree)


def test_unreadable_png_names_the_file(copy_tree: Path) -> None:
    bad = copy_tree / "video09" / "video09_01760" / "frame_1760_endo_color_mask.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    ds = CholecSeg8k.open(copy_tree)
    i = ds.frame_paths().index("video09/video09_01760/frame_1760_endo.png")
    with pytest.raises(CholecSeg8kFileError, match=r"frame_1760_endo_color_mask\.png"):
        ds.labels(i)
    ds.labels(i - 1)  # other rows still read


def test_mask_of_the_wrong_size_names_the_file(copy_tree: Path) -> None:
    small = copy_tree / "video01" / "video01_00240" / "frame_240_endo_watershed_mask.png"
    small.write_bytes(png(np.full((H // 2, W // 2, 3), 50, np.uint8)))
    ds = CholecSeg8k.open(copy_tree)
    i = ds.frame_paths().index("video01/video01_00240/frame_240_endo.png")
    with pytest.raises(
        CholecSeg8kFileError, match=r"frame_240_endo_watershed_mask\.png: mask is 48x27 px"
    ):
        ds.watershed_labels(i)
    ds.labels(i)  # its colour mask is fine


def test_a_frame_read_decodes_no_watershed_mask_but_names_a_broken_one(copy_tree: Path) -> None:
    ds = CholecSeg8k.open(copy_tree)
    decoded: list[str] = []
    read = ds._rows.read
    ds._rows.read = lambda column, i: decoded.append(column) or read(column, i)  # type: ignore
    assert ds.image(3).size == (W, H) and decoded == ["image"]  # the watershed mask only checked

    i = ds.frame_paths().index("video01/video01_00240/frame_240_endo.png")
    path = copy_tree / "video01" / "video01_00240" / "frame_240_endo_watershed_mask.png"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a byte altered inside its pixel data: the chunk's CRC fails
    path.write_bytes(bytes(data))
    ds = CholecSeg8k.open(copy_tree)
    with pytest.raises(CholecSeg8kFileError, match=re.escape(f"{path}: not a readable image")):
        ds.image(i)
    ds.image(i - 1)  # its neighbours are untouched
    # its values (R = G = B) are checked where they are read: by watershed_labels, not image
    colour = np.array([CLASS_TO_COLOR[c] for c in range(13)], np.uint8)[label_image((1, 2))]
    path.write_bytes(png(colour))
    ds = CholecSeg8k.open(copy_tree)
    assert ds.image(i).size == (W, H)
    with pytest.raises(CholecSeg8kFileError, match=re.escape(f"{path}: ")):
        ds.watershed_labels(i)


def test_other_refusals(tree: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one split"):
        CholecSeg8k.open(tree, split="test")
    two = tmp_path / "two"
    write_tree(two / "a")
    write_tree(two / "b")
    with pytest.raises(ValueError, match="several"):
        CholecSeg8k.open(two)
    with pytest.raises(
        FileNotFoundError,
        match=r"python -m support\.evaluations\.pointing\.download --repo minwoosun/CholecSeg8k",
    ):
        CholecSeg8k.open("minwoosun/CholecSeg8k")


# ---- the hub zip, downloaded by hand ---------------------------------------------------------
def make_zip(tree: Path, path: Path) -> Path:
    """A zip laid out like the hub's: `CholecSeg8k/videoNN/...`, plus macOS resource forks."""
    with zipfile.ZipFile(path, "w") as z:
        for f in sorted((tree / "CholecSeg8k").rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(tree).as_posix())
        z.writestr("__MACOSX/CholecSeg8k/video01/video01_00080/._frame_80_endo.png", b"junk")
    return path


@pytest.fixture
def fake_hub(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """hf_hub_download answered by a local zip; the list collects each call's arguments."""
    calls: list[dict] = []
    zip_path = make_zip(tree, tmp_path / "CholecSeg8k.zip")

    def fake(**kwargs: object) -> str:
        calls.append(kwargs)
        return str(zip_path)

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    return calls


def test_download_extracts_once(fake_hub: list[dict], tmp_path: Path) -> None:
    root = dl.download(tmp_path / "out")
    assert fake_hub == [
        {"repo_id": "minwoosun/CholecSeg8k", "filename": "data/CholecSeg8k.zip",
         "repo_type": "dataset", "revision": None, "cache_dir": None},
    ]  # fmt: skip
    assert root == tmp_path / "out" / "CholecSeg8k"
    assert CholecSeg8k.open(tmp_path / "out").frame_paths() == HUB_ORDER
    assert dl.download(tmp_path / "out") == root and len(fake_hub) == 1  # already there
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out")) == []


def test_bad_zip_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a zip"):
        dl.extract(tmp_path / "bad.zip", tmp_path / "out")
    with zipfile.ZipFile(tmp_path / "empty.zip", "w") as z:
        z.writestr("readme.txt", "no frames")
    with pytest.raises(ValueError, match="no CholecSeg8k tree"):
        dl.extract(tmp_path / "empty.zip", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_download_cli_and_hub_id_lookup(fake_hub: list[dict], tmp_path: Path, capsys) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(
        FileNotFoundError, match=r"python -m support\.evaluations\.pointing\.download --repo "
    ):
        dl.downloaded("minwoosun/CholecSeg8k", cache)
    assert dl.main(["--cache-dir", str(cache)]) == 0
    root = dl.downloaded("minwoosun/CholecSeg8k", cache)
    assert root == cache / "datasets" / "minwoosun__CholecSeg8k" / "CholecSeg8k"
    assert str(root) in capsys.readouterr().out


# ---- a whole run -----------------------------------------------------------------------------
def raw_results(results: Path, run_id: str = "r1") -> list[dict]:
    text = (results / "pointing" / run_id / "raw_results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.slow
def test_oracle_run_on_a_raw_tree(run_suite, tree: Path) -> None:
    result, results = run_suite(
        "pointing", f"--cholecseg8k={tree}", "-m", "quick", "--model=oracle"
    )
    assert result.ret == 0, result.stdout.str()[-3000:]
    summary = pd.read_csv(results / "pointing" / "r1" / "summary.csv")
    metrics = ["accuracy", "pointing_accuracy", "point_hit_rate"]
    assert len(summary) and (summary[metrics].fillna(1.0) == 1.0).all().all()
    rows = raw_results(results)
    assert rows and {r["status"] for r in rows} == {"correct"}
    for r in rows:
        path = HUB_ORDER[r["params"]["row"]]
        assert r["params"]["frame"] == path
        assert r["cluster"] == r["params"]["video"] == path.split("/")[0]  # clusters are videos
        organ, present = r["params"]["organ"], r["params"]["present"]
        assert present == int(organ in organs_of(path))


@pytest.mark.slow
def test_hub_id_runs_once_downloaded(run_suite, tree: Path, tmp_path: Path) -> None:
    missing, _ = run_suite("pointing", "--cholecseg8k=minwoosun/CholecSeg8k", "-m", "quick",
                           "--model=oracle", cache="empty")  # fmt: skip
    assert missing.ret != 0
    assert "python -m support.evaluations.pointing.download --repo minwoosun/CholecSeg8k" in (
        missing.stdout.str() + missing.stderr.str()
    )
    dl.extract(make_zip(tree, tmp_path / "hub.zip"), dl.hub_dir(tmp_path / "cache"))
    result, results = run_suite("pointing", "--cholecseg8k=minwoosun/CholecSeg8k", "-m", "quick",
                                "--model=oracle", run_id="r2")  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert {r["params"]["frame"] for r in raw_results(results, "r2")} <= set(HUB_ORDER)
