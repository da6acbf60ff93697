"""Text vectors kept on disk across runs and processes: a run embeds each text once, ever.

The default ONNX embedder runs one text at a time (~14 ms a layout description on 2 cores), and a
search's pools hold ~1,000 new texts a round, so a rerun, a resumed search or a second xdist
worker would embed the same texts again. `StoredEmbedder` wraps any embedder with a sqlite table
(WAL mode, safe across processes, as the response cache) keyed by sha256 of (embedder name, text);
vectors are float32 bytes. Only deterministic embedders belong here: the ONNX one embeds each text
alone, so a text's vector never depends on the texts beside it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from support.cache import WalDatabase
from support.dynamic.embedder import Embedder
from support.outputs import file_name

_CHUNK = 500  # keys per SELECT (sqlite's variable limit is 999 on old builds)


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
        return hashlib.sha256(f"{self.name}\x1f{text}".encode()).hexdigest()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(n, d) float32 rows: stored ones read, the others embedded once and stored."""
        texts = [str(t) for t in texts]
        keys = {t: self._key(t) for t in dict.fromkeys(texts)}
        found: dict[str, np.ndarray] = {}
        conn = self._db.conn()
        wanted = list(keys.values())
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for key, blob in conn.execute(
                f"SELECT key, vec FROM vectors WHERE key IN ({marks})", chunk
            ):
                found[key] = np.frombuffer(blob, dtype=np.float32)
        missing = [t for t, k in keys.items() if k not in found]
        if missing:
            rows = np.asarray(self.inner.encode(missing), dtype=np.float32)
            self.computed += len(missing)
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
