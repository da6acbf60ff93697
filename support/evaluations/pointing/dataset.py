"""Read access to CholecSeg8k: images, class-id label maps, videos, frame paths.

Three forms of the same data are read:

- the raw tree as published (the Kaggle download, or the hub zip `data/CholecSeg8k.zip` of
  `minwoosun/CholecSeg8k` extracted): `videoNN/videoNN_SSSSS/frame_K_endo.png` (SSSSS = first
  frame of the 80-frame clip) with `frame_K_endo_color_mask.png`,
  `frame_K_endo_watershed_mask.png` and `frame_K_endo_mask.png` beside each frame. The folder
  given may also be one level above the `videoNN` folders (the hub zip's `CholecSeg8k/`).
  Rows are in hub order (`raw_frame_paths`), videos come from the folder names.
- a `datasets` copy: a `save_to_disk` folder or parquet files with `datasets.Image` columns
  `image`, `color_mask` (required), `watershed_mask`, `annotation_mask`. The video of a row is
  read from the stored file path of its image (`.../video01/video01_00080/frame_80_endo.png` ->
  `video01`) without decoding any image.

The real data is 8,080 frames of 17 videos, 854x480 (W x H).
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from support.contract.data_paths import files_below
from support.evaluations.pointing.classes import (
    color_mask_to_labels,
    presence_vector,
    watershed_mask_to_labels,
)
from support.images import ImageDecodeError, checked_size, decode_image, image_size, to_rgb

log = logging.getLogger(__name__)

REQUIRED_COLUMNS = ("image", "color_mask")
COLUMNS = ("image", "color_mask", "watershed_mask", "annotation_mask")
# column -> what the raw tree appends to the frame's stem `frame_K_endo`
SUFFIX: dict[str, str] = {
    "image": "",
    "color_mask": "_color_mask",
    "watershed_mask": "_watershed_mask",
    "annotation_mask": "_mask",
}
CLIP_LEN = 80  # frames per CholecSeg8k clip: the fallback grouping when paths name no video
RAW_PATTERN = "video*/video*_*/frame_*_endo.png"  # a raw tree's frames, below its root
_FRAME_RE = re.compile(r"frame_\d+_endo\.png")
_VIDEO_RE = re.compile(r"video\d+", re.IGNORECASE)
HUB_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
HUB_ID = "minwoosun/CholecSeg8k"


class RowIndexError(IndexError, ValueError):
    """A row index outside 0..len-1 (both an IndexError and a ValueError)."""


class CholecSeg8kFileError(ValueError):
    """A file of the dataset is missing, unreadable or of the wrong size; the message names it."""


class CholecSeg8kImageError(CholecSeg8kFileError, ImageDecodeError):
    """An image file of the dataset that the image door (support/images.py) refused or could not
    decode: missing, of a format not read, over the pixel limit or broken; the message names it."""


def video_id_from_path(path: str | None) -> str | None:
    """`'.../video01/video01_00080/frame_80_endo.png'` -> `'video01'`; None without a marker."""
    found = _VIDEO_RE.findall(path or "")
    return found[-1].lower() if found else None


def is_hub_id(source: str) -> bool:
    """Whether `source` reads as a hub id ("owner/name") and names no local path."""
    return bool(HUB_ID_RE.match(source)) and not Path(source.split("/")[0]).exists()


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
        files = [p] if p.is_file() else sorted(files_below(p, "*.parquet"))
    files = [f for f in files if f.is_file() and f.suffix == ".parquet"]
    return files or None


# ---- the raw tree ----------------------------------------------------------------------------
def _has_frames(folder: Path) -> bool:
    return next(iter(folder.glob(RAW_PATTERN)), None) is not None


def find_raw_root(folder: Path) -> Path | None:
    """The root of a raw CholecSeg8k tree at `folder` (it holds `video*/video*_*/frame_*_endo.png`)
    or in exactly one of its sub-folders (the hub zip's `CholecSeg8k/`); None if neither."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    if _has_frames(folder):
        return folder
    below = sorted(d for d in folder.iterdir() if d.is_dir() and _has_frames(d))
    if len(below) > 1:
        raise ValueError(
            f"{folder}: several CholecSeg8k trees below it ({', '.join(d.name for d in below)}); "
            "give one of them"
        )
    return below[0] if below else None


def _text_name(path: Path) -> str:
    """path.name, or CholecSeg8kFileError when the name is not UTF-8 (it could not be stored)."""
    try:
        path.name.encode("utf-8")
    except UnicodeEncodeError:
        shown = str(path).encode("utf-8", "backslashreplace").decode("utf-8")
        raise CholecSeg8kFileError(f"{shown}: a folder name that is not UTF-8; rename it") from None
    return path.name


def raw_frame_paths(root: Path) -> list[str]:
    """Relative POSIX paths of the frames of a raw tree, in the hub dataset's row order.

    The order sorts names as strings at each level: video folders, clip folders, then frame file
    names, so `frame_100_endo.png` comes before `frame_80_endo.png` inside `video01_00080`. That
    is the order of a walk that sorts each folder's entries (`sorted(os.listdir(...))`, a sorted
    glob, or `datasets`' `dl_manager.iter_files`, which sorts directories and files by name), and
    it is what another hub copy of the data shows (MedOtter/CholecSeg8k's viewer starts at
    `video01_00080` `frame_100_endo.png`). The hub script's loop itself could not be read, so
    this is inferred, not copied. Video and clip names are zero-padded, so only frame numbers
    differ from numeric order.
    """
    out: list[str] = []
    broken: list[str] = []  # frame names that hold no file: named, never dropped (no renumbering)
    for video in sorted(_text_name(p) for p in root.glob("video*") if p.is_dir()):
        for clip in sorted(_text_name(p) for p in (root / video).glob("video*_*") if p.is_dir()):
            folder = root / video / clip
            names = sorted(f.name for f in folder.iterdir() if _FRAME_RE.fullmatch(f.name))
            holes = [folder / n for n in names if not (folder / n).is_file()]
            broken += [f"{path}: {_not_a_file(path)}" for path in holes]
            out.extend(f"{video}/{clip}/{n}" for n in names)
    if broken:
        more = f" (and {len(broken) - 5} more)" if len(broken) > 5 else ""
        raise CholecSeg8kFileError(
            f"{root}: {len(broken)} frame name(s) that are no frame file, which would shift the "
            f"rows after them: {'; '.join(broken[:5])}{more}"
        )
    return out


def _not_a_file(path: Path) -> str:
    """Why a frame's name holds no regular file (is_file() was False)."""
    if path.is_dir():  # a folder, or a link to one
        return "a folder, not a frame image"
    if path.is_symlink():
        return "a symbolic link that leads to no file (a loop, or a missing target)"
    return "not a regular file"


def mask_path(frame: str, column: str) -> str:
    """`'v/c/frame_80_endo.png'`, `'color_mask'` -> `'v/c/frame_80_endo_color_mask.png'`."""
    return f"{frame.removesuffix('.png')}{SUFFIX[column]}.png"


class RawTree:
    """The rows of a raw CholecSeg8k tree: one per frame, with its three masks beside it."""

    def __init__(self, root: Path, frames: Sequence[str]) -> None:
        """Use `RawTree.scan`; `frames` are relative paths in row order."""
        self.root = Path(root)
        self.frames = list(frames)

    @classmethod
    def scan(cls, root: Path) -> tuple[RawTree, str]:
        """(tree, fingerprint) of the tree at root; FileNotFoundError names missing masks."""
        root = Path(root)
        frames = raw_frame_paths(root)
        if not frames:
            raise FileNotFoundError(f"{root}: no {RAW_PATTERN} frames")
        stats: list[object] = []
        missing: list[str] = []
        for frame in frames:
            for column in COLUMNS:
                rel = mask_path(frame, column)
                try:
                    st = (root / rel).stat()
                except FileNotFoundError:
                    missing.append(rel)
                    continue
                stats += [rel, st.st_size, st.st_mtime_ns]
        if missing:
            shown = ", ".join(str(root / m) for m in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            raise FileNotFoundError(
                f"{root}: {len(missing)} mask file(s) missing beside their frames: {shown}{more}"
            )
        return cls(root, frames), _fingerprint("raw", *stats)

    def __len__(self) -> int:
        return len(self.frames)

    def path(self, column: str, i: int) -> Path:
        """The file of row i's `column` (image or one of the masks)."""
        return self.root / mask_path(self.frames[i], column)

    def read(self, column: str, i: int) -> Image.Image:
        """Row i's `column` decoded; CholecSeg8kFileError names an unreadable file."""
        path = self.path(column, i)
        try:  # decoded now, through the image door: a broken or refused file fails here, named
            return decode_image(path, mode="stored")
        except ImageDecodeError as e:
            raise CholecSeg8kImageError(str(e)) from None

    def size(self, column: str, i: int) -> tuple[int, int]:
        """(W, H) of row i's `column` from its header."""
        path = self.path(column, i)
        try:
            return image_size(path)
        except ImageDecodeError as e:
            raise CholecSeg8kImageError(str(e)) from None

    def checked_size(self, column: str, i: int) -> tuple[int, int]:
        """(W, H) of row i's `column`, its file checked whole without decoding its pixels."""
        path = self.path(column, i)
        try:
            return checked_size(path)
        except ImageDecodeError as e:
            raise CholecSeg8kImageError(str(e)) from None

    def where(self, column: str, i: int) -> str:
        return str(self.path(column, i))


class _DatasetRows:
    """The rows of a `datasets.Dataset` with image columns (save_to_disk or parquet)."""

    def __init__(self, ds: Any, source: str) -> None:
        import datasets

        missing = [c for c in REQUIRED_COLUMNS if c not in ds.column_names]
        if missing:
            raise ValueError(
                f"{source}: dataset has no {', '.join(map(repr, missing))} column "
                f"(columns: {', '.join(ds.column_names)})"
            )
        for c in [c for c in COLUMNS if c in ds.column_names]:
            if not isinstance(ds.features[c], datasets.Image):  # e.g. parquet without metadata
                try:
                    ds = ds.cast_column(c, datasets.Image())
                except (TypeError, ValueError) as e:
                    raise ValueError(f"{source}: column {c!r} holds no images: {e}") from e
        self.ds = ds
        self.source = source
        # one single-column view per column, its images left encoded ({bytes, path}): a row read
        # decodes only that image, through the image door (support/images.py), never datasets'
        # own decoding (every Pillow plugin, Ghostscript's included)
        self._views = {
            c: ds.select_columns([c]).cast_column(c, datasets.Image(decode=False))
            for c in COLUMNS
            if c in ds.column_names
        }

    def __len__(self) -> int:
        return len(self.ds)

    def _view(self, column: str) -> Any:
        if column not in self._views:
            raise ValueError(f"{self.source}: dataset has no {column!r} column")
        return self._views[column]

    def _encoded(self, column: str, i: int) -> bytes | str:
        """Row i's `column` as stored: its bytes, or the path of its file."""
        cell = self._view(column)[i][column] or {}
        data = cell.get("bytes")
        if data is None and not cell.get("path"):
            raise CholecSeg8kFileError(f"{self.where(column, i)}: no image stored")
        return data if data is not None else cell["path"]

    def read(self, column: str, i: int) -> Image.Image:
        try:
            return decode_image(self._encoded(column, i), self.where(column, i), mode="stored")
        except ImageDecodeError as e:
            raise CholecSeg8kImageError(str(e)) from None

    def size(self, column: str, i: int) -> tuple[int, int]:
        try:  # the header only
            return image_size(self._encoded(column, i), self.where(column, i))
        except ImageDecodeError as e:
            raise CholecSeg8kImageError(str(e)) from None

    def checked_size(self, column: str, i: int) -> tuple[int, int]:
        try:  # the whole file checked, no pixel decoded
            return checked_size(self._encoded(column, i), self.where(column, i))
        except ImageDecodeError as e:
            raise CholecSeg8kImageError(str(e)) from None

    def where(self, column: str, i: int) -> str:
        return f"{self.source}: row {i} column {column!r}"

    def paths(self) -> list[str | None]:
        """The stored file path of each row's image (no image is decoded)."""
        import pyarrow.compute as pc

        table = self._view("image").with_format("arrow")[:]  # undecoded {bytes, path} structs
        return pc.struct_field(table.column("image"), "path").to_pylist()


class CholecSeg8k:
    """One split of CholecSeg8k (or a synthetic sample in its format): read-only, thread-safe."""

    def __init__(
        self, rows: RawTree | Any, source: str, fingerprint: str, split: str = "train"
    ) -> None:
        """Use `CholecSeg8k.open`; `rows` is a RawTree or a `datasets.Dataset` with at least the
        image and color_mask columns."""
        self._rows = rows if isinstance(rows, RawTree) else _DatasetRows(rows, source)
        self.source = source  # as given to open()
        self.fingerprint = fingerprint  # stable id of the data: names cache folders
        self.split = split
        self._video_ids: list[str] | None = None

    @property
    def raw_root(self) -> Path | None:
        """The root folder when reading a raw tree, else None."""
        return self._rows.root if isinstance(self._rows, RawTree) else None

    @classmethod
    def open(
        cls, source: str | os.PathLike, split: str = "train", cache_dir: str | None = None
    ) -> CholecSeg8k:
        """Open `source`: a raw CholecSeg8k tree (or the folder above it), a `save_to_disk` folder
        (Dataset or DatasetDict), a parquet file, folder of parquet files or glob.

        A hub id ('minwoosun/CholecSeg8k') is refused with the command that downloads it: the hub
        dataset is a loading script, which current `datasets` will not run.
        `cache_dir` is where `datasets` converts parquet to arrow (default: its cache).
        """
        src = os.fspath(source)
        path = Path(src).expanduser()
        if path.is_dir() and (path / "dataset_dict.json").is_file():
            splits = json.loads((path / "dataset_dict.json").read_text())["splits"]
            if split not in splits:
                raise ValueError(f"{src}: no split {split!r} (splits: {', '.join(splits)})")
            path = path / split
        if path.is_dir() and (path / "state.json").is_file():
            import datasets

            # the fingerprint save_to_disk stored: fixed for the folder, whichever process reads it
            state = json.loads((path / "state.json").read_text())
            if state.get("_split") not in (None, split):
                raise ValueError(f"{src}: holds split {state['_split']!r}, not {split!r}")
            ds = datasets.load_from_disk(str(path))
            return cls(ds, src, _fingerprint("disk", state.get("_fingerprint"), split), split)
        root = find_raw_root(path)
        if root is not None:
            if split != "train":
                raise ValueError(
                    f"{src}: a raw CholecSeg8k tree has one split, 'train', not {split!r}"
                )
            tree, fp = RawTree.scan(root)
            return cls(tree, src, fp, split)
        if path.exists() or glob.has_magic(src):
            files = _parquet_files(str(path) if path.exists() else src)
            if files is None:
                raise ValueError(
                    f"{src}: neither a raw CholecSeg8k tree (no {RAW_PATTERN} in it or in one "
                    "folder below it), a datasets save_to_disk folder (no state.json or "
                    "dataset_dict.json), nor parquet file(s)"
                )
            import datasets

            ds = datasets.load_dataset(
                "parquet",
                data_files={split: [str(f) for f in files]},
                split=split,
                cache_dir=cache_dir,
            )
            stats = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]
            return cls(ds, src, _fingerprint("parquet", split, *stats), split)
        if is_hub_id(src):
            raise FileNotFoundError(
                f"{src}: no such local path. The hub dataset is a loading script that current "
                f"`datasets` does not run; download and extract its zip with: python -m "
                f"support.evaluations.pointing.download --repo {src} --out DIR, then pass that DIR"
            )
        raise FileNotFoundError(f"CholecSeg8k source not found: {src}")

    def __len__(self) -> int:
        return len(self._rows)

    def __repr__(self) -> str:
        return f"CholecSeg8k({self.source!r}, rows={len(self)}, fingerprint={self.fingerprint})"

    def _check_row(self, i: int) -> int:
        n = len(self._rows)
        if isinstance(i, bool) or not isinstance(i, int | np.integer) or not 0 <= i < n:
            raise RowIndexError(f"{self.source}: row {i!r} out of range (0..{n - 1})")
        return int(i)

    def _mask(self, column: str, i: int) -> np.ndarray:
        """Row i's mask as an array, after checking it has the frame's size."""
        i = self._check_row(i)
        mask = self._rows.read(column, i)
        if mask.mode == "P":
            mask = mask.convert("RGBA")  # palette -> its colours (and transparency)
        elif mask.mode not in ("RGB", "RGBA", "L"):
            mask = mask.convert("RGB")
        self._check_mask_size(column, i, mask.size)
        return np.asarray(mask)

    def _check_mask_size(self, column: str, i: int, size: tuple[int, int]) -> None:
        """CholecSeg8kFileError naming row i's `column` mask unless `size` (W, H) is its frame's."""
        frame = self._rows.size("image", i)
        if size != frame:
            raise CholecSeg8kFileError(
                f"{self._rows.where(column, i)}: mask is {size[0]}x{size[1]} px, "
                f"its frame {frame[0]}x{frame[1]} px"
            )

    def image(self, i: int) -> Image.Image:
        """Row i's frame as an RGB PIL image (854x480 for the real data). Its watershed mask, where
        the data has one, is checked with it without decoding its pixels (`check_mask`): an
        unreadable one or one of another size is a CholecSeg8kFileError naming it. Its values
        (R = G = B) are checked where they are read, by watershed_labels."""
        img = self._rows.read("image", self._check_row(i))
        if self._has("watershed_mask"):
            self.check_mask("watershed_mask", i)
        return to_rgb(img)  # 16-bit grey scaled, transparency on white, ...

    def check_mask(self, column: str, i: int) -> None:
        """CholecSeg8kFileError naming row i's `column` mask unless its file reads whole (for a PNG
        every chunk and its checksum: Pillow's verify, no pixel decoded) and its header gives the
        frame's size."""
        i = self._check_row(i)
        self._check_mask_size(column, i, self._rows.checked_size(column, i))

    def _has(self, column: str) -> bool:
        """Whether the data has `column` (a raw tree has all four)."""
        return isinstance(self._rows, RawTree) or column in self._rows._views

    def frame_size(self, i: int) -> tuple[int, int]:
        """(W, H) px of row i's frame, read from its header (854x480 for the real data)."""
        return self._rows.size("image", self._check_row(i))

    def labels(self, i: int) -> np.ndarray:
        """(H, W) int8 class ids of row i from its colour mask; IGNORE (-1) for unknown colours."""
        mask = self._mask("color_mask", i)
        if mask.ndim == 2:  # a grey or palette image saved as a colour mask
            mask = np.repeat(mask[..., None], 3, axis=2)
        try:
            return color_mask_to_labels(mask)
        except ValueError as e:
            raise CholecSeg8kFileError(f"{self._rows.where('color_mask', i)}: {e}") from None

    def watershed_labels(self, i: int) -> np.ndarray:
        """(H, W) int8 class ids of row i from its watershed mask; IGNORE (-1) for the 255
        boundaries / border and unknown grey values."""
        try:
            return watershed_mask_to_labels(self._mask("watershed_mask", i))
        except CholecSeg8kFileError:
            raise
        except ValueError as e:
            raise CholecSeg8kFileError(f"{self._rows.where('watershed_mask', i)}: {e}") from None

    def presence(self, i: int, min_pixels: int = 1) -> np.ndarray:
        """(12,) uint8: which of organ ids 1..12 cover at least min_pixels pixels in row i."""
        return presence_vector(self.labels(i), min_pixels)

    def image_paths(self) -> list[str | None]:
        """The file path of each row's image: relative to the root for a raw tree, as stored for a
        datasets copy (no image is decoded)."""
        if isinstance(self._rows, RawTree):
            return list(self._rows.frames)
        return self._rows.paths()

    def frame_paths(self) -> list[str | None]:
        """Each row's frame as `videoNN/videoNN_SSSSS/frame_K_endo.png` where the data says so
        (raw trees, parquet with full paths), else the stored path (a file name) or None."""
        return self.image_paths()

    def video_ids(self) -> list[str]:
        """One video id per row (`'video01'`): from the folders of a raw tree or the image paths
        of a datasets copy; computed once.

        Rows whose path names no video get the clip id `clip{row // 80:03d}` (80-frame clips).
        """
        if self._video_ids is None:
            if isinstance(self._rows, RawTree):
                self._video_ids = [f.split("/", 1)[0].lower() for f in self._rows.frames]
                return list(self._video_ids)
            ids = [video_id_from_path(p) for p in self.image_paths()]
            n_missing = sum(v is None for v in ids)
            if n_missing:
                log.warning(
                    "%s: %d of %d image paths name no videoNN; using clip ids clip{row // %d}",
                    self.source, n_missing, len(ids), CLIP_LEN,
                )  # fmt: skip
            self._video_ids = [v or f"clip{r // CLIP_LEN:03d}" for r, v in enumerate(ids)]
        return list(self._video_ids)


def _raw_rows(root: str):
    tree, _ = RawTree.scan(Path(root))
    for frame in tree.frames:
        yield {
            c: {
                "bytes": (tree.root / mask_path(frame, c)).read_bytes(),
                "path": mask_path(frame, c),
            }
            for c in COLUMNS
        }


def raw_to_dataset(root: Path, cache_dir: str | os.PathLike | None = None) -> Any:
    """The raw tree at root as a `datasets.Dataset` in row order, with the four image columns
    (PNG bytes embedded, paths relative to root): what a save_to_disk or parquet copy holds.
    `cache_dir`: where `datasets` writes the arrow file (default: its cache)."""
    import datasets

    features = datasets.Features({c: datasets.Image() for c in COLUMNS})
    return datasets.Dataset.from_generator(
        _raw_rows,
        features=features,
        gen_kwargs={"root": str(root)},
        cache_dir=None if cache_dir is None else str(cache_dir),
        split=datasets.Split.TRAIN,
    )
