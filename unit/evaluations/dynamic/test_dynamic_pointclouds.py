"""The dynamic evaluation for the models it was written for: a point-cloud model of the user's
own code, through `--model python:...`, end to end (`pytest evals/dynamic` in a subprocess).

The model is the suite's tiny PyTorch point-cloud QA model (support/doubles/tiny_pointqa.py),
loaded from a `.pth` state dict with `torch.load(weights_only=True)`; it asserts that each
request holds one (N, 6) float32/float64 cloud, so a cloud that did not reach it, or arrived
in another shape, is an error outcome. Beside it: a VLM (the suite's tiny LLaVA on
transformers, which reads the rendered picture), and a model reading both.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.doubles.tiny_pointqa import save_checkpoint

MODEL = "python:support.doubles.tiny_pointqa:PointQAModel"
# every test here runs the suite in a subprocess; one worker runs this module, so its module
# fixtures are built once, not once a worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("dynamic_pointclouds")]


def rows(results: Path) -> list[dict]:
    (run,) = (results / "dynamic").iterdir()
    return [json.loads(line) for line in (run / "raw_results.jsonl").read_text().splitlines()]


def manifest(results: Path) -> dict:
    (run,) = (results / "dynamic").iterdir()
    return json.loads((run / "manifest.json").read_text())


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return save_checkpoint(tmp_path_factory.mktemp("checkpoints") / "model.pth")


def test_a_point_cloud_model_of_your_own_runs_the_quick_search_under_xdist(run_suite, checkpoint):
    result, results = run_suite(
        "dynamic", "-m", "quick", "-n", "2", "--model", MODEL,
        "--model-arg", f"checkpoint={checkpoint}",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]
    found = rows(results)
    assert len(found) == 40  # 2 searches x 2 quick rounds x 10 tasks
    assert {o["status"] for o in found} <= {"correct", "wrong"}  # no error, no unparsable
    assert all(o["extra"]["sent"] == ["points"] for o in found)
    assert all(len(o["extra"]["cloud_sha256"]) == 64 for o in found)
    entry = manifest(results)["models"][MODEL]
    assert entry["traits"]["modalities"] == "text,points"
    assert entry["requests_with"]["points"] == entry["requests_with"]["text"] > 0
    assert "image" not in entry["requests_with"]
    assert entry["identity"]["files"]["checkpoint"]  # the weights keyed by content


def test_the_full_random_search_with_the_point_cloud_model(run_suite, checkpoint):
    result, results = run_suite(
        "dynamic", "--dynamic-strategy", "random", "--model", MODEL,
        "--model-arg", f"checkpoint={checkpoint}",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]
    found = rows(results)
    assert len(found) == 100 and {o["status"] for o in found} <= {"correct", "wrong"}
    wrong = sum(o["status"] == "wrong" for o in found)
    assert 0 < wrong < 100  # a real model: some right, some wrong
    (run,) = (results / "dynamic").iterdir()
    folder = run / "python_support.doubles.tiny_pointqa_PointQAModel" / "random"
    info = json.loads((folder / "results.json").read_text())
    assert info["stats"]["errors"] == wrong
    assert len(list((folder / "hard_data" / "pcd").glob("*.npy"))) == wrong


@pytest.fixture(scope="module")
def vlm(shared_cache) -> str:
    """The tiny LLaVA as an `hf:` model. Built in a module fixture, before any test's pytester
    snapshot of sys.modules: pytester's teardown drops the modules a test imported, and torch's
    distributed modules, imported again, register their operator library twice."""
    from support.doubles.tiny_vlm import ensure_tiny_vlm

    return f"hf:{ensure_tiny_vlm(shared_cache)}"


BOTH = """
    from support.doubles.tiny_pointqa import PointQAModel


    class BothReader(PointQAModel):
        modalities = ("image", "points")

        def generate(self, request):
            (image,) = request.images
            assert image.mime == "image/png" and image.image.startswith(b"\\x89PNG"), image.mime
            assert [p.kind for p in request.parts] == ["image", "points", "text"]
            return super().generate(request)

        def generate_batch(self, requests):
            return [self.generate(r) for r in requests]
"""


TEXT_ONLY = """
    class Reader:
        modalities = ("text",)

        def __init__(self, **model_args):  # the run's --model-arg, meant for the other model
            pass

        def generate(self, request):
            return "A"
"""


def test_a_vlm_the_point_cloud_model_and_one_reading_both_side_by_side(
    run_suite, checkpoint, vlm, tmp_path, monkeypatch
):
    """Three models in one quick random search: the VLM is sent the picture, the point-cloud
    model the cloud, and a model reading both (BOTH) the picture and the cloud, in that order."""
    (tmp_path / "both_reader.py").write_text(textwrap.dedent(BOTH))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    both = "python:both_reader:BothReader"
    result, results = run_suite(
        "dynamic", "-m", "quick", "--dynamic-strategy", "random", "--model", vlm,
        "--model", MODEL, "--model", both, "--model-arg", f"checkpoint={checkpoint}",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]
    found = rows(results)
    by_model = {m: [o for o in found if o["model"] == m] for m in (vlm, MODEL, both)}
    assert [len(v) for v in by_model.values()] == [20, 20, 20]
    assert len(found) == 60
    assert all(o["extra"]["sent"] == ["image"] for o in by_model[vlm])
    assert all("cloud_sha256" not in o["extra"] for o in by_model[vlm])
    assert all(o["extra"]["sent"] == ["points"] for o in by_model[MODEL])
    assert all(o["extra"]["sent"] == ["image", "points"] for o in by_model[both])
    assert not [o for o in found if o["status"] == "error"]
    # the same tasks, each model shown the scene its own way
    assert [o["extra"]["task_key"] for o in by_model[vlm]] == [
        o["extra"]["task_key"] for o in by_model[MODEL]
    ]
    models = manifest(results)["models"]
    assert set(models[vlm]["requests_with"]) == {"image", "text"}
    assert set(models[MODEL]["requests_with"]) == {"points", "text"}
    assert models[both]["requests_with"] == {"image": 20, "points": 20, "text": 20}


def test_a_checkpoint_that_does_not_load_fails_and_a_text_model_is_skipped_saying_so(
    run_suite, tmp_path, monkeypatch
):
    """One quick random search with two models: the point-cloud model on a checkpoint that does
    not exist fails its cases naming it (never skipped); a model reading neither pictures nor
    clouds (TEXT_ONLY, imported from the working folder) has its tests skipped, saying why."""
    (tmp_path / "text_reader.py").write_text(textwrap.dedent(TEXT_ONLY))
    monkeypatch.chdir(tmp_path)  # the working folder is on the factory's import path
    missing = tmp_path / "nowhere" / "model.pth"
    result, _ = run_suite(
        "dynamic", "-m", "quick", "--dynamic-strategy", "random", "--model", MODEL,
        "--model", "python:text_reader:Reader", "--model-arg", f"checkpoint={missing}",
    )  # fmt: skip
    out = result.stdout.str()
    assert result.ret == 1, out[-3000:]  # failed, never skipped
    assert f"PointQAModel(checkpoint='{missing}') raised FileNotFoundError" in out
    # both skips are the text model's two quick rounds, with the reason
    assert "skipped 2: python:text_reader:Reader reads neither images nor point clouds" in out, out[
        -3000:
    ]
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped") == 2, outcomes
    assert outcomes.get("errors", 0) + outcomes.get("failed", 0) == 2, outcomes  # the other two
    assert "passed" not in outcomes, outcomes
