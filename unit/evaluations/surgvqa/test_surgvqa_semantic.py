"""SurgVU 2026's model options and scorer edges (support/evaluations/surgvqa/semantic.py, spec.py):
which models `--surgvqa-metrics` finds on disk and the usage errors when it cannot (each naming
the option, the id or folder and how to fetch it), BERTScore's layer and rescale baseline from
bert-score's own table and TSV, the softmax's overflow rule, blank references, and the 2025
profile's verdicts without ROUGE. The models are support/doubles/tiny_scorers.py's stand-ins,
in a Hugging Face hub cache under the official ids or as plain folders."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from support.contract.evaluation import OptionError
from support.contract.summary import SummaryContext
from support.doubles.tiny_scorers import ensure_scorers, install_in_hub_cache, install_official_ids
from support.evaluations.surgvqa.rouge import rouge_scores
from support.evaluations.surgvqa.semantic import (
    BERTSCORE_ID,
    NLI_ID,
    ModelNotFound,
    ScoringModels,
    SemanticScorer,
    find_models,
    shipped_baseline,
    softmax_entailment,
)
from support.evaluations.surgvqa.spec import SurgvqaSettings, configure, notes
from support.evaluations.surgvqa.summary import score_outcomes, scoring_notes
from support.evaluations.surgvqa.task import SurgvqaEvaluation
from support.settings import OutputSettings, RunSettings
from support.types import Case, Outcome

REFS = [
    "Yes",
    "Yes, a surgical instrument was used.",
    "A surgical instrument was utilized.",
    "The procedure involved using a surgical instrument.",
    "There is clear evidence that a surgical instrument was used.",
]
CANDIDATES = ("Yes", "No, no surgical instrument was used.", "The liver.")


@pytest.fixture(scope="module")
def folders(shared_cache: Path) -> tuple[Path, Path]:
    """The two stand-ins as plain folders (BERTScore's, the NLI's), built once a run."""
    return ensure_scorers(shared_cache)


@pytest.fixture(scope="module")
def hub_cache(
    shared_cache: Path, folders: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A hub cache of this module's holding both stand-ins under the official ids."""
    hub = tmp_path_factory.mktemp("hf-semantic") / "hub"
    install_official_ids(hub, shared_cache)
    return hub


def use_hub(monkeypatch: pytest.MonkeyPatch, hub: Path) -> Path:
    """`hub` as this process's Hugging Face cache (huggingface_hub reads it at call time)."""
    import huggingface_hub.constants

    hub.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    return hub


@pytest.fixture
def empty_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return use_hub(monkeypatch, tmp_path / "empty" / "hub")


@pytest.fixture
def official_hub(monkeypatch: pytest.MonkeyPatch, hub_cache: Path) -> Path:
    return use_hub(monkeypatch, hub_cache)


def settings(**values: Any) -> SurgvqaSettings:
    """spec.configure on option values by their dest names (surgvqa_metrics=..., ...)."""
    return configure({f"surgvqa_{k}": v for k, v in values.items()}, RunSettings())


def layer_f(path: str | Path, layer: int) -> np.float32:
    """bert_score's baseline F at `layer` of a rescale TSV, as it reads it (float64, float32)."""
    with open(path, newline="") as f:
        row = next(r for r in csv.DictReader(f) if int(r["LAYER"]) == layer)
    return np.float32(float(row["F"]))


# ---- finding the models ---------------------------------------------------------------------
def test_2026_without_the_model_is_a_usage_error_with_the_download_line(empty_hub: Path) -> None:
    with pytest.raises(OptionError) as err:
        settings(metrics="2026")
    assert isinstance(err.value, ModelNotFound)
    assert err.value.option == "--surgvqa-bertscore-model"
    text = str(err.value)
    assert text.startswith("--surgvqa-bertscore-model")
    assert "roberta-large" in text and "`hf download roberta-large`" in text
    assert str(empty_hub) in text  # where it looked


def test_2026_names_the_nli_model_when_only_it_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, folders: tuple[Path, Path]
) -> None:
    hub = use_hub(monkeypatch, tmp_path / "half" / "hub")
    install_in_hub_cache(hub, BERTSCORE_ID, folders[0])
    with pytest.raises(ModelNotFound) as err:
        settings(metrics="2026")
    assert err.value.option == "--surgvqa-nli-model"
    assert f"`hf download {NLI_ID}`" in str(err.value)


def test_auto_without_the_models_leaves_them_out_and_says_why(empty_hub: Path) -> None:
    got = settings()  # --surgvqa-metrics auto, the default
    assert got.metrics == "auto" and got.scoring is None
    assert got.text_metrics == ("bleu", "rouge1", "rouge2", "rougeL")  # no model needed
    assert got.left_out is not None
    assert "--surgvqa-bertscore-model" in got.left_out
    assert "hf download roberta-large" in got.left_out
    (note,) = notes(got)  # the loading line
    assert "not scored" in note and got.left_out in note


def test_auto_with_a_model_option_given_requires_it(empty_hub: Path) -> None:
    with pytest.raises(ModelNotFound, match=r"--surgvqa-bertscore-model.*roberta-large"):
        settings(bertscore_model="roberta-large")
    with pytest.raises(ModelNotFound, match="--surgvqa-bertscore-model"):
        settings(bertscore_baseline="none")  # any model option: the user asked for the metric


def test_the_defaults_resolve_the_official_ids_in_the_cache(official_hub: Path) -> None:
    for profile in ("auto", "2026"):
        got = settings(metrics=profile)
        assert got.left_out is None and got.scoring is not None
        assert Path(got.scoring.bertscore).is_relative_to(official_hub / "models--roberta-large")
        assert got.scoring.layers == 17 and got.scoring.rescaled
        assert got.scoring.baseline == str(shipped_baseline(BERTSCORE_ID))
        assert got.scoring.rescaled_by == BERTSCORE_ID


def test_a_folder_needs_a_baseline_id_and_takes_its_layer(
    empty_hub: Path, folders: tuple[Path, Path]
) -> None:
    bert, nli = (str(f) for f in folders)
    got = settings(metrics="2026", bertscore_model=bert, nli_model=nli,
                   bertscore_baseline="roberta-large")  # fmt: skip
    assert got.scoring is not None
    assert (got.scoring.bertscore, got.scoring.nli) == (bert, nli)
    assert got.scoring.layers == 17  # bert_score's table, for the baseline's id
    assert got.scoring.baseline == str(shipped_baseline("roberta-large"))
    assert got.scoring.rescaled_by == "roberta-large"
    with pytest.raises(OptionError) as err:
        settings(metrics="2026", bertscore_model=bert, nli_model=nli)
    assert err.value.option == "--surgvqa-bertscore-baseline"
    assert bert in str(err.value) and "none" in str(err.value)


def test_a_folder_of_an_unknown_model_needs_its_layer(
    empty_hub: Path, folders: tuple[Path, Path]
) -> None:
    bert, nli = (str(f) for f in folders)
    with pytest.raises(OptionError) as err:
        find_models(bert, nli, None, "none")
    assert err.value.option == "--surgvqa-bertscore-layers" and bert in str(err.value)
    tsv = shipped_baseline("roberta-large")
    with pytest.raises(OptionError, match="--surgvqa-bertscore-layers"):
        find_models(bert, nli, None, str(tsv))  # a TSV says nothing of the layer
    got = find_models(bert, nli, 17, str(tsv))
    assert got.layers == 17 and got.baseline == str(tsv) and got.rescaled_by == "roberta-large.tsv"
    with pytest.raises(OptionError, match="--surgvqa-bertscore-layers"):
        settings(bertscore_model=bert, nli_model=nli, bertscore_layers=-1)


def test_a_folder_without_weights_or_a_missing_folder_is_named(
    empty_hub: Path, tmp_path: Path, folders: tuple[Path, Path]
) -> None:
    bare = tmp_path / "bare-model"
    bare.mkdir()
    (bare / "config.json").write_text("{}")
    with pytest.raises(ModelNotFound) as err:
        settings(metrics="2026", bertscore_model=str(bare), nli_model=str(folders[1]),
                 bertscore_baseline="roberta-large")  # fmt: skip
    assert err.value.option == "--surgvqa-bertscore-model"
    assert str(bare) in str(err.value) and "model.safetensors" in str(err.value)
    missing = tmp_path / "nowhere"
    with pytest.raises(ModelNotFound, match=r"--surgvqa-nli-model.*nowhere.*no such folder"):
        settings(metrics="2026", bertscore_model=str(folders[0]), nli_model=str(missing),
                 bertscore_baseline="roberta-large")  # fmt: skip


def test_a_baseline_bert_score_does_not_ship_is_named(official_hub: Path) -> None:
    with pytest.raises(OptionError) as err:
        settings(bertscore_baseline="no-such-model")
    assert err.value.option == "--surgvqa-bertscore-baseline" and "no-such-model" in str(err.value)


def test_a_cache_path_holding_t5_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shared_cache: Path
) -> None:
    # bert_score loads any model name containing "t5" as a T5 encoder
    hub = use_hub(monkeypatch, tmp_path / "t5-models" / "hub")
    install_official_ids(hub, shared_cache)
    with pytest.raises(OptionError) as err:
        find_models(BERTSCORE_ID, NLI_ID)
    assert err.value.option == "--surgvqa-bertscore-model" and "'t5'" in str(err.value)


def test_a_bad_metrics_profile_is_named(empty_hub: Path) -> None:
    with pytest.raises(OptionError) as err:
        settings(metrics="2027")
    assert err.value.option == "--surgvqa-metrics"
    assert "2027" in str(err.value) and all(p in str(err.value) for p in ("auto", "2025", "2026"))


# ---- the scorer -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rescaled_and_raw(hub_cache: Path) -> tuple[ScoringModels, ScoringModels]:
    """The defaults, and the same models with --surgvqa-bertscore-baseline none."""
    with pytest.MonkeyPatch.context() as mp:
        use_hub(mp, hub_cache)
        return find_models(BERTSCORE_ID, NLI_ID), find_models(BERTSCORE_ID, NLI_ID, None, "none")


@pytest.fixture(scope="module")
def scorer(rescaled_and_raw: tuple[ScoringModels, ScoringModels]) -> SemanticScorer:
    return SemanticScorer(rescaled_and_raw[0])


@pytest.mark.slow
def test_none_scores_unrescaled_by_the_baseline_formula(
    rescaled_and_raw: tuple[ScoringModels, ScoringModels], scorer: SemanticScorer
) -> None:
    rescaled, raw = rescaled_and_raw
    assert rescaled.rescaled and not raw.rescaled and raw.rescaled_by is None
    assert raw.layers == rescaled.layers == 17
    b = layer_f(rescaled.baseline or "", 17)
    unscaled = SemanticScorer(raw)
    for cand in CANDIDATES:
        got, plain = scorer.score(cand, REFS), unscaled.score(cand, REFS)
        # bert_score's rule, in its float32: (F - b) / (1 - b)
        want = [
            float((np.float32(f) - b) / (np.float32(1) - b)) for f in plain["reference_bertscore"]
        ]
        assert got["reference_bertscore"] == want, cand
        assert got["reference_bertscore"] != plain["reference_bertscore"]
        assert got["reference_nli"] == plain["reference_nli"]  # NLI does not rescale


def official_softmax(logits: np.ndarray) -> np.ndarray:
    """evaluate.py's expression (compute_heavy_metrics), the entailment column."""
    with np.errstate(over="ignore", invalid="ignore"):
        return (np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True))[:, 1]


def test_softmax_overflow_is_nan_under_source_and_stable_otherwise() -> None:
    logits = np.array(
        [
            [0.0, 100.0, 0.0],  # exp overflows float32 (past 88.7): inf / inf
            [88.0, 88.0, 88.0],  # each exp finite, their sum not: 0 everywhere
            [0.5, 2.0, -1.0],
        ],
        dtype=np.float32,
    )
    official = official_softmax(logits)
    source = softmax_entailment(logits, official=True)
    np.testing.assert_array_equal(source, official)  # NaN where numpy gives NaN
    assert np.isnan(source[0]) and source[1] == 0.0
    stable = softmax_entailment(logits, official=False)
    assert stable.dtype == np.float32 and np.isfinite(stable).all()
    assert stable[0] == 1.0 and stable[1] == np.float32(1 / 3)
    assert stable[2] == official[2]  # a row that does not overflow: the official expression


def test_softmax_of_logits_that_all_underflow_is_stable_too() -> None:
    logits = np.full((1, 3), -1000.0, dtype=np.float32)  # every exp 0 in float32: 0 / 0
    assert np.isnan(softmax_entailment(logits, official=True)[0])
    assert softmax_entailment(logits, official=False)[0] == np.float32(1 / 3)


def test_softmax_equals_the_official_expression_where_it_does_not_overflow() -> None:
    logits = (np.random.default_rng(0).normal(size=(64, 3)) * 8).astype(np.float32)
    official = official_softmax(logits)
    for flag in (True, False):
        got = softmax_entailment(logits.copy(), official=flag)
        assert got.dtype == np.float32 and got.tolist() == official.tolist()


@pytest.mark.slow
def test_blank_references_score_zero_without_reaching_bert_score(
    scorer: SemanticScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scorer.load()
    seen: list[tuple[list[str], list[str]]] = []
    real = scorer._bert.score

    def spy(cands: list[str], refs: list[str], **kw: Any) -> Any:
        seen.append((list(cands), list(refs)))
        return real(cands, refs, **kw)

    monkeypatch.setattr(scorer._bert, "score", spy)
    refs = ["Yes", "", "A surgical instrument was utilized.", " \n "]
    got = scorer.score("Yes", refs)
    assert seen == [(["Yes", "Yes"], ["Yes", "A surgical instrument was utilized."])]
    _p, _r, f1 = real(["Yes", "Yes"], ["Yes", "A surgical instrument was utilized."])
    assert got["reference_bertscore"] == [f1[0].item(), 0.0, f1[1].item(), 0.0]
    assert got["bertscore_f1"] == max(f1.tolist())
    assert len(got["reference_nli"]) == 4  # the NLI model scores every pair
    seen.clear()
    only_blank = scorer.score("Yes", ["", "  "])
    assert seen == [] and only_blank["reference_bertscore"] == [0.0, 0.0]
    assert only_blank["bertscore_f1"] == only_blank["nli_bertscore_f1"] == 0.0


def vqa_case() -> Case:
    params = {"category": "vqa", "case": "case001", "question": "Was a surgical instrument used?",
              "answers": REFS, "kind": "yes_no"}  # fmt: skip
    return Case("vqa-case001", "surgvqa", params, {"category": "vqa", "kind": "yes_no"},
                cluster="video-case001")  # fmt: skip


def test_the_2025_profile_scores_no_rouge(empty_hub: Path) -> None:
    old = settings(metrics="2025")
    assert old.text_metrics == ("bleu",) and old.scoring is None and old.left_out is None
    answer = "Yes, an instrument was used."
    verdict = SurgvqaEvaluation([], [], old).score_vqa(vqa_case(), answer)
    assert "bleu" in verdict.scores
    assert not {"rouge1", "rouge2", "rougeL"} & verdict.scores.keys()
    new = SurgvqaEvaluation([], [], settings()).score_vqa(vqa_case(), answer)  # auto: ROUGE
    assert {k: new.scores[k] for k in ("rouge1", "rouge2", "rougeL")} == rouge_scores(REFS, answer)
    assert new.scores["bleu"] == verdict.scores["bleu"]


def test_without_the_surgvu26_extra_auto_says_what_to_install_and_2026_refuses(
    monkeypatch: pytest.MonkeyPatch, official_hub: Path
) -> None:
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "bert_score" else found(name)
    )
    left = settings(metrics="auto")
    assert left.scoring is None
    assert "bert-score is not installed" in left.left_out
    assert "pip install -e '.[surgvu26]'" in left.left_out
    with pytest.raises(OptionError) as raised:
        settings(metrics="2026")
    assert raised.value.option == "--surgvqa-metrics"
    assert "bert-score is not installed" in str(raised.value)


def answered(k: int, answer: str) -> Outcome:
    """A VQA outcome as the workers send it: the answer, the references, BLEU."""
    return Outcome(
        case_id=f"vqa-case{k:03d}-m",
        evaluation="surgvqa",
        model="m",
        status="wrong",
        group={"category": "vqa", "kind": "open"},
        cluster=f"video-case{k:03d}",
        scores={"bleu": 0.0, "yes_no_correct": None},
        prediction={"answer": answer},
        params={"category": "vqa", "case": f"case{k:03d}", "answers": REFS},
    )


def test_an_answer_the_models_fail_on_costs_only_its_own_scores(
    monkeypatch: pytest.MonkeyPatch, official_hub: Path, tmp_path: Path
) -> None:
    output = OutputSettings(cache_dir=tmp_path / "cache")  # kept scores: this test's own
    ctx = SummaryContext.of(settings=settings(metrics="2026"), output=output)
    real = SemanticScorer.score

    def failing_on_one(self: SemanticScorer, candidate: object, references: Any) -> dict:
        if candidate == "breaks the tokenizer":
            raise RuntimeError("index out of range in self")
        return real(self, candidate, references)

    monkeypatch.setattr(SemanticScorer, "score", failing_on_one)
    outcomes = [answered(k, a) for k, a in enumerate((*CANDIDATES, "breaks the tokenizer"))]
    scored = score_outcomes(outcomes, ctx)
    alone = SemanticScorer(ctx.settings.scoring)
    for o, answer in zip(scored[:3], CANDIDATES, strict=True):
        assert o.scores["bertscore_f1"] == real(alone, answer, REFS)["bertscore_f1"]
        assert "scoring_error" not in o.extra
    broken = scored[3]
    assert broken.scores["bertscore_f1"] == broken.scores["nli_entailment"] == 0.0
    assert broken.extra["scoring_error"] == "RuntimeError: index out of range in self"
    (_, failed) = scoring_notes(ctx.settings, ("bleu", "bertscore_f1"), scored)
    assert "1 answer could not be scored" in failed and "vqa-case003-m" in failed
    # every answer failing is the models failing: the error propagates (the run says so)
    with pytest.raises(RuntimeError, match="index out of range"):
        score_outcomes([answered(0, "breaks the tokenizer")], ctx)
