"""The pgt evaluation's plugin spec: options, settings, and the results the source keeps.

The source keeps a combination's results that exist. Which exist is read from results/ once, at
configure time (in every process, before anything of this run is written): `PgtSettings.kept` is
the snapshot the evaluation's `reused` consults to read a kept case back from its file instead of
evaluating it, so workers never list results/ later (--override: nothing is kept).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.contract.data_paths import (
    built_label,
    csv_columns,
    existing_file,
    existing_folder,
    holds_data,
)
from support.contract.evaluation import EvaluationSpec, Option, OptionError
from support.evaluations.pgt.answers import READ_RULES
from support.evaluations.pgt.dataset import (
    COLUMN_ALIASES,
    DATASETS,
    OWN,
    DatasetError,
    ImagePaths,
    detect_schema,
    parse_image_roots,
    parse_path_map,
    resolve_csv,
)
from support.evaluations.pgt.layout import performance_name, result_dir
from support.evaluations.pgt.phrases import (
    BASELINE,
    DEFAULT_PHRASES,
    MODES,
    PHRASES,
    parse_phrase_specs,
)
from support.evaluations.pgt.profiles import PROFILES, WRITEUP, PgtProfile
from support.settings import RunSettings

SYNTHETIC = "synthetic"  # the dataset name of the default sample

# combination folder -> (reasoning file, images it holds without error), in file-name order
Kept = Mapping[str, tuple[tuple[str, frozenset[str]], ...]]


def default_phrases() -> dict[str, str]:
    return {name: PHRASES[name] for name in DEFAULT_PHRASES}


@dataclass(frozen=True)
class PgtSettings:
    dataset: str = SYNTHETIC  # the dataset's name (its folder under results/pgt)
    csv: Path | None = None  # None: the synthetic sample, built on first use
    phrases: Mapping[str, str] = field(default_factory=default_phrases)
    modes: tuple[str, ...] = MODES
    ns: tuple[int, ...] = (1,)
    debug: bool = False
    kept: Kept = field(default_factory=dict)
    paths: ImagePaths = field(default_factory=ImagePaths)  # image roots, prefix rewrites
    profile: PgtProfile = WRITEUP  # by --compat (profiles.py): the original script's rules or ours

    def methods(self) -> list[tuple[str, str | None]]:
        """(phrase, mode) pairs: baseline ignores the mode (one method, mode None)."""
        out: list[tuple[str, str | None]] = []
        for phrase in self.phrases:
            out.extend(
                [(phrase, None)] if phrase == BASELINE else [(phrase, m) for m in self.modes]
            )
        return out


def check_csv(dataset: str, csv: Path, registered: bool) -> None:
    """OptionError naming --pgt-dataset unless `csv` exists and its header has the columns of
    one of the three schemas (support.evaluations.pgt.dataset; the rows are checked when it is
    loaded)."""
    flag = "--pgt-dataset"
    fix = (
        f"pass --pgt-root DIR, the source's data/ folder holding {DATASETS[dataset]}"
        if registered
        else f"pass a dataset CSV (image_path and label columns) or a registered name "
        f"({', '.join(DATASETS)}), or leave the option out for the synthetic sample"
    )
    if registered and not csv.is_file():
        raise OptionError(flag, f"{flag} {dataset}: {csv}: no such file; {fix}")
    existing_file(flag, csv, fix)
    columns = csv_columns(flag, csv)
    if detect_schema(columns) != OWN:
        return
    for needed in ("image_path", "label"):
        if not set(COLUMN_ALIASES[needed]) & set(columns):
            raise OptionError(
                flag,
                f"{flag} {csv}: no {needed!r} column (accepted names: "
                f"{', '.join(COLUMN_ALIASES[needed])}; found: {', '.join(columns)})",
            )


def configure(values: Mapping[str, Any], run: RunSettings) -> PgtSettings:
    try:
        phrases = parse_phrase_specs(values.get("pgt_phrase") or [])
    except ValueError as exc:
        raise OptionError("--pgt-phrase", str(exc)) from None
    modes = [m.strip() for m in (values.get("pgt_mode") or "").split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise OptionError("--pgt-mode", f"{unknown[0]!r}: known modes {', '.join(MODES)}")
    try:
        ns = [int(n) for n in str(values.get("pgt_n") or "1").split(",") if n.strip()]
        if not ns or min(ns) < 1:
            raise ValueError
    except ValueError:
        raise OptionError("--pgt-n", "takes positive integers, e.g. 1,5") from None
    try:
        roots = parse_image_roots(values.get("pgt_image_root") or [])
    except ValueError as exc:
        raise OptionError("--pgt-image-root", str(exc)) from None
    try:
        path_map = parse_path_map(values.get("pgt_path_map") or [])
    except ValueError as exc:
        raise OptionError("--pgt-path-map", str(exc)) from None
    for folder in roots.values():
        fix = "pass the folder the CSV's image paths are relative to"
        found = existing_folder("--pgt-image-root", str(folder), fix)
        holds_data("--pgt-image-root", found, ("*",), "no file", fix)
    root = values.get("pgt_root") or None
    root_fix = "pass the source's data/ folder (df40/, d3/, genimage/ with their CSVs)"
    root_folder = existing_folder("--pgt-root", root, root_fix) if root else None
    name, csv = SYNTHETIC, None
    if values.get("pgt_dataset"):
        try:
            name, csv = resolve_csv(values["pgt_dataset"], root)
        except DatasetError as exc:
            raise OptionError("--pgt-dataset", str(exc)) from None
        check_csv(values["pgt_dataset"], csv, registered=root is not None and name in DATASETS)
    if root_folder is not None and name not in DATASETS:  # else its CSV was looked for by name
        what = f"no CSV (such as {DATASETS['df40']})"
        holds_data("--pgt-root", root_folder, ("*.csv",), what, root_fix)
    settings = PgtSettings(
        dataset=name,
        csv=csv,
        phrases=phrases or default_phrases(),
        modes=tuple(dict.fromkeys(modes)) or MODES,
        ns=tuple(dict.fromkeys(ns)),
        debug=bool(values.get("pgt_debug")),
        paths=ImagePaths(roots, path_map),
        profile=PROFILES[run.compat],
    )
    if run.output.override:
        return settings
    folders = {
        result_dir(run.output.results_dir, name, model, phrase, mode, n)
        for model in run.models.names
        for phrase, mode in settings.methods()
        for n in settings.ns
    }
    kept = {
        str(f): found
        for f in sorted(folders)
        if (found := kept_results(f, settings.profile.source_files))
    }
    return PgtSettings(**{**settings.__dict__, "kept": kept})


def kept_results(folder: Path, source: bool = False) -> tuple[tuple[str, frozenset[str]], ...]:
    """The reasoning files of a combination folder written under this profile (a run's
    `reasoning_<ts>.json` sits beside `performance_<ts>.json` under writeup and
    `performance_fixed_<ts>.json` under source, so one profile never skips the other's work) and
    the images each holds without error; unreadable files are not kept results."""
    found = []
    for path in sorted(folder.glob("reasoning_*.json")) if folder.is_dir() else []:
        stamp = path.stem.removeprefix("reasoning_")
        if not (folder / performance_name(stamp, source)).is_file():
            continue
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
            done = frozenset(str(e["image"]) for e in entries if not e.get("error"))
        except (OSError, ValueError, TypeError, KeyError):
            continue
        found.append((str(path), done))
    return tuple(found)


def data_files(settings: PgtSettings, run: RunSettings) -> list[Path]:
    """What the evaluation reads (for the manifest's fingerprint): the synthetic sample's folder
    (its CSV and images), or the dataset CSV and every image it lists."""
    if settings.csv is None:
        from support.evaluations.pgt.synthetic import ensure_pgt_sample

        return [ensure_pgt_sample(run.output.cache_dir).parent]  # built by the run already
    from support.evaluations.pgt.dataset import load_csv

    dataset = load_csv(settings.csv, settings.dataset, check_images=False, paths=settings.paths)
    return [settings.csv, *(Path(ex.image) for ex in dataset.examples)]


def data_label(run: RunSettings) -> str | None:
    """What the data is when it is not a real dataset (no --pgt-dataset, or a CSV inside a
    vlmbench cache's synthetic/ folder: the synthetic sample); None for a registered dataset or
    a CSV of the user's."""
    settings = run.evaluations.get("pgt") or PgtSettings()
    if settings.csv is not None:
        return built_label(settings.csv, run.output.cache_dir, "PGT dataset")
    if settings.dataset != SYNTHETIC:
        return None
    return "synthetic sample (support/evaluations/pgt/synthetic.py; not a real PGT dataset)"


SPEC = EvaluationSpec(
    name="pgt",
    title="pgt (real vs AI-generated detection)",
    evaluation="support.evaluations.pgt.task:PgtEvaluation",
    summary="support.evaluations.pgt.summary",
    options=(
        Option(
            "--pgt-dataset",
            metavar="NAME|CSV",
            help=f"a registered dataset ({', '.join(DATASETS)}, read from --pgt-root) or a CSV "
            "path; default: the synthetic sample",
        ),
        Option(
            "--pgt-root",
            metavar="DIR",
            help="the source's data/ folder (df40/, d3/, genimage/ with their CSVs)",
        ),
        Option(
            "--pgt-image-root",
            action="append",
            metavar="NAME=DIR[,NAME=DIR]",
            help="image folders the df40/genimage CSVs' img_path is relative to, e.g. "
            "df40=/data/DF40,genimage=/data/genimage (a bare DIR: every dataset); repeatable",
        ),
        Option(
            "--pgt-path-map",
            action="append",
            metavar="OLD=NEW",
            help="rewrite an absolute image path prefix, e.g. "
            "/data3/zkachwal/ELSA_D3=/data/d3 (the d3 CSVs' paths); repeatable",
        ),
        Option(
            "--pgt-phrase",
            action="append",
            metavar="NAME[=TEXT]",
            help=f"phrases to evaluate: known names ({', '.join(PHRASES)}; comma separated) or "
            "NAME=TEXT to add one, repeatable (default: "
            f"{', '.join(DEFAULT_PHRASES)})",
        ),
        Option(
            "--pgt-mode",
            metavar="MODE[,MODE...]",
            help=f"phrase modes (default: all of {', '.join(MODES)}); baseline ignores them",
        ),
        Option(
            "--pgt-n",
            default="1",
            metavar="N[,N...]",
            help="responses per image, majority-voted (default 1); e.g. 1,5",
        ),
        Option(
            "--pgt-debug",
            action="store_true",
            default=False,
            help="only the first 5 images (the source's --debug; pytest owns --debug)",
        ),
    ),
    configure=configure,
    data_files=data_files,
    data_label=data_label,
    read_rules=READ_RULES,
    prompt_modules=("support.evaluations.pgt.phrases",),
)
