"""A clip on the local engines (`hf:`, `vllm:`): what the family's processor is handed with it,
and how many prompt tokens it becomes, counted by that processor.

`processor_inputs` is the one place the transformers backend's processor call is made up
(prompts, images, clips); `local_video_tokens` counts with the same call, so the dry run's count
and the `hf:` prompt never drift apart. A clip is handed over as vLLM 0.32 hands it to the
family's transformers processor (vllm/model_executor/models/*.py), so `hf:` and `vllm:` see the
same prompt tokens for the same clip:

- Qwen2.5-VL: the frames and their metadata (`video_metadata`, without `do_sample_frames`),
  vllm qwen2_5_vl.py:1197 (`video_needs_metadata=True`) and :1215-1231: the processor reads
  the sampled rate off the metadata (`len(frames_indices) / total_num_frames * fps`) for
  `second_per_grid_ts`; frames are never re-sampled (the processor's own `do_sample_frames`).
- Qwen3-VL (and its MoE): the frames, their metadata, and `do_sample_frames` from the metadata
  (True only where every frame of the stream was kept: the processor then samples at its own
  rate), vllm qwen3_vl.py:944 and :1511-1533; the processor writes each merged frame pair's
  time (`<0.5 seconds>`, from `frames_indices` / `fps`) before its tokens, as vLLM's
  `get_video_repl` (:1754) does.
- Qwen2-VL, LLaVA-OneVision and any other family: the frames alone (vLLM's parser drops the
  metadata where the family does not ask for it, vllm/multimodal/parse.py:824).

The count (`local_video_tokens`) is the prompt's tokens with the clip minus the same prompt
without it, both rendered by the model's chat template and processed by its processor: the
placeholder's expansion, the template's own tokens around the clip (Qwen's vision start and
end) and Qwen3-VL's timestamps. The processor loads offline (`local_files_only`), once per model
id; a count is kept per model and clip (its content and sampling).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from support.backends.families import Family, family_of
from support.memo import OnceCache
from support.types import Part, Request, canonical_json

if TYPE_CHECKING:
    from support.videos import Clip

# how vLLM 0.32 hands a clip to the family's processor (module docstring), by Family.name
WITH_METADATA = frozenset({"qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"})
WITH_SAMPLING = frozenset({"qwen3_vl", "qwen3_vl_moe"})  # do_sample_frames from the metadata
PROBE_TEXT = "Describe the clip."  # the text beside the clip in the counting prompts

_processors: OnceCache[str, Any] = OnceCache(maxsize=8)  # model id -> its processor
_counts: OnceCache[tuple[str, str, str], int] = OnceCache(maxsize=1024)  # clip tokens


def clip_sampling(family: Family | None, clips: Sequence[Clip]) -> bool | None:
    """The `do_sample_frames` the family's processor is given for `clips` (one call), or None
    where it is given none. ValueError when the clips disagree (one processor call takes one)."""
    if family is None or family.name not in WITH_SAMPLING or not clips:
        return None
    flags = {bool(c.metadata()["do_sample_frames"]) for c in clips}
    if len(flags) > 1:
        raise ValueError(
            "the clips of one processor call must agree on do_sample_frames (every frame of "
            "the stream kept or not)"
        )
    return flags.pop()


def video_kwargs(family: Family | None, clips: Sequence[Clip]) -> dict[str, Any]:
    """The processor's keyword arguments for `clips` (module docstring): `videos` (each clip's
    (T, H, W, 3) uint8 frames), and `video_metadata` and `do_sample_frames` where vLLM passes
    them for `family`; {} without clips."""
    if not clips:
        return {}
    kwargs: dict[str, Any] = {"videos": [c.array() for c in clips]}
    if family is not None and family.name in WITH_METADATA:
        # a fresh dict per call: Qwen3-VL's processor extends frames_indices in place
        kwargs["video_metadata"] = [
            {k: v for k, v in c.metadata().items() if k != "do_sample_frames"} for c in clips
        ]
    sampling = clip_sampling(family, clips)
    if sampling is not None:
        kwargs["do_sample_frames"] = sampling
    return kwargs


def processor_inputs(
    processor: Any,
    family: Family | None,
    prompts: list[str],
    images: list[Any] | None = None,
    clips: Sequence[Clip] = (),
) -> dict[str, Any]:
    """The keyword arguments of the transformers processor call for rendered `prompts` (padded,
    PyTorch tensors), their `images` (as the family takes them: flat, or one list a prompt) and
    `clips` (video_kwargs). The tokenizer's BOS is added unless the template wrote it."""
    tokenizer = getattr(processor, "tokenizer", processor)
    bos = tokenizer.bos_token
    return {
        "text": prompts,
        "images": images or None,
        **video_kwargs(family, clips),
        "padding": True,
        "return_tensors": "pt",
        "add_special_tokens": not (bos and prompts[0].startswith(bos)),  # template has the BOS
    }


def local_processor(model_id: str) -> Any:
    """The model's transformers processor (a local folder or a hub id in the local cache, never
    the network), loaded once per model id. LookupError naming the model when it cannot load
    (transformers or torchvision missing, no such folder, not downloaded)."""

    def load(key: str) -> Any:
        try:
            from transformers import AutoProcessor

            return AutoProcessor.from_pretrained(key, local_files_only=True)
        except (ImportError, OSError, ValueError, RuntimeError, KeyError) as exc:
            raise LookupError(
                f"{key}: its processor does not load here ({type(exc).__name__}: {exc})"
            ) from exc

    return _processors.get(model_id, load)


def prompt_tokens(
    processor: Any, family: Family | None, request: Request, clips: Sequence[Clip] = ()
) -> int:
    """Tokens of `request`'s prompt as the `hf:` backend sends it (no images counted)."""
    from support.backends.chat_template import render_prompt

    prompt = render_prompt(processor, request, family)
    inputs = processor(**processor_inputs(processor, family, [prompt], None, clips))
    return int(inputs["attention_mask"][0].sum())


def local_video_tokens(model_id: str, family: Family | None, clip: Clip) -> int:
    """The prompt tokens `clip` becomes in `model_id`'s prompt (module docstring): its processor's
    count with the clip minus without it. `family` None: read from the model's config.
    LookupError naming the model when its processor does not load, or when its family is known
    to take no video (the engine refuses such a request)."""
    family = family if family is not None else family_of(model_id)
    if family is not None and not family.video:
        raise LookupError(f"{model_id}: a {family.architecture} takes no video")
    key = (model_id, family.name if family else "", canonical_json(clip.canonical()))

    def count(_: tuple[str, str, str]) -> int:
        processor = local_processor(model_id)
        question = Part.of_text(PROBE_TEXT)
        with_clip = Request(parts=(Part.of_video(clip), question))
        without = Request(parts=(question,))
        return prompt_tokens(processor, family, with_clip, [clip]) - prompt_tokens(
            processor, family, without
        )

    return _counts.get(key, count)
