"""What the local backends (`hf:`, `vllm:`) read of a model's folder: its path and its revision.

The revision enters the response cache identity, so it must change whenever the answers may: new
weights at the same path must never serve old answers. For a local folder it is sha256 over the
config, tokenizer and template files (CONFIG_FILES, whole) and, for each weight file
(WEIGHT_PATTERNS, top level, sorted), its name, size and content sha256. Weight hashes come from
a FileHashes memo (support.storage.file_hashes, `<cache-dir>/file-hashes.json`, keyed by path, size
and mtime), so the hash costs one read per new or changed file and nothing on later runs. For a hub
id it is the commit of the snapshot in the local Hugging Face cache (found offline, never on the
network), or else the id itself.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from support.storage.bounded_json import TooDeep, loads
from support.storage.file_hashes import HASH_MEMO, FileHashes

# small files that determine the answers, hashed whole into the revision of a local model
CONFIG_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
    "chat_template.jinja",
    "chat_template.json",
    "processor_config.json",
    "preprocessor_config.json",
    "tokenizer_config.json",
    "tokenizer.json",
)
# weight files (top level of the folder): each enters by name, size and content sha256
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.gguf")


def local_path(model_id: str) -> Path | None:
    """The folder `model_id` names, or None for a hub id ("org/name" or "name")."""
    path = Path(model_id).expanduser()
    if path.exists() or model_id.startswith(("/", ".", "~")) or model_id.count("/") > 1:
        return path
    return None


def checked_folder(name: str, model_id: str) -> Path | None:
    """`local_path(model_id)`, which must hold a config.json (BackendUnavailable naming the
    model and the folder otherwise); None for a hub id."""
    from support.backends.base import BackendUnavailable

    path = local_path(model_id)
    if path is not None and not (path / "config.json").is_file():
        what = "does not exist" if not path.exists() else "has no config.json"
        raise BackendUnavailable(f"{name}: model folder {path} {what}")
    if path is not None:
        try:  # what transformers would fail on only when it loads, with a traceback
            loaded = loads((path / "config.json").read_text(encoding="utf-8"))
        except TooDeep:
            raise BackendUnavailable(
                f"{name}: {path / 'config.json'} is nested too deep to read"
            ) from None
        except (OSError, ValueError) as exc:
            raise BackendUnavailable(f"{name}: {path / 'config.json'}: not JSON ({exc})") from None
        if not isinstance(loaded, dict):
            raise BackendUnavailable(f"{name}: {path / 'config.json'}: not a JSON object")
    return path


def model_file(model_id: str, name: str) -> Path | None:
    """The file `name` of a model: in its local folder, or in the local Hugging Face cache's
    snapshot of a hub id (offline, never the network); None when it is not here."""
    folder = local_path(model_id)
    if folder is not None:
        path = folder / name
        return path if path.is_file() else None
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model_id, name)
    except Exception:  # no huggingface_hub, not a repo id
        return None
    return Path(cached) if isinstance(cached, str) else None


def model_json(model_id: str, name: str) -> tuple[Path, dict[str, Any]] | None:
    """`model_file(model_id, name)` and its JSON object; None when the file is not here, cannot
    be read or holds no JSON object."""
    path = model_file(model_id, name)
    if path is None:
        return None
    try:
        loaded = loads(path.read_text())
    except (OSError, ValueError):  # TooDeep too; checked_folder names a local folder's
        return None
    return (path, loaded) if isinstance(loaded, dict) else None


def folder_revision(path: Path, hashes: FileHashes | None = None) -> str:
    """sha256 of the folder's config, tokenizer and template files and of its weight files'
    names, sizes and contents (content hashes memoised by `hashes`; None: a throwaway memo)."""
    hashes = hashes if hashes is not None else FileHashes(None)
    h = hashlib.sha256()
    for name in CONFIG_FILES:
        if (path / name).is_file():
            h.update(f"{name}\n".encode() + (path / name).read_bytes() + b"\n")
    weights = sorted({p for pattern in WEIGHT_PATTERNS for p in path.glob(pattern) if p.is_file()})
    for p in weights:
        size, digest = hashes.sha256(p)
        h.update(f"{p.name}:{size}:{digest}\n".encode())
    return h.hexdigest()


def hub_revision(model_id: str) -> str | None:
    """The commit of `model_id`'s snapshot in the local Hugging Face hub cache, or None when
    there is none (or huggingface_hub is missing); never touches the network."""
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(model_id, local_files_only=True)
    except Exception:  # not cached, not a valid repo id, no huggingface_hub: fall back
        return None
    return Path(folder).name or None


def model_revision(model_id: str, hashes: FileHashes | None = None) -> str:
    """The revision a local model's cache identity holds: a local folder's `folder_revision`,
    else the commit of the hub id's local snapshot, else the id itself."""
    path = local_path(model_id)
    if path is not None:
        return folder_revision(path, hashes)
    return hub_revision(model_id) or model_id


def revision_for(model_id: str, cache_dir: str | Path | None) -> str:
    """`model_revision` with the weight hashes memoised in `<cache_dir>/file-hashes.json` (saved
    afterwards); None: hashed without a memo (e.g. --no-cache)."""
    hashes = FileHashes(Path(cache_dir) / HASH_MEMO if cache_dir is not None else None)
    try:
        return model_revision(model_id, hashes)
    finally:
        hashes.save()
