"""The tiny point-cloud QA model (support.doubles.tiny_pointqa): the write-up's `PointQAModel`
as a `python:` factory, checked on the dynamic evaluation's own tasks, scenes and prompts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support.evaluations.dynamic.assets import build_assets, read_assets
from support.evaluations.dynamic.prompts import INSTRUCTION, prompt_text, source_prompt_text
from support.evaluations.dynamic.questions import generate
from support.evaluations.dynamic.scenes import build_scene
from support.types import Part, Request

torch = pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[3]

from support.doubles import tiny_pointqa  # noqa: E402  (torch first)
from support.doubles.tiny_pointqa import (  # noqa: E402
    PointQAModel,
    Question,
    answer_letters,
    build_module,
    read_prompt,
    read_request,
    save_checkpoint,
    score_options,
)

QUESTION = "What is the color of the chair?"
OPTIONS = ("blue", "red", "green", "yellow")


@pytest.fixture(scope="module")
def tasks_and_scenes(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[object, np.ndarray]]:
    """16 of the dynamic evaluation's tasks (procedural objects, random layouts) with their
    (N, 6) float64 scenes, as the evaluation sends a points model."""
    assets = read_assets(build_assets(tmp_path_factory.mktemp("objects")))
    tasks = generate(np.random.default_rng(7), assets, 16)
    return [(t, build_scene(t.layout, t.assignment, assets)) for t in tasks]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_checkpoint(tmp_path_factory.mktemp("ckpt") / "checkpoints" / "model.pth")


def ask(points: np.ndarray, question: str, options: tuple[str, ...] | list[str], **kw) -> Request:
    """The request the dynamic evaluation sends a points model: the cloud, then the prompt."""
    return Request(
        parts=(Part.of_points(points), Part.of_text(prompt_text(question, options))), **kw
    )


def cloud(n: int, seed: int, dtype: str = "float64") -> np.ndarray:
    rng = np.random.default_rng(seed)
    xyz = rng.uniform(-3, 3, (n, 3))  # metres, scene frame
    return np.hstack([xyz, rng.uniform(0, 1, (n, 3))]).astype(dtype)


def test_scenes_are_what_the_model_is_built_for(tasks_and_scenes):
    for _, scene in tasks_and_scenes:
        assert scene.dtype == np.float64 and scene.ndim == 2 and scene.shape[1] == 6


def test_the_model_is_tiny_and_building_it_leaves_the_global_rng_alone():
    before = torch.random.get_rng_state()
    module = build_module(seed=0)
    assert torch.equal(before, torch.random.get_rng_state())
    assert 1_000 < sum(p.numel() for p in module.parameters()) < 10_000
    assert not module.training


def test_checkpoint_round_trip_gives_the_in_memory_module_answers(checkpoint, tasks_and_scenes):
    model = PointQAModel(checkpoint=str(checkpoint))
    saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
    for name, tensor in build_module(seed=0).state_dict().items():
        assert torch.equal(saved[name], tensor), name
    requests = [ask(scene, t.question, t.options) for t, scene in tasks_and_scenes]
    in_memory = answer_letters(build_module(seed=0), [read_request(r) for r in requests])
    assert [model.generate(r) for r in requests] == in_memory
    # another seed is another model: the round trip above is not vacuous
    other = answer_letters(build_module(seed=1), [read_request(r) for r in requests])
    assert other != in_memory


def test_the_version_names_the_weights(checkpoint, tmp_path):
    same = save_checkpoint(tmp_path / "same.pth", seed=0)
    other = save_checkpoint(tmp_path / "other.pth", seed=1)
    version = PointQAModel(checkpoint=str(checkpoint)).version
    assert version.startswith(PointQAModel.version + "+")
    assert PointQAModel(checkpoint=str(same)).version == version
    assert PointQAModel(checkpoint=str(other)).version != version


def test_a_missing_checkpoint_is_named(tmp_path):
    missing = tmp_path / "nowhere" / "model.pth"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        PointQAModel(checkpoint=str(missing))


def test_a_cloud_of_three_channels_is_refused(checkpoint):
    model = PointQAModel(checkpoint=str(checkpoint))
    with pytest.raises(ValueError, match=r"\(N, 6\).*got shape \(5, 3\) float64"):
        model.generate(ask(cloud(5, 0)[:, :3], QUESTION, OPTIONS))


def test_a_float16_cloud_is_refused(checkpoint):
    model = PointQAModel(checkpoint=str(checkpoint))
    request = ask(cloud(5, 0), QUESTION, OPTIONS)
    # Part refuses float16 itself; the model checks again what reaches it (a cloud set past Part)
    object.__setattr__(request.parts[0], "points", cloud(5, 0, "float16"))
    with pytest.raises(ValueError, match="float32 or float64 cloud; got float16"):
        model.generate(request)
    assert model.calls == 0


def test_a_request_without_exactly_one_cloud_is_refused(checkpoint):
    model = PointQAModel(checkpoint=str(checkpoint))
    text = Part.of_text(prompt_text(QUESTION, OPTIONS))
    with pytest.raises(ValueError, match=r"exactly one point cloud .* got 0 \(parts: text\)"):
        model.generate(Request(parts=(text,)))
    two = Request(parts=(Part.of_points(cloud(4, 0)), Part.of_points(cloud(4, 1)), text))
    with pytest.raises(ValueError, match=r"got 2 \(parts: points, points, text\)"):
        model.generate(two)
    with pytest.raises(ValueError, match=r"N >= 1; got shape \(0, 6\)"):
        model.generate(ask(cloud(0, 0), QUESTION, OPTIONS))
    assert model.calls == 0 and model.clouds_seen == []


def test_an_unreadable_prompt_names_what_is_missing():
    with pytest.raises(ValueError, match="no option lines"):
        read_prompt(f"{QUESTION}\n\n{INSTRUCTION}")
    with pytest.raises(ValueError, match="no question"):
        read_prompt("(A) blue\n(B) red")
    with pytest.raises(ValueError, match=r"not A, B, \.\.\. in order"):
        read_prompt(f"{QUESTION}\n(A) blue\n(C) red")


def test_both_profiles_prompts_are_read_back(tasks_and_scenes):
    for task, _ in tasks_and_scenes:
        for render in (prompt_text, source_prompt_text):
            assert read_prompt(render(task.question, task.options)) == (
                task.question,
                tuple(task.options),
            )


def test_batch_equals_one_by_one(checkpoint, tasks_and_scenes):
    requests = [ask(scene, t.question, t.options) for t, scene in tasks_and_scenes[:8]]
    # other lengths, float32, and 2 to 5 options: padding must not change a letter
    requests += [
        ask(cloud(3 + 40 * k, k, "float32"), f"Question {k}?", [f"opt {k} {i}" for i in range(k)])
        for k in range(2, 6)
    ]
    one = PointQAModel(checkpoint=str(checkpoint))
    alone = [one.generate(r) for r in requests]
    batch = PointQAModel(checkpoint=str(checkpoint))
    together = batch.generate_batch(requests[:8]) + batch.generate_batch(requests[8:])
    assert together == alone
    assert (one.calls, batch.calls) == (len(requests), 2)
    assert batch.clouds_seen == one.clouds_seen
    assert batch.clouds_seen[-1] == ((203, 6), "float32")
    assert batch.clouds_seen[0] == (tasks_and_scenes[0][1].shape, "float64")


def test_padding_leaves_each_question_its_own_scores(tasks_and_scenes):
    """Scores, not only letters: a short cloud padded beside long ones, and 2 options beside 5."""
    module = build_module(seed=0)
    questions = [read_request(ask(scene, t.question, t.options)) for t, scene in tasks_and_scenes]
    questions += [
        read_request(ask(cloud(1, 3, "float32"), QUESTION, OPTIONS[:2])),
        read_request(ask(cloud(7, 4), QUESTION, [*OPTIONS, "purple"])),
    ]
    together = score_options(module, questions)
    assert together.shape == (len(questions), 5)
    for row, question in zip(together, questions, strict=True):
        alone = score_options(module, [question])[0]
        m = len(question.options)
        assert torch.allclose(row[:m], alone, rtol=1e-5, atol=1e-6)
        assert torch.isfinite(alone).all()
        assert torch.isneginf(row[m:]).all()


def test_a_bad_request_in_a_batch_is_named_by_index(checkpoint):
    model = PointQAModel(checkpoint=str(checkpoint))
    good = ask(cloud(5, 0), QUESTION, OPTIONS)
    bad = ask(cloud(5, 0)[:, :3], QUESTION, OPTIONS)
    with pytest.raises(ValueError, match=r"request 1 of 2: .*\(5, 3\)"):
        model.generate_batch([good, bad])


def test_answers_are_offered_letters(checkpoint, tasks_and_scenes):
    model = PointQAModel(checkpoint=str(checkpoint))
    for k in range(1, 7):
        options = [f"choice {i}" for i in range(k)]
        for seed in range(4):
            assert model.generate(ask(cloud(50, seed), QUESTION, options)) in "ABCDEF"[:k]
    for task, scene in tasks_and_scenes:
        assert model.generate(ask(scene, task.question, task.options)) in "ABCD"


def test_n_samples_are_n_letters(checkpoint):
    model = PointQAModel(checkpoint=str(checkpoint))
    letter = model.generate(ask(cloud(9, 0), QUESTION, OPTIONS))
    assert model.generate(ask(cloud(9, 0), QUESTION, OPTIONS, n=3)) == [letter] * 3


def test_the_cloud_changes_the_answer(checkpoint, tasks_and_scenes):
    """Each task's text asked about all 16 scenes: for most texts the scene changes the letter
    (a model blind to the cloud would give one letter a text), and asking again repeats it."""
    model = PointQAModel(checkpoint=str(checkpoint))
    varied = 0
    for task, _ in tasks_and_scenes:
        requests = [ask(scene, task.question, task.options) for _, scene in tasks_and_scenes]
        letters = model.generate_batch(requests)
        assert model.generate_batch(requests) == letters  # deterministic
        varied += len(set(letters)) > 1
    assert varied >= len(tasks_and_scenes) // 2, varied


def test_torch_threads_are_left_alone(checkpoint):
    threads = torch.get_num_threads()
    PointQAModel(checkpoint=str(checkpoint)).generate(ask(cloud(9, 0), QUESTION, OPTIONS))
    assert torch.get_num_threads() == threads


def test_factory_traits():
    assert PointQAModel.modalities == ("points", "text")
    assert PointQAModel.max_batch == 8
    assert PointQAModel.version == tiny_pointqa.VERSION
    assert isinstance(read_request(ask(cloud(2, 0), QUESTION, OPTIONS)), Question)


def test_without_torch_the_model_and_its_checkpoint_command_say_what_to_install(tmp_path):
    """No raw ModuleNotFoundError: `python -m support.doubles.tiny_pointqa` exits with what to
    install, and `--model python:support.doubles.tiny_pointqa:...` is a usage error saying it."""
    import subprocess
    import sys

    from support.doubles.tiny_pointqa import NEEDS_TORCH

    no_torch = "import sys; sys.modules['torch'] = None; "
    made = subprocess.run(
        [sys.executable, "-c", no_torch + "import runpy; runpy.run_module("
         "'support.doubles.tiny_pointqa', run_name='__main__')", str(tmp_path / "m.pth")],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert made.returncode == 1 and made.stderr.strip() == NEEDS_TORCH, made.stderr
    assert "Traceback" not in made.stderr and not (tmp_path / "m.pth").exists()
    checked = subprocess.run(
        [sys.executable, "-c", no_torch + "from support.backends.scripted import load_script\n"
         "try:\n load_script('python:x', 'support.doubles.tiny_pointqa:PointQAModel')\n"
         "except ValueError as e:\n print(e)"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert NEEDS_TORCH in checked.stdout, checked.stdout + checked.stderr
