"""A tiny point-cloud QA model in PyTorch, built in code: the write-up's `PointQAModel` for tests.

Write-up 004 evaluates a point-cloud model of the user's own (`PointQAModel(model_name=...,
checkpoint_path="checkpoints/model.pth")`). This module is such a model, small enough for a CPU
test, and a factory for the suite's `python:` provider:

    python -m support.doubles.tiny_pointqa checkpoints/model.pth
    pytest evals/dynamic --model python:support.doubles.tiny_pointqa:PointQAModel \\
        --model-arg checkpoint=checkpoints/model.pth -m quick

`TinyPointQA` scores each option of a multiple-choice question from the scene's cloud: a
PointNet-like encoder (a shared MLP on every point, then a max-pool over the points) and a
bag-of-hashed-words encoder of the question and of each option. Its weights are random (seeded):
its answers are arbitrary letters, but they are deterministic, always one of the offered letters,
and they depend on the cloud. 5,680 parameters; a 26 KB checkpoint.

Input: one cloud per request, (N, 6) float32 or float64 (AnyPoint's scene: xyz in metres, Y up, +z
"in front of", +x "to the right of"; then rgb in [0, 1]), and the suite's prompt text: the
question, the options as "(A) text" lines and the instruction. A request it cannot read is a
ValueError saying what arrived; the model never guesses.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from support.types import Request

NEEDS_TORCH = (
    "support.doubles.tiny_pointqa needs PyTorch, which is not installed: pip install -e '.[hf]' "
    "(or pip install torch)"
)
try:
    import torch
    from torch import nn
except ModuleNotFoundError as exc:
    if exc.name != "torch":
        raise
    if __name__ == "__main__":
        raise SystemExit(NEEDS_TORCH) from None
    raise ImportError(NEEDS_TORCH, name="torch") from None

VERSION = "tiny-pointqa-1"  # bump when the architecture, the hashing or the prompt reading changes
HASH_BUCKETS = 128  # word hash buckets of the text encoder (crc32 of the word, modulo)
WORD_DIM = 16  # width of a word vector, of a question and of an option
POINT_WIDTHS = (6, 32, 64)  # the shared point MLP: xyz + rgb in, the scene feature out
POINT_CHANNELS = 6  # x, y, z (metres), r, g, b (0-1)

_OPTION = re.compile(r"^\(([A-Z])\)[ \t]?(.*)$")  # "(A) the chair": letter, option text
_WORD = re.compile(r"[a-z0-9]+")


class TinyPointQA(nn.Module):
    """Scores the options of a question about a point cloud: higher is more likely.

    `forward(points, questions, options)`: points (B, N, 6) float32; questions (B,) and options
    (B, M) as hashed-word bags (`Bags`); returns (B, M) scores, -inf where a row has fewer than M
    options. A cloud padded by repeating one of its points scores as the cloud itself (max-pool).
    """

    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for width_in, width_out in itertools.pairwise(POINT_WIDTHS):
            layers += [nn.Linear(width_in, width_out), nn.ReLU()]
        self.point_mlp = nn.Sequential(*layers)  # per point, shared: (B, N, 6) -> (B, N, 64)
        self.words = nn.EmbeddingBag(HASH_BUCKETS, WORD_DIM, mode="mean")
        self.fuse = nn.Linear(POINT_WIDTHS[-1] + WORD_DIM, WORD_DIM)  # scene + question -> query

    def forward(self, points: torch.Tensor, questions: Bags, options: Bags) -> torch.Tensor:
        batch = points.shape[0]
        scene = self.point_mlp(points).amax(dim=1)  # (B, 64): max-pool over the points
        # standardised per scene: what one cloud has more or less of than its other features
        scene = nn.functional.layer_norm(scene, scene.shape[1:])
        question = self.words(questions.ids, questions.offsets)  # (B, 16); an empty bag is 0
        query = torch.tanh(self.fuse(torch.cat([scene, question], dim=1)))  # (B, 16)
        choices = self.words(options.ids, options.offsets).view(batch, -1, WORD_DIM)  # (B, M, 16)
        choices = nn.functional.normalize(choices, dim=2)  # a longer option is no shorter vector
        scores = (choices @ query.unsqueeze(2)).squeeze(2)  # (B, M)
        return scores.masked_fill(~options.mask.view(batch, -1), float("-inf"))


@dataclass(frozen=True)
class Bags:
    """Texts as EmbeddingBag input: word bucket ids, each text's start offset, and which texts
    are real (False: padding, an empty bag)."""

    ids: torch.Tensor  # int64 (total words,)
    offsets: torch.Tensor  # int64 (texts,)
    mask: torch.Tensor  # bool (texts,)

    @classmethod
    def of(cls, texts: Sequence[str | None]) -> Bags:
        ids: list[int] = []
        offsets: list[int] = []
        for text in texts:
            offsets.append(len(ids))
            ids.extend(word_bucket(w) for w in _WORD.findall((text or "").lower()))
        return cls(
            torch.tensor(ids, dtype=torch.int64),
            torch.tensor(offsets, dtype=torch.int64),
            torch.tensor([t is not None for t in texts], dtype=torch.bool),
        )


def word_bucket(word: str) -> int:
    """The hash bucket of a lower-case word: crc32 (the same in every process, unlike hash())."""
    return zlib.crc32(word.encode("utf-8")) % HASH_BUCKETS


def build_module(seed: int = 0) -> TinyPointQA:
    """A fresh TinyPointQA with weights drawn from `seed` (the global torch RNG is left as it
    was), in eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = TinyPointQA()
    return module.eval()


def save_checkpoint(path: str | Path, seed: int = 0) -> Path:
    """Build the module from `seed` and write its state dict to `path` (a .pth, parents made)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(build_module(seed).state_dict(), path)
    return path


def weights_digest(state: Mapping[str, torch.Tensor]) -> str:
    """sha256 of a state dict's names, dtypes, shapes and values: the same weights give the same
    digest whatever file they were saved to (torch.save's archive names the file)."""
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}:".encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Question:
    """What the model reads from one request: the cloud, the question and the options."""

    points: np.ndarray  # (N, 6) float32 or float64, as sent
    question: str
    options: tuple[str, ...]


def read_prompt(text: str) -> tuple[str, tuple[str, ...]]:
    """The question and the options of the suite's prompt: the "(A) text" lines (A, B, ... in
    order, one block) and the paragraph just before them. ValueError naming what is missing."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if _OPTION.match(line.strip())), None)
    if first is None:
        raise ValueError("the prompt has no option lines ('(A) text'): cannot answer")
    options: list[str] = []
    for line in lines[first:]:
        match = _OPTION.match(line.strip())
        if match is None:
            break
        letter, option = match.groups()
        if letter != chr(ord("A") + len(options)):
            raise ValueError(f"the prompt's option letters are not A, B, ... in order: {line!r}")
        options.append(option.strip())
    paragraph: list[str] = []
    for line in reversed(lines[:first]):
        if not line.strip():
            if paragraph:
                break
            continue
        paragraph.insert(0, line.strip())
    if not paragraph:
        raise ValueError("the prompt has no question before its options")
    return " ".join(paragraph), tuple(options)


def read_request(request: Request) -> Question:
    """The cloud and the question of `request`; ValueError saying what arrived instead."""
    clouds = request.clouds
    if len(clouds) != 1:
        kinds = ", ".join(p.kind for p in request.parts) or "none"
        raise ValueError(
            f"{VERSION} takes exactly one point cloud per request; got {len(clouds)} "
            f"(parts: {kinds})"
        )
    points = clouds[0].points
    if not isinstance(points, np.ndarray) or points.dtype.name not in ("float32", "float64"):
        dtype = getattr(points, "dtype", type(points).__name__)
        raise ValueError(f"{VERSION} needs a float32 or float64 cloud; got {dtype}")
    if points.ndim != 2 or points.shape[0] < 1 or points.shape[1] != POINT_CHANNELS:
        raise ValueError(
            f"{VERSION} needs an (N, 6) cloud (xyz, rgb) with N >= 1; got shape "
            f"{tuple(points.shape)} {points.dtype}"
        )
    text = "\n".join(p.text for p in request.parts if p.text is not None)
    question, options = read_prompt(text)
    return Question(points, question, options)


def score_options(module: TinyPointQA, questions: Sequence[Question]) -> torch.Tensor:
    """(B, M) option scores of `questions` in one forward pass (M: the most options; -inf past a
    question's own): clouds padded to the longest by repeating their first point."""
    longest = max(len(q.points) for q in questions)
    most = max(len(q.options) for q in questions)
    clouds = []
    for q in questions:
        cloud = torch.tensor(q.points, dtype=torch.float32)  # a copy: the part's array is read-only
        pad = cloud[:1].expand(longest - len(cloud), POINT_CHANNELS)
        clouds.append(torch.cat([cloud, pad]))
    options: list[str | None] = []
    for q in questions:
        options += [*q.options, *[None] * (most - len(q.options))]
    with torch.inference_mode():
        return module(
            torch.stack(clouds), Bags.of([q.question for q in questions]), Bags.of(options)
        )


def answer_letters(module: TinyPointQA, questions: Sequence[Question]) -> list[str]:
    """The letter `module` picks for each question (the best-scoring option), in one pass."""
    if not questions:
        return []
    return [chr(ord("A") + int(i)) for i in score_options(module, questions).argmax(dim=1)]


class PointQAModel:
    """The factory `python:support.doubles.tiny_pointqa:PointQAModel`: TinyPointQA loaded from a
    checkpoint written by `save_checkpoint`, answering the option letter ("B").

    `calls` counts generate and generate_batch calls (one forward pass each); `clouds_seen` lists
    the (shape, dtype name) of every cloud answered, in order.
    """

    modalities = ("points", "text")
    version = VERSION
    max_batch = 8

    def __init__(self, checkpoint: str, model_name: str = "tiny-pointqa") -> None:
        path = Path(checkpoint)
        if not path.is_file():
            raise FileNotFoundError(f"{model_name}: no checkpoint at {path} (save_checkpoint)")
        self.model_name = model_name
        self.module = TinyPointQA()
        state = torch.load(path, map_location="cpu", weights_only=True)
        self.module.load_state_dict(state)
        self.module.eval()
        # the weights name this instance: new weights at the same path are new answers
        self.version = f"{VERSION}+{weights_digest(state)[:16]}"
        self.calls = 0
        self.clouds_seen: list[tuple[tuple[int, ...], str]] = []

    def generate(self, request: Request) -> str | list[str]:
        """The letter of the option chosen (a list of `request.n` equal letters when n > 1: the
        model is deterministic)."""
        return self._answer([read_request(request)], [request])[0]

    def generate_batch(self, requests: Sequence[Request]) -> list[str | list[str]]:
        """One answer per request, in order, from one forward pass; the same letters as generate
        one by one. A request it cannot read fails the call (ValueError naming its index)."""
        questions = []
        for i, request in enumerate(requests):
            try:
                questions.append(read_request(request))
            except ValueError as e:
                raise ValueError(f"request {i} of {len(requests)}: {e}") from None
        return self._answer(questions, requests)

    def _answer(
        self, questions: list[Question], requests: Sequence[Request]
    ) -> list[str | list[str]]:
        self.calls += 1
        self.clouds_seen += [(tuple(q.points.shape), q.points.dtype.name) for q in questions]
        letters = answer_letters(self.module, questions)
        answers: list[Any] = []
        for request, letter in zip(requests, letters, strict=True):
            answers.append(letter if request.n == 1 else [letter] * request.n)
        return answers


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m support.doubles.tiny_pointqa PATH [--seed N]`: write a checkpoint."""
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m support.doubles.tiny_pointqa", description=main.__doc__
    )
    ap.add_argument("path", help="the checkpoint to write (a .pth; parent folders are made)")
    ap.add_argument("--seed", type=int, default=0, help="the weights' seed (0)")
    args = ap.parse_args(argv)
    print(save_checkpoint(args.path, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
