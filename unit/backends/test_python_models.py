"""Point clouds in requests, models' modalities, and `python:<module>:<Factory>` models.

The factories here are real modules written to tmp_path and imported by name, as a user's are;
each request goes through the engine's ModelClient (cache, gate, micro-batcher) like every
backend's.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from support.backends import python_model
from support.backends.base import BackendBuildError, BackendError, BackendOptions
from support.backends.registry import create_backend, model_spec
from support.backends.scripted import ScriptedBackend
from support.client.engine import ModelClient
from support.client.response_cache import ResponseCache, cache_key
from support.types import Part, Request

CLOUD = np.arange(60, dtype=np.float64).reshape(10, 6) / 60.0


def cloud_request(points: np.ndarray = CLOUD, text: str = "Which?") -> Request:
    return Request(parts=(Part.of_points(points), Part.of_text(text)))


# -- the point-cloud part ------------------------------------------------------------------------


def test_a_cloud_part_is_a_read_only_copy_keyed_by_content():
    source = CLOUD.copy()
    part = Part.of_points(source)
    source[0, 0] = 99.0  # the caller's array changing later changes nothing sent
    assert part.points[0, 0] == 0.0 and not part.points.flags.writeable
    assert part.kind == "points" and not part.is_image and part.text is None
    same = Part.of_points(CLOUD.copy())
    assert part == same and hash(part) == hash(same)
    assert part.canonical() == {
        "points_sha256": same.points_sha256,
        "shape": [10, 6],
        "dtype": "float64",
        "frame": "y-up",
    }
    moved = CLOUD.copy()
    moved[3, 1] += 1e-9  # one coordinate a nanometre off is another cloud
    assert Part.of_points(moved).points_sha256 != part.points_sha256
    # the dtype is content: the same values in float32 are another request
    assert Part.of_points(CLOUD.astype(np.float32)).points_sha256 != part.points_sha256
    # byte order is not: a big-endian copy of the same values is the same cloud
    assert Part.of_points(CLOUD.astype(">f8")).points_sha256 == part.points_sha256


@pytest.mark.parametrize(
    ("points", "message"),
    [
        (CLOUD.astype(np.float16), "float32 or float64"),
        (np.zeros((4, 4)), r"\(N, 3\) or \(N, 6\)"),
        (np.zeros(6), r"\(N, 3\) or \(N, 6\)"),
        (np.array([[0.0, np.nan, 0.0]]), "not finite"),
        (np.zeros((3, 3), dtype=np.int64), "float32 or float64"),
    ],
)
def test_what_cannot_be_a_cloud_is_refused_saying_why(points, message):
    with pytest.raises(ValueError, match=message):
        Part.of_points(points)


def test_a_part_holds_exactly_one_thing():
    with pytest.raises(ValueError, match="exactly one"):
        Part(text="a", points=CLOUD)


def test_a_request_names_its_modalities_and_the_cache_keys_clouds_by_content():
    request = cloud_request()
    assert request.modalities == {"text", "points"} and request.clouds[0].kind == "points"
    assert Request(parts=(Part.of_text("x"),)).modalities == {"text"}
    identity = {"provider": "python", "model": "m"}
    other = CLOUD.copy()
    other[0, 0] = 0.5
    assert cache_key(identity, request) == cache_key(identity, cloud_request(CLOUD.copy()))
    assert cache_key(identity, request) != cache_key(identity, cloud_request(other))
    assert str(CLOUD[1, 1]) not in str(request.canonical())  # values never enter the JSON


# -- the gate: a model is handed only what it reads ----------------------------------------------


def test_a_request_holding_what_the_model_cannot_read_fails_alone():
    backend = ScriptedBackend(lambda r: "seen")  # a VLM stand-in: text and images
    client = ModelClient(backend, cache=None, concurrency=4)

    async def main():
        return await asyncio.gather(
            client.generate(cloud_request()),
            client.generate(Request(parts=(Part.of_text("fine"),))),
            return_exceptions=True,
        )

    refused, fine = asyncio.run(main())
    assert isinstance(refused, BackendError) and "holds points" in str(refused)
    assert fine.text == "seen" and backend.calls == 1  # the refused one never reached it
    assert client.requests_with == {"points": 1, "text": 2}


# -- python: models --------------------------------------------------------------------------------


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """write(source) -> the name of a fresh module holding `source`, importable by name."""
    monkeypatch.syspath_prepend(str(tmp_path))
    made: list[str] = []

    def write(source: str) -> str:
        name = f"user_models_{len(made)}_{abs(hash(str(tmp_path))) % 10**8}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        importlib.invalidate_caches()
        made.append(name)
        return name

    yield write
    for name in made:
        sys.modules.pop(name, None)
    python_model.factory_of.cache_clear()


POINT_MODEL = """
    import asyncio

    class Reader:
        modalities = ("points",)
        version = "r1"
        max_batch = 4

        def __init__(self, checkpoint, answer="A"):
            self.checkpoint = open(checkpoint).read().strip()
            self.answer = answer
            self.single, self.batches = [], []

        def generate(self, request):
            (cloud,) = request.clouds
            if request.parts[-1].text == "boom":
                raise RuntimeError("cannot read this one")
            self.single.append(cloud.points.shape)
            return f"{self.answer}:{self.checkpoint}:{cloud.points.shape[0]}"

        def generate_batch(self, requests):
            if any(r.parts[-1].text == "boom" for r in requests):
                raise RuntimeError("a bad request in the batch")
            self.batches.append(len(requests))
            return [f"{self.answer}:{self.checkpoint}:{r.clouds[0].points.shape[0]}"
                    for r in requests]
"""


def opts_with(args: dict[str, str], cache_dir: Path | None = None) -> BackendOptions:
    extra = (("model_args", tuple(args.items())),)
    return BackendOptions(extra=extra, cache_dir=str(cache_dir) if cache_dir else None)


def test_a_factorys_traits_are_read_without_building_it(user_module):
    module = user_module(POINT_MODEL)
    spec = model_spec(f"python:{module}:Reader")
    assert (spec.kind, spec.provider) == ("local-cpu", "python")
    assert spec.modalities == {"text", "points"}
    assert spec.traits["modalities"] == "text,points" and spec.prefill == "request"


def test_a_python_model_answers_through_the_engine_batched_and_cached(user_module, tmp_path):
    module = user_module(POINT_MODEL)
    weights = tmp_path / "model.pth"
    weights.write_text("w1")
    name = f"python:{module}:Reader"
    backend = create_backend(name, opts_with({"checkpoint": str(weights), "answer": "B"}))
    assert backend.identity["args"] == {"answer": "B", "checkpoint": str(weights)}
    assert backend.identity["version"] == "r1" and backend.max_batch == 4
    cache = ResponseCache(tmp_path / "c.sqlite")
    client = ModelClient(backend, cache=cache, concurrency=1)
    requests = [cloud_request(CLOUD[: 3 + i], text=f"q{i}") for i in range(6)]

    async def main():
        return await asyncio.gather(*(client.generate(r) for r in requests))

    answers = [r.text for r in asyncio.run(main())]
    assert answers == [f"B:w1:{3 + i}" for i in range(6)]
    assert sum(backend.model.batches) == 6 and max(backend.model.batches) <= 4
    asyncio.run(main())  # the same requests again: all from the cache
    assert sum(backend.model.batches) == 6 and client.cache_hits == 6


def test_an_argument_naming_a_file_keys_the_cache_by_its_content(user_module, tmp_path):
    module = user_module(POINT_MODEL)
    weights = tmp_path / "model.pth"
    weights.write_text("w1")
    name = f"python:{module}:Reader"
    first = create_backend(name, opts_with({"checkpoint": str(weights)}, tmp_path / "cache"))
    weights.write_text("w2 retrained")  # a new checkpoint at the same path: a new model
    second = create_backend(name, opts_with({"checkpoint": str(weights)}, tmp_path / "cache"))
    assert first.identity["files"]["checkpoint"] != second.identity["files"]["checkpoint"]
    request = cloud_request()
    assert cache_key(first.identity, request) != cache_key(second.identity, request)
    assert (tmp_path / "cache" / "file-hashes.json").is_file()  # memoised by size and mtime


@pytest.fixture
def reader(user_module, tmp_path):
    """The point-cloud Reader built with checkpoint "w" (w.pth), and its ModelClient."""
    module = user_module(POINT_MODEL)
    weights = tmp_path / "w.pth"
    weights.write_text("w")
    backend = create_backend(f"python:{module}:Reader", opts_with({"checkpoint": str(weights)}))
    return backend, ModelClient(backend, cache=None, concurrency=1)


def test_one_failing_request_fails_alone_in_a_batch(reader):
    _, client = reader
    texts = ["q0", "boom", "q2", "q3"]

    async def main():
        return await asyncio.gather(
            *(client.generate(cloud_request(text=t)) for t in texts), return_exceptions=True
        )

    out = asyncio.run(main())
    assert isinstance(out[1], BackendError) and "cannot read this one" in str(out[1])
    assert [o.text for i, o in enumerate(out) if i != 1] == ["A:w:10"] * 3


def test_a_python_model_is_refused_what_it_does_not_read(reader):
    backend, client = reader
    image = Part(image=b"\x89PNG fake", mime="image/png")
    with pytest.raises(BackendError, match="holds image"):
        asyncio.run(client.generate(Request(parts=(image, Part.of_text("q")))))
    assert backend.model.single == [] and backend.model.batches == []


def test_a_factory_function_with_attributes_an_async_model_and_the_prefill(user_module):
    module = user_module(
        """
        class Echo:
            async def generate(self, request):
                return [request.parts[-1].text + "|" + str(request.prefill)] * request.n

        def make():
            return Echo()

        make.prefill = "unsupported"
        make.max_images = 1
        make.concurrency = 3
        """
    )
    name = f"python:{module}:make"
    assert model_spec(name).prefill == "unsupported"
    backend = create_backend(name, opts_with({}))
    assert backend.default_concurrency == 3
    client = ModelClient(backend, cache=None, concurrency=backend.default_concurrency)
    answer = asyncio.run(
        client.generate(Request(parts=(Part.of_text("q"),), prefill="The answer is", n=2))
    )
    # the prefill reached it as the continuation instruction, not as a prefill
    assert answer.texts[0].endswith("|None") and "The answer is" in answer.texts[0]
    assert len(answer.texts) == 2
    two = Request(parts=(Part(image=b"a"), Part(image=b"b"), Part.of_text("q")))
    with pytest.raises(BackendError, match="2 images in one request; it takes 1"):
        asyncio.run(client.generate(two))


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("class M:\n    modalities = ('sound',)\n", r"M\.modalities = \('sound',\)"),
        ("class M:\n    max_batch = 0\n", r"M\.max_batch = 0: expected a whole number"),
        ("class M:\n    prefill = 'native'\n", r"M\.prefill = 'native'"),
        ("class M:\n    version = 3\n", r"M\.version = 3: expected a text"),
        ("M = 3\n", "is a int, not a function"),
    ],
)
def test_bad_traits_are_usage_errors_naming_the_attribute(user_module, source, message):
    module = user_module(source)
    with pytest.raises(ValueError, match=message):
        model_spec(f"python:{module}:M")


def test_bad_names_say_what_is_wrong(user_module):
    module = user_module("class M:\n    pass\n")
    with pytest.raises(ValueError, match="expected python:<module>:<Factory>"):
        model_spec("python:no_colon_here")
    with pytest.raises(ValueError, match="cannot import module 'no_such_module_xyz'"):
        model_spec("python:no_such_module_xyz:M")
    with pytest.raises(ValueError, match="has no 'Missing'"):
        model_spec(f"python:{module}:Missing")


def test_a_factory_that_fails_or_gives_no_model_is_a_build_error(user_module):
    module = user_module(
        """
        class Broken:
            def __init__(self, checkpoint):
                raise FileNotFoundError(checkpoint)

        class Mute:
            pass
        """
    )
    with pytest.raises(BackendBuildError, match=r"Broken\(checkpoint='x.pth'\) raised File"):
        create_backend(f"python:{module}:Broken", opts_with({"checkpoint": "x.pth"}))
    with pytest.raises(BackendBuildError, match=r"Broken.*raised TypeError"):
        create_backend(f"python:{module}:Broken", opts_with({}))
    with pytest.raises(BackendBuildError, match="without a generate method"):
        create_backend(f"python:{module}:Mute", opts_with({}))


def test_an_answer_of_the_wrong_shape_is_that_requests_error(user_module):
    module = user_module(
        """
        class Odd:
            def generate(self, request):
                return {"a": 1} if request.parts[-1].text == "odd" else ["x", "y"]
        """
    )
    backend = create_backend(f"python:{module}:Odd", opts_with({}))
    client = ModelClient(backend, cache=None, concurrency=1)
    with pytest.raises(BackendError, match=r"generate returned \{'a': 1\}; expected a str"):
        asyncio.run(client.generate(Request(parts=(Part.of_text("odd"),))))
    with pytest.raises(BackendError, match="a list of 1 str"):  # two texts for one sample
        asyncio.run(client.generate(Request(parts=(Part.of_text("q"),))))
    assert asyncio.run(client.generate(Request(parts=(Part.of_text("q"),), n=2))).texts == (
        "x",
        "y",
    )


@pytest.mark.parametrize(
    ("values", "models", "message"),
    [
        (["checkpoint"], ["python:m:F"], "expected KEY=VALUE"),
        (["1x=2"], ["python:m:F"], "expected KEY=VALUE"),
        (["a=1", "a=2"], ["python:m:F"], "a is given twice"),
        (["a=1"], ["oracle"], "no python:<module>:<Factory> model"),
    ],
)
def test_model_args_are_checked_at_configure(values, models, message):
    from fixtures.model_options import parse_model_args

    with pytest.raises(pytest.UsageError, match=message):
        parse_model_args(values, models)
    assert parse_model_args(["a=1", "b=x=y"], ["python:m:F"]) == (("a", "1"), ("b", "x=y"))


VIDEO_MODEL = """
    class Watcher:
        modalities = ("video",)

        def generate(self, request):
            (part,) = [p for p in request.parts if p.video is not None]
            clip = part.video
            return f"{len(clip.frames)} frames at {','.join(f'{t:g}' for t in clip.timestamps)}"
"""


def test_a_python_model_that_declares_video_is_sent_the_clip(user_module, tmp_path):
    """The video part reaches a `python:` model that declares the modality, with its frames and
    timestamps; a model that does not declare it refuses the request, naming what it reads."""
    from support.evaluations.surgvqa.video import write_video
    from support.videos import read_clip

    path = tmp_path / "clip.mp4"
    write_video(path, [np.full((32, 48, 3), 40 * k, np.uint8) for k in range(4)], fps=1)
    request = Request(parts=(Part.of_text("What happens?"), Part.of_video(read_clip(path, fps=1))))
    module = user_module(VIDEO_MODEL)
    spec = model_spec(f"python:{module}:Watcher")
    assert spec.modalities == {"text", "video"} and spec.traits["modalities"] == "text,video"
    watcher = ModelClient(
        create_backend(f"python:{module}:Watcher", opts_with({})), cache=None, concurrency=1
    )
    assert asyncio.run(watcher.generate(request)).text == "4 frames at 0,1,2,3"
    weights = tmp_path / "model.pth"
    weights.write_text("w1")
    points = create_backend(
        f"python:{user_module(POINT_MODEL)}:Reader", opts_with({"checkpoint": str(weights)})
    )
    reader = ModelClient(points, cache=None, concurrency=1)
    with pytest.raises(BackendError, match="reads points, text; this request holds video"):
        asyncio.run(reader.generate(request))
