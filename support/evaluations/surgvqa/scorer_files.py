"""Cheap checks of the files SurgVU 2026's scorers read, at configure, before any request is sent.

The BERTScore and NLI models and BERTScore's rescale baseline are named by options
(--surgvqa-bertscore-model, --surgvqa-nli-model, --surgvqa-bertscore-baseline; or their defaults
in the Hugging Face cache and the bert-score wheel) and load only once every answer is in
(semantic.SemanticScorer, at the run's end). What can be told without loading weights is checked
here, in milliseconds (a `.bin` imports torch to read it), so a file that cannot work is a
usage error naming the option, the file and the row or field (`ScorerInputError`) before the run
spends anything:

- a model folder's `config.json` (and a sharded checkpoint's index) is a JSON object nested at
  most MAX_JSON_DEPTH deep (a deeper one makes Python's parser, transformers' too, raise
  RecursionError) holding `model_type`;
- its weights, in the order transformers picks them (`model.safetensors`, then
  `model.safetensors.index.json` and its shards, then `pytorch_model.bin`): a safetensors file
  opens in the safetensors library (its header checked, tensors tiling the data: a truncated
  download fails here); a `.bin` is a pickle, which transformers reads with
  `torch.load(weights_only=True)`: it is read so here (memory-mapped, torch imported only then),
  and what that loader refuses is named;
- the rescale baseline, bert_score's TSV (comma-separated despite the name: a `LAYER,P,R,F`
  header, then a row per layer from 0): bert_score takes the row at position `layers` (it counts
  rows, not the LAYER column) and rescales each score x as (x - b) / (1 - b), so every row must be
  four numbers, its LAYER its position, P, R and F finite and below 1.

What only loading shows (a tokenizer missing, tensors that do not fit the architecture) still
fails at scoring time; semantic.SemanticScorer raises it as a ScorerInputError naming the option
and the folder, and the terminal reports it as that input's fault, not as a bug of the suite.
"""

from __future__ import annotations

import csv
import io
import math
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from support.contract.evaluation import OptionError
from support.storage.bounded_json import TooDeep, loads, nesting

BASELINE_OPTION = "--surgvqa-bertscore-baseline"
# nesting a model's config.json, index or safetensors header may have: real ones nest 2-5 deep
# (a multimodal config's text_config, its rope_scaling); far past that is a hostile file
MAX_JSON_DEPTH = 64
MAX_JSON_BYTES = 64 * 2**20  # a config.json or an index (real ones: kilobytes)
SAFETENSORS_MAX_HEADER = 100_000_000  # bytes: the safetensors library's own limit
MAX_PICKLE_BYTES = 64 * 2**20  # a state dict's pickle, without its tensors (real ones: ~100 KB)
MAX_BASELINE_BYTES = 2**20  # a rescale baseline TSV (bert-score's: 1-2 KB, a row per layer)
BASELINE_COLUMNS = ("LAYER", "P", "R", "F")
_NUMBER = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*|\s*[-+]?(?:nan|inf)\s*",
                     re.IGNORECASE)  # fmt: skip


class ScorerInputError(OptionError):
    """A scorer file an option names (or its default) that cannot be used: a model folder that
    cannot load, a rescale baseline that cannot rescale. `option` is the option to change, `path`
    the file (or folder); the message names both, and the row or field. Raised at configure (a
    usage error, exit 4) or, for what only loading shows, at scoring time (the terminal reports
    it as the input's fault)."""

    def __init__(self, option: str, path: str | Path, message: str) -> None:
        super().__init__(option, f"{path}: {message}")
        self.path = str(path)


# ---- JSON -------------------------------------------------------------------------------------
def read_json_object(option: str, path: Path, data: bytes | None = None) -> dict[str, Any]:
    """The JSON object in `path` (or `data`, read from it) as transformers reads it (UTF-8,
    json.loads); a ScorerInputError naming `option` and the file when it is none, or nests
    deeper than MAX_JSON_DEPTH."""
    try:
        if data is None:
            if path.stat().st_size > MAX_JSON_BYTES:
                raise ScorerInputError(option, path, f"over {MAX_JSON_BYTES >> 20} MiB of JSON")
            data = path.read_bytes()
        value = loads(data.decode("utf-8"))
    except TooDeep:
        raise ScorerInputError(
            option, path, "JSON nested too deep to read: Python's parser, transformers' too, "
            f"raises RecursionError (a model's nests a few levels; {MAX_JSON_DEPTH} are allowed)",
        ) from None  # fmt: skip
    except OSError as exc:
        raise ScorerInputError(option, path, f"cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ScorerInputError(option, path, f"not UTF-8 JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ScorerInputError(option, path, f"a JSON {type(value).__name__}, not an object")
    depth = nesting(value)
    if depth > MAX_JSON_DEPTH:
        raise ScorerInputError(
            option, path, f"JSON nested {depth} deep, past {MAX_JSON_DEPTH} (a model's nests a "
            "few levels)",
        )  # fmt: skip
    return value


# ---- model folders ----------------------------------------------------------------------------
def check_model_folder(option: str, folder: Path) -> None:
    """The folder a model option names can load, as far as a look at its files tells (module
    docstring): config.json, then the weights file transformers would pick. ScorerInputError
    otherwise. `folder` holds config.json and a weights file (semantic.find_model checked)."""
    config_path = folder / "config.json"
    config = read_json_object(option, config_path)
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type.strip():
        raise ScorerInputError(
            option, config_path, f'"model_type" is {model_type!r}: a config.json names its '
            'architecture there (e.g. "roberta"); transformers cannot tell which model it is',
        )  # fmt: skip
    if (folder / "model.safetensors").is_file():
        check_safetensors(option, folder / "model.safetensors")
    elif (folder / "model.safetensors.index.json").is_file():
        check_sharded(option, folder, folder / "model.safetensors.index.json")
    else:
        check_torch_pickle(option, folder / "pytorch_model.bin")


def check_layers(option: str, folder: Path, layers: int) -> None:
    """BERTScore's hidden layer `layers` is one the model in `folder` has, where its config.json
    says how many (`num_hidden_layers`; bert_score refuses a layer past them when it loads the
    model). `option` names the layer's option."""
    config_path = folder / "config.json"
    stated = read_json_object("--surgvqa-bertscore-model", config_path).get("num_hidden_layers")
    if isinstance(stated, int) and not isinstance(stated, bool) and layers > stated:
        raise ScorerInputError(
            option, config_path, f"layer {layers} asked for, but the model has "
            f"{stated} (num_hidden_layers): bert_score takes a layer from 0 to {stated}",
        )  # fmt: skip


def check_sharded(option: str, folder: Path, index_path: Path) -> None:
    """A sharded safetensors checkpoint: its index's weight_map names shards in `folder`, each a
    sound safetensors file."""
    weight_map = read_json_object(option, index_path).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ScorerInputError(option, index_path, 'no "weight_map" (tensor name -> shard file)')
    for shard in sorted({str(v) for v in weight_map.values()}):
        path = folder / shard  # a hub snapshot's files link elsewhere: the name is what counts
        if Path(shard).is_absolute() or ".." in Path(shard).parts or not path.is_file():
            raise ScorerInputError(
                option, index_path, f"weight_map names shard {shard!r}, not a file in {folder}"
            )
        check_safetensors(option, path)


def check_safetensors(option: str, path: Path) -> None:
    """`path` opens in the safetensors library (numpy, no torch): its header is read and checked
    against the file (tensors tiling the data exactly) as before any tensor is loaded."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            f.keys()
    except (SafetensorError, OSError, ValueError) as exc:
        raise ScorerInputError(
            option, path, f"not a safetensors file the safetensors library opens ({exc}; a "
            "truncated download?)",
        ) from None  # fmt: skip


def check_torch_pickle(option: str, path: Path) -> None:
    """`path` (pytorch_model.bin) loads as transformers loads it, `torch.load(weights_only=True)`
    (memory-mapped where it is torch.save's zip format, so no weight is read into memory):
    anything that loader refuses (a pickle that would run code, a class of the saver's own) is
    named here, before the run."""
    import torch

    why = (
        "transformers reads .bin weights with torch.load(weights_only=True), which refuses it; "
        "save the weights as model.safetensors (safetensors needs no pickle), or pass a folder "
        "that has them"
    )
    try:
        torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except OSError as exc:
        raise ScorerInputError(option, path, f"cannot be read: {exc.strerror or exc}") from None
    except Exception as exc:  # pickle.UnpicklingError, RuntimeError: torch's words for it
        raise ScorerInputError(option, path, f"{_refusal(exc)}; {why}") from None


def _refusal(exc: BaseException) -> str:
    """What torch.load said it refused (its message's line that names the global or opcode),
    without the advice around it."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    named = [line for line in lines if re.search(r"[Uu]nsupported|Trying to load", line)]
    found = named[0] if named else lines[0] if lines else ""
    return f"torch.load(weights_only=True) refuses it ({type(exc).__name__}: {found[:300]})"


# ---- the rescale baseline -----------------------------------------------------------------------
def _rows(text: str) -> Iterator[tuple[int, list[str]]]:
    """The TSV's non-blank rows with their line numbers (bert_score's pandas skips blank
    lines)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    for row in reader:
        if row:
            yield reader.line_num, row


def _number(text: str) -> float | None:
    """`text` as pandas reads a number in a numeric column; None when it is not one."""
    return float(text) if _NUMBER.fullmatch(text) else None


def check_baseline(path: Path, layers: int, option: str = BASELINE_OPTION) -> None:
    """`path` is a rescale baseline bert_score can rescale layer `layers` by (module docstring):
    a header of four columns, then rows of four numbers, row k's LAYER k, its P, R and F finite
    and below 1, and a row for `layers`. ScorerInputError naming the file, the line and the field
    otherwise."""
    try:
        if path.stat().st_size > MAX_BASELINE_BYTES:
            raise ScorerInputError(
                option, path, f"over {MAX_BASELINE_BYTES >> 20} MiB: not a rescale baseline "
                "(bert_score's: a header and a row per layer, a few KB)",
            )  # fmt: skip
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ScorerInputError(option, path, f"cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ScorerInputError(option, path, f"not UTF-8 text: {exc}") from None
    layout = f"bert_score's layout: a header {','.join(BASELINE_COLUMNS)}, then a row per layer"
    try:
        rows = list(_rows(text))
    except csv.Error as exc:
        raise ScorerInputError(option, path, f"not comma-separated ({exc}); {layout}") from None
    if not rows:
        raise ScorerInputError(option, path, f"empty; {layout}")
    (head_line, header), data = rows[0], rows[1:]
    if len(header) != len(BASELINE_COLUMNS) or all(_number(h) is not None for h in header):
        raise ScorerInputError(
            option, path, f"line {head_line}: header {','.join(header)!r}: {layout} (bert_score "
            "reads the first line as the header)",
        )  # fmt: skip
    for position, (line, row) in enumerate(data):
        where = f"line {line} (the row of layer {position})"
        if len(row) != len(header):
            raise ScorerInputError(
                option, path, f"{where}: {len(row)} fields, not {len(header)}; {layout}"
            )
        values = [_number(v) for v in row]
        for name, text_value, value in zip(header, row, values, strict=True):
            if value is None:
                raise ScorerInputError(
                    option, path, f"{where}, field {name}: {text_value!r} is not a number"
                )
            if not math.isfinite(value):
                raise ScorerInputError(
                    option, path, f"{where}, field {name}: {text_value.strip()} is not finite"
                )
        if values[0] != position:
            raise ScorerInputError(
                option, path, f"{where}, field {header[0]}: {row[0].strip()}, not {position}: "
                "bert_score takes a layer's row by its position, so a row is missing or extra "
                "above it",
            )  # fmt: skip
        for name, text_value, value in zip(header[1:], row[1:], values[1:], strict=True):
            if value is not None and value >= 1:
                raise ScorerInputError(
                    option, path, f"{where}, field {name}: {text_value.strip()}: the rescale "
                    "(x - b) / (1 - b) needs a baseline b below 1 (at 1 it divides by zero)",
                )  # fmt: skip
    if layers >= len(data):
        rows_held = f"its {len(data)} rows cover layers 0-{len(data) - 1}" if data else "no rows"
        raise ScorerInputError(
            option, path, f"no row for layer {layers} (--surgvqa-bertscore-layers or the "
            f"model's): {rows_held} below the header",
        )  # fmt: skip
