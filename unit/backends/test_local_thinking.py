"""Local thinking models (`hf:`, `vllm:`): which model thinks (its own chat template, never its
--model name), the `<think>` span taken off each answer (support/backends/thinking.py
`split_think`, `split_local`), the backends' post-processing of token ids
(transformers_local.rows_response, vllm_local.output_response: answer, thinking, finish reason,
reasoning tokens), the thinking allowance and the cache identity, and the hf backend end to end
on the tiny Qwen3-VL thinking checkpoint (random weights: invariants only).

Without torchvision (this venv) the Qwen3-VL processor cannot load, so the end-to-end tests give
the backend the checkpoint's own tokenizer as its processor (text-only requests: the same
template, tokens and model); with torchvision (the vLLM venv) they load it as a run does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import random
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from support.backends.local_thinking import (
    LOCAL_THINKING_ALLOWANCE,
    LocalAnswer,
    local_thinking_model,
    split_local,
    template_thinks,
    thinking_allowance,
)
from support.backends.thinking import (
    THINK_CLOSE,
    THINK_OPEN,
    Thinking,
    span_open,
    split_think,
)
from support.backends.vllm_local import VLLMBackend, output_response, sampling_kwargs
from support.doubles.tiny_families import (
    LLAVA_ONEVISION_TEMPLATE,
    MLLAMA_TEMPLATE,
    QWEN2_5_VL_TEMPLATE,
    QWEN3_VL_TEMPLATE,
    QWEN3_VL_THINKING_TEMPLATE,
)
from support.types import Part, Request, Usage

OPENED = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n"  # Qwen3-VL-Thinking's
PLAIN = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n"


# -- split_think ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ("", "")),
        ("a plain answer \n", ("", "a plain answer \n")),  # no markers: the text, unchanged
        ("<think>\nthe liver\n</think>\n\n(1, 2)", ("the liver", "(1, 2)")),
        ("the liver\n</think>\n\n(1, 2)", ("the liver", "(1, 2)")),  # the template opened it
        ("<think>cut by the limit", ("cut by the limit", "")),  # open, never closed
        ("Sure. <think>cut", ("cut", "Sure.")),
        ("Sure.<think>x</think>42", ("x", "Sure.\n42")),  # text before the span: no glue
        ("<think>a</think>b<think>c</think>d", ("a</think>b<think>c", "d")),  # to the last close
        ("a</think>b<think>c</think>d", ("a</think>b<think>c", "d")),  # a close before the open
        ("a</think>b</think>c", ("a</think>b", "c")),
        ("x</think>y<think>z", ("x\nz", "y")),  # a span after the last close the limit cut
        ("</think>", ("", "")),
        ("<think></think>", ("", "")),
        ("<think>\n\n</think>\n\nanswer", ("", "answer")),  # an empty span
    ],
)
def test_split_think(text, expected):
    assert split_think(text) == expected


def test_split_think_takes_other_markers():
    assert split_think("[t]a[/t] b", "[t]", "[/t]") == ("a", "b")
    assert split_think("<think>a</think>b", "[t]", "[/t]") == ("", "<think>a</think>b")


def _bare(text: str) -> str:
    return "".join(text.replace(THINK_CLOSE, "").replace(THINK_OPEN, "").split())


def test_split_think_keeps_every_word_and_no_marker_in_the_answer():
    rng = random.Random(0)
    pieces = [THINK_OPEN, THINK_CLOSE, "a", "b", "c", " ", "\n"]
    for _ in range(500):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        thinking, answer = split_think(text)
        assert THINK_OPEN not in answer and THINK_CLOSE not in answer, text
        assert Counter(_bare(text)) == Counter(_bare(thinking + answer)), text
        if THINK_OPEN not in text and THINK_CLOSE not in text:
            assert (thinking, answer) == ("", text)


# -- which model thinks ---------------------------------------------------------------------------


def test_a_thinking_model_is_one_whose_template_writes_think():
    assert template_thinks(QWEN3_VL_THINKING_TEMPLATE)
    for template in (QWEN3_VL_TEMPLATE, QWEN2_5_VL_TEMPLATE, LLAVA_ONEVISION_TEMPLATE):
        assert not template_thinks(template)
    assert not template_thinks(MLLAMA_TEMPLATE, None, 3, {})
    assert template_thinks(None, {"chat_template": QWEN3_VL_THINKING_TEMPLATE})  # a .json file
    named = [{"name": "default", "template": QWEN3_VL_TEMPLATE}]
    assert not template_thinks({"chat_template": named})  # tokenizer_config.json's list
    assert template_thinks([*named, {"name": "think", "template": "{{ '<think>' }}"}])


def _folder(tmp_path: Path, name: str, **files: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["X"]}))
    for file, text in files.items():
        (folder / file.replace("__", ".")).write_text(text)
    return folder


def test_the_model_folder_says_whether_it_thinks(tmp_path):
    jinja = _folder(tmp_path, "a", chat_template__jinja=QWEN3_VL_THINKING_TEMPLATE)
    assert local_thinking_model(str(jinja)) is True
    instruct = _folder(tmp_path, "b", chat_template__jinja=QWEN3_VL_TEMPLATE)
    assert local_thinking_model(str(instruct)) is False
    as_json = json.dumps({"chat_template": QWEN3_VL_THINKING_TEMPLATE})
    assert local_thinking_model(str(_folder(tmp_path, "c", chat_template__json=as_json)))
    named = json.dumps({"chat_template": [{"name": "default", "template": "<think>"}]})
    assert local_thinking_model(str(_folder(tmp_path, "d", tokenizer_config__json=named)))
    broken = _folder(tmp_path, "e", tokenizer_config__json="{not json")
    assert local_thinking_model(str(broken)) is False  # no template: not a thinking model
    # the name says nothing: a "thinking" folder with an instruct template does not think
    named_so = _folder(tmp_path, "Qwen3-VL-8B-Thinking", chat_template__jinja=QWEN3_VL_TEMPLATE)
    assert local_thinking_model(str(named_so)) is False
    # files not here (a hub id not downloaded, a missing folder): decided later
    assert local_thinking_model("org/not-downloaded") is None
    assert local_thinking_model(str(tmp_path / "nope")) is None


def test_the_allowance_is_the_budget_else_the_default():
    assert thinking_allowance(None) == LOCAL_THINKING_ALLOWANCE == 4096
    assert thinking_allowance(Thinking(budget=512)) == 512
    assert thinking_allowance(Thinking(budget=0)) == 0
    assert thinking_allowance(Thinking(effort="high")) == LOCAL_THINKING_ALLOWANCE


def test_a_span_is_open_where_the_prompt_leaves_it_open():
    assert span_open(OPENED) and span_open(OPENED + "The answer is")  # a prefill inside it
    assert not span_open(PLAIN) and not span_open("")
    assert not span_open(PLAIN + "<think>\n\n</think>\n\n")  # a closed (empty) span


# -- split_local: one sample, with its reasoning tokens (here a token is a character) -------------


def _chars(text: str, opened: bool = False) -> LocalAnswer:
    return split_local(text, len(text), len, opened)


def test_split_local_counts_the_tokens_up_to_the_close():
    assert _chars("abc</think>de", opened=True) == LocalAnswer("de", "abc", len("abc</think>"))
    assert _chars("abc", opened=True) == LocalAnswer("", "abc", 3)  # cut: all thinking
    assert _chars("abc") == LocalAnswer("abc", "", 0)  # no span: all answer
    text = "p<think>x</think>y"
    assert _chars(text) == LocalAnswer("p\ny", "x", len("p<think>x</think>"))
    text = "x</think>y<think>zz"  # closed, then a span the limit cut
    assert _chars(text, opened=True) == LocalAnswer("y", "x\nzz", len(text) - 1)
    assert split_local("abc</think>d", 2, len, True).reasoning_tokens == 2  # at most n_tokens


# -- the backends' post-processing ----------------------------------------------------------------


@pytest.fixture(scope="module")
def folders(shared_cache: Path) -> dict[str, Path]:
    """The tiny Qwen3-VL checkpoints, thinking and instruct (built once a run)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from support.doubles.tiny_families import ensure_family

    return {f: ensure_family(shared_cache, f) for f in ("qwen3_vl_thinking", "qwen3_vl")}


@pytest.fixture(scope="module")
def tokenizer(folders):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folders["qwen3_vl_thinking"])


def test_the_tiny_checkpoints_are_told_apart_by_their_templates(folders):
    assert local_thinking_model(str(folders["qwen3_vl_thinking"])) is True
    assert local_thinking_model(str(folders["qwen3_vl"])) is False


SAID = "the liver is left</think>\n\nPoint: (1, 2)"
CUT = "still thinking about it"


def _samples(tokenizer):
    """Two samples' token ids: one that closed its span and stopped (the end-of-turn token,
    then padding), one the limit cut while thinking."""
    encode = tokenizer.encode
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    said = encode(SAID, add_special_tokens=False)
    cut = encode(CUT, add_special_tokens=False)
    return said, cut, eos


def test_rows_response_splits_a_thinking_models_samples(tokenizer):
    from support.backends.transformers_local import rows_response

    said, cut, eos = _samples(tokenizer)
    rows = [[*said, eos, tokenizer.pad_token_id, eos], cut]
    r = rows_response("hf:m", OPENED, 9, rows, {eos}, tokenizer, thinks=True)
    assert r.texts == ("Point: (1, 2)", "")
    assert r.thinking == ("the liver is left", CUT)
    assert r.finish_reasons == ("stop", "length") and r.truncated
    span = len(tokenizer.encode("the liver is left</think>", add_special_tokens=False))
    assert r.usage == Usage(9, len(said) + 1 + len(cut), span + len(cut))
    assert r.usage.answer_tokens == len(said) + 1 - span  # the answer and its eos
    # a model that does not think: decoded whole, as before, with its finish reasons
    plain = rows_response("hf:m", PLAIN, 9, rows, {eos}, tokenizer)
    assert plain.texts == (SAID, CUT) and plain.thinking == ()
    assert plain.usage == Usage(9, len(said) + 1 + len(cut))
    assert plain.finish_reasons == ("stop", "length")


def test_a_close_that_is_one_token_counts_exactly(folders):
    from transformers import AutoTokenizer

    from support.backends.transformers_local import rows_response

    tok = AutoTokenizer.from_pretrained(folders["qwen3_vl_thinking"])
    tok.add_tokens([THINK_OPEN, THINK_CLOSE])  # as Qwen3's vocabulary holds them
    close = tok.convert_tokens_to_ids(THINK_CLOSE)
    said, _, eos = _samples(tok)
    assert said.count(close) == 1
    r = rows_response("hf:m", OPENED, 1, [[*said, eos]], {eos}, tok, thinks=True)
    assert r.texts == ("Point: (1, 2)",) and r.thinking == ("the liver is left",)
    assert r.usage.reasoning_tokens == said.index(close) + 1


def _output(text: str, ids: list[int], reason: str, stop: object = None) -> SimpleNamespace:
    return SimpleNamespace(text=text, token_ids=ids, finish_reason=reason, stop_reason=stop)


def test_output_response_splits_as_the_transformers_backend_does(tokenizer):
    from support.backends.transformers_local import rows_response

    said, cut, eos = _samples(tokenizer)
    final = SimpleNamespace(
        prompt_token_ids=list(range(9)),
        outputs=[  # vLLM's ids end with the stop token, its text does not
            _output(SAID, [*said, eos], "stop"),
            _output(CUT, cut, "length"),
        ],
    )
    r = output_response("vllm:m", final, OPENED, tokenizer, thinks=True)
    hf = rows_response("hf:m", OPENED, 9, [[*said, eos], cut], {eos}, tokenizer, thinks=True)
    assert (r.texts, r.thinking, r.finish_reasons) == (hf.texts, hf.thinking, hf.finish_reasons)
    assert r.usage == hf.usage and r.prompt == OPENED
    # a stop token of the generation config (stop_reason: its id) is not thinking either
    other = SimpleNamespace(prompt_token_ids=[1], outputs=[_output(CUT, [*cut, 7], "stop", 7)])
    assert output_response("vllm:m", other, OPENED, tokenizer, True).usage.reasoning_tokens == len(
        cut
    )
    plain = output_response("vllm:m", final, PLAIN, tokenizer)
    assert plain.texts == (SAID, CUT) and plain.thinking == ()
    assert plain.usage == Usage(9, len(said) + 1 + len(cut)) and plain.usage.reasoning_tokens == 0
    assert plain.finish_reasons == ("stop", "length")


# -- the allowance and the cache identity ---------------------------------------------------------


def test_a_thinking_models_requests_get_the_allowance():
    r = Request(parts=(Part.of_text("q"),), max_tokens=77)
    assert sampling_kwargs(r)["max_tokens"] == 77  # a model that does not think: as before
    assert sampling_kwargs(r, 4096)["max_tokens"] == 77 + 4096


def test_the_allowance_is_in_a_thinking_models_identity_only(tmp_path, monkeypatch):
    thinks = str(_folder(tmp_path, "t", chat_template__jinja=QWEN3_VL_THINKING_TEMPLATE))
    plain = str(_folder(tmp_path, "p", chat_template__jinja=QWEN3_VL_TEMPLATE))
    default = VLLMBackend("vllm:t", thinks, revision="r")
    assert (
        default.local_thinking.thinks
        and default.identity["thinking_allowance"] == LOCAL_THINKING_ALLOWANCE
    )
    budget = VLLMBackend("vllm:t", thinks, revision="r", thinking=Thinking(budget=256))
    assert budget.identity == {**default.identity, "thinking_allowance": 256}
    base = VLLMBackend("vllm:p", plain, revision="r")
    assert base.local_thinking.thinks is False
    assert set(base.identity) == {"provider", "model", "revision", "engine"}  # as it always was
    assert VLLMBackend("vllm:p", plain, revision="r", thinking=Thinking(budget=9)).identity == (
        base.identity
    )  # a budget gives a model that does not think nothing to allow
    assert (
        VLLMBackend("vllm:m", "/m").local_thinking.thinks is None
    )  # not here: decided at the engine's start
    assert "thinking_allowance" not in VLLMBackend("vllm:m", "/m").identity

    # the factory passes the variant's setting on
    from support.backends import vllm_local

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda m, *a: object() if m == "vllm" else real(m, *a)
    )
    opts = SimpleNamespace(extra=(), thinking=Thinking(budget=64), cache_dir=None, seed=0)
    made = vllm_local.make_vllm_backend("vllm:t", thinks, opts)
    assert made.identity["thinking_allowance"] == 64


def test_the_hf_backend_has_the_allowance_in_its_identity(folders):
    from support.backends.registry import BackendOptions, create_backend
    from support.backends.transformers_local import TransformersBackend

    thinking, instruct = str(folders["qwen3_vl_thinking"]), str(folders["qwen3_vl"])
    cpu = BackendOptions(extra=(("device", "cpu"),))
    b = TransformersBackend("hf:t", thinking)
    assert b.local_thinking.thinks and b.identity["thinking_allowance"] == LOCAL_THINKING_ALLOWANCE
    variant = create_backend(f"hf:{thinking}+budget-64", cpu)
    assert variant.identity == {**b.identity, "thinking_allowance": 64}
    plain = TransformersBackend("hf:i", instruct)
    assert plain.local_thinking.thinks is False and "thinking_allowance" not in plain.identity
    assert create_backend(f"hf:{instruct}+budget-64", cpu).identity == plain.identity


# -- end to end: the hf backend on the tiny thinking checkpoint -----------------------------------


def _loaded(backend):
    """The backend with its model and processor: loaded as a run does where torchvision is
    here; else the checkpoint's tokenizer stands in for its processor (text-only requests)."""
    if importlib.util.find_spec("torchvision") is not None:
        backend.load()
        return backend
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(backend.path)
    tokenizer.padding_side = "left"
    backend.processor = tokenizer
    backend.model = AutoModelForImageTextToText.from_pretrained(backend.path).eval()
    return backend


def _spy(backend, monkeypatch) -> list[int]:
    """The max_new_tokens of each model.generate call."""
    seen: list[int] = []
    real = backend.model.generate

    def counting(**kwargs):
        seen.append(kwargs["max_new_tokens"])
        return real(**kwargs)

    monkeypatch.setattr(backend.model, "generate", counting)
    return seen


REQUESTS = [
    Request(parts=(Part.of_text("Where is the liver?"),), max_tokens=4),
    Request(parts=(Part.of_text("Organ: Liver"),), max_tokens=6, n=2, temperature=1.0, seed=1),
]
BUDGET = 8  # tokens of thinking: small, so the tiny model's answers stay short


def test_the_hf_backend_splits_the_tiny_thinking_models_answers(folders, monkeypatch):
    from support.backends.transformers_local import TransformersBackend

    b = _loaded(
        TransformersBackend(
            "hf:t", str(folders["qwen3_vl_thinking"]), thinking=Thinking(budget=BUDGET)
        )
    )
    assert b.local_thinking.thinks
    limits = _spy(b, monkeypatch)
    responses = asyncio.run(b.generate_batch(REQUESTS))
    assert limits == [4 + BUDGET, 6 + BUDGET]  # the answer's tokens, and the allowance
    b.local_thinking.thinks = False  # the same generations (the same limits), decoded whole
    longer = [dataclasses.replace(r, max_tokens=r.max_tokens + BUDGET) for r in REQUESTS]
    raw = asyncio.run(b.generate_batch(longer))
    assert limits[2:] == limits[:2]
    b.local_thinking.thinks = True
    for request, r, whole in zip(REQUESTS, responses, raw, strict=True):
        assert r.prompt is not None and span_open(r.prompt)  # the template opened the span
        assert len(r.texts) == len(r.thinking) == len(r.finish_reasons) == request.n
        limit = request.max_tokens + BUDGET
        for answer, thought, reason, text in zip(
            r.texts, r.thinking, r.finish_reasons, whole.texts, strict=True
        ):
            assert THINK_CLOSE not in answer and THINK_OPEN not in answer
            assert _bare(thought + answer) == _bare(text)  # nothing lost, nothing added
            assert reason in ("stop", "length")
        assert r.usage.output_tokens == whole.usage.output_tokens <= limit * request.n
        if all(reason == "length" for reason in r.finish_reasons):
            assert r.usage.output_tokens == limit * request.n
        assert 0 < r.usage.reasoning_tokens <= r.usage.output_tokens
        assert whole.finish_reasons == r.finish_reasons and whole.thinking == ()


def test_the_hf_backend_leaves_a_model_that_does_not_think_as_it_was(folders, monkeypatch):
    from support.backends.transformers_local import TransformersBackend

    b = _loaded(
        TransformersBackend("hf:i", str(folders["qwen3_vl"]), thinking=Thinking(budget=BUDGET))
    )
    assert b.local_thinking.thinks is False
    limits = _spy(b, monkeypatch)
    (r,) = asyncio.run(b.generate_batch([dataclasses.replace(REQUESTS[0], max_tokens=5)]))
    assert limits == [5]  # no allowance
    assert r.thinking == () and r.usage.reasoning_tokens == 0
    assert r.usage.output_tokens <= 5 and r.finish_reasons in (("stop",), ("length",))
    assert r.prompt is not None and not span_open(r.prompt)


class _OpensThinking:
    """A processor whose template opens a <think> span, as Qwen3-VL-Thinking's does."""

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        return "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"


def test_a_prefill_on_a_thinking_model_is_continued_as_the_answer():
    from support.backends.chat_template import render_prompt
    from support.backends.thinking import span_open
    from support.types import Part, Request

    plain = render_prompt(_OpensThinking(), Request(parts=(Part.of_text("hi"),)))
    assert plain.endswith("<think>\n") and span_open(plain)  # the model thinks first
    stage2 = Request(parts=(Part.of_text("hi"),), prefill="It is real.\n\nFinal answer:")
    prompt = render_prompt(_OpensThinking(), stage2)
    assert prompt.endswith("<think>\n\n</think>\n\nIt is real.\n\nFinal answer:")
    assert not span_open(prompt)  # what follows is split as the answer, not as thinking
