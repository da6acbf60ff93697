"""A model's thinking setting, and thinking text kept apart from the answer.

`Thinking` is what `--reasoning-effort` and `--thinking-budget` select for one model variant
(`gpt-5.4+effort-high`, `claude-sonnet-4-5+budget-2048`): an effort level of the model's own
scale, or a budget of thinking tokens. A variant's name is its model's name, `+`, and the
setting's `label`, so pytest ids, `-k` and comparisons.csv see each setting as a model of its own.

`split_think` takes a local thinking model's `<think>...</think>` span off its answer (the
markers Qwen3 and its kin write; the chat template may open the span itself, so the answer can
start inside it). The local backends (`hf:`, `vllm:`) tell a thinking model by its chat
template (`template_thinks`), give its requests room to think (`thinking_allowance`) and split
each sample with `split_local`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

VARIANT_SEP = "+"  # between a model's name and its setting's label: allowed in pytest's -k
EFFORT_PREFIX = "effort-"
BUDGET_PREFIX = "budget-"
_LEVEL_RE = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Thinking:
    """One thinking setting: an `effort` level or a `budget` of tokens (exactly one)."""

    effort: str | None = None
    budget: int | None = None  # tokens of thinking

    def __post_init__(self) -> None:
        if (self.effort is None) == (self.budget is None):
            raise ValueError("a thinking setting is an effort level or a budget, not both")
        if self.effort is not None and not _LEVEL_RE.fullmatch(self.effort):
            raise ValueError(f"effort level {self.effort!r}: expected lowercase letters")
        if self.budget is not None and (isinstance(self.budget, bool) or self.budget < 0):
            raise ValueError(f"thinking budget {self.budget!r}: expected a whole number >= 0")

    @property
    def label(self) -> str:
        """`effort-high`, `budget-2048`: the variant suffix, and the manifest's words."""
        if self.effort is not None:
            return EFFORT_PREFIX + self.effort
        return f"{BUDGET_PREFIX}{self.budget}"

    def to_json(self) -> dict[str, str | int]:
        return {"effort": self.effort} if self.effort is not None else {"budget": self.budget}


def parse_label(label: str) -> Thinking:
    """`effort-high` or `budget-2048` -> Thinking; ValueError for anything else."""
    if label.startswith(EFFORT_PREFIX):
        return Thinking(effort=label[len(EFFORT_PREFIX) :])
    if label.startswith(BUDGET_PREFIX) and label[len(BUDGET_PREFIX) :].isdigit():
        return Thinking(budget=int(label[len(BUDGET_PREFIX) :]))
    raise ValueError(f"{label!r} is not a thinking setting (effort-LEVEL or budget-TOKENS)")


def split_variant(name: str) -> tuple[str, Thinking | None]:
    """`gpt-5.4+effort-high` -> ("gpt-5.4", Thinking(effort="high")); a name without a setting
    -> (name, None). ValueError for a `+` suffix that is not a setting."""
    base, sep, label = name.rpartition(VARIANT_SEP)
    if not sep:
        return name, None
    if not base:
        raise ValueError(f"model {name!r}: nothing before {VARIANT_SEP!r}")
    return base, parse_label(label)


def variant_name(name: str, thinking: Thinking | None) -> str:
    """The `--model` name of `name` with `thinking` (the name itself for None)."""
    return name if thinking is None else f"{name}{VARIANT_SEP}{thinking.label}"


THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
# tokens a local thinking model may spend on its `<think>` span on top of the answer's own
# max_tokens when its variant sets no budget (`+budget-N` sets N): Qwen3-VL-Thinking's answers
# to the suite's questions think for a few hundred to a few thousand tokens; 4096 keeps most
# spans whole without letting a model that never closes its span run for its whole context
LOCAL_THINKING_ALLOWANCE = 4096


def split_think(text: str, open_: str = THINK_OPEN, close: str = THINK_CLOSE) -> tuple[str, str]:
    """(thinking, answer) of a local model's output, both stripped; never raises.

    The span ends at the last `close`. It starts at the first `open_` before it, or at the start
    of the text where there is none or a `close` comes first (a template that opened the span
    itself: the output starts inside it). An `open_` after the last `close` (or in a text with
    no `close`) opens a span the token limit cut: everything after it is thinking too. The
    answer is the rest (text before the span, then text after it, on lines of their own), so it
    never holds a marker. Without markers the text is the answer, unchanged."""
    if open_ not in text and close not in text:
        return "", text
    before, thoughts, tail = "", [], text
    end = text.rfind(close)
    if end >= 0:
        head, tail = text[:end], text[end + len(close) :]
        start, first_close = head.find(open_), head.find(close)
        if start >= 0 and (first_close < 0 or start < first_close):
            before, head = head[:start], head[start + len(open_) :]
        thoughts.append(head)
    cut = tail.find(open_)
    if cut >= 0:  # a span never closed
        tail, rest = tail[:cut], tail[cut + len(open_) :]
        thoughts.append(rest)
    return _joined(thoughts), _joined([before, tail])


def _joined(parts: list[str]) -> str:
    return "\n".join(p.strip() for p in parts if p.strip())


# -- local thinking models (`hf:`, `vllm:`) --------------------------------------------------------


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


def span_open(prompt: str) -> bool:
    """Whether `prompt` ends inside a `<think>` span (the template opened it): the output then
    starts with thinking and holds only the closing marker."""
    return prompt.rfind(THINK_OPEN) > prompt.rfind(THINK_CLOSE)


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
