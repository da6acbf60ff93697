"""The real-engine lane on every model family: tiny Qwen2.5-VL, Qwen3-VL (instruct and thinking),
LLaVA-OneVision and Llama-3.2-Vision checkpoints (support.doubles.tiny_families) through the suite.

Each family runs the five evaluations' quick subsets, cut to every request shape
(`suite_runs.EVERY_SHAPE`), in one child session (`pytest evals -m quick` with several --model),
its models side by side:

- `vllm:<folder>` (vLLM offline; its CPU build here) for every family vLLM loads,
- `openai-compatible:` against a vLLM server for the same folder (one server per family),
- `hf:<folder>` (transformers) for every family, Llama-3.2-Vision included (vLLM dropped it).

No outcome may be an error. Then, per vLLM family, the greedy answers of `hf:` and `vllm:` must be
the same text, case by case, on their first 32 tokens (`--max-tokens`): every request of the
quick subsets is greedy (pointing's few-shot cases send 4 images, pgt sends both stages, the
second continuing the first's answer after the template's opened assistant turn), so one engine
rendering, resizing or continuing differently from the other shows up here. The thinking variant
of Qwen3-VL differs from the instruct one only in its template (the assistant turn opens with
"<think>"), so it runs offline and on `hf:`; the served path of its family is the instruct
one's. Both engines run float32 (`--dtype float32`): vLLM's CPU platform would otherwise run the
tiny float32 checkpoints in bfloat16.

Video: every family vLLM loads takes a clip, so their sessions send surgvqa's questions as video
(`--surgvqa-input video`: each 8-second, 1 fps synthetic clip whole); Llama-3.2-Vision's, and the
tiny LLaVA's in test_vllm_engine.py, send frames. On each family the same clip must then be the
same prompt, token for token in count, and the same greedy answer offline (`vllm:`, the frames
and their metadata), served (`openai-compatible:`, the file as a `video_url` that the server
decodes and samples itself) and on `hf:` (the processor's `videos=`): the check peers lack.

Marked `vllm` and `slow`: `.ci/vllm` runs it in the vLLM venv (vLLM 0.32's CPU build, transformers
with torchvision); elsewhere it is skipped.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from pathlib import Path

import pytest

from support.doubles.tiny_families import FAMILIES, VLLM_FAMILIES
from unit.helpers.suite_runs import (
    EVERY_SHAPE,
    LANE_MAX_TOKENS,
    cache_with_shared_data,
    error_outcomes,
    raw_rows,
    run_quick,
)

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(  # in the lane itself (.ci/vllm) a missing vLLM fails instead
        importlib.util.find_spec("vllm") is None and os.environ.get("VLMBENCH_VLLM_LANE") != "1",
        reason="needs vLLM: the real-engine lane (.ci/vllm builds its venv)",
    ),
]

MAX_IMAGES = 8  # surgvqa's VQA frames: the most the evaluations send in one request
SERVER_START_S = 600  # seconds a server may take to answer /health
ENGINE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CONFIGURE_LOGGING": "0"}
# both engines in float32, the tiny checkpoints' dtype (vLLM's CPU platform would run bfloat16)
DTYPE = "--dtype=float32"
SERVED = tuple(f for f in VLLM_FAMILIES if f != "qwen3_vl_thinking")
VIDEO = "--surgvqa-input=video"  # the families vLLM loads all take video (families.py)


# the thinking family's room for its <think> span (tokens): the default 4,096 lets the random
# tiny model write hundreds of tokens a request before its end of turn
THINKING_BUDGET = "+budget-32"


def _models(family: str, folder: Path) -> list[str]:
    """The --model names of a family's session: vLLM offline, served and transformers (the
    thinking family's with a small thinking budget)."""
    budget = THINKING_BUDGET if family == "qwen3_vl_thinking" else ""
    models = [f"vllm:{folder}{budget}"] if family in VLLM_FAMILIES else []
    models += [f"openai-compatible:{family}"] if family in SERVED else []
    return [*models, f"hf:{folder}{budget}"]


@pytest.fixture(scope="module")
def folders(shared_cache: Path) -> dict[str, Path]:
    """Every family's tiny checkpoint, built once for the session."""
    from support.doubles.tiny_families import ensure_family

    return {f: ensure_family(shared_cache, f) for f in FAMILIES}


@pytest.fixture(scope="module")
def runs(folders, shared_cache, tmp_path_factory):
    """family -> (the child run, its raw rows by model, evaluation), each family run once: one
    `pytest evals -m quick` session with all of the family's models (a vLLM server started for
    it first where the family is served), so the session's start and data are paid once."""
    done: dict[str, tuple] = {}

    def run(family: str):
        if family not in done:
            done[family] = _run(family, folders[family], shared_cache, tmp_path_factory)
        return done[family]

    return run


def _run(family: str, folder: Path, shared_cache: Path, tmp_path_factory):
    from support.backends.vllm_server import ServerError, serve

    tmp = tmp_path_factory.mktemp(family)
    cache = cache_with_shared_data(tmp, shared_cache)
    models = _models(family, folder)
    args = [*(f"--model={m}" for m in models), f"--max-images={MAX_IMAGES}", "--device=cpu", DTYPE]
    args += [LANE_MAX_TOKENS, "-k", EVERY_SHAPE]
    if family in VLLM_FAMILIES:
        args.append(VIDEO)
    with contextlib.ExitStack() as stack:
        if family in SERVED:
            log = tmp / "vllm-server.log"
            try:
                url = stack.enter_context(
                    serve(
                        folder,
                        log,
                        name=family,
                        max_images=MAX_IMAGES,
                        env=ENGINE_ENV,
                        start_s=SERVER_START_S,
                        extra=(DTYPE,),
                    )
                )
            except ServerError as exc:
                pytest.fail(str(exc))
            args.append(f"--api-base={url}")
        done = run_quick(tmp, cache, "r1", *args, env=ENGINE_ENV)
    if done.returncode != 0:
        return done, None
    rows = {
        model: {ev: [o for o in outcomes if o["model"] == model] for ev, outcomes in found.items()}
        for found in [raw_rows(tmp / "results", "r1")]
        for model in models
    }
    return done, rows


@pytest.mark.parametrize("family", FAMILIES)
def test_every_evaluation_runs_with_no_error_outcome(runs, family):
    """Every model of the family (vLLM offline, served, transformers) through every
    evaluation's quick subset, none of its outcomes an error, the prompts the family's own."""
    done, rows = runs(family)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    errors = {model: error_outcomes(by_ev) for model, by_ev in rows.items()}
    assert not any(errors.values()), {
        model: {ev: (len(e), e[0].get("error")) for ev, e in found.items()}
        for model, found in errors.items() if found
    }  # fmt: skip
    # the template's own user turn opens every prompt the suite rendered (a server renders its
    # own: the suite never sees it)
    marker = {"llava_onevision": "<|im_start|>user ", "mllama": "<|start_header_id|>user"}
    expected = marker.get(family, "<|im_start|>user\n")
    for model, by_ev in rows.items():
        for ev, outcomes in by_ev.items():
            prompts = [o.get("rendered_prompt") for o in outcomes if o.get("rendered_prompt")]
            if not model.startswith("openai-compatible:"):
                assert prompts and all(expected in p for p in prompts), (model, ev, prompts[:1])


def _by_case(rows: list[dict]) -> dict[str, dict]:
    return {o["case_id"].removesuffix("-" + o["model"]): o for o in rows}


def _text(raw: str) -> str:
    """The answer without U+FFFD: a token holding part of a UTF-8 character decodes to it in
    transformers' whole-sequence decode, while vLLM's incremental detokenizer holds the bytes
    back (and drops them at the end); the tiny models' nonsense answers are full of such
    tokens. Every other character must match."""
    return raw.replace("\ufffd", "")


TAIL_CHARS = 32  # the most characters one token of these tokenizers holds, with room


def _same_text(x: str, y: str) -> bool:
    """Whether two engines wrote the same text (`_text`). At the end of a text vLLM holds back
    the whole last token when it ends inside a UTF-8 character, the characters before that
    character included (" \xe2" is held whole), where transformers decodes it to "... \ufffd":
    there one text may be the other plus that last token, a short tail ending in U+FFFD."""
    a, b = _text(x), _text(y)
    if a == b:
        return True
    for whole, held, cut in ((x, y, a), (y, x, b)):
        rest = _text(held)
        if whole.endswith("\ufffd") and cut.startswith(rest) and len(cut) - len(rest) <= TAIL_CHARS:
            return True
    return False


def _same(ev: str, a: dict, b: dict) -> bool:
    """Whether two engines gave one case the same answer. pgt's stage 2 continues the text of
    stage 1 as the engine returned it, so a stage 1 that differs only in U+FFFD sends stage 2
    another prompt: stage 2 is compared where both stage 1s are the very same text."""
    if not _same_text("".join(a.get("thinking", [])), "".join(b.get("thinking", []))):
        return False  # a thinking model's span, split off the answer by both engines alike
    if ev != "pgt":
        return _same_text(a["raw"], b["raw"])
    pairs = zip(a["extra"]["responses"], b["extra"]["responses"], strict=True)
    for x, y in pairs:
        if not _same_text(x["reasoning_response"], y["reasoning_response"]):
            return False
        if x["reasoning_response"] == y["reasoning_response"] and not _same_text(
            x["clean_answer_response"], y["clean_answer_response"]
        ):
            return False
    return True


def test_a_held_back_last_token_is_the_only_tail_forgiven():
    """`_same_text` forgives vLLM's held-back last token, and nothing else (no vLLM needed)."""
    held = "GrasperOrgan 114 165 par\x05"
    assert _same_text(held + " \ufffd", held) and _same_text(held, held + " ab\ufffd")
    assert not _same_text(held + " x", held)  # a tail without U+FFFD is a difference
    assert not _same_text(held + " " * 40 + "\ufffd", held)  # longer than one token
    assert not _same_text("abc", "abd") and _same_text("a\ufffdb", "ab")


@pytest.mark.parametrize("family", VLLM_FAMILIES)
def test_greedy_answers_are_the_same_on_hf_and_vllm(runs, family, folders):
    """Case by case, the same answer text from transformers and from vLLM, both in float32
    (every quick request is greedy): pointing's 4-image few-shot cases and both of pgt's stages
    included."""
    _, rows = runs(family)
    assert rows is not None, "the family's run failed: see its own test"
    budget = THINKING_BUDGET if family == "qwen3_vl_thinking" else ""
    on_hf = rows[f"hf:{folders[family]}{budget}"]
    on_vllm = rows[f"vllm:{folders[family]}{budget}"]
    differ: dict[str, list[str]] = {}
    for ev in on_vllm:
        hf, vl = _by_case(on_hf[ev]), _by_case(on_vllm[ev])
        assert hf.keys() == vl.keys(), ev
        differ[ev] = [k for k in vl if not _same(ev, hf[k], vl[k])]
        if ev == "pointing":  # few-shot cases compared: 3 example images and the query
            assert any("fewshot" in k for k in vl), "no few-shot pointing case in the subset"
    assert not any(differ.values()), {
        ev: (len(keys), keys[:3], _by_case(on_hf[ev])[keys[0]]["raw"][:120],
             _by_case(on_vllm[ev])[keys[0]]["raw"][:120])
        for ev, keys in differ.items() if keys
    }  # fmt: skip


@pytest.mark.parametrize("family", SERVED)
def test_a_clip_is_the_same_prompt_and_answer_offline_served_and_on_hf(runs, family, folders):
    """surgvqa's questions sent as video: per case, the prompt's token count (the clip's tokens,
    Qwen3-VL's timestamps included) is the same offline, served and on `hf:`, and the greedy
    answer offline is the served one's."""
    _, rows = runs(family)
    assert rows is not None, "the family's run failed: see its own test"
    offline = _by_case(rows[f"vllm:{folders[family]}"]["surgvqa"])
    served = _by_case(rows[f"openai-compatible:{family}"]["surgvqa"])
    on_hf = _by_case(rows[f"hf:{folders[family]}"]["surgvqa"])
    clips = sorted(k for k in offline if k.startswith("vqa-"))
    assert clips and all(served[k]["extra"]["sent"]["input"] == "video" for k in clips)
    tokens = {k: [by[k]["usage"]["input_tokens"] for by in (offline, served, on_hf)] for k in clips}
    assert all(len(set(t)) == 1 for t in tokens.values()), tokens
    assert all(t[0] > 8 * 4 for t in tokens.values()), tokens  # the clip's 8 frames in it
    differ = [k for k in clips if not _same_text(offline[k]["raw"], served[k]["raw"])]
    assert not differ, [(k, offline[k]["raw"][:80], served[k]["raw"][:80]) for k in differ]


def test_a_clip_offline_is_what_a_vllm_server_decodes(shared_cache):
    """The frames and metadata `vllm:` sends for a clip (support.videos.read_clip at the clip's
    own rate, Clip.metadata) are, pixel for pixel and field for field, what a vLLM server's
    video loader makes of the same file (vllm.multimodal.video.VideoBackend, OpenCV), but the
    decoder's name; a clip sampled at half its rate keeps every other frame, and then tells the
    processor not to sample again."""
    import numpy as np
    from vllm.multimodal.video import VideoBackend

    from support.evaluations.surgvqa.synthetic import ensure_surgvu
    from support.videos import read_clip

    path = next(ensure_surgvu(shared_cache).rglob("case001.mp4"))
    clip = read_clip(path, fps=1.0)
    frames, metadata = VideoBackend.load_bytes(path.read_bytes(), num_frames=32)
    assert np.array_equal(clip.array(), frames)
    ours = clip.metadata()
    assert ours.pop("video_backend") == "pyav" and metadata.pop("video_backend") == "opencv"
    assert ours == metadata and ours["do_sample_frames"] is True
    half = read_clip(path, fps=0.5).metadata()
    assert half["frames_indices"] == [0, 2, 4, 6] and half["do_sample_frames"] is False
