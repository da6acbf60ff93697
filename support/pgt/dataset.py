"""The PGT datasets: CSV files of image paths, labels and generator names, read with pandas.

CSV schema (one row per image, header required, UTF-8):

    image_path   path of the image file, absolute or relative to the CSV's folder
                 (aliases: image, path, file_path, filepath)
    label        `real` or `ai-generated` (case-insensitive; `ai_generated`, `fake` and `ai`
                 are read as ai-generated)
    generator    optional: the generator that made an ai-generated image (per-generator recall);
                 real rows may name their source; default `real` / `unknown`
                 (aliases: generator_name, source, model)

Registered datasets are file names under `--pgt-root` (the source's registry); any other CSV path
works too. A malformed CSV or a missing image is an error that names the file, row and column.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from support.pgt.answers import AI, REAL

DATASETS: dict[str, str] = {  # name -> CSV file under --pgt-root, as the source's registry
    "df40": "10k_sample_df40.csv",
    "df40-2k": "2k_sample_df40.csv",
    "d3": "7k_sample.csv",
    "d3-2k": "2k_sample.csv",
    "genimage": "10k_random_sample.csv",
    "genimage-2k": "2k_random_sample.csv",
}
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "image_path": ("image_path", "image", "path", "file_path", "filepath"),
    "label": ("label",),
    "generator": ("generator", "generator_name", "source", "model"),
}
LABEL_ALIASES = {"real": REAL, "ai-generated": AI, "ai_generated": AI, "fake": AI, "ai": AI}
_SLUG_RE = re.compile(r"[^a-z0-9]+")


class DatasetError(ValueError):
    """A PGT CSV that cannot be used: the message names the file, and the row and column."""


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

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for e in self.examples:
            h.update(f"{e.row}\x1f{e.image}\x1f{e.label}\x1f{e.generator}\n".encode())
        return h.hexdigest()[:16]


def resolve_csv(dataset: str, root: str | None) -> tuple[str, Path]:
    """(name, CSV path) for `--pgt-dataset` (a registered name or a CSV path) and `--pgt-root`."""
    if dataset in DATASETS:
        if not root:
            raise DatasetError(
                f"--pgt-dataset {dataset}: registered datasets are read from --pgt-root DIR "
                f"(expected DIR/{DATASETS[dataset]})"
            )
        return dataset, Path(root) / DATASETS[dataset]
    path = Path(dataset)
    if path.suffix.lower() != ".csv":
        raise DatasetError(
            f"--pgt-dataset {dataset!r}: neither a registered dataset "
            f"({', '.join(DATASETS)}) nor a .csv file"
        )
    if not path.is_absolute() and root:
        path = Path(root) / path
    return path.stem, path


def _column(frame: pd.DataFrame, csv: Path, name: str, required: bool) -> str | None:
    for alias in COLUMN_ALIASES[name]:
        if alias in frame.columns:
            return alias
    if required:
        raise DatasetError(
            f"{csv}: no {name!r} column (accepted names: {', '.join(COLUMN_ALIASES[name])}; "
            f"found: {', '.join(map(str, frame.columns))})"
        )
    return None


def load_csv(csv: Path, name: str | None = None, check_images: bool = True) -> PgtDataset:
    """Read and validate a dataset CSV (see the module docstring for the schema)."""
    csv = Path(csv)
    if not csv.is_file():
        raise DatasetError(f"{csv}: dataset CSV not found")
    try:
        frame = pd.read_csv(csv, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{csv}: not a readable CSV: {exc}") from None
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    path_col = _column(frame, csv, "image_path", required=True)
    label_col = _column(frame, csv, "label", required=True)
    gen_col = _column(frame, csv, "generator", required=False)
    if frame.empty:
        raise DatasetError(f"{csv}: no data rows")
    examples = []
    for row, record in enumerate(frame.to_dict("records")):
        where = f"{csv}, row {row} (line {row + 2})"
        raw_path = str(record[path_col]).strip()
        if not raw_path:
            raise DatasetError(f"{where}, column {path_col!r}: empty image path")
        raw_label = str(record[label_col]).strip().lower()
        if raw_label not in LABEL_ALIASES:
            raise DatasetError(
                f"{where}, column {label_col!r}: label {record[label_col]!r} is neither "
                f"'{REAL}' nor '{AI}'"
            )
        label = LABEL_ALIASES[raw_label]
        generator = str(record[gen_col]).strip() if gen_col else ""
        generator = generator or (REAL if label == REAL else "unknown")
        image = Path(raw_path)
        if not image.is_absolute():
            image = csv.parent / image
        if check_images and not image.is_file():
            raise DatasetError(f"{where}, column {path_col!r}: image not found: {image}")
        examples.append(Example(row, image, label, generator))
    return PgtDataset(name or csv.stem, csv, tuple(examples))
