"""vLLM backend: one engine per session, continuous batching on vLLM's async engine.

Each request goes to `vllm.AsyncLLMEngine` (vLLM v1's `AsyncLLM`) the moment its case produces
it and comes back the moment it finishes: the engine's scheduler adds and retires sequences at
every step, so no request waits for a batch-mate's longer answer and a PGT case's stage 2 is
submitted as soon as its own stage 1 is back. `--max-batch` is the engine's `max_num_seqs` (the
sequences it decodes at once); the client keeps that many requests at the engine, so its batch
stays full. One request's failure (a prompt with too many images, a validation error) is that
request's error outcome only.

Prompts are rendered by the model's own processor chat template (support.backends.chat_template,
the same code path as the transformers backend), images go in as multi-modal data, sampling as
`SamplingParams(n, temperature, max_tokens, seed)`. vLLM is an optional extra imported on first
use only, after `VLLM_CONFIGURE_LOGGING=0`; the engine starts in `Backend.start` (before the
run's first uncached request, in a worker thread: tens of seconds). `--gpus 0,1` sets
CUDA_VISIBLE_DEVICES and the tensor parallel size. The request building below is plain
functions, testable without vLLM installed.

Images per prompt: vLLM refuses a prompt with more images than the engine's
`limit_mm_per_prompt`. The limit is `--max-images`, by default the most that any configured
evaluation sends in one request (pointing few-shot 4, surgvqa `--surgvqa-frames`); a request
over it fails before it reaches the engine, with a message naming the limit and the option.

Registered vLLM models and their engine settings live in the registry (support.backends.registry,
`ModelSpec.engine`); the factory receives them. The cache identity is the provider, the model id,
its revision (support.backends.model_folder: a local folder's weights by content, a hub id's
cached commit) and the `vllm.LLM` arguments that change answers (engine settings, seed), not the
GPU count, the batch size, the image limit or the vLLM version: an upgrade keeps cached answers
(bump support.client.response_cache.SCHEMA_VERSION or run with --no-cache to re-generate
deliberately).

Thinking models, as on `hf:` (support.backends.transformers_local): a model is one when its own
chat template writes `<think>` (support.backends.local_thinking.template_thinks; Qwen3-VL-Thinking's
opens the assistant turn with "<think>\n", Qwen3-VL Instruct's never writes it), read from its
folder or hub snapshot when the backend is made (a hub id not downloaded yet: from the processor
the engine start loads). Its requests' max_tokens grow by `thinking_allowance` (the variant's
`+budget-N`, else LOCAL_THINKING_ALLOWANCE), which joins its cache identity; each sample is
split by the suite's own `split_local` (the same code as `hf:`, so both engines' answers stay
comparable; vLLM's "qwen3" reasoning parser is not used): `texts` the answer, `thinking` the
span, `usage.reasoning_tokens` its tokens. Every model reports each sample's finish reason as
vLLM gives it ("stop", "length").
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from support.backends import base as backend_base
from support.backends.base import (
    NATIVE_PREFILL,
    Backend,
    BackendError,
    BackendOptions,
    BackendUnavailable,
    register_provider,
)
from support.backends.families import Family, family_modalities, family_of
from support.backends.local_thinking import (
    LocalThinking,
    split_local,
    token_counter,
)
from support.backends.thinking import (
    Thinking,
    span_open,
)
from support.types import Request, Response, Usage

DEFAULT_MAX_IMAGES = 4  # images per prompt when no evaluation says (few-shot pointing: 3 + 1)
VIDEOS_PER_PROMPT = 1  # clips per prompt of a family that takes video (surgvqa sends one)
DEFAULT_MAX_NUM_SEQS = 256  # sequences the engine decodes at once (vLLM's own GPU default)
# engine arguments that do not change answers: left out of the cache identity
NOT_IN_IDENTITY = ("tensor_parallel_size", "limit_mm_per_prompt", "max_num_seqs")
# vLLM's CPU build (0.32) kills its engine when a request with its own seed is prefilled in
# chunks: the model runner rewinds the request's generator (gpu_model_runner.py:3502,
# `gen.set_offset(gen.get_offset() - 4)`), which only CUDA generators allow ("CPU Generator does
# not use offset"), and every request in flight fails with EngineDeadError. Without chunked
# prefill a prompt is prefilled in one step (vLLM raises max_num_batched_tokens to the context
# length itself), as vLLM's own CPU platform does for MLA models. A model's engine settings win.
CPU_ENGINE_ARGS = {"enable_chunked_prefill": False}
# where vLLM's CPU build is explained: the install, the venv script, the server's module form
CPU_BUILD_DOC = 'docs/local-models.md, "vLLM for real on a CPU machine"'


def gpu_visible(environ: Mapping[str, str] | None = None, dev: Path = Path("/dev")) -> bool:
    """Whether a GPU vLLM's GPU build could use is visible here, known without importing torch:
    CUDA_VISIBLE_DEVICES does not hide every device ("" or "-1"), and an NVIDIA device node
    (/dev/nvidia0, ...) or ROCm's /dev/kfd exists."""
    environ = os.environ if environ is None else environ
    if environ.get("CUDA_VISIBLE_DEVICES", "x").strip() in ("", "-1"):
        return False
    return (dev / "kfd").exists() or any(dev.glob("nvidia[0-9]*"))


def vllm_missing(name: str, gpu: bool | None = None) -> str:
    """Why `name` cannot run where vLLM is not installed, with what to install: on a machine
    with a GPU the `vllm` extra; without one (`gpu_visible`), vLLM's GPU build could not run
    either, so vLLM's CPU build (docs/local-models.md) or a transformers model on the CPU."""
    install = 'pip install -e ".[vllm]"'
    if gpu_visible() if gpu is None else gpu:
        return f"{name}: the vllm package is not installed: {install}"
    return (
        f"{name}: the vllm package is not installed, and no GPU is visible here: vLLM needs a "
        f"GPU ({install} there) or vLLM's CPU build ({CPU_BUILD_DOC}: .ci/vllm-venv builds "
        f'it); on this machine, hf:<model> runs on the CPU (pip install -e ".[hf]")'
    )


def engine_args(
    model_id: str,
    gpus: Sequence[int] = (),
    extra: Mapping[str, Any] | None = None,
    seed: int = 0,
    max_images: int = DEFAULT_MAX_IMAGES,
    max_num_seqs: int | None = None,
    dtype: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments of `vllm.AsyncEngineArgs` (the same as `vllm.LLM`'s) for a model on
    the given GPUs: `extra` (a registered model's engine settings) over the defaults, then
    `max_num_seqs` (--max-batch) and `dtype` (--dtype; None or "auto": vLLM's choice, which on
    a CPU is bfloat16 even for float32 weights) over both."""
    args: dict[str, Any] = {
        "model": model_id,
        "tensor_parallel_size": max(1, len(gpus)),
        "limit_mm_per_prompt": {"image": max_images},
        "seed": seed,
    }
    args.update(extra or {})
    if max_num_seqs:
        args["max_num_seqs"] = max_num_seqs
    if dtype and dtype != "auto":
        args["dtype"] = dtype  # changes answers: in the cache identity
    return args


def sampling_kwargs(request: Request, allowance: int = 0) -> dict[str, Any]:
    """Keyword arguments of `vllm.SamplingParams` for one request; `allowance`: tokens of
    thinking on top of its max_tokens (a thinking model's)."""
    kwargs: dict[str, Any] = {
        "n": request.n,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens + allowance,
    }
    if request.seed is not None:
        kwargs["seed"] = request.seed
    return kwargs


def vllm_input(processor: Any, request: Request, family: Family | None = None) -> dict[str, Any]:
    """One prompt as vLLM takes it: the rendered text, and its images and clips as multi-modal
    data. A clip is its frames with their metadata, `(array, metadata)` (support.videos.Clip:
    the source's fps, the sampled frames' indices), the form vLLM's parser keeps for the
    processor (vllm/multimodal/parse.py, `_get_video_with_metadata`) and that a vLLM server
    makes of a clip it decodes: Qwen2.5-VL's `second_per_grid_ts` and Qwen3-VL's timestamps
    come from it."""
    from support.backends.chat_template import render_prompt, request_images, request_videos

    images = request_images(request)
    videos = request_videos(request)
    item: dict[str, Any] = {"prompt": render_prompt(processor, request, family)}
    data: dict[str, Any] = {}
    if images:
        data["image"] = images if len(images) > 1 else images[0]
    if videos:
        data["video"] = videos if len(videos) > 1 else videos[0]
    if data:
        item["multi_modal_data"] = data
    return item


def output_response(
    name: str, final: Any, prompt: str, tokenizer: Any = None, thinks: bool = False
) -> Response:
    """The Response of a finished `vllm.RequestOutput`: each sample's text (a thinking model's
    split by `split_local`, its tokens counted with `tokenizer`) and finish reason, the tokens
    of the prompt and of every sample (its stop token included)."""
    texts, thoughts, reasons = [], [], []
    output_tokens = reasoning = 0
    opened = thinks and span_open(prompt)
    for o in final.outputs:
        ids = list(o.token_ids)
        output_tokens += len(ids)
        reasons.append(str(o.finish_reason or ""))
        if not thinks:
            texts.append(o.text)
            continue
        # a stop token (end of turn, not a stop string) ends the ids but not the text
        stopped = o.finish_reason == "stop" and not isinstance(o.stop_reason, str) and ids
        split = split_local(o.text, len(ids) - bool(stopped), token_counter(tokenizer), opened)
        texts.append(split.answer)
        thoughts.append(split.thinking)
        reasoning += split.reasoning_tokens
    return Response(
        texts=tuple(texts),
        model=name,
        usage=Usage(len(final.prompt_token_ids or []), output_tokens, reasoning),
        prompt=prompt,
        thinking=tuple(thoughts),
        finish_reasons=tuple(reasons),
    )


def image_limit_error(name: str, request: Request, limit: int) -> str | None:
    """Why `request` cannot go to an engine taking `limit` images per prompt, or None."""
    n = len(request.images)
    if n <= limit:
        return None
    return (
        f"{name}: this request has {n} images, the engine takes at most {limit} per prompt "
        f"(--max-images N raises it; its default is the most any configured evaluation sends)"
    )


@register_provider
class VLLMBackend(Backend):
    """Requests submitted one by one to vLLM's async engine (continuous batching)."""

    provider = "vllm"
    # vLLM's own platform decides between a GPU and its CPU build: it needs vLLM, not a GPU
    kind = "local-gpu"
    needs = ("vllm",)
    extra = "vllm"
    prefill = NATIVE_PREFILL  # the chat template rendered with the assistant turn open

    @classmethod
    def unavailable(cls, name: str, model_id: str, opts: BackendOptions) -> str | None:
        from support.backends.model_folder import checked_folder

        if backend_base.missing_module(cls.needs) == "vllm":  # the base's check, worded here
            return vllm_missing(name)
        why = super().unavailable(name, model_id, opts)
        if why is None:
            try:
                checked_folder(name, model_id)
            except BackendUnavailable as exc:
                return str(exc)
            family = family_of(model_id)
            if family is not None and not family.vllm:
                return (
                    f"{name}: vLLM no longer loads {family.architecture} (removed in vLLM "
                    f"0.10.2); run it with transformers: --model hf:{model_id}"
                )
        return why

    @classmethod
    def create(
        cls,
        name: str,
        model_id: str,
        opts: BackendOptions,
        engine: Mapping[str, Any] | None = None,
    ) -> Backend:
        return make_vllm_backend(name, model_id, opts, engine=engine)

    def __init__(
        self,
        name: str,
        model_id: str,
        *,
        gpus: Sequence[int] = (),
        engine_extra: Mapping[str, Any] | None = None,
        max_num_seqs: int | None = None,
        max_images: int = DEFAULT_MAX_IMAGES,
        seed: int = 0,
        revision: str | None = None,
        dtype: str | None = None,
        thinking: Thinking | None = None,  # the variant's setting: a budget sizes the allowance
    ) -> None:
        self.name = name
        self.model_id = model_id
        self.family = family_of(model_id)  # None for a hub id not downloaded yet: see _build
        self.modalities = family_modalities(type(self).modalities, self.family)
        self.gpus = tuple(gpus)
        self.args = engine_args(
            model_id, self.gpus, engine_extra, seed, max_images, max_num_seqs, dtype
        )
        self.max_images = int(self.args["limit_mm_per_prompt"]["image"])
        # requests kept at the engine: its batch, so a finished sequence's slot is refilled at once
        self.default_concurrency = int(self.args.get("max_num_seqs") or DEFAULT_MAX_NUM_SEQS)
        self.identity = {
            "provider": "vllm",
            "model": model_id,
            "revision": revision or model_id,
            "engine": _stable(self.args),
        }
        # a thinking model (module docstring): decided at start where its files are not here
        self.local_thinking = LocalThinking(model_id, thinking)
        self.identity.update(self.local_thinking.identity())
        self._engine: Any = None
        self._processor: Any = None
        self._start_error: BaseException | None = None  # a failed start is not retried
        self._starting: asyncio.Lock | None = None
        self._ids = itertools.count()
        self.submitted = 0  # requests given to the engine

    async def start(self) -> None:
        """Start the engine (weights, KV cache, warm-up: tens of seconds) in a worker thread."""
        await self._ready()

    async def _ready(self) -> tuple[Any, Any]:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._start_error is not None:
                raise self._start_error
            if self._engine is None:
                try:
                    self._engine, self._processor = await asyncio.to_thread(self._build)
                except BackendUnavailable as exc:
                    self._start_error = exc
                    raise
                except Exception as exc:
                    self._start_error = BackendError(
                        f"{self.name}: the vLLM engine did not start: {type(exc).__name__}: {exc}"
                    )
                    raise self._start_error from exc
        return self._engine, self._processor

    def _build(self) -> tuple[Any, Any]:
        """Blocking: the processor and the async engine."""
        os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")  # before vllm's import
        if self.gpus:
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, self.gpus))
        try:
            import vllm
            from transformers import AutoProcessor
        except ImportError as exc:
            raise BackendUnavailable(f"{self.name}: pip install 'vlmbench[vllm]' ({exc})") from None
        processor = AutoProcessor.from_pretrained(self.model_id)
        self.family = self.family or family_of(self.model_id)  # the hub snapshot is here now
        self.modalities = family_modalities(type(self).modalities, self.family)
        self.local_thinking.decide(processor)
        args = with_video_limit(self.args, self.family)
        engine = vllm.AsyncLLMEngine.from_engine_args(vllm.AsyncEngineArgs(**platform_args(args)))
        return engine, processor

    async def generate(self, request: Request) -> Response:
        refused = image_limit_error(self.name, request, self.max_images)
        if refused:
            raise BackendError(refused)
        engine, processor = await self._ready()
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        # PNG decoding and the template, off the loop
        item = await asyncio.to_thread(vllm_input, processor, request, self.family)
        final_only = RequestOutputKind.FINAL_ONLY  # one output, when the request is done
        room = self.local_thinking.room
        params = SamplingParams(**sampling_kwargs(request, room), output_kind=final_only)
        request_id = f"vlmbench-{next(self._ids)}"
        self.submitted += 1
        final = None
        try:
            async for out in engine.generate(item, params, request_id=request_id):
                final = out
        except Exception as exc:
            raise BackendError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        if final is None or not final.outputs:
            raise BackendError(f"{self.name}: the engine finished the request with no output")
        tokenizer = getattr(processor, "tokenizer", processor)
        thinks = bool(self.local_thinking.thinks)
        return output_response(self.name, final, item["prompt"], tokenizer, thinks)

    async def aclose(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            await asyncio.to_thread(engine.shutdown)


def on_cpu() -> bool:
    """Whether vLLM runs on its CPU platform (imports vllm)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def platform_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """`args` as this machine's vLLM platform needs them: on a CPU, CPU_ENGINE_ARGS under them."""
    return {**CPU_ENGINE_ARGS, **args} if on_cpu() else dict(args)


def with_video_limit(args: Mapping[str, Any], family: Family | None) -> dict[str, Any]:
    """`args` with VIDEOS_PER_PROMPT clips a prompt for a family that takes video (vLLM's
    `limit_mm_per_prompt`; not in the cache identity)."""
    out = dict(args)
    if family is not None and family.video:
        limits = dict(out.get("limit_mm_per_prompt") or {})
        limits.setdefault("video", VIDEOS_PER_PROMPT)
        out["limit_mm_per_prompt"] = limits
    return out


def _stable(args: dict[str, Any]) -> str:
    """Engine arguments that change answers, as text for the cache identity."""
    keep = {k: v for k, v in args.items() if k not in NOT_IN_IDENTITY}
    return repr(sorted(keep.items()))


def make_vllm_backend(
    name: str, model_id: str, opts: Any, engine: Mapping[str, Any] | None = None
) -> Backend:
    """Factory for registered vLLM names (`engine`: their ModelSpec.engine) and `vllm:<id or
    path>`: unavailable (its cases skip) where vLLM is not installed. Reads `opts.extra` keys
    gpus, max_batch (the engine's max_num_seqs) and max_images, and `opts.cache_dir` (the weight
    hashes' memo), dtype, and `opts.thinking` (the variant's thinking setting)."""
    if importlib.util.find_spec("vllm") is None:
        raise BackendUnavailable(vllm_missing(name))
    from support.backends.model_folder import checked_folder, revision_for

    checked_folder(name, model_id)
    extra = dict(getattr(opts, "extra", ()) or ())
    return VLLMBackend(
        name,
        model_id,
        gpus=tuple(extra.get("gpus", ())),
        engine_extra=engine,
        max_num_seqs=int(extra.get("max_batch") or 0) or None,
        max_images=int(extra.get("max_images") or DEFAULT_MAX_IMAGES),
        seed=getattr(opts, "seed", 0),
        revision=revision_for(model_id, getattr(opts, "cache_dir", None)),
        dtype=extra.get("dtype"),
        thinking=getattr(opts, "thinking", None),
    )
