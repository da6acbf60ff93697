"""Read access to CholecSeg8k (`minwoosun/CholecSeg8k`): images, class-id label maps, videos.

The real data is one `train` split of 8,080 rows with `datasets.Image` columns `image`,
`color_mask`, `watershed_mask`, `annotation_mask`, each 854x480 (W x H). It has no video column: the
video of a row is read from the stored file path of its image (`.../video01/video01_00080/
frame_80_endo.png` -> `video01`) without decoding any image.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from support.pointing.classes import color_mask_to_labels, presence_vector

log = logging.getLogger(__name__)

REQUIRED_COLUMNS = ("image", "color_mask")
CLIP_LEN = 80  # frames per CholecSeg8k clip: the fallback grouping when paths name no video
_VIDEO_RE = re.compile(r"video\d+", re.IGNORECASE)
HUB_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class RowIndexError(IndexError, ValueError):
    """A row index outside 0..len-1 (both an IndexError and a ValueError)."""


def video_id_from_path(path: str | None) -> str | None:
    """`'.../video01/video01_00080/frame_80_endo.png'` -> `'video01'`; None without a marker."""
    found = _VIDEO_RE.findall(path or "")
    return found[-1].lower() if found else None


def _fingerprint(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()[:16]


def _parquet_files(source: str) -> list[Path] | None:
    """The parquet files a path / folder / glob names, sorted; None if it names no parquet."""
    if glob.has_magic(source):
        files = sorted(Path(p) for p in glob.glob(source, recursive=True))
        if not files:
            raise FileNotFoundError(f"no file matches {source!r}")
    else:
        p = Path(source)
        files = [p] if p.is_file() else sorted(p.rglob("*.parquet"))
    files = [f for f in files if f.is_file() and f.suffix == ".parquet"]
    return files or None


class CholecSeg8k:
    """One split of CholecSeg8k (or a synthetic sample in its format): read-only, thread-safe."""

    def __init__(self, ds: Any, source: str, fingerprint: str, split: str = "train") -> None:
        """Use `CholecSeg8k.open`; `ds` is a `datasets.Dataset` with at least image, color_mask."""
        missing = [c for c in REQUIRED_COLUMNS if c not in ds.column_names]
        if missing:
            raise ValueError(
                f"{source}: dataset has no {', '.join(map(repr, missing))} column "
                f"(columns: {', '.join(ds.column_names)})"
            )
        import datasets

        for c in REQUIRED_COLUMNS:  # e.g. parquet written without the datasets schema metadata
            if not isinstance(ds.features[c], datasets.Image):
                try:
                    ds = ds.cast_column(c, datasets.Image())
                except (TypeError, ValueError) as e:
                    raise ValueError(f"{source}: column {c!r} holds no images: {e}") from e
        self._ds = ds
        self.source = source  # as given to open()
        self.fingerprint = fingerprint  # stable id of the data: names cache folders
        self.split = split
        # one single-column view per decoded column: a row read decodes only that image
        self._views = {c: ds.select_columns([c]) for c in REQUIRED_COLUMNS}
        self._video_ids: list[str] | None = None

    @classmethod
    def open(
        cls, source: str | os.PathLike, split: str = "train", cache_dir: str | None = None
    ) -> CholecSeg8k:
        """Open `source`: a `save_to_disk` folder (Dataset or DatasetDict), a parquet file, folder
        of parquet files or glob, or a hub id like 'minwoosun/CholecSeg8k' (network; only if asked).

        `cache_dir` is where `datasets` converts parquet / hub data to arrow (default: its cache).
        """
        import datasets

        src = os.fspath(source)
        path = Path(src).expanduser()
        if path.is_dir() and (path / "dataset_dict.json").is_file():
            splits = json.loads((path / "dataset_dict.json").read_text())["splits"]
            if split not in splits:
                raise ValueError(f"{src}: no split {split!r} (splits: {', '.join(splits)})")
            path = path / split
        if path.is_dir() and (path / "state.json").is_file():
            # the fingerprint save_to_disk stored: fixed for the folder, whichever process reads it
            state = json.loads((path / "state.json").read_text())
            if state.get("_split") not in (None, split):
                raise ValueError(f"{src}: holds split {state['_split']!r}, not {split!r}")
            ds = datasets.load_from_disk(str(path))
            return cls(ds, src, _fingerprint("disk", state.get("_fingerprint"), split), split)
        if path.exists() or glob.has_magic(src):
            files = _parquet_files(str(path) if path.exists() else src)
            if files is None:
                raise ValueError(
                    f"{src}: neither a datasets save_to_disk folder (no state.json or "
                    "dataset_dict.json) nor parquet file(s)"
                )
            ds = datasets.load_dataset(
                "parquet",
                data_files={split: [str(f) for f in files]},
                split=split,
                cache_dir=cache_dir,
            )
            stats = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]
            return cls(ds, src, _fingerprint("parquet", split, *stats), split)
        if HUB_ID_RE.match(src) and not Path(src.split("/")[0]).exists():
            try:
                ds = datasets.load_dataset(src, split=split, cache_dir=cache_dir)
            except Exception as e:  # offline, unknown repo, no such split, ...
                raise FileNotFoundError(
                    f"{src}: no such local path, and loading it as a hub dataset failed: {e}"
                ) from e
            return cls(ds, src, _fingerprint("hub", src, split, ds._fingerprint), split)
        raise FileNotFoundError(f"CholecSeg8k source not found: {src}")

    def __len__(self) -> int:
        return len(self._ds)

    def __repr__(self) -> str:
        return f"CholecSeg8k({self.source!r}, rows={len(self)}, fingerprint={self.fingerprint})"

    def _row(self, column: str, i: int) -> Image.Image:
        n = len(self._ds)
        if isinstance(i, bool) or not isinstance(i, int | np.integer) or not 0 <= i < n:
            raise RowIndexError(f"{self.source}: row {i!r} out of range (0..{n - 1})")
        return self._views[column][int(i)][column]

    def image(self, i: int) -> Image.Image:
        """Row i's frame as an RGB PIL image (854x480 for the real data)."""
        img = self._row("image", i)
        return img if img.mode == "RGB" else img.convert("RGB")

    def labels(self, i: int) -> np.ndarray:
        """(H, W) int8 class ids of row i from its colour mask; IGNORE (-1) for unknown colours."""
        mask = self._row("color_mask", i)
        if mask.mode not in ("RGB", "RGBA"):
            mask = mask.convert("RGB")
        return color_mask_to_labels(np.asarray(mask))

    def presence(self, i: int, min_pixels: int = 1) -> np.ndarray:
        """(12,) uint8: which of organ ids 1..12 cover at least min_pixels pixels in row i."""
        return presence_vector(self.labels(i), min_pixels)

    def image_paths(self) -> list[str | None]:
        """The stored file path of each row's image (no image is decoded)."""
        import pyarrow.compute as pc

        table = self._views["image"].with_format("arrow")[:]  # undecoded {bytes, path} structs
        return pc.struct_field(table.column("image"), "path").to_pylist()

    def video_ids(self) -> list[str]:
        """One video id per row (`'video01'`), from the image paths; computed once.

        Rows whose path names no video get the clip id `clip{row // 80:03d}` (80-frame clips).
        """
        if self._video_ids is None:
            ids = [video_id_from_path(p) for p in self.image_paths()]
            n_missing = sum(v is None for v in ids)
            if n_missing:
                log.warning(
                    "%s: %d of %d image paths name no videoNN; using clip ids clip{row // %d}",
                    self.source, n_missing, len(ids), CLIP_LEN,
                )  # fmt: skip
            self._video_ids = [v or f"clip{r // CLIP_LEN:03d}" for r, v in enumerate(ids)]
        return list(self._video_ids)
