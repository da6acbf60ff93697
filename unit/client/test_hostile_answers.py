"""Hostile answers: lone surrogates, a cache that cannot write, absurd numbers (issue 25)."""

from __future__ import annotations

import asyncio
import sqlite3
import warnings

import numpy as np
import pytest

from support.backends.scripted import ScriptedBackend
from support.client.engine import CacheWriteWarning, ModelClient
from support.client.response_cache import ResponseCache
from support.contract.evaluation import SummaryContext
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


HOSTILE_DISTANCES = ["1e308", "inf", "nan", "9" * 5000, "-0", "1e308 m", "Infinity metres"]


@pytest.mark.parametrize("compat", ["writeup", "source"])
def test_nyu_metrics_stay_finite_under_absurd_answers(compat, tmp_path):
    """Absurd distances are unparsable (support.evaluations.nyu_distance.parser.MAX_METRES), so no
    inf or NaN reaches
    summary.csv; plain answers on other images keep every metric defined."""
    from support.evaluations.nyu_distance.parser import MAX_METRES, parse_answer, parse_first_number
    from support.evaluations.nyu_distance.spec import NyuSettings
    from support.evaluations.nyu_distance.summary import METRICS, summarize
    from support.evaluations.nyu_distance.task import NyuDistanceEvaluation
    from support.settings import OutputSettings, RunSettings
    from support.types import Outcome

    run = RunSettings(
        samples=6, output=OutputSettings(cache_dir=tmp_path / "cache", results_dir=tmp_path / "out")
    )
    ev = NyuDistanceEvaluation.load(run, NyuSettings())
    parse = parse_first_number if compat == "source" else parse_answer
    outcomes = []
    for i, case in enumerate(ev.cases()):
        text = HOSTILE_DISTANCES[i] if i < len(HOSTILE_DISTANCES) else f"{1 + i / 10} m"
        v = ev.score(case, parse(text))
        pred = v.scores["pred"]
        assert pred is None or 0 <= pred <= MAX_METRES, text[:20]
        if len(text) > 1000 or (compat == "writeup" and text in HOSTILE_DISTANCES):
            assert v.status == "unparsable", text[:20]
        outcomes.append(
            Outcome(f"{case.id}-m", case.evaluation, "m", v.status, cluster=case.cluster,
                    scores=v.scores, prediction=v.prediction, params=dict(case.params))
        )  # fmt: skip
    row = summarize(outcomes, SummaryContext.of(n_resamples=50, compat=compat)).iloc[0]
    columns = [c for m in METRICS for c in (m, f"{m}_lo", f"{m}_hi") if c in row.index]
    assert len(columns) > len(METRICS)
    bad = {c: row[c] for c in columns if not np.isfinite(float(row[c]))}
    assert not bad


def test_a_case_whose_cache_is_full_keeps_its_outcome(tmp_path):
    """Through the core: the case is scored from the answer received, not turned into an error."""
    from support.contract.runner import run_case
    from support.types import Case, Verdict

    class Asks:
        name = "toy"

        async def evaluate(self, case, client):
            r = await client.generate(req(case.id))
            return Verdict("correct" if r.text == "yes" else "wrong", prediction=r.text)

    client = ModelClient(
        ScriptedBackend(lambda r: "yes", name="m"), FullDiskCache(tmp_path / "f.sqlite"), 1
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWriteWarning)
        result = asyncio.run(run_case(Asks(), Case("c1", "toy"), client))  # type: ignore[arg-type]
    assert result.exception is None
    assert [(o.status, o.prediction, o.backend_calls) for o in result.outcomes] == [
        ("correct", "yes", 1)
    ]
