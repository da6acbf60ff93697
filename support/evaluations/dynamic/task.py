"""The dynamic evaluation (worker side): one pytest case per round of a search for failures.

A search is a strategy and, for `dynamic`, a lambda: `dynamic-lambda0.2`, `random`. Its rounds are
the cases `<search>-round00` (the cold start) ... `<search>-round09`; round k waits for round k-1
(`Case.after`) and plans its tasks from the verdicts of the rounds before it (`client.history`) with
support.evaluations.dynamic.search.Search, whose every random choice is seeded by (seed, round): a
killed run, started again, plans the same tasks and gets the answers it had from the response cache.
Each round yields one outcome per task, `<case>-tNNN` with NNN the task's place in the evaluation
order (AnyPoint's `task_id`).

The costly step, as in the original, is a task's evaluation: the scene is assembled from its
layout and objects and shown to the model with the question and lettered options (prompts.py).
What a model is shown follows what it reads (`client.model.modalities`): a model reading images
gets the scene rendered on the CPU (render.py; cached by scene hash), a point-cloud model the
(N, 6) float64 cloud itself (AnyPoint's scene, as hard_data saves it), a model reading both gets
both. Each outcome records what was sent (`extra["sent"]`) and the cloud's content hash, never
its values.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from support.contract.evaluation import CaseClient, CaseSkipped, Evaluation
from support.evaluations.dynamic.assets import Asset, read_assets
from support.evaluations.dynamic.embedder import Embedder, load_embedder
from support.evaluations.dynamic.prompts import OptionSpace, letters, source_prompt_text
from support.evaluations.dynamic.questions import Task, evaluator_category
from support.evaluations.dynamic.render import render
from support.evaluations.dynamic.scenes import build_scene, read_layouts
from support.evaluations.dynamic.search import Search, SearchConfig
from support.evaluations.dynamic.spec import (
    IMAGE_SIZE,
    QUICK_ROUNDS,
    DynamicSettings,
    asset_folder,
    format_lambda,
)
from support.evaluations.dynamic.vectors import StoredEmbedder, store_path
from support.images import encode_image
from support.memo import OnceCache
from support.reporting.kit import fit_picture, picture_jpeg
from support.settings import RunSettings
from support.types import Case, Outcome, Part, Request, Verdict

LAYOUTS_FILE = "layouts.json"
MAX_TOKENS = 128  # a letter, or a short sentence around it
ERROR_SHOWN = 300  # characters of an earlier round's error a later round's skip reason quotes


def search_id(strategy: str, lam: float | None) -> str:
    """`dynamic-lambda0.2` for a dynamic search, `random` for the baseline (it has no lambda)."""
    return "random" if strategy == "random" else f"{strategy}-lambda{format_lambda(lam or 0.0)}"


def round_case_id(search: str, round_index: int) -> str:
    return f"{search}-round{round_index:02d}"


def scene_key(task: Task) -> str:
    """sha256 of what makes the scene: the layout and which object stands in each place."""
    text = json.dumps([task.layout, sorted(task.assignment.items())], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def sent_modalities(reads: frozenset[str]) -> tuple[str, ...]:
    """What a model reading `reads` is shown of a scene: ("image",), ("points",) or both; empty
    when it reads neither."""
    return tuple(m for m in ("image", "points") if m in reads)


def drawn(scene: np.ndarray) -> np.ndarray:
    """The scene as the pictures are drawn: rounded to float32, as scenes were before they
    became float64 (AnyPoint's dtype, for hard_data), so pictures, and with them the response
    cache's keys, stay byte-identical."""
    return scene.astype(np.float32)


class _LazyEmbedder:
    """The run's embedder, loaded on first use (a random search never loads it), its vectors
    kept in `store` (a folder; support/evaluations/dynamic/vectors.py) unless None."""

    def __init__(self, spec: str, store: Path | None = None) -> None:
        self.name = spec
        self.store = store
        self._loaded: Embedder | None = None

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._loaded is None:
            loaded = load_embedder(self.name)
            if self.store is not None:
                loaded = StoredEmbedder(loaded, store_path(self.store, loaded.name))
            self._loaded = loaded
        return self._loaded.encode(texts)


class DynamicEvaluation(Evaluation):
    name: ClassVar[str] = "dynamic"

    def __init__(
        self,
        settings: DynamicSettings,
        assets: Mapping[str, Asset],
        layouts: Sequence[dict] | None = None,
        store: Path | None = None,
    ) -> None:
        self.settings = settings
        self.assets = assets
        self.layouts = layouts
        self.embedder = _LazyEmbedder(settings.embedder, store)
        self._searches: dict[str, Search] = {}
        self._images: OnceCache[str, bytes] = OnceCache(maxsize=256)  # scene key -> PNG
        # scene key -> its cloud (a read-only (N, 6) float64 Part, ~0.5 MB for 10k points)
        self._clouds: OnceCache[str, Part] = OnceCache(maxsize=64)

    @classmethod
    def load(cls, run: RunSettings, settings: DynamicSettings) -> DynamicEvaluation:
        folder = asset_folder(settings, run)
        layouts = None
        if settings.data and (folder / LAYOUTS_FILE).is_file():
            layouts = read_layouts(folder / LAYOUTS_FILE)
        store = run.output.cache_dir / "embeddings" if run.output.use_cache else None
        return cls(settings, read_assets(folder), layouts, store)

    # ---- the searches and their rounds ------------------------------------------------------
    def searches(self) -> list[tuple[str, str, float | None]]:
        """(search id, strategy, lambda) of every search of the run, in a stable order."""
        out: list[tuple[str, str, float | None]] = []
        for strategy in self.settings.strategies:
            for lam in [None] if strategy == "random" else list(self.settings.lambdas):
                out.append((search_id(strategy, lam), strategy, lam))
        return out

    def config(self, strategy: str, lam: float | None) -> SearchConfig:
        s = self.settings
        return SearchConfig(
            budget=s.budget,
            batch=s.batch,
            pool=s.pool,
            lam=0.0 if lam is None else lam,
            seed=s.seed,
            strategy=strategy,
            rules=s.profile.search,
        )

    def search(self, strategy: str, lam: float | None) -> Search:
        """The planner of one search; all searches share one set of pools and task vectors."""
        sid = search_id(strategy, lam)
        if sid not in self._searches:
            config = self.config(strategy, lam)
            if self._searches:
                first = next(iter(self._searches.values()))
                found = first.variant(strategy=config.strategy, lam=config.lam)
            else:
                found = Search(
                    config, self.assets, self.embedder, self.settings.categories, self.layouts
                )
            self._searches[sid] = found
        return self._searches[sid]

    def cases(self) -> list[Case]:
        rounds = -(-self.settings.budget // self.settings.batch)
        out = []
        for sid, strategy, lam in self.searches():
            lam_text = "" if lam is None else format_lambda(lam)
            group = {"search": sid, "strategy": strategy, "lambda": lam_text}
            for k in range(rounds):
                params = {"search": sid, "strategy": strategy, "lambda": lam, "round": k}
                after = round_case_id(sid, k - 1) if k else None
                out.append(Case(round_case_id(sid, k), self.name, params, group, sid, after))
        return out

    def is_quick(self, case: Case) -> bool:
        return case.params["round"] < QUICK_ROUNDS

    def locality(self, case: Case) -> str:
        return case.params["search"]  # a search runs in one process, round after round

    # ---- one round -------------------------------------------------------------------------
    def history(self, case: Case, search: Search, earlier: Sequence[Outcome]) -> list[tuple]:
        """The (task, answered correctly) pairs of the earlier rounds, in evaluation order.
        CaseSkipped when an earlier round broke: a search cannot go on without its verdicts, so
        each later round is skipped quoting the first error (the broken round failed with it;
        a rerun gets the answers already received from the response cache)."""
        broken = [o for o in earlier if "task_key" not in o.extra]
        if broken:
            first = ((broken[0].error or "").strip().splitlines() or ["(no message)"])[0]
            text = textwrap.shorten(first, ERROR_SHOWN, placeholder=" ...")
            raise CaseSkipped(f"an earlier round of this search ended in an error: {text}")
        rows = []
        pools: dict[int, dict[str, Task]] = {}  # round -> its candidates by key
        for o in sorted(earlier, key=lambda o: o.extra["task_id"]):
            k = o.extra["round"]
            if k not in pools:
                pools[k] = {t.key: t for t in search.candidates(k)}
            task = pools[k].get(o.extra["task_key"])
            if task is None:
                raise RuntimeError(
                    f"{case.id}: task {o.extra['task_key']} of {o.case_id} is not in its round's "
                    "pool; were the search's options changed between the rounds?"
                )
            rows.append((task, o.status == "correct"))
        return rows

    def image(self, task: Task) -> bytes:
        """The task's scene rendered as PNG (cached by scene key)."""

        def draw(_: str) -> bytes:
            scene = build_scene(task.layout, task.assignment, self.assets)
            return encode_image(render(drawn(scene), IMAGE_SIZE), "PNG")

        return self._images.get(scene_key(task), draw)

    def cloud(self, task: Task) -> Part:
        """The task's scene as a point-cloud part: (N, 6) float64, xyz in metres (Y up) and rgb
        in [0, 1], as AnyPoint's generator builds and saves it (cached by scene key)."""

        def build(_: str) -> Part:
            return Part.of_points(build_scene(task.layout, task.assignment, self.assets))

        return self._clouds.get(scene_key(task), build)

    def request(self, task: Task, sent: tuple[str, ...] = ("image",)) -> Request:
        """The task as a request showing the scene as `sent` says (sent_modalities): the
        picture, then the cloud; then the text: the profile's prompt where there is a picture
        (the write-up's states the camera), the original's text for a cloud alone."""
        truth = letters(len(task.options))[task.options.index(task.answer)]
        shown: list[Part] = []
        if "image" in sent:
            shown.append(Part.of_image(self.image(task)))
        if "points" in sent:
            shown.append(self.cloud(task))
        prompt = self.settings.profile.prompt if "image" in sent else source_prompt_text
        return Request(
            parts=(*shown, Part.of_text(prompt(task.question, task.options))),
            max_tokens=MAX_TOKENS,
            target=truth,
            answer_space=OptionSpace(len(task.options), truth, task.category, task.key),
        )

    def read(self, answer: str, options: Sequence[str]) -> tuple[str | None, str]:
        """The option an answer picks (None: unparsable) and the code of the rule that did."""
        return self.settings.profile.read(answer, options, self.embedder.encode)

    async def evaluate(self, case: Case, client: CaseClient) -> list[Verdict]:
        p = case.params
        sent = sent_modalities(client.model.modalities)
        if not sent:
            raise CaseSkipped(
                f"{client.name} reads neither images nor point clouds (its modalities: "
                f"{', '.join(sorted(client.model.modalities))})"
            )
        search = self.search(p["strategy"], p["lambda"])
        k = p["round"]
        plan = search.plan(k, self.history(case, search, client.history))
        forks = [client.fork() for _ in plan]
        requests = [self.request(task, sent) for task, _ in plan]
        answers = await asyncio.gather(
            *(fork.generate(r) for fork, r in zip(forks, requests, strict=True))
        )
        verdicts = []
        for rank, ((task, utility), fork, answer, request) in enumerate(
            zip(plan, forks, answers, requests, strict=True)
        ):
            text = answer.text
            picked, read_by = self.read(text, task.options)
            status = "unparsable" if picked is None else "wrong"
            status = "correct" if picked == task.answer else status
            task_id = k * search.config.batch + rank
            category = evaluator_category(task.category)
            verdicts.append(
                Verdict(
                    status=status,
                    scores={"correct": int(status == "correct"), "error": int(status != "correct")},
                    prediction=picked,
                    target=task.answer,
                    case_id=f"{case.id}-t{task_id:03d}",
                    group={**case.group, "category": category},
                    cluster=task.key,
                    calls=fork.log,
                    read_by=read_by,
                    extra={
                        "task_id": task_id,
                        "round": k,
                        "rank": rank,
                        "task_key": task.key,
                        "utility": utility,
                        "category": category,
                        "generator_category": task.category,
                        "question": task.question,
                        "options": list(task.options),
                        "answer": task.answer,
                        "model_answer": picked or "",
                        "layout_description": task.layout_description,
                        "layout": task.layout,
                        "assignment": dict(task.assignment),
                        "scene": scene_key(task),
                        "seed": search.config.seed,
                        # what the model was shown, and the cloud by content (never its values)
                        "sent": list(sent),
                        **(
                            {"cloud_sha256": request.clouds[0].points_sha256}
                            if request.clouds
                            else {}
                        ),
                    },
                )
            )
        return verdicts

    def render(self, case: Case, outcome: Outcome) -> bytes | None:
        """The scene the model saw, with the question, the truth and the answer under it."""
        x = outcome.extra
        if "layout" not in x:
            return None
        scene = build_scene(x["layout"], x["assignment"], self.assets)
        image = fit_picture(render(drawn(scene), IMAGE_SIZE))
        told = [
            f"task {x['task_id']} ({x['category']}): {x['question']}",
            f"truth: {x['answer']}   answer: {x['model_answer'] or '(none)'}",
        ]
        lines = [part for line in told for part in textwrap.wrap(str(line), 56)[:3] or [""]]
        canvas = Image.new("RGB", (image.width, image.height + 8 + 20 * len(lines)), "white")
        canvas.paste(image, (0, 0))
        draw = ImageDraw.Draw(canvas)
        font = ImageFont.load_default(size=16)  # px, on the 512 px scene: shown at full size
        for i, line in enumerate(lines):
            draw.text((6, image.height + 4 + 20 * i), line, fill=(0, 0, 0), font=font)
        return picture_jpeg(canvas)
