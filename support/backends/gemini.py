"""Gemini API backend (`google:`, `gemini-*`) through google-genai (not Vertex AI).

One `google.genai.Client` per backend, created in the running loop on the first call, pinned to
the Gemini API (`vertexai=False`). google-genai does not retry unless told to: the client gets
`HttpRetryOptions` with `max_retries + 1` attempts (exponential backoff 0.5 s .. 8 s, jittered) on
408, 429, 500, 502, 503, 504, plus the connect errors and timeouts the SDK always treats as
transient. `HttpOptions.timeout` is in milliseconds (the SDK divides by 1000 for httpx).

Endpoint: `--api-base` if given, else google-genai's own `GOOGLE_GEMINI_BASE_URL`, else
generativelanguage.googleapis.com. The base URL is the server root without a version path; the SDK
appends `/<api version>/models/<id>:generateContent` (google-genai 3.x defaults to `v1`;
`GOOGLE_GENAI_API_VERSION` changes it).

A clip (Part.video) is one inline video part: the file's bytes with its MIME type (a documented
video type, GEMINI_VIDEO_MIMES) and `video_metadata.fps`, the rate its frames were sampled at
(`sent_fps`), so the model samples the frames the other providers are sent. A request with a clip
whose inline data passes GEMINI_INLINE_BYTES is refused before it is sent (`inline_refusal`).

`n` maps to `candidate_count`; `seed` to `GenerateContentConfig.seed`. The Gemini API has no
native prefill; the fallback appends a trailing `model`-role turn with the prefill, which the model
usually continues but may treat as a finished turn. `texts` hold only the generated text.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from support.backends.api_backend import Answer, ApiBackend
from support.backends.api_models import PLAIN_RULES, RequestRules, plan
from support.backends.base import BackendError, register_provider
from support.backends.batch_protocol import BatchLimits, BatchState, ListedBatch, creation_error
from support.backends.retry import MalformedResponse, is_malformed
from support.backends.thinking import Thinking
from support.types import Part, Request, Response, Usage

if TYPE_CHECKING:
    from google import genai
    from google.genai import types

    from support.backends.api_models import Plan
    from support.videos import Clip

# the SDK is imported by the first call: a run whose answers are all cached never needs it

RETRY_STATUS_CODES = [408, 429, 500, 502, 503, 504]
RETRY_INITIAL_DELAY_S = 0.5
RETRY_MAX_DELAY_S = 8.0
# Batch Mode's inline requests (ai.google.dev/gemini-api/docs/batch-mode, taken 2026-11-25): up
# to 20 MB a batch request; larger rounds go as several batches (a file upload, up to 2 GB, is
# not used here)
GEMINI_BATCH_LIMITS = BatchLimits(requests=100_000, bytes=20 * 2**20)
# the intent's nonce (support/client/batch_queue.py) rides in the job's display name
# (ai.google.dev/api/batch-mode: `GenerateContentBatch.displayName`, "the user-defined name of
# this batch"), which batches.list returns; the list's order is not documented, so it is read
# whole (at most support.client.batch_queue.MAX_LISTED jobs), LIST_PAGE a page
NONCE_PREFIX = "vlmbench-intent-"
LIST_PAGE = 100


# Inline data (ai.google.dev/gemini-api/docs/file-input-methods, "Input method comparison", and
# .../docs/video-understanding: "Inline Data < 100MB"; raised from 20 MB on 2026-01-12,
# blog.google "Increased file size limits and expanded inputs support in Gemini API"; read
# 2026-12-06): a request with a clip is refused above it, the parts counted as sent (base64)
GEMINI_INLINE_BYTES = 100 * 10**6
# the video MIME types of the video-understanding page ("Supported video formats"); a clip's
# own type -> the one sent (support.videos.MIME_OF names AVI video/x-msvideo)
GEMINI_VIDEO_MIMES = frozenset(
    {"video/mp4", "video/mpeg", "video/mov", "video/avi", "video/x-flv", "video/mpg",
     "video/webm", "video/wmv", "video/3gpp"}
)  # fmt: skip
GEMINI_MIME_OF = {"video/x-msvideo": "video/avi", "video/quicktime": "video/mov"}
# VideoMetadata.fps: "The fps range is (0.0, 24.0]" (google-genai types.VideoMetadata)
GEMINI_MAX_FPS = 24.0


def gemini_video_mime(clip: Clip) -> str:
    """The MIME type a clip is sent with (GEMINI_MIME_OF), documented or not."""
    return GEMINI_MIME_OF.get(clip.mime, clip.mime)


def sent_fps(clip: Clip) -> float:
    """Frames per second the model samples the clip at: the rate it was read at, or for a clip
    sampled by count its frames over its duration, within the API's (0, 24]."""
    fps = clip.fps
    if fps is None:
        fps = len(clip.frames) / clip.seconds if clip.seconds > 0 else 1.0
    return min(max(fps, 1e-3), GEMINI_MAX_FPS)


def inline_bytes(request: Request) -> int:
    """Bytes of the request's inline data as sent: each image's and clip's file in base64."""
    sizes = [len(p.image) for p in request.images if p.image is not None]
    sizes += [len(clip.data) for clip in request.clips]
    return sum(4 * ((n + 2) // 3) for n in sizes)


def inline_refusal(request: Request) -> str | None:
    """Why the Gemini API would refuse a request with a clip (None: it would not, or there is
    no clip): a clip's MIME type it does not take, or inline data over GEMINI_INLINE_BYTES."""
    clips = request.clips
    if not clips:
        return None
    for clip in clips:
        if gemini_video_mime(clip) not in GEMINI_VIDEO_MIMES:
            return (
                f"a {clip.mime} clip: the Gemini API takes {', '.join(sorted(GEMINI_VIDEO_MIMES))}"
            )
    size = inline_bytes(request)
    if size <= GEMINI_INLINE_BYTES:
        return None
    files = ", ".join(f"{len(c.data) / 1e6:.1f} MB" for c in clips)
    return (
        f"inline data of {size / 1e6:.1f} MB in base64 (the clip's file: {files}); the Gemini "
        f"API takes at most {GEMINI_INLINE_BYTES / 1e6:g} MB inline a request (larger files go "
        "through its Files API, not used here)"
    )


def gemini_part(part: Part) -> types.Part:
    """One request part as google-genai's: text, an image's bytes, or a clip as inline video
    with its sampling rate (`video_metadata.fps`)."""
    from google.genai import types

    if part.image is not None:
        return types.Part.from_bytes(data=part.image, mime_type=part.mime)
    if part.video is not None:
        clip = part.video
        return types.Part(
            inline_data=types.Blob(data=clip.data, mime_type=gemini_video_mime(clip)),
            video_metadata=types.VideoMetadata(fps=sent_fps(clip)),
        )
    return types.Part.from_text(text=part.text or "")


# a batch job's state -> how it ended (None: pending or running)
GEMINI_ENDINGS = {
    "JOB_STATE_SUCCEEDED": "completed",
    "JOB_STATE_PARTIALLY_SUCCEEDED": "completed",
    "JOB_STATE_EXPIRED": "expired",
    "JOB_STATE_CANCELLED": "cancelled",
    "JOB_STATE_FAILED": "failed",
}


def gemini_contents(
    request: Request, *, rules: RequestRules = PLAIN_RULES, thinking: Thinking | None = None
) -> tuple[list[types.Content], types.GenerateContentConfig]:
    """`contents` and `config` of `models.generate_content` for `request`, fitted to the
    model's `rules` and `thinking` setting (api_models.plan): `max_output_tokens` grown by the
    room for thinking (it counts against the limit), a `thinking_config` with the budget or
    level chosen, and thought summaries asked for whenever the model thinks."""
    from google.genai import types

    sent = plan(request, rules, thinking)
    parts = [gemini_part(p) for p in sent.request.parts]
    contents = [types.Content(role="user", parts=parts)]
    if sent.request.prefill:
        prefill = types.Part.from_text(text=sent.request.prefill)
        contents.append(types.Content(role="model", parts=[prefill]))
    thinking_config = None
    if rules.thinks(thinking):
        setting = sent.thinking
        thinking_config = types.ThinkingConfig(
            include_thoughts=True,
            thinking_budget=setting.budget if setting is not None else None,
            thinking_level=setting.effort.upper() if setting and setting.effort else None,
        )
    elif thinking is not None:  # a budget of 0: thinking off
        thinking_config = types.ThinkingConfig(thinking_budget=thinking.budget)
    config = types.GenerateContentConfig(
        system_instruction=request.system or None,
        temperature=sent.temperature,
        max_output_tokens=sent.max_tokens,
        candidate_count=request.n,
        seed=request.seed,
        thinking_config=thinking_config,
    )
    return contents, config


def gemini_result(response: Any) -> Answer:
    """Texts (one per candidate, in index order, thought parts left out), usage (thought
    tokens billed as output and counted apart), thinking (the thought parts' text) and finish
    reasons.

    A prompt the API blocked raises BackendError (no retry helps); a body without candidates
    raises MalformedResponse.
    """
    candidates = getattr(response, "candidates", None)
    if not candidates:
        feedback = getattr(response, "prompt_feedback", None)
        reason = getattr(feedback, "block_reason", None)
        if reason:
            raise BackendError(f"prompt blocked: {reason}")
        raise MalformedResponse(f"no candidates in the response ({type(response).__name__})")
    try:
        indexed = [(_index(c, i), c) for i, c in enumerate(candidates)]
        ordered = [c for _, c in sorted(indexed, key=lambda t: t[0])]
        texts = tuple(_candidate_text(c) for c in ordered)
        thinking = tuple(_candidate_text(c, thought=True) for c in ordered)
        reasons = tuple(_finish_reason(c) for c in ordered)
    except (AttributeError, TypeError) as exc:
        raise MalformedResponse(f"malformed candidate: {exc}") from exc
    meta = getattr(response, "usage_metadata", None)
    if meta is None:
        return Answer(texts, Usage(), thinking, reasons)
    # thinking models bill thought tokens as output; gemini-2.0-flash reports none
    thoughts = meta.thoughts_token_count
    counted = Usage.reported(
        meta.prompt_token_count, meta.candidates_token_count, thoughts, reasoning=thoughts
    )
    return Answer(texts, counted, thinking, reasons)


def _finish_reason(candidate: Any) -> str:
    """The candidate's finish reason as the API spells it ("STOP", "MAX_TOKENS", ...)."""
    reason = candidate.finish_reason
    if reason is None:
        return ""
    return str(getattr(reason, "name", reason))


def _index(candidate: Any, position: int) -> int:
    """The candidate's index; its position when the API leaves it out (one candidate)."""
    return candidate.index if isinstance(candidate.index, int) else position


def _candidate_text(candidate: Any, thought: bool = False) -> str:
    """The candidate's answer text (`thought`: its thought parts' text instead)."""
    content = candidate.content
    if content is None or not content.parts:  # e.g. finish_reason SAFETY or MAX_TOKENS
        return ""
    return "".join(p.text for p in content.parts if p.text and bool(p.thought) == thought)


def _transport_errors() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """(connection errors, timeouts) of the HTTP stacks google-genai may be using."""
    conn: list[type] = []
    timeouts: list[type] = [TimeoutError]
    for mod in ("httpx2", "httpx"):
        m = sys.modules.get(mod)
        if m is not None:
            conn.append(m.TransportError)
            timeouts.append(m.TimeoutException)
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is not None:
        conn.append(aiohttp.ClientConnectionError)
        timeouts.append(aiohttp.ServerTimeoutError)
    return tuple(conn), tuple(timeouts)


def gemini_retryable(exc: BaseException) -> bool:
    """Outer retry: malformed bodies, and dropped connections (the SDK retries only connect
    errors and timeouts, not a connection lost mid-response)."""
    if is_malformed(exc):
        return True
    conn, timeouts = _transport_errors()
    return isinstance(exc, conn) and not isinstance(exc, timeouts)


@register_provider
class GeminiBackend(ApiBackend):
    """generateContent through `google.genai.Client(...).aio`."""

    provider = "google"
    key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    needs = ("google.genai", "tenacity")
    prefill = "model-turn fallback"
    endpoint = "generateContent"
    # the SDK reads them in google-genai 3.x (_base_url.py: GOOGLE_GEMINI_BASE_URL, the Gemini
    # API; Vertex's is never used here)
    endpoint_variable = "GOOGLE_GEMINI_BASE_URL"
    base_url_form = (
        "the server's root, with no version path (http://host:port, not .../v1beta: the SDK "
        "appends its version)"
    )
    vendor_url = "https://generativelanguage.googleapis.com"

    @classmethod
    def box_convention(cls, model_id: str) -> str:
        """Gemini's `box_2d`: [ymin, xmin, ymax, xmax] relative, 0-1000, whatever the id."""
        return "gemini"

    def http_options(self) -> types.HttpOptions:
        """Endpoint, timeout, retries and HTTP stack of the client.

        google-genai sends through aiohttp whenever aiohttp is importable, and there a timed-out
        attempt ends the call (a bare TimeoutError, not retried). A transport of our own keeps
        it on httpx2, whose timeouts it retries, whatever else is installed
        (unit/evaluations/pointing/test_api_pointing.py's fault test failed with aiohttp installed
        before). That transport is the guard's (http_guard.py: the deadline an attempt, body caps,
        keys kept to their origin)."""
        from google.genai import types

        own = None
        if self._http_client is None:  # the hooks: 429s to the adaptive concurrency
            own = {**self.guarded_client_args(), "event_hooks": self.event_hooks()}
        else:
            self.observed(self._http_client)
        return types.HttpOptions(
            base_url=self.client_url,  # None: GOOGLE_GEMINI_BASE_URL, else the Gemini API
            headers=self.client_headers or None,
            timeout=round(self.timeout_s * 1000),  # milliseconds, per read (guard: per attempt)
            retry_options=types.HttpRetryOptions(
                attempts=self.max_retries + 1,  # attempts include the first request
                initial_delay=RETRY_INITIAL_DELAY_S,
                max_delay=RETRY_MAX_DELAY_S,
                http_status_codes=RETRY_STATUS_CODES,
            ),
            httpx_async_client=self._http_client,
            async_client_args=own,
        )

    def _get_client(self) -> genai.Client:
        from google import genai

        if self._client is None:
            self._client = genai.Client(
                vertexai=False, api_key=self._api_key, http_options=self.http_options()
            )
        return self._client

    async def _once(
        self, contents: list[types.Content], config: types.GenerateContentConfig
    ) -> Answer:
        response = await self._get_client().aio.models.generate_content(
            model=self.model_id, contents=contents, config=config
        )
        return gemini_result(response)

    async def model_ids(self) -> list[str]:
        """The ids of `GET <base URL>/<version>/models` (its first page), without `models/`."""
        pager = await self._get_client().aio.models.list(config={"page_size": LIST_PAGE})
        return [str(m.name).removeprefix("models/") for m in pager.page]

    def plan(self, request: Request) -> Plan:
        """As ApiBackend's, and BackendError for a request with a clip the API would refuse
        (`inline_refusal`: its MIME type, or inline data over GEMINI_INLINE_BYTES)."""
        refused = inline_refusal(request)
        if refused is not None:
            raise BackendError(f"{self.name}: {refused}")
        return super().plan(request)

    def contents(self, request: Request) -> tuple[list[types.Content], types.GenerateContentConfig]:
        """`gemini_contents` fitted to the model."""
        return gemini_contents(request, rules=self.rules, thinking=self.thinking)

    async def generate(self, request: Request) -> Response:
        adapted = self.plan(request).adapted
        contents, config = self.contents(request)
        return await self._call(
            request, lambda: self._once(contents, config), gemini_retryable, adapted
        )

    # ---- Batch Mode (--batch, support/client/batch_queue.py) ---------------------------------
    batch_limits = GEMINI_BATCH_LIMITS

    async def submit_batch(self, items: Sequence[tuple[str, Request]], nonce: str) -> str:
        """Inline requests, each carrying its cache key in `metadata`; `nonce` in the job's
        display name."""
        from google.genai import types

        src = []
        for key, request in items:
            contents, config = self.contents(request)
            item = types.InlinedRequest(contents=contents, config=config, metadata={"key": key})
            src.append(item)
        client = self._get_client()
        # one attempt: a retry after a lost answer makes a second job (the intent finds the
        # first when the next run lists them)
        once = types.HttpOptions(retry_options=types.HttpRetryOptions(attempts=1))
        config = types.CreateBatchJobConfig(display_name=NONCE_PREFIX + nonce, http_options=once)
        try:
            job = await client.aio.batches.create(model=self.model_id, src=src, config=config)
        except Exception as exc:
            raise creation_error(self.name, exc) from None
        return str(job.name)

    async def list_batches(self, since: float) -> AsyncIterator[ListedBatch]:
        """The project's batch jobs, all of them (the list's order is not documented; the
        caller bounds how many it reads): `since` cannot end the walk."""
        from google.genai import types

        config = types.ListBatchJobsConfig(page_size=LIST_PAGE)
        async for job in await self._get_client().aio.batches.list(config=config):
            created = job.create_time.timestamp() if job.create_time is not None else 0.0
            name = job.display_name or ""
            nonce = name.removeprefix(NONCE_PREFIX) if name.startswith(NONCE_PREFIX) else None
            stats = job.completion_stats
            total = sum(
                getattr(stats, f, None) or 0
                for f in ("successful_count", "failed_count", "incomplete_count")
            )
            yield ListedBatch(str(job.name), created, nonce, total)

    async def batch_state(self, batch_id: str) -> BatchState:
        client = self._get_client()
        job = await self._sdk(lambda: client.aio.batches.get(name=batch_id))
        state = getattr(job.state, "name", str(job.state))
        stats = job.completion_stats
        done = ((stats.successful_count or 0) + (stats.failed_count or 0)) if stats else 0
        total = done + ((stats.incomplete_count or 0) if stats else 0)
        return BatchState(state, GEMINI_ENDINGS.get(state), done, total)

    async def batch_results(
        self, batch_id: str, keys: Sequence[str], nonce: str | None = None
    ) -> dict[str, Response | str]:
        """The inlined responses, by the key in their metadata (else by position)."""
        client = self._get_client()
        job = await self._sdk(lambda: client.aio.batches.get(name=batch_id))
        responses = (job.dest.inlined_responses if job.dest is not None else None) or []
        wanted = set(keys)
        out: dict[str, Response | str] = {}
        for i, row in enumerate(responses):
            meta = row.metadata or {}
            key = meta.get("key") if isinstance(meta, dict) else None
            if key is None and i < len(keys):
                key = keys[i]
            if key not in wanted:
                continue
            if row.error is not None:
                out[key] = f"{row.error.code}: {row.error.message}"[:500]
                continue
            try:
                answer = gemini_result(row.response)
            except Exception as exc:  # blocked or malformed: that item's failure
                out[key] = f"{type(exc).__name__}: {exc}"[:500]
                continue
            out[key] = answer.response(self.name, batch=True)
        return out

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aio.aclose()
