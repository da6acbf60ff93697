"""support.memo: OnceCache computes each key once; memoised_or_in_thread builds on the loop only
from what memory holds, and in a thread otherwise."""

from __future__ import annotations

import asyncio
import threading

import pytest

from support.memo import NotInMemory, OnceCache, memoised_or_in_thread, memory_only, require_memory


def test_inside_memory_only_a_miss_raises_and_computes_nothing():
    cache: OnceCache[int, int] = OnceCache()
    computed: list[int] = []

    def square(k: int) -> int:
        computed.append(k)
        return k * k

    assert cache.get(3, square) == 9
    with memory_only():
        assert cache.get(3, square) == 9  # a hit: served as always
        with pytest.raises(NotInMemory):
            cache.get(4, square)
        with pytest.raises(NotInMemory):
            require_memory()
    assert computed == [3]
    assert cache.get(4, square) == 16  # outside: computed as always
    require_memory()  # outside: nothing


def test_a_memoised_call_runs_on_the_loop_and_a_miss_in_a_thread():
    cache: OnceCache[int, str] = OnceCache()

    def build(k: int) -> tuple[str, str]:
        return cache.get(k, lambda _: "made"), threading.current_thread().name

    async def main() -> list[tuple[str, str]]:
        loop_thread = threading.current_thread().name
        first = await memoised_or_in_thread(build, 1)  # a miss: made in a thread
        again = await memoised_or_in_thread(build, 1)  # in memory now: on the loop
        assert first[1] != loop_thread and again[1] == loop_thread
        return [first, again]

    assert [v for v, _ in asyncio.run(main())] == ["made", "made"]


def test_memory_only_holds_for_its_own_task_alone():
    """A context variable: another task (another case) computes while one is inside."""
    cache: OnceCache[int, int] = OnceCache()

    async def inside(started: asyncio.Event, done: asyncio.Event) -> None:
        with memory_only():
            started.set()
            await done.wait()
            with pytest.raises(NotInMemory):
                cache.get(1, lambda k: k)

    async def other(started: asyncio.Event, done: asyncio.Event) -> int:
        await started.wait()
        value = cache.get(2, lambda k: k * 10)  # computed: not inside memory_only
        done.set()
        return value

    async def main() -> int:
        started, done = asyncio.Event(), asyncio.Event()
        _, value = await asyncio.gather(inside(started, done), other(started, done))
        return value

    assert asyncio.run(main()) == 20
