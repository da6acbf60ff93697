"""What every HTTP response of the API backends' SDKs passes through: a deadline per attempt, a
capped body, and keys kept to the origin they were meant for.

`GuardedTransport` wraps the httpx2 transport that each SDK's client (openai, anthropic,
google-genai) is built with (`guarded_client_args`), so it sees every attempt, the SDKs' own
retries and each hop of a redirect included:

- **Deadline.** An attempt (connection, request, headers and the whole body, every redirect hop
  included) ends `--api-timeout` seconds after it began, whatever the server's pace: the SDKs'
  own timeouts apply per read, so a server that sends a byte every half second held a request
  open for minutes. A late attempt raises `DeadlineExceeded`, an httpx2 timeout, which each SDK
  retries as it retries a timeout.
- **Body caps.** A response body is counted as it arrives, on the wire and decompressed (gzip and
  deflate are decoded here, incrementally, each zlib call's output bounded; no other encoding is
  accepted), and past a cap the read stops with `ResponseTooLarge`: nothing is kept beyond the cap
  (plus one decode step). Answers get `ANSWER_*`; the batch downloads (`DOWNLOAD_ROUTES`: OpenAI's
  output files, Anthropic's results, a Gemini batch job with its inlined responses), which
  legitimately hold a whole batch, get `DOWNLOAD_*` and a longer deadline.
- **Keys.** A request sent to an origin (scheme, host, port) other than its first hop's, i.e. a
  redirect elsewhere, goes without its key headers (`KEY_HEADERS`) and without any header holding
  a registered secret (the Basic header of `--api-base` credentials included); httpx2 itself
  drops only `Authorization`, so google-genai re-sent `x-goog-api-key`. Same-origin redirects keep
  them.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2

from support.backends.retry import GuardFailure
from support.secrets import redact

MIB = 2**20
# an answer's body: far past any chat answer (128k output tokens x n samples, JSON-escaped, are a
# few MB) and small enough that 128 requests in flight stay within a few GB at worst
ANSWER_WIRE_BYTES = 32 * MIB  # bytes as received (compressed or not)
ANSWER_BODY_BYTES = 32 * MIB  # bytes after decompression
# a batch download holds the whole batch: OpenAI takes 200 MB of input (50,000 requests) and
# Anthropic 256 MB (100,000), and their outputs carry every answer with its metadata
DOWNLOAD_WIRE_BYTES = 1024 * MIB
DOWNLOAD_BODY_BYTES = 1024 * MIB
DOWNLOAD_DEADLINE_S = 600.0  # seconds, at least, for one batch download attempt
# GET routes that download a batch's results
DOWNLOAD_ROUTES = re.compile(
    r"/files/[^/]+/content$"  # OpenAI: a batch's output or error file
    r"|/messages/batches/[^/]+/results$"  # Anthropic: a batch's results (JSONL)
    r"|/batches/[^/:]+$"  # Gemini: a batch job with its inlined responses (and OpenAI's status)
)
DECODE_STEP = 256 * 1024  # bytes of decompressed output a zlib call may return
ACCEPT_ENCODING = "gzip, deflate"  # what the guard decodes; sent on every request
KEY_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key"})
# a request extension: (origin, deadline) of an attempt's first hop; httpx2 hands a request's
# extensions to the redirect it follows, so every hop of one attempt shares them
FIRST_HOP = "vlmbench_first_hop"


class DeadlineExceeded(httpx2.ReadTimeout, GuardFailure):
    """An attempt that had no whole response (headers and body) within its deadline."""


class ResponseTooLarge(httpx2.DecodingError, GuardFailure):
    """A response body past a cap (on the wire or decompressed); read no further."""


class EncodingRefused(httpx2.DecodingError, GuardFailure):
    """A response body in a content encoding the guard does not decode."""


@dataclass(frozen=True)
class ResponseLimits:
    """One response's limits: seconds for the attempt, bytes on the wire and decompressed."""

    deadline_s: float
    wire_bytes: int
    body_bytes: int


def origin(url: httpx2.URL) -> tuple[str, str, int | None]:
    """(scheme, host, port) of `url`, the default port made explicit."""
    port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host, port


def where(request: httpx2.Request) -> str:
    """`METHOD scheme://host:port/path` of `request` (no query: it may hold a key)."""
    url = request.url
    return f"{request.method} {url.scheme}://{url.netloc.decode('ascii')}{url.path}"


def _mib(n: int) -> str:
    return f"{n / MIB:g} MiB"


class _Inflater:
    """Incremental gzip / deflate decoding whose every call returns at most DECODE_STEP bytes."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        # gzip: its header; deflate: the zlib wrapper, else raw (as servers send either)
        self.wbits = zlib.MAX_WBITS | 16 if encoding == "gzip" else zlib.MAX_WBITS
        self.inflater = zlib.decompressobj(self.wbits)
        self.started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces of `data` (a generator: the caller counts between pieces)."""
        while data and not self.inflater.eof:
            try:
                out = self.inflater.decompress(data, DECODE_STEP)
            except zlib.error:
                if self.started or self.encoding != "deflate" or self.wbits < 0:
                    raise
                self.wbits = -zlib.MAX_WBITS  # raw deflate
                self.inflater = zlib.decompressobj(self.wbits)
                continue
            self.started = True
            data = self.inflater.unconsumed_tail
            if out:
                yield out
        while not self.inflater.eof:  # output still pending from input already taken
            out = self.inflater.decompress(b"", DECODE_STEP)
            if not out:
                break
            yield out


class GuardedStream(httpx2.AsyncByteStream):
    """A response body read within the deadline, counted and decoded (see the module doc)."""

    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        request: httpx2.Request,
        limits: ResponseLimits,
        deadline: float,  # anyio.current_time() at which the attempt ends
        encoding: str | None,  # "gzip" | "deflate" | None (as is)
    ) -> None:
        self.inner = inner
        self.request = request
        self.limits = limits
        self.deadline = deadline
        self.inflater = _Inflater(encoding) if encoding else None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        wire = body = 0  # bytes so far
        chunks = self.inner.__aiter__()
        while True:
            try:
                with anyio.CancelScope(deadline=self.deadline) as scope:
                    chunk = await chunks.__anext__()
            except StopAsyncIteration:
                return
            if scope.cancelled_caught:
                raise late(self.request, self.limits)
            wire += len(chunk)
            if wire > self.limits.wire_bytes:
                raise too_large(self.request, self.limits.wire_bytes, "on the wire")
            pieces = [chunk] if self.inflater is None else self._decoded(chunk)
            for piece in pieces:
                body += len(piece)
                if body > self.limits.body_bytes:
                    raise too_large(self.request, self.limits.body_bytes, "decompressed")
                yield piece

    def _decoded(self, chunk: bytes) -> Iterator[bytes]:
        assert self.inflater is not None
        try:
            yield from self.inflater.feed(chunk)
        except zlib.error as exc:
            raise httpx2.DecodingError(
                f"{where(self.request)}: bad {self.inflater.encoding} body: {exc}",
                request=self.request,
            ) from None

    async def aclose(self) -> None:
        await self.inner.aclose()


def late(request: httpx2.Request, limits: ResponseLimits) -> DeadlineExceeded:
    """The error of an attempt past its deadline."""
    return DeadlineExceeded(
        f"no whole response within the {limits.deadline_s:g} s deadline of one attempt "
        f"(--api-timeout: headers and body, whatever the server's pace): {where(request)}",
        request=request,
    )


def too_large(request: httpx2.Request, cap: int, kind: str) -> ResponseTooLarge:
    """The error of a body past `cap` bytes (`kind`: "on the wire" or "decompressed")."""
    return ResponseTooLarge(
        f"response body over {_mib(cap)} {kind} (support/backends/http_guard.py caps), "
        f"refused unread past the cap: {where(request)}",
        request=request,
    )


class GuardedTransport(httpx2.AsyncBaseTransport):
    """`inner` with the deadline, the body caps and the keys' origin rule (module doc)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, deadline_s: float) -> None:
        self.inner = inner
        self.deadline_s = deadline_s  # seconds an attempt (--api-timeout)

    def limits_for(self, request: httpx2.Request) -> ResponseLimits:
        """The download limits for a batch download, the answer limits for everything else."""
        if request.method == "GET" and DOWNLOAD_ROUTES.search(request.url.path):
            deadline = max(self.deadline_s, DOWNLOAD_DEADLINE_S)
            return ResponseLimits(deadline, DOWNLOAD_WIRE_BYTES, DOWNLOAD_BODY_BYTES)
        return ResponseLimits(self.deadline_s, ANSWER_WIRE_BYTES, ANSWER_BODY_BYTES)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        limits = self.limits_for(request)
        if FIRST_HOP not in request.extensions:  # an attempt's first hop (each retry is one)
            deadline = anyio.current_time() + limits.deadline_s
            request.extensions[FIRST_HOP] = (origin(request.url), deadline)
        first_origin, deadline = request.extensions[FIRST_HOP]
        if origin(request.url) != first_origin:  # a redirect elsewhere: no key goes there
            for name, value in list(request.headers.items()):
                if name.lower() in KEY_HEADERS or redact(value) != value:
                    del request.headers[name]
        request.headers["Accept-Encoding"] = ACCEPT_ENCODING
        with anyio.CancelScope(deadline=deadline) as scope:
            response = await self.inner.handle_async_request(request)
        if scope.cancelled_caught:
            raise late(request, limits)
        try:
            return self._guarded(request, response, limits, deadline)
        except BaseException:
            await response.aclose()
            raise

    def _guarded(
        self,
        request: httpx2.Request,
        response: httpx2.Response,
        limits: ResponseLimits,
        deadline: float,
    ) -> httpx2.Response:
        headers = httpx2.Headers(response.headers)
        length = headers.get("Content-Length", "")
        if length.isdigit() and int(length) > limits.wire_bytes:  # refused before a byte is read
            raise too_large(request, limits.wire_bytes, "on the wire")
        codings = [c.strip().lower() for c in headers.get("Content-Encoding", "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "deflate")):
            raise EncodingRefused(
                f"response body in content encoding {headers['Content-Encoding']!r}: "
                f"only {ACCEPT_ENCODING} are read: {where(request)}",
                request=request,
            )
        if codings:  # decoded here: httpx2's own decoder must not see it (it is unbounded)
            del headers["Content-Encoding"]
            headers.pop("Content-Length", None)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        stream = GuardedStream(
            response.stream, request, limits, deadline, codings[0] if codings else None
        )
        return httpx2.Response(
            response.status_code, headers=headers, stream=stream, extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def guarded_client_args(deadline_s: float, limits: httpx2.Limits | None = None) -> dict[str, Any]:
    """The `transport` and `mounts` keyword arguments of an httpx2.AsyncClient whose every
    request goes through a GuardedTransport: the direct one, and one per proxy of the environment
    (HTTP(S)_PROXY, ALL_PROXY; NO_PROXY hosts go direct), as httpx2 would mount them itself were
    it given no transport. `limits`: the connection pool's (the SDK's own defaults)."""
    from httpx2._utils import get_environment_proxies

    pool = limits or httpx2.Limits()

    def guarded(proxy: str | None) -> GuardedTransport:
        return GuardedTransport(httpx2.AsyncHTTPTransport(limits=pool, proxy=proxy), deadline_s)

    mounts: dict[str, httpx2.AsyncBaseTransport | None] = {
        pattern: None if proxy is None else guarded(proxy)
        for pattern, proxy in get_environment_proxies().items()
    }
    return {"transport": guarded(None), "mounts": mounts}
