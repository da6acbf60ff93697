"""The suite's value objects: Case, Part, Request, Response, Usage, Verdict, Outcome.

All are frozen dataclasses with `to_json`/`from_json` so they cross process boundaries (xdist)
and land in caches and reports as plain JSON. Image bytes and point clouds never enter JSON:
`Request.canonical()` hashes them.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

if TYPE_CHECKING:
    from support.videos import Clip

Status = Literal["correct", "wrong", "unparsable", "error"]
STATUSES: tuple[Status, ...] = ("correct", "wrong", "unparsable", "error")


def sha256_hex(data: bytes | str) -> str:
    """Hex sha256 of bytes or UTF-8 text (a lone surrogate is hashed as its code unit's bytes,
    so text from anywhere gives a key and never raises)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def valid_text(text: str) -> str:
    """`text` as valid Unicode: each lone UTF-16 surrogate (an API may send "\\ud800" as a JSON
    escape) becomes one U+FFFD and a split pair is joined, so nothing downstream (keys, sqlite,
    files) chokes on it. NUL and every other character are kept."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # through UTF-16, where surrogates are code units
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def canonical_json(obj: Any) -> str:
    """Deterministic JSON text: sorted keys, no whitespace, UTF-8 kept."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Case:
    """One evaluation item before the model is chosen: cheap to build at collection time.

    `id` is the item part of the pytest id (e.g. "s0042-liver-zero_shot"); `params` holds what the
    evaluation needs to rebuild the item (indices, names), plain JSON only. `group` (the reporting
    dimensions, e.g. condition and organ) and `cluster` (the bootstrap's resampling unit, e.g. the
    video) are copied into the case's outcomes, error outcomes included. `after` names the case of
    the same evaluation that must finish first with the same model (a sequence of rounds): this
    case then sees that case's outcomes, and those before it, as its history.
    """

    id: str
    evaluation: str
    params: Mapping[str, Any] = field(default_factory=dict, hash=False)
    group: Mapping[str, str] = field(default_factory=dict, hash=False)
    cluster: str = ""
    after: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "evaluation": self.evaluation,
            "params": dict(self.params),
            "group": dict(self.group),
            "cluster": self.cluster,
            "after": self.after,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Case:
        return cls(
            id=d["id"],
            evaluation=d["evaluation"],
            params=dict(d.get("params", {})),
            group=dict(d.get("group", {})),
            cluster=d.get("cluster", ""),
            after=d.get("after"),
        )


Modality = Literal["text", "image", "points", "video"]
MODALITIES: tuple[Modality, ...] = ("text", "image", "points", "video")
# a point cloud's frame (AnyPoint's): x right, Y up, +z toward the viewer ("in front of"), metres
POINTS_FRAME = "y-up"
POINT_DTYPES = ("float32", "float64")


def points_sha256(points: np.ndarray) -> str:
    """sha256 of a cloud's dtype, shape and little-endian C-order bytes."""
    data = np.ascontiguousarray(points, dtype=points.dtype.newbyteorder("<"))
    head = f"{data.dtype.name}:{'x'.join(map(str, data.shape))}:".encode()
    return hashlib.sha256(head + data.tobytes()).hexdigest()


def checked_points(points: Any) -> np.ndarray:
    """A read-only copy of `points` as a model is sent it: float32 or float64, shape (N, 3) (xyz)
    or (N, 6) (xyz, rgb in [0, 1]), every value finite. ValueError saying what is wrong."""
    array = np.asarray(points)
    if array.dtype.name not in POINT_DTYPES:
        raise ValueError(f"a point cloud must be float32 or float64, not {array.dtype}")
    if array.ndim != 2 or array.shape[1] not in (3, 6):
        raise ValueError(f"a point cloud must have shape (N, 3) or (N, 6), not {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError("a point cloud holds a value that is not finite")
    array = np.array(array, dtype=array.dtype.newbyteorder("="), order="C", copy=True)
    array.flags.writeable = False  # shared by the requests and the cache key: never changed
    return array


@dataclass(frozen=True)
class Part:
    """One piece of a user turn: text, an encoded image (PNG or JPEG bytes) or a point cloud.

    A cloud (`points`) is a read-only float32/float64 array of shape (N, 3) or (N, 6): xyz in
    metres in the POINTS_FRAME (AnyPoint's: Y up, +z "in front of", +x "to the right of"), then
    rgb in [0, 1]. Like an image it enters cache keys and prompt hashes by content
    (`points_sha256`), never as values.
    """

    text: str | None = None
    image: bytes | None = field(default=None, repr=False)
    mime: str = "image/png"
    points: np.ndarray | None = field(default=None, repr=False, compare=False)
    # a sampled clip (support.videos.read_clip): compared and keyed by its `canonical`
    video: Clip | None = field(default=None, repr=False, compare=False)
    # sha256 of the image bytes, computed once: parts are shared by many requests (one frame,
    # dozens of questions) and every cache key and prompt hash needs it
    image_sha256: str = field(default="", init=False, repr=False, compare=False)
    points_sha256: str = field(default="", init=False, repr=False)
    # the clip's identity (its canonical JSON: content and sampling): how two video parts compare
    video_key: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.text, self.image, self.points, self.video)) != 1:
            raise ValueError("a Part holds exactly one of text, image, points or video")
        if self.image is not None:
            object.__setattr__(self, "image_sha256", sha256_hex(self.image))
        if self.points is not None:
            points = checked_points(self.points)
            object.__setattr__(self, "points", points)
            object.__setattr__(self, "points_sha256", points_sha256(points))
        if self.video is not None:
            object.__setattr__(self, "video_key", canonical_json(self.video.canonical()))

    @classmethod
    def of_text(cls, text: str) -> Part:
        return cls(text=text)

    @classmethod
    def of_image(
        cls, image: Any, fmt: str = "PNG", label: str | None = None, **save_options: Any
    ) -> Part:
        """From a PIL image (encoded losslessly as PNG by default; `save_options` go to
        PIL's `Image.save`, e.g. compress_level) or from already encoded bytes: PNG and JPEG
        kept as they are, any other format decoded through support.images and re-encoded as
        PNG (a model is sent PNG or JPEG with its true MIME type). `label` names the bytes'
        file in an ImageDecodeError."""
        from support.images import encode_image, model_image

        if isinstance(image, bytes | bytearray | memoryview):
            data, mime = model_image(bytes(image), label)
            return cls(image=data, mime=mime)
        return cls(image=encode_image(image, fmt, **save_options), mime=f"image/{fmt.lower()}")

    @classmethod
    def of_points(cls, points: Any) -> Part:
        """A point cloud (see the class docstring), copied read-only (`checked_points`, in
        __post_init__); ValueError when its dtype, shape or values cannot be a cloud."""
        return cls(points=np.asarray(points))

    @classmethod
    def of_video(cls, clip: Clip) -> Part:
        """A sampled clip (support.videos.read_clip: the one video door)."""
        return cls(video=clip)

    @property
    def kind(self) -> Modality:
        """ "text", "image", "points" or "video": the modality a model must take to read this
        part."""
        if self.image is not None:
            return "image"
        if self.video is not None:
            return "video"
        return "points" if self.points is not None else "text"

    @property
    def is_image(self) -> bool:
        return self.image is not None

    @functools.cached_property
    def b64_ascii(self) -> bytes:
        """The image as base64 (ASCII bytes), encoded once per part: a frame's part is sent in
        dozens of requests."""
        assert self.image is not None
        return base64.b64encode(self.image)

    def b64(self) -> str:
        """The image as base64 text, as the vendors' APIs take it."""
        return self.b64_ascii.decode("ascii")

    def canonical(self) -> dict[str, Any]:
        if self.image is not None:
            return {"image_sha256": self.image_sha256, "mime": self.mime}
        if self.points is not None:
            return {
                "points_sha256": self.points_sha256,
                "shape": list(self.points.shape),
                "dtype": self.points.dtype.name,
                "frame": POINTS_FRAME,
            }
        if self.video is not None:
            return self.video.canonical()
        return {"text": self.text or ""}


class AnswerSpace(Protocol):
    """What a `chance` model may answer for a request: draws one answer text from a seeded rng."""

    def sample(self, rng: np.random.Generator) -> str: ...


@dataclass(frozen=True)
class Request:
    """One model call: system prompt, interleaved user parts, optional assistant prefill, sampling.

    `target` (the answer a perfect model gives) and `answer_space` (what a random model draws from)
    are hints for the offline reference models `oracle` and `chance`; real backends never see them
    and they enter the cache key only for backends that read them.
    """

    parts: tuple[Part, ...]
    system: str | None = None
    prefill: str | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    n: int = 1
    seed: int | None = None
    target: str | None = None
    answer_space: AnswerSpace | None = field(default=None, compare=False, repr=False)

    def canonical(self, with_hints: bool = False) -> dict[str, Any]:
        """Plain-JSON form of everything that determines the answer; image bytes are hashed."""
        d: dict[str, Any] = {
            "system": self.system,
            "parts": [p.canonical() for p in self.parts],
            "prefill": self.prefill,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "n": self.n,
            "seed": self.seed,
        }
        if with_hints:
            d["target"] = self.target
            d["answer_space"] = repr(self.answer_space) if self.answer_space is not None else None
        return d

    def canonical_text(self, with_hints: bool = False) -> str:
        """`canonical_json(self.canonical(with_hints))`, made once per request and kept: the
        cache key and the prompt hash both read it."""
        memo = self.__dict__.setdefault("_canonical_texts", {})  # frozen: set as cached_property
        text = memo.get(with_hints)
        if text is None:
            text = memo[with_hints] = canonical_json(self.canonical(with_hints))
        return text

    def digest(self, with_hints: bool = False) -> str:
        """sha256 of the canonical request: the prompt hash recorded with each case."""
        return sha256_hex(self.canonical_text(with_hints))

    @property
    def images(self) -> list[Part]:
        return [p for p in self.parts if p.is_image]

    @property
    def videos(self) -> list[Part]:
        """The parts holding sampled clips, in order."""
        return [p for p in self.parts if p.video is not None]

    @property
    def clips(self) -> list[Clip]:
        """The sampled clips themselves, in part order."""
        return [p.video for p in self.parts if p.video is not None]

    @property
    def clouds(self) -> list[Part]:
        """The parts holding point clouds, in order."""
        return [p for p in self.parts if p.points is not None]

    @property
    def modalities(self) -> frozenset[str]:
        """What a model must take to read this request: its parts' kinds ("text" always: a
        system prompt or prefill is text too)."""
        return frozenset({"text", *(p.kind for p in self.parts)})


_log = logging.getLogger(__name__)
_warned_usage = False  # Usage.reported warns once per process


def _token_count(value: object) -> int | None:
    """A reported token count as an int (None counts 0); None when it is unusable."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0 or value != int(value):
        return None
    return int(value)


@dataclass(frozen=True)
class Usage:
    """Token counts reported by the backend (0 where it reports none).

    `output_tokens` is every token the model wrote and is billed for, thinking included;
    `reasoning_tokens` is the part of it that was thinking (OpenAI's
    `completion_tokens_details.reasoning_tokens`, Gemini's `thoughts_token_count`, a local
    model's `<think>` span), 0 where none was reported.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    @classmethod
    def reported(
        cls, input_tokens: object, *output_tokens: object, reasoning: object = None
    ) -> Usage:
        """The usage a backend reported, which is untrusted: `output_tokens` are summed (e.g.
        answer and thought tokens), None counts 0; `reasoning` is the part of them that was
        thinking (kept within their sum). A count that is not a non-negative whole number
        (negative, NaN, infinite, text) makes the response's usage unknown: Usage(), not
        counted and not priced, with one warning per process."""
        counts = [input_tokens, *output_tokens, reasoning]
        if all(_token_count(c) is not None for c in counts):
            found = [_token_count(c) or 0 for c in counts]
            out = sum(found[1:-1])
            return cls(found[0], out, min(found[-1], out))
        global _warned_usage
        if not _warned_usage:
            _warned_usage = True
            _log.warning(
                "a backend reported unusable token counts (%s): that response's usage is "
                "counted as unknown (no tokens, no cost); later ones are not reported again",
                ", ".join(repr(c)[:40] for c in counts),
            )
        return cls()

    @property
    def answer_tokens(self) -> int:
        """Output tokens that were not thinking."""
        return self.output_tokens - self.reasoning_tokens

    def to_json(self) -> dict[str, int]:
        """Plain JSON; `reasoning_tokens` only when there were some (so a run without thinking
        writes what it always wrote)."""
        d = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}
        if self.reasoning_tokens:
            d["reasoning_tokens"] = self.reasoning_tokens
        return d

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens - other.input_tokens,
            self.output_tokens - other.output_tokens,
            self.reasoning_tokens - other.reasoning_tokens,
        )


# finish reasons that mean the answer was cut by the token limit: OpenAI's and vLLM's "length",
# Anthropic's "max_tokens", Gemini's "MAX_TOKENS" (each vendor's spelling, as received)
TRUNCATED_REASONS = frozenset({"length", "max_tokens", "MAX_TOKENS"})


@dataclass(frozen=True)
class Response:
    """A model's answer to one Request: `texts` holds one string per sample (len == request.n).

    `texts` are the answers only: a model's thinking (reasoning summaries, thinking blocks,
    thought parts, `<think>` spans) is in `thinking`, one string per sample, never parsed.
    `finish_reasons` are the vendor's words per sample ("stop", "length", "max_tokens",
    "MAX_TOKENS", ...; empty: not reported); `adapted` says what the backend changed of the
    request to fit the model's documented rules (support/backends/api_models.py).
    """

    texts: tuple[str, ...]
    model: str
    usage: Usage = Usage()
    latency_s: float = 0.0  # wall seconds of the backend call; 0 when served from cache
    cached: bool = False
    prompt: str | None = None  # the prompt text as rendered for a local model (chat template)
    batch: bool = False  # answered through the provider's batch API (priced at the batch price)
    thinking: tuple[str, ...] = ()  # one per sample when the model's thinking came back
    finish_reasons: tuple[str, ...] = ()  # one per sample, as the vendor spells it
    adapted: tuple[str, ...] = ()  # what was changed of the request, e.g. "temperature omitted"

    def __post_init__(self) -> None:
        # the one place answers enter: every backend builds a Response, the cache reads one
        object.__setattr__(self, "texts", tuple(valid_text(t) for t in self.texts))
        object.__setattr__(self, "thinking", tuple(valid_text(t) for t in self.thinking))
        object.__setattr__(self, "finish_reasons", tuple(str(r) for r in self.finish_reasons))
        object.__setattr__(self, "adapted", tuple(str(a) for a in self.adapted))
        if self.prompt is not None:
            object.__setattr__(self, "prompt", valid_text(self.prompt))

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""

    @property
    def truncated(self) -> bool:
        """Whether any sample was cut by the token limit (TRUNCATED_REASONS)."""
        return any(r in TRUNCATED_REASONS for r in self.finish_reasons)

    def sample_truncated(self, i: int) -> bool:
        """Whether sample `i` was cut by the token limit."""
        return i < len(self.finish_reasons) and self.finish_reasons[i] in TRUNCATED_REASONS

    def to_json(self) -> dict[str, Any]:
        d = {
            "texts": list(self.texts),
            "model": self.model,
            "usage": self.usage.to_json(),
            "latency_s": self.latency_s,
            "prompt": self.prompt,
        }
        if self.batch:  # only then: a synchronous answer's JSON is what it always was
            d["batch"] = True
        for name in ("thinking", "finish_reasons", "adapted"):  # likewise
            if getattr(self, name):
                d[name] = list(getattr(self, name))
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any], cached: bool = False) -> Response:
        return cls(
            texts=tuple(d["texts"]),
            model=d["model"],
            usage=Usage(**d.get("usage", {})),
            latency_s=float(d.get("latency_s", 0.0)),
            cached=cached,
            prompt=d.get("prompt"),
            batch=bool(d.get("batch", False)),
            thinking=tuple(d.get("thinking", ())),
            finish_reasons=tuple(d.get("finish_reasons", ())),
            adapted=tuple(d.get("adapted", ())),
        )


@dataclass(frozen=True)
class Verdict:
    """What an evaluation's `evaluate` returns: the domain part of one outcome.

    The core (support.contract.runner) adds the ids, the model, usage, latency, the prompt hash and
    the cache counters. `group` and `cluster` default to the case's. An item that yields many
    outcomes returns one Verdict each, with its own `case_id` (the outcome id before the model
    suffix) and, optionally, `calls`: the log of a forked client (`client.fork()`) whose calls are
    this outcome's; calls made through the item's own client go to its first Verdict without
    `calls`.
    """

    status: Status
    scores: Mapping[str, Any] = field(default_factory=dict)
    prediction: Any = None
    target: Any = None
    raw: str | None = None  # None: the text of the last response
    extra: Mapping[str, Any] = field(default_factory=dict)  # evaluation-specific record
    case_id: str | None = None
    group: Mapping[str, str] | None = None
    cluster: str | None = None
    calls: Any = None  # support.contract.runner.CallLog
    # which rule of the evaluation's parser read the answer: a short stable code the evaluation
    # declares (EvaluationSpec.read_rules; support.contract.provenance); "" when nothing was read
    read_by: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown outcome status {self.status!r}")


def outcome_id(item_id: str, model: str) -> str:
    """An outcome's `case_id`: its item's id (the case's, or what a verdict names) then
    `-<model>`, unique across the models of a run; `Outcome.item_id` takes the suffix off."""
    return f"{item_id}-{model}"


# Outcome fields written to JSON only when not empty
OPTIONAL_FIELDS = ("thinking", "finish_reasons", "adapted")


@dataclass(frozen=True)
class Outcome:
    """The scored result of one case with one model: what reports and metrics are built from.

    `group` holds the reporting dimensions (e.g. condition, organ), `cluster` the resampling unit
    of the bootstrap (e.g. the video a frame comes from), `scores` the per-case numbers the
    evaluation's metrics reduce over, `params` the case's parameters. The core fills in the
    bookkeeping: `prompt_hash` (of the first request), `latency_s` (summed over the backend calls,
    seconds), `usage`, `backend_calls` (requests sent), `cache_hits` (answers served from the
    cache), `cached` (every answer came from the cache), `batch_usage` (the part of `usage`
    answered through a provider's batch API, at its price). `extra` is evaluation-specific.
    Everything is plain JSON: it survives xdist and lands in raw_results.jsonl.
    """

    case_id: str
    evaluation: str
    model: str
    status: Status
    group: Mapping[str, str] = field(default_factory=dict, hash=False)
    cluster: str = ""
    scores: Mapping[str, Any] = field(default_factory=dict, hash=False)
    prediction: Any = field(default=None, hash=False)
    target: Any = field(default=None, hash=False)
    raw: str = ""
    prompt_hash: str = ""
    latency_s: float = 0.0
    cached: bool = False
    usage: Usage = Usage()
    backend_calls: int = 0
    cache_hits: int = 0
    batch_usage: Usage = Usage()  # the part of `usage` answered through a batch API
    rendered_prompt: str | None = None  # the prompt as a local model's chat template rendered it
    error: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict, hash=False)
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)
    read_by: str = ""  # the parser rule that read the answer (Verdict.read_by); "": none
    # the model's thinking, each call's samples in call order (kept apart, never parsed)
    thinking: tuple[str, ...] = ()
    # each call's samples' finish reasons, in call order, when one was cut by the token limit
    finish_reasons: tuple[str, ...] = ()
    adapted: tuple[str, ...] = ()  # what the backend changed of the requests (Response.adapted)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown outcome status {self.status!r}")
        for name in OPTIONAL_FIELDS:
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def truncated(self) -> bool:
        """Whether an answer of this outcome was cut by the token limit."""
        return any(r in TRUNCATED_REASONS for r in self.finish_reasons)

    @property
    def item_id(self) -> str:
        """`case_id` without its `-<model>` suffix (`outcome_id`): the same item of every model,
        what comparisons pair on."""
        suffix = f"-{self.model}"
        return self.case_id[: -len(suffix)] if self.case_id.endswith(suffix) else self.case_id

    def to_json(self) -> dict[str, Any]:
        # field by field, not dataclasses.asdict: its deep copy of every nested value was most
        # of the cost of reporting an outcome (prediction and target are shared, never mutated)
        d = {f.name: getattr(self, f.name) for f in OUTCOME_FIELDS}
        for name in ("group", "scores", "params", "extra"):
            d[name] = dict(d[name])
        d["usage"] = self.usage.to_json()
        d["batch_usage"] = self.batch_usage.to_json()
        for name in OPTIONAL_FIELDS:  # only when there is something: older rows stay the same
            if d[name]:
                d[name] = list(d[name])
            else:
                del d[name]
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Outcome:
        d = dict(d)
        d["usage"] = Usage(**d.get("usage", {}))
        d["batch_usage"] = Usage(**d.get("batch_usage", {}))
        return cls(**d)


OUTCOME_FIELDS = fields(Outcome)
