"""The pointing evaluation: organ/tool presence and a point on the 768x768 canvas, CholecSeg8k.

Cases are sample x organ (12) x condition (zero_shot, fewshot_standard, fewshot_hard_negatives);
the model is added by the pytest parametrization. Data flow of one case: the sample's frame is
letterboxed onto the canvas, few-shot examples (from the prepared plans) are interleaved before it,
the answer is parsed, and the point is looked up in the canvas's label map (each canvas pixel holds
the label of the image pixel its centre maps to). What no model changes (each row's canvas PNG,
canvas label map and target points) is made before the run and stored (`prepare`).
`--pointing-point-frame model` reads the point in the model's own frame where it has one
(Qwen2.5-VL: pixels of the canvas as its processor resizes it; Qwen2-VL, Qwen3-VL: 0-1000;
parser.PointFrame) and maps it onto the canvas first; by default it is read in canvas pixels, as
the prompt asks.

`--compat source` follows the original's main script (eval_pointing_original_size.py): the canvas
is the frame itself (the size of row 0), its prompts, few-shot text and parser, placeholder points
for positive examples, no near-miss examples, max_tokens 100, per-provider temperatures, and a
failed call scored as an absent answer. `--pointing-prepared DIR` takes the test rows and plans
from a prepared folder as they are (e.g. the original's data_info/cholecseg8k).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from scipy import ndimage
from tqdm import tqdm

from support.backends.base import BackendError
from support.backends.registry import ModelSpec
from support.contract.evaluation import CaseClient, Evaluation, linspace_subset
from support.evaluations.pointing.classes import CLASS_NAMES, IGNORE, ORGAN_IDS, ORGAN_SLUGS
from support.evaluations.pointing.dataset import CholecSeg8k, is_hub_id
from support.evaluations.pointing.download import downloaded
from support.evaluations.pointing.letterbox import (
    Letterbox,
    canvas_values,
    interior_point,
    letterbox,
    mask_outline,
)
from support.evaluations.pointing.parser import (
    PointFrame,
    PointingAnswer,
    format_pointing,
    parse_in_frame,
    read_rule,
)
from support.evaluations.pointing.prepare import (
    Prepared,
    build_presence_matrix,
    file_names,
    load_prepared,
)
from support.evaluations.pointing.prompts import (
    CONDITIONS,
    Example,
    source_answer,
    system_prompt,
)
from support.evaluations.pointing.selection import near_miss_negative
from support.evaluations.pointing.spec import PointingSettings
from support.evaluations.pointing.synthetic import ensure_cholecseg8k
from support.images import decode_image, encode_image
from support.memo import FileMemo, OnceCache, memoised_or_in_thread, require_memory
from support.reporting.kit import PICTURE_PX, picture_jpeg
from support.settings import RunSettings
from support.types import Case, Outcome, Part, Request, Verdict

# how a frame becomes the writeup's canvas image: a change here must change the stored canvases'
# folder (canvas_folder), so it is part of the folder's name
CANVAS_RECIPE = "letterbox-bicubic-black-png1"
# how a target point is found on the canvas (each canvas pixel takes the label its centre maps
# to, letterbox.canvas_values; the organ's most interior pixel, letterbox.interior_point): a
# change here must change the name of the stored targets' folder (targets_folder)
TARGET_RULE = "centre-labels-interior-edt-v1"
# how a canvas label map is made and kept (each canvas pixel takes the label its centre maps to,
# letterbox.canvas_values, IGNORE in the padding; a PNG of mode L, IGNORE as 255, zlib level 1):
# a change here, or in the colour table (classes.color_mask_to_labels), must change the name of
# the stored label maps' folder (labels_folder)
LABEL_RULE = "centre-labels-pngL1-v1"
LABEL_PNG_IGNORE = 255  # IGNORE (-1) as the stored PNG's grey value

CANVAS = (768, 768)  # (width, height) canvas px
OUTLINE_GROW_PX = 2  # its organ outline: 1 canvas px grown by this on each side (~4 px shown)
CAPTION_FONT_PX = 22  # its caption, on the canvas (px; ~18 px once scaled to PICTURE_PX)
PLAN_OF = {"fewshot_standard": "standard", "fewshot_hard_negatives": "hard_negatives"}
N_TEST = 100  # balanced test samples, as the source


def source_canvas_mask(mask: np.ndarray, canvas: tuple[int, int]) -> np.ndarray:
    """(canvas_h, canvas_w) bool: where the original's hit test (pointing_metrics.py:277-282,
    image px = int(canvas px * image size / canvas size)) lands in the (H, W) `mask`. The identity
    when the frame has the canvas size, as every CholecSeg8k frame has."""
    m = np.asarray(mask, dtype=bool)
    (cw, ch), (mh, mw) = canvas, m.shape
    if (mw, mh) == (cw, ch):
        return m
    cols = (np.arange(cw) * mw / cw).astype(int)
    rows = (np.arange(ch) * mh / ch).astype(int)
    return m[np.ix_(rows, cols)]


@dataclass(frozen=True)
class PointingAnswerSpace:
    """`chance`'s answers: present ~ Bernoulli(0.5); if present, a uniform canvas pixel."""

    organ_name: str
    canvas: tuple[int, int] = CANVAS

    def sample(self, rng: np.random.Generator) -> str:
        present = int(rng.integers(2))
        point = (int(rng.integers(self.canvas[0])), int(rng.integers(self.canvas[1])))
        return format_pointing(self.organ_name, present, point if present else None)


def canvas_folder(cache_dir: Path, fingerprint: str) -> Path:
    """Where the writeup's canvas PNGs of a dataset are kept across runs (`<row>.png`): the
    folder's name holds the dataset's fingerprint, the canvas size and the recipe."""
    w, h = CANVAS
    return cache_dir / "canvases" / "cholecseg8k" / fingerprint[:16] / f"{w}x{h}-{CANVAS_RECIPE}"


def targets_folder(cache_dir: Path, fingerprint: str) -> Path:
    """Where the writeup's target points of a dataset are kept across runs, one file a row
    (`<row>.json`: `{"<organ id>": [x, y] canvas px or null}`, the 12 organs): beside its
    canvases, the folder's name holding the layout and the target rule."""
    return canvas_folder(cache_dir, fingerprint).with_name(
        f"{CANVAS[0]}x{CANVAS[1]}-row-targets-{TARGET_RULE}"
    )


def labels_folder(cache_dir: Path, fingerprint: str) -> Path:
    """Where the writeup's canvas label maps of a dataset are kept across runs (`<row>.png`, mode
    L: class ids, LABEL_PNG_IGNORE for IGNORE): beside its canvases, the folder's name holding
    the label rule."""
    return canvas_folder(cache_dir, fingerprint).with_name(
        f"{CANVAS[0]}x{CANVAS[1]}-labels-{LABEL_RULE}"
    )


def label_png(labels: np.ndarray) -> bytes:
    """A canvas label map (int8 class ids, IGNORE) as the PNG its folder keeps."""
    grey = np.where(labels == IGNORE, LABEL_PNG_IGNORE, labels).astype(np.uint8)
    return encode_image(Image.fromarray(grey, "L"), "PNG", compress_level=1)


def read_label_png(data: bytes, where: str, size: tuple[int, int]) -> np.ndarray:
    """The int8 label map of a stored PNG (label_png); ValueError naming `where` unless it is a
    mode L image of `size` (W, H)."""
    image = decode_image(data, where, mode="stored")
    if image.mode != "L" or image.size != size:
        raise ValueError(
            f"{where}: a {image.mode} image of {image.width}x{image.height} px, not the label map "
            f"of a {size[0]}x{size[1]} canvas; delete it to have it made again"
        )
    grey = np.asarray(image)
    return np.where(grey == LABEL_PNG_IGNORE, IGNORE, grey).astype(np.int8)


def row_targets_json(labels: np.ndarray) -> bytes:
    """The target point of each of the 12 organs on a canvas label map (letterbox.interior_point
    of its canvas mask; null where absent) as the row's stored file."""
    points = {str(organ): interior_point(labels == organ) for organ in ORGAN_IDS}
    return json.dumps(points).encode()


def read_row_targets(data: bytes, where: str) -> dict[int, tuple[int, int] | None]:
    """Organ id -> target point of a row's stored file (row_targets_json); ValueError naming
    `where` unless it holds a point or null for each of the 12 organs."""
    try:
        found = json.loads(data)
        return {
            organ: (int(p[0]), int(p[1])) if p is not None else None
            for organ, p in ((o, found[str(o)]) for o in ORGAN_IDS)
        }
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise ValueError(
            f"{where}: not the target points of a row ({type(e).__name__}: {e}); delete it to "
            "have it made again"
        ) from None


def prepared_dir(cache_dir: Path, key: str) -> Path:
    """Where a dataset's presence matrix, test indices and few-shot plans live (the original's
    files, made under `--compat source`, in its `source/` subfolder)."""
    return cache_dir / "data_info" / "cholecseg8k" / key


def check_row_order(prepared: Prepared, ds: CholecSeg8k) -> None:
    """ValueError unless the data's rows are the prepared folder's rows: the presence of every
    test row, recomputed from the masks at the folder's threshold, must equal its presence
    matrix. This is what catches a raw tree numbered in another order than the hub script's
    (README, "pointing": the order is inferred, not read from the script). About 100 masks."""
    y = prepared.presence
    if y is None or y.shape[0] != len(ds):
        return
    names = file_names(len(ds), N_TEST, ds.split)
    differ = [
        r
        for r in prepared.test_indices
        if not np.array_equal(ds.presence(r, prepared.min_pixels), y[r])
    ]
    if differ:
        frames = ds.frame_paths()
        shown = ", ".join(f"{r} ({frames[r]})" for r in differ[:3])
        raise ValueError(
            f"{prepared.out_dir / names['presence']}: {len(differ)} of "
            f"{len(prepared.test_indices)} test rows of {ds.source} have another presence than "
            f"the file (rows {shown}): the data's rows are not numbered as the folder's. For a "
            "raw tree the suite numbers rows by names sorted per level (video, clip, frame)."
        )


def check_rows(prepared: Prepared, n_rows: int, source: str, split: str = "train") -> None:
    """ValueError naming the file and key of a test or plan row that is not a row of the data."""
    names = file_names(n_rows, N_TEST, split)

    def bad(rows: list[int]) -> int | None:
        return next((k for k, r in enumerate(rows) if r >= n_rows), None)

    k = bad(prepared.test_indices)
    if k is not None:
        raise ValueError(
            f"{prepared.out_dir / names['balanced']}: indices[{k}] = {prepared.test_indices[k]} "
            f"is not a row of {source} (0..{n_rows - 1})"
        )
    for plan, organs in prepared.plans.items():
        for cid, roles in organs.items():
            for role, rows in roles.items():
                k = bad(rows)
                if k is not None:
                    raise ValueError(
                        f"{prepared.out_dir / names[plan]}: plan['{cid}']['{role}'][{k}] = "
                        f"{rows[k]} is not a row of {source} (0..{n_rows - 1})"
                    )


class PointingEvaluation(Evaluation):
    """Worker side: data, cases, requests, scoring. Controller side:
    support.evaluations.pointing.summary."""

    name: ClassVar[str] = "pointing"
    quick_samples: ClassVar[int] = 5

    def __init__(
        self,
        source: str,
        prepared: Prepared,
        rows: list[int],
        settings: PointingSettings | None = None,
        video_ids: list[str] | None = None,
    ) -> None:
        self.source = source
        self.prepared = prepared
        self.settings = settings or PointingSettings()
        self.rows = rows  # dataset row indices under test, in test-set order
        self.quick_rows = set(linspace_subset(rows, self.quick_samples))
        self.video_ids = video_ids if video_ids is not None else prepared.video_ids
        self.canvas = CANVAS  # (width, height) px; source: the frame size of row 0 (see load)
        self._ds: CholecSeg8k | None = None
        self._ds_lock = threading.Lock()
        self._frames: OnceCache[int, tuple[Part, Letterbox | None]] = OnceCache(256)
        self._labels: OnceCache[int, np.ndarray] = OnceCache(256)
        self._canvas_labels: OnceCache[int, np.ndarray] = OnceCache(256)
        self._targets: OnceCache[tuple[int, int], tuple[int, int] | None] = OnceCache(8192)
        # row -> organ id -> its target point, read from the row's stored file
        self._row_targets: OnceCache[int, dict[int, tuple[int, int] | None]] = OnceCache(1024)
        self._truth: OnceCache[int, np.ndarray] = OnceCache(1 << 16)
        # row -> the canvas scaled to the HTML picture's width (RGB, uint8) and the scale factor:
        # a frame serves every organ and condition of its row (12 x 3 pictures at most)
        self._pictures: OnceCache[int, tuple[np.ndarray, float]] = OnceCache(64)
        self._all_presence: np.ndarray | None = None  # writeup near misses for foreign plans
        self._canvases: FileMemo | None = None  # the encoded canvases kept across runs (load)
        self._stored_targets: FileMemo | None = None  # the target points kept across runs (load)
        self._stored_labels: FileMemo | None = None  # the canvas label maps kept across runs
        self._presence_lock = threading.Lock()
        # model -> the frame its points are read in (--pointing-point-frame model)
        self._point_frames: OnceCache[ModelSpec, PointFrame | None] = OnceCache(16)

    # ---- loading and cases -------------------------------------------------------------------
    @classmethod
    def load(cls, run: RunSettings, settings: PointingSettings) -> PointingEvaluation:
        source = settings.cholecseg8k
        if source is None:
            source = str(ensure_cholecseg8k(run.output.cache_dir))
        elif is_hub_id(
            source
        ):  # never downloads here: `support.evaluations.pointing.download` did it
            source = str(downloaded(source, run.output.cache_dir))
        ds = CholecSeg8k.open(source)  # local data: preparing is local computation
        folder = prepared_dir(run.output.cache_dir, ds.fingerprint[:16])
        if settings.prepared is not None:  # a folder used as it is (e.g. the original's)
            prepared = load_prepared(settings.prepared, N_TEST, ds.split, need_presence=False)
        else:  # ours, or the original's files made by its rules (in source/)
            prepared = settings.profile.prepare(ds, folder, N_TEST)
        check_rows(prepared, len(ds), ds.source, ds.split)
        if settings.prepared is not None:
            check_row_order(prepared, ds)
        ours = len(prepared.video_ids) == len(ds) and settings.prepared is None
        vids = prepared.video_ids if ours else ds.video_ids()  # frames of a video: one cluster
        rows = linspace_subset(list(prepared.test_indices), run.samples)
        ev = cls(source, prepared, rows, settings, vids)
        ev._ds = ds
        if run.output.use_cache:  # --no-cache: every canvas and target made again, nothing kept
            ev._canvases = FileMemo(canvas_folder(run.output.cache_dir, ds.fingerprint))
            if settings.profile.letterbox:  # the letterbox canvas's targets (not the frame's)
                ev._stored_targets = FileMemo(targets_folder(run.output.cache_dir, ds.fingerprint))
                ev._stored_labels = FileMemo(labels_folder(run.output.cache_dir, ds.fingerprint))
        if not settings.profile.letterbox:  # the original's canvas: the size of the first frame
            ev.canvas = ds.image(0).size
        return ev

    @property
    def ds(self) -> CholecSeg8k:
        with self._ds_lock:
            if self._ds is None:
                require_memory()  # opening the data reads files
                self._ds = CholecSeg8k.open(self.source)
            return self._ds

    def cases(self) -> list[Case]:
        frames = self.ds.frame_paths()  # `videoNN/videoNN_SSSSS/frame_K_endo.png` where known
        out = []
        for row in self.rows:
            for condition in CONDITIONS:
                for j, oid in enumerate(ORGAN_IDS):
                    params = {
                        "row": row,
                        "organ": oid,
                        "condition": condition,
                        "video": self.video_ids[row],
                        "frame": frames[row],
                        "present": int(self.truth(row)[j]),
                        **self.settings.profile.case_params,
                    }
                    case_id = f"s{row:04d}-{ORGAN_SLUGS[oid]}-{condition}"
                    group = {"condition": condition, "organ": CLASS_NAMES[oid]}
                    video = self.video_ids[row]  # frames of a video are resampled together
                    out.append(Case(case_id, self.name, params, group, video))
        return out

    def is_quick(self, case: Case) -> bool:
        return case.params["row"] in self.quick_rows

    def locality(self, case: Case) -> str:
        return f"s{case.params['row']}"

    # ---- ground truth ------------------------------------------------------------------------
    def truth(self, row: int) -> np.ndarray:
        """(12,) uint8: which organs show at least 1 pixel in row (the truth in both profiles,
        as the original's `labels_to_presence_vector` default). Our own presence matrix holds
        exactly that; a folder made at 50 px (the original's) does not, so the labels decide."""
        p = self.prepared
        if p.presence is not None and p.min_pixels == 1 and len(p.presence) == len(self.ds):
            return p.presence[row]
        return self._truth.get(row, lambda r: self.ds.presence(r, 1))

    # ---- images and targets (memoised: many cases share a frame) -----------------------------
    def frame(self, row: int) -> tuple[Part, Letterbox | None]:
        """The row's canvas image (PNG part) and its letterbox (None: the frame itself is the
        canvas, under source)."""
        return self._frames.get(row, self._load_frame)

    def labels(self, row: int) -> np.ndarray:
        """The row's (H, W) int8 label map (frame pixels), decoded once, when a score or a target
        of the source profile needs it (the letterbox canvas's are read from canvas_labels)."""
        return self._labels.get(row, self.ds.labels)

    def _box(self, row: int) -> Letterbox:
        """The row's frame letterboxed onto the canvas (its size read from the frame's header)."""
        return Letterbox(*self.ds.frame_size(row), *CANVAS)

    def _load_frame(self, row: int) -> tuple[Part, Letterbox | None]:
        # lossless PNG at zlib level 1: 4x faster to encode than level 6 for ~17% more bytes
        if not self.settings.profile.letterbox:  # the native frame, as the original sends it
            return Part.of_image(self.ds.image(row), compress_level=1), None
        box = self._box(row)
        if self._canvases is None:
            return Part.of_image(self._canvas_png(row)), box
        # kept across runs: a rerun (a cached one, or another model on the same data) reads the
        # canvas instead of decoding, resizing and encoding the frame (~50 ms a frame)
        return Part.of_image(self._canvases.get(f"{row}.png", lambda: self._canvas_png(row))), box

    def _canvas_png(self, row: int) -> bytes:
        return encode_image(letterbox(self.ds.image(row), CANVAS)[0], "PNG", compress_level=1)

    def organ_mask(self, row: int, organ: int) -> np.ndarray:
        """(canvas_h, canvas_w) bool: the canvas pixels that count as inside the organ."""
        _, box = self.frame(row)
        if box is None:
            return source_canvas_mask(self.labels(row) == organ, self.canvas)
        return self.canvas_labels(row) == organ

    def canvas_labels(self, row: int) -> np.ndarray:
        """(canvas_h, canvas_w) int8 class ids as the canvas shows them (letterbox.canvas_values:
        each canvas pixel takes the label its centre maps to, every organ's canvas mask at once;
        the padding is IGNORE, never an organ). Once per row: read from its stored file where the
        store is kept (made before the run by `prepare`, else made and stored), else made from
        the frame's labels."""
        return self._canvas_labels.get(row, self._load_canvas_labels)

    def _load_canvas_labels(self, row: int) -> np.ndarray:
        if self._stored_labels is None:
            return self._label_canvas(row)
        name = f"{row}.png"
        data = self._stored_labels.get(name, lambda: label_png(self._label_canvas(row)))
        return read_label_png(data, str(self._stored_labels.folder / name), CANVAS)

    def _label_canvas(self, row: int) -> np.ndarray:
        return canvas_values(self.ds.labels(row), self._box(row), IGNORE)

    def target_point(self, row: int, organ: int) -> tuple[int, int] | None:
        """A canvas pixel (x, y) whose centre maps into the organ: the organ's most interior pixel
        on the canvas grid. None when the organ is absent or too thin to hit on the canvas."""
        if self._stored_targets is not None:  # kept across runs: one file a row, its 12 organs
            return self._row_targets.get(row, self._load_row_targets)[organ]
        return self._targets.get((row, organ), self._find_target)

    def _find_target(self, key: tuple[int, int]) -> tuple[int, int] | None:
        return interior_point(self.organ_mask(*key))

    def _load_row_targets(self, row: int) -> dict[int, tuple[int, int] | None]:
        # a run after `prepare` (or a rerun) neither decodes the labels nor runs the distance
        # transform (~5 ms an organ): it reads the row's file
        assert self._stored_targets is not None
        name = f"{row}.json"
        data = self._stored_targets.get(name, lambda: row_targets_json(self.canvas_labels(row)))
        return read_row_targets(data, str(self._stored_targets.folder / name))

    def answer(self, row: int, organ: int) -> str:
        """The ground-truth answer in the requested JSON format (few-shot examples, oracle)."""
        present = int(self.truth(row)[ORGAN_IDS.index(organ)])
        point = self.target_point(row, organ) if present else None
        return format_pointing(CLASS_NAMES[organ], present, point)

    def examples(self, condition: str, organ: int) -> list[Example]:
        """Few-shot examples of the condition's plan: positive, easy negative, [near miss].

        The profile's rule picks them: writeup_examples or source_examples.
        """
        if condition == "zero_shot":
            return []
        plan = self.prepared.plans[PLAN_OF[condition]][str(organ)]
        return self.settings.profile.examples(self, plan, organ, condition)

    def writeup_examples(
        self, plan: dict[str, list[int]], organ: int, condition: str
    ) -> list[Example]:
        """The write-up's: the first positive and easy negative with their true answers, and the
        first hard negative (or, with hard negatives asked for and none planned, a near miss)."""
        rows = self.writeup_example_rows(plan, organ, condition)
        return [Example(self.frame(r)[0], self.answer(r, organ)) for r in rows]

    def writeup_example_rows(
        self, plan: dict[str, list[int]], organ: int, condition: str
    ) -> list[int]:
        """The rows of writeup_examples, in their order."""
        hard = plan["negatives_hard"][:1]
        if not hard and plan["near_miss"] and condition == "fewshot_hard_negatives":
            hard = self._near_miss_negative(plan, organ)
        return [*plan["positives"][:1], *plan["negatives_easy"][:1], *hard]

    def source_examples(self, plan: dict[str, list[int]], organ: int) -> list[Example]:
        """The original's (eval/evaluator.py prepare_few_shot_examples): every positive that shows
        the organ, answered with the canvas-centre placeholder point, every easy negative and
        every `negatives_hard` entry, answered absent; `near_miss` is never read."""
        name, j = CLASS_NAMES[organ], ORGAN_IDS.index(organ)
        centre = [self.canvas[0] // 2, self.canvas[1] // 2]  # the placeholder (evaluator.py:238)
        out = [
            Example(self.frame(r)[0], source_answer(name, 1, centre))
            for r in plan["positives"]
            if self.truth(r)[j]
        ]
        for r in [*plan["negatives_easy"], *plan["negatives_hard"]]:
            out.append(Example(self.frame(r)[0], source_answer(name, 0, None)))
        return out

    def source_example_rows(self, plan: dict[str, list[int]], organ: int) -> list[int]:
        """The rows of source_examples, in their order."""
        j = ORGAN_IDS.index(organ)
        positives = [r for r in plan["positives"] if self.truth(r)[j]]
        return [*positives, *plan["negatives_easy"], *plan["negatives_hard"]]

    def _near_miss_negative(self, plan: dict[str, list[int]], organ: int) -> list[int]:
        """Writeup with a plan whose hard examples are the original's `near_miss` frames (which
        show the organ): a near-miss negative by `selection.near_miss_negative`, like the first
        positive, away from the test rows and the plan's examples."""
        if not plan["positives"]:
            return []
        Y = self.prepared.presence
        if Y is None or len(Y) != len(self.ds):
            with self._presence_lock:  # the folder has no matrix: ours, once per process
                if self._all_presence is None:
                    require_memory()  # every row's masks: never on the event loop
                    self._all_presence = build_presence_matrix(self.ds, progress=False)
            Y = self._all_presence
        used = [*self.prepared.test_indices, *plan["positives"], *plan["negatives_easy"]]
        row = near_miss_negative(Y, organ, plan["positives"][0], used)
        return [] if row is None else [row]

    # ---- prepared before the run (Evaluation.prepare, on the controller) ---------------------
    def example_rows(self, condition: str, organ: int) -> list[int]:
        """The rows of the few-shot examples `examples(condition, organ)` shows, in order."""
        if condition == "zero_shot":
            return []
        plan = self.prepared.plans[PLAN_OF[condition]][str(organ)]
        return self.settings.profile.example_rows(self, plan, organ, condition)

    def rows_used(self, cases: Sequence[Case]) -> list[int]:
        """The rows whose images and labels `cases` use: each case's test row and the rows of its
        few-shot examples, each once, in order of first use."""
        rows: dict[int, None] = {}
        examples: dict[tuple[str, int], list[int]] = {}  # 36 (condition, organ) pairs at most
        for case in cases:
            condition, organ = case.params["condition"], case.params["organ"]
            if (condition, organ) not in examples:
                examples[condition, organ] = self.example_rows(condition, organ)
            rows[case.params["row"]] = None
            rows.update(dict.fromkeys(examples[condition, organ]))
        return list(rows)

    def prepare(self, cases: Sequence[Case], progress: bool) -> None:
        """Before the run, on the controller (Evaluation.prepare): every row the selected cases
        use (rows_used) gets its canvas PNG, canvas label map and target points made and stored
        (canvas_folder, labels_folder, targets_folder), so the cases only read them and decode
        no frame or mask. Rows found stored are skipped; a pool of os.cpu_count() threads makes
        the others (Pillow, numpy and scipy release the GIL), under a bar counting rows when
        `progress`. Nothing is prepared without the stores (--no-cache; the source profile,
        whose canvas is the frame itself). A row that cannot be made (a broken file) is left to
        its cases, which make it again and fail naming the file."""
        if self._canvases is None or self._stored_labels is None or self._stored_targets is None:
            return
        todo = [r for r in self.rows_used(cases) if not self._is_prepared(r)]
        if not todo:
            return
        with (
            tqdm(
                total=len(todo), desc=f"{self.name}: preparing canvases", unit="row",
                leave=False, file=sys.stderr, disable=not progress,
            ) as bar,
            ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="pointing-prep") as pool,
        ):  # fmt: skip
            for _ in pool.map(self._prepare_row, todo):
                bar.update()

    def _is_prepared(self, row: int) -> bool:
        """Whether the row's canvas, label map and targets are all stored."""
        return all(
            (memo.folder / name).is_file()
            for memo, name in (
                (self._canvases, f"{row}.png"),
                (self._stored_labels, f"{row}.png"),
                (self._stored_targets, f"{row}.json"),
            )
            if memo is not None
        )

    def _prepare_row(self, row: int) -> None:
        """The row's canvas, label map and targets made and stored where missing (prepare): its
        frame and colour mask decoded once each, nothing kept in memory."""
        canvases, labels, targets = self._canvases, self._stored_labels, self._stored_targets
        assert canvases is not None and labels is not None and targets is not None
        made: list[np.ndarray] = []  # the label map made here, if it was

        def make_labels() -> bytes:
            made.append(self._label_canvas(row))
            return label_png(made[0])

        def make_targets() -> bytes:
            found = made[0] if made else read_label_png(data, str(labels.folder / name), CANVAS)
            return row_targets_json(found)

        try:
            canvases.get(f"{row}.png", lambda: self._canvas_png(row))
            name = f"{row}.png"
            data = labels.get(name, make_labels)
            targets.get(f"{row}.json", make_targets)
        except (ValueError, OSError):  # a broken file: the row's cases meet it and name it
            return

    def request(self, case: Case, model: ModelSpec | None = None) -> Request:
        row, organ, condition = case.params["row"], case.params["organ"], case.params["condition"]
        name = CLASS_NAMES[organ]
        image = self.frame(row)[0]
        examples = self.examples(condition, organ)
        rules = self.settings.profile
        return Request(
            parts=rules.few_shot(name, examples, image)
            if examples
            else rules.zero_shot(name, image),
            system=system_prompt(*self.canvas),  # the writeup's canvas: SYSTEM_PROMPT
            temperature=rules.temperature(model.provider if model is not None else ""),
            max_tokens=rules.max_tokens,
            target=self.answer(row, organ),
            answer_space=PointingAnswerSpace(name, self.canvas),
        )

    # ---- evaluation --------------------------------------------------------------------------
    async def evaluate(self, case: Case, client: CaseClient) -> Verdict:
        # on the loop when its frames and targets are in memory (each serves dozens of cases),
        # else off it: a file read, or a frame made where nothing was prepared
        request = await memoised_or_in_thread(self.request, case, client.model)
        rules = self.settings.profile
        try:
            response = await client.generate(request)
        except BackendError as exc:  # source: the original's adapters return "" after retries
            if not rules.failed_call_absent:
                raise
            answer = rules.parse("", self.canvas)
            return self.score(case, "", answer, extra={"backend_error": str(exc)})
        frame = None
        if self.settings.point_frame == "model":  # the model's processor config is read once
            frame = await asyncio.to_thread(self.point_frame, client.model)
        answer, written = parse_in_frame(rules.parse, response.text, self.canvas, frame)
        return self.score(case, response.text, answer, frame=frame, written=written)

    def point_frame(self, model: ModelSpec) -> PointFrame | None:
        """The frame an answer's point is read in: None (canvas px, as the prompt asks) unless
        `--pointing-point-frame model` and the model writes points in a frame of its own, its
        `box_convention` (support.backends.families): "resized" (Qwen2.5-VL: the canvas as its
        processor resizes it, support.backends.model_frames) or "norm1000" (Qwen2-VL, Qwen3-VL).
        Found once per model."""
        if self.settings.point_frame != "model":
            return None
        return self._point_frames.get(model, self._model_point_frame)

    def _model_point_frame(self, model: ModelSpec) -> PointFrame | None:
        convention = model.box_convention
        if convention == "norm1000":
            return PointFrame.norm1000()
        if convention == "resized":
            from support.backends.model_frames import input_size

            return PointFrame("resized", input_size(model.model_id, model.family, *self.canvas))
        return None

    def score(
        self,
        case: Case,
        raw: str,
        answer: PointingAnswer,
        extra: dict | None = None,
        *,
        frame: PointFrame | None = None,
        written: tuple[int, int] | None = None,
    ) -> Verdict:
        """The answer's verdict; `frame`: the model's frame its point was read in (recorded in
        the prediction with the point as `written` there), None for canvas px."""
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
        prediction = answer.to_json()
        if frame is not None:  # read in the model's frame: which, and the point as written there
            prediction["point_frame"] = frame.to_json()
            prediction["point_written"] = list(written) if written is not None else None
        return Verdict(
            status=status,
            scores={"y_true": y_true, "y_pred": y_pred, "hit": hit},
            prediction=prediction,
            target={"present": y_true, "point_canvas": self._target_list(row, organ, y_true)},
            raw=raw,
            extra=extra or {},
            read_by=read_rule(answer, raw),
        )

    def hits(self, row: int, organ: int, point: tuple[int, int] | None) -> bool:
        """Whether canvas pixel `point` (x, y), mapped back to image pixels, lies in the organ."""
        if point is None:
            return False
        _, box = self.frame(row)
        if box is None:  # the original's test (pointing_metrics.py check_point_hit, 277-282)
            x, y = point
            return (
                0 <= x < self.canvas[0]
                and 0 <= y < self.canvas[1]
                and bool(self.organ_mask(row, organ)[y, x])
            )
        # the label of the image pixel the point's centre maps to (Letterbox.to_image_pixel), as
        # the canvas label map holds it for each canvas pixel (IGNORE in the padding)
        x, y = point
        labels = self.canvas_labels(row)
        height, width = labels.shape
        return 0 <= x < width and 0 <= y < height and bool(labels[y, x] == organ)

    def _target_list(self, row: int, organ: int, present: int) -> list[int] | None:
        point = self.target_point(row, organ) if present else None
        return list(point) if point else None

    def _picture_canvas(self, row: int) -> tuple[np.ndarray, float]:
        """The canvas the model saw, scaled to PICTURE_PX wide (H, W, 3 uint8), and the factor
        from canvas px to picture px (decoded and scaled once per frame, not once per case)."""
        canvas = decode_image(self.frame(row)[0].image or b"", f"row {row}'s canvas")
        scale = min(1.0, PICTURE_PX / canvas.width)
        if scale < 1.0:
            size = (PICTURE_PX, round(canvas.height * scale))
            canvas = canvas.resize(size, Image.Resampling.BICUBIC, reducing_gap=2.0)
        return np.asarray(canvas), scale

    def render(self, case: Case, outcome: Outcome) -> bytes | None:
        """The canvas the model saw (PICTURE_PX wide) with the organ outlined in green, the
        predicted point as a red cross, and the organ, truth, answer and status written under
        it. Drawn on the scaled canvas: the outline is found at canvas resolution and scaled
        with it (nearest neighbour), the point scaled by the same factor."""
        row, organ = case.params["row"], case.params["organ"]
        scaled, scale = self._picture_canvas_of(row)
        outline = ndimage.binary_dilation(  # ~5 canvas px wide: ~4 px once scaled
            mask_outline(self.organ_mask(row, organ)), iterations=OUTLINE_GROW_PX
        )
        if scale < 1.0:
            size = (scaled.shape[1], scaled.shape[0])  # (W, H) px of the picture
            shrunk = Image.fromarray(outline.astype(np.uint8) * 255).resize(
                size, Image.Resampling.NEAREST
            )
            outline = np.asarray(shrunk) > 0
        pixels = scaled.copy()
        pixels[outline] = (0, 255, 0)
        prediction = outcome.prediction or {}
        point = prediction.get("point")
        present = (outcome.target or {}).get("present", case.params.get("present"))
        told = "no answer" if not prediction else "absent"
        if prediction.get("present"):
            told = f"present at {tuple(point)}" if point else "present, no point"
        lines = [
            f"{CLASS_NAMES.get(organ, organ)}: {'present' if present else 'absent'}   "
            f"answer: {told}   {outcome.status}",
        ]
        font_px = max(12, round(CAPTION_FONT_PX * scale))  # ~18 px at PICTURE_PX
        caption = round((CAPTION_FONT_PX + 10) * scale)  # a caption line's height (px)
        height, width = pixels.shape[:2]
        picture = Image.new("RGB", (width, height + caption * len(lines)), "white")
        picture.paste(Image.fromarray(pixels), (0, 0))
        draw = ImageDraw.Draw(picture)
        if point and len(point) == 2:
            x, y = point[0] * scale, point[1] * scale  # canvas px -> picture px
            arm, dot, width_px = 16 * scale, 9 * scale, max(2, round(5 * scale))
            draw.line([(x - arm, y), (x + arm, y)], fill=(255, 0, 0), width=width_px)
            draw.line([(x, y - arm), (x, y + arm)], fill=(255, 0, 0), width=width_px)
            draw.ellipse([(x - dot, y - dot), (x + dot, y + dot)], outline=(255, 255, 255), width=2)
        font = ImageFont.load_default(size=font_px)
        for i, line in enumerate(lines):
            draw.text((6, height + 4 + caption * i), line, fill=(0, 0, 0), font=font)
        return picture_jpeg(picture)

    def _picture_canvas_of(self, row: int) -> tuple[np.ndarray, float]:
        return self._pictures.get(row, self._picture_canvas)
