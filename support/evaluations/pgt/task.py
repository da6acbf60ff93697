"""The PGT evaluation: is an image real or AI-generated, with a phrase in one of five modes.

Cases are image x phrase x mode x n (baseline has no mode); the model is added by the pytest
parametrization. One case is two stages, two awaits, so the engine batches each stage across
cases: stage 1 asks the question (with the phrase) and samples n reasonings in one request
(temperature 0 for n=1, 1.0 for n>1); stage 2 continues each reasoning after
"Final Answer (real/ai-generated):" at temperature 0; the extracted labels are majority-voted
(ties go to `real`).

`--compat source` (PgtSettings.profile: support.evaluations.pgt.profiles.SOURCE) follows the
original script (Zero-shot-PGT f42b715, helpers.py): images in its shuffled order (random.seed(0),
shuffle), stage 2 = the stage-1 prompt + reasoning + " Final Answer (real/ai-generated):" with
512 tokens, the source's substring label rules and its vote (None is a candidate), stage-1
samples seeded with 0.

The source keeps existing results: a case whose image a kept reasoning file of its combination
holds (PgtSettings.kept, read at configure; not under --override) is read back from that file
(`reused`), with no model call, into the outcome the first run had.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, overload

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from support.contract.evaluation import CaseClient, Evaluation, Reused, linspace_subset
from support.contract.runner import CallLog
from support.evaluations.pgt.answers import CUT, LABELS, outcome_rule
from support.evaluations.pgt.dataset import PgtDataset, load_csv, read_image
from support.evaluations.pgt.layout import result_dir
from support.evaluations.pgt.phrases import QUESTION, Prompt, build_prompt
from support.evaluations.pgt.spec import PgtSettings
from support.evaluations.pgt.synthetic import ensure_pgt_sample
from support.images import decode_image
from support.memo import OnceCache
from support.reporting.kit import fit_picture, picture_jpeg
from support.settings import RunSettings
from support.types import Case, Outcome, Part, Request, Response, Verdict

STAGE1_MAX_TOKENS = 512  # reasoning
DEBUG_EXAMPLES = 5  # --pgt-debug, as the source's --debug
KEPT_FILES = 128  # kept reasoning files held parsed per process (one per combination and model)


@dataclass(frozen=True)
class LabelSpace:
    """`chance`'s stage-2 answers: a uniform label."""

    def sample(self, rng: np.random.Generator) -> str:
        return " " + LABELS[int(rng.integers(2))]


@dataclass(frozen=True)
class ReasoningSpace:
    """`chance`'s stage-1 answers: a short reasoning that ends on a uniform label."""

    def sample(self, rng: np.random.Generator) -> str:
        return f" The textures and lighting suggest the image is {LABELS[int(rng.integers(2))]}."


def oracle_reasoning(label: str) -> str:
    """What a perfect model reasons: ends on the right label (the `oracle`'s stage-1 target)."""
    return f" The textures, lighting and details show that this image is {label}."


def full_prompt_text(request: Request) -> str:
    """A readable transcript of a request for backends that render no prompt (APIs)."""
    lines = [f"[system] {request.system}"] if request.system else []
    user = " ".join("<image>" if p.is_image else (p.text or "") for p in request.parts)
    lines.append(f"[user] {user}")
    lines.append(f"[assistant] {request.prefill or ''}")
    return "\n".join(lines)


def transcript(responses: list[dict]) -> str:
    """The n reasonings and answers as one readable text (the raw answer in reports)."""
    return "\n\n".join(
        f"[{i}] {r['reasoning_response'].strip()}\n    -> {r['clean_answer_response'].strip()!r}"
        for i, r in enumerate(responses, 1)
    )


class CaseGrid(Sequence[Case]):
    """Cases of a PGT run in order (image, then method, then n), each built when read: all
    images, or those at `positions` (evaluation order)."""

    def __init__(self, ev: PgtEvaluation, positions: Sequence[int] | None = None) -> None:
        self._ev = ev
        self._positions = range(len(ev.examples)) if positions is None else positions
        self._methods = ev.settings.methods()
        self._ns = list(ev.settings.ns)
        self._per_image = len(self._methods) * len(self._ns)

    def __len__(self) -> int:
        return len(self._positions) * self._per_image

    @overload
    def __getitem__(self, index: int) -> Case: ...
    @overload
    def __getitem__(self, index: slice) -> list[Case]: ...
    def __getitem__(self, index: int | slice) -> Case | list[Case]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        image, rest = divmod(index % len(self), self._per_image)
        (phrase, mode), n = self._methods[rest // len(self._ns)], self._ns[rest % len(self._ns)]
        return self._ev.case(self._positions[image], phrase, mode, n)

    def __iter__(self) -> Iterator[Case]:
        for position in self._positions:
            for phrase, mode in self._methods:
                for n in self._ns:
                    yield self._ev.case(position, phrase, mode, n)


class PgtEvaluation(Evaluation):
    """Worker side: data, cases, the two stages, scoring. Controller side:
    support.evaluations.pgt.summary."""

    name: ClassVar[str] = "pgt"
    quick_samples: ClassVar[int] = 6

    def __init__(
        self,
        dataset: PgtDataset,
        settings: PgtSettings,
        positions: list[int],
        run: RunSettings,
    ) -> None:
        self.dataset = dataset
        self.settings = settings
        self.phrases = settings.phrases
        self.examples = [dataset.examples[i] for i in positions]  # in evaluation order
        self.by_row = {e.row: e for e in self.examples}
        # the quick subset is spread over CSV rows, so both profiles take the same images
        self.quick_rows = set(
            linspace_subset(sorted(e.row for e in self.examples), self.quick_samples)
        )
        self.run = run
        self._images: OnceCache[int, Part] = OnceCache(512)
        self._kept: OnceCache[str, dict[str, dict[str, Any]]] = OnceCache(KEPT_FILES)

    # ---- loading and cases -------------------------------------------------------------------
    @classmethod
    def load(cls, run: RunSettings, settings: PgtSettings) -> PgtEvaluation:
        csv = settings.csv if settings.csv is not None else ensure_pgt_sample(run.output.cache_dir)
        dataset = load_csv(csv, settings.dataset, paths=settings.paths)
        n = len(dataset.examples)
        order = settings.profile.order(n)
        if settings.debug:  # the first 5 in evaluation order, as the source's examples[:5]
            positions = order[:DEBUG_EXAMPLES]
        else:  # --samples: spread over CSV rows, kept in evaluation order
            chosen = set(linspace_subset(list(range(n)), run.samples))
            positions = [i for i in order if i in chosen]
        return cls(dataset, settings, positions, run)

    def cases(self) -> CaseGrid:
        """Image x (phrase, mode) x n, built when read: a 10^6-row CSV lists 22 M cases, and
        the suite keeps only those `-m` selects (fixtures.selection)."""
        return CaseGrid(self)

    def quick_cases(self) -> CaseGrid:
        quick = [p for p, ex in enumerate(self.examples) if ex.row in self.quick_rows]
        return CaseGrid(self, quick)

    def case(self, position: int, phrase: str, mode: str | None, n: int) -> Case:
        """The case of the `position`-th image (evaluation order) with this method and n."""
        ex = self.examples[position]
        method = phrase if mode is None else f"{phrase}-{mode}"
        params = {
            "row": ex.row,
            "image": str(ex.image),
            "phrase": phrase,
            "mode": mode,
            "n": n,
            "label": ex.label,
            "generator": ex.generator,
            **self.settings.profile.case_params(position),  # the profile (recorded) and order
        }
        group = {
            "dataset": self.dataset.name,
            "phrase": phrase,
            "mode": mode or "",
            "n": str(n),
            "generator": ex.generator,
        }
        cluster = f"r{ex.row:05d}"  # one image: its cases are resampled together
        return Case(f"{ex.id}-{method}-n{n}", self.name, params, group, cluster)

    def is_quick(self, case: Case) -> bool:
        return case.params["row"] in self.quick_rows

    def locality(self, case: Case) -> str:
        return case.cluster

    # ---- results the source keeps ------------------------------------------------------------
    def combination_dir(self, case: Case, model: str) -> Path:
        p = case.params
        return result_dir(
            self.run.output.results_dir, self.dataset.name, model, p["phrase"], p["mode"], p["n"]
        )

    async def reused(self, case: Case, model: str) -> Reused | None:
        """The case read back from the first kept reasoning file (name order) of its combination
        that holds its image without error; None (evaluate it) when there is none, or when the
        entry can no longer be read."""
        image = case.params["image"]
        kept = self.settings.kept.get(str(self.combination_dir(case, model)), ())
        path = next((path for path, done in kept if image in done), None)
        if path is None:
            return None
        return await asyncio.to_thread(self._read_back, case, path)

    def _read_back(self, case: Case, path: str) -> Reused | None:
        entry = self._kept.get(path, kept_entries).get(case.params["image"])
        if entry is None:
            return None
        verdict = self.verdict(
            case,
            entry["responses"],
            entry["aggregated_prediction"],
            entry["vote_distribution"],
            entry["full_prompt"],
            entry["question"],
        )
        # the stage-1 request's digest is the outcome's prompt hash, as in the run that wrote it
        return Reused(path, replace(verdict, calls=CallLog(requests=[self.stage1_request(case)])))

    # ---- requests ----------------------------------------------------------------------------
    def image(self, row: int) -> Part:
        """The image file's bytes as they are when PNG or JPEG (re-encoding would change what is
        being judged; GIF, BMP, TIFF and WebP are sent re-encoded as PNG, losslessly), once
        decoded: an unreadable one is an ImageError naming it, its cases errors."""

        def part(r: int) -> Part:
            path = self.by_row[r].image
            return Part.of_image(read_image(path), label=str(path))

        return self._images.get(row, part)

    def prompt(self, case: Case) -> Prompt:
        phrase, mode = self.phrases[case.params["phrase"]], case.params["mode"] or "prefill"
        return build_prompt(phrase, mode, instruct=self.settings.profile.instruct)

    def stage1_request(self, case: Case) -> Request:
        n, label = case.params["n"], case.params["label"]
        prompt = self.prompt(case)
        return Request(
            parts=(self.image(case.params["row"]), Part.of_text(prompt.user_text)),
            system=prompt.system,
            prefill=prompt.prefill,
            temperature=0.0 if n == 1 else 1.0,
            max_tokens=STAGE1_MAX_TOKENS,
            n=n,
            seed=None if n == 1 else self.settings.profile.seed(self.run.seed),
            target=oracle_reasoning(label),
            answer_space=ReasoningSpace(),
        )

    def stage2_request(self, stage1: Request, reasoning: str, label: str) -> Request:
        """Continue the stage-1 prompt and this reasoning with the final-answer cue."""
        rules = self.settings.profile
        return Request(
            parts=stage1.parts,
            system=stage1.system,
            prefill=(stage1.prefill or "") + reasoning + rules.cue,
            temperature=0.0,
            max_tokens=rules.stage2_max_tokens,
            target=" " + label,
            answer_space=LabelSpace(),
        )

    # ---- evaluation --------------------------------------------------------------------------
    async def evaluate(self, case: Case, client: CaseClient) -> Verdict:
        label = case.params["label"]
        stage1 = await asyncio.to_thread(self.stage1_request, case)  # file read off the loop
        first = await client.generate(stage1)
        reasonings = list(first.texts)
        stage2 = [self.stage2_request(stage1, r, label) for r in reasonings]
        answers = await asyncio.gather(*(client.generate(r) for r in stage2))
        return self.score(case, stage1, first, list(answers))

    def score(
        self, case: Case, stage1: Request, first: Response, answers: list[Response]
    ) -> Verdict:
        label = case.params["label"]
        read, vote_of = self.settings.profile.read, self.settings.profile.vote
        responses = []
        for reasoning, answer in zip(first.texts, answers, strict=True):
            # a final answer cut by the token limit is unparsable, whatever it holds (a
            # thinking model that spent the limit thinking leaves none; thinking is never read)
            predicted = None if answer.truncated else read(answer.text)[0]
            responses.append(
                {
                    "reasoning_response": reasoning,
                    "clean_answer_response": answer.text,
                    "extracted_prediction": predicted,
                    "score": int(predicted == label),
                }
            )
        vote = vote_of([r["extracted_prediction"] for r in responses])
        full_prompt = first.prompt or full_prompt_text(stage1)
        return self.verdict(case, responses, vote.prediction, vote.distribution, full_prompt)

    def verdict(
        self,
        case: Case,
        responses: list[dict[str, Any]],
        prediction: str | None,
        distribution: Mapping[Any, int],
        full_prompt: str,
        question: str = QUESTION,
    ) -> Verdict:
        """The case's verdict from its scored responses and vote: what a reasoning file's entry
        holds, so a kept entry is read back into the same verdict."""
        label = case.params["label"]
        if prediction is None:
            status = "unparsable"
        else:
            status = "correct" if prediction == label else "wrong"
        return Verdict(
            status=status,
            scores={
                "y_true": label,
                "y_pred": prediction,
                "individual_correct": sum(r["score"] for r in responses),
                "individual_total": len(responses),
            },
            prediction={"aggregated_prediction": prediction, "vote_distribution": distribution},
            target={"label": label, "generator": case.params["generator"]},
            raw=transcript(responses),
            extra={"question": question, "full_prompt": full_prompt, "responses": responses},
            read_by=outcome_rule([self.read_by(r) for r in responses]),
        )

    def read_by(self, response: Mapping[str, Any]) -> str:
        """The code of the rule that read one answer of a reasoning entry (a kept entry's too):
        `cut` when the label it holds was not read (the answer was cut by the token limit)."""
        label, code = self.settings.profile.read(response.get("clean_answer_response"))
        return CUT if label is not None and response.get("extracted_prediction") is None else code

    def render(self, case: Case, outcome: Outcome) -> bytes | None:
        """The image (up to 640 px) with the truth and the vote written under it (a canvas at
        least 480 px wide, for the text)."""
        picture = decode_image(self.image(case.params["row"]).image or b"", "the case's image")
        fit_picture(picture)
        votes = (outcome.prediction or {}).get("vote_distribution", {})
        predicted = (outcome.prediction or {}).get("aggregated_prediction")
        font = ImageFont.load_default(size=18)  # px
        lines = [f"truth: {case.params['label']}", f"vote: {predicted} {votes}"]
        lines = [part for line in lines for part in textwrap.wrap(str(line), 60) or [""]]
        width = max(picture.width, 480)
        canvas = Image.new("RGB", (width, picture.height + 8 + 24 * len(lines)), "white")
        canvas.paste(picture, (0, 0))
        draw = ImageDraw.Draw(canvas)
        color = (0, 128, 0) if outcome.status == "correct" else (200, 0, 0)
        for i, line in enumerate(lines):
            fill = "black" if i == 0 else color
            draw.text((6, picture.height + 4 + 24 * i), line, fill=fill, font=font)
        return picture_jpeg(canvas)


RESPONSE_TYPES = {
    "reasoning_response": str,
    "clean_answer_response": str,
    "extracted_prediction": (str, type(None)),
    "score": int,
}
ENTRY_TYPES = {
    "question": str,
    "full_prompt": str,
    "aggregated_prediction": (str, type(None)),
    "vote_distribution": dict,
    "responses": list,
}


def kept_entries(path: str) -> dict[str, dict[str, Any]]:
    """A kept reasoning file's entries by image, those without error whose fields a verdict is
    rebuilt from have the types a run writes; {} for a file that cannot be read. The file is
    text from disk: a malformed entry only means its image is evaluated again."""
    try:
        entries = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(entries, list):
        return {}
    return {
        str(e["image"]): e
        for e in entries
        if isinstance(e, dict) and "image" in e and not e.get("error") and _well_formed(e)
    }


def _well_formed(entry: dict[str, Any]) -> bool:
    if not all(isinstance(entry.get(k), t) for k, t in ENTRY_TYPES.items()):
        return False
    return bool(entry["responses"]) and all(
        isinstance(r, dict) and all(isinstance(r.get(k), t) for k, t in RESPONSE_TYPES.items())
        for r in entry["responses"]
    )
