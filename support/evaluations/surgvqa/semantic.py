"""SurgVU 2026's model-based rows: BERTScore-F1, NLI entailment and their product (controller side).

As the official category-2 evaluator (isi-challenges/surgvu26-category-2-eval-public,
evaluation/evaluate.py, `compute_heavy_metrics`), per question, on the raw candidate and the raw
references (not the normalised texts BLEU and ROUGE see):

- **BERTScore-F1**: `bert_score.BERTScorer(model_type="roberta-large", lang="en",
  rescale_with_baseline=True)` (layer 17, bert_score's table; the rescale baseline is the TSV in
  the bert-score wheel); `score([candidate] * 5, references)`: the F1 against each reference, the
  max over them.
- **NLI entailment**: `sentence_transformers.CrossEncoder("cross-encoder/nli-deberta-v3-base")`;
  `predict([(candidate, reference), ...])`: logits in the label order (contradiction, entailment,
  neutral), `exp(l) / sum(exp(l))` in the logits' float32, the entailment probability, the max
  over references.
- **NLI x BERT**: the product of the two maxima.

The models load once, on the controller (`SemanticScorer`), and each question is one batch of its
candidate with its references, as the official code calls them: so every number is the official
one to the last bit (unit/evaluations/surgvqa/test_surgvqa_agreement.py), and a question's score
never depends on the other questions of the run. (Several questions in one batch would be faster
on repeated references, but would move BERTScore by up to 1.4e-6 and make each score depend on
its batch mates.)

Where the official code stops, vlmbench scores (docs/compat.md): an answer that is not a string
(its `normalize` raises) or is empty once stripped (bert_score's empty-sentence path calls
`build_inputs_with_special_tokens`, which transformers 5 tokenizers lack) scores 0.0 on all three;
under `--compat source` an empty answer scores as bert_score defines it (raw P/R/F 0, then
rescaled: (0 - b) / (1 - b)) and the NLI model's own probability, as the official code did with
transformers 4. Softmax overflow (a logit past 88 in float32, which gives NaN there) falls back to
a stable softmax, except under `--compat source`.

Models are found on disk only: a folder, or a hub id in the local Hugging Face cache
(`huggingface_hub.snapshot_download(..., local_files_only=True)`); nothing downloads
(`find_models`, called at configure time: a missing model is a usage error naming the option).
There too, the files each scorer will read are looked at without loading them (scorer_files.py: a
model folder's config.json and weights, the rescale baseline's rows): one that cannot work is a
usage error naming the option, the file and the row or field (`ScorerInputError`) before any
request is sent. What only loading shows fails at scoring time as a ScorerInputError too, naming
the option and the folder (`SemanticScorer.load`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.contract.evaluation import OptionError
from support.evaluations.surgvqa.scorer_files import (
    ScorerInputError,
    check_baseline,
    check_layers,
    check_model_folder,
)

BERTSCORE_ID = "roberta-large"  # the official BERTScore model
NLI_ID = "cross-encoder/nli-deberta-v3-base"  # the official NLI model
# bert_score's layer for roberta-large (bert_score.utils.model2layers; pinned by a unit test)
BERTSCORE_LAYERS = {BERTSCORE_ID: 17}
ENTAILMENT = 1  # the official label mapping: 0 contradiction, 1 entailment, 2 neutral
SEMANTIC_METRICS = ("bertscore_f1", "nli_entailment", "nli_bertscore_f1")
NO_BASELINE = "none"  # --surgvqa-bertscore-baseline's value for unrescaled scores
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")


class ModelNotFound(OptionError):
    """A scoring model (or its package) that is not on this machine: `option` names the option
    to pass, the message the id or folder and how to fetch it."""


def fetch_hint(model_id: str) -> str:
    return (
        f"fetch it once with `hf download {model_id}` (huggingface_hub >= 1.0; older: "
        f"`huggingface-cli download {model_id}`) or pass a folder that holds it"
    )


def find_model(option: str, name: str) -> Path:
    """The folder of model `name`: a folder (with config.json and weights), or a hub id's
    snapshot in the local Hugging Face cache. ModelNotFound otherwise; never downloads. Its
    files are looked at (scorer_files.check_model_folder): ScorerInputError when they cannot
    load."""
    path = Path(name).expanduser()
    if path.is_dir():
        folder = path
    elif path.is_absolute() or name.startswith((".", "~")) or name.count("/") > 1:
        raise ModelNotFound(option, f"{name}: no such folder")
    else:
        folder = cached_snapshot(option, name)
    missing = [] if (folder / "config.json").is_file() else ["config.json"]
    if not any((folder / w).is_file() for w in WEIGHT_FILES):
        missing.append(" or ".join(WEIGHT_FILES))
    if missing:
        raise ModelNotFound(
            option, f"{name}: {folder} has no {', '.join(missing)} (an incomplete download?)"
        )
    check_model_folder(option, folder)
    return folder


def cached_snapshot(option: str, model_id: str) -> Path:
    """Hub id `model_id`'s snapshot in the local Hugging Face cache (its `main` revision), found
    by huggingface_hub's `snapshot_download(local_files_only=True)`; ModelNotFound otherwise.

    configure runs this in every process of every run, surgvqa's or not: an id the cache has no
    folder for (models--org--name/refs/main, the hub cache's layout) is refused without importing
    huggingface_hub's download code (0.3 s, and it needs the HTTP client's packages)."""
    from huggingface_hub import constants  # paths only (6 ms)

    cache = Path(constants.HF_HUB_CACHE)
    missing = f"{model_id} is not in the local Hugging Face cache ({cache})"
    if not (cache / ("models--" + model_id.replace("/", "--")) / "refs" / "main").is_file():
        raise ModelNotFound(option, f"{missing}: {fetch_hint(model_id)}")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model_id, local_files_only=True))
    except ImportError as exc:
        raise ModelNotFound(option, f"{model_id}: huggingface_hub cannot load: {exc}") from None
    except Exception as exc:  # LocalEntryNotFoundError: a snapshot folder without its files
        raise ModelNotFound(
            option, f"{missing}; {type(exc).__name__}: {exc}; {fetch_hint(model_id)}"
        ) from None


def shipped_baseline(model_id: str) -> Path | None:
    """bert_score's rescale baseline for `model_id` in English, from the bert-score wheel (None
    when it ships none, or bert-score is not installed)."""
    spec = importlib.util.find_spec("bert_score")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "rescale_baseline" / "en" / f"{model_id}.tsv"
    return path if path.is_file() else None


def model_layers(model_id: str) -> int | None:
    """bert_score's layer for a hub id it knows (its model2layers table); None otherwise."""
    if model_id in BERTSCORE_LAYERS:
        return BERTSCORE_LAYERS[model_id]
    if importlib.util.find_spec("bert_score") is None:
        return None
    from bert_score.utils import model2layers

    return model2layers.get(model_id)


@dataclass(frozen=True)
class ScoringModels:
    """Where the two models are and how BERTScore reads its one: `bertscore`/`nli` folders,
    `layers` (the hidden layer BERTScore takes), `baseline` (the rescale TSV; None: scores
    unrescaled), and the names the user gave (`*_name`, for the tables)."""

    bertscore: str
    nli: str
    layers: int
    baseline: str | None
    bertscore_name: str = BERTSCORE_ID
    nli_name: str = NLI_ID
    rescaled_by: str | None = BERTSCORE_ID  # the baseline's model id or file name

    @property
    def rescaled(self) -> bool:
        return self.baseline is not None


def find_models(
    bertscore: str, nli: str, layers: int | None = None, baseline: str | None = None
) -> ScoringModels:
    """Both models located and BERTScore's layer and baseline settled, or ModelNotFound (the
    model or package is missing) / ScorerInputError (a model folder or the baseline's file that
    cannot work) / OptionError (a value that cannot work) naming the option. `baseline`: a TSV
    file, a hub id whose baseline ships with bert-score, or "none"; default: the one shipped for
    `bertscore`'s id."""
    if importlib.util.find_spec("bert_score") is None:
        raise ModelNotFound(
            "--surgvqa-metrics",
            "bert-score is not installed: pip install -e '.[surgvu26]' in the repository "
            "(bert-score, sentence-transformers, torch)",
        )
    if importlib.util.find_spec("sentence_transformers") is None:
        raise ModelNotFound(
            "--surgvqa-metrics",
            "sentence-transformers is not installed: pip install -e '.[surgvu26]' in the "
            "repository",
        )
    bert_folder = find_model("--surgvqa-bertscore-model", bertscore)
    nli_folder = find_model("--surgvqa-nli-model", nli)
    baseline_file: Path | None
    baseline_id = bertscore  # whose table entries (layer, baseline) apply
    rescaled_by: str | None = bertscore  # what the tables name the baseline by
    if baseline == NO_BASELINE:
        baseline_file = rescaled_by = None
    elif baseline is not None and Path(baseline).expanduser().is_file():
        baseline_file = Path(baseline).expanduser()
        rescaled_by = baseline_file.name
    elif baseline is not None:
        baseline_file = shipped_baseline(baseline)
        baseline_id = rescaled_by = baseline
        if baseline_file is None:
            raise OptionError(
                "--surgvqa-bertscore-baseline",
                f"{baseline!r} is neither a file nor a model bert-score ships an English "
                "baseline for",
            )
    else:
        baseline_file = shipped_baseline(bertscore)
        if baseline_file is None:
            raise OptionError(
                "--surgvqa-bertscore-baseline",
                f"bert-score ships no rescale baseline for {bertscore!r}: pass the id of the "
                "model it is (e.g. roberta-large for a folder holding it), bert_score's TSV for "
                f"it, or {NO_BASELINE} to score unrescaled (the tables then say so)",
            )
    if layers is None:
        layers = model_layers(baseline_id)
        if layers is None:
            raise OptionError(
                "--surgvqa-bertscore-layers",
                f"bert_score has no layer for {baseline_id!r}: pass the hidden layer to take "
                "(roberta-large: 17)",
            )
    if "t5" in str(bert_folder) and "t5" not in bertscore.lower():
        # bert_score loads any model name containing "t5" as a T5 encoder (utils.get_model)
        raise OptionError(
            "--surgvqa-bertscore-model",
            f"{bert_folder}: bert_score reads a path containing 't5' as a T5 model; link the "
            "folder elsewhere",
        )
    check_layers("--surgvqa-bertscore-layers", bert_folder, layers)
    if baseline_file is not None:  # the row BERTScore rescales by, and every other row
        check_baseline(baseline_file, layers)
    return ScoringModels(
        str(bert_folder),
        str(nli_folder),
        layers,
        None if baseline_file is None else str(baseline_file),
        bertscore_name=bertscore,
        nli_name=nli,
        rescaled_by=rescaled_by,
    )


def softmax_entailment(logits: Any, official: bool) -> Any:
    """Each row's entailment probability: exp(l) / sum(exp(l)) in the logits' dtype, as the
    official code writes it; where that overflows (an exp or the row's sum is not finite: NaN or
    0 there, e.g. float32 logits past 88) and not `official`, the stable softmax of the row."""
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):
        exps = np.exp(logits)
        sums = exps.sum(axis=1, keepdims=True)
        probs = exps / sums
        bad = ~np.isfinite(probs).all(axis=1) | ~np.isfinite(sums[:, 0])
    if not official and bad.any():
        from scipy.special import softmax

        probs[bad] = softmax(logits[bad].astype(np.float64), axis=1).astype(probs.dtype)
    return probs[:, ENTAILMENT]


LOAD_ERROR_CHARS = 500  # of a loader's error message, in a ScorerInputError


@contextmanager
def _input_errors(option: str, path: str, loader: str) -> Iterator[None]:
    """Any error loading the file or folder `path` (which `option` names) as a ScorerInputError
    naming both, with the loader's own error (chained, and in the message)."""
    try:
        yield
    except Exception as exc:
        said = " ".join(str(exc).split())
        if len(said) > LOAD_ERROR_CHARS:
            said = said[:LOAD_ERROR_CHARS] + "..."
        raise ScorerInputError(
            option, path, f"{loader} cannot load it: {type(exc).__name__}: {said}"
        ) from exc


def _blank(text: object) -> bool:
    return not isinstance(text, str) or not text.strip()


def zero_scores(n_refs: int) -> dict[str, Any]:
    return {
        "bertscore_f1": 0.0,
        "nli_entailment": 0.0,
        "nli_bertscore_f1": 0.0,
        "reference_bertscore": [0.0] * n_refs,
        "reference_nli": [0.0] * n_refs,
    }


class SemanticScorer:
    """The two models, loaded once on first use; `score` one question at a time. `source`: the
    official code's behaviour where vlmbench's differs (module docstring)."""

    def __init__(self, models: ScoringModels, source: bool = False) -> None:
        self.models = models
        self.source = source
        self._bert: Any = None
        self._nli: Any = None

    def load(self) -> None:
        """Both models into memory (on the GPU when torch sees one, as bert_score and
        sentence-transformers choose). A model or baseline that fails to load is a
        ScorerInputError naming its option and folder or file (what configure's look at the
        files could not tell)."""
        import warnings

        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # "Loading weights" bars: one line of ours instead
        try:
            with warnings.catch_warnings():
                # bert_score reads its baseline into a read-only array (a torch UserWarning)
                warnings.simplefilter("ignore", UserWarning)
                self._load()
        finally:
            if bars:
                hf_logging.enable_progress_bar()

    def _load(self) -> None:
        m = self.models
        if self._bert is None:
            from bert_score import BERTScorer

            with _input_errors("--surgvqa-bertscore-model", m.bertscore, "bert_score"):
                bert = BERTScorer(
                    model_type=m.bertscore,
                    num_layers=m.layers,
                    lang="en",
                    rescale_with_baseline=m.rescaled,
                    baseline_path=m.baseline,
                )
            if m.rescaled:
                with _input_errors("--surgvqa-bertscore-baseline", str(m.baseline), "bert_score"):
                    _ = bert.baseline_vals  # read now, under load()'s warning filter
            self._bert = bert
        if self._nli is None:
            from sentence_transformers import CrossEncoder

            with _input_errors("--surgvqa-nli-model", m.nli, "sentence-transformers"):
                self._nli = CrossEncoder(m.nli, local_files_only=True)

    def _empty_bertscore(self, n_refs: int) -> list[float]:
        """bert_score's score for an empty sentence: raw P, R, F 0, then rescaled (float32)."""
        import torch

        raw = torch.zeros(3)
        if self.models.rescaled:
            base = self._bert.baseline_vals
            raw = (raw - base) / (1 - base)
        return [float(raw[2])] * n_refs

    def score(self, candidate: object, references: Sequence[str]) -> dict[str, Any]:
        """BERTScore-F1, NLI entailment and their product for one question (module docstring),
        with each reference's BERTScore and entailment (`reference_*`)."""
        refs = list(references)
        if not refs or not isinstance(candidate, str) or (_blank(candidate) and not self.source):
            return zero_scores(len(refs))
        if self._bert is None or self._nli is None:
            self.load()
        keep = [k for k, r in enumerate(refs) if not _blank(r)]  # bert_score stops on blanks
        per_ref_bert = self._empty_bertscore(len(refs)) if self.source else [0.0] * len(refs)
        if keep and not _blank(candidate):
            _p, _r, f1 = self._bert.score([candidate] * len(keep), [refs[k] for k in keep])
            for k, f in zip(keep, f1.tolist(), strict=True):
                per_ref_bert[k] = f
        logits = self._nli.predict([(candidate, r) for r in refs], show_progress_bar=False)
        entailment = softmax_entailment(logits, official=self.source)
        per_ref_nli = [float(p) for p in entailment]
        bert, nli = max(per_ref_bert), float(entailment.max())  # NaN propagates, as numpy's
        return {
            "bertscore_f1": bert,
            "nli_entailment": nli,
            "nli_bertscore_f1": nli * bert,
            "reference_bertscore": per_ref_bert,
            "reference_nli": per_ref_nli,
        }
