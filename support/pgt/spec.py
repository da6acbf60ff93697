"""The pgt evaluation's plugin spec: options, settings, and the results the source keeps.

The source skips a combination whose results exist. That check reads results/ once, at configure
time (in every process, before anything of this run is written): `PgtSettings.kept` is the
snapshot the evaluation's `skip_reasons` consults, so workers never look at results/ later.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.evaluation import EvaluationSpec, Option, OptionError
from support.pgt.dataset import DATASETS, DatasetError, resolve_csv
from support.pgt.layout import result_dir
from support.pgt.phrases import BASELINE, MODES, PHRASES, parse_phrase_specs
from support.settings import RunSettings

SYNTHETIC = "synthetic"  # the dataset name of the default sample

# combination folder -> (reasoning file, images it holds without error), in file-name order
Kept = Mapping[str, tuple[tuple[str, frozenset[str]], ...]]


@dataclass(frozen=True)
class PgtSettings:
    dataset: str = SYNTHETIC  # the dataset's name (its folder under results/pgt)
    csv: Path | None = None  # None: the synthetic sample, built on first use
    phrases: Mapping[str, str] = field(default_factory=lambda: dict(PHRASES))
    modes: tuple[str, ...] = MODES
    ns: tuple[int, ...] = (1,)
    debug: bool = False
    kept: Kept = field(default_factory=dict)

    def methods(self) -> list[tuple[str, str | None]]:
        """(phrase, mode) pairs: baseline ignores the mode (one method, mode None)."""
        out: list[tuple[str, str | None]] = []
        for phrase in self.phrases:
            out.extend(
                [(phrase, None)] if phrase == BASELINE else [(phrase, m) for m in self.modes]
            )
        return out


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
    name, csv = SYNTHETIC, None
    if values.get("pgt_dataset"):
        try:
            name, csv = resolve_csv(values["pgt_dataset"], values.get("pgt_root"))
        except DatasetError as exc:
            raise OptionError("--pgt-dataset", str(exc)) from None
    settings = PgtSettings(
        dataset=name,
        csv=csv,
        phrases=phrases or dict(PHRASES),
        modes=tuple(dict.fromkeys(modes)) or MODES,
        ns=tuple(dict.fromkeys(ns)),
        debug=bool(values.get("pgt_debug")),
    )
    if run.override:
        return settings
    folders = {
        result_dir(run.results_dir, name, model, phrase, mode, n)
        for model in run.models
        for phrase, mode in settings.methods()
        for n in settings.ns
    }
    kept = {str(f): found for f in sorted(folders) if (found := kept_results(f))}
    return PgtSettings(**{**settings.__dict__, "kept": kept})


def kept_results(folder: Path) -> tuple[tuple[str, frozenset[str]], ...]:
    """The reasoning files of a combination folder and the images each holds without error;
    unreadable files are not kept results."""
    found = []
    for path in sorted(folder.glob("reasoning_*.json")) if folder.is_dir() else []:
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
            done = frozenset(str(e["image"]) for e in entries if not e.get("error"))
        except (OSError, ValueError, TypeError, KeyError):
            continue
        found.append((str(path), done))
    return tuple(found)


SPEC = EvaluationSpec(
    name="pgt",
    title="pgt (real vs AI-generated detection)",
    evaluation="support.pgt.task:PgtEvaluation",
    summary="support.pgt.summary",
    options=(
        Option(
            "--pgt-dataset",
            metavar="NAME|CSV",
            help=f"a registered dataset ({', '.join(DATASETS)}, read from --pgt-root) or a CSV "
            "path; default: the synthetic sample",
        ),
        Option("--pgt-root", metavar="DIR", help="folder of the datasets' CSVs"),
        Option(
            "--pgt-phrase",
            action="append",
            metavar="NAME[=TEXT]",
            help="phrases to evaluate: known names (baseline, cot, s2; comma separated) or "
            "NAME=TEXT to add one, repeatable (default: every known phrase)",
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
)
