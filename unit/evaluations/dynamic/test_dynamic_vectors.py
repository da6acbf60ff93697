"""Text vectors stored on disk (support/evaluations/dynamic/vectors.py): each text embedded once,
ever."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from support.evaluations.dynamic.vectors import StoredEmbedder, store_path


class Counting:
    """A deterministic stand-in embedder that counts the texts it embeds."""

    name = "counting/v1"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.seen += list(texts)
        rows = np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)
        rows = rows.reshape(len(texts), 3)
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def test_each_text_is_embedded_once_across_instances(tmp_path: Path) -> None:
    path = store_path(tmp_path, Counting.name)
    assert path.name == "counting_v1.sqlite"
    first = Counting()
    texts = ["a chair", "the table", "a chair", ""]
    got = StoredEmbedder(first, path).encode(texts)
    assert first.seen == ["a chair", "the table", ""]  # duplicates embedded once
    np.testing.assert_array_equal(got, Counting().encode(texts))
    second = Counting()  # another process or run: nothing embedded again
    again = StoredEmbedder(second, path)
    np.testing.assert_array_equal(again.encode(texts), got)
    assert second.seen == [] and again.computed == 0
    more = again.encode(["the table", "a lamp"])
    assert second.seen == ["a lamp"] and more.shape == (2, 3) and more.dtype == np.float32
    assert again.encode([]).shape == (0, 3)


def test_other_embedders_do_not_share_vectors(tmp_path: Path) -> None:
    path = tmp_path / "one.sqlite"
    StoredEmbedder(Counting(), path).encode(["a chair"])
    other = Counting()
    other.name = "counting/v2"
    StoredEmbedder(other, path).encode(["a chair"])
    assert other.seen == ["a chair"]  # keyed by (embedder name, text)


class Slow(Counting):
    """Counting, but each call takes a while: two callers overlap if nothing serialises them."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import time

        time.sleep(0.3)  # s
        return super().encode(texts)


def test_processes_reaching_the_same_pool_together_embed_it_once(tmp_path: Path) -> None:
    """Two xdist workers (here: two stores on one file, each with its own lock handle, as two
    processes have) asked for the same new texts at once: one embeds them, the other reads."""
    import threading

    path = store_path(tmp_path, Counting.name)
    texts = [f"a chair at {i} cm" for i in range(50)]
    inners = [Slow(), Slow()]
    stores = [StoredEmbedder(inner, path) for inner in inners]
    start = threading.Barrier(2)
    got: list[np.ndarray] = [np.empty(0)] * 2

    def work(i: int) -> None:
        start.wait()
        got[i] = stores[i].encode(texts)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(len(inner.seen) for inner in inners) == [0, 50]  # not [50, 50]
    np.testing.assert_array_equal(got[0], got[1])
