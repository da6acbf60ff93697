"""The PGT datasets: CSV files of image paths, labels and generator names, read with pandas.

Three CSV schemas (one row per image, header required, UTF-8), told apart by their columns:

- the suite's own (the synthetic sample, user CSVs):

      image_path   path of the image file, absolute or relative to the CSV's folder
                   (aliases: image, path, file_path, filepath)
      label        `real` or `ai-generated` (case-insensitive; `ai_generated`, `fake` and `ai`
                   are read as ai-generated)
      generator    optional: the generator that made an ai-generated image (per-generator
                   recall); real rows may name their source; default `real` / `unknown`
                   (aliases: generator_name, source, model)

- the source's df40 and genimage CSVs (Zero-shot-PGT config.py:93-136): `img_path`, joined to the
  dataset's image root (`--pgt-image-root df40=DIR,genimage=DIR`; without one, relative to the
  CSV's folder), and `dataset`, the generator's name or `real`;
- the source's d3 CSVs (data/d3/*.csv): `image`, an absolute path such as
  `/data3/zkachwal/ELSA_D3/2_image_gen0.png` (rewritten with `--pgt-path-map OLD=NEW`), and
  `answer`; the generator is the file name after its first `_` (`image_gen0`, `real`), as the
  source's per-generator recall reads it (results/plot_recall_radar.py:79-87).

In the source's two schemas the label is `real` when the value, lowercased, is `real`, and
`ai-generated` otherwise (helpers.py:89-93). Registered datasets are the source's files under
`--pgt-root` (the source's `data/` folder); any other CSV path works too. A malformed CSV or a
missing image is an error that names the file, row and column.

A CSV is data, not a licence to read files: every image path resolves (lexically: `..` removed,
symlinks not followed) inside a data root, the CSV's folder, an `--pgt-image-root` or the NEW
of a `--pgt-path-map`; a path outside stops the dataset with the row named, as a missing image
does. Each image is decoded once when it is first read (`read_image`): an empty, truncated or
non-image file is an `ImageError` naming it, so its cases are errors and nothing is sent.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from support.evaluations.pgt.answers import AI, REAL
from support.images import READ_FORMATS, ImageDecodeError, read_image_file

if TYPE_CHECKING:
    import pandas as pd
# pandas (~0.3 s to import) is imported by load_csv: the spec imports this module at start-up,
# for every run and `pytest --help`

DATASETS: dict[str, str] = {  # name -> CSV under --pgt-root (the source's data/, config.py:93-136)
    "df40": "df40/10k_sample_df40.csv",
    "df40-2k": "df40/2k_sample_df40.csv",
    "d3": "d3/7k_sample.csv",
    "d3-2k": "d3/2k_sample.csv",
    "genimage": "genimage/10k_random_sample.csv",
    "genimage-2k": "genimage/2k_random_sample.csv",
}
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "image_path": ("image_path", "image", "path", "file_path", "filepath"),
    "label": ("label",),
    "generator": ("generator", "generator_name", "source", "model"),
}
LABEL_ALIASES = {"real": REAL, "ai-generated": AI, "ai_generated": AI, "fake": AI, "ai": AI}
OWN, ROOTED, ABSOLUTE = "own", "img_path+dataset", "image+answer"  # the three schemas
ANY_DATASET = "*"  # the key of an image root given without a dataset name
_SLUG_RE = re.compile(r"[^a-z0-9]+")


IMAGE_FORMATS = READ_FORMATS  # the image door's: decoded by Pillow itself; no others
# (PIL's EPS plugin, for one, runs Ghostscript: a data file never picks such a decoder)


class DatasetError(ValueError):
    """A PGT CSV that cannot be used: the message names the file, and the row and column."""


class ImageError(ImageDecodeError):
    """An image file of a dataset that is not a readable image: the message names the file."""


def slug(text: str) -> str:
    """A lowercase id fragment: `StyleGAN 2` -> `stylegan-2`."""
    return _SLUG_RE.sub("-", text.lower()).strip("-") or "x"


@dataclass(frozen=True)
class Example:
    """One image under test. `row` is its 0-based data row in the CSV (line row + 2)."""

    row: int
    image: Path
    label: str
    generator: str

    @property
    def id(self) -> str:
        return f"r{self.row:05d}-{slug(self.generator)}"


@dataclass(frozen=True)
class PgtDataset:
    """A dataset's name, its CSV and its examples in CSV order."""

    name: str
    csv: Path
    examples: tuple[Example, ...]
    schema: str = OWN

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for e in self.examples:
            h.update(f"{e.row}\x1f{e.image}\x1f{e.label}\x1f{e.generator}\n".encode())
        return h.hexdigest()[:16]


@dataclass(frozen=True)
class ImagePaths:
    """Where a CSV's image paths point: image roots by dataset (`ANY_DATASET`: every dataset)
    and absolute prefixes to rewrite (OLD -> NEW)."""

    roots: Mapping[str, Path] = field(default_factory=dict)
    path_map: tuple[tuple[PurePosixPath, Path], ...] = ()

    def root_for(self, dataset: str) -> Path | None:
        """The image root of a dataset: its own name, its family (`df40-2k` -> `df40`), or the
        root given for every dataset."""
        for key in (dataset, dataset.split("-")[0], ANY_DATASET):
            if key in self.roots:
                return self.roots[key]
        return None

    def data_roots(self, csv: Path) -> tuple[Path, ...]:
        """The folders a CSV's image paths may point into (absolute, `..` removed): the CSV's
        folder, every image root and every path-map NEW."""
        folders = (csv.parent, *self.roots.values(), *(new for _, new in self.path_map))
        return tuple(dict.fromkeys(Path(os.path.abspath(f)) for f in folders))

    def rewrite(self, path: Path) -> Path:
        """The path with its longest matching OLD prefix (whole components) replaced by NEW."""
        posix = PurePosixPath(path.as_posix())
        best: tuple[PurePosixPath, Path] | None = None
        for old, new in self.path_map:
            if posix.is_relative_to(old) and (best is None or len(old.parts) > len(best[0].parts)):
                best = (old, new)
        if best is None:
            return path
        return best[1].joinpath(*posix.relative_to(best[0]).parts)


def _inside_prefix(root: Path) -> str:
    """The string every path strictly inside `root` (absolute, normalised) starts with."""
    text = str(root)
    return text if text.endswith(os.sep) else text + os.sep


def parse_image_roots(values: list[str]) -> dict[str, Path]:
    """`--pgt-image-root` values (`NAME=DIR[,NAME=DIR...]`, or a bare `DIR` for every dataset)
    -> {name: DIR}; ValueError naming the bad item."""
    roots: dict[str, Path] = {}
    for value in values:
        for item in (v.strip() for v in value.split(",")):
            if not item:
                continue
            name, sep, folder = item.partition("=")
            if not sep:
                name, folder = ANY_DATASET, item
            name, folder = name.strip(), folder.strip()
            if not name or not folder:
                raise ValueError(f"{item!r}: expected NAME=DIR (e.g. df40=/data/DF40) or DIR")
            roots[name] = Path(folder)
    return roots


def parse_path_map(values: list[str]) -> tuple[tuple[PurePosixPath, Path], ...]:
    """`--pgt-path-map OLD=NEW` values -> ((OLD, NEW), ...); OLD must be absolute."""
    out = []
    for value in values:
        old, sep, new = value.partition("=")
        old, new = old.strip(), new.strip()
        if not sep or not old or not new:
            raise ValueError(f"{value!r}: expected OLD=NEW (e.g. /data3/zkachwal/ELSA_D3=/data/d3)")
        if not PurePosixPath(old).is_absolute():
            raise ValueError(f"{value!r}: OLD must be an absolute path prefix")
        out.append((PurePosixPath(old), Path(new)))
    return tuple(out)


def resolve_csv(dataset: str, root: str | None) -> tuple[str, Path]:
    """(name, CSV path) for `--pgt-dataset` (a registered name or a CSV path) and `--pgt-root`.

    A registered name is read from the source's layout (`ROOT/df40/10k_sample_df40.csv`), or
    from the file directly under ROOT when only that exists."""
    if dataset in DATASETS:
        if not root:
            raise DatasetError(
                f"--pgt-dataset {dataset}: registered datasets are read from --pgt-root DIR "
                f"(the source's data/ folder: expected DIR/{DATASETS[dataset]})"
            )
        nested = Path(root) / DATASETS[dataset]
        flat = Path(root) / Path(DATASETS[dataset]).name
        return dataset, flat if not nested.is_file() and flat.is_file() else nested
    path = Path(dataset)
    if path.suffix.lower() != ".csv":
        raise DatasetError(
            f"--pgt-dataset {dataset!r}: neither a registered dataset "
            f"({', '.join(DATASETS)}) nor a .csv file"
        )
    if not path.is_absolute() and root:
        path = Path(root) / path
    return path.stem, path


def detect_schema(columns: list[str]) -> str:
    """Which schema a CSV's (lowercased) columns follow: the source's two, or the suite's own."""
    if {"img_path", "dataset"} <= set(columns):
        return ROOTED
    if {"image", "answer"} <= set(columns) and "label" not in columns:
        return ABSOLUTE
    return OWN


def _column(frame: pd.DataFrame, csv: Path, name: str, required: bool) -> str | None:
    for alias in COLUMN_ALIASES[name]:
        if alias in frame.columns:
            return alias
    if required:
        raise DatasetError(
            f"{csv}: no {name!r} column (accepted names: {', '.join(COLUMN_ALIASES[name])}; "
            f"found: {', '.join(map(str, frame.columns))}; or the source's img_path + dataset, "
            "or image + answer)"
        )
    return None


def source_label(value: str) -> str:
    """The source's rule: `real` when the value lowercased is `real`, else ai-generated."""
    return REAL if value.lower() == REAL else AI


def d3_generator(path: str) -> str:
    """The generator in a d3 file name: the stem after its first `_` (`2_image_gen0.png` ->
    `image_gen0`, `0_real.png` -> `real`); `unknown` without one (plot_recall_radar.py:79-87)."""
    stem = PurePosixPath(path.replace("\\", "/")).stem
    _, sep, rest = stem.partition("_")
    return rest if sep and rest else "unknown"


def load_csv(
    csv: Path,
    name: str | None = None,
    check_images: bool = True,
    paths: ImagePaths | None = None,
) -> PgtDataset:
    """Read and validate a dataset CSV in any of the three schemas (see the module docstring).
    `paths` holds the image roots and prefix rewrites; `name` (default: the CSV's stem) selects
    the image root."""
    csv = Path(csv)
    name = name or csv.stem
    paths = paths or ImagePaths()
    if not csv.is_file():
        raise DatasetError(f"{csv}: dataset CSV not found")
    stat = csv.stat()
    key = (str(csv.absolute()), stat.st_mtime_ns, stat.st_size, name, repr(paths))
    recent = _RECENT.get(key)
    if recent is not None and (recent[1] or not check_images):
        return recent[0]
    dataset = _read_csv(csv, name, check_images, paths)
    _RECENT.clear()
    _RECENT[key] = (dataset, check_images)
    return dataset


# The last dataset read and whether its images were checked, by (file, mtime, size, name,
# paths): the manifest lists a run's images at session end from the same CSV (a 10^6-row CSV
# takes ~20 s to read).
_RECENT: dict[tuple, tuple[PgtDataset, bool]] = {}


def _read_csv(csv: Path, name: str, check_images: bool, paths: ImagePaths) -> PgtDataset:
    import pandas as pd

    try:
        frame = pd.read_csv(csv, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{csv}: not a readable CSV: {exc}") from None
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    schema = detect_schema(list(frame.columns))
    if schema == ROOTED:
        path_col, label_col, gen_col = "img_path", "dataset", None
    elif schema == ABSOLUTE:
        path_col, label_col, gen_col = "image", "answer", None
    else:
        path_col = _column(frame, csv, "image_path", required=True)
        label_col = _column(frame, csv, "label", required=True)
        gen_col = _column(frame, csv, "generator", required=False)
    assert path_col is not None and label_col is not None
    if frame.empty:
        raise DatasetError(f"{csv}: no data rows")
    base = str((paths.root_for(name) if schema == ROOTED else None) or csv.parent)
    roots = paths.data_roots(csv)
    prefixes, root_texts = tuple(_inside_prefix(r) for r in roots), {str(r) for r in roots}
    columns = [frame[c].tolist() if c else None for c in (path_col, label_col, gen_col)]
    generators = columns[2] if columns[2] is not None else [""] * len(frame)
    examples = []
    # strings and os.path in this loop: pathlib costs ~25 us a row (~40 s for 10^6 rows)
    for row, (raw, raw_label, raw_gen) in enumerate(
        zip(columns[0], columns[1], generators, strict=True)
    ):
        where = f"{csv}, row {row} (line {row + 2})"
        raw_path = str(raw).strip()
        if not raw_path:
            raise DatasetError(f"{where}, column {path_col!r}: empty image path")
        label_text = str(raw_label).strip()
        if schema == OWN:
            if label_text.lower() not in LABEL_ALIASES:
                raise DatasetError(
                    f"{where}, column {label_col!r}: label {raw_label!r} is neither "
                    f"'{REAL}' nor '{AI}'"
                )
            label = LABEL_ALIASES[label_text.lower()]
            generator = str(raw_gen).strip()
        else:
            if not label_text:
                raise DatasetError(f"{where}, column {label_col!r}: empty value")
            label = source_label(label_text)
            generator = label_text if schema == ROOTED else d3_generator(raw_path)
        generator = generator or (REAL if label == REAL else "unknown")
        image = raw_path if os.path.isabs(raw_path) else os.path.join(base, raw_path)
        if paths.path_map:
            image = str(paths.rewrite(Path(image)))
        if check_images and not os.path.isfile(image):
            raise DatasetError(
                f"{where}, column {path_col!r}: image not found: {image}{_hint(schema, name)}"
            )
        absolute = os.path.abspath(image)  # lexical: `..` removed, symlinks not followed
        if not (absolute.startswith(prefixes) or absolute in root_texts):
            raise DatasetError(
                f"{where}, column {path_col!r}: image path {raw_path!r} leads outside the data "
                f"roots ({', '.join(map(str, roots))}): not read{_hint(schema, name)}"
            )
        examples.append(Example(row, Path(image), label, generator))
    return PgtDataset(name, csv, tuple(examples), schema)


def read_image(path: Path) -> bytes:
    """The bytes of an image file, once all of it has decoded through the image door
    (support/images.py: one of `IMAGE_FORMATS`, within its pixel limit); ImageError naming the
    file when it is unreadable, empty, truncated, too large or not an image."""
    try:
        return read_image_file(path)
    except ImageDecodeError as exc:
        raise ImageError(str(exc)) from None


SOURCE_SHUFFLE_SEED = 0  # helpers.py:54-55: random.seed(0); random.shuffle(examples)


def row_order(n: int) -> list[int]:
    """The CSV rows 0..n-1 in their own order (the write-up's evaluation order)."""
    return list(range(n))


def source_order(n: int) -> list[int]:
    """The CSV rows 0..n-1 in the order the source evaluates them: Python's `random` seeded with
    0, then `shuffle` over the list of examples (helpers.py:54-55). A shuffle's permutation
    depends only on the list's length, so shuffling the row numbers gives the same order; a
    private `random.Random(0)` draws what the module functions draw after `random.seed(0)`,
    without touching the global generator."""
    order = list(range(n))
    random.Random(SOURCE_SHUFFLE_SEED).shuffle(order)
    return order


def _hint(schema: str, name: str) -> str:
    if schema == ROOTED:
        return f" (image paths are joined to --pgt-image-root {name.split('-')[0]}=DIR)"
    if schema == ABSOLUTE:
        return " (rewrite the CSV's absolute prefix with --pgt-path-map OLD=NEW)"
    return ""
