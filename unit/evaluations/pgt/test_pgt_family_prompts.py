"""PGT's prompts as each model family's engine receives them (every tiny family checkpoint of
support.doubles.tiny_families, its chat template through `render_prompt`).

The requests are the PGT task's own (`PgtEvaluation.stage1_request`, `stage2_request`, for the
cases `cases()` lists), rendered as the local backends render them: `render_prompt(tokenizer,
request, family)` with the family read from the folder's config. Each prompt is checked against
the write-up's phrase-mode table (../shared/seeds/001_f104a314b095a61a.txt:26-34, the source's
routing at :297-320) in each family's layout (the layouts are pinned, with their sources, in
unit/backends/test_family_templates.py):

- prefill: the phrase right after the template's opened assistant turn (write-up :28);
- prefill-pseudo-system, instruct: the system turn (:29, :32); for Llama-3.2-Vision, whose
  template refuses a system message beside an image, the system text opens the user turn;
- prefill-pseudo-user, prompt: the user turn (:30, :31);
- the baseline phrase: the bare question, whatever the mode (:34).

Both stages (stage 2 continues stage 1's prompt, the reasoning and the final-answer cue), n = 1
and n = 5: n changes the sampling, never the prompt.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from PIL import Image

from support.backends.chat_template import render_prompt
from support.backends.families import family_of
from support.doubles.tiny_families import FAMILIES
from support.evaluations.pgt.phrases import MODES
from support.evaluations.pgt.spec import configure
from support.evaluations.pgt.task import PgtEvaluation
from support.settings import OutputSettings, RunSettings

QUESTION = "Is this image real or AI-generated?"  # write-up :30-31
COT = "Let's think step by step"  # the write-up's example phrase (:24), the `cot` phrase
REASONING = " The textures and the lighting look natural."  # a stage-1 answer, continued
CUE = "\n\nFinal Answer (real/ai-generated):"  # stage 2's cue (write-up :265; the writeup profile)

# mode -> (system text, user text, prefill) with the phrase "Let's think step by step", as the
# write-up's table gives them (001_f104a314b095a61a.txt:28-32). prefill-pseudo-user quotes the
# phrase in double quotes as the source's code does (:306); the table's row (:30) shows single
# quotes.
WRITEUP_TABLE: dict[str, tuple[str | None, str, str]] = {
    # :28 `...assistant\nLet's think step by step`
    "prefill": (None, "Is this image real or AI-generated?", "Let's think step by step"),
    # :29 System: 'Please start your response with "Let's think step by step"'
    "prefill-pseudo-system": (
        'Please start your response with "Let\'s think step by step"',
        "Is this image real or AI-generated?",
        "",
    ),
    # :30 (and :306) User: the question, then the "start with" instruction
    "prefill-pseudo-user": (
        None,
        "Is this image real or AI-generated? Please start your response with \"Let's think step "
        'by step"',
        "",
    ),
    # :31 User: "Is this image real or AI-generated? Please think step by step."
    "prompt": (None, "Is this image real or AI-generated? Please think step by step.", ""),
    # :32 System: "Please think step by step."
    "instruct": ("Please think step by step.", "Is this image real or AI-generated?", ""),
}
BASELINE = (None, "Is this image real or AI-generated?", "")  # :34: the mode is ignored
METHODS = [("baseline", None), *(("cot", mode) for mode in MODES)]


def layout(family: str, system: str | None, user: str, prefill: str) -> str:
    """The prompt of one image and `user` (the image first, as the task sends it), `system` (or
    none) and the assistant turn opened then `prefill`, in `family`'s documented layout."""
    if family == "qwen2_5_vl":  # its default system turn when none is given
        return (
            f"<|im_start|>system\n{system or 'You are a helpful assistant.'}<|im_end|>\n"
            f"<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>{user}<|im_end|>\n"
            f"<|im_start|>assistant\n{prefill}"
        )
    if family in ("qwen3_vl", "qwen3_vl_thinking"):
        think = ""
        if family == "qwen3_vl_thinking":  # a prefill is the answer: the span closed empty first
            think = "<think>\n\n</think>\n\n" if prefill else "<think>\n"
        return (
            (f"<|im_start|>system\n{system}<|im_end|>\n" if system else "")
            + f"<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>{user}<|im_end|>\n"
            f"<|im_start|>assistant\n{think}{prefill}"
        )
    if family == "llava_onevision":
        return (
            f"<|im_start|>system \n{system}<|im_end|>" if system else ""
        ) + f"<|im_start|>user <image>\n{user}<|im_end|><|im_start|>assistant\n{prefill}"
    assert family == "mllama"  # the system text folded into the user turn, before the image
    return (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
        + (f"{system}\n\n" if system else "")
        + f"<|image|>{user}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n{prefill}"
    )


@pytest.fixture(scope="module")
def tokenizers(shared_cache: Path) -> dict[str, tuple[object, object]]:
    """family -> (the folder's tokenizer, the suite's family of the folder), each tiny folder
    built once for the session."""
    from transformers import AutoTokenizer

    from support.doubles.tiny_families import ensure_family

    out = {}
    for f in FAMILIES:
        folder = ensure_family(shared_cache, f)
        out[f] = (AutoTokenizer.from_pretrained(folder), family_of(str(folder)))
    return out


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory) -> PgtEvaluation:
    """The PGT task over a one-image CSV, phrases baseline and cot, every mode, n = 1 and 5."""
    root = tmp_path_factory.mktemp("pgt-prompts")
    Image.new("RGB", (16, 16), (90, 140, 60)).save(root / "leaf.png")
    (root / "one.csv").write_text("image_path,label\nleaf.png,real\n")
    run = RunSettings(output=OutputSettings(cache_dir=root / "cache", results_dir=root / "results"))
    values = {"pgt_dataset": str(root / "one.csv"), "pgt_phrase": ["baseline,cot"], "pgt_n": "1,5"}
    return PgtEvaluation.load(run, configure(values, run))


def stage_prompts(ev: PgtEvaluation, tokenizers, family: str, phrase: str, mode, stage: int):
    """n -> (the request, the prompt the engine receives) of the case with this method."""
    tokenizer, fam = tokenizers[family]
    cases = [c for c in ev.cases() if (c.params["phrase"], c.params["mode"]) == (phrase, mode)]
    assert sorted(c.params["n"] for c in cases) == [1, 5]
    out = {}
    for case in cases:
        request = ev.stage1_request(case)
        if stage == 2:
            request = ev.stage2_request(request, REASONING, case.params["label"])
        out[case.params["n"]] = (request, render_prompt(tokenizer, request, fam))
    return out


@pytest.mark.parametrize("stage", [1, 2], ids=["stage1", "stage2"])
@pytest.mark.parametrize(("phrase", "mode"), METHODS, ids=[m or p for p, m in METHODS])
@pytest.mark.parametrize("family", FAMILIES)
def test_the_engine_prompt_follows_the_writeups_table(
    evaluation, tokenizers, family, phrase, mode, stage
):
    system, user, prefill = BASELINE if phrase == "baseline" else WRITEUP_TABLE[mode]
    expected = layout(family, system, user, prefill if stage == 1 else prefill + REASONING + CUE)
    by_n = stage_prompts(evaluation, tokenizers, family, phrase, mode, stage)
    for n, (_, prompt) in by_n.items():
        assert prompt == expected, f"n={n}"
    # n changes the sampling (stage 1), never the prompt
    assert by_n[1][1] == by_n[5][1]
    if stage == 1:
        assert (by_n[1][0].n, by_n[5][0].n) == (1, 5)
    else:
        assert by_n[1][0].n == by_n[5][0].n == 1


@pytest.mark.parametrize("family", FAMILIES)
def test_each_mode_changes_only_its_part_of_the_baseline_prompt(evaluation, tokenizers, family):
    """The table's columns as relations between the rendered prompts of one family: prefill adds
    the phrase after the opened assistant turn and nothing else; pseudo-system and instruct
    change the system turn only; pseudo-user and prompt change the user text only."""
    prompts = {
        mode or phrase: stage_prompts(evaluation, tokenizers, family, phrase, mode, 1)[1][1]
        for phrase, mode in METHODS
    }
    baseline = prompts["baseline"]
    assert baseline == layout(family, None, QUESTION, "")
    assert prompts["prefill"] == layout(family, None, QUESTION, COT)
    if family != "qwen3_vl_thinking":  # there the prefill also closes the <think> span
        assert prompts["prefill"] == baseline + COT
    for mode in ("prefill-pseudo-system", "instruct"):
        system = WRITEUP_TABLE[mode][0]
        assert prompts[mode] == layout(family, system, QUESTION, ""), mode
        assert system in prompts[mode] and system not in baseline
        # the user's question and the opened assistant turn are the baseline's
        assert prompts[mode].endswith(baseline[baseline.index(QUESTION) :]), mode
    for mode in ("prefill-pseudo-user", "prompt"):
        user = WRITEUP_TABLE[mode][1]
        assert prompts[mode] == baseline.replace(QUESTION, user, 1), mode
        assert prompts[mode].count(QUESTION) == 1
