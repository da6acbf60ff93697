"""Every relative link of the user documents resolves: README.md, ARCHITECTURE.md, docs/*.md,
evals/*/README.md, benchmarks/README.md and tools/README.md. A link `](path)` or
`](path#anchor)` must name a file or folder that exists; an anchor must be one of the target's
headings as GitHub spells it (lower case, punctuation dropped, spaces as dashes)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted(
    {
        *REPO.glob("*.md"),
        *REPO.glob("docs/*.md"),
        *REPO.glob("evals/*/README.md"),
        *REPO.glob("benchmarks/README.md"),
        *REPO.glob("tools/README.md"),
    }
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def prose(text: str) -> str:
    """The text outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return "\n".join(out)


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of a markdown file's headings."""
    found = set()
    for line in prose(path.read_text(encoding="utf-8")).splitlines():
        if m := re.match(r"#{1,6} (.+)", line):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            found.add(slug)
    return found


def broken_links(doc: Path) -> list[str]:
    """The links of `doc` whose file or anchor does not exist."""
    bad = []
    for target in LINK.findall(prose(doc.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            bad.append(f"{target}: no file {os.path.relpath(file, REPO)}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            bad.append(f"{target}: no heading #{anchor} in {os.path.relpath(file, REPO)}")
    return bad


def test_the_documents_are_found() -> None:
    names = {str(d.relative_to(REPO)) for d in DOCUMENTS}
    assert {"README.md", "ARCHITECTURE.md", "benchmarks/README.md"} <= names
    assert {f"evals/{n}/README.md" for n in ("pointing", "pgt", "nyu_distance")} <= names


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: str(d.relative_to(REPO)))
def test_relative_links_resolve(doc: Path) -> None:
    assert broken_links(doc) == []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Two words\n\n## `--compat source`\n")
    doc = tmp_path / "b.md"
    doc.write_text(
        "[ok](a.md#two-words) [ok](a.md#--compat-source) [web](https://x.org/y)\n"
        "```\n[in code](nope.md)\n```\n[gone](nope.md) [bad](a.md#three)\n"
    )
    bad = broken_links(doc)
    assert [b.split(":")[0] for b in bad] == ["nope.md", "a.md#three"]
