"""The transformers backend end to end on CPU: a tiny random LLaVA built in code, loaded as
`hf:<path>` exactly as a user's model would be, batched by the engine's micro-batcher."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from unit.helpers.suite_runs import link_shared_data

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[3]
# one worker runs this module: its module fixtures are built once, not once a worker
pytestmark = pytest.mark.xdist_group("local_pointing")


@pytest.fixture(scope="module")
def tiny_model(shared_cache: Path) -> Path:
    """The tiny LLaVA, built once a run in the session's shared cache (the tests only read it)."""
    from support.doubles.tiny_vlm import ensure_tiny_vlm

    return ensure_tiny_vlm(shared_cache)


@pytest.fixture(scope="module")
def cholecseg8k(synthetic_cholecseg8k) -> Path:
    return synthetic_cholecseg8k


@pytest.mark.slow
def test_pointing_quick_runs_on_the_tiny_model(tiny_model, cholecseg8k, shared_cache, tmp_path):
    """Nonsense answers become `unparsable` outcomes, never crashes; prompts are recorded."""
    link_shared_data(tmp_path / "cache", shared_cache)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    args = [
        str(REPO / "evals" / "pointing"),
        f"--rootdir={REPO}",
        f"--model=hf:{tiny_model}",
        f"--cholecseg8k={cholecseg8k}",
        f"--cache-dir={tmp_path / 'cache'}",
        f"--results-dir={tmp_path / 'results'}",
        "--run-id=r",
        "--bootstrap=100",
        "--max-tokens=32",  # nonsense either way: 32 tokens of it are read as 256 would be
        "-m",
        "quick",
        "-p",
        "no:cacheprovider",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    rows = [
        json.loads(line)
        for line in (tmp_path / "results/pointing/r/raw_results.jsonl").read_text().splitlines()
    ]
    assert len(rows) == 5 * 12 * 3  # the whole quick subset
    assert all(r["status"] in ("unparsable", "wrong", "correct") for r in rows)
    assert sum(r["status"] == "unparsable" for r in rows) >= len(rows) // 2
    prompts = [r["rendered_prompt"] for r in rows]
    assert all("surgical vision validator" in p for p in prompts)  # the system prompt, rendered
    assert all(p.count("<image>") >= 1 for p in prompts)


def test_two_stage_pipeline_is_batched(tiny_model):
    """N cases x 2 stages cost about 2 x N / batch generate calls, not 2 x N."""
    from PIL import Image

    from support.backends.registry import BackendOptions, create_backend
    from support.client.engine import ModelClient
    from support.types import Part, Request

    n_cases, batch = 24, 8
    backend = create_backend(f"hf:{tiny_model}", BackendOptions(extra=(("max_batch", batch),)))
    client = ModelClient(backend, cache=None, concurrency=1)
    image = Part.of_image(Image.new("RGB", (64, 48), (90, 30, 30)))

    async def case(i: int) -> str:
        first = await client.generate(
            Request(parts=(Part.of_text(f"Describe image {i}."), image), max_tokens=8)
        )
        second = await client.generate(
            Request(parts=(Part.of_text(f"{first.text} Final answer:"),), max_tokens=4)
        )
        return second.text

    async def main() -> list[str]:
        return await asyncio.gather(*(case(i) for i in range(n_cases)))

    answers = asyncio.run(main())
    assert len(answers) == n_cases
    bound = 2 * math.ceil(n_cases / batch) + 1
    assert backend.generate_calls <= bound, (backend.generate_calls, client.batcher.batch_sizes)
    assert max(client.batcher.batch_sizes) == batch
