"""A bounded, thread-safe memo that computes each key once even when threads ask at the same time.

functools.lru_cache lets concurrent callers compute the same key in parallel; when the engine
starts dozens of cases that share one frame, that is dozens of decodes. Here late callers wait.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


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
