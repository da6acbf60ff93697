"""vLLM backend: one `vllm.LLM` engine per session, whole batches per `generate` call.

Prompts are rendered by the model's own processor chat template (support.backends.chat_template,
the same code path as the transformers backend), images go in as multi-modal data, sampling as
`SamplingParams(n, temperature, max_tokens, seed)`. vLLM is an optional extra imported on first
use only, after `VLLM_CONFIGURE_LOGGING=0`; `--gpus 0,1` sets CUDA_VISIBLE_DEVICES and the tensor
parallel size. The request building below is plain functions, testable without vLLM installed.

Registered vLLM models and their engine settings live in the registry (support.backends.registry,
`ModelSpec.engine`); the factory receives them. The cache identity is the provider, the hub id and
the `vllm.LLM` arguments that change answers (engine settings, image limit, seed), not the GPU
count and not the vLLM version: an upgrade keeps cached answers (bump support.cache.SCHEMA_VERSION
or run with --no-cache to re-generate deliberately).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from support.backends.base import Backend, BackendError, BackendUnavailable
from support.types import Request, Response, Usage

MAX_IMAGES_PER_PROMPT = 4  # few-shot pointing: 3 examples + the query


def engine_args(
    model_id: str, gpus: Sequence[int] = (), extra: Mapping[str, Any] | None = None, seed: int = 0
) -> dict[str, Any]:
    """Keyword arguments of `vllm.LLM` for a model on the given GPUs."""
    args: dict[str, Any] = {
        "model": model_id,
        "tensor_parallel_size": max(1, len(gpus)),
        "limit_mm_per_prompt": {"image": MAX_IMAGES_PER_PROMPT},
        "seed": seed,
    }
    args.update(extra or {})
    return args


def sampling_kwargs(request: Request) -> dict[str, Any]:
    """Keyword arguments of `vllm.SamplingParams` for one request."""
    kwargs: dict[str, Any] = {
        "n": request.n,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
    }
    if request.seed is not None:
        kwargs["seed"] = request.seed
    return kwargs


def vllm_input(processor: Any, request: Request) -> dict[str, Any]:
    """One prompt as vLLM takes it: the rendered text and its images as multi-modal data."""
    from support.backends.chat_template import render_prompt, request_images

    images = request_images(request)
    item: dict[str, Any] = {"prompt": render_prompt(processor, request)}
    if images:
        item["multi_modal_data"] = {"image": images if len(images) > 1 else images[0]}
    return item


class VLLMBackend(Backend):
    """`LLM.generate` over the requests the engine's micro-batcher gathered."""

    default_concurrency = 1

    def __init__(
        self,
        name: str,
        model_id: str,
        *,
        gpus: Sequence[int] = (),
        engine_extra: Mapping[str, Any] | None = None,
        max_batch: int = 256,
        seed: int = 0,
    ) -> None:
        self.name = name
        self.model_id = model_id
        self.gpus = tuple(gpus)
        self.args = engine_args(model_id, self.gpus, engine_extra, seed)
        self.max_batch = max_batch
        self.identity = {"provider": "vllm", "model": model_id, "engine": _stable(self.args)}
        self._llm: Any = None
        self._processor: Any = None
        self._lock = threading.Lock()
        self.generate_calls = 0

    def _engine(self) -> tuple[Any, Any]:
        with self._lock:
            if self._llm is None:
                os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")  # before vllm's import
                if self.gpus:
                    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, self.gpus))
                try:
                    import vllm
                    from transformers import AutoProcessor
                except ImportError as exc:
                    raise BackendUnavailable(
                        f"{self.name}: pip install 'vlmbench[vllm]' on a GPU machine ({exc})"
                    ) from None
                self._processor = AutoProcessor.from_pretrained(self.model_id)
                self._llm = vllm.LLM(**self.args)
            return self._llm, self._processor

    def _run(self, requests: list[Request]) -> list[Response]:
        from vllm import SamplingParams

        llm, processor = self._engine()
        inputs = [vllm_input(processor, r) for r in requests]
        params = [SamplingParams(**sampling_kwargs(r)) for r in requests]
        self.generate_calls += 1
        outputs = llm.generate(inputs, params, use_tqdm=False)
        return [
            Response(
                texts=tuple(o.text for o in out.outputs),
                model=self.name,
                usage=Usage(
                    len(out.prompt_token_ids or []), sum(len(o.token_ids) for o in out.outputs)
                ),
                prompt=inp["prompt"],
            )
            for inp, out in zip(inputs, outputs, strict=True)
        ]

    async def generate_batch(self, requests: list[Request]) -> list[Response]:
        try:
            return await asyncio.to_thread(self._run, requests)
        except BackendUnavailable:
            raise
        except Exception as exc:
            raise BackendError(f"{self.name}: {type(exc).__name__}: {exc}") from exc

    async def generate(self, request: Request) -> Response:
        return (await self.generate_batch([request]))[0]


def _stable(args: dict[str, Any]) -> str:
    """Engine arguments that change answers, as text for the cache identity."""
    keep = {k: v for k, v in args.items() if k not in ("tensor_parallel_size",)}
    return repr(sorted(keep.items()))


def make_vllm_backend(
    name: str, model_id: str, opts: Any, engine: Mapping[str, Any] | None = None
) -> Backend:
    """Factory for registered vLLM names (`engine`: their ModelSpec.engine) and `vllm:<id or
    path>`: unavailable (its cases skip) where vLLM is not installed, as on any machine without
    a GPU. Reads `opts.extra` keys gpus and max_batch."""
    if importlib.util.find_spec("vllm") is None:
        raise BackendUnavailable(f"{name}: needs vLLM on a GPU machine: pip install vlmbench[vllm]")
    extra = dict(getattr(opts, "extra", ()) or ())
    return VLLMBackend(
        name,
        model_id,
        gpus=tuple(extra.get("gpus", ())),
        engine_extra=engine,
        max_batch=int(extra.get("max_batch") or 256),
        seed=getattr(opts, "seed", 0),
    )
