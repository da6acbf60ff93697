"""The NYU Depth V2 distance evaluation: the 3D distance in metres between two marked points.

Cases are image x point pair (`img0003-pair1`); the model is added by the pytest parametrization.
Pairs are sampled at collection from the depths at a pixel grid
(support.evaluations.nyu_distance.pairs, seeded by --seed and the image index, so every xdist worker
gets the same pairs), and the ground truth is the distance between the back-projected pixels (NYU
Kinect intrinsics). Data flow of one case: the RGB image gets a red cross at A and a blue cross at
B, is sent as JPEG with the source's prompt, the answer is parsed into metres and compared with the
truth.

Status (it only colours pass/fail; the metrics come from the numbers): `correct` when the answer is
within the usual depth-estimation threshold delta < 1.25, i.e. max(pred/gt, gt/pred) < 1.25; `wrong`
otherwise; `unparsable` without a number (support.evaluations.nyu_distance.parser); `error` when the
backend failed.
"""

from __future__ import annotations

import asyncio
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from support.contract.evaluation import CaseClient, Evaluation, linspace_subset
from support.evaluations.nyu_distance.folder import NyuFolder, NyuFolderError
from support.evaluations.nyu_distance.marks import marked_jpeg, pair_of
from support.evaluations.nyu_distance.mat import NyuMat, NyuMatError
from support.evaluations.nyu_distance.pairs import MIN_DEPTH_DIFF, MIN_SEPARATION, PointPair
from support.evaluations.nyu_distance.parser import DistanceAnswer, format_distance
from support.evaluations.nyu_distance.profiles import WRITEUP, NyuProfile
from support.evaluations.nyu_distance.spec import NyuSettings, open_nyu
from support.images import decode_image
from support.memo import OnceCache
from support.reporting.kit import fit_picture, picture_jpeg
from support.settings import RunSettings
from support.types import Case, Outcome, Part, Request, Verdict

DELTA_THRESHOLD = 1.25  # `correct` when max(pred/gt, gt/pred) < this
SHOWN_IMAGES = 10  # image numbers named in a message, at most


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


class NyuDataWarning(UserWarning):
    """Some images of the NYU data yield no point pair, so they give no case (named once)."""


def _numbers(images: list[int]) -> str:
    shown = ", ".join(map(str, images[:SHOWN_IMAGES]))
    return shown + (f" and {len(images) - SHOWN_IMAGES} more" if len(images) > SHOWN_IMAGES else "")


def check_pairs(
    mat: NyuMat | NyuFolder, grids: Mapping[int, np.ndarray], pairs: Mapping[int, list]
) -> None:
    """Images that yield no pair are never dropped in silence: when none of them yields one, the
    reader's error (NyuMatError / NyuFolderError) names the file and why; when only some yield
    none, one NyuDataWarning names them. grids: each image's depths (metres) at its grid."""
    empty = [i for i, p in pairs.items() if not p]
    if not empty:
        return
    no_depth = [i for i in empty if not np.any(np.isfinite(grids[i]) & (grids[i] > 0))]
    too_close = [i for i in empty if i not in set(no_depth)]
    why = "; ".join(
        text
        for text in (
            no_depth
            and f"images {_numbers(no_depth)}: no finite positive depth (m) at the sampled grid",
            too_close
            and f"images {_numbers(too_close)}: no two valid points more than "
            f"{MIN_SEPARATION:g} px apart whose depths differ by more than {MIN_DEPTH_DIFF:g} m",
        )
        if text
    )
    if len(empty) == len(pairs):
        error = NyuFolderError if isinstance(mat, NyuFolder) else NyuMatError
        raise error(f"{mat.path}: none of the {len(pairs)} images read yields a point pair ({why})")
    warnings.warn(
        f"{mat.path}: {len(empty)} of {len(pairs)} images yield no point pair and give no "
        f"case ({why})",
        NyuDataWarning,
        stacklevel=2,
    )


class NyuDistanceEvaluation(Evaluation):
    """Worker side: data, pairs, requests, scoring. Controller side:
    support.evaluations.nyu_distance.summary."""

    name: ClassVar[str] = "nyu_distance"
    quick_samples: ClassVar[int] = 2  # images in the quick subset (x pairs per image cases)

    def __init__(
        self,
        mat: NyuMat | NyuFolder,
        pairs: dict[int, list[PointPair]],
        profile: NyuProfile = WRITEUP,
    ) -> None:
        self.mat = mat
        self.profile = profile
        self.pairs = pairs  # image index -> its sampled pairs, in image order
        self.images = list(pairs)
        self.quick_images = set(linspace_subset(self.images, self.quick_samples))
        self._rgb: OnceCache[int, np.ndarray] = OnceCache(8)
        self._marked: OnceCache[tuple[int, int], bytes] = OnceCache(256)

    # ---- loading and cases -------------------------------------------------------------------
    @classmethod
    def load(cls, run: RunSettings, settings: NyuSettings) -> NyuDistanceEvaluation:
        mat: NyuMat | NyuFolder = open_nyu(settings, run.output.cache_dir)
        k, rules = settings.pairs_per_image, settings.profile
        grids, pairs = rules.sample(
            mat.depth_at, len(mat), k, run.samples, run.seed, settings.source_images
        )
        if k > 0:
            check_pairs(mat, grids, pairs)
        return cls(mat, pairs, rules)

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
                    "gt_distance": pair.distance(self.mat.intrinsics),  # metres
                }
                # the pairs of one image share a scene: resampled together
                out.append(Case(f"img{i:04d}-pair{j}", self.name, params, cluster=f"img{i}"))
        return out

    def is_quick(self, case: Case) -> bool:
        return case.params["image_idx"] in self.quick_images

    def locality(self, case: Case) -> str:
        return case.cluster

    # ---- images ------------------------------------------------------------------------------
    def marked(self, case: Case) -> bytes:
        """The case's marked image as JPEG bytes (what the model sees), made once per process."""
        key = (case.params["image_idx"], case.params["pair_idx"])
        return self._marked.get(
            key,
            lambda k: marked_jpeg(
                self._rgb.get(k[0], self.mat.image), pair_of(case.params), self.profile.compat
            ),
        )

    def request(self, case: Case) -> Request:
        p, rules = case.params, self.profile
        text = rules.prompt(tuple(p["point1"]), tuple(p["point2"]))
        return Request(
            parts=(Part.of_image(self.marked(case)), Part.of_text(text)),
            temperature=rules.temperature,
            max_tokens=rules.max_tokens,
            target=format_distance(case.params["gt_distance"]),
            answer_space=DistanceAnswerSpace(),
        )

    # ---- evaluation --------------------------------------------------------------------------
    async def evaluate(self, case: Case, client: CaseClient) -> Verdict:
        request = await asyncio.to_thread(self.request, case)  # image work off the loop thread
        response = await client.generate(request)
        return self.score(case, self.profile.parse(response.text))

    def score(self, case: Case, answer: DistanceAnswer) -> Verdict:
        gt = float(case.params["gt_distance"])
        pred = answer.metres
        if pred is None:
            status, scores = "unparsable", {"gt": gt, "pred": None, "abs_error": None}
        else:
            status = "correct" if delta_ratio(pred, gt) < DELTA_THRESHOLD else "wrong"
            scores = {"gt": gt, "pred": pred, "abs_error": abs(pred - gt)}
        p = case.params
        return Verdict(
            status=status,
            scores=scores,
            prediction={"distance_m": pred, "unit": answer.unit, "parsed_by": answer.reason},
            target={"distance_m": p["gt_distance"], "point1": p["point1"], "point2": p["point2"]},
            read_by=answer.rule,
        )

    def render(self, case: Case, outcome: Outcome) -> bytes | None:
        """The marked image with the prediction and the truth written under it."""
        image = fit_picture(decode_image(self.marked(case), "the marked image"))
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
        return picture_jpeg(canvas)
