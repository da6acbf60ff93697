"""Hostile answers: lone surrogates, a cache that cannot write, absurd numbers (issue 25)."""

from __future__ import annotations

import asyncio
import sqlite3
import warnings

import pytest

from support.backends.scripted import ScriptedBackend
from support.cache import ResponseCache
from support.engine import CacheWriteWarning, ModelClient
from support.types import Part, Request, Response, sha256_hex, valid_text


def req(text: str) -> Request:
    return Request(parts=(Part.of_text(text),))


def test_a_lone_surrogate_is_replaced_where_answers_enter(tmp_path):
    """An API may send "\\ud800" as a JSON escape: the answer becomes valid text, is cached and
    read back identically, and a next request built from it (pgt's stage 2) gets a key."""
    backend = ScriptedBackend(lambda r: "\ud800 yes" if r.parts[0].text == "q1" else "ok")
    cache = ResponseCache(tmp_path / "cache.sqlite")
    client = ModelClient(backend, cache=cache, concurrency=1)

    async def two_stage() -> tuple[Response, Response]:
        first = await client.generate(req("q1"))
        second = await client.generate(req(f"you said: {first.text}. Sure?"))
        return first, second

    first, second = asyncio.run(two_stage())
    assert first.text == "\ufffd yes"
    first.text.encode("utf-8")  # valid text
    assert second.text == "ok"
    again = asyncio.run(client.generate(req("q1")))
    assert again.cached and again.text == first.text
    assert backend.calls == 2


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("\ud800", "\ufffd"),
        ("a\udc00b\x00", "a\ufffdb\x00"),  # NUL kept: sqlite stores the JSON escape
        ("\ud83d\ude00", "\U0001f600"),  # a split pair joined
        ("plain \u202e\u200b", "plain \u202e\u200b"),
    ],
)
def test_valid_text_and_keys_never_raise(raw, clean, tmp_path):
    assert valid_text(raw) == clean
    assert Response(texts=(raw,), model="m", prompt=raw).texts == (clean,)
    assert len(sha256_hex(raw)) == 64
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k", Response(texts=(raw,), model="m"))
    assert cache.get("k").texts == (clean,)


class FullDiskCache(ResponseCache):
    """A cache whose every write fails as sqlite does on a full disk."""

    def put(self, key, response):
        self.puts = getattr(self, "puts", 0) + 1
        raise sqlite3.OperationalError("database or disk is full")


def test_an_answer_is_kept_when_the_cache_write_fails(tmp_path):
    backend = ScriptedBackend(lambda r: f"answer {r.parts[0].text}")
    cache = FullDiskCache(tmp_path / "full.sqlite")
    client = ModelClient(backend, cache=cache, concurrency=2)

    async def three():
        return await asyncio.gather(*(client.generate(req(str(i))) for i in range(3)))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = asyncio.run(three())
    assert [r.text for r in out] == ["answer 0", "answer 1", "answer 2"]
    mine = [w for w in caught if issubclass(w.category, CacheWriteWarning)]
    assert len(mine) == 1  # reported once
    assert str(cache.path) in str(mine[0].message)
    assert cache.puts == 3  # later writes still tried
    assert client.stats()["cache_write_errors"] == 3
