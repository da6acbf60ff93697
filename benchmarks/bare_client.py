"""The floor of an API client: replay recorded request bodies to an OpenAI-compatible server.

    VLMBENCH_API_KEY=... python benchmarks/bare_client.py URL BODIES_DIR [--concurrency 32]

URL is the server's root (`http://127.0.0.1:PORT`); the bodies are POSTed to
`URL/v1/chat/completions` as they are, byte for byte (`BODIES_DIR/*.json`, as `python -m
support.doubles.loopback --record` writes them). Every body is read into memory before the first
request goes out, so nothing is encoded while requests are in flight. `--concurrency` workers share
one queue of bodies: that many requests are in flight at any time. The library is aiohttp where
importable, else httpx (or httpx2, the package the openai SDK depends on here).

Prints one JSON line: library, n, ok (200 with an answer text), load_s and load_cpu_s (reading the
bodies: wall and CPU seconds) and span_s (first request sent to last response read), all seconds on
this process's clocks.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

LIBRARIES = ("aiohttp", "httpx", "httpx2")  # in order of preference
Send = Callable[[bytes], Awaitable[bool]]  # one POST -> whether it came back with an answer


def available_library() -> str | None:
    """The first importable HTTP client library of LIBRARIES, None if none is."""
    return next((name for name in LIBRARIES if importlib.util.find_spec(name)), None)


def has_answer(status: int, payload: object) -> bool:
    """A 200 whose body holds a first choice with message text."""
    try:
        return status == 200 and isinstance(payload["choices"][0]["message"]["content"], str)
    except (KeyError, IndexError, TypeError):
        return False


async def replay(send: Send, bodies: list[bytes], concurrency: int) -> int:
    """POST every body once with `concurrency` in flight; the number answered."""
    queue = iter(bodies)  # shared by the workers: each body goes out once
    answered = 0

    async def worker() -> None:
        nonlocal answered
        for body in queue:
            ok = await send(body)  # awaited first: `answered += await ...` would lose updates
            answered += ok

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return answered


async def run(library: str, url: str, key: str, bodies: list[bytes], concurrency: int) -> dict:
    """Replay `bodies` with `library`; counts and the span in seconds."""
    endpoint = f"{url.rstrip('/')}/v1/chat/completions"
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    if library == "aiohttp":
        import aiohttp

        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

            async def send(body: bytes) -> bool:
                async with session.post(endpoint, data=body) as resp:
                    return has_answer(resp.status, await resp.json())

            start = time.perf_counter()
            ok = await replay(send, bodies, concurrency)
            span = time.perf_counter() - start
    else:  # httpx and httpx2 share one API
        httpx = importlib.import_module(library)
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(headers=headers, limits=limits, timeout=600.0) as client:

            async def send(body: bytes) -> bool:
                resp = await client.post(endpoint, content=body)
                return has_answer(resp.status_code, resp.json())

            start = time.perf_counter()
            ok = await replay(send, bodies, concurrency)
            span = time.perf_counter() - start
    return {"n": len(bodies), "ok": ok, "span_s": span}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("url", help="server root, e.g. http://127.0.0.1:8000")
    ap.add_argument("bodies", type=Path, help="folder of recorded request bodies (*.json)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--library", choices=LIBRARIES, default=None, help="default: the first found")
    ap.add_argument(
        "--key-env",
        default="VLMBENCH_API_KEY",  # what vlmbench's openai-compatible: reads
        help="variable holding the API key",
    )
    args = ap.parse_args(argv)
    library = args.library or available_library()
    if library is None:
        raise SystemExit(f"none of {', '.join(LIBRARIES)} is importable")
    start, start_cpu = time.perf_counter(), time.process_time()
    bodies = [p.read_bytes() for p in sorted(args.bodies.glob("*.json"))]
    load_s, load_cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
    if not bodies:
        raise SystemExit(f"{args.bodies}: no *.json request bodies")
    key = os.environ.get(args.key_env, "")
    result = asyncio.run(run(library, args.url, key, bodies, args.concurrency))
    loaded = {"load_s": load_s, "load_cpu_s": load_cpu_s}
    print(json.dumps({"library": library, **loaded, **result}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
