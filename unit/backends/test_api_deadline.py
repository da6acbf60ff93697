"""Hostile HTTP answers through each vendor's real SDK (support/backends/http_guard.py): a server
that drips its answer, a gzip bomb, an oversized answer, a redirect to another origin.

Each runs against the loopback server on 127.0.0.1 (`Hostile` modes), bounded: a request that
the guard does not stop is cut by `asyncio.wait_for` and fails the test in seconds.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import time
import tracemalloc
import zlib

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("google.genai")
httpx2 = pytest.importorskip("httpx2")

from support.backends.anthropic_messages import AnthropicBackend  # noqa: E402
from support.backends.base import BackendError  # noqa: E402
from support.backends.gemini import GeminiBackend  # noqa: E402
from support.backends.http_guard import (  # noqa: E402
    ANSWER_BODY_BYTES,
    ANSWER_WIRE_BYTES,
    DOWNLOAD_BODY_BYTES,
    DOWNLOAD_DEADLINE_S,
    DeadlineExceeded,
    EncodingRefused,
    GuardedTransport,
    ResponseTooLarge,
)
from support.backends.openai_chat import OpenAICompatibleBackend  # noqa: E402
from support.doubles.loopback import Hostile, LoopbackServer  # noqa: E402
from support.secrets import register_secret  # noqa: E402
from support.types import Part, Request  # noqa: E402

KEY = "sk-deadline-KEY-0123456789abcdef"
MIB = 2**20
BACKENDS = {
    "openai": lambda **kw: OpenAICompatibleBackend("m", "loop-model", **kw),
    "anthropic": lambda **kw: AnthropicBackend("m", "loop-model", **kw),
    "gemini": lambda **kw: GeminiBackend("m", "loop-model", **kw),
}
KEY_HEADERS = {"authorization", "x-api-key", "x-goog-api-key", "api-key"}


@pytest.fixture(autouse=True)
def no_env_endpoints(monkeypatch):
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)


def generate(provider: str, url: str, *, bound_s: float, **kw) -> tuple[object, float]:
    """One request through `provider`'s SDK to `url`: (the Response or the BackendError, seconds
    taken). Not done within `bound_s`, it is cut (asyncio.TimeoutError comes back)."""
    backend = BACKENDS[provider](api_key=KEY, base_url=url, **kw)

    async def go() -> object:
        try:
            return await asyncio.wait_for(
                backend.generate(Request(parts=(Part.of_text("hi"),))), bound_s
            )
        except (BackendError, TimeoutError) as exc:
            return exc
        finally:
            await backend.aclose()

    start = time.perf_counter()
    result = asyncio.run(go())
    return result, time.perf_counter() - start


@pytest.mark.parametrize("provider", list(BACKENDS))
def test_a_dripping_server_gets_the_deadline_per_attempt(provider):
    """A byte every 0.2 s never trips a per-read timeout of 1 s (main: the request ran on for
    the whole drip, ~100 s, cut here at 12 s); the guard ends each attempt at 1 s, the SDK
    retries it once, and the error names the deadline."""
    drip = Hostile(drip_s=0.2)
    with LoopbackServer(lambda r: "yes", api_key=KEY, hostile=drip, lifetime_s=60) as server:
        result, took = generate(provider, server.url, bound_s=12, timeout_s=1.0, max_retries=1)
    assert isinstance(result, BackendError), f"not stopped in {took:.1f} s: {result!r}"
    assert "DeadlineExceeded" in str(result) and "1 s deadline of one attempt" in str(result)
    assert server.stats.hostile["drip"] == 2  # the SDK's retry of the timed-out attempt
    assert took < 8.0  # two attempts of 1 s and the SDK's backoff (~1 s), with room for load


@pytest.mark.parametrize("provider", list(BACKENDS))
def test_a_gzip_bomb_stops_at_the_cap(provider):
    """128 MiB inflated from ~130 kB: read to the 32 MiB cap, no further (main: accepted whole,
    the traced peak several times the body). The server's bomb (made in its thread, traced too)
    takes ~1.2 MiB."""
    bomb = Hostile(bomb_bytes=128 * MIB)
    with LoopbackServer(lambda r: "yes", api_key=KEY, hostile=bomb, lifetime_s=60) as server:
        tracemalloc.start()
        try:
            result, _ = generate(provider, server.url, bound_s=60, max_retries=0)
            peak = tracemalloc.get_traced_memory()[1]  # bytes
        finally:
            tracemalloc.stop()
    assert isinstance(result, BackendError), repr(result)[:200]
    assert "ResponseTooLarge" in str(result) and "32 MiB decompressed" in str(result)
    assert server.stats.hostile["bomb"] == 1  # no outer retry of a refused body
    assert peak < ANSWER_BODY_BYTES + 16 * MIB, f"peak {peak / MIB:.0f} MiB"


@pytest.mark.parametrize("provider", list(BACKENDS))
def test_an_oversized_answer_is_refused_at_the_wire_cap(provider):
    """40 MiB without Content-Length (read to the close): refused at 32 MiB on the wire (main:
    accepted whole)."""
    big = Hostile(big_bytes=40 * MIB)
    with LoopbackServer(lambda r: "yes", api_key=KEY, hostile=big, lifetime_s=60) as server:
        result, _ = generate(provider, server.url, bound_s=60, max_retries=0)
    assert isinstance(result, BackendError), repr(result)[:200]
    assert "ResponseTooLarge" in str(result) and "32 MiB on the wire" in str(result)
    assert server.stats.hostile["big"] == 1


@pytest.mark.parametrize("provider", list(BACKENDS))
def test_no_key_follows_a_redirect_to_another_origin(provider):
    """A 307 to another port: the second server gets the request without any key (main:
    google-genai re-sent x-goog-api-key, and the other server answered)."""
    with LoopbackServer(lambda r: "elsewhere", api_key=KEY, lifetime_s=60) as other:
        moved = Hostile(redirect=other.url)
        with LoopbackServer(lambda r: "yes", api_key=KEY, hostile=moved, lifetime_s=60) as server:
            result, _ = generate(provider, server.url, bound_s=30, max_retries=0)
    assert server.stats.hostile["redirect"] == 1
    (got,) = other.stats.headers  # the redirect was followed, once
    leaked = {k: v for k, v in got.items() if k.lower() in KEY_HEADERS or KEY in v}
    assert leaked == {}
    assert isinstance(result, BackendError) and "401" in str(result)  # refused: no key
    assert KEY not in str(result)


@pytest.mark.parametrize("provider", list(BACKENDS))
def test_a_same_origin_redirect_keeps_the_key(provider):
    with LoopbackServer(
        lambda r: "yes", api_key=KEY, hostile=Hostile(redirect="same"), lifetime_s=60
    ) as server:
        result, _ = generate(provider, server.url, bound_s=30, max_retries=0)
    assert getattr(result, "text", None) == "yes", repr(result)
    assert server.stats.hostile["redirect"] == 1 and len(server.stats.headers) == 2


# -- the transport alone (httpx2.MockTransport: no socket) ----------------------------------------


def fetch(handler, method: str = "POST", path: str = "/v1/chat/completions") -> httpx2.Response:
    """One request through GuardedTransport(MockTransport(handler)), its body read."""

    async def go() -> httpx2.Response:
        transport = GuardedTransport(httpx2.MockTransport(handler), deadline_s=5.0)
        async with httpx2.AsyncClient(transport=transport) as client:
            response = await client.request(method, f"http://h.test{path}")
            await response.aread()
            return response

    return asyncio.run(go())


def test_gzip_and_deflate_bodies_are_decoded_once():
    body = b'{"answer": "' + b"x" * 100_000 + b'"}'
    encoded = {
        "gzip": gzip.compress(body),
        "deflate": zlib.compress(body),
        "identity": body,
    }
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    encoded["raw-deflate"] = raw.compress(body) + raw.flush()
    for name, data in encoded.items():
        coding = "deflate" if name == "raw-deflate" else name
        headers = {"Content-Encoding": coding}
        response = fetch(lambda req, d=data, h=headers: httpx2.Response(200, content=d, headers=h))
        assert response.content == body, name
        assert "content-encoding" not in response.headers or coding == "identity"


def test_a_declared_length_over_the_cap_is_refused_before_reading():
    def handler(request):
        head = {"Content-Length": str(ANSWER_WIRE_BYTES + 1)}
        return httpx2.Response(200, headers=head, content=b"")

    with pytest.raises(ResponseTooLarge, match="on the wire"):
        fetch(handler)


def test_an_unknown_or_stacked_encoding_is_refused():
    data = gzip.compress(gzip.compress(b"{}"))  # MockTransport's Response decodes it as made
    for coding in ("br", "gzip, gzip"):
        headers = {"Content-Encoding": coding}
        with pytest.raises(EncodingRefused, match="content encoding"):
            fetch(lambda req, h=headers: httpx2.Response(200, content=data, headers=h))


def test_batch_downloads_get_the_download_limits():
    guard = GuardedTransport(httpx2.MockTransport(lambda r: httpx2.Response(200)), deadline_s=5)
    answer = guard.limits_for(httpx2.Request("POST", "http://h/v1/chat/completions"))
    assert (answer.deadline_s, answer.body_bytes) == (5, ANSWER_BODY_BYTES)
    for method, path in [
        ("GET", "/v1/files/file-1/content"),
        ("GET", "/v1/messages/batches/msgbatch_1/results"),
        ("GET", "/v1beta/batches/abc123"),
    ]:
        limits = guard.limits_for(httpx2.Request(method, f"http://h{path}"))
        assert (limits.deadline_s, limits.body_bytes) == (DOWNLOAD_DEADLINE_S, DOWNLOAD_BODY_BYTES)
    post = guard.limits_for(httpx2.Request("POST", "http://h/v1/files/file-1/content"))
    assert post.body_bytes == ANSWER_BODY_BYTES


def test_deadline_is_an_httpx_timeout_the_sdks_retry():
    assert issubclass(DeadlineExceeded, httpx2.TimeoutException)


def test_every_key_header_stays_with_its_origin():
    """Each key header, and any header holding a registered secret (the Basic form of
    `--api-base` credentials), is dropped on a hop to another origin, kept on the same one."""
    register_secret("pw-0123456789abcdef")
    basic = "Basic " + base64.b64encode(b"user:pw-0123456789abcdef").decode()
    sent = {
        "Authorization": basic,
        "x-api-key": "k1",
        "x-goog-api-key": "k2",
        "api-key": "k3",
        "x-custom": "pw-0123456789abcdef",
        "x-plain": "kept",
    }
    seen: list[tuple[str, dict]] = []

    def handler(request):
        seen.append((str(request.url), dict(request.headers)))
        if request.url.path == "/same":
            return httpx2.Response(307, headers={"Location": "http://h.test:8080/other"})
        if request.url.host == "h.test" and request.url.path == "/start":
            return httpx2.Response(307, headers={"Location": "/same"})
        return httpx2.Response(200, json={})

    async def go() -> None:
        transport = GuardedTransport(httpx2.MockTransport(handler), deadline_s=5.0)
        async with httpx2.AsyncClient(transport=transport, follow_redirects=True) as client:
            (await client.post("http://h.test/start", headers=sent)).raise_for_status()

    asyncio.run(go())
    (_, first), (_, same), (url, other) = seen
    names = {k.lower() for k in sent} - {"x-plain"}
    assert names <= set(first) and names <= set(same)  # same origin: kept
    assert url == "http://h.test:8080/other" and not names & set(other)
    assert other["x-plain"] == "kept"
