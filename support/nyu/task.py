"""The NYU Depth V2 distance evaluation: the 3D distance in metres between two marked points.

Cases are image x point pair (`img0003-pair1`); the model is added by the pytest parametrization.
Pairs are sampled at collection from the depths at a pixel grid (support.nyu.pairs, seeded by
--seed and the image index, so every xdist worker gets the same pairs), and the ground truth is
the distance between the back-projected pixels (NYU Kinect intrinsics). Data flow of one case:
the RGB image gets a red cross at A and a blue cross at B, is sent as JPEG with the source's
prompt, the answer is parsed into metres and compared with the truth.

Status (it only colours pass/fail; the metrics come from the numbers): `correct` when the answer
is within the usual depth-estimation threshold delta < 1.25, i.e. max(pred/gt, gt/pred) < 1.25;
`wrong` otherwise; `unparsable` without a number (support.nyu.parser); `error` when the backend
failed.
"""

from __future__ import annotations

import asyncio
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from support.engine import ModelClient
from support.evaluation import Evaluation, linspace_subset
from support.memo import OnceCache
from support.nyu.mat import NyuMat
from support.nyu.pairs import PointPair, grid, pair_rng, sample_pairs
from support.nyu.parser import DistanceAnswer, format_distance, parse_answer
from support.nyu.prompts import MAX_TOKENS, PROMPT
from support.outputs import atomic_write
from support.settings import RunSettings
from support.synthetic.nyu_depth import ensure_nyu_mat
from support.types import Case, Outcome, Part, Request, Response, Usage, encode_image

PAIRS_PER_IMAGE = 3  # as the source
DELTA_THRESHOLD = 1.25  # `correct` when max(pred/gt, gt/pred) < this
RED, BLUE = (255, 0, 0), (0, 0, 255)
JPEG_QUALITY = 95


@dataclass(frozen=True)
class DistanceAnswerSpace:
    """`chance`'s answers: a uniform distance in [low, high] metres, as text with 2 decimals."""

    low: float = 0.2
    high: float = 6.0

    def sample(self, rng: np.random.Generator) -> str:
        return f"{rng.uniform(self.low, self.high):.2f}"


def delta_ratio(pred: float, gt: float) -> float:
    """max(pred/gt, gt/pred): 1 for a perfect answer; inf for 0 (gt > 0)."""
    if pred <= 0 or gt <= 0:
        return math.inf
    return max(pred / gt, gt / pred)


def draw_cross(draw: ImageDraw.ImageDraw, point, colour, label: str, arm: int = 10) -> None:
    """A cross of the colour centred on pixel (u, v) = (column, row), white-outlined, labelled."""
    u, v = point
    for width, fill in ((7, (255, 255, 255)), (3, colour)):
        draw.line([(u - arm, v), (u + arm, v)], fill=fill, width=width)
        draw.line([(u, v - arm), (u, v + arm)], fill=fill, width=width)
    font = ImageFont.load_default(size=18)
    draw.text((u + arm + 3, v - arm - 16), label, fill=colour, font=font, stroke_width=2,
              stroke_fill=(255, 255, 255))  # fmt: skip


def mark_pair(rgb: np.ndarray, pair: PointPair) -> Image.Image:
    """The (480, 640, 3) RGB image with a red cross at A (point1) and a blue one at B (point2)."""
    image = Image.fromarray(rgb).convert("RGB")
    draw = ImageDraw.Draw(image)
    draw_cross(draw, pair.point1, RED, "A")
    draw_cross(draw, pair.point2, BLUE, "B")
    return image


def parse_pairs_per_image(value: str | int | None) -> int:
    """--pairs-per-image as an int >= 1 (ValueError naming the option otherwise)."""
    try:
        k = int(value if value is not None else PAIRS_PER_IMAGE)
    except (TypeError, ValueError):
        raise ValueError(f"--pairs-per-image {value!r}: expected a whole number >= 1") from None
    if k < 1:
        raise ValueError(f"--pairs-per-image {value!r}: expected a whole number >= 1")
    return k


class NyuDistanceEvaluation(Evaluation):
    """Worker side: data, pairs, requests, scoring. Controller side: support.nyu.summary."""

    name: ClassVar[str] = "nyu_distance"
    summary_module: ClassVar[str] = "support.nyu.summary"
    quick_samples: ClassVar[int] = 2  # images in the quick subset (x pairs per image cases)

    def __init__(self, mat: NyuMat, pairs: dict[int, list[PointPair]], marked_dir: Path) -> None:
        self.mat = mat
        self.pairs = pairs  # image index -> its sampled pairs, in image order
        self.images = list(pairs)
        self.quick_images = set(linspace_subset(self.images, self.quick_samples))
        self.marked_dir = marked_dir  # where the marked images of this run are saved
        self._rgb: OnceCache[int, np.ndarray] = OnceCache(8)
        self._marked: OnceCache[tuple[int, int], bytes] = OnceCache(256)

    # ---- loading and cases -------------------------------------------------------------------
    @classmethod
    def load(cls, settings: RunSettings) -> NyuDistanceEvaluation:
        path = settings.data.get("nyu_mat") or ensure_nyu_mat(settings.cache_dir)
        k = parse_pairs_per_image(settings.data.get("nyu_pairs_per_image"))
        mat = NyuMat(path)
        images = linspace_subset(list(range(len(mat))), settings.samples)
        us, vs = grid()
        pairs = {
            i: sample_pairs(mat.depth_at(i, us, vs), us, vs, k, pair_rng(settings.seed, i))
            for i in images
        }
        marked_dir = settings.results_dir / cls.name / settings.run_id / "marked_images"
        return cls(mat, pairs, marked_dir)

    def cases(self) -> list[Case]:
        out = []
        for i in self.images:
            for j, pair in enumerate(self.pairs[i]):
                params = {
                    "image_idx": i,
                    "pair_idx": j,
                    "point1": list(pair.point1),  # (u, v) image px
                    "point2": list(pair.point2),
                    "depth1": pair.depth1,  # Z metres
                    "depth2": pair.depth2,
                    "gt_distance": pair.distance(),  # metres
                }
                out.append(Case(f"img{i:04d}-pair{j}", self.name, params))
        return out

    def is_quick(self, case: Case) -> bool:
        return case.params["image_idx"] in self.quick_images

    def locality(self, case: Case) -> str:
        return f"img{case.params['image_idx']}"

    # ---- images ------------------------------------------------------------------------------
    def pair(self, case: Case) -> PointPair:
        p = case.params
        return PointPair(tuple(p["point1"]), tuple(p["point2"]), p["depth1"], p["depth2"])

    def marked_path(self, image_idx: int, pair_idx: int) -> Path:
        """marked_images/img0000_pair0.jpg, as the source names them."""
        return self.marked_dir / f"img{image_idx:04d}_pair{pair_idx}.jpg"

    def marked(self, case: Case) -> bytes:
        """The case's marked image as JPEG bytes (what the model sees); saved once per process
        under marked_images/ when first made."""
        key = (case.params["image_idx"], case.params["pair_idx"])
        return self._marked.get(key, lambda k: self._make_marked(k, self.pair(case)))

    def _make_marked(self, key: tuple[int, int], pair: PointPair) -> bytes:
        data = encode_image(
            mark_pair(self._rgb.get(key[0], self.mat.image), pair), "JPEG", quality=JPEG_QUALITY
        )
        atomic_write(self.marked_path(*key), lambda f: f.write(data))
        return data

    def request(self, case: Case) -> Request:
        return Request(
            parts=(Part.of_image(self.marked(case)), Part.of_text(PROMPT)),
            temperature=0.0,
            max_tokens=MAX_TOKENS,
            target=format_distance(case.params["gt_distance"]),
            answer_space=DistanceAnswerSpace(),
        )

    # ---- evaluation --------------------------------------------------------------------------
    async def evaluate(self, case: Case, client: ModelClient) -> Outcome:
        request = await asyncio.to_thread(self.request, case)  # image work off the loop thread
        response = await client.generate(request)
        return self.score(case, client.name, request, response, parse_answer(response.text))

    def score(
        self, case: Case, model: str, request: Request, response: Response, answer: DistanceAnswer
    ) -> Outcome:
        gt = float(case.params["gt_distance"])
        pred = answer.metres
        if pred is None:
            status, scores = "unparsable", {"gt": gt, "pred": None, "abs_error": None}
        else:
            status = "correct" if delta_ratio(pred, gt) < DELTA_THRESHOLD else "wrong"
            scores = {"gt": gt, "pred": pred, "abs_error": abs(pred - gt)}
        return Outcome(
            case_id=f"{case.id}-{model}",
            evaluation=self.name,
            model=model,
            status=status,
            cluster=self.locality(case),
            scores=scores,
            prediction={"distance_m": pred, "unit": answer.unit, "parsed_by": answer.reason},
            target=self._target(case),
            raw=response.text,
            prompt_hash=request.digest(),
            latency_s=response.latency_s,
            cached=response.cached,
            usage=response.usage,
            extra={
                "image_idx": case.params["image_idx"],
                "pair_idx": case.params["pair_idx"],
                **({"rendered_prompt": response.prompt} if response.prompt else {}),
                "backend_calls": 0 if response.cached else 1,
                "cache_hits": 1 if response.cached else 0,
            },
        )

    def _target(self, case: Case) -> dict:
        p = case.params
        return {"distance_m": p["gt_distance"], "point1": p["point1"], "point2": p["point2"]}

    def error_outcome(self, case: Case, model: str, message: str) -> Outcome:
        return Outcome(
            case_id=f"{case.id}-{model}",
            evaluation=self.name,
            model=model,
            status="error",
            cluster=self.locality(case),
            scores={"gt": case.params["gt_distance"], "pred": None, "abs_error": None},
            target=self._target(case),
            error=message,
            usage=Usage(),
            extra={
                "image_idx": case.params["image_idx"],
                "pair_idx": case.params["pair_idx"],
                "backend_calls": 0,
                "cache_hits": 0,
            },
        )

    def render(self, case: Case, outcome: Outcome) -> bytes | None:
        """The marked image with the prediction and the truth written under it."""
        image = Image.open(io.BytesIO(self.marked(case))).convert("RGB")
        pred = (outcome.prediction or {}).get("distance_m")
        gt = case.params["gt_distance"]
        text = f"truth {gt:.2f} m   prediction " + (
            f"{pred:.2f} m   |error| {abs(pred - gt):.2f} m" if pred is not None else "none"
        )
        canvas = Image.new("RGB", (image.width, image.height + 30), (255, 255, 255))
        canvas.paste(image, (0, 0))
        ImageDraw.Draw(canvas).text(
            (8, image.height + 5), text, fill=(0, 0, 0), font=ImageFont.load_default(size=18)
        )
        canvas.thumbnail((480, 480))
        return encode_image(canvas, "JPEG", quality=85)
