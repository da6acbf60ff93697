"""A scripted model server on 127.0.0.1 that speaks three vendors' wire protocols, with faults.

    OpenAI     POST /v1/chat/completions, POST /v1/responses (the Responses API)
    Anthropic  POST /v1/messages
    Gemini     POST /v1beta/models/<model>:generateContent

Answers come from a script (`ScriptRequest -> str | ScriptAnswer`), which sees every protocol's
request in one normalized form, so one script serves all three SDKs. Faults are injected on demand:
a seeded share of distinct request bodies fails its first `attempts` attempts with a 429 (short
Retry-After), a 500, a response slower than the client's timeout, a malformed 200 body, or a
dropped connection; the retry that follows succeeds. A rate limit
(`rate_limit=RateLimit(per_s, burst)`, `--rate-limit`)
is a token bucket over all model and batch routes: a request that finds it empty is answered 429
at once, with `retry-after` (seconds) and `retry-after-ms` saying when the next token comes, and
counted in the stats' `rate_limited` (synchronous routes) or `batch_rate_limited` (batch routes).
An in-flight cap (`in_flight_cap=InFlightCap(limit, retry_after_s)`, `--in-flight-cap`) answers a
model request that arrives while `limit` others are being served 429 at once, with the cap's
`retry-after` (the same headers), counted in the stats' `in_flight_limited`.
Each model request is checked against its model's documented request rules first
(support/doubles/loopback_validation.py; `rules=False`, `--no-rules` turn them off): one the real
API would refuse gets the vendor's 400 and error JSON, counted in the stats' `refused` (the last
messages in `refusals`). A request that thinks (OpenAI reasoning models, Anthropic `thinking`,
Claude 5, Gemini 2.5 and 3 by default) thinks `thinking_tokens` tokens (`--thinking-tokens`; or
the script's `ScriptAnswer.thinking`, capped by the request's budget), which count against its
output limit: past it the answer is cut (finish_reason "length", stop_reason "max_tokens",
finishReason "MAX_TOKENS"), possibly to nothing. Usage reports them: OpenAI
`completion_tokens_details.reasoning_tokens` (Chat Completions returns no reasoning text; the
Responses API `output_tokens_details.reasoning_tokens`, a reasoning item before the message whose
summary holds the thinking's text only when `reasoning.summary` asks for it, and status
"incomplete" with `incomplete_details.reason` "max_output_tokens" for a cut answer),
Anthropic `output_tokens` with a thinking block before the text (its text empty where the display
is "omitted"), Gemini `thoughtsTokenCount` and thought parts with `includeThoughts`.
The server listens on 127.0.0.1 only and stops by itself after `lifetime_s`. For tests and
benchmarks; `python -m support.doubles.loopback --help` runs one standalone (`--port`, 0: any free
one; the URL is the first line it prints; `--lifetime`, printed at the start, and a line when it
ends), answering `--answer` to everything or by `--answers`: a JSONL file of rules
`{"pattern": REGEX, "answer": TEXT}` tried in order on the request's last user text (the first
whose pattern `re.search`es it answers; `--answer` otherwise), or `module:function`, called with
that text and returning the answer.

The models lists (`GET /v1/models` or `/models`: OpenAI's, or Anthropic's when the request
carries `anthropic-version` or `x-api-key`, or Gemini's with `x-goog-api-key`; `/v1beta/models`:
Gemini's) answer with `models` (`--models`; none by default), after the same key check (401):
what a client's preflight reads. Any other path is a 404 (`/v1/chat/completions/models`: an
`--api-base` naming the endpoint rather than the base URL).

For benchmarks run against a server in another process: `GET /_loopback/stats` returns the stats as
JSON (counts, when the first request arrived and the last response was written, the peak in flight,
the server process's CPU seconds), and `record_dir` (`--record DIR`) stores every distinct request
body as `DIR/<sha256 of the body>.json`, byte for byte, so another client can replay them.

Hostile answers (`hostile=Hostile(...)`), to every model request: the whole response a few bytes
at a time (`drip_s`, `drip_bytes`: slower than any per-read timeout notices), a gzip bomb
(`bomb_bytes`: a valid answer padded with spaces to that many bytes, ~1 MB a GiB), an oversized
answer (`big_bytes`, sent without Content-Length until the connection closes) or a 307 redirect
(`redirect`: to another server's same path, or "same": once, to this server); each stops when the
client goes or the server stops. The stats keep the headers of the model requests received
(`headers`, the last `HEADERS_KEPT`), so a second server shows what a redirect brought it.

The batch endpoints of the three protocols (support/doubles/loopback_batches.py) answer each item
with the same script; the fault rate fails a seeded share of items (an item-level error, counted in
the stats' `batch_item_errors`, the next submission of that body succeeds), and
`batches=BatchPlan(...)` says how many polls a batch takes and whether it completes, expires or is
cancelled (on the command line `--batch-polls`, `--batch-ends`, `--batch-done-before-end`: the n-th
value is the n-th batch's, the last repeats).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import importlib
import json
import os
import random
import re
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from support.doubles import loopback_validation
from support.doubles.loopback_batches import ENDINGS, BatchPlan, BatchStore, plans_of

FAULT_KINDS = ("429", "500", "slow", "malformed", "drop")
HEADERS_KEPT = 100  # model requests whose headers the stats keep
PAD_STEP = 2**20  # bytes of padding a write or a compression call (bomb, big)
STATS_PATH = "/_loopback/stats"  # GET: ServerStats as JSON (`stats_json`)
# GET: the models lists (OpenAI's SDK given the server's root asks for /models)
MODELS_PATHS = ("/models", "/v1/models", "/v1beta/models")
DEFAULT_ANSWER = "A"  # the command line's answer where no --answers rule matches
DEFAULT_THINKING_TOKENS = 64  # tokens a request that thinks thinks (4 characters a token)
REFUSALS_KEPT = 20  # refusal messages the stats keep
THINKING_FILLER = "Let me look at the image and the question step by step. "


@dataclass(frozen=True)
class ScriptRequest:
    """A request in protocol-neutral form, as a script sees it."""

    protocol: str  # "openai" | "responses" (OpenAI's Responses API) | "anthropic" | "gemini"
    model: str
    system: str | None
    texts: tuple[str, ...]  # the user turn's text parts, in order
    n_images: int
    prefill: str | None  # a trailing assistant / model turn, if any
    n: int
    temperature: float | None
    max_tokens: int | None
    # the request's thinking settings, normalized (loopback_validation.thinking_settings; None:
    # none)
    thinking: dict[str, Any] | None = field(default=None, hash=False)
    thinks: bool = False  # the server thinks for this request (thinking tokens in its usage)
    # the user turn's clips: OpenAI-compatible `video_url` parts, Gemini inline `video/*` data
    n_videos: int = 0


@dataclass(frozen=True)
class ScriptAnswer:
    """A script's answer with its own thinking text (for a request that thinks; a decoy answer in
    it tests that a client never takes thinking for the answer). None: the server's thinking."""

    text: str
    thinking: str | None = None


Script = Callable[[ScriptRequest], str | ScriptAnswer]


@dataclass(frozen=True)
class Faults:
    """Which requests fail, and how. Decisions are seeded by the request body: reproducible."""

    rate: float = 0.0  # share of distinct request bodies that fail first
    kinds: tuple[str, ...] = FAULT_KINDS
    attempts: int = 1  # failing attempts per faulted body; the next one succeeds
    seed: int = 0
    retry_after_s: float = 0.05  # sent with 429s
    slow_s: float = 2.0  # delay of a "slow" response: set it past the client's timeout


@dataclass(frozen=True)
class RateLimit:
    """A token bucket: `per_s` requests a second on average, `burst` at once."""

    per_s: float
    burst: int = 1


@dataclass(frozen=True)
class InFlightCap:
    """At most `limit` model requests served at once; one more is answered 429 with
    `retry-after: retry_after_s` (seconds)."""

    limit: int
    retry_after_s: float = 1.0


class TokenBucket:
    """`take()` a token of `limit` (thread-safe): 0.0 when granted, else the seconds until the
    next token. Small enough to keep here: the maintained libraries (aiolimiter, limits) are
    asyncio-only or bring storage back ends a threaded test server does not need."""

    def __init__(self, limit: RateLimit, clock: Callable[[], float] = time.monotonic) -> None:
        if not (limit.per_s > 0 and limit.burst >= 1):
            raise ValueError(f"rate limit {limit}: expected per_s > 0 and burst >= 1")
        self.limit = limit
        self.clock = clock
        self.tokens = float(limit.burst)
        self.at = clock()
        self.lock = threading.Lock()

    def take(self) -> float:
        with self.lock:
            now = self.clock()
            self.tokens = min(self.limit.burst, self.tokens + (now - self.at) * self.limit.per_s)
            self.at = now
            if self.tokens >= 1.0:
                self.tokens -= 1.0
                return 0.0
            return (1.0 - self.tokens) / self.limit.per_s


@dataclass(frozen=True)
class Hostile:
    """How every model request is answered instead of the script's plain answer (all off by
    default; the first set of drip_s, bomb_bytes, big_bytes, redirect applies)."""

    drip_s: float = 0.0  # > 0: status line, headers and body, drip_bytes every drip_s seconds
    drip_bytes: int = 1  # bytes a drip
    bomb_bytes: int = 0  # > 0: a gzip body inflating to this many bytes (a valid answer)
    big_bytes: int = 0  # > 0: an answer padded to this many bytes, no Content-Length
    redirect: str | None = None  # a base URL: 307 to its same path; "same": once, to this server


@dataclass
class ServerStats:
    """What the server saw (thread-safe through the server's lock)."""

    attempts: int = 0  # HTTP requests received on the model routes
    answered: int = 0  # 200 responses with a well-formed answer
    faults: Counter = field(default_factory=Counter)  # kind -> count
    bodies: Counter = field(default_factory=Counter)  # sha256 of body -> attempts
    answered_bodies: Counter = field(default_factory=Counter)  # sha256 of body -> answers
    # wall-clock times (time.time(), epoch seconds) on the model routes, None until the first
    first_request_at: float | None = None  # the first request's headers were read
    last_request_at: float | None = None  # the last request's headers were read
    last_response_at: float | None = None  # the last response was written (any status)
    in_flight: int = 0  # requests being handled now
    peak_in_flight: int = 0
    rate_limited: int = 0  # 429s of the rate limit on the synchronous routes (not the faults)
    batch_rate_limited: int = 0  # 429s of the rate limit on the batch routes
    in_flight_limited: int = 0  # 429s of the in-flight cap (model routes)
    refused: int = 0  # 400s of the models' request rules (loopback_validation), items included
    refusals: list[str] = field(default_factory=list)  # the last REFUSALS_KEPT messages
    batch_items: int = 0  # items of ended batches that were answered or failed
    batch_item_errors: int = 0  # of those, failed by the faults (item-level errors)
    batch_item_bodies: Counter = field(default_factory=Counter)  # sha256 of item body -> tries
    headers: list[dict[str, str]] = field(default_factory=list)  # the last model requests'
    hostile: Counter = field(default_factory=Counter)  # hostile answers sent, by kind
    listed: int = 0  # GET requests of the models lists (any answer, 401s included)
    # model requests past the key check, by protocol ("openai", "responses", "anthropic", ...)
    protocols: Counter = field(default_factory=Counter)


class _HTTPServer(ThreadingHTTPServer):
    """One thread per connection; a listen backlog that holds a burst of new connections (the
    default of 5 resets some of 32 clients that connect at once)."""

    daemon_threads = True
    request_queue_size = 128


class LoopbackServer:
    """`with LoopbackServer(script, api_key="k") as server: ... server.url ...`"""

    def __init__(
        self,
        script: Script,
        *,
        api_key: str,
        latency_s: float = 0.0,
        faults: Faults | None = None,
        lifetime_s: float = 300.0,
        record_dir: Path | None = None,
        rate_limit: RateLimit | None = None,
        in_flight_cap: InFlightCap | None = None,
        batches: BatchPlan | Sequence[BatchPlan] | None = None,
        hostile: Hostile | None = None,
        rules: bool = True,  # refuse what the named model's API refuses (loopback_validation)
        thinking_tokens: int = DEFAULT_THINKING_TOKENS,  # a thinking request's thinking
        port: int = 0,  # 0: any free port; a port: the same server restarted at its address
        models: Sequence[str] = (),  # the ids its models lists name (GET /v1/models)
    ) -> None:
        self.script = script
        self.port = port
        self.models = tuple(models)
        self.expired = False  # it stopped because its lifetime ended
        self.batch_store = BatchStore(
            self.batch_answer,
            self.batch_item_fails,
            batches,
        )
        self.bucket = TokenBucket(rate_limit) if rate_limit is not None else None
        self.in_flight_cap = in_flight_cap
        self.serving = 0  # model requests let past the in-flight cap, not yet answered
        self.api_key = api_key
        self.latency_s = latency_s
        self.faults = faults or Faults()
        self.hostile = hostile or Hostile()
        self.rules = rules
        self.thinking_tokens = thinking_tokens
        self._bombs: dict[tuple[str, str], bytes] = {}  # (protocol, model) -> gzip body
        self.lifetime_s = lifetime_s
        self.record_dir = Path(record_dir) if record_dir is not None else None
        if self.record_dir is not None:
            self.record_dir.mkdir(parents=True, exist_ok=True)
        self.stats = ServerStats()
        self.lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._timer: threading.Timer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> LoopbackServer:
        handler = type("Handler", (_Handler,), {"owner": self})
        self._httpd = _HTTPServer(("127.0.0.1", self.port), handler)
        self.port = self._httpd.server_address[1]  # kept after stop: restart at the same URL
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        self._timer = threading.Timer(self.lifetime_s, self._expire)  # stops by itself
        self._timer.daemon = True
        self._timer.start()
        return self

    def _expire(self) -> None:
        self.expired = True
        self.stop()

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if self._timer is not None:
            self._timer.cancel()
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def fault_for(self, digest: str) -> str | None:
        """The fault this attempt of the body gets, if any (counts the attempt)."""
        with self.lock:
            self.stats.attempts += 1
            self.stats.bodies[digest] += 1
            attempt = self.stats.bodies[digest]
        f = self.faults
        rng = random.Random(f"{f.seed}:{digest}")
        if rng.random() >= f.rate or attempt > f.attempts:
            return None
        kind = rng.choice(f.kinds)
        with self.lock:
            self.stats.faults[kind] += 1
        return kind

    def bomb(self, protocol: str, model: str, body: bytes) -> bytes:
        """A gzip body that inflates to `hostile.bomb_bytes`: `body` (a JSON answer) with spaces
        after its first byte; made once a (protocol, model), in steps of 1 MiB."""
        key = (protocol, model)
        with self.lock:
            if key in self._bombs:
                return self._bombs[key]
        packer = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)  # gzip
        out = [packer.compress(body[:1])]
        left = max(0, self.hostile.bomb_bytes - len(body))
        pad = b" " * PAD_STEP
        while left > 0:
            out.append(packer.compress(pad[: min(left, PAD_STEP)]))
            left -= PAD_STEP
        out += [packer.compress(body[1:]), packer.flush()]
        with self.lock:
            return self._bombs.setdefault(key, b"".join(out))

    def batch_item_fails(self, digest: str) -> bool:
        """Whether this try of a batch item (by its body's digest) fails: the same seeded share
        as `fault_for`, for the first `attempts` submissions of that body."""
        with self.lock:
            self.stats.batch_items += 1
            self.stats.batch_item_bodies[digest] += 1
            attempt = self.stats.batch_item_bodies[digest]
        f = self.faults
        failed = random.Random(f"{f.seed}:{digest}").random() < f.rate and attempt <= f.attempts
        if failed:
            with self.lock:
                self.stats.batch_item_errors += 1
        return failed

    def refusal(self, protocol: str, model: str, body: Any) -> loopback_validation.Refusal | None:
        """The vendor's refusal of this request body by its model's rules (None: compliant, or
        the rules are off); counted in the stats."""
        if not self.rules or not isinstance(body, dict):
            return None
        name = str(body.get("model") or model)
        refusal = loopback_validation.check(protocol, name, body)
        if refusal is not None:
            with self.lock:
                self.stats.refused += 1
                kept = self.stats.refusals[-REFUSALS_KEPT + 1 :]
                self.stats.refusals = [*kept, f"{protocol} {name}: {refusal.message}"]
        return refusal

    def batch_answer(self, protocol: str, model: str, body: dict) -> dict:
        """A batch item's answer; an item its model's rules refuse raises
        `loopback_validation.Refused` (an item-level error with the vendor's body)."""
        refusal = self.refusal(protocol, model, body)
        if refusal is not None:
            raise loopback_validation.Refused(refusal)
        return answer(self.script, protocol, model, body, thinking_tokens=self.thinking_tokens)

    def record(self, digest: str, raw: bytes) -> None:
        """Store a request body once as `record_dir/<digest>.json` (no-op without record_dir)."""
        if self.record_dir is None:
            return
        path = self.record_dir / f"{digest}.json"
        if path.exists():
            return
        tmp = path.with_name(f"{digest}.{threading.get_ident()}.tmp")
        tmp.write_bytes(raw)
        tmp.replace(path)  # atomic: a reader never sees half a body

    def stats_json(self) -> dict[str, Any]:
        """The stats as plain JSON, plus this process's CPU seconds (user + system)."""
        with self.lock:
            st = self.stats
            data = {
                "attempts": st.attempts,
                "answered": st.answered,
                "faults": dict(st.faults),
                "bodies": dict(st.bodies),
                "answered_bodies": dict(st.answered_bodies),
                "first_request_at": st.first_request_at,
                "last_request_at": st.last_request_at,
                "last_response_at": st.last_response_at,
                "in_flight": st.in_flight,
                "peak_in_flight": st.peak_in_flight,
                "rate_limited": st.rate_limited,
                "batch_rate_limited": st.batch_rate_limited,
                "in_flight_limited": st.in_flight_limited,
                "batch_items": st.batch_items,
                "batch_item_errors": st.batch_item_errors,
                "refused": st.refused,
                "refusals": list(st.refusals),
                "listed": st.listed,
                "protocols": dict(st.protocols),
            }
        times = os.times()  # the whole server process, all threads
        data["cpu_s"] = times.user + times.system
        return data


def normalize(protocol: str, model: str, body: dict[str, Any]) -> ScriptRequest:
    """One protocol's request body -> ScriptRequest."""
    texts: list[str] = []
    n_images = n_videos = 0
    prefill = None
    system = None
    if protocol == "openai":
        for msg in body.get("messages", []):
            content = msg.get("content")
            if msg.get("role") == "system":
                system = content if isinstance(content, str) else _joined(content)
            elif msg.get("role") == "assistant":
                prefill = content if isinstance(content, str) else _joined(content)
            elif isinstance(content, str):
                texts.append(content)
            else:
                for part in content or []:
                    if part.get("type") == "text":
                        texts.append(part["text"])
                    elif part.get("type") == "image_url":
                        n_images += 1
                    elif part.get("type") == "video_url":
                        n_videos += 1
        return ScriptRequest(
            protocol, model, system, tuple(texts), n_images, prefill, int(body.get("n") or 1),
            body.get("temperature"), body.get("max_completion_tokens") or body.get("max_tokens"),
            n_videos=n_videos,
        )  # fmt: skip
    if protocol == "responses":
        return _normalize_responses(model, body)
    if protocol == "anthropic":
        system = body.get("system")
        if isinstance(system, list):
            system = _joined(system)
        for msg in body.get("messages", []):
            content = msg.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if msg.get("role") == "assistant":
                prefill = _joined(blocks)
                continue
            for part in blocks or []:
                if part.get("type") == "text":
                    texts.append(part["text"])
                elif part.get("type") == "image":
                    n_images += 1
        return ScriptRequest(
            protocol, model, system, tuple(texts), n_images, prefill, 1,
            body.get("temperature"), body.get("max_tokens"),
        )  # fmt: skip
    # gemini
    cfg = body.get("generationConfig") or {}
    sys_parts = (body.get("systemInstruction") or {}).get("parts") or []
    system = "".join(p.get("text", "") for p in sys_parts) or None
    for content in body.get("contents", []):
        parts = content.get("parts") or []
        if content.get("role") == "model":
            prefill = "".join(p.get("text", "") for p in parts)
            continue
        for part in parts:
            if "text" in part:
                texts.append(part["text"])
            elif "inlineData" in part or "inline_data" in part:
                blob = part.get("inlineData") or part.get("inline_data") or {}
                mime = str(blob.get("mimeType") or blob.get("mime_type") or "")
                if mime.startswith("video/"):
                    n_videos += 1
                else:
                    n_images += 1
    return ScriptRequest(
        protocol, model, system, tuple(texts), n_images, prefill,
        int(cfg.get("candidateCount") or 1), cfg.get("temperature"), cfg.get("maxOutputTokens"),
        n_videos=n_videos,
    )  # fmt: skip


def _normalize_responses(model: str, body: dict[str, Any]) -> ScriptRequest:
    """A Responses API body -> ScriptRequest: `instructions` (or a system / developer message)
    as the system text, the user messages' input_text and input_image parts, a last assistant
    message as the prefill; one sample (the API has no `n`)."""
    texts: list[str] = []
    n_images = 0
    prefill = None
    system = body.get("instructions") if isinstance(body.get("instructions"), str) else None
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        content = item.get("content")
        parts = [{"type": "input_text", "text": content}] if isinstance(content, str) else content
        role = item.get("role")
        if role in ("system", "developer"):
            system = (system + "\n\n" if system else "") + _joined(parts)
        elif role == "assistant":
            prefill = _joined(parts)
        else:
            for part in parts or []:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "input_text":
                    texts.append(str(part.get("text", "")))
                elif part.get("type") == "input_image":
                    n_images += 1
    return ScriptRequest(
        "responses", model, system, tuple(texts), n_images, prefill, 1,
        body.get("temperature"), body.get("max_output_tokens"),
    )  # fmt: skip


def answer(
    script: Script,
    protocol: str,
    model: str,
    body: dict[str, Any],
    *,
    thinking_tokens: int = DEFAULT_THINKING_TOKENS,
) -> dict:
    """The success body the script's answer to one request body gets (usage estimated: a token a
    4 characters of text, 85 an image). A request that thinks (`loopback_validation.thinking_plan`)
    thinks `thinking_tokens` tokens or the script's own thinking, capped by its budget; thinking
    and answer share the request's output limit, and the answer is cut past it."""
    name = str(body.get("model") or model)
    plan = loopback_validation.thinking_plan(protocol, name, body)
    settings = loopback_validation.thinking_settings(protocol, body)
    thinks = plan is not None and plan.budget != 0
    request = replace(normalize(protocol, model, body), thinking=settings, thinks=thinks)
    replies = [script(request) for _ in range(request.n)]
    prompt_tokens = sum(len(t) for t in request.texts) // 4 + 85 * request.n_images
    if plan is None:
        answers = [r.text if isinstance(r, ScriptAnswer) else r for r in replies]
        completion_tokens = sum(len(a) // 4 + 1 for a in answers)
        return render(protocol, model, answers, (prompt_tokens, completion_tokens))
    samples = [_think(r, plan, request.max_tokens, thinking_tokens) for r in replies]
    completion_tokens = sum(n + t.tokens for _, n, t in samples)
    answers, thoughts = [a for a, _, _ in samples], [t for _, _, t in samples]
    return render(protocol, model, answers, (prompt_tokens, completion_tokens), thoughts)


@dataclass(frozen=True)
class Thought:
    """One sample's thinking as rendered: its text, its tokens, whether its text comes back, and
    whether the output limit cut the sample."""

    text: str
    tokens: int
    shown: bool
    cut: bool


def default_thinking(tokens: int) -> str:
    """The server's thinking text: `tokens` tokens of 4 characters."""
    n = tokens * 4
    return (THINKING_FILLER * (n // len(THINKING_FILLER) + 1))[:n]


def _think(
    reply: str | ScriptAnswer,
    plan: loopback_validation.ThinkingPlan,
    limit: int | None,
    tokens: int,
) -> tuple[str, int, Thought]:
    """(answer, its tokens, thinking) of one sample: the thinking capped by the plan's budget,
    then thinking and answer cut to the output limit, thinking first."""
    text = reply.text if isinstance(reply, ScriptAnswer) else reply
    own = reply.thinking if isinstance(reply, ScriptAnswer) else None
    thought = "" if plan.budget == 0 else own if own is not None else default_thinking(tokens)
    n_thought = -(-len(thought) // 4)
    if plan.budget is not None and n_thought > plan.budget:
        thought, n_thought = thought[: plan.budget * 4], plan.budget
    n_text, cut = len(text) // 4 + 1, False
    if limit is not None and n_thought >= limit:
        thought, n_thought, text, n_text, cut = thought[: limit * 4], limit, "", 0, True
    elif limit is not None and n_thought + n_text > limit:
        text, n_text, cut = text[: (limit - n_thought) * 4], limit - n_thought, True
    return text, n_text, Thought(thought, n_thought, plan.shown, cut)


def _signature(thought: str) -> str:
    """An opaque signature for a thinking block (Anthropic returns one with every block)."""
    return base64.b64encode(hashlib.sha256(b"loopback:" + thought.encode()).digest()).decode()


def _joined(blocks: Any) -> str:
    return "".join(b.get("text", "") for b in blocks or [] if isinstance(b, dict))


def render(
    protocol: str,
    model: str,
    answers: list[str],
    usage: tuple[int, int],
    thoughts: Sequence[Thought] | None = None,
) -> dict:
    """The protocol's success body for `answers` (one per sample); with `thoughts` (a request
    that thinks; `usage`'s completion tokens include theirs) the thinking, its usage and the
    finish reasons of the samples the output limit cut."""
    prompt_tokens, completion_tokens = usage
    cut = [bool(thoughts and thoughts[i].cut) for i in range(len(answers))]
    if protocol == "openai":
        body = {
            "id": "chatcmpl-loopback",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": a},
                    "finish_reason": "length" if cut[i] else "stop",
                }
                for i, a in enumerate(answers)
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        if thoughts is not None:  # reasoning models; no reasoning text in Chat Completions
            body["usage"]["completion_tokens_details"] = {
                "accepted_prediction_tokens": 0,
                "audio_tokens": 0,
                "reasoning_tokens": sum(t.tokens for t in thoughts),
                "rejected_prediction_tokens": 0,
            }
        return body
    if protocol == "responses":
        return _render_responses(model, answers[0], usage, thoughts[0] if thoughts else None)
    if protocol == "anthropic":
        blocks: list[dict[str, Any]] = [{"type": "text", "text": answers[0]}]
        if thoughts is not None:  # the thinking block first; no text block if cut to nothing
            t = thoughts[0]
            block = {"type": "thinking", "thinking": t.text if t.shown else ""}
            block["signature"] = _signature(t.text)
            blocks = [block] + ([] if t.cut and not answers[0] else blocks)
        return {
            "id": "msg_loopback",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": "max_tokens" if cut[0] else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens},
        }
    candidates = []
    for i, a in enumerate(answers):
        content: dict[str, Any] = {"role": "model", "parts": [{"text": a}]}
        if thoughts is not None:  # thought parts with includeThoughts; no parts if nothing
            t = thoughts[i]
            parts = [{"text": t.text, "thought": True}] if t.shown and t.text else []
            parts += [] if t.cut and not a else [{"text": a}]
            content = {"role": "model", "parts": parts} if parts else {"role": "model"}
        candidates.append(
            {"content": content, "finishReason": "MAX_TOKENS" if cut[i] else "STOP", "index": i}
        )
    thought_tokens = sum(t.tokens for t in thoughts or ())
    usage_metadata = {
        "promptTokenCount": prompt_tokens,
        "candidatesTokenCount": completion_tokens - thought_tokens,
        "totalTokenCount": prompt_tokens + completion_tokens,
    }
    if thoughts is not None:
        usage_metadata["thoughtsTokenCount"] = thought_tokens
    return {"candidates": candidates, "usageMetadata": usage_metadata, "modelVersion": model}


def _render_responses(
    model: str, text: str, usage: tuple[int, int], thought: Thought | None
) -> dict[str, Any]:
    """A Responses API response (platform.openai.com/docs/api-reference/responses/object, read
    2026-12-06): a reasoning item first where the model reasons (its summary's text only when
    asked for), then the assistant message with one output_text part (none where the limit cut
    the answer to nothing); status "incomplete" with `incomplete_details.reason`
    "max_output_tokens" when cut; usage with input and output token details."""
    prompt_tokens, completion_tokens = usage
    output: list[dict[str, Any]] = []
    if thought is not None:
        summary = (
            [{"type": "summary_text", "text": thought.text}] if thought.shown and thought.text
            else []
        )  # fmt: skip
        output.append({"type": "reasoning", "id": "rs_loopback", "summary": summary})
    if not (thought is not None and thought.cut and not text):
        part = {"type": "output_text", "text": text, "annotations": []}
        output.append({
            "type": "message", "id": "msg_loopback", "status": "completed", "role": "assistant",
            "content": [part],
        })  # fmt: skip
    cut = thought is not None and thought.cut
    return {
        "id": f"resp_loopback{hashlib.sha256(text.encode()).hexdigest()[:16]}",
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "error": None,
        "output": output,
        "usage": {
            "input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion_tokens,
            "output_tokens_details": {"reasoning_tokens": thought.tokens if thought else 0},
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def retry_after_headers(wait_s: float) -> dict[str, str]:
    """A 429's `Retry-After` (seconds) and `retry-after-ms` for a wait of `wait_s` seconds."""
    ms = max(1, round(wait_s * 1000))
    return {"Retry-After": f"{ms / 1000:g}", "retry-after-ms": str(ms)}


class _Handler(BaseHTTPRequestHandler):
    owner: LoopbackServer
    _holds_place = False  # this request took a place under the in-flight cap
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect
    # headers and body go out in two writes: without TCP_NODELAY the body waits for the client's
    # delayed ACK of the headers (~40 ms a response on Linux), whatever --latency says
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if BatchStore.protocol_of(path):
            return self._batch("GET")
        if path in MODELS_PATHS:
            return self._models()
        if path != STATS_PATH:
            return self._json(404, {"error": {"message": f"no route {path}"}})
        self._json(200, self.owner.stats_json())

    def _models(self) -> None:
        """A models list in its protocol's shape (after its key check), counted."""
        path = self.path.split("?", 1)[0]
        with self.owner.lock:
            self.owner.stats.listed += 1
        headers = self.headers
        protocol = "openai"
        if path == "/v1beta/models" or headers.get("x-goog-api-key"):
            protocol = "gemini"
        elif headers.get("anthropic-version") or headers.get("x-api-key"):
            protocol = "anthropic"
        if not self._authorized(protocol):
            return self._json(401, {"error": {"message": "invalid api key"}})
        ids = self.owner.models
        if protocol == "openai":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "loopback"} for m in ids]
            return self._json(200, {"object": "list", "data": data})
        if protocol == "anthropic":
            rows = [
                {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                for m in ids
            ]
            first, last = (ids[0], ids[-1]) if ids else (None, None)
            body = {"data": rows, "has_more": False, "first_id": first, "last_id": last}
            return self._json(200, body)
        return self._json(200, {"models": [{"name": f"models/{m}"} for m in ids]})

    def do_POST(self) -> None:
        if BatchStore.protocol_of(self.path.split("?", 1)[0]):
            return self._batch("POST")
        route = self._route()
        if route is None:
            return self._post(route)
        owner = self.owner
        now = time.time()
        with owner.lock:
            st = owner.stats
            st.first_request_at = st.first_request_at or now
            st.last_request_at = now
            st.in_flight += 1
            st.peak_in_flight = max(st.peak_in_flight, st.in_flight)
        try:
            self._post(route)
        finally:
            with owner.lock:
                owner.stats.in_flight -= 1
                if self._holds_place:  # its place under the in-flight cap
                    owner.serving -= 1
                    self._holds_place = False
                owner.stats.last_response_at = time.time()

    def _post(self, route: tuple[str, str] | None) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if route is None:
            return self._json(404, {"error": {"message": f"no route {self.path}"}})
        protocol, model = route
        with self.owner.lock:  # before the key check: what any request brought
            stats = self.owner.stats
            stats.headers = [*stats.headers[-HEADERS_KEPT + 1 :], dict(self.headers)]
        if not self._authorized(protocol):
            return self._json(401, {"error": {"message": "invalid api key"}})
        with self.owner.lock:
            self.owner.stats.protocols[protocol] += 1
        if self._over_rate(batch=False):  # answered at once, the body neither recorded nor counted
            return
        if self._hostile(protocol, model, raw):
            return
        owner = self.owner
        digest = hashlib.sha256(raw).hexdigest()
        owner.record(digest, raw)
        fault = owner.fault_for(digest)
        if owner.latency_s:
            time.sleep(owner.latency_s)
        if fault == "drop":
            self.close_connection = True  # no response at all: the client sees a disconnect
            return
        if fault == "429":
            ms = int(owner.faults.retry_after_s * 1000)
            headers = {"Retry-After": f"{owner.faults.retry_after_s:g}", "retry-after-ms": str(ms)}
            return self._json(429, {"error": {"message": "rate limited (injected)"}}, headers)
        if fault == "500":
            return self._json(500, {"error": {"message": "server error (injected)"}})
        if fault == "malformed":
            return self._raw(200, b'{"choices": [{"message": ', "application/json")
        if fault == "slow":
            time.sleep(owner.faults.slow_s)
        try:
            request = json.loads(raw)
            refusal = owner.refusal(protocol, model, request)  # the model's rules
            if refusal is None:
                tokens = owner.thinking_tokens
                body = answer(owner.script, protocol, model, request, thinking_tokens=tokens)
        except Exception as exc:  # a bad request or a script bug: the client sees a 400
            return self._json(400, {"error": {"message": f"{type(exc).__name__}: {exc}"}})
        if refusal is not None:  # the vendor's 400 and error body; not an answer
            return self._json(refusal.status, refusal.body)
        # counted before the write, so a client that has the answer always sees it counted;
        # taken back if the client has gone (a timed-out "slow" fault)
        with owner.lock:
            owner.stats.answered += 1
            owner.stats.answered_bodies[digest] += 1
        if not self._json(200, body):
            with owner.lock:
                owner.stats.answered -= 1
                owner.stats.answered_bodies[digest] -= 1

    def _batch(self, method: str) -> None:
        """A batch route: create, poll, results, cancel, files
        (support/doubles/loopback_batches.py)."""
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?", 1)[0]
        if not self._authorized(BatchStore.protocol_of(path, self.headers) or ""):
            return self._json(401, {"error": {"message": "invalid api key"}})
        if self._over_rate(batch=True):
            return
        status, data, ctype = self.owner.batch_store.handle(
            method, self.path, self.headers, raw, self.owner.url
        )
        self._raw(status, data, ctype)

    def _over_rate(self, *, batch: bool) -> bool:
        """Take a token of the rate limit; when there is none, answer 429 with `Retry-After`
        (seconds) and `retry-after-ms` (when the next token comes), count it, and return True."""
        owner = self.owner
        wait = owner.bucket.take() if owner.bucket is not None else 0.0  # seconds
        if wait <= 0.0:
            return False if batch else self._over_cap()
        with owner.lock:
            if batch:
                owner.stats.batch_rate_limited += 1
            else:
                owner.stats.attempts += 1
                owner.stats.rate_limited += 1
        self._json(429, {"error": {"message": "rate limited"}}, retry_after_headers(wait))
        return True

    def _over_cap(self) -> bool:
        """Take a place under the in-flight cap (a model request; given back once answered, in
        `do_POST`); when all `limit` are taken, answer 429 with the cap's `retry-after`, count
        it, and return True."""
        owner, cap = self.owner, self.owner.in_flight_cap
        if cap is None:
            return False
        with owner.lock:
            full = owner.serving >= cap.limit
            if full:
                owner.stats.attempts += 1
                owner.stats.in_flight_limited += 1
            else:
                owner.serving += 1
                self._holds_place = True
        if full:
            headers = retry_after_headers(cap.retry_after_s)
            self._json(429, {"error": {"message": "too many requests in flight"}}, headers)
        return full

    def _route(self) -> tuple[str, str] | None:
        path = self.path.split("?", 1)[0]
        if path.endswith("/chat/completions"):
            return "openai", ""
        if path.endswith("/responses"):
            return "responses", ""
        if path.endswith("/messages"):
            return "anthropic", ""
        if ":generateContent" in path and "/models/" in path:
            return "gemini", path.rsplit("/models/", 1)[1].split(":", 1)[0]
        return None

    def _authorized(self, protocol: str) -> bool:
        key = self.owner.api_key
        if protocol in ("openai", "responses"):
            return self.headers.get("Authorization") == f"Bearer {key}"
        if protocol == "anthropic":  # x-api-key, or a bearer token as newer SDKs send
            bearer = self.headers.get("Authorization") in (f"Bearer {key}", key)
            return self.headers.get("x-api-key") == key or bearer
        given = self.headers.get("x-goog-api-key") or self._query_key()
        return given == key

    def _query_key(self) -> str | None:
        query = self.path.split("?", 1)[1] if "?" in self.path else ""
        for pair in query.split("&"):
            k, _, v = pair.partition("=")
            if k == "key":
                return v
        return None

    def _hostile(self, protocol: str, model: str, raw: bytes) -> bool:
        """Answer with the server's `Hostile` mode, if one is set (True: answered)."""
        owner, mode = self.owner, self.owner.hostile
        kind = (
            "drip" if mode.drip_s > 0 else "bomb" if mode.bomb_bytes > 0
            else "big" if mode.big_bytes > 0 else "redirect" if mode.redirect else None
        )  # fmt: skip
        if kind == "redirect" and mode.redirect == "same" and "hop=1" in self.path:
            kind = None  # the redirected request: answered plainly
        if kind is None:
            return False
        with owner.lock:
            owner.stats.attempts += 1
            owner.stats.hostile[kind] += 1
        if kind == "redirect":
            base = owner.url if mode.redirect == "same" else str(mode.redirect).rstrip("/")
            hop = "&hop=1" if "?" in self.path else "?hop=1"
            self._json(307, {"moved": True}, {"Location": f"{base}{self.path}{hop}"})
            return True
        tokens = owner.thinking_tokens  # the rules are not applied to hostile answers
        data = answer(owner.script, protocol, model, json.loads(raw), thinking_tokens=tokens)
        body = json.dumps(data).encode()
        try:
            if kind == "drip":
                self._drip(body, mode.drip_s, max(1, mode.drip_bytes))
            elif kind == "bomb":
                self._raw(200, owner.bomb(protocol, model, body), "application/json", {
                    "Content-Encoding": "gzip"})  # fmt: skip
            else:
                self._big(body, mode.big_bytes)
        except OSError:  # the client gave up
            pass
        self.close_connection = True
        return True

    def _drip(self, body: bytes, every_s: float, step: int) -> None:
        """The whole response, status line first, `step` bytes every `every_s` seconds, while
        the server runs."""
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        data = head + body
        for i in range(0, len(data), step):
            if self.owner._httpd is None:  # the server stopped
                return
            self.wfile.write(data[i : i + step])
            time.sleep(every_s)

    def _big(self, body: bytes, size: int) -> None:
        """`body` padded with spaces to `size` bytes, written until done, without Content-Length
        (the client reads to the close)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body[:1])
        left = max(0, size - len(body))
        pad = b" " * PAD_STEP
        while left > 0 and self.owner._httpd is not None:
            self.wfile.write(pad[: min(left, PAD_STEP)])
            left -= PAD_STEP
        self.wfile.write(body[1:])

    def _json(self, status: int, obj: dict, headers: dict[str, str] | None = None) -> bool:
        return self._raw(status, json.dumps(obj).encode(), "application/json", headers)

    def _raw(
        self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> bool:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command == "POST":  # before the write: a client holding it sees it counted
                with self.owner.lock:
                    self.owner.stats.last_response_at = time.time()
            self.wfile.write(data)
            return True
        except OSError:  # the client gave up (timeout): nothing to answer
            self.close_connection = True
            return False


@dataclass(frozen=True)
class AnswerRule:
    """One rule of an `--answers` file: `pattern` searched in the request's last user text."""

    pattern: re.Pattern[str]
    answer: str


def read_rules(path: Path) -> list[AnswerRule]:
    """The rules of a JSONL file (one `{"pattern": REGEX, "answer": TEXT}` a line, blank lines
    skipped); ValueError naming the file and line of anything else."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it ({exc})") from None
    rules = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{where}: not JSON ({exc})") from None
        if not (
            isinstance(row, dict)
            and set(row) == {"pattern", "answer"}
            and all(isinstance(v, str) for v in row.values())
        ):
            raise ValueError(
                f'{where}: expected {{"pattern": REGEX, "answer": TEXT}} (two strings, no other '
                f"field), got {line.strip()[:80]}"
            )
        try:
            rules.append(AnswerRule(re.compile(row["pattern"]), row["answer"]))
        except re.error as exc:
            raise ValueError(f"{where}: bad pattern {row['pattern']!r} ({exc})") from None
    if not rules:
        raise ValueError(f"{path}: no rules (one JSON object a line)")
    return rules


def last_user_text(request: ScriptRequest) -> str:
    """The last text part of the request's user turn ("" without one)."""
    return request.texts[-1] if request.texts else ""


def answers_script(spec: str | None, default: str) -> Script:
    """The command line's script: `default` for every request, or by `--answers` `spec` (an
    existing file: JSONL rules, first match wins, `default` otherwise; else `module:function`,
    called with the last user text). ValueError naming what is wrong."""
    if spec is None:
        return lambda _request: default
    path = Path(spec)
    if path.is_file():
        rules = read_rules(path)

        def by_rule(request: ScriptRequest) -> str:
            text = last_user_text(request)
            return next((r.answer for r in rules if r.pattern.search(text)), default)

        return by_rule
    module_name, sep, attr = spec.partition(":")
    if not (sep and module_name and attr):
        raise ValueError(f"{spec}: no such file, and not module:function")
    try:
        function = getattr(importlib.import_module(module_name), attr)
    except ImportError as exc:
        raise ValueError(f"{spec}: cannot import {module_name} ({exc})") from None
    except AttributeError:
        raise ValueError(f"{spec}: {module_name} has no {attr}") from None
    if not callable(function):
        raise ValueError(f"{spec}: {attr} is not a function")

    def by_function(request: ScriptRequest) -> str:
        found = function(last_user_text(request))
        if not isinstance(found, str):  # the client sees a 400 naming it
            raise TypeError(f"{spec} returned {type(found).__name__}, not str")
        return found

    return by_function


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults shown after each option's help (those that are values: not an option off by
    default, nor an empty list); the module's docstring kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default in ([], ""):
            return action.help
        return super()._get_help_string(action)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m support.doubles.loopback",
        description=__doc__,
        formatter_class=_HelpFormatter,
    )
    ap.add_argument("--api-key", required=True, help="the key a client must send")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    ap.add_argument(
        "--answer", default=DEFAULT_ANSWER,
        help="the answer to every request (with --answers: where no rule matches)",
    )  # fmt: skip
    ap.add_argument(
        "--answers", default=None, metavar="FILE|MODULE:FUNCTION",
        help='answers by rule: a JSONL file of {"pattern": REGEX, "answer": TEXT} tried in '
        "order on the request's last user text (the first match answers), or a function of "
        "that text returning the answer",
    )  # fmt: skip
    ap.add_argument(
        "--models", default="", metavar="ID[,ID...]",
        help="the model ids its models lists (GET /v1/models) name",
    )  # fmt: skip
    ap.add_argument("--latency", type=float, default=0.0, help="seconds per response")
    ap.add_argument(
        "--fault-rate", type=float, default=0.0,
        help="share of distinct request bodies whose first attempt fails (429, 500, slow, "
        "malformed, dropped)",
    )  # fmt: skip
    ap.add_argument(
        "--rate-limit", type=float, default=None, metavar="PER_S",
        help="answer 429 (with retry-after) past this many requests a second",
    )  # fmt: skip
    ap.add_argument("--burst", type=int, default=1, help="requests the rate limit lets at once")
    ap.add_argument(
        "--in-flight-cap", type=int, default=None, metavar="N",
        help="answer 429 (with retry-after) to a model request past N being served",
    )  # fmt: skip
    ap.add_argument(
        "--in-flight-retry-after", type=float, default=1.0, metavar="S",
        help="the retry-after (seconds) of the in-flight cap's 429s",
    )  # fmt: skip
    ap.add_argument(
        "--lifetime", type=float, default=600.0, metavar="S",
        help="seconds before it stops by itself (it says so when it does)",
    )  # fmt: skip
    ap.add_argument(
        "--no-rules", action="store_true",
        help="answer what the named model's API would refuse (no vendor 400s)",
    )  # fmt: skip
    ap.add_argument(
        "--thinking-tokens", type=int, default=DEFAULT_THINKING_TOKENS, metavar="N",
        help="tokens a request that thinks thinks",
    )  # fmt: skip
    ap.add_argument(
        "--record", type=Path, default=None, metavar="DIR",
        help="store each distinct request body as DIR/<sha256>.json",
    )  # fmt: skip
    batch = ap.add_argument_group(
        "batches",
        "how the n-th batch created ends (comma lists or repeated options: the n-th value is "
        "the n-th batch's, the last repeats)",
    )
    batch.add_argument(
        "--batch-polls", type=_counts, action="append", default=[], metavar="N[,N...]",
        help="status reads a batch stays in progress (none given: 1)",
    )  # fmt: skip
    batch.add_argument(
        "--batch-ends", type=_endings, action="append", default=[], metavar="END[,END...]",
        help=f"how a batch ends, one of {', '.join(ENDINGS)} (none given: completed)",
    )  # fmt: skip
    batch.add_argument(
        "--batch-done-before-end", type=_counts, action="append", default=[], metavar="N[,N...]",
        help="items an expired or cancelled batch answered first (none given: 0)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if not 0 <= args.port <= 65535:
        ap.error(f"--port {args.port}: expected 0 (any free port) to 65535")
    if not args.lifetime > 0:
        ap.error(f"--lifetime {args.lifetime}: expected a positive number of seconds")
    try:
        script = answers_script(args.answers, args.answer)
    except ValueError as exc:
        ap.error(f"--answers {exc}")
    polls, ends, done = (
        [v for values in lists for v in values]
        for lists in (args.batch_polls, args.batch_ends, args.batch_done_before_end)
    )
    plans = plans_of(polls, ends, done)
    try:
        server = LoopbackServer(
            script,
            api_key=args.api_key,
            latency_s=args.latency,
            faults=Faults(rate=args.fault_rate),
            lifetime_s=args.lifetime,
            record_dir=args.record,
            rate_limit=RateLimit(args.rate_limit, args.burst) if args.rate_limit else None,
            in_flight_cap=(
                InFlightCap(args.in_flight_cap, args.in_flight_retry_after)
                if args.in_flight_cap
                else None
            ),
            batches=plans,
            rules=not args.no_rules,
            thinking_tokens=args.thinking_tokens,
            port=args.port,
            models=[m.strip() for m in args.models.split(",") if m.strip()],
        ).start()
    except OSError as exc:  # the port is taken
        ap.error(f"--port {args.port}: cannot listen there ({exc.strerror or exc})")
    print(server.url, flush=True)  # the first line: what server_process and scripts read
    print(
        f"loopback: --api-base openai={server.url}/v1 --api-base anthropic={server.url} "
        f"--api-base google={server.url} (Anthropic's and Gemini's base URLs have no version "
        f"path); stops in {args.lifetime:g} s (--lifetime)",
        flush=True,
    )
    try:
        while server._httpd is not None:
            time.sleep(0.2)
    except KeyboardInterrupt:
        server.stop()
        print("loopback: stopped (interrupted)", flush=True)
        return 0
    if server.expired:
        print(
            f"loopback: stopped: its lifetime of {args.lifetime:g} s ended (--lifetime)", flush=True
        )
    return 0


@contextlib.contextmanager
def server_process(
    answer: str, api_key: str, *options: str, lifetime_s: float = 600.0
) -> Iterator[str]:
    """`python -m support.doubles.loopback` in a process of its own (a benchmark's server, off
    the client's cores' GIL): yields its URL once it listens; stopped on the way out (terminate,
    then kill after 10 s). `options`: more of its command-line options."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "support.doubles.loopback", "--answer", answer]
    cmd += ["--api-key", api_key, "--lifetime", str(lifetime_s), *options]
    root = Path(__file__).resolve().parents[2]  # the repository: `support` importable from it
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"loopback server did not start: {url!r}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _counts(text: str) -> list[int]:
    """A comma list of whole numbers >= 0 (an argparse type: bad input is a usage error)."""
    values = [v.strip() for v in text.split(",")]
    if not all(v.isdigit() for v in values):
        raise argparse.ArgumentTypeError(f"expected whole numbers >= 0, comma separated: {text!r}")
    return [int(v) for v in values]


def _endings(text: str) -> list[str]:
    """A comma list of batch endings (an argparse type: bad input is a usage error)."""
    values = [v.strip() for v in text.split(",")]
    if bad := [v for v in values if v not in ENDINGS]:
        raise argparse.ArgumentTypeError(f"{bad[0]!r} is not one of {', '.join(ENDINGS)}")
    return values


if __name__ == "__main__":
    raise SystemExit(main())
