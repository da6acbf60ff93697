"""SurgVU 2026's model-based scores kept on disk (support/evaluations/surgvqa/score_cache.py): a
warm run reads every score byte for byte and loads no model; a changed reference, model byte or
scoring setting scores again; --no-cache writes nothing; a failed answer is not kept; a file that
is not the cache is named in a warning and left as it is. The models are the tiny stand-ins of
support/doubles/tiny_scorers.py, as plain folders."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from support.contract.summary import SummaryContext
from support.evaluations.surgvqa import score_cache
from support.evaluations.surgvqa.score_cache import (
    STORE,
    ScoreCacheWarning,
    model_fingerprint,
    scorer_identity,
)
from support.evaluations.surgvqa.semantic import ScorerInputError, SemanticScorer, find_models
from support.evaluations.surgvqa.spec import SurgvqaSettings
from support.evaluations.surgvqa.summary import score_outcomes
from support.settings import OutputSettings
from support.storage.file_hashes import FileHashes
from support.types import Outcome

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("bert_score") is None
    or importlib.util.find_spec("sentence_transformers") is None,
    reason="the surgvu26 extra (bert-score, sentence-transformers) is not installed",
)

REFS = ["Yes", "Yes, a needle driver was used.", "A needle driver was utilized."]
ANSWERS = ("Yes", "No, no needle driver was used.", "", "The uterine horn.", "Yes")


@pytest.fixture(scope="module")
def scorers(shared_cache: Path) -> tuple[Path, Path]:
    from support.doubles.tiny_scorers import ensure_scorers

    return ensure_scorers(shared_cache)


@pytest.fixture(scope="module")
def settings(scorers: tuple[Path, Path]) -> SurgvqaSettings:
    models = find_models(str(scorers[0]), str(scorers[1]), baseline="roberta-large")
    return SurgvqaSettings(metrics="2026", scoring=models)


def context(settings: SurgvqaSettings, cache: Path, use_cache: bool = True, **run: Any):
    output = OutputSettings(cache_dir=cache, use_cache=use_cache)
    return SummaryContext.of(settings=settings, output=output, **run)


def answered(k: int, answer: object, refs: list[str] = REFS) -> Outcome:
    return Outcome(
        case_id=f"vqa-case{k:03d}-m",
        evaluation="surgvqa",
        model="m",
        status="wrong",
        group={"category": "vqa", "kind": "open"},
        cluster=f"video-{k}",
        scores={"bleu": 0.0, "yes_no_correct": None},
        prediction={"answer": answer},
        params={"category": "vqa", "case": f"case{k:03d}", "answers": refs},
    )


def outcomes() -> list[Outcome]:
    return [answered(k, a) for k, a in enumerate(ANSWERS)]


def dumped(scored: list[Outcome]) -> list[str]:
    return [json.dumps(o.scores) for o in scored]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The answers SemanticScorer.score is called with, in order (it still scores)."""
    calls: list[object] = []
    real = SemanticScorer.score

    def score(self: SemanticScorer, candidate: object, references: Any) -> dict:
        calls.append(candidate)
        return real(self, candidate, references)

    monkeypatch.setattr(SemanticScorer, "score", score)
    return calls


def no_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the models raises (a ScorerInputError: it stops the scoring at once)."""

    def refuse(self: SemanticScorer) -> None:
        raise ScorerInputError("--surgvqa-bertscore-model", "models", "a model was loaded")

    monkeypatch.setattr(SemanticScorer, "load", refuse)


def test_a_warm_run_reads_every_score_to_the_byte_and_loads_no_model(
    monkeypatch: pytest.MonkeyPatch, settings: SurgvqaSettings, tmp_path: Path
) -> None:
    ctx = context(settings, tmp_path / "cache")
    cold = score_outcomes(outcomes(), ctx)
    assert (tmp_path / "cache" / STORE).is_file()
    with sqlite3.connect(tmp_path / "cache" / STORE) as db:  # "Yes" twice: one row
        assert db.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 4
    no_loading(monkeypatch)
    warm = score_outcomes(outcomes(), ctx)
    assert dumped(warm) == dumped(cold)
    assert cold[1].scores["bertscore_f1"] != cold[3].scores["bertscore_f1"]  # real numbers
    # without the cache, the same models load (the check above can fail)
    with pytest.raises(ScorerInputError, match="a model was loaded"):
        score_outcomes(outcomes(), context(settings, tmp_path / "cache", use_cache=False))


def test_what_changed_is_scored_again_and_only_it(
    counted: list[object], settings: SurgvqaSettings, tmp_path: Path
) -> None:
    ctx = context(settings, tmp_path / "cache")
    score_outcomes(outcomes(), ctx)
    assert counted == ["Yes", "No, no needle driver was used.", "", "The uterine horn."]
    counted.clear()
    changed = outcomes()
    changed[1] = answered(1, ANSWERS[1], [*REFS[:2], "A needle driver was used."])
    changed[3] = answered(3, "The uterine horn")  # no full stop
    changed.append(answered(9, "Yes", REFS[::-1]))  # the same references in another order
    again = score_outcomes(changed, ctx)
    assert counted == ["No, no needle driver was used.", "The uterine horn", "Yes"]
    fresh = score_outcomes(changed, context(settings, tmp_path / "other"))
    assert dumped(again) == dumped(fresh)
    # --compat source scores empty answers otherwise: another key for every answer
    counted.clear()
    score_outcomes(outcomes(), context(settings, tmp_path / "cache", compat="source"))
    assert len(counted) == 4


def test_no_cache_reads_and_writes_nothing(
    counted: list[object], settings: SurgvqaSettings, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    for _ in range(2):
        score_outcomes(outcomes(), context(settings, cache, use_cache=False))
    assert not cache.exists()
    assert len(counted) == 8  # each run scores its four distinct answers


def test_a_failed_answer_is_not_kept(
    monkeypatch: pytest.MonkeyPatch, settings: SurgvqaSettings, tmp_path: Path
) -> None:
    real = SemanticScorer.score

    def failing(self: SemanticScorer, candidate: object, references: Any) -> dict:
        if candidate == "The uterine horn.":
            raise RuntimeError("index out of range in self")
        return real(self, candidate, references)

    monkeypatch.setattr(SemanticScorer, "score", failing)
    ctx = context(settings, tmp_path / "cache")
    cold = score_outcomes(outcomes(), ctx)
    assert "scoring_error" in cold[3].extra
    monkeypatch.setattr(SemanticScorer, "score", real)
    no_loading(monkeypatch)
    with pytest.raises(ScorerInputError, match="a model was loaded"):  # it alone is scored again
        score_outcomes(outcomes(), ctx)
    assert dumped(score_outcomes(outcomes()[:3], ctx)) == dumped(cold[:3])


def test_scores_computed_before_an_interruption_are_kept(
    monkeypatch: pytest.MonkeyPatch, settings: SurgvqaSettings, tmp_path: Path
) -> None:
    real = SemanticScorer.score

    def interrupted(self: SemanticScorer, candidate: object, references: Any) -> dict:
        if candidate == "The uterine horn.":
            raise KeyboardInterrupt
        return real(self, candidate, references)

    monkeypatch.setattr(SemanticScorer, "score", interrupted)
    with pytest.raises(KeyboardInterrupt):
        score_outcomes(outcomes(), context(settings, tmp_path / "cache"))
    with sqlite3.connect(tmp_path / "cache" / STORE) as db:
        assert db.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 3
    db.close()


def copy_models(scorers: tuple[Path, Path], to: Path) -> tuple[Path, Path]:
    return shutil.copytree(scorers[0], to / "bert"), shutil.copytree(scorers[1], to / "nli")


def flip_a_weight(folder: Path) -> None:
    """One byte of the embeddings' LayerNorm weight changed (a mantissa bit of its first float:
    it loads as before, and every token goes through it)."""
    path = folder / "model.safetensors"
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    name = next(k for k in header if k.endswith("embeddings.LayerNorm.weight"))
    data[8 + size + header[name]["data_offsets"][0] + 2] ^= 0x10
    before = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))  # a new mtime for sure


def test_the_key_follows_each_model_byte_and_each_setting(
    scorers: tuple[Path, Path], tmp_path: Path
) -> None:
    bert, nli = copy_models(scorers, tmp_path)
    models = find_models(str(bert), str(nli), baseline="roberta-large")
    hashes = FileHashes(tmp_path / "file-hashes.json")
    base = scorer_identity(models, False, hashes)
    assert scorer_identity(models, False, hashes) == base
    variants = {
        "source": scorer_identity(models, True, hashes),
        "layers": scorer_identity(dataclasses.replace(models, layers=16), False, hashes),
        "baseline": scorer_identity(dataclasses.replace(models, baseline=None), False, hashes),
    }
    for name, identity in variants.items():
        assert identity != base, name
    flip_a_weight(bert)
    assert model_fingerprint(bert, hashes) != base["bertscore"]
    (nli / "tokenizer_config.json").write_text("{}")
    assert model_fingerprint(nli, hashes) != base["nli"]
    flipped = model_fingerprint(bert, hashes)
    (bert / "README.md").write_text("docs decide nothing")
    assert model_fingerprint(bert, hashes) == flipped
    assert set(base["packages"]) == set(score_cache.PACKAGES) and base["device"]


def test_a_changed_weight_scores_again(
    counted: list[object], scorers: tuple[Path, Path], tmp_path: Path
) -> None:
    bert, nli = copy_models(scorers, tmp_path)
    settings = SurgvqaSettings(
        metrics="2026", scoring=find_models(str(bert), str(nli), baseline="roberta-large")
    )
    ctx = context(settings, tmp_path / "cache")
    cold = score_outcomes(outcomes()[:2], ctx)
    flip_a_weight(bert)
    counted.clear()
    warm = score_outcomes(outcomes()[:2], ctx)
    assert counted == list(ANSWERS[:2])
    assert dumped(warm) != dumped(cold)


@pytest.mark.parametrize(
    "content",
    [b"not a database at all" * 100, "foreign"],
    ids=["garbage", "another-schema"],
)
def test_a_file_that_is_not_the_cache_is_named_and_left_as_it_is(
    content: bytes | str, settings: SurgvqaSettings, tmp_path: Path
) -> None:
    path = tmp_path / "cache" / STORE
    path.parent.mkdir(parents=True)
    if content == "foreign":
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE mine (x TEXT)")
        db.close()
    else:
        path.write_bytes(content)  # type: ignore[arg-type]
    before = path.read_bytes()
    with pytest.warns(ScoreCacheWarning, match=re.escape(str(path))) as seen:
        scored = score_outcomes(outcomes()[:2], context(settings, tmp_path / "cache"))
    assert "--no-cache" in str(seen[0].message)
    assert path.read_bytes() == before
    fresh = score_outcomes(outcomes()[:2], context(settings, tmp_path / "fresh"))
    assert dumped(scored) == dumped(fresh)


def test_a_stored_row_that_does_not_decode_is_scored_again_and_replaced(
    monkeypatch: pytest.MonkeyPatch, settings: SurgvqaSettings, tmp_path: Path
) -> None:
    ctx = context(settings, tmp_path / "cache")
    cold = score_outcomes(outcomes()[:1], ctx)
    with sqlite3.connect(tmp_path / "cache" / STORE) as db:
        db.execute("UPDATE scores SET scores = '{\"bertscore_f1\": 1}'")
    db.close()
    with pytest.warns(ScoreCacheWarning, match="1 stored score"):
        assert dumped(score_outcomes(outcomes()[:1], ctx)) == dumped(cold)
    no_loading(monkeypatch)
    assert dumped(score_outcomes(outcomes()[:1], ctx)) == dumped(cold)  # stored over it


def test_the_cpu_signature_is_the_agreement_golden_s() -> None:
    from tools.surgvu26_official import DISPATCH_VARS, cpu_signature

    assert score_cache.DISPATCH_VARS == DISPATCH_VARS
    assert score_cache.cpu_signature() == cpu_signature()
