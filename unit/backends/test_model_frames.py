"""Boxes and points in the model's own frame (support/backends/model_frames.py).

1. `input_size`: the size a Qwen processor resizes an image to, against golden values derived by
   hand (below), with the tiny checkpoints' limits and with the hub's, and against the processor
   itself (its `image_grid_thw` on a blank image of that size).
2. An oracle in each family's convention on the family's own resize: Qwen2.5-VL answers pixels
   of the resized image, Qwen3-VL 0-1000. Run through the real surgvqa and pointing scoring paths
   (the evaluations' `evaluate`, with the tiny checkpoints' ModelSpecs), its answers score mAP 1.0
   and hit every organ when read in the model's frame, and less in the prompt's pixels.

qwen-vl-utils (the Qwen families' reference smart_resize) is not a test dependency: its
vision_process.py imports torchvision at import, which this environment lacks. Its 0.0.14
smart_resize, run once by hand on every size below, gives the same sizes except 300x7 (noted).
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

from support.backends.model_frames import input_size, resize_rule
from support.backends.registry import ModelSpec, model_spec
from support.types import Request, Response

# Golden sizes, (width, height) px -> (width, height) px. smart_resize: round each side to a
# multiple of factor = patch_size * merge_size (Python's round: half to even); if the area is over
# max_pixels, beta = sqrt(w * h / max_pixels) and each side is floor(side / beta / factor) * factor;
# if under min_pixels, beta = sqrt(min_pixels / (w * h)) and ceil(side * beta / factor) * factor.
#
# Qwen2.5-VL, hub limits (Qwen/Qwen2.5-VL-7B-Instruct: 3136 .. 12845056 px, patch 14, merge 2 ->
# factor 28):
#   640x512:   640/28 = 22.86 -> 23 -> 644; 512/28 = 18.29 -> 18 -> 504; 324576 px in bounds
#   768x768:   768/28 = 27.43 -> 27 -> 756 each side; 571536 px in bounds
#   1280x1024: 45.71 -> 46 -> 1288; 36.57 -> 37 -> 1036
#   854x480:   854/28 = 30.5 -> 30 (half to even) -> 840; 480/28 = 17.14 -> 17 -> 476
#   1001x333:  35.75 -> 36 -> 1008; 11.89 -> 12 -> 336
#   37x53:     28 x 56 = 1568 < 3136: beta = sqrt(3136 / 1961) = 1.2646; ceil(1.67) = 2 -> 56,
#              ceil(2.39) = 3 -> 84
#   4000x4000: 4004^2 > 12845056: beta = sqrt(16e6 / 12845056) = 1.1160; floor(128.0) -> 3584
#   300x7:     7/28 -> 0, so 308 x 0 < 3136: beta = sqrt(3136 / 2100) = 1.2220; ceil(13.09) = 14
#              -> 392, ceil(0.31) = 1 -> 28. (qwen-vl-utils keeps a side of at least 28 before the
#              bounds: 308x28. The model sees transformers' 392x28.)
QWEN25_HUB = {
    (640, 512): (644, 504),
    (768, 768): (756, 756),
    (1280, 1024): (1288, 1036),
    (854, 480): (840, 476),
    (1001, 333): (1008, 336),
    (37, 53): (56, 84),
    (4000, 4000): (3584, 3584),
    (300, 7): (392, 28),
}
# the tiny Qwen2.5-VL (support/doubles/tiny_families.py: 3136 .. 50176 px, factor 28):
#   640x512:   644 x 504 > 50176: beta = sqrt(327680 / 50176) = 2.5556; floor(8.94) = 8 -> 224,
#              floor(7.16) = 7 -> 196
#   768x768:   beta = sqrt(589824 / 50176) = 768 / 224; 768 / beta / 28 is 8 exactly, 7.999... in
#              floating point: floor -> 7 -> 196 (both libraries compute it so)
#   1280x1024: the aspect of 640x512: 224 x 196
#   854x480:   beta = sqrt(409920 / 50176) = 2.8583; floor(10.67) = 10 -> 280, floor(5.997) = 5
#              -> 140
#   1001x333:  beta = 2.5775; floor(13.87) = 13 -> 364, floor(4.61) = 4 -> 112
#   37x53:     as the hub's (the lower bound is the same): 56 x 84
QWEN25_TINY = {
    (640, 512): (224, 196),
    (768, 768): (196, 196),
    (1280, 1024): (224, 196),
    (854, 480): (280, 140),
    (1001, 333): (364, 112),
    (37, 53): (56, 84),
}
# Qwen3-VL, hub limits (Qwen/Qwen3-VL-8B-Instruct: 65536 .. 16777216 px, patch 16, merge 2 ->
# factor 32): 640x512 and 768x768 are multiples of 32 in bounds: unchanged; 854x480: 26.69 -> 27
# -> 864, 15 -> 480; 37x53: 32 x 64 < 65536: beta = sqrt(65536 / 1961) = 5.7809; ceil(6.68) = 7
# -> 224, ceil(9.57) = 10 -> 320.
QWEN3_HUB = {
    (640, 512): (640, 512),
    (768, 768): (768, 768),
    (1280, 1024): (1280, 1024),
    (854, 480): (864, 480),
    (37, 53): (224, 320),
}
# the tiny Qwen3-VL (4096 .. 65536 px, factor 32): 640x512: beta = sqrt(5) = 2.2361; floor(8.94)
# = 8 -> 256, floor(7.16) = 7 -> 224; 768x768: beta = 3, 768 / 3 / 32 = 8 -> 256.
QWEN3_TINY = {
    (640, 512): (256, 224),
    (768, 768): (256, 256),
    (1280, 1024): (256, 224),
}
NOT_HERE = "example-org/not-a-downloaded-model"  # a hub id with no config here: hub defaults


@pytest.fixture(scope="module")
def tiny(shared_cache: Path) -> dict[str, Path]:
    from support.doubles.tiny_families import ensure_family

    return {f: ensure_family(shared_cache, f) for f in ("qwen2_5_vl", "qwen3_vl")}


# ---- 1. sizes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "family, golden",
    [("qwen2_5_vl", QWEN25_HUB), ("qwen2_vl", QWEN25_HUB), ("qwen3_vl", QWEN3_HUB)],
)
def test_hub_defaults(family, golden):
    rule = resize_rule(NOT_HERE, family)
    assert rule is not None and rule.source.startswith("hub default")
    for (w, h), want in golden.items():
        assert input_size(NOT_HERE, family, w, h) == want, (family, w, h)


@pytest.mark.parametrize("family, golden", [("qwen2_5_vl", QWEN25_TINY), ("qwen3_vl", QWEN3_TINY)])
def test_a_folders_own_processor_limits(tiny, family, golden):
    folder = tiny[family]
    rule = resize_rule(str(folder), family)
    assert rule is not None and rule.source == str(folder / "preprocessor_config.json")
    spec = model_spec(f"hf:{folder}")
    assert spec.kind == "local-cpu" and spec.family is not None and spec.family.name == family
    for (w, h), want in golden.items():
        assert input_size(spec.model_id, spec.family, w, h) == want, (family, w, h)


@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_the_size_is_the_processors_own_resize(tiny, family):
    """The processor itself, on a blank image: its grid of patches times the patch size."""
    from transformers import Qwen2VLImageProcessorPil

    processor = Qwen2VLImageProcessorPil.from_pretrained(str(tiny[family]))
    golden = QWEN25_TINY if family == "qwen2_5_vl" else QWEN3_TINY
    for w, h in golden:
        out = processor(images=[Image.new("RGB", (w, h))], return_tensors="np")
        _, grid_h, grid_w = (int(v) for v in out["image_grid_thw"][0])
        seen = (grid_w * processor.patch_size, grid_h * processor.patch_size)
        assert input_size(str(tiny[family]), family, w, h) == seen


def test_families_without_a_resize_keep_the_size():
    for family in ("llava_onevision", "mllama", "llava", None):
        assert input_size(NOT_HERE, family, 640, 512) == (640, 512)
        assert resize_rule(NOT_HERE, family) is None


def test_a_folder_without_a_readable_processor_config_takes_the_hub_defaults(tmp_path):
    missing, broken = tmp_path / "missing", tmp_path / "broken"
    for folder in (missing, broken):
        folder.mkdir()
        (folder / "config.json").write_text("{}")
    (broken / "preprocessor_config.json").write_text("not json")
    for folder in (missing, broken):
        assert input_size(str(folder), "qwen2_5_vl", 640, 512) == (644, 504)
        assert resize_rule(str(folder), "qwen2_5_vl").source.startswith("hub default")


def test_a_config_the_processor_refuses_is_named(tmp_path):
    (tmp_path / "preprocessor_config.json").write_text('{"patch_size": "fourteen"}')
    with pytest.raises(ValueError, match=r"preprocessor_config\.json"):
        input_size(str(tmp_path), "qwen2_5_vl", 640, 512)


def test_legacy_min_max_pixels_keys_are_read_as_the_processor_reads_them(tmp_path):
    # Qwen2.5-VL's hub file names min_pixels / max_pixels and no `size`: the processor class
    # turns them into size; here a max of 28 * 28 * 16 pixels (at most 16 tokens an image)
    config = {"min_pixels": 3136, "max_pixels": 12544, "patch_size": 14, "merge_size": 2}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(config))
    # 640x512: beta = sqrt(327680 / 12544) = 5.111; floor(4.47) = 4 -> 112, floor(3.58) = 3 -> 84
    assert input_size(str(tmp_path), "qwen2_5_vl", 640, 512) == (112, 84)


# ---- 2. the oracle in the family's frame ---------------------------------------------------------


@dataclass(frozen=True)
class Convention:
    """How a family writes coordinates: "resized" pixels of `seen` px, or "norm1000"."""

    name: str
    seen: tuple[int, int] | None = None  # (width, height) px the model saw, for "resized"

    def x(self, v: float, width: int) -> float:
        return v * (self.seen[0] if self.seen else 1000) / width

    def y(self, v: float, height: int) -> float:
        return v * (self.seen[1] if self.seen else 1000) / height


class Client:
    """A CaseClient (support.contract.evaluation) answering with `script(request)`."""

    def __init__(self, model: ModelSpec, script) -> None:
        self.name, self.history, self._model, self.script = model.name, (), model, script

    @property
    def model(self) -> ModelSpec:
        return self._model

    async def generate(self, request: Request) -> Response:
        return Response(texts=(self.script(request),), model=self.name)

    def fork(self) -> Client:
        return self


def box_oracle(convention: Convention, digits: int | None = 3):
    """The oracle's boxes (pixels of the frame, in Request.target) in the family's frame, rounded
    to `digits` decimals (None: to integers, as the families write them; at the tiny model's
    resize a unit is ~3 frame px, which costs AP at IoU 0.95, not the matches at 0.5)."""

    def answer(request: Request) -> str:
        space = request.answer_space  # BoxAnswerSpace(width, height)
        w, h = space.width, space.height
        out = []
        for item in json.loads(request.target or "[]"):
            x1, y1, x2, y2 = item["bbox_2d"]
            box = [convention.x(x1, w), convention.y(y1, h)]
            box += [convention.x(x2, w), convention.y(y2, h)]
            out.append({"label": item["label"], "bbox_2d": [round(v, digits) for v in box]})
        return json.dumps(out)

    return answer


def point_oracle(convention: Convention, canvas: tuple[int, int]):
    """The oracle's point (a canvas pixel, in Request.target) in the family's frame: the resized
    pixel under the canvas pixel's centre, or the per-mille position of that centre."""

    def answer(request: Request) -> str:
        said = json.loads(request.target or "{}")
        point = said.get("point_canvas")
        if point is not None:
            x, y = point[0] + 0.5, point[1] + 0.5  # the pixel's centre
            there = (convention.x(x, canvas[0]), convention.y(y, canvas[1]))
            to_int = math.floor if convention.name == "resized" else round
            point = [to_int(v) for v in there]
        return json.dumps({**said, "point_canvas": point})

    return answer


def conventions(tiny) -> dict[str, tuple[ModelSpec, Convention, Convention]]:
    """family -> (its tiny model, its convention for a 640x512 frame, for the 768x768 canvas),
    the resized sizes from the golden tables, not from model_frames."""
    q25, q3 = model_spec(f"hf:{tiny['qwen2_5_vl']}"), model_spec(f"hf:{tiny['qwen3_vl']}")
    return {
        "qwen2_5_vl": (
            q25,
            Convention("resized", QWEN25_TINY[(640, 512)]),
            Convention("resized", QWEN25_TINY[(768, 768)]),
        ),
        "qwen3_vl": (q3, Convention("norm1000"), Convention("norm1000")),
    }


@pytest.fixture(scope="module")
def surgvqa(shared_cache):
    from support.evaluations.surgvqa.spec import SurgvqaSettings
    from support.evaluations.surgvqa.synthetic import ensure_surgvu
    from support.evaluations.surgvqa.task import SurgvqaEvaluation
    from support.settings import OutputSettings, RunSettings

    root = ensure_surgvu(shared_cache)
    run = RunSettings(output=OutputSettings(cache_dir=shared_cache))

    def load(box_frame: str) -> SurgvqaEvaluation:
        return SurgvqaEvaluation.load(run, SurgvqaSettings(root=str(root), box_frame=box_frame))

    return load


def surgvqa_map(ev, model: ModelSpec, script) -> tuple[float, list]:
    """COCO mAP@[.5:.95] over every tool frame of the synthetic sample (pooled, as the summary),
    from the verdicts of the evaluation's own `evaluate`."""
    from support.evaluations.surgvqa.boxes import xywh_boxes
    from support.evaluations.surgvqa.coco import detections, evaluate, frame_truth, ground_truth

    cases = [c for c in ev.cases() if c.params["category"] == "tools"]
    client = Client(model, script)

    async def run_all():
        return [await ev.evaluate(c, client) for c in cases]

    verdicts = asyncio.run(run_all())
    truths = [frame_truth(i, v.target) for i, v in enumerate(verdicts, start=1)]
    found = [
        d
        for i, v in enumerate(verdicts, start=1)
        for d in detections(i, xywh_boxes(v.prediction["boxes"]))
    ]
    return evaluate(ground_truth(truths), found).stats["AP"], verdicts


@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_surgvqa_oracle_in_the_models_frame_scores_map_1(tiny, surgvqa, family):
    model, convention, _ = conventions(tiny)[family]
    script = box_oracle(convention)
    ap, verdicts = surgvqa_map(surgvqa("model"), model, script)
    assert len(verdicts) == 18 and ap == 1.0  # every tool frame of the synthetic sample
    assert all(v.status == "correct" for v in verdicts)
    frame = verdicts[0].prediction
    assert frame["box_frame"] == convention.name
    if convention.seen:  # the size the numbers were read in is recorded
        assert frame["seen"] == list(convention.seen)
    wrong, _ = surgvqa_map(surgvqa("pixels"), model, script)  # the prompt's pixels: wrong
    assert wrong < 0.5
    # integers, as the model writes them: every box still matched at IoU 0.5
    _, verdicts = surgvqa_map(surgvqa("model"), model, box_oracle(convention, None))
    assert all(v.status == "correct" for v in verdicts)


@pytest.fixture(scope="module")
def pointing(tmp_path_factory):
    """load(point_frame) -> a PointingEvaluation (write-up profile, 768x768 canvas) of a small
    synthetic CholecSeg8k (2 videos of 10 frames), its test rows every other frame."""
    from support.evaluations.pointing.dataset import CholecSeg8k
    from support.evaluations.pointing.prepare import Prepared
    from support.evaluations.pointing.profiles import WRITEUP
    from support.evaluations.pointing.spec import PointingSettings
    from support.evaluations.pointing.synthetic import build_cholecseg8k
    from support.evaluations.pointing.task import PointingEvaluation

    out = tmp_path_factory.mktemp("cholecseg8k")
    root = str(build_cholecseg8k(out / "raw", seed=0, n_videos=2, frames_per_video=10))
    ds = CholecSeg8k.open(root)
    rows = list(range(0, len(ds), 2))
    loaded = {}

    def load(point_frame: str) -> PointingEvaluation:
        if point_frame not in loaded:  # zero-shot cases only: no few-shot plans needed
            settings = PointingSettings(root, None, WRITEUP, point_frame)
            prepared = Prepared(None, [], rows, {}, out / "prepared")
            ev = PointingEvaluation(root, prepared, rows, settings, ds.video_ids())
            ev._ds = ds
            loaded[point_frame] = ev
        return loaded[point_frame]

    return load


def pointing_hits(ev, model: ModelSpec, script) -> tuple[list, list]:
    """The verdicts of the zero-shot cases, and the hits of the organs present."""
    cases = [c for c in ev.cases() if c.params["condition"] == "zero_shot"]
    client = Client(model, script)

    async def run_all():
        return [await ev.evaluate(c, client) for c in cases]

    verdicts = asyncio.run(run_all())
    return verdicts, [v.scores["hit"] for v in verdicts if v.scores["y_true"] == 1]


@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_pointing_oracle_in_the_models_frame_hits_every_organ(tiny, pointing, family):
    model, _, convention = conventions(tiny)[family]
    ev = pointing("model")
    assert ev.canvas == (768, 768)
    script = point_oracle(convention, ev.canvas)
    verdicts, hits = pointing_hits(ev, model, script)
    assert len(hits) >= 20 and all(hits)  # pointing hits 1.0
    assert all(v.status == "correct" for v in verdicts)
    present = next(v for v in verdicts if v.scores["y_true"] == 1)
    size = list(convention.seen) if convention.seen else [1000, 1000]
    assert present.prediction["point_frame"] == {"name": convention.name, "size": size}
    _, wrong = pointing_hits(pointing("prompt"), model, script)  # canvas pixels: wrong
    assert sum(map(bool, wrong)) / len(wrong) < 0.5


def test_pointing_reads_canvas_pixels_by_default(tiny, pointing):
    model, _, _ = conventions(tiny)["qwen2_5_vl"]
    assert pointing("prompt").point_frame(model) is None
    assert pointing("model").point_frame(model_spec("gpt-4o")) is None  # no frame of its own
    verdicts, hits = pointing_hits(pointing("prompt"), model, lambda r: r.target)  # the oracle
    assert all(hits) and all("point_frame" not in v.prediction for v in verdicts)


def test_the_point_frame_option():
    from support.contract.evaluation import OptionError
    from support.evaluations.pointing.spec import SPEC, configure
    from support.settings import RunSettings

    run = RunSettings()
    assert configure({}, run).point_frame == "prompt"  # the default: results unchanged
    assert configure({"pointing_point_frame": "model"}, run).point_frame == "model"
    with pytest.raises(OptionError, match="--pointing-point-frame"):
        configure({"pointing_point_frame": "norm1000"}, run)
    (option,) = (o for o in SPEC.options if o.flag == "--pointing-point-frame")
    assert option.default == "prompt"
