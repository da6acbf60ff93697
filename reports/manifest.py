"""The run manifest: `manifest.json` beside summary.csv, saying what produced a run's numbers.

The controller writes one per evaluation at session finish (reports.evaluation_files). Sections:

    vlmbench  the package version, the git commit of the checkout that holds `support/` and
              whether its tree was dirty (null without git or a checkout)
    packages  versions of the installed packages among PACKAGES (absent ones left out)
    command   the pytest arguments and working folder, credentials redacted
    run       seeds (--seed and the evaluation's own), --compat, models, samples, bootstrap
              resamples, run id, and the evaluation's settings object
    data      sha256 over the sorted (relative path, size, sha256 of content) of the files the
              evaluation reads (its spec's `data_files`); each file's sha256 is memoised by
              (path, size, mtime) in a JSON file in the cache folder (support.storage.file_hashes),
              so a 3 GB file is hashed once; `label`: the spec's `data_label` (the synthetic
              sample's name, null for real data)
    prompts   sha256 of the source file of each prompt module (the spec's `prompt_modules`), and
              the outcomes' prompt hashes: how many, how many distinct, a digest of the distinct
    models    per `--model`: kind and provider (the registry), the backend's identity as the
              response cache keys it, the endpoint that answered an API model (scheme, host,
              port, path: no credentials, query or fragment; the vendor's own too, which the
              identity leaves out), and requests sent / cache hits summed over processes (the
              engine statistics every process hands the reporter)
    times     session start and end (UTC, ISO 8601) and wall seconds
    host      python, platform, CPU count, memory, GPU names (null when none is seen)
    completion  whether the run finished (`complete`, `interrupted`: stopped by SIGINT) and the
              cases that finished of those selected: an interrupted run's files are partial

No field can hold a key: every string goes through `redact_text` (support.secrets.redact: URL
credentials and every key in the environment or given to a backend; then sensitive query
values). Nothing here raises on a missing git, GPU or data file: the value is null or says why.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from support.backends.registry import model_spec
from support.client.response_cache import SCHEMA_VERSION
from support.secrets import URL_CREDENTIALS, redact
from support.settings import RunSettings, recorded_settings
from support.storage.file_hashes import HASH_MEMO, FileHashes
from support.storage.run_folder import FORMAT_FIELD, FORMAT_VERSION
from support.types import Outcome, sha256_hex

if TYPE_CHECKING:
    from reports.result import SessionFacts
    from support.contract.evaluation import EvaluationSpec

MANIFEST_VERSION = 1
# distributions whose versions are recorded when installed (importlib.metadata names)
PACKAGES = (
    "pytest",
    "pytest-xdist",
    "pytest-html",
    "numpy",
    "pandas",
    "scipy",
    "pillow",
    "datasets",
    "huggingface-hub",
    "h5py",
    "nltk",
    "pycocotools",
    "rouge-score",  # surgvqa's ROUGE
    "bert-score",  # surgvqa's BERTScore
    "onnxruntime",
    "tokenizers",
    "sentence-transformers",
    "openai",
    "anthropic",
    "google-genai",
    "torch",
    "transformers",
    "vllm",
    "statsmodels",
)
GIT_TIMEOUT_S = 10.0
GPU_QUERY_TIMEOUT_S = 10.0
MAX_LISTED_MISSING = 20  # missing data files named in the manifest (all are counted)
HIDDEN = "."  # files and folders whose names start so are skipped when a folder is hashed

# --- redaction ------------------------------------------------------------------------------------

# ?api_key=VALUE, &token=VALUE, ... -> the value replaced (support.secrets.redact does not)
_SECRET_QUERY = re.compile(
    r"(?P<name>[?&;][^=&#\s]*(?:key|token|secret|passw|signature|sig|auth)[^=&#\s]*=)[^&#\s]*",
    re.IGNORECASE,
)


def redact_text(text: str) -> str:
    """`text` without credentials: support.secrets.redact (`https://user:pass@host` ->
    `https://***@host`, every key value it knows), then the values of key/token/secret/password
    query parameters."""
    return _SECRET_QUERY.sub(rf"\g<name>{URL_CREDENTIALS}", redact(text))


def redacted(value: Any) -> Any:
    """A plain-JSON value with `redact_text` applied to every string in it (keys included)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {redact_text(str(k)): redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redacted(v) for v in value]
    return value


# --- plain JSON -----------------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """`value` as plain JSON: dataclasses as dicts of their fields (as dataclasses.asdict, field by
    field, which also takes what asdict's deep copy refuses, e.g. a mappingproxy), paths as
    strings, tuples as lists, sets as sorted lists, non-finite floats as strings, anything else as
    its str."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((plain(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return str(value)


# --- the package and its environment -------------------------------------------------------------


def project_root() -> Path:
    """The folder that holds `support/` (a checkout, or site-packages when installed)."""
    import support

    return Path(support.__file__).resolve().parent.parent


def _stdout(command: list[str], timeout_s: float) -> str | None:
    """A command's stdout, stripped; None when it is absent, fails or times out."""
    try:
        proc = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _git(folder: Path, *args: str) -> str | None:
    """git's stdout in `folder`, stripped; None when git is absent, fails or times out."""
    return _stdout(["git", "-C", str(folder), *args], GIT_TIMEOUT_S)


def git_state(folder: Path) -> dict[str, Any]:
    """{"commit", "dirty"} of the checkout whose top folder is `folder`; nulls when git is
    absent, `folder` is not a checkout's top (e.g. an installed copy inside another repository),
    or git fails."""
    out = _git(folder, "rev-parse", "--show-toplevel", "HEAD")
    lines = out.splitlines() if out else []
    if len(lines) != 2 or Path(lines[0]).resolve() != Path(folder).resolve():
        return {"commit": None, "dirty": None}
    status = _git(folder, "status", "--porcelain")
    return {"commit": lines[1], "dirty": None if status is None else bool(status)}


def version_of(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def vlmbench_section(root: Path | None = None) -> dict[str, Any]:
    return {"version": version_of("vlmbench"), **git_state(root or project_root())}


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str]:
    """name -> version of the installed ones among `names`."""
    return {name: v for name in names if (v := version_of(name)) is not None}


def command_section(args: Sequence[str], cwd: Path | str) -> dict[str, Any]:
    """The pytest command line (credentials are redacted with everything else; in `line` each
    argument before it is quoted, as quoting splits a secret that holds a quote)."""
    args = [str(a) for a in args]
    line = shlex.join(["pytest", *map(redact_text, args)])
    return {"args": args, "dir": str(cwd), "line": line}


def gpu_names() -> list[str] | None:
    """The GPUs' names: torch's view when torch is already imported here and sees CUDA, else
    nvidia-smi's (timed out after GPU_QUERY_TIMEOUT_S); None when neither names one."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        except Exception:  # a broken CUDA setup: ask nvidia-smi
            pass
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    out = _stdout([exe, "--query-gpu=name", "--format=csv,noheader"], GPU_QUERY_TIMEOUT_S)
    names = [line.strip() for line in (out or "").splitlines() if line.strip()]
    return names or None


def memory_bytes() -> int | None:
    """Physical memory (bytes) where sysconf says it (Linux, macOS); else None."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def host_section() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "gpus": gpu_names(),
    }


# --- data -----------------------------------------------------------------------------------------


def data_file_list(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """(existing files, missing paths): folders expanded to every file below them (symbolic
    links followed; names starting with "." skipped), duplicates dropped, in sorted order."""
    files: dict[str, Path] = {}
    missing: list[Path] = []
    for p in map(Path, dict.fromkeys(map(str, paths))):  # 10^6 rows may name 10 images
        p = p.absolute()
        if p.is_dir():
            for folder, dirs, names in os.walk(p, followlinks=True):
                dirs[:] = sorted(d for d in dirs if not d.startswith(HIDDEN))
                for name in sorted(names):
                    if not name.startswith(HIDDEN):
                        f = Path(folder) / name
                        files.setdefault(str(f), f)
        elif p.is_file():
            files.setdefault(str(p), p)
        else:
            missing.append(p)
    return sorted(files.values()), missing


def data_fingerprint(paths: Sequence[Path], hashes: FileHashes) -> dict[str, Any]:
    """The fingerprint of the files `paths` name (folders expanded): sha256 over the lines
    "relative path, size, sha256" of every file, sorted by path, relative to the files' common
    folder (so the same data elsewhere gives the same fingerprint)."""
    files, missing = data_file_list(paths)
    folders = sorted({str(f.parent) for f in files} | {str(m.parent) for m in missing})
    try:
        root = Path(os.path.commonpath(folders)) if folders else None
    except ValueError:  # different drives
        root = None

    def rel(p: Path) -> str:
        return p.relative_to(root).as_posix() if root is not None else p.as_posix()

    rows = []
    for f in files:
        try:
            size, digest = hashes.sha256(f)
        except OSError:  # vanished or unreadable since it was listed
            missing.append(f)
            continue
        rows.append((rel(f), size, digest))
    rows.sort()
    lines = "".join(f"{r}\t{size}\t{digest}\n" for r, size, digest in rows)
    return {
        "sha256": sha256_hex(lines),
        "files": len(rows),
        "bytes": sum(size for _, size, _ in rows),
        "root": str(root) if root is not None else None,
        "missing": sorted(rel(m) for m in missing)[:MAX_LISTED_MISSING],
        "n_missing": len(missing),
    }


def data_section(spec: EvaluationSpec, run: RunSettings) -> dict[str, Any] | None:
    """The evaluation's data fingerprint and `label`, what the data is when it is not the real
    dataset (the spec's `data_label`, e.g. the synthetic sample; null for real data). None when
    the spec names neither data files nor a label; an error message, not an exception, when
    listing or reading fails."""
    settings = run.evaluations.get(spec.name)
    label = spec.data_label(run) if spec.data_label is not None else None
    if spec.data_files is None:
        return {"label": label} if label else None
    hashes = FileHashes(Path(run.output.cache_dir) / HASH_MEMO)
    try:
        section = data_fingerprint(list(spec.data_files(settings, run)), hashes)
    except Exception as exc:  # the manifest must not cost the run its files
        return {"error": f"{type(exc).__name__}: {exc}", "label": label}
    finally:
        hashes.save()
    return {**section, "label": label}


# --- prompts, models, run -------------------------------------------------------------------------


def module_source_sha256(module: str) -> str | None:
    """sha256 of a module's source file, found without importing the module itself; None when
    it cannot be found or read."""
    try:
        found = importlib.util.find_spec(module)
        origin = found.origin if found is not None else None
        return sha256_hex(Path(origin).read_bytes()) if origin else None
    except (ImportError, OSError, ValueError):
        return None


def prompts_section(spec: EvaluationSpec, outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Prompt-template hashes (the spec's prompt modules) and the outcomes' prompt hashes."""
    seen = Counter(o.prompt_hash for o in outcomes if o.prompt_hash)
    return {
        "modules": {m: module_source_sha256(m) for m in spec.prompt_modules},
        "outcomes": {
            "with_prompt": sum(seen.values()),
            "distinct": len(seen),
            "distinct_sha256": sha256_hex("".join(f"{h}\n" for h in sorted(seen))),
        },
    }


def models_section(
    models: Sequence[str],
    engine_stats: Mapping[str, Sequence[Mapping[str, Any]]],
    outcomes: Sequence[Outcome],
) -> dict[str, dict[str, Any]]:
    """Per model: kind, provider, model id and traits (the registry, nothing built), the backend
    identity and endpoint the engine statistics carry (null when no process used the model, or
    for a model no URL answers), requests sent and cache hits summed over processes, and the
    same two counts of this evaluation's outcomes."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(
        [*models, *(s.get("model") for v in engine_stats.values() for s in v)]
    ):
        if not isinstance(name, str):
            continue
        try:
            spec = model_spec(name)
            kind, provider, model_id = spec.kind, spec.provider, spec.model_id
            traits: dict[str, str] | None = spec.traits
        except ValueError:
            kind = provider = model_id = traits = None
        stats = [
            (p, s) for p, v in sorted(engine_stats.items()) for s in v if s.get("model") == name
        ]
        identities = list(
            {
                json.dumps(s.get("identity"), sort_keys=True): s.get("identity") for _, s in stats
            }.values()
        )
        mine = [o for o in outcomes if o.model == name]
        entry: dict[str, Any] = {
            "kind": kind,
            "provider": provider,
            "model_id": model_id,
            "traits": traits,  # how its boxes and prefills are read (ModelSpec.traits)
            "identity": identities[0] if identities else None,
            # the URL that answered (support.backends.api_backend.answering_endpoint)
            "endpoint": next((s["endpoint"] for _, s in stats if s.get("endpoint")), None),
            "cache_schema": SCHEMA_VERSION,
            "sent": sum(int(s.get("sent") or 0) for _, s in stats),
            "cache_hits": sum(int(s.get("cache_hits") or 0) for _, s in stats),
            "processes": len({p for p, _ in stats}),
            # --concurrency auto: 429s seen (SDK retries included), the most in flight it allowed
            "rate_limited": sum(int(s.get("rate_limited") or 0) for _, s in stats),
            # requests holding each modality (text, image, points), cached ones included: what
            # the model was given (an evaluation picks by ModelSpec.modalities)
            "requests_with": _summed(s.get("requests_with") for _, s in stats),
            "concurrency_reached": max(
                (int(s["concurrency_reached"]) for _, s in stats if s.get("concurrency_reached")),
                default=None,
            ),
            "outcomes": {
                "n": len(mine),
                "sent": sum(o.backend_calls for o in mine),
                "cache_hits": sum(o.cache_hits for o in mine),
                # tokens written: thinking apart from the answer (both billed as output)
                "output_tokens": sum(o.usage.output_tokens for o in mine),
                "reasoning_tokens": sum(o.usage.reasoning_tokens for o in mine),
                "truncated": sum(o.truncated for o in mine),
                # what backends changed of requests to fit the model's rules (api_models.py)
                "adapted": sorted({a for o in mine for a in o.adapted}),
            },
        }
        if len(identities) > 1:  # processes disagreed: every identity is recorded
            entry["identities"] = identities
        out[name] = entry
    return out


def _summed(counts: Iterable[Any]) -> dict[str, int]:
    """Per-process {key: count} mappings added up, keys sorted (None and bad values skipped)."""
    total: Counter[str] = Counter()
    for found in counts:
        if isinstance(found, Mapping):
            total.update({str(k): int(v) for k, v in found.items() if isinstance(v, int)})
    return dict(sorted(total.items()))


def seeds(run: RunSettings, evaluation: str, settings: Any) -> dict[str, Any]:
    """--seed and the evaluation's own seeds (settings fields named `seed` or `*_seed`)."""
    out: dict[str, Any] = {"--seed": run.seed}
    if dataclasses.is_dataclass(settings) and not isinstance(settings, type):
        for f in dataclasses.fields(settings):
            if f.name == "seed" or f.name.endswith("_seed"):
                out[f"{evaluation}.{f.name}"] = plain(getattr(settings, f.name))
    return out


def run_section(run: RunSettings, evaluation: str) -> dict[str, Any]:
    """The run's options: seeds, --compat, models, samples, bootstrap resamples, run id, every
    other RunSettings field as it is (cache, concurrency, --compare, ...), and the evaluation's
    settings object."""
    out: dict[str, Any] = {
        "run_id": run.output.run_id,
        "compat": run.compat,
        "seeds": seeds(run, evaluation, run.evaluations.get(evaluation)),
        "models": list(run.models.names),
        "samples": run.samples,
        "bootstrap": run.statistics.bootstrap,
    }
    for name, value in recorded_settings(run).items():
        if name not in out and name not in ("seed", "evaluations"):
            out[name] = plain(value)
    out["settings"] = plain(run.evaluations.get(evaluation))
    return out


def iso_utc(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds")


# --- the manifest ---------------------------------------------------------------------------------


def build_manifest(
    spec: EvaluationSpec,
    run: RunSettings,
    session: SessionFacts,
    outcomes: Sequence[Outcome],
    ended: float | None = None,
) -> dict[str, Any]:
    """The manifest of one evaluation's run (plain JSON, redacted; see the module docstring)
    without its completion. `ended`: epoch seconds of the session's end (default now)."""
    evaluation = spec.name
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        FORMAT_FIELD: FORMAT_VERSION,  # the run folder's (support.storage.run_folder)
        "evaluation": evaluation,
        "vlmbench": vlmbench_section(),
        "packages": package_versions(),
        "command": command_section(session.args, session.cwd),
        "run": run_section(run, evaluation),
        "data": data_section(spec, run),
        "prompts": prompts_section(spec, outcomes),
        "models": models_section(run.models.names, session.engine_stats, outcomes),
    }
    ended = time.time() if ended is None else ended
    manifest["times"] = {
        "start": iso_utc(session.started),
        "end": iso_utc(ended),
        "wall_s": round(ended - session.started, 3),
    }
    manifest["host"] = host_section()
    return redacted(plain(manifest))
