"""The SurgVU evaluation: surgical VQA (category 2) and tool detection (category 1).

Two kinds of case, both parametrized per model:

- `vqa-<case>`: one question about a clip. The model sees `--surgvqa-frames` frames of the clip
  (centres of equal segments, in time order) and the question, and answers in free text. Under
  `--surgvqa-input video` it sees the clip as one video part instead, sampled at `--surgvqa-fps`
  (support.videos.read_clip), each engine sending it its own way; the outcome's `extra.sent`
  records what went: the frames, the rate and the clip's seconds. The score
  is the best sentence BLEU over the five references (support.evaluations.surgvqa.bleu, the
  challenge's evaluator). Status: for a yes/no question, `correct` when the answer's first word is
  the references' yes/no; for an open one, when max-BLEU >= OPEN_CORRECT_BLEU. An empty or refusing
  answer scores 0 and is `unparsable` (yes/no) or `wrong` (open); it still counts in the mean.
- `tools-v<video>-f<frame>`: one 1 fps frame with truth boxes. The model lists every instrument
  as `{"label", "bbox_2d"}` in the frame's pixels (support.evaluations.surgvqa.prompts); the answer
  is read by support.evaluations.surgvqa.boxes. Status: `correct` when pycocotools matches every
  truth box and every predicted box at IoU 0.5 on this frame, `wrong` otherwise, `unparsable` when
  no box list could be read (scored as no detections). mAP is computed over all frames by the
  summary.

Clusters (the bootstrap's unit) are videos: a VQA case's clip, a tool frame's video.
"""

from __future__ import annotations

import asyncio
import dataclasses
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from support.contract.evaluation import CaseClient, Evaluation, linspace_subset
from support.evaluations.surgvqa.bleu import (
    best_reference,
    candidate_cut,
    is_yes_no_question,
    reference_scores,
    yes_no,
    yes_no_truth,
)
from support.evaluations.surgvqa.boxes import boxes_json, parse_boxes, xywh_boxes
from support.evaluations.surgvqa.coco import (
    detections,
    evaluate,
    frame_truth,
    ground_truth,
)
from support.evaluations.surgvqa.dataset import (
    SurgvuDataError,
    ToolFrame,
    ToolVideo,
    VqaItem,
    read_tools,
    read_vqa,
)
from support.evaluations.surgvqa.prompts import (
    BOX_MAX_TOKENS,
    TEMPERATURE,
    VQA_MAX_TOKENS,
    BoxAnswerSpace,
    VqaAnswerSpace,
    box_prompt,
    oracle_answer,
    vqa_prompt,
    vqa_video_prompt,
)
from support.evaluations.surgvqa.read_rules import vqa_rule
from support.evaluations.surgvqa.rouge import rouge_scores
from support.evaluations.surgvqa.spec import SurgvqaSettings
from support.evaluations.surgvqa.synthetic import ensure_surgvu
from support.evaluations.surgvqa.tools import CATEGORY_ID
from support.evaluations.surgvqa.video import (
    PastTheEndError,
    evenly_spaced,
    frame_count,
    iter_frames,
    read_frames,
)
from support.images import decode_image, encode_image
from support.memo import OnceCache
from support.reporting.kit import PICTURE_PX, fit_picture, picture_jpeg
from support.settings import RunSettings
from support.types import Case, Outcome, Part, Request, Verdict
from support.videos import Clip, read_clip

OPEN_CORRECT_BLEU = 0.5  # an open answer is coloured `correct` from this max-BLEU on
JPEG_QUALITY = 95  # frames are sent as JPEG (they come from an H.264 video already)
# the HTML picture of a VQA case: 2 x 2 frames, each up to this a side (px)
VQA_TILE_PX = PICTURE_PX // 2
VQA_LINE_CHARS = 62  # its text wrapped at this many characters (18 px font, 640 px wide)
TRUTH, PREDICTED = (0, 200, 0), (230, 0, 0)  # box colours of the HTML pictures


def vqa_case_id(item: VqaItem) -> str:
    return f"vqa-{item.case}"


def tool_case_id(frame: ToolFrame) -> str:
    return f"tools-v{frame.video}-f{frame.frame:05d}"


def truth_boxes(frame: ToolFrame) -> list[dict[str, Any]]:
    """A frame's truth boxes as plain JSON: label, COCO category id and [x, y, w, h] pixels."""
    return [
        {"label": label, "category_id": CATEGORY_ID[label], "bbox": list(bbox)}
        for label, bbox in frame.boxes
    ]


def jpeg(rgb: np.ndarray) -> bytes:
    return encode_image(Image.fromarray(rgb), "JPEG", quality=JPEG_QUALITY)


class SurgvqaEvaluation(Evaluation):
    """Worker side: data, requests, scoring. Controller side:
    support.evaluations.surgvqa.summary."""

    name: ClassVar[str] = "surgvqa"
    quick_samples: ClassVar[int] = 3  # VQA questions in the quick subset (and 2x as many frames)

    def __init__(self, vqa: list[VqaItem], tools: list[ToolVideo], settings: SurgvqaSettings):
        self.settings = settings
        self.vqa = {vqa_case_id(item): item for item in vqa}
        self.videos = {video.name: video for video in tools}
        self.frames = {tool_case_id(f): f for video in tools for f in video.frames}
        self.quick = set(linspace_subset(list(self.vqa), self.quick_samples))
        self.quick |= set(linspace_subset(list(self.frames), 2 * self.quick_samples))
        self._clips: OnceCache[str, tuple[list[int], list[bytes]]] = OnceCache(16)
        self._video_frames: OnceCache[str, dict[int, bytes | str]] = OnceCache(2)
        self._videos: OnceCache[str, Clip] = OnceCache(8)  # --surgvqa-input video's clips

    @classmethod
    def load(cls, run: RunSettings, settings: SurgvqaSettings) -> SurgvqaEvaluation:
        root = Path(settings.root) if settings.root else ensure_surgvu(run.output.cache_dir)
        vqa, tools = read_vqa(root), read_tools(root)
        if not vqa and not tools:
            raise FileNotFoundError(
                f"{root}: no SurgVU data found (caseNNN/caseNNN_question.json for VQA, "
                "N_fps1.mp4 with N_fps1_coco.json or N_fps1_gc.json for tools)"
            )
        vqa = [vqa[i] for i in linspace_subset(list(range(len(vqa))), run.samples)]
        if run.samples is not None:  # --samples N: N evenly spaced frames of each video
            tools = [
                ToolVideo(
                    v.name,
                    v.video,
                    tuple(
                        v.frames[i]
                        for i in linspace_subset(list(range(len(v.frames))), run.samples)
                    ),
                )
                for v in tools
            ]
        return cls(vqa, tools, settings)

    def cases(self) -> list[Case]:
        out = []
        for case_id, item in self.vqa.items():
            kind = "yes_no" if is_yes_no_question(item.question) else "open"
            params = {
                "category": "vqa",
                "case": item.case,
                "question": item.question,
                "answers": list(item.answers),
                "kind": kind,
            }
            group = {"category": "vqa", "kind": kind}
            out.append(Case(case_id, self.name, params, group, cluster=f"video-{item.case}"))
        for case_id, f in self.frames.items():
            params = {
                "category": "tools",
                "video": f.video,
                "frame": f.frame,
                "file_name": f.file_name,
                "width": f.width,
                "height": f.height,
                "boxes": truth_boxes(f),
                **self.settings.profile.case_params,  # the profile, for the record (raw_results)
            }
            group = {"category": "tools", "kind": "boxes"}
            out.append(Case(case_id, self.name, params, group, cluster=f"video-{f.video}"))
        return out

    def is_quick(self, case: Case) -> bool:
        return case.id in self.quick

    def locality(self, case: Case) -> str:
        return case.cluster  # one video decoded once per process

    # ---- frames -------------------------------------------------------------------------------
    def clip(self, case: Case) -> tuple[list[int], list[bytes]]:
        """A VQA case's frame indices and JPEG frames (decoded once per process)."""

        def load(case_id: str) -> tuple[list[int], list[bytes]]:
            path = self.vqa[case_id].video
            indices = evenly_spaced(frame_count(path), self.settings.frames)
            return indices, [jpeg(rgb) for rgb in read_frames(path, indices)]

        return self._clips.get(case.id, load)

    def video(self, case: Case) -> Clip:
        """A VQA case's clip as one video, sampled at --surgvqa-fps (the video door: header caps,
        allowed containers and codecs; read once per process)."""
        return self._videos.get(
            case.id, lambda case_id: read_clip(self.vqa[case_id].video, fps=self.settings.fps)
        )

    def sent(self, case: Case) -> dict[str, Any]:
        """What a VQA case's request showed of its clip under --surgvqa-input video, for the
        outcome's record (the default's rows record nothing new)."""
        clip = self.video(case)
        return {
            "input": "video",
            "frames": len(clip.frames),
            "fps": self.settings.fps,
            "seconds": round(clip.seconds, 6),
        }

    def frame_jpeg(self, case: Case) -> bytes:
        """A tools case's frame as JPEG; the first request of a video decodes all of its case
        frames in one pass (one decode of the video per process, not one per frame)."""
        name = case.params["video"]

        def load(video: str) -> dict[int, bytes | str]:
            """Each case frame's JPEG, or the message of what is wrong with that frame alone."""
            v = self.videos[video]
            sizes = {f.frame: (f.height, f.width) for f in v.frames}  # rows, columns (px)
            out: dict[int, bytes | str] = {}
            try:
                for k, rgb in iter_frames(v.video, list(sizes)):
                    if rgb.shape[:2] != sizes[k]:  # the truth boxes are in the annotation's pixels
                        h, w = sizes[k]
                        out[k] = (
                            f"{v.video}: frame {k} is {rgb.shape[1]}x{rgb.shape[0]} px but its "
                            f"annotation says {w}x{h}"
                        )
                    else:
                        out[k] = jpeg(rgb)
            except PastTheEndError as exc:  # the frames before the end are fine
                for k in sizes.keys() - out.keys():
                    out[k] = (
                        f"{v.video}: frame {k} (image id {k} of its annotations) is past the end "
                        f"of the video ({exc.n_frames} decodable frames)"
                    )
            except ValueError as exc:  # the video stops decoding: the frames after it fail
                for k in sizes.keys() - out.keys():
                    out[k] = f"{v.video}: frame {k} (image id {k}) cannot be read: {exc}"
            return out

        got = self._video_frames.get(name, load)[case.params["frame"]]
        if isinstance(got, str):
            raise SurgvuDataError(got)
        return got

    # ---- requests -----------------------------------------------------------------------------
    def request(self, case: Case) -> Request:
        p = case.params
        if p["category"] == "vqa" and self.settings.input == "video":
            clip = self.video(case)
            return Request(
                parts=(
                    Part.of_video(clip),
                    Part.of_text(vqa_video_prompt(p["question"], clip.seconds, self.settings.fps)),
                ),
                temperature=TEMPERATURE,
                max_tokens=VQA_MAX_TOKENS,
                target=oracle_answer(p["answers"]),
                answer_space=VqaAnswerSpace(),
            )
        if p["category"] == "vqa":
            _, frames = self.clip(case)
            parts = (
                *(Part.of_image(f) for f in frames),
                Part.of_text(vqa_prompt(p["question"], len(frames))),
            )
            return Request(
                parts=parts,
                temperature=TEMPERATURE,
                max_tokens=VQA_MAX_TOKENS,
                target=oracle_answer(p["answers"]),
                answer_space=VqaAnswerSpace(),
            )
        width, height = p["width"], p["height"]
        return Request(
            parts=(Part.of_image(self.frame_jpeg(case)), Part.of_text(box_prompt(width, height))),
            temperature=TEMPERATURE,
            max_tokens=BOX_MAX_TOKENS,
            target=boxes_json(xywh_boxes(p["boxes"]), width=width, height=height),
            answer_space=BoxAnswerSpace(width, height),
        )

    async def evaluate(self, case: Case, client: CaseClient) -> Verdict:
        request = await asyncio.to_thread(self.request, case)  # video decoding off the loop
        response = await client.generate(request)
        if case.params["category"] == "vqa":
            verdict = self.score_vqa(case, response.text)
            if self.settings.input == "video":  # the default's rows stay as they were
                verdict = dataclasses.replace(verdict, extra={"sent": self.sent(case)})
            return verdict
        frame = self.settings.box_frame
        frame = client.model.box_convention if frame == "model" else frame  # the model's trait
        return await asyncio.to_thread(self._score_in_frame, case, response.text, frame, client)

    def _score_in_frame(self, case: Case, answer: str, frame: str, client: CaseClient) -> Verdict:
        """score_boxes, with the size the model saw the frame at when it answers in that frame's
        pixels ("resized": its processor's resize, support.backends.model_frames)."""
        seen = None
        if frame == "resized":
            from support.backends.model_frames import input_size

            model, p = client.model, case.params
            seen = input_size(model.model_id, model.family, p["width"], p["height"])
        return self.score_boxes(case, answer, frame, seen)

    def score_vqa(self, case: Case, answer: str) -> Verdict:
        """Max sentence-BLEU over the references (and max ROUGE-1/2/L F-measure, unless
        --surgvqa-metrics 2025); yes/no exact match for yes/no questions. BERTScore and NLI are
        added on the controller (summary.score_outcomes)."""
        refs = case.params["answers"]
        per_reference = reference_scores(refs, answer)  # BLEU once per reference
        bleu, best = best_reference(per_reference)
        truth = yes_no_truth(refs) if case.params["kind"] == "yes_no" else None
        said = yes_no(answer)
        scores: dict[str, Any] = {
            "bleu": bleu,
            "reference_bleu": per_reference,
            "yes_no_correct": None,
        }
        if "rouge1" in self.settings.text_metrics:
            scores |= rouge_scores(refs, answer)
        if truth is not None:
            scores["yes_no_correct"] = int(said == truth)
            status = "unparsable" if said is None else ("correct" if said == truth else "wrong")
        else:
            status = "correct" if bleu >= OPEN_CORRECT_BLEU else "wrong"
        prediction: dict[str, Any] = {"answer": answer, "yes_no": said, "best_reference": best}
        if cut := candidate_cut(answer):  # tokens past bleu.MAX_CANDIDATE_TOKENS, not scored
            prediction["candidate_cut"] = cut
        return Verdict(
            status=status,
            scores=scores,
            prediction=prediction,
            target={"references": refs, "yes_no": truth},
            read_by=vqa_rule(answer, truth is not None, said),
        )

    def score_boxes(
        self, case: Case, answer: str, frame: str, seen: tuple[int, int] | None = None
    ) -> Verdict:
        """The frame's boxes matched by pycocotools at IoU 0.5 (counts for P/R/F1@0.5). `seen`:
        the (width, height) px the model saw the frame at, for the "resized" frame."""
        p = case.params
        parsed = parse_boxes(answer, p["width"], p["height"], frame, seen)  # type: ignore[arg-type]
        target = {k: p[k] for k in ("video", "frame", "file_name", "width", "height", "boxes")}
        scored = evaluate(ground_truth([frame_truth(1, target)]), detections(1, parsed.boxes))
        scores = {"tp50": scored.tp50, "n_dt": scored.n_dt, "n_gt": scored.n_gt}
        readable = parsed.boxes or parsed.reason in ("ok", "empty list")
        if not readable:
            status = "unparsable"
        elif scored.tp50 == scored.n_gt == scored.n_dt:
            status = "correct"
        else:
            status = "wrong"
        boxes = [{"label": b.label, "bbox": b.xywh()} for b in parsed.boxes]
        prediction = {
            "boxes": boxes,
            "parsed_by": parsed.reason,
            "dropped": parsed.dropped,
            "box_frame": frame,
        }
        if frame == "resized" and seen is not None:  # the size its numbers were read in (px)
            prediction["seen"] = list(seen)
        if parsed.over_cap:  # boxes past the cap (COCO would not count them either)
            prediction["over_cap"] = parsed.over_cap
        return Verdict(
            status=status,
            scores=scores,
            prediction=prediction,
            target=target,
            read_by=parsed.read_by,
        )

    # ---- pictures -----------------------------------------------------------------------------
    def render(self, case: Case, outcome: Outcome) -> bytes | None:
        """Tools: the frame, truth boxes green, predicted red. VQA: up to four of the frames,
        the question, the answer, the best reference and the score."""
        font = ImageFont.load_default(size=18)  # px
        if case.params["category"] == "tools":
            image = decode_image(self.frame_jpeg(case), f"{case.params['video']} frame")
            draw = ImageDraw.Draw(image)
            target = outcome.target or {"boxes": case.params["boxes"]}
            for colour, boxes in (
                (TRUTH, target["boxes"]),
                (PREDICTED, (outcome.prediction or {}).get("boxes", [])),
            ):
                for b in boxes:
                    x, y, w, h = b["bbox"]
                    draw.rectangle([x, y, x + w, y + h], outline=colour, width=3)
                    draw.text((x + 3, y + 2), b["label"], fill=colour, font=font)
            return picture_jpeg(fit_picture(image))
        if self.settings.input == "video":  # the frames the model was sent
            sampled = self.video(case).frames
            kept = linspace_subset(list(range(len(sampled))), 4)
            shown = [Image.fromarray(sampled[i]) for i in kept]
        else:
            _, frames = self.clip(case)
            shown = [
                decode_image(frames[i], f"{case.id} frame {i}")
                for i in linspace_subset(list(range(len(frames))), 4)
            ]
        tile = VQA_TILE_PX
        for im in shown:
            im.thumbnail((tile, tile))
        refs = case.params["answers"]
        best = (outcome.prediction or {}).get("best_reference")
        answer = (outcome.prediction or {}).get("answer", outcome.raw)
        told = [
            f"Q: {case.params['question']}",
            f"A: {answer!s:.300}",
            f"best reference: {refs[best] if best is not None else '-'}",
            f"max BLEU {outcome.scores.get('bleu', float('nan')):.4f}   status {outcome.status}",
        ]
        lines = [part for line in told for part in textwrap.wrap(line, VQA_LINE_CHARS) or [""]]
        columns = min(2, len(shown)) or 1  # a 2 x 2 grid: wide pictures would shrink the text
        rows = -(-len(shown) // columns)
        row_px = max((im.height for im in shown), default=0)
        text_top = row_px * rows + 6
        canvas = Image.new("RGB", (tile * columns, text_top + 24 * len(lines) + 6), "white")
        for i, im in enumerate(shown):
            canvas.paste(im, ((i % columns) * tile, (i // columns) * row_px))
        draw = ImageDraw.Draw(canvas)
        for j, line in enumerate(lines):
            draw.text((6, text_top + 24 * j), line, fill=(0, 0, 0), font=font)
        return picture_jpeg(canvas)
