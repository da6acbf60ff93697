"""Transformers backend (`hf:<hub id or local path>`): a local VLM generating whole batches.

Prompts are rendered by the model's own processor chat template (support.backends.chat_template,
the same code path as the vLLM backend) and left-padded into one batch; one `model.generate` call
serves each group of requests sharing (n, temperature). torch and transformers are imported on
first use only; the model loads lazily on the first batch (float32 on CPU, the checkpoint's dtype
on CUDA) and the blocking torch work runs in a worker thread so the engine's loop stays free.
Sampling is pure temperature sampling (top_k and top_p off, as the API backends' defaults).

Device: `--device` (BackendOptions.extra "device": `auto`, `cpu`, `cuda`, `cuda:1`, `mps`);
without it or with `auto`, cuda when torch sees a CUDA device, else cpu. A device torch cannot
parse raises ValueError; one this machine lacks raises BackendUnavailable (the model's cases skip
with that reason).

Cache identity: the model id, its revision (support.backends.model_folder: a local folder's
config, tokenizer and template files and each weight file's name, size and content sha256, the
hashes memoised in `<cache-dir>/file-hashes.json`; a hub id's locally cached commit), and the
device type (cpu/cuda/mps: the dtype and kernels differ, so do the answers; the device index does
not matter). Not the transformers or torch version: an upgrade re-using the same weights, template
and dtype gives the same answers up to floating-point noise, so cached answers are kept (bump
support.client.response_cache.SCHEMA_VERSION or run with --no-cache to re-generate deliberately).

Thinking models (support/backends/local_thinking.py): a model is one when its own chat template
writes `<think>` (Qwen3-VL-Thinking's opens the assistant turn with "<think>\n", so its output
starts inside the span and holds only "</think>"), never by its --model name; Qwen3-VL Instruct
has the tokens but a template without them, so it is not one. Read from the folder's (or the hub
snapshot's) template files when the backend is made; a hub id not downloaded yet is decided from
the loaded processor. A thinking model's requests get `thinking_allowance` more tokens (the
variant's `+budget-N`, else LOCAL_THINKING_ALLOWANCE), so the answer keeps the max_tokens the
evaluation asked for, and the allowance joins its cache identity (other models' identities and
token limits are as they were). Each sample is split by `split_local` (the prompt says whether
the span is open): `texts` the answer, `thinking` the span, and `usage.reasoning_tokens` its
tokens. Every model reports each sample's finish reason: "length" for a row that reached its
token limit without an end-of-turn token, else "stop".

Video: a family whose processor takes a clip (`Family.video`: Qwen2-VL, Qwen2.5-VL, Qwen3-VL,
LLaVA-OneVision) reads the "video" modality; each clip goes to the processor's `videos=` as its
sampled frames, with the metadata and `do_sample_frames` vLLM passes that family
(support.backends.local_tokens.processor_inputs, the call the dry run's count makes too), so
`hf:` and `vllm:` see the same prompt tokens: Qwen2.5-VL's `second_per_grid_ts` from the sampled
rate, Qwen3-VL's per-frame timestamps in the prompt. Other families refuse a clip, request by
request (the engine's modality check).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import sys
import threading
from pathlib import Path
from typing import Any

from support.backends.base import (
    NATIVE_PREFILL,
    Backend,
    BackendError,
    BackendOptions,
    BackendUnavailable,
    missing_module,
    register_provider,
)
from support.backends.chat_template import render_prompt, request_images
from support.backends.families import Family, family_modalities, family_of, family_of_config
from support.backends.local_thinking import (
    LocalThinking,
    split_local,
    token_counter,
)
from support.backends.local_tokens import clip_sampling, processor_inputs
from support.backends.model_folder import checked_folder, revision_for
from support.backends.thinking import (
    Thinking,
    span_open,
)
from support.types import Request, Response, Usage

DEFAULT_MAX_BATCH = 8  # requests per generate_batch call
# tokens: a cap on each request's max_tokens (the `max_new_tokens` extra); None: no cap, each
# request gets the tokens it asks for, as on vLLM (a cap of 64 once cut pgt's 512-token
# reasonings short, so hf: and vllm: answers differed)
DEFAULT_MAX_NEW_TOKENS: int | None = None


def resolve_device(name: str, device: str | None) -> str:
    """The torch device to load on: `device` checked against this machine, or (None or "auto")
    cuda when torch sees a CUDA device, else cpu. ValueError for a string torch does not parse,
    BackendUnavailable for a device this machine does not have."""
    import torch

    if not device or device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(
            f"{name}: --device {device!r} is not a torch device (cpu, cuda, cuda:1, mps)"
        ) from None
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise BackendUnavailable(f"{name}: --device {device}, but torch sees no CUDA device")
        if dev.index is not None and dev.index >= count:
            raise BackendUnavailable(
                f"{name}: --device {device}, but torch sees {count} CUDA device(s)"
            )
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise BackendUnavailable(f"{name}: --device {device}, but MPS is not available")
    return str(dev)


@register_provider
class TransformersBackend(Backend):
    """`AutoModelForImageTextToText.generate` over the requests the micro-batcher gathered."""

    provider = "hf"
    kind = "local-cpu"  # on a GPU with --device cuda
    needs = ("torch", "transformers")
    extra = "hf"
    prefill = NATIVE_PREFILL  # the chat template rendered with the assistant turn open
    default_concurrency = 1

    @classmethod
    def unavailable(cls, name: str, model_id: str, opts: BackendOptions) -> str | None:
        """The packages, the model folder, torchvision for a family whose processor imports it,
        and an accelerator asked for with `--device` (the only check that imports torch)."""
        why = super().unavailable(name, model_id, opts)
        if why is not None:
            return why
        try:
            checked_folder(name, model_id)
        except BackendUnavailable as exc:
            return str(exc)
        family = family_of(model_id)
        if family is not None and family.needs_torchvision and missing_module(("torchvision",)):
            return torchvision_missing(name, family)
        device = dict(opts.extra).get("device")
        if device not in (None, "", "auto", "cpu"):
            try:
                resolve_device(name, device)
            except (BackendUnavailable, ValueError) as exc:
                return str(exc)
        return None

    @classmethod
    def create(cls, name: str, model_id: str, opts: BackendOptions) -> Backend:
        try:
            return make_transformers_backend(name, model_id, opts)
        except ImportError as exc:
            raise BackendUnavailable(f"{name}: pip install 'vlmbench[hf]' ({exc})") from None

    def __init__(
        self,
        name: str,
        model_id: str,
        *,
        device: str | None = "cpu",  # None: cuda when available, else cpu
        max_batch: int = DEFAULT_MAX_BATCH,
        max_new_tokens: int | None = DEFAULT_MAX_NEW_TOKENS,
        cache_dir: str | Path | None = None,  # the weight-hash memo's folder; None: no memo
        dtype: str | None = None,  # None or "auto": float32 on a CPU, the checkpoint's elsewhere
        thinking: Thinking | None = None,  # the variant's setting: a budget sizes the allowance
    ) -> None:
        for module in ("torch", "transformers"):
            if importlib.util.find_spec(module) is None:
                raise BackendUnavailable(f"{name}: pip install 'vlmbench[hf]'")
        self.name = name
        self.model_id = model_id
        self.path = checked_folder(name, model_id)
        self.family = family_of(model_id)
        # text and images; "video" where the family's processor takes a clip (set again at load)
        self.modalities = family_modalities(type(self).modalities, self.family)
        self.device = resolve_device(name, device)
        self.max_batch = max_batch
        self.max_new_tokens = max_new_tokens
        self._cap = max_new_tokens or sys.maxsize  # tokens
        revision = revision_for(model_id, cache_dir)
        self.identity = {
            "provider": "hf",
            "model": model_id,
            "revision": revision,
            "device": self.device.partition(":")[0],
            "max_new_tokens": max_new_tokens,  # a cap changes (cuts) the answers
        }
        self.dtype = dtype if dtype and dtype != "auto" else None
        if self.dtype:
            self.identity["dtype"] = self.dtype
        # a thinking model (module docstring): decided at load where its files are not here
        self.local_thinking = LocalThinking(model_id, thinking)
        self.identity.update(self.local_thinking.identity())
        self.processor: Any = None
        self.model: Any = None
        self._lock = threading.RLock()  # one batch on the model at a time, loading included
        self.generate_calls = 0  # model.generate calls made
        self.batch_sizes: list[int] = []  # requests in each model.generate call

    def load(self) -> tuple[Any, Any]:
        """The processor and model, loaded on first use."""
        with self._lock:
            return self._load()

    def _load(self) -> tuple[Any, Any]:
        if self.model is None:
            import torch
            from transformers import AutoModelForImageTextToText, AutoProcessor

            source = str(self.path) if self.path is not None else self.model_id
            try:
                processor = AutoProcessor.from_pretrained(source)
            except (ImportError, RuntimeError) as exc:
                if "torchvision" not in str(exc).lower():
                    raise
                raise BackendUnavailable(torchvision_missing(self.name, self.family)) from exc
            dtype: Any = torch.float32 if self.device == "cpu" else "auto"  # the checkpoint's
            if self.dtype:
                dtype = getattr(torch, self.dtype)
            model = AutoModelForImageTextToText.from_pretrained(source, **{_dtype_keyword(): dtype})
            self.family = self.family or family_of_config(model.config.to_dict())
            self.modalities = family_modalities(type(self).modalities, self.family)
            tokenizer = getattr(processor, "tokenizer", processor)
            self.local_thinking.decide(processor)
            tokenizer.padding_side = "left"  # generation continues each row at the end
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            self.processor, self.model = processor, model.to(self.device).eval()
        return self.processor, self.model

    def _eos_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        if tokenizer.eos_token_id is not None:
            ids.add(tokenizer.eos_token_id)
        return ids

    def _generate_group(self, requests: list[Request]) -> list[Response]:
        """One processor call and one model.generate call for requests sharing n and temperature."""
        import torch

        processor, model = self.processor, self.model
        tokenizer = getattr(processor, "tokenizer", processor)
        prompts = [render_prompt(processor, r, self.family) for r in requests]
        per_request = [request_images(r) for r in requests]
        images: list[Any] = [im for found in per_request for im in found]
        if self.family is not None and self.family.nested_images and images:
            images = per_request  # one list per prompt: Mllama's processor refuses a flat batch
        clips = [c for r in requests for c in r.clips]
        inputs = processor(**processor_inputs(processor, self.family, prompts, images, clips))
        inputs = {
            k: v.to(self.device, model.dtype) if v.is_floating_point() else v.to(self.device)
            for k, v in inputs.items()
            if isinstance(v, torch.Tensor)
        }
        first = requests[0]
        n, sample = first.n, first.temperature > 0
        rows = n if sample else 1  # greedy samples are all the same: generate one, copy it
        kwargs: dict[str, Any] = {"do_sample": sample, "num_return_sequences": rows}
        if sample:
            kwargs.update(temperature=first.temperature, top_k=0, top_p=1.0)
            seed = next((r.seed for r in requests if r.seed is not None), None)
            if seed is not None:
                torch.manual_seed(seed)
        extra = self.local_thinking.room  # tokens of thinking
        limit = min(max(r.max_tokens for r in requests) + extra, self._cap)
        self.generate_calls += 1
        self.batch_sizes.append(len(requests))
        out = model.generate(**inputs, max_new_tokens=limit, **kwargs)
        new = out[:, inputs["input_ids"].shape[1] :].tolist()
        n_in = inputs["attention_mask"].sum(dim=1).tolist()
        eos = self._eos_ids()
        responses = []
        for i, (request, prompt) in enumerate(zip(requests, prompts, strict=True)):
            own = min(request.max_tokens + extra, self._cap)  # this request's limit
            samples = [row[:own] for row in new[i * rows : (i + 1) * rows] * (n // rows)]
            responses.append(
                rows_response(
                    self.name,
                    prompt,
                    int(n_in[i]),
                    samples,
                    eos,
                    tokenizer,
                    bool(self.local_thinking.thinks),
                )
            )
        return responses

    def _run(self, requests: list[Request]) -> list[Response]:
        """Blocking: group by (n, temperature, and the clips' do_sample_frames where the family
        is given it: one processor call takes one), generate each group, answer in request
        order."""
        import torch

        responses: list[Response | None] = [None] * len(requests)
        with self._lock:
            self.load()  # the family first: a hub id's is known once loaded
            groups: dict[tuple[int, float, bool | None], list[int]] = {}
            for i, r in enumerate(requests):
                sampling = clip_sampling(self.family, r.clips)
                groups.setdefault((r.n, max(r.temperature, 0.0), sampling), []).append(i)
            with torch.inference_mode():
                for indices in groups.values():
                    group = self._generate_group([requests[i] for i in indices])
                    for i, resp in zip(indices, group, strict=True):
                        responses[i] = resp
        return [r for r in responses if r is not None]

    async def generate_batch(self, requests: list[Request]) -> list[Response]:
        if not requests:
            return []
        try:
            return await asyncio.to_thread(self._run, requests)
        except Exception as exc:
            raise BackendError(f"{self.name}: {type(exc).__name__}: {exc}") from exc

    async def generate(self, request: Request) -> Response:
        return (await self.generate_batch([request]))[0]


def rows_response(
    name: str,
    prompt: str,
    input_tokens: int,
    rows: list[list[int]],
    eos: set[int],
    tokenizer: Any,
    thinks: bool = False,
) -> Response:
    """The Response of one request from its samples' generated token ids (each cut at the
    request's limit): a row ends at its first `eos` token (counted, not decoded) or, with
    none, at the limit (finish reason "length"). A thinking model's rows are split
    (`split_local`: answer, thinking, reasoning tokens); others are decoded whole."""
    texts, thoughts, reasons = [], [], []
    output_tokens = reasoning = 0
    opened = thinks and span_open(prompt)
    count = token_counter(tokenizer)
    for row in rows:
        end = next((j for j, t in enumerate(row) if t in eos), None)
        output_tokens += len(row) if end is None else end + 1  # the eos token counts
        ids = row[:end]
        text = tokenizer.decode(ids, skip_special_tokens=True)
        reasons.append("length" if end is None else "stop")
        if thinks:
            split = split_local(text, len(ids), count, opened)
            texts.append(split.answer)
            thoughts.append(split.thinking)
            reasoning += split.reasoning_tokens
        else:
            texts.append(text)
    return Response(
        tuple(texts),
        name,
        usage=Usage(input_tokens, output_tokens, reasoning),
        prompt=prompt,
        thinking=tuple(thoughts),
        finish_reasons=tuple(reasons),
    )


def torchvision_missing(name: str, family: Family | None) -> str:
    """Why a family whose processor imports torchvision cannot load, and what to install."""
    what = family.architecture if family is not None else "this model"
    return (
        f"{name}: the transformers processor of {what} needs torchvision, built for the "
        f"installed torch: pip install torchvision==<the release matching torch> "
        f"(docs/local-models.md)"
    )


def _dtype_keyword() -> str:
    """`dtype` (transformers >= 4.56), else the older `torch_dtype`."""
    from packaging.version import Version

    new = Version(importlib.metadata.version("transformers")) >= Version("4.56")
    return "dtype" if new else "torch_dtype"


def make_transformers_backend(name: str, model_id: str, opts: Any) -> Backend:
    """Factory for `hf:<id or path>`; reads `opts.extra` keys max_batch, device (None or absent:
    cuda when available, else cpu), max_new_tokens, `opts.cache_dir` (the weight-hash memo's
    folder, None or absent: no memo) and `opts.thinking` (the variant's thinking setting)."""
    extra = dict(getattr(opts, "extra", ()) or ())
    return TransformersBackend(
        name,
        model_id,
        device=extra.get("device") or None,
        max_batch=int(extra.get("max_batch") or DEFAULT_MAX_BATCH),
        max_new_tokens=int(extra.get("max_new_tokens") or 0) or DEFAULT_MAX_NEW_TOKENS,
        cache_dir=getattr(opts, "cache_dir", None),
        dtype=extra.get("dtype"),
        thinking=getattr(opts, "thinking", None),
    )
