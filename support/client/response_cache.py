"""Content-addressed response cache, shared safely by processes (xdist workers) and runs.

key = sha256 of SCHEMA_VERSION, the model identity (`Backend.identity`: what determines the
answers, e.g. provider, model id, endpoint, revision; never an SDK or library version, so upgrades
keep the cache) and the canonical request (system, parts with image bytes hashed, prefill, sampling
parameters, n, seed). Bump SCHEMA_VERSION to invalidate every stored answer deliberately.
Storage is one sqlite file in WAL mode: concurrent readers and writers across processes, each
write atomic, so a run killed midway keeps every response that completed. Errors are never stored.

A damaged cache is named once, at the run's start (`check_cache`, on the controller): a file that is
not a database, is truncated or damaged, holds another schema or stays locked stops the run with
the file and the fix (`--no-cache`, or move it aside); stored answers that do not decode are
counted and warned, and are misses (asked again and stored over). A cache folder this process
cannot write is read without writing (`ResponseCache(read_only=True)`; warned once).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from support.storage.files import write_error
from support.types import Request, Response, canonical_json, sha256_hex

# 2: API identities name the endpoint instead of the SDK version; hf: names the device type
SCHEMA_VERSION = 2


def cache_key(identity: Mapping[str, Any], request: Request, with_hints: bool = False) -> str:
    """The content address of a request to one model (identity: provider, model, endpoint...):
    sha256 of `canonical_json({"v": SCHEMA_VERSION, "model": identity, "request":
    request.canonical(with_hints)})`, spliced from the request's canonical JSON (made once per
    request, `Request.canonical_text`, which the prompt hash reads too) rather than encoding the
    request again. Sorted keys: "model" < "request" < "v"."""
    model = canonical_json(dict(identity))
    text = request.canonical_text(with_hints)
    return sha256_hex(f'{{"model":{model},"request":{text},"v":{SCHEMA_VERSION}}}')


RESPONSES_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS responses ("
    " key TEXT PRIMARY KEY, model TEXT NOT NULL, created REAL NOT NULL,"
    " response TEXT NOT NULL)"
)
RESPONSES_COLUMNS = ("key", "model", "created", "response")
OPEN_LOCK_S = 120.0  # seconds a process waits for another creating the file (xdist workers)
CHECK_BUSY_S = 10.0  # seconds the start's check waits on a lock another process holds
# a file up to this size is read whole at the start (PRAGMA quick_check and a count of answers
# that are not JSON: a read of the whole file); a larger one has its header and schema
# checked only, a damaged page is named when read and an answer not JSON is a miss, unwarned
FULL_CHECK_MAX_BYTES = 64 * 2**20


class CacheUnusable(Exception):
    """The response cache cannot be used: the message names the file and the fix."""


def unusable(path: Path, why: str) -> CacheUnusable:
    """CacheUnusable for the cache file `path`: what is wrong, and what to do."""
    return CacheUnusable(
        f"response cache {path}: {why}. Move it aside (a new cache is made in its place), "
        "point --cache-dir elsewhere, or run with --no-cache"
    )


def writable(folder: Path) -> bool:
    """Whether this process can create files in `folder` (made if missing;
    support.storage.files)."""
    return write_error(folder) is None


def connect_read_only(path: Path, timeout_s: float = 60.0) -> sqlite3.Connection:
    """A connection that never writes `path`. A WAL database opens read-only when its -shm can
    be made or exists; in a folder where neither holds, it is opened as immutable (what the file
    holds; a -wal's pages not yet checkpointed are not seen)."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=timeout_s, isolation_level=None)
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if "unable to open" not in str(exc):
            raise
    return sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None)


def check_cache(path: Path) -> list[str]:
    """The response cache file at the run's start: raises CacheUnusable (naming the file and the
    fix) for one that is not a database, is damaged or truncated, holds another `responses`
    table, or stays locked; returns what to warn about (answers that do not decode). A missing
    file is fine (it is made on first use)."""
    if not path.exists():
        return []
    conn = None
    try:
        conn = connect_read_only(path, CHECK_BUSY_S)
        return _checked(conn, path)
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise unusable(
                path, f"locked by another process for over {CHECK_BUSY_S:g} s ({exc})"
            ) from None
        raise unusable(path, f"cannot be read ({exc})") from None
    except sqlite3.DatabaseError as exc:  # "file is not a database", "disk image is malformed"
        raise unusable(path, f"unreadable, not an intact sqlite database ({exc})") from None
    finally:
        if conn is not None:
            conn.close()


def _checked(conn: sqlite3.Connection, path: Path) -> list[str]:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    columns = tuple(r[1] for r in conn.execute("PRAGMA table_info(responses)"))
    if tables and "responses" not in tables:
        raise unusable(path, f"holds another schema (tables {', '.join(sorted(tables))})")
    if "responses" in tables and columns != RESPONSES_COLUMNS:
        raise unusable(
            path,
            f"holds another schema (responses has columns {', '.join(columns)}; expected "
            f"{', '.join(RESPONSES_COLUMNS)})",
        )
    if path.stat().st_size > FULL_CHECK_MAX_BYTES or "responses" not in tables:
        return []
    problems = [r[0] for r in conn.execute("PRAGMA quick_check(3)")]
    if problems != ["ok"]:
        raise unusable(path, f"damaged ({'; '.join(problems)})")
    try:  # sqlite's JSON functions: built in since 3.38
        bad = conn.execute(
            "SELECT COUNT(*) FROM responses WHERE NOT json_valid(response)"
        ).fetchone()[0]
    except sqlite3.OperationalError as exc:
        if "no such function" not in str(exc):
            raise
        return []
    if not bad:
        return []
    return [
        f"response cache {path}: {bad} stored answer(s) do not decode (not JSON); they count "
        "as not cached: asked again, and stored over"
    ]


class WalDatabase:
    """One sqlite file in WAL mode with a connection per thread: safe across threads, processes
    (xdist workers) and runs. `schema` (CREATE TABLE IF NOT EXISTS ...) runs once, at open.
    `read_only`: a folder this process cannot write; the file is only read (nothing is made)."""

    def __init__(self, path: Path, schema: str, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._local = threading.local()
        if read_only:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Switching to WAL needs the database to itself, and sqlite's busy timeout does not cover
        # that switch: processes starting together (xdist workers) create the file one at a time.
        # WAL mode is then stored in the file, so later connections only open it.
        try:
            with FileLock(f"{self.path}.lock", timeout=OPEN_LOCK_S):
                conn = self.conn()
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(schema)
        except Timeout:
            raise unusable(
                self.path, f"locked: {self.path}.lock held by another process for {OPEN_LOCK_S:g} s"
            ) from None
        except sqlite3.DatabaseError as exc:
            raise unusable(self.path, f"cannot be opened ({exc})") from None

    def conn(self) -> sqlite3.Connection:
        """This thread's connection (autocommit; BEGIN/COMMIT for a batch)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self.read_only:
                conn = connect_read_only(self.path)
            else:
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
    """sqlite-backed map key -> Response. One connection per thread; safe across processes.

    `read_only` (default: whether this process cannot write the cache's folder) reads what the
    file holds and stores nothing; with no file there, every lookup is a miss."""

    def __init__(self, path: Path, read_only: bool | None = None) -> None:
        path = Path(path)
        self.read_only = not writable(path.parent) if read_only is None else read_only
        self.path = path
        self.undecodable = 0  # stored answers that did not decode: served as misses
        self._db: WalDatabase | None = None
        if not (self.read_only and not path.exists()):
            self._db = WalDatabase(path, RESPONSES_SCHEMA, read_only=self.read_only)

    def _conn(self) -> sqlite3.Connection:
        assert self._db is not None
        return self._db.conn()

    def get(self, key: str) -> Response | None:
        """The stored response for `key`, marked cached, or None: none stored, or one that does
        not decode (counted in `undecodable`; the answer is asked again and stored over it). A
        file that cannot be read is a CacheUnusable naming it."""
        if self._db is None:
            return None
        try:
            row = (
                self._conn()
                .execute("SELECT response FROM responses WHERE key = ?", (key,))
                .fetchone()
            )
        except sqlite3.DatabaseError as exc:  # damaged after the start's check, or unchecked
            raise unusable(self.path, f"cannot be read ({exc})") from None
        if row is None:
            return None
        try:
            return Response.from_json(json.loads(row[0]), cached=True)
        except (ValueError, TypeError, KeyError, AttributeError):  # not JSON, or not a Response
            self.undecodable += 1
            return None

    def put(self, key: str, response: Response) -> None:
        """Store a successful response (callers never pass errors: there is no error Response);
        read-only: nothing."""
        if self.read_only:
            return
        self._conn().execute(
            "INSERT OR REPLACE INTO responses (key, model, created, response) VALUES (?, ?, ?, ?)",
            (key, response.model, time.time(), json.dumps(response.to_json())),
        )

    def __len__(self) -> int:
        if self._db is None:
            return 0
        return self._conn().execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
