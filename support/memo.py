"""Memos: `OnceCache`, bounded and thread-safe, computes each key once even when threads ask at
the same time; `FileMemo` keeps derived bytes on disk across runs.

functools.lru_cache lets concurrent callers compute the same key in parallel; when the engine
starts dozens of cases that share one frame, that is dozens of decodes. Here late callers wait.

`memoised_or_in_thread(fn, ...)` runs `fn` on the event loop when every OnceCache it reads holds
its value already, else in a worker thread: an evaluation that builds a request from memoised
frames (the same frame serves dozens of cases) pays no thread hand-off for it, and one that must
decode or read a file still does that off the loop. Inside `memory_only()`, a OnceCache miss
raises NotInMemory instead of computing; so does `require_memory()`, for work no OnceCache
guards.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from support.storage.files import atomic_write

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")

# True inside memory_only(): per task and thread (a context variable), so other cases' threads
# and tasks compute as always
_MEMORY_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("memory_only", default=False)


class NotInMemory(Exception):
    """Inside memory_only(): a value that would have to be computed (decoded, read, made)."""


@contextlib.contextmanager
def memory_only() -> Iterator[None]:
    """While inside, OnceCache misses and require_memory() raise NotInMemory."""
    token = _MEMORY_ONLY.set(True)
    try:
        yield
    finally:
        _MEMORY_ONLY.reset(token)


def require_memory() -> None:
    """Raise NotInMemory inside memory_only(): called before slow work no OnceCache guards."""
    if _MEMORY_ONLY.get():
        raise NotInMemory


async def memoised_or_in_thread(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on the running loop when it reads memoised values only (memory_only), else
    in a thread (asyncio.to_thread). `fn` must have no side effects before what it reads from
    its memos, as a call that meets a miss is made again in the thread."""
    try:
        with memory_only():
            return fn(*args)
    except NotInMemory:
        pass
    return await asyncio.to_thread(fn, *args)


class OnceCache(Generic[K, V]):
    """`cache.get(key, compute)`: compute(key) once per key, keep the `maxsize` most recent."""

    def __init__(self, maxsize: int = 256) -> None:
        self.maxsize = maxsize
        self._values: OrderedDict[K, V] = OrderedDict()
        self._locks: dict[K, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, key: K, compute: Callable[[K], V]) -> V:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            require_memory()  # inside memory_only(): a miss is NotInMemory, nothing computed
            key_lock = self._locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._values:
                    return self._values[key]
            value = compute(key)
            with self._lock:
                self._values[key] = value
                while len(self._values) > self.maxsize:
                    self._values.popitem(last=False)
                self._locks.pop(key, None)
        return value


class FileMemo:
    """`memo.get(name, make)`: the bytes of file `folder/name`, made by `make()` and written
    (atomically) the first time. For derived data that is slow to make and identical on every
    run, such as a frame letterboxed onto the canvas and PNG-encoded: the folder's name must
    hold everything the bytes depend on. A file that cannot be written only costs making it
    again next time."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.made = 0  # files made (not read) in this object's life

    def get(self, name: str, make: Callable[[], bytes]) -> bytes:
        path = self.folder / name
        try:
            return path.read_bytes()
        except OSError:
            pass
        data = make()
        self.made += 1
        with contextlib.suppress(OSError):
            atomic_write(path, lambda f: f.write(data))
        return data
