"""CholecSeg8k loader and the synthetic sample in its format (offline, a few seconds): the raw
tree the default run reads, and the save_to_disk / parquet copies converted from it."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import datasets
import numpy as np
import pytest
from PIL import Image

from support.evaluations.pointing import synthetic as synth
from support.evaluations.pointing.classes import (
    COLOR_TO_CLASS,
    IGNORE,
    WATERSHED_TO_CLASS,
    presence_vector,
)
from support.evaluations.pointing.dataset import CholecSeg8k, video_id_from_path

# one worker runs this module: its costly module fixtures are built once, not once a worker
pytestmark = pytest.mark.xdist_group("cholecseg8k_data")

ROOT = Path(__file__).resolve().parents[3]
N_VIDEOS, N_FRAMES = 3, 20  # the small sample: 60 rows


@pytest.fixture(scope="session")
def small_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The raw tree (the default format)."""
    out = tmp_path_factory.mktemp("cs8k") / "small"
    return synth.build_cholecseg8k(out, seed=0, n_videos=N_VIDEOS, frames_per_video=N_FRAMES)


@pytest.fixture(scope="session")
def disk_dir(small_dir: Path) -> Path:
    """The same rows as a save_to_disk folder (which keeps only the file names of paths)."""
    out = small_dir.parent / "disk"
    return synth.build_cholecseg8k(
        out, seed=0, n_videos=N_VIDEOS, frames_per_video=N_FRAMES, fmt="save_to_disk"
    )


@pytest.fixture(scope="session")
def parquet_file(small_dir: Path) -> Path:
    """The same rows as parquet, which (unlike save_to_disk) keeps the videoNN/ folders of paths."""
    out = small_dir.parent / "parquet"
    return synth.build_cholecseg8k(
        out, seed=0, n_videos=N_VIDEOS, frames_per_video=N_FRAMES, fmt="parquet"
    )


@pytest.fixture(scope="session")
def small(small_dir: Path) -> CholecSeg8k:
    return CholecSeg8k.open(small_dir)


def _tiny_dataset(n: int, paths: list[str] | None = None, columns=("image", "color_mask")):
    """n rows of 4x2 px images: fast stand-ins for loader edge cases."""
    png = io.BytesIO()
    Image.fromarray(np.full((2, 4, 3), (210, 140, 140), np.uint8)).save(png, format="PNG")
    rows = [{"bytes": png.getvalue(), "path": p} for p in paths or [f"f{i}.png" for i in range(n)]]
    features = datasets.Features({c: datasets.Image() for c in columns})
    return datasets.Dataset.from_dict({c: rows for c in columns}, features=features)


@pytest.mark.parametrize("kind", ["raw", "disk", "parquet"])
def test_loader_reads_rows(
    kind: str, small_dir: Path, disk_dir: Path, parquet_file: Path, tmp_path: Path
) -> None:
    if kind == "raw":
        ds = CholecSeg8k.open(small_dir)
    elif kind == "disk":
        ds = CholecSeg8k.open(disk_dir)
    else:
        ds = CholecSeg8k.open(parquet_file, cache_dir=str(tmp_path / "hf"))
    assert len(ds) == N_VIDEOS * N_FRAMES
    img = ds.image(7)
    assert img.mode == "RGB" and img.size == (854, 480)
    labels = ds.labels(7)
    assert labels.dtype == np.int8 and labels.shape == (480, 854)
    assert set(np.unique(labels).tolist()) <= {IGNORE, *COLOR_TO_CLASS.values()}
    np.testing.assert_array_equal(ds.presence(7), presence_vector(labels))
    assert ds.presence(7, min_pixels=10**7).sum() == 0
    if kind == "disk":  # save_to_disk keeps file names only: clips of 80 rows
        assert ds.video_ids() == ["clip000"] * (N_VIDEOS * N_FRAMES)
    else:
        expect = [v for v in ("video01", "video09", "video12") for _ in range(N_FRAMES)]
        assert ds.video_ids() == expect
        assert [p.split("/")[0] for p in ds.frame_paths()] == expect
    if kind != "raw":  # the copies hold the raw tree's rows, in its order
        raw = CholecSeg8k.open(small_dir)
        for i in (0, 7, len(ds) - 1):
            np.testing.assert_array_equal(ds.labels(i), raw.labels(i))
            np.testing.assert_array_equal(np.asarray(ds.image(i)), np.asarray(raw.image(i)))


def test_parquet_folder_and_glob(
    small_dir: Path, disk_dir: Path, parquet_file: Path, tmp_path: Path
) -> None:
    hf = str(tmp_path / "hf")
    by_folder = CholecSeg8k.open(parquet_file.parent, cache_dir=hf)
    by_glob = CholecSeg8k.open(str(parquet_file.parent / "*.parquet"), cache_dir=hf)
    assert len(by_folder) == len(by_glob) == N_VIDEOS * N_FRAMES
    assert by_folder.fingerprint == by_glob.fingerprint
    others = {CholecSeg8k.open(small_dir).fingerprint, CholecSeg8k.open(disk_dir).fingerprint}
    assert by_folder.fingerprint not in others and len(others) == 2


def test_fingerprint_stable_across_processes(small_dir: Path, small: CholecSeg8k) -> None:
    code = "import sys; from support.evaluations.pointing.dataset import CholecSeg8k as C; "
    code += "print(C.open(sys.argv[1]).fingerprint)"
    out = subprocess.run(
        [sys.executable, "-c", code, str(small_dir)], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == small.fingerprint


def test_synthetic_format(small_dir: Path, parquet_file: Path, small: CholecSeg8k) -> None:
    import pyarrow.parquet as pq

    # the raw tree: videoNN/videoNN_SSSSS/frame_K_endo.png and three masks beside each frame
    frames = sorted(small_dir.glob("video*/video*_*/frame_*_endo.png"))
    assert len(frames) == N_VIDEOS * N_FRAMES == len(small)
    m = re.fullmatch(r"(video\d\d)/\1_(\d{5})/frame_(\d+)_endo\.png", small.frame_paths()[3])
    assert m and int(m[3]) == int(m[2]) + 3  # 4th frame of a clip starting at frame m[2]
    for frame in frames:
        stem = str(frame).removesuffix(".png")
        for suffix in ("_color_mask", "_watershed_mask", "_mask"):
            assert Path(f"{stem}{suffix}.png").is_file()
    image = Image.open(frames[0])
    assert image.format == "PNG" and image.mode == "RGB" and image.size == (854, 480)
    assert Image.open(f"{str(frames[0])[:-4]}_color_mask.png").mode == "RGB"
    assert Image.open(f"{str(frames[0])[:-4]}_mask.png").mode == "RGBA"  # annotation tool's
    # watershed masks: grey R=G=B ids of the card's table, 255 on border and boundaries, and a
    # 4th all-255 channel on frames K with K % 10 == 3
    modes = {}
    for i, path in enumerate(small.frame_paths()[:N_FRAMES]):
        k = int(re.search(r"frame_(\d+)_", path)[1])
        ws = np.asarray(Image.open(small.raw_root / path.replace(".png", "_watershed_mask.png")))
        modes[k % 10 == 3] = ws.shape[2]
        assert (ws[..., 0] == ws[..., 1]).all() and (ws[..., 0] == ws[..., 2]).all()
        if ws.shape[2] == 4:
            assert (ws[..., 3] == 255).all()
        assert set(np.unique(ws[..., 0]).tolist()) <= {*WATERSHED_TO_CLASS, 255}
        assert (ws[0, :, 0] == 255).all() and (ws[-1, :, 0] == 255).all()  # the border
        labels, wl = small.labels(i), small.watershed_labels(i)
        known = wl != IGNORE
        assert 0.95 < known.mean() < 1 and (labels[known] == wl[known]).all()
    assert modes == {True: 4, False: 3}
    # parquet copies keep the relative paths of all four files
    row = pq.read_table(parquet_file).slice(3, 1).to_pylist()[0]
    assert row["image"]["path"] == small.frame_paths()[3]
    stem = row["image"]["path"].removesuffix(".png")
    assert row["color_mask"]["path"] == f"{stem}_color_mask.png"
    assert row["watershed_mask"]["path"] == f"{stem}_watershed_mask.png"
    assert row["annotation_mask"]["path"] == f"{stem}_mask.png"
    ignored = np.mean([(small.labels(i) == IGNORE).mean() for i in range(0, len(small), 5)])
    assert 0 < ignored < 0.01  # a few unknown-colour pixels, ignored
    # frames of one video are correlated, frames of different videos much less so
    same = np.mean([(small.labels(i) == small.labels(i + 1)).mean() for i in range(0, 18, 3)])
    other = np.mean([(small.labels(i) == small.labels(i + 20)).mean() for i in range(0, 18, 3)])
    assert same > 0.8 and same > other + 0.1
    Y = np.stack([small.presence(i) for i in range(len(small))])
    assert 0 < Y.mean() < 1 and Y.any(axis=0).sum() >= 8  # varied, most organs appear


def test_synthetic_is_deterministic(tmp_path: Path) -> None:
    def build(name: str, seed: int) -> Path:
        return synth.build_cholecseg8k(tmp_path / name, seed=seed, n_videos=1, frames_per_video=3)

    def files(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.png")}

    a, b, c = build("a", 0), build("b", 0), build("c", 1)
    assert len(files(a)) == 12 and files(a) == files(b) and files(a) != files(c)
    fps = [CholecSeg8k.open(p).fingerprint for p in (a, b, c)]
    assert fps[0] != fps[2]  # the raw fingerprint also holds file times: a and b may differ


def test_ensure_builds_once_and_is_safe_in_parallel(tmp_path: Path, monkeypatch) -> None:
    real, calls = synth.build_cholecseg8k, []

    def small_build(out_dir: Path, seed: int = 0) -> Path:
        calls.append(seed)
        return real(out_dir, seed=seed, n_videos=1, frames_per_video=2)

    monkeypatch.setattr(synth, "build_cholecseg8k", small_build)
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(synth.ensure_cholecseg8k(tmp_path, 3)))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    target = tmp_path / "synthetic" / f"cholecseg8k-seed3-{synth.VERSION}"
    assert results == [target] * 3 and calls == [3]  # one build; the others waited for it
    leftovers = {p.name for p in target.parent.iterdir()} - {target.name, f"{target.name}.lock"}
    assert not leftovers  # no temp folder left
    assert len(CholecSeg8k.open(target)) == 2
    assert synth.ensure_cholecseg8k(tmp_path, 3) == target and calls == [3]  # reused


def test_clip_fallback_without_video_paths(tmp_path: Path, caplog) -> None:
    _tiny_dataset(170).save_to_disk(str(tmp_path / "tiny"))
    with caplog.at_level(logging.WARNING):
        ids = CholecSeg8k.open(tmp_path / "tiny").video_ids()
    assert ids == ["clip000"] * 80 + ["clip001"] * 80 + ["clip002"] * 10
    assert "clip" in caplog.text


def test_save_to_disk_keeps_basenames_only(disk_dir: Path, tmp_path: Path) -> None:
    # datasets' own save_to_disk drops the folders of local paths: the loader falls back to clips
    datasets.load_from_disk(str(disk_dir)).select(range(3)).save_to_disk(str(tmp_path / "re"))
    assert CholecSeg8k.open(tmp_path / "re").video_ids() == ["clip000"] * 3


def test_video_id_from_path() -> None:
    assert video_id_from_path("/x/video01/video01_00080/frame_80_endo.png") == "video01"
    assert video_id_from_path("Video52/frame_1.png") == "video52"
    assert video_id_from_path("frame_80_endo.png") is None and video_id_from_path(None) is None


def test_plain_parquet_struct_columns(tmp_path: Path) -> None:
    # parquet without the datasets schema metadata: {bytes, path} structs are cast to images
    import pyarrow.parquet as pq

    table = _tiny_dataset(3, [f"x/video07/f{i}.png" for i in range(3)]).data.table
    pq.write_table(table.replace_schema_metadata(None), tmp_path / "plain.parquet")
    ds = CholecSeg8k.open(tmp_path / "plain.parquet", cache_dir=str(tmp_path / "hf"))
    assert ds.image(2).size == (4, 2) and ds.labels(0).tolist() == [[1] * 4] * 2
    assert ds.video_ids() == ["video07"] * 3


def test_dataset_dict_folder_and_split(tmp_path: Path) -> None:
    datasets.DatasetDict({"train": _tiny_dataset(3)}).save_to_disk(str(tmp_path / "dd"))
    assert len(CholecSeg8k.open(tmp_path / "dd")) == 3
    with pytest.raises(ValueError, match="no split 'test'"):
        CholecSeg8k.open(tmp_path / "dd", split="test")


def test_clear_errors(small: CholecSeg8k, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        CholecSeg8k.open(tmp_path / "nowhere")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "a.txt").write_text("x")
    with pytest.raises(ValueError, match="neither"):
        CholecSeg8k.open(tmp_path / "junk")
    with pytest.raises(ValueError, match="neither"):
        CholecSeg8k.open(tmp_path / "junk" / "a.txt")
    with pytest.raises(FileNotFoundError, match="no file matches"):
        CholecSeg8k.open(str(tmp_path / "junk" / "*.parquet"))
    _tiny_dataset(2, columns=("image",)).save_to_disk(str(tmp_path / "nomask"))
    with pytest.raises(ValueError, match="'color_mask'"):
        CholecSeg8k.open(tmp_path / "nomask")
    for bad in (len(small), -1, 2.0):
        with pytest.raises(ValueError, match=f"row {bad!r}"):
            small.labels(bad)  # type: ignore[arg-type]
    with pytest.raises(IndexError):
        small.image(len(small))


def test_threaded_reads_agree(small: CholecSeg8k) -> None:
    from concurrent.futures import ThreadPoolExecutor

    rows = list(range(0, len(small), 3)) * 2
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(small.presence, rows))
    assert all((g == small.presence(r)).all() for g, r in zip(got, rows, strict=True))


def test_synthetic_cli(tmp_path: Path) -> None:
    out = tmp_path / "cli"
    cmd = [sys.executable, "-m", "support.evaluations.pointing.synthetic", "--out", str(out),
           "--seed", "2", "--n-videos", "1", "--frames-per-video", "2"]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "wrote 2 rows" in res.stdout and len(CholecSeg8k.open(out)) == 2
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode != 0 and "not empty" in again.stderr
