"""The transformers backend and the shared chat-template path, on a tiny random VLM on the CPU.

The model (support.doubles.tiny_vlm) is built once per session; its answers are nonsense text,
so the tests check the plumbing: prompt rendering, batching, padding, sampling groups, usage,
determinism and errors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")  # HF_HUB_OFFLINE: unit/conftest.py

from support.backends.base import BackendError, BackendUnavailable
from support.backends.chat_template import chat_messages, render_prompt, request_images
from support.backends.registry import BackendOptions, create_backend
from support.backends.transformers_local import (
    TransformersBackend,
    make_transformers_backend,
)
from support.client.engine import ModelClient
from support.doubles.tiny_vlm import ensure_tiny_vlm, main
from support.evaluations.pointing.parser import parse_pointing
from support.evaluations.pointing.prompts import (
    SYSTEM_PROMPT,
    Example,
    few_shot_parts,
    zero_shot_parts,
)
from support.types import Part, Request

torch = pytest.importorskip("torch")
CANVAS = 768  # px, the pointing canvases' side


def canvas(seed: int) -> Part:
    rng = np.random.default_rng(seed)
    return Part.of_image(Image.fromarray(rng.integers(0, 256, (CANVAS, CANVAS, 3), np.uint8)))


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Path:
    return ensure_tiny_vlm(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def backend(tiny) -> TransformersBackend:
    b = TransformersBackend(f"hf:{tiny}", str(tiny))
    b.load()
    return b


@pytest.fixture(scope="module")
def images() -> list[Part]:
    return [canvas(k) for k in range(4)]


@pytest.fixture
def calls(backend, monkeypatch) -> list[dict]:
    """The keyword arguments of each model.generate call made during the test."""
    seen: list[dict] = []
    real = backend.model.generate

    def counting(**kwargs):
        seen.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(backend.model, "generate", counting)
    return seen


def mixed_requests(images: list[Part], **kw) -> list[Request]:
    """Five requests of different lengths: zero-shot, few-shot, text only."""
    ex = [Example(images[1], '{"name":"Fat","present":0,"point_canvas":null}')]
    parts = [
        zero_shot_parts("Liver", images[0]),
        few_shot_parts("Gallbladder", ex * 2, images[2]),
        (Part.of_text("Organ: Fat"),),
        zero_shot_parts("Abdominal Wall", images[3]),
        few_shot_parts("Grasper", ex, images[0]),
    ]
    return [Request(parts=p, system=SYSTEM_PROMPT, max_tokens=12, **kw) for p in parts]


def run(coro):
    return asyncio.run(coro)


def test_the_saved_folder_loads_offline_and_is_small(tiny):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    assert sum(p.stat().st_size for p in tiny.iterdir()) < 5e6  # bytes
    processor = AutoProcessor.from_pretrained(tiny)
    model = AutoModelForImageTextToText.from_pretrained(tiny)
    assert type(model).__name__ == "LlavaForConditionalGeneration"
    assert processor.chat_template and processor.tokenizer.image_token == "<image>"
    text = "<s><|user|>\nhi<image><|end|>\n<|assistant|>\n"
    img = Image.new("RGB", (CANVAS, CANVAS), (200, 30, 30))
    inputs = processor(text=[text], images=[img], return_tensors="pt")
    assert inputs["pixel_values"].shape[-2:] == (64, 64)  # the canvas shrunk for the tiny tower
    n_image_tokens = int((inputs["input_ids"] == model.config.image_token_index).sum())
    (features,) = model.get_image_features(pixel_values=inputs["pixel_values"]).pooler_output
    assert n_image_tokens == features.shape[0] == 16  # placeholders = vision tower outputs
    assert model(**inputs).logits.shape[1] == inputs["input_ids"].shape[1]  # expansion matches


def test_the_build_is_deterministic_and_cached(tiny, tmp_path):
    assert ensure_tiny_vlm(tiny.parents[1]) == tiny  # built once: the cached folder
    assert main(["--out", str(tmp_path / "again")]) == 0
    for f in tiny.iterdir():
        if f.is_file():
            assert (tmp_path / "again" / f.name).read_bytes() == f.read_bytes(), f.name


def test_chat_messages_keep_the_part_order(images):
    r = Request(parts=(Part.of_text("a"), images[0], Part.of_text("b"), images[1]), system="S")
    assert chat_messages(r) == [
        {"role": "system", "content": [{"type": "text", "text": "S"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image"},
                {"type": "text", "text": "b"},
                {"type": "image"},
            ],
        },
    ]
    assert [m["role"] for m in chat_messages(dataclasses.replace(r, system=None))] == ["user"]
    decoded = request_images(r)
    again = request_images(r)  # kept by content: the same decoded images, not decoded twice
    assert [id(im) for im in again] == [id(im) for im in decoded]
    assert [im.mode for im in decoded] == ["RGB", "RGB"] and decoded[0].size == (CANVAS, CANVAS)
    original = Image.open(io.BytesIO(images[1].image or b""))
    assert np.array_equal(np.asarray(decoded[1]), np.asarray(original))


def test_render_prompt_opens_the_assistant_turn_and_appends_the_prefill(backend, images):
    r = mixed_requests(images)[1]  # few-shot: 3 images
    prompt = render_prompt(backend.processor, r)
    assert prompt.index(SYSTEM_PROMPT) < prompt.index("Here are some examples:")
    assert prompt.index("Here are some examples:") < prompt.index("Now for the actual query")
    assert prompt.count("<image>") == len(r.images) == 3
    assert prompt.endswith("<|assistant|>\n") and prompt.count("<|assistant|>") == 1
    prefill = '{"name":"Gallbladder", "present":'
    with_prefill = render_prompt(backend.processor, dataclasses.replace(r, prefill=prefill))
    assert with_prefill == prompt + prefill


def test_a_batch_is_one_generate_call_with_left_padding(backend, images, calls):
    requests = mixed_requests(images)
    responses = run(backend.generate_batch(requests))
    assert len(calls) == 1 and len(responses) == 5
    assert all(len(r.texts) == 1 and isinstance(r.text, str) for r in responses)
    mask = calls[0]["attention_mask"]
    assert calls[0]["input_ids"].shape[0] == 5 and not calls[0]["do_sample"]
    assert bool(mask[:, -1].all()) and not bool(mask[:, 0].all())  # pads on the left only
    lengths = mask.sum(dim=1).tolist()
    assert [r.usage.input_tokens for r in responses] == lengths
    assert lengths[1] > lengths[0] > lengths[2]  # few-shot > zero-shot > text only
    for req, resp in zip(requests, responses, strict=True):
        assert resp.prompt == render_prompt(backend.processor, req)
        assert 0 < resp.usage.output_tokens <= req.max_tokens


def test_sampling_gives_n_texts_per_request_in_one_call(backend, images, calls):
    requests = mixed_requests(images, n=3, temperature=1.0, seed=7)
    first = run(backend.generate_batch(requests))
    assert len(calls) == 1 and calls[0]["num_return_sequences"] == 3 and calls[0]["do_sample"]
    assert [len(r.texts) for r in first] == [3] * 5
    assert any(len(set(r.texts)) > 1 for r in first)  # samples differ
    assert run(backend.generate_batch(requests)) == first  # seeded: repeatable


def test_greedy_samples_are_copies_of_one_generation(backend, images, calls):
    one, three = (mixed_requests(images, n=n)[0] for n in (1, 3))
    texts = run(backend.generate_batch([three]))[0].texts
    assert calls[0]["num_return_sequences"] == 1  # transformers refuses greedy n > 1
    assert texts == run(backend.generate(one)).texts * 3


def test_greedy_answers_are_the_same_alone_and_in_a_batch(backend, images):
    requests = mixed_requests(images)
    batched = run(backend.generate_batch(requests))
    alone = [run(backend.generate(r)) for r in requests]
    assert [r.texts for r in batched] == [r.texts for r in alone]
    assert [r.usage for r in batched] == [r.usage for r in alone]


def test_mixed_sampling_settings_are_grouped_and_keep_their_order(backend, images, calls):
    greedy = mixed_requests(images)
    sampled = mixed_requests(images, n=2, temperature=0.7, seed=1)
    batch = [greedy[0], sampled[1], greedy[2], sampled[3], greedy[4]]
    responses = run(backend.generate_batch(batch))
    assert len(calls) == 2 and [len(r.texts) for r in responses] == [1, 2, 1, 2, 1]
    greedy_alone = run(backend.generate_batch([greedy[0], greedy[2], greedy[4]]))
    assert [responses[i].texts for i in (0, 2, 4)] == [r.texts for r in greedy_alone]


def test_each_request_keeps_its_own_token_limit_in_a_batch(backend, images):
    short = dataclasses.replace(mixed_requests(images)[0], max_tokens=3)
    long = dataclasses.replace(short, max_tokens=12)
    both = run(backend.generate_batch([short, long]))
    assert both[0] == run(backend.generate(short))
    assert both[0].usage.output_tokens <= 3 < both[1].usage.output_tokens
    assert both[1].text.startswith(both[0].text)


def test_the_engine_batches_concurrent_requests(backend, images):
    client = ModelClient(backend, cache=None, concurrency=1)
    requests = mixed_requests(images)
    before = backend.generate_calls

    async def go():
        return await asyncio.gather(*(client.generate(r) for r in requests))

    responses = run(go())
    assert backend.generate_calls == before + 1 and backend.batch_sizes[-1] == 5
    assert client.batcher is not None and client.batcher.batch_sizes == [5]
    assert [r.texts for r in responses] == [r.texts for r in run(backend.generate_batch(requests))]


def test_nonsense_pointing_answers_are_unparsable(backend, images):
    r = Request(parts=zero_shot_parts("Liver", images[0]), system=SYSTEM_PROMPT, max_tokens=64)
    answer = run(backend.generate(r))
    assert answer.text and answer.usage.output_tokens > 0
    parsed = parse_pointing(answer.text)
    assert not parsed.ok and parsed.present is None


def test_factory_options_and_identity(tiny, tmp_path):
    extra = (("gpus", ()), ("max_batch", 3), ("device", "cpu"), ("max_new_tokens", 5))
    b = make_transformers_backend(f"hf:{tiny}", str(tiny), SimpleNamespace(extra=extra))
    assert (b.max_batch, b.device, b.max_new_tokens, b.name) == (3, "cpu", 5, f"hf:{tiny}")
    assert b.default_concurrency == 1 and b.model is None  # loads on first use
    # what determines the answers, and no library version (an upgrade keeps the cache)
    assert b.identity == {
        "provider": "hf",
        "model": str(tiny),
        "revision": b.identity["revision"],
        "device": "cpu",
        "max_new_tokens": 5,  # a cap cuts answers: part of what they are
    }
    default = make_transformers_backend("m", str(tiny), SimpleNamespace(extra=()))
    assert (default.max_batch, default.max_new_tokens) == (8, None)  # each request its own
    copy = Path(shutil.copytree(tiny, tmp_path / "copy"))
    assert TransformersBackend("m", str(copy)).identity["revision"] == b.identity["revision"]
    (copy / "chat_template.jinja").write_text("{{ messages }}")
    assert TransformersBackend("m", str(copy)).identity["revision"] != b.identity["revision"]
    assert TransformersBackend("m", "org/model").identity["revision"] == "org/model"  # a hub id


def test_unusable_models_are_unavailable_and_failures_are_errors(tmp_path, backend, monkeypatch):
    missing = tmp_path / "nope"
    with pytest.raises(BackendUnavailable, match=f"{missing} does not exist"):
        TransformersBackend("hf:x", str(missing))
    with pytest.raises(BackendUnavailable, match=r"has no config\.json"):
        TransformersBackend("hf:x", str(tmp_path))

    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda m, *a: None if m == "torch" else real(m, *a)
    )
    with pytest.raises(BackendUnavailable, match=r"pip install 'vlmbench\[hf\]'"):
        TransformersBackend("hf:x", str(tmp_path))
    monkeypatch.undo()

    def broken(**kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(backend.model, "generate", broken)
    with pytest.raises(BackendError, match="out of memory"):
        run(backend.generate(Request(parts=(Part.of_text("hi"),))))


# -- devices --------------------------------------------------------------------------------------


def test_the_factory_puts_the_model_on_the_requested_device(tiny):
    b = create_backend(f"hf:{tiny}", BackendOptions(extra=(("device", "cpu"),)))
    assert b.device == "cpu" and b.identity["device"] == "cpu"
    _, model = b.load()
    assert {p.device for p in model.parameters()} == {torch.device("cpu")}
    assert model.dtype == torch.float32
    assert run(b.generate(Request(parts=(Part.of_text("hi"),), max_tokens=3))).texts
    auto = create_backend(f"hf:{tiny}", BackendOptions())  # no --device: the backend decides
    assert auto.device == ("cuda" if torch.cuda.is_available() else "cpu")
    named = create_backend(f"hf:{tiny}", BackendOptions(extra=(("device", "auto"),)))
    assert named.device == auto.device


def test_a_device_this_machine_lacks_is_unavailable_and_a_typo_is_an_error(tiny):
    missing = ["cuda:99"] + ([] if torch.cuda.is_available() else ["cuda", "cuda:0"])
    for device in missing:
        with pytest.raises(BackendUnavailable, match=f"--device {device}, but torch sees"):
            create_backend(f"hf:{tiny}", BackendOptions(extra=(("device", device),)))
    with pytest.raises(ValueError, match=r"--device 'gpu0' is not a torch device"):
        create_backend(f"hf:{tiny}", BackendOptions(extra=(("device", "gpu0"),)))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_model_runs_on_cuda(tiny):
    b = create_backend(f"hf:{tiny}", BackendOptions(extra=(("device", "cuda:0"),)))
    assert b.identity["device"] == "cuda"
    _, model = b.load()
    assert {p.device.type for p in model.parameters()} == {"cuda"}
    requests = mixed_requests([canvas(k) for k in range(4)])
    assert all(r.texts for r in run(b.generate_batch(requests)))
    assert torch.cuda.memory_allocated() > 0


DEVICE_TEST = """
from fixtures.models import client_or_reason, local_engine_options


def test_device(pytestconfig):
    assert dict(local_engine_options(pytestconfig))["device"] == {device!r}
    found = client_or_reason(pytestconfig, {model!r})
    print("REASON:", found if isinstance(found, str) else None)
    if {available}:
        assert found.backend.device == {device!r}
    else:
        assert isinstance(found, str)
"""


@pytest.mark.parametrize(("device", "available"), [("cpu", True), ("cuda:99", False)])
def test_the_device_option_reaches_the_backend(pytester, tiny, device, available):
    """--device on the command line -> BackendOptions.extra -> the hf: factory."""
    pytester.makeconftest(
        "from fixtures.suite import SETTINGS_PLUGINS\n"
        'pytest_plugins = [*SETTINGS_PLUGINS, "fixtures.models"]'
    )
    pytester.makepyfile(DEVICE_TEST.format(device=device, model=f"hf:{tiny}", available=available))
    cache = pytester.path / "cache"
    result = pytester.runpytest_inprocess(
        f"--device={device}", f"--cache-dir={cache}", "-p", "no:cacheprovider", "-s"
    )
    result.assert_outcomes(passed=1)
    if not available:
        result.stdout.fnmatch_lines(["*REASON: hf:*--device cuda:99, but torch sees*"])


def test_decoded_images_are_kept_up_to_a_bound(monkeypatch):
    from support.backends import chat_template

    monkeypatch.setattr(chat_template, "DECODED_IMAGES", 2)
    monkeypatch.setattr(chat_template, "_decoded", chat_template.OrderedDict())
    parts = [Part.of_image(Image.new("RGB", (4, 4), (k, 0, 0))) for k in range(3)]
    first = [chat_template.request_images(Request(parts=(p,)))[0] for p in parts]
    assert len(chat_template._decoded) == 2  # the oldest was let go
    assert chat_template.request_images(Request(parts=(parts[2],)))[0] is first[2]
    again = chat_template.request_images(Request(parts=(parts[0],)))[0]
    assert again is not first[0] and np.array_equal(np.asarray(again), np.asarray(first[0]))
