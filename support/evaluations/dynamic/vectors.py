"""Text vectors kept on disk across runs and processes: a run embeds each text once, ever.

The default ONNX embedder runs one text at a time (its cost: evals/dynamic/README.md), and a
search's pools hold about a thousand new texts a round, so a rerun, a resumed search or a second
xdist worker would embed the same texts again. `StoredEmbedder` wraps any embedder with a sqlite
table (WAL mode, safe across processes, as the response cache) keyed by sha256 of (embedder name,
text); vectors are float32 bytes. Texts missing from the table are embedded under a file lock beside
it, so xdist workers that reach the same pool together embed it once: the first embeds, the others
wait, then read its rows (before the lock, each of two workers embedded the whole pool on the same
two cores). Only deterministic embedders belong here: the ONNX one embeds each text alone, so a
text's vector never depends on the texts beside it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from filelock import FileLock

from support.client.response_cache import WalDatabase
from support.evaluations.dynamic.embedder import Embedder
from support.storage.files import file_name
from support.types import sha256_hex

_CHUNK = 500  # keys per SELECT (sqlite's variable limit is 999 on old builds)
_LOCK_TIMEOUT_S = 1800  # far above a pool's embedding (~1,000 texts); a stuck holder fails


def store_path(folder: Path, name: str) -> Path:
    """<folder>/<embedder name as a file name>.sqlite"""
    return Path(folder) / f"{file_name(name)}.sqlite"


class StoredEmbedder:
    """`inner` with a persistent text -> vector table at `path` (module docstring)."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self._db = WalDatabase(
            Path(path), "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB)"
        )
        self.path = self._db.path
        self.computed = 0  # texts embedded by `inner` through this object (for tests and logs)

    def _key(self, text: str) -> str:
        return sha256_hex(f"{self.name}\x1f{text}")  # never raises, lone surrogates included

    def _stored(self, keys: list[str]) -> dict[str, np.ndarray]:
        """The stored vectors of `keys` (those present)."""
        found: dict[str, np.ndarray] = {}
        conn = self._db.conn()
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for key, blob in conn.execute(
                f"SELECT key, vec FROM vectors WHERE key IN ({marks})", chunk
            ):
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(n, d) float32 rows: stored ones read, the others embedded once and stored."""
        texts = [str(t) for t in texts]
        keys = {t: self._key(t) for t in dict.fromkeys(texts)}
        found = self._stored(list(keys.values()))
        if len(found) < len(keys):
            with FileLock(f"{self.path}.embed.lock", timeout=_LOCK_TIMEOUT_S):
                # another process may have embedded them while this one waited
                found.update(self._stored([k for k in keys.values() if k not in found]))
                missing = [t for t, k in keys.items() if k not in found]
                if missing:
                    rows = np.asarray(self.inner.encode(missing), dtype=np.float32)
                    self.computed += len(missing)
                    conn = self._db.conn()
                    conn.execute("BEGIN")
                    conn.executemany(
                        "INSERT OR IGNORE INTO vectors (key, vec) VALUES (?, ?)",
                        [(keys[t], row.tobytes()) for t, row in zip(missing, rows, strict=True)],
                    )
                    conn.execute("COMMIT")
                    found.update({keys[t]: row for t, row in zip(missing, rows, strict=True)})
        if not texts:
            return np.asarray(self.inner.encode([]), dtype=np.float32)
        return np.stack([found[keys[t]] for t in texts])
