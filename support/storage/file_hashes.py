"""sha256 of files, memoised on disk, so a large file is read once until it changes.

Used by the run manifest's data fingerprint (reports.manifest) and by the local models' cache
identity (support.backends.model_folder). The memo is a JSON file, HASH_MEMO in the run's cache
folder, keyed by absolute path and checked against size and mtime (ns).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from support.storage.files import atomic_write_text

HASH_MEMO = "file-hashes.json"  # in the run's cache folder


class FileHashes:
    """sha256 of files, memoised by (absolute path, size, mtime) in a JSON file.

    A file whose size or mtime (ns) changed is hashed again; `hashed` counts the files read in
    this object's life. `save()` merges into the file under a lock (runs may share a cache)."""

    def __init__(self, memo: Path | None) -> None:
        self.memo = memo
        self.entries: dict[str, dict[str, Any]] = {}
        self.hashed = 0
        if memo is not None and memo.is_file():
            try:
                self.entries = dict(json.loads(memo.read_text(encoding="utf-8"))["files"])
            except (OSError, ValueError, KeyError, TypeError):
                self.entries = {}  # an unreadable memo only costs hashing again

    def sha256(self, path: Path) -> tuple[int, str]:
        """(size in bytes, hex sha256) of a file (OSError if it cannot be read)."""
        key = os.path.abspath(path)  # not resolve(): a symlink costs a re-hash, not 8 lstats/file
        before = os.stat(key)
        entry = self.entries.get(key)
        if (
            isinstance(entry, dict)
            and entry.get("size") == before.st_size
            and entry.get("mtime_ns") == before.st_mtime_ns
        ):
            return before.st_size, str(entry["sha256"])
        with open(key, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        self.hashed += 1
        after = os.stat(key)
        if (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns):
            self.entries[key] = {
                "size": after.st_size,
                "mtime_ns": after.st_mtime_ns,
                "sha256": digest,
            }
        return before.st_size, digest

    def save(self) -> None:
        """Write the memo (merged with what other runs wrote meanwhile); never raises."""
        if self.memo is None or not self.hashed:
            return
        from filelock import FileLock

        try:
            with FileLock(f"{self.memo}.lock", timeout=30):
                merged = FileHashes(self.memo).entries
                merged.update(self.entries)
                text = json.dumps({"version": 1, "files": merged}, sort_keys=True)
                atomic_write_text(self.memo, text)
        except Exception:  # an unwritable cache folder only costs hashing again next time
            pass
