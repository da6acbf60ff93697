"""Batched against one-request-at-a-time generation on the tiny transformers model (CPU).

    pytest benchmarks/test_local_batching.py --benchmark-only -s

The same 32 pointing-style requests (system prompt, one 768x768 canvas image, a question) go
through ModelClient twice: with the micro-batcher (batches of 8 and 16) and with max_batch 1.
Target: at least 3x speed-up.
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

N_REQUESTS = 32


@pytest.fixture(scope="module")
def requests_and_model(tmp_path_factory):
    from PIL import Image

    from support.doubles.tiny_vlm import ensure_tiny_vlm
    from support.evaluations.pointing.prompts import SYSTEM_PROMPT, user_prompt
    from support.types import Part, Request

    model = ensure_tiny_vlm(tmp_path_factory.mktemp("models"))
    image = Part.of_image(Image.new("RGB", (768, 768), (120, 40, 30)), compress_level=1)
    reqs = [
        Request(
            parts=(Part.of_text(user_prompt(f"Organ {i}")), image),
            system=SYSTEM_PROMPT,
            max_tokens=32,
        )
        for i in range(N_REQUESTS)
    ]
    return reqs, model


def _run(model, reqs, max_batch: int) -> float:
    from support.backends.registry import BackendOptions, create_backend
    from support.client.engine import ModelClient

    backend = create_backend(f"hf:{model}", BackendOptions(extra=(("max_batch", max_batch),)))
    client = ModelClient(backend, cache=None, concurrency=1, max_batch=max_batch)
    asyncio.run(client.generate(reqs[0]))  # load the model outside the timing

    async def main():
        return await asyncio.gather(*(client.generate(r) for r in reqs))

    start = time.perf_counter()
    asyncio.run(main())
    return time.perf_counter() - start


def test_batched_against_sequential(benchmark, requests_and_model):
    reqs, model = requests_and_model
    sequential = _run(model, reqs, 1)
    batched = {b: _run(model, reqs, b) for b in (8, 16)}
    benchmark.pedantic(lambda: _run(model, reqs, 16), rounds=1, iterations=1)
    speedups = {b: sequential / t for b, t in batched.items()}
    benchmark.extra_info.update(
        sequential_s=round(sequential, 2),
        **{f"batch{b}_s": round(t, 2) for b, t in batched.items()},
        **{f"speedup_batch{b}": round(s, 2) for b, s in speedups.items()},
    )
    print(
        f"\n{N_REQUESTS} requests on the tiny model: one at a time {sequential:.2f} s; "
        + "; ".join(f"batch {b}: {batched[b]:.2f} s ({speedups[b]:.1f}x)" for b in batched)
    )
