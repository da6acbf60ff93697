"""vlmbench against vLLM itself, on the same requests (the tiny LLaVA; vLLM's CPU build here).

    pytest benchmarks/test_vllm_engine_speed.py --benchmark-only -s -p no:randomly

Run it in a venv with vLLM (`.ci/vllm-venv VENV`, then `pip install -e ".[dev,api]"`). The
workload is pgt's quick cases with `--pgt-n 5` (both stages: five sampled reasonings of up to
512 tokens, then each continued to a label) and pointing's few-shot quick cases (3-4 images a
request). Four ways, BENCH_VLLM_ROUNDS rounds each (default 3; medians and min-max printed):

  (a) vlmbench `vllm:`: the cases evaluated in this process through ModelClient and the async
      engine: wall from the first case to the last outcome (stage 2 waits for its stage 1);
  (a*) the same through vlmbench's `vllm:`, all of (a)'s requests sent at once: what the
      backend costs, apart from the pipeline's order;
  (b) vLLM's own `LLM.generate` over all of (a)'s requests at once (stage 2's prompts already
      known, so nothing waits: the engine's best case), the same engine arguments;
  (c) vlmbench `openai-compatible:` against a vLLM server (`--concurrency`
      BENCH_VLLM_CONCURRENCY, default the backend's own);
  (d) vLLM's own serving client (`vllm.benchmarks.lib.endpoint_request_func`, what
      `vllm bench serve` sends with) over (c)'s requests at once, as many in flight as (c).

BENCH_VLLM_WAYS picks some of the ways (default abcd); BENCH_VLLM_FAMILY the model: `llava` (the
tiny LLaVA, default) or a tiny checkpoint of support.doubles.tiny_families (qwen2_5_vl, qwen3_vl,
qwen3_vl_thinking, llava_onevision). Printed: wall, output tokens and output
tokens/s per way, and the ratios a/b and c/d of throughput (b's tokens/s over a's: 1.0 is
vLLM's own speed, the goal is <= 1.15). A second test
sweeps (c)'s concurrency (8, 32, 128, 256) against the same server: where throughput stops
growing is the `openai-compatible:` default. Engines start once per way, outside the timing.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("vllm") is None:
    pytest.skip("needs vLLM (.ci/vllm-venv builds a venv with it)", allow_module_level=True)

from support import evaluations
from support.backends.registry import BackendOptions, create_backend
from support.client.engine import Engine, ModelClient
from support.contract.runner import run_case
from support.settings import OutputSettings, RunSettings
from support.types import Request

ROUNDS = int(os.environ.get("BENCH_VLLM_ROUNDS", "3"))
CONCURRENCY = int(os.environ.get("BENCH_VLLM_CONCURRENCY", "0")) or None  # None: the default
SWEEP = (8, 32, 128, 256)
WAYS = os.environ.get("BENCH_VLLM_WAYS", "abcd")  # which of (a)-(d) to run
# the model family: "llava" (support.doubles.tiny_vlm) or one of tiny_families.VLLM_FAMILIES
FAMILY = os.environ.get("BENCH_VLLM_FAMILY", "llava")
MAX_IMAGES = 4  # pointing few-shot: 3 examples + the query
ENGINE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CONFIGURE_LOGGING": "0"}


# -- the workload ------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def engine_env():
    """The engines' settings (KV cache GiB, logging), unless the environment gives its own."""
    for key, value in ENGINE_ENV.items():
        os.environ.setdefault(key, value)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """The model: the tiny LLaVA, or BENCH_VLLM_FAMILY's tiny checkpoint (tiny_families)."""
    folder = tmp_path_factory.mktemp("models")
    if FAMILY == "llava":
        from support.doubles.tiny_vlm import ensure_tiny_vlm

        return ensure_tiny_vlm(folder)
    from support.doubles.tiny_families import ensure_family

    return ensure_family(folder, FAMILY)


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> list[tuple[Any, Any]]:
    """(evaluation, case) pairs: pgt quick with n = 5, pointing quick few-shot."""
    run = RunSettings(
        output=OutputSettings(cache_dir=tmp_path_factory.mktemp("cache"), use_cache=False)
    )
    pairs = []
    for name, values, keep in (
        ("pgt", {"pgt_n": "5"}, lambda c: True),
        ("pointing", {}, lambda c: c.params.get("condition") != "zero_shot"),
    ):
        spec = evaluations.spec(name)
        options = {o.dest: o.default for o in spec.options} | values
        ev = spec.evaluation_class().load(run, spec.configure(options, run))
        pairs += [(ev, c) for c in ev.cases() if ev.is_quick(c) and keep(c)]
    return pairs


class Recording(ModelClient):
    """A ModelClient that keeps every request it is given, in order."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.requests: list[Request] = []

    async def generate(self, request: Request):
        self.requests.append(request)
        return await super().generate(request)


def _evaluate(loop: Engine, client: Recording, workload) -> tuple[float, int, int]:
    """(wall s, output tokens, error outcomes) of every case through `client`."""
    client.requests.clear()

    async def main():
        return await asyncio.gather(*(run_case(ev, case, client) for ev, case in workload))

    start = time.perf_counter()
    results = loop.run(main(), timeout=3600)
    wall = time.perf_counter() - start
    outcomes = [o for r in results for o in r.outcomes]
    # one case's calls are in every one of its outcomes' usage only once (pgt: one outcome)
    tokens = sum(o.usage.output_tokens for o in outcomes)
    return wall, tokens, sum(o.status == "error" for o in outcomes)


def _rounds(loop: Engine, client: Recording, workload, rounds: int):
    """(walls s, output tokens) of `rounds` evaluations of the workload (no error outcome
    allowed), and the last round's requests."""
    walls, tokens = [], []
    for _ in range(rounds):
        wall, out, errors = _evaluate(loop, client, workload)
        assert errors == 0
        walls.append(wall)
        tokens.append(out)
    return walls, tokens, list(client.requests)


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def _report(rows: dict[str, tuple[list[float], list[int]]]) -> dict[str, float]:
    """Print wall and tokens/s per way; returns the median tokens/s of each."""
    tps = {}
    print(f"\n{'way':<34} {'wall s':>22} {'output tokens':>14} {'tokens/s':>22}")
    for way, (walls, tokens) in rows.items():
        rates = [t / w for t, w in zip(tokens, walls, strict=True)]
        tps[way] = statistics.median(rates)
        print(
            f"{way:<34} {_median(walls):>22} {int(statistics.median(tokens)):>14} "
            f"{_median(rates):>22}"
        )
    return tps


# -- engines -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loop():
    engine = Engine()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def server(tiny, tmp_path_factory):
    """A vLLM server for the tiny model on 127.0.0.1 with (a)'s engine arguments."""
    from support.backends.vllm_server import serve

    log = tmp_path_factory.mktemp("server") / "server.log"
    with serve(tiny, log, max_images=MAX_IMAGES, extra=("--disable-log-stats",)) as url:
        yield url


def _offline_engine_rounds(tiny, loop, workload) -> tuple[dict, list[Request]]:
    """(a): rounds through vlmbench's `vllm:`; the last round's requests."""
    opts = BackendOptions(extra=(("max_images", MAX_IMAGES),))
    backend = create_backend(f"vllm:{tiny}", opts)
    client = Recording(backend, None, concurrency=backend.default_concurrency)
    loop.run(client.generate(_warmup()), timeout=900)  # the engine's start, untimed
    walls, tokens, requests = _rounds(loop, client, workload, ROUNDS)
    # the same requests sent at once, as (b) takes them: the backend's own cost, apart from
    # what the pipeline's order costs (a stage 2 waits for its stage 1)
    at_once_walls, at_once_tokens = [], []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        responses = loop.run(_gather(client, requests), timeout=3600)
        at_once_walls.append(time.perf_counter() - start)
        at_once_tokens.append(sum(r.usage.output_tokens for r in responses))
    loop.run(client.aclose(), timeout=120)
    return {
        "(a) vlmbench vllm:": (walls, tokens),
        "(a*) vlmbench vllm:, (a)'s requests at once": (at_once_walls, at_once_tokens),
    }, requests


async def _gather(client: ModelClient, requests: list[Request]) -> list:
    return await asyncio.gather(*(client.generate(r) for r in requests))


def _warmup() -> Request:
    from support.types import Part

    return Request(parts=(Part.of_text("warm up"),), max_tokens=2)


def _llm_generate_rounds(tiny, requests: list[Request]) -> dict:
    """(b): vLLM's offline LLM.generate over all the requests at once."""
    import vllm
    from transformers import AutoProcessor

    from support.backends.families import family_of
    from support.backends.vllm_local import engine_args, sampling_kwargs, vllm_input

    processor = AutoProcessor.from_pretrained(tiny)
    inputs = [vllm_input(processor, r, family_of(str(tiny))) for r in requests]
    params = [vllm.SamplingParams(**sampling_kwargs(r)) for r in requests]
    from support.backends.vllm_local import platform_args

    args = engine_args(str(tiny))
    args["limit_mm_per_prompt"] = {"image": MAX_IMAGES}  # as (a)'s engine
    args = platform_args(args)
    llm = vllm.LLM(**args)
    llm.generate(["warm up"], vllm.SamplingParams(max_tokens=2), use_tqdm=False)
    walls, tokens = [], []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        outs = llm.generate(inputs, params, use_tqdm=False)
        walls.append(time.perf_counter() - start)
        tokens.append(sum(len(o.token_ids) for out in outs for o in out.outputs))
    llm.llm_engine.engine_core.shutdown()  # its engine process, before the server's runs
    return {"(b) vLLM LLM.generate, all at once": (walls, tokens)}


def _served_rounds(server, loop, workload, concurrency, rounds) -> tuple[dict, list[Request]]:
    """(c): rounds through vlmbench's `openai-compatible:`; the last round's requests."""
    backend = create_backend("openai-compatible:tiny", BackendOptions(api_base=server))
    client = Recording(backend, None, concurrency=concurrency or backend.default_concurrency)
    loop.run(client.generate(_warmup()), timeout=300)
    walls, tokens, requests = _rounds(loop, client, workload, rounds)
    loop.run(client.aclose(), timeout=60)
    return {f"(c) vlmbench openai-compatible: @{client.concurrency}": (walls, tokens)}, requests


def _vllm_client_rounds(server, requests: list[Request], concurrency: int) -> dict:
    """(d): vLLM's own serving client sending the same chat bodies, `concurrency` at a time."""
    import aiohttp
    from vllm.benchmarks.lib.endpoint_request_func import (
        RequestFuncInput,
        async_request_openai_chat_completions,
    )

    from support.backends.openai_chat import openai_params

    inputs = []
    for r in requests:
        params = openai_params(r, "tiny", native_prefill=True)
        extra = {k: v for k, v in params.items() if k not in ("model", "messages", "max_tokens")}
        extra |= extra.pop("extra_body", {})
        inputs.append(
            RequestFuncInput(
                prompt="",
                api_url=f"{server}/chat/completions",
                prompt_len=0,
                output_len=r.max_tokens,
                model="tiny",
                chat_messages=params["messages"],
                extra_body=extra,
            )
        )

    async def main():
        gate = asyncio.Semaphore(concurrency)
        timeout = aiohttp.ClientTimeout(total=3600)
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:

            async def one(item):
                async with gate:
                    return await async_request_openai_chat_completions(item, session)

            return await asyncio.gather(*(one(i) for i in inputs))

    walls, tokens = [], []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        outs = asyncio.run(main())
        walls.append(time.perf_counter() - start)
        assert all(o.success for o in outs), next(o.error for o in outs if not o.success)
        tokens.append(sum(o.output_tokens or 0 for o in outs))
    return {f"(d) vLLM serving client @{concurrency}": (walls, tokens)}


# -- the benchmarks ----------------------------------------------------------------------------


def test_against_vllm_itself(benchmark, tiny, loop, workload, request):
    n_pgt = sum(ev.name == "pgt" for ev, _ in workload)
    print(
        f"\nworkload: {n_pgt} pgt cases (n=5, two stages), {len(workload) - n_pgt} pointing "
        f"few-shot cases; {ROUNDS} rounds each; ways {WAYS}"
    )
    rows: dict[str, tuple[list[float], list[int]]] = {}
    if "a" in WAYS or "b" in WAYS:
        offline, offline_requests = _offline_engine_rounds(tiny, loop, workload)
        rows |= offline if "a" in WAYS else {}
        rows |= _llm_generate_rounds(tiny, offline_requests) if "b" in WAYS else {}
        print(f"requests per round offline: {len(offline_requests)}")
    if "c" in WAYS or "d" in WAYS:
        server = request.getfixturevalue("server")
        served, served_requests = _served_rounds(server, loop, workload, CONCURRENCY, ROUNDS)
        rows |= served if "c" in WAYS else {}
        concurrency = int(next(iter(served)).rpartition("@")[2])
        rows |= _vllm_client_rounds(server, served_requests, concurrency) if "d" in WAYS else {}
        print(f"requests per round served: {len(served_requests)}")
    tps = _report(rows)
    by_way = {way[1:].partition(")")[0]: v for way, v in tps.items()}  # "(a) ..." -> "a"
    ratios = {}
    if {"a", "b"} <= by_way.keys():
        ratios["ratio_a_b"] = by_way["b"] / by_way["a"]
        print(f"ratio a/b (vLLM offline tokens/s over vlmbench vllm:'s): {ratios['ratio_a_b']:.2f}")
    if {"c", "d"} <= by_way.keys():
        ratios["ratio_c_d"] = by_way["d"] / by_way["c"]
        print(f"ratio c/d (vLLM client's tokens/s over vlmbench's): {ratios['ratio_c_d']:.2f}")
    benchmark.extra_info.update(
        {k: round(v, 3) for k, v in ratios.items()} | {k: round(v, 1) for k, v in tps.items()}
    )
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


def test_served_concurrency_sweep(benchmark, loop, workload, server):
    rows = {}
    for concurrency in SWEEP:
        rows |= _served_rounds(server, loop, workload, concurrency, 1)[0]
    tps = _report(rows)
    benchmark.extra_info.update({k: round(v, 1) for k, v in tps.items()})
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
