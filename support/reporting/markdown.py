"""report.md's markdown: `Report`, the parts a summary adds in order, written once by the core;
`escape_markup`, what keeps data (model names, case ids, answers) from being rendered as HTML."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from support.storage.files import atomic_write_text

# a `<` that could open raw HTML or an autolink in markdown (a letter, `/`, `!` or `?` follows:
# CommonMark's tag, closing tag, comment/declaration, processing instruction, `<scheme:`), and an
# `&` that would start a character reference; `p < 0.05` and `<0.0001` need no escape
_MARKUP = re.compile(r"<(?=[A-Za-z/!?])|&(?=#?\w+;)")


@dataclass
class Report:
    """report.md's markdown as a summary adds it, in order (each part ends with a newline)."""

    parts: list[str] = field(default_factory=list)

    def add(self, markdown: str) -> None:
        self.parts.append(markdown)

    def text(self) -> str:
        return "".join(self.parts)

    def write(self, path: Path, notice: str | None = None, tail: str = "") -> Path | None:
        """report.md at `path`: the `notice` in bold first (an interrupted run's partial line),
        the summary's parts, then `tail` (the comparisons section). Nothing when neither the
        summary nor the tail has anything to say."""
        body = self.text()
        if not (body or tail):
            return None
        head = f"**{notice}.**\n\n" if notice else ""
        atomic_write_text(path, escape_markup(head + body + tail))
        return path


def escape_markup(markdown: str) -> str:
    """`markdown` in which no HTML tag, autolink or character reference can start: such a `<`
    becomes `&lt;` and such an `&` `&amp;`, so a viewer shows them as the text they are. The
    suite's own report.md text writes none; data (a model name, a case id, an answer) may."""
    return _MARKUP.sub(lambda m: "&lt;" if m.group() == "<" else "&amp;", markdown)
