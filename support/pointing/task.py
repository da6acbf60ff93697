"""The pointing evaluation: organ/tool presence and a point on the 768x768 canvas, CholecSeg8k.

Cases are sample x organ (12) x condition (zero_shot, fewshot_standard, fewshot_hard_negatives);
the model is added by the pytest parametrization. Data flow of one case: the sample's frame is
letterboxed onto the canvas, few-shot examples (from the prepared plans) are interleaved before it,
the answer is parsed, and the point is mapped back to image pixels and looked up in the organ mask.
"""

from __future__ import annotations

import asyncio
import io
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
from PIL import Image, ImageDraw

from support.evaluation import Evaluation, linspace_subset
from support.geometry import Letterbox, canvas_mask, interior_point, letterbox, mask_outline
from support.memo import OnceCache
from support.pointing.classes import CLASS_NAMES, ORGAN_IDS, ORGAN_SLUGS
from support.pointing.dataset import HUB_ID_RE, CholecSeg8k
from support.pointing.parser import PointingAnswer, format_pointing, parse_pointing
from support.pointing.prepare import Prepared, load_prepared, prepare
from support.pointing.prompts import (
    CONDITIONS,
    SYSTEM_PROMPT,
    Example,
    few_shot_parts,
    zero_shot_parts,
)
from support.pointing.spec import PointingSettings
from support.runner import CaseClient
from support.settings import RunSettings
from support.synthetic.cholecseg8k import ensure_cholecseg8k
from support.types import Case, Outcome, Part, Request, Response, Verdict, encode_image

CANVAS = (768, 768)  # (width, height) canvas px
PLAN_OF = {"fewshot_standard": "standard", "fewshot_hard_negatives": "hard_negatives"}
N_TEST = 100  # balanced test samples, as the source
MAX_TOKENS = 256


@dataclass(frozen=True)
class PointingAnswerSpace:
    """`chance`'s answers: present ~ Bernoulli(0.5); if present, a uniform canvas pixel."""

    organ_name: str
    canvas: tuple[int, int] = CANVAS

    def sample(self, rng: np.random.Generator) -> str:
        present = int(rng.integers(2))
        point = (int(rng.integers(self.canvas[0])), int(rng.integers(self.canvas[1])))
        return format_pointing(self.organ_name, present, point if present else None)


def prepared_dir(cache_dir: Path, key: str) -> Path:
    """Where a dataset's presence matrix, test indices and few-shot plans live."""
    return cache_dir / "data_info" / "cholecseg8k" / key


class PointingEvaluation(Evaluation):
    """Worker side: data, cases, requests, scoring. Controller side: support.pointing.summary."""

    name: ClassVar[str] = "pointing"
    summary_module: ClassVar[str] = "support.pointing.summary"
    quick_samples: ClassVar[int] = 5

    def __init__(self, source: str, prepared: Prepared, rows: list[int]) -> None:
        self.source = source
        self.prepared = prepared
        self.rows = rows  # dataset row indices under test, in test-set order
        self.quick_rows = set(linspace_subset(rows, self.quick_samples))
        self._ds: CholecSeg8k | None = None
        self._ds_lock = threading.Lock()
        self._frames: OnceCache[int, tuple[Part, Letterbox, np.ndarray]] = OnceCache(256)
        self._targets: OnceCache[tuple[int, int], tuple[int, int] | None] = OnceCache(8192)

    # ---- loading and cases -------------------------------------------------------------------
    @classmethod
    def load(cls, run: RunSettings, settings: PointingSettings) -> PointingEvaluation:
        source = settings.cholecseg8k
        if source is None:
            source = str(ensure_cholecseg8k(run.cache_dir))
        if Path(source).exists() or not HUB_ID_RE.match(source):
            ds = CholecSeg8k.open(source)  # local: preparing is local computation
            prepared = prepare(ds, prepared_dir(run.cache_dir, ds.fingerprint[:16]), N_TEST)
        else:  # a hub id: never download at collection time; the plans must exist already
            ds = None
            key = source.replace("/", "__")
            try:
                prepared = load_prepared(prepared_dir(run.cache_dir, key), N_TEST)
            except FileNotFoundError as exc:
                raise FileNotFoundError(
                    f"--cholecseg8k {source}: not prepared yet (preparing downloads the dataset, "
                    f"so it is an explicit step). {str(exc).replace('SOURCE', source)}"
                ) from None
        ev = cls(source, prepared, linspace_subset(list(prepared.test_indices), run.samples))
        ev._ds = ds
        return ev

    @property
    def ds(self) -> CholecSeg8k:
        with self._ds_lock:
            if self._ds is None:
                self._ds = CholecSeg8k.open(self.source)
            return self._ds

    def cases(self) -> list[Case]:
        y = self.prepared.presence
        out = []
        for row in self.rows:
            for condition in CONDITIONS:
                for j, oid in enumerate(ORGAN_IDS):
                    params = {
                        "row": row,
                        "organ": oid,
                        "condition": condition,
                        "video": self.prepared.video_ids[row],
                        "present": int(y[row, j]),
                    }
                    case_id = f"s{row:04d}-{ORGAN_SLUGS[oid]}-{condition}"
                    group = {"condition": condition, "organ": CLASS_NAMES[oid]}
                    video = self.prepared.video_ids[row]  # frames of a video are resampled together
                    out.append(Case(case_id, self.name, params, group, video))
        return out

    def is_quick(self, case: Case) -> bool:
        return case.params["row"] in self.quick_rows

    def locality(self, case: Case) -> str:
        return f"s{case.params['row']}"

    # ---- images and targets (memoised: many cases share a frame) -----------------------------
    def frame(self, row: int) -> tuple[Part, Letterbox, np.ndarray]:
        """The row's canvas image (PNG part), its letterbox, and its (H, W) int8 label map."""
        return self._frames.get(row, self._load_frame)

    def _load_frame(self, row: int) -> tuple[Part, Letterbox, np.ndarray]:
        canvas, box = letterbox(self.ds.image(row), CANVAS)
        # lossless PNG at zlib level 1: 4x faster to encode than level 6 for ~17% more bytes, and
        # every cached run re-encodes its frames to hash them
        return Part.of_image(canvas, compress_level=1), box, self.ds.labels(row)

    def target_point(self, row: int, organ: int) -> tuple[int, int] | None:
        """A canvas pixel (x, y) whose centre maps into the organ: the organ's most interior pixel
        on the canvas grid. None when the organ is absent or too thin to hit on the canvas."""
        return self._targets.get((row, organ), self._find_target)

    def _find_target(self, key: tuple[int, int]) -> tuple[int, int] | None:
        row, organ = key
        _, box, labels = self.frame(row)
        return interior_point(canvas_mask(labels == organ, box))

    def answer(self, row: int, organ: int) -> str:
        """The ground-truth answer in the requested JSON format (few-shot examples, oracle)."""
        present = int(self.prepared.presence[row, ORGAN_IDS.index(organ)])
        point = self.target_point(row, organ) if present else None
        return format_pointing(CLASS_NAMES[organ], present, point)

    def examples(self, condition: str, organ: int) -> list[Example]:
        """Few-shot examples of the condition's plan: positive, easy negative, [near miss]."""
        if condition == "zero_shot":
            return []
        plan = self.prepared.plans[PLAN_OF[condition]][str(organ)]
        rows = [*plan["positives"][:1], *plan["negatives_easy"][:1], *plan["negatives_hard"][:1]]
        return [Example(self.frame(r)[0], self.answer(r, organ)) for r in rows]

    def request(self, case: Case) -> Request:
        row, organ, condition = case.params["row"], case.params["organ"], case.params["condition"]
        name = CLASS_NAMES[organ]
        image = self.frame(row)[0]
        examples = self.examples(condition, organ)
        parts = few_shot_parts(name, examples, image) if examples else zero_shot_parts(name, image)
        return Request(
            parts=parts,
            system=SYSTEM_PROMPT,
            temperature=0.0,
            max_tokens=MAX_TOKENS,
            target=self.answer(row, organ),
            answer_space=PointingAnswerSpace(name),
        )

    # ---- evaluation --------------------------------------------------------------------------
    async def evaluate(self, case: Case, client: CaseClient) -> Verdict:
        request = await asyncio.to_thread(self.request, case)  # image work off the loop thread
        response = await client.generate(request)
        return self.score(case, response, parse_pointing(response.text, CANVAS))

    def score(self, case: Case, response: Response, answer: PointingAnswer) -> Verdict:
        row, organ = case.params["row"], case.params["organ"]
        y_true = int(case.params["present"])
        hit: bool | None = None
        if not answer.ok:
            status, y_pred = "unparsable", None
        else:
            y_pred = int(answer.present or 0)
            if y_true == 1 and y_pred == 1:
                hit = self.hits(row, organ, answer.point)
            correct = y_pred == y_true and (y_true == 0 or bool(hit))
            status = "correct" if correct else "wrong"
        return Verdict(
            status=status,
            scores={"y_true": y_true, "y_pred": y_pred, "hit": hit},
            prediction=answer.to_json(),
            target={"present": y_true, "point_canvas": self._target_list(row, organ, y_true)},
        )

    def hits(self, row: int, organ: int, point: tuple[int, int] | None) -> bool:
        """Whether canvas pixel `point` (x, y), mapped back to image pixels, lies in the organ."""
        if point is None:
            return False
        _, box, labels = self.frame(row)
        pixel = box.to_image_pixel(point[0] + 0.5, point[1] + 0.5)  # the pixel's centre
        return pixel is not None and bool(labels[pixel[1], pixel[0]] == organ)

    def _target_list(self, row: int, organ: int, present: int) -> list[int] | None:
        point = self.target_point(row, organ) if present else None
        return list(point) if point else None

    def render(self, case: Case, outcome: Outcome) -> bytes | None:
        """The canvas with the organ outlined (green) and the predicted point (red cross)."""
        row, organ = case.params["row"], case.params["organ"]
        image, box, labels = self.frame(row)
        canvas = Image.open(io.BytesIO(image.image or b"")).convert("RGB")
        outline = mask_outline(canvas_mask(labels == organ, box))
        pixels = np.asarray(canvas).copy()
        pixels[outline] = (0, 255, 0)
        canvas = Image.fromarray(pixels)
        point = (outcome.prediction or {}).get("point")
        if point:
            x, y = point
            draw = ImageDraw.Draw(canvas)
            draw.line([(x - 12, y), (x + 12, y)], fill=(255, 0, 0), width=3)
            draw.line([(x, y - 12), (x, y + 12)], fill=(255, 0, 0), width=3)
            draw.ellipse([(x - 7, y - 7), (x + 7, y + 7)], outline=(255, 255, 255), width=2)
        canvas.thumbnail((384, 384))
        return encode_image(canvas, "JPEG", quality=80)
