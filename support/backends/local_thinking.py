"""Local thinking models (`hf:`, `vllm:`): which model thinks, the room its requests get, and its
answers split into thinking and answer.

A local model thinks when its own chat template writes `<think>` (Qwen3-VL-Thinking's opens the
assistant turn with "<think>\n"), never by its --model name. Its requests get `thinking_allowance`
more tokens, so the answer keeps the max_tokens the evaluation asked for; each sample is split by
`split_local` (support.backends.thinking.split_think, with the prompt telling whether the span was
left open), so `hf:` and `vllm:` split alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from support.backends.thinking import THINK_CLOSE, THINK_OPEN, Thinking, split_think

# tokens a local thinking model may spend on its `<think>` span on top of the answer's own
# max_tokens when its variant sets no budget (`+budget-N` sets N): Qwen3-VL-Thinking's answers
# to the suite's questions think for a few hundred to a few thousand tokens; 4096 keeps most
# spans whole without letting a model that never closes its span run for its whole context
LOCAL_THINKING_ALLOWANCE = 4096


def template_thinks(*templates: object) -> bool:
    """Whether a model's chat templates make it a thinking model: one of them writes `<think>`
    (opens the span in the assistant turn, as Qwen3-VL-Thinking's, or writes past turns'
    spans). A template is text, a {"chat_template": text} file, or a list of named templates
    ({"name", "template"}: tokenizer_config.json's form); anything else counts as none."""
    for template in templates:
        if isinstance(template, dict):
            template = template.get("chat_template") or template.get("template")
        if isinstance(template, list):
            if template_thinks(*template):
                return True
        elif isinstance(template, str) and THINK_OPEN in template:
            return True
    return False


# where a model's chat templates are: the processor's and the tokenizer's files
_TEMPLATE_FILES = (
    "chat_template.jinja",
    "chat_template.json",
    "processor_config.json",
    "tokenizer_config.json",
)


def local_thinking_model(model_id: str) -> bool | None:
    """Whether the local model `model_id` (a folder, or a hub id's cached snapshot) is a
    thinking model by its own chat templates (`template_thinks`); None when its files are not
    here (a hub id not downloaded yet: decided once the engine has fetched them). Offline."""
    import json

    from support.backends.model_folder import model_file

    if model_file(model_id, "config.json") is None:
        return None
    templates: list[object] = []
    for name in _TEMPLATE_FILES:
        path = model_file(model_id, name)
        if path is None:
            continue
        try:
            text = path.read_text()
            templates.append(text if name.endswith(".jinja") else json.loads(text))
        except (OSError, ValueError):
            continue
    return template_thinks(*templates)


def thinking_allowance(thinking: Thinking | None) -> int:
    """Tokens a local thinking model's requests get on top of their max_tokens: the variant's
    budget, else LOCAL_THINKING_ALLOWANCE (an effort level means nothing to a local model)."""
    if thinking is not None and thinking.budget is not None:
        return thinking.budget
    return LOCAL_THINKING_ALLOWANCE


class LocalThinking:
    """What a local backend (`hf:`, `vllm:`) knows of its model's thinking: whether it is a
    thinking model (`local_thinking_model`; None until its files are here, then `decide` reads
    the loaded processor's templates) and the tokens of room its requests get
    (`thinking_allowance`), which join its cache identity only when it thinks."""

    def __init__(self, model_id: str, thinking: Thinking | None = None) -> None:
        self.thinks: bool | None = local_thinking_model(model_id)
        self.allowance = thinking_allowance(thinking)  # tokens, for a thinking model only

    def identity(self) -> dict[str, int]:
        """What it adds to the backend's cache identity (nothing for a model that does not
        think, so other models key as they always did)."""
        return {"thinking_allowance": self.allowance} if self.thinks else {}

    def decide(self, processor: Any) -> None:
        """Settle `thinks` from the loaded processor's (and its tokenizer's) templates, where
        the model's files were not here when the backend was made."""
        if self.thinks is None:
            tokenizer = getattr(processor, "tokenizer", processor)
            self.thinks = template_thinks(
                getattr(processor, "chat_template", None),
                getattr(tokenizer, "chat_template", None),
            )

    @property
    def room(self) -> int:
        """Tokens added to each request's max_tokens (0 for a model that does not think)."""
        return self.allowance if self.thinks else 0


class LocalAnswer(NamedTuple):
    """One sample of a local thinking model, split."""

    answer: str
    thinking: str
    reasoning_tokens: int  # tokens of the thinking span, markers included


def split_local(
    text: str, n_tokens: int, count: Callable[[str], int], opened: bool = False
) -> LocalAnswer:
    """`text` (one decoded sample of `n_tokens` tokens, the stop token left out) split into
    answer and thinking (`split_think`; `opened`: the prompt left a span open, `span_open`).
    Reasoning tokens: those up to and including the last `</think>` (`count`: the tokenizer's
    count of a prefix of `text`), plus, for a span the limit cut, those from its `<think>` (or
    from the start) to the end; at most `n_tokens`."""
    thinking, answer = split_think(THINK_OPEN + text if opened else text)
    end = text.rfind(THINK_CLOSE)
    closed = end + len(THINK_CLOSE) if end >= 0 else 0
    reasoning = count(text[:closed]) if closed else 0
    cut = 0 if opened and not closed else text.find(THINK_OPEN, closed)
    if cut >= 0:
        reasoning += n_tokens - (count(text[:cut]) if cut else 0)
    return LocalAnswer(answer, thinking, max(0, min(reasoning, n_tokens)))


def token_counter(tokenizer: Any) -> Callable[[str], int]:
    """count(text): the tokens `tokenizer` (a Hugging Face tokenizer) makes of `text`, no
    special tokens added."""
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False)) if text else 0
