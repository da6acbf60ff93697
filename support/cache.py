"""Content-addressed response cache, shared safely by processes (xdist workers) and runs.

key = sha256 of SCHEMA_VERSION, the model identity (`Backend.identity`: what determines the
answers, e.g. provider, model id, endpoint, revision; never an SDK or library version, so upgrades
keep the cache) and the canonical request (system, parts with image bytes hashed, prefill, sampling
parameters, n, seed). Bump SCHEMA_VERSION to invalidate every stored answer deliberately.
Storage is one sqlite file in WAL mode: concurrent readers and writers across processes, each
write atomic, so a run killed midway keeps every response that completed. Errors are never stored.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from filelock import FileLock

from support.types import Request, Response, canonical_json, sha256_hex

# 2: API identities name the endpoint instead of the SDK version; hf: names the device type
SCHEMA_VERSION = 2


def cache_key(identity: Mapping[str, Any], request: Request, with_hints: bool = False) -> str:
    """The content address of a request to one model (identity: provider, model, endpoint...)."""
    material = {
        "v": SCHEMA_VERSION,
        "model": dict(identity),
        "request": request.canonical(with_hints=with_hints),
    }
    return sha256_hex(canonical_json(material))


class WalDatabase:
    """One sqlite file in WAL mode with a connection per thread: safe across threads, processes
    (xdist workers) and runs. `schema` (CREATE TABLE IF NOT EXISTS ...) runs once, at open."""

    def __init__(self, path: Path, schema: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        # Switching to WAL needs the database to itself, and sqlite's busy timeout does not cover
        # that switch: processes starting together (xdist workers) create the file one at a time.
        # WAL mode is then stored in the file, so later connections only open it.
        with FileLock(f"{self.path}.lock", timeout=120):
            conn = self.conn()
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(schema)

    def conn(self) -> sqlite3.Connection:
        """This thread's connection (autocommit; BEGIN/COMMIT for a batch)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class ResponseCache:
    """sqlite-backed map key -> Response. One connection per thread; safe across processes."""

    def __init__(self, path: Path) -> None:
        self._db = WalDatabase(
            path,
            "CREATE TABLE IF NOT EXISTS responses ("
            " key TEXT PRIMARY KEY, model TEXT NOT NULL, created REAL NOT NULL,"
            " response TEXT NOT NULL)",
        )
        self.path = self._db.path

    def _conn(self) -> sqlite3.Connection:
        return self._db.conn()

    def get(self, key: str) -> Response | None:
        """The stored response for `key`, marked cached, or None."""
        row = (
            self._conn().execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        )
        if row is None:
            return None
        return Response.from_json(json.loads(row[0]), cached=True)

    def put(self, key: str, response: Response) -> None:
        """Store a successful response (callers never pass errors: there is no error Response)."""
        self._conn().execute(
            "INSERT OR REPLACE INTO responses (key, model, created, response) VALUES (?, ?, ?, ?)",
            (key, response.model, time.time(), json.dumps(response.to_json())),
        )

    def __len__(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self._db.close()
