"""Each evaluation's card (evals/<name>/README.md) says where its data comes from (issue 39,
item 5): it names the original it reimplements (a "Source" section linking the public
repository) and has a section for every data option of its spec (an option that takes a path)
naming the option and showing, in a code block, the folder layout the option expects. No user
document sends a reader to notes outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support import evaluations
from support.contract.evaluation import EvaluationSpec

REPO = Path(__file__).resolve().parents[1]
BUILT_IN = ("pointing", "pgt", "nyu_distance", "surgvqa", "dynamic")
# the public originals each card must link (the write-ups' code, or the official evaluators)
ORIGINALS = {
    "pointing": ("fallcat/llm_cholec_organ",),
    "pgt": ("Zoher15/Zero-shot-PGT",),
    "nyu_distance": ("ukataria/IronsiteHackathon",),
    "surgvqa": (
        "isi-challenges/surgvu26-category-2-eval-public",
        "rgnespolo-intusurg/surgvu24-category-1-eval",
    ),
    "dynamic": ("shijian2001/AnyPoint",),
}
# the data options known today: the metavar rule below must find at least these
KNOWN_DATA_OPTIONS = {
    "pointing": {"--cholecseg8k", "--pointing-prepared"},
    "pgt": {"--pgt-dataset", "--pgt-root", "--pgt-image-root"},
    "nyu_distance": {"--nyu-mat", "--nyu-dir"},
    "surgvqa": {"--surgvqa-root"},
    "dynamic": {"--dynamic-data", "--embedder"},
}
PATH_WORDS = re.compile(r"(?<![A-Z])(DIR|PATH|CSV|FILE)(?![A-Z])")  # metavar: takes a path
HEADING = re.compile(r"^(#{1,6}) (.+)$")
FENCE = re.compile(r"^(```|~~~)")
# where the suite's gathered notes live: outside the repository, unreadable to a user
PRIVATE_NOTES = ("research notes", "shared/research", "shared/seeds", "../shared")


def data_options(spec: EvaluationSpec) -> list[str]:
    """The spec's options that take a path, known by their metavar (DIR, PATH, CSV, FILE)."""
    return [o.flag for o in spec.options if o.metavar and PATH_WORDS.search(o.metavar)]


def sections(text: str) -> list[tuple[int, str, list[str]]]:
    """(level, title, body lines) of each heading of a markdown text; a `#` line inside a code
    block is no heading."""
    out: list[tuple[int, str, list[str]]] = []
    fenced = False
    for line in text.splitlines():
        m = None if fenced else HEADING.match(line)
        if FENCE.match(line):
            fenced = not fenced
        if m:
            out.append((len(m.group(1)), m.group(2).strip(), []))
        elif out:
            out[-1][2].append(line)
    return out


def section_body(text: str, title_has: str) -> list[str] | None:
    """The lines under the first heading whose title holds `title_has`, with its sub-sections,
    up to the next heading of the same or a higher level; None when there is no such heading."""
    found = sections(text)
    for i, (level, title, body) in enumerate(found):
        if title_has in title:
            lines = list(body)
            for lower, _, more in found[i + 1 :]:
                if lower <= level:
                    break
                lines += more
            return lines
    return None


def card_problems(text: str, options: list[str], originals: tuple[str, ...]) -> list[str]:
    """What a card lacks: a data option's section (a heading naming the option, with a code
    block of the layout under it), or a Source section linking each original repository."""
    problems = []
    for flag in options:
        body = section_body(text, f"`{flag}")
        if body is None:
            problems.append(f"{flag}: no section (a heading naming `{flag} ...`)")
        elif not any(FENCE.match(line) for line in body):
            problems.append(f"{flag}: its section shows no layout (a code block)")
    source = section_body(text, "Source")
    if source is None:
        problems.append("no Source section")
    else:
        joined = "\n".join(source)
        problems += [
            f"Source does not link {repo}"
            for repo in originals
            if f"https://github.com/{repo}" not in joined
        ]
    return problems


def card(name: str) -> str:
    return (REPO / "evals" / name / "README.md").read_text(encoding="utf-8")


def test_the_rule_finds_every_known_data_option() -> None:
    for name in BUILT_IN:
        assert KNOWN_DATA_OPTIONS[name] <= set(data_options(evaluations.spec(name))), name


@pytest.mark.parametrize("name", BUILT_IN)
def test_each_card_names_its_source_and_each_data_option_layout(name: str) -> None:
    options = data_options(evaluations.spec(name))
    assert card_problems(card(name), options, ORIGINALS[name]) == []


def test_a_card_without_them_is_caught() -> None:
    text = (
        "# x\n\n## Data options\n\n### `--x-root DIR`\n\nprose only\n\n"
        "### `--x-file PATH`\n\n```\nDIR/\n```\n\n## Source\n\n[a](https://github.com/o/a)\n"
        "```\n# not a heading: `--x-gone`\n```\n"
    )
    problems = card_problems(text, ["--x-root", "--x-file", "--x-gone"], ("o/a", "o/b"))
    assert problems == [
        "--x-root: its section shows no layout (a code block)",
        "--x-gone: no section (a heading naming `--x-gone ...`)",
        "Source does not link o/b",
    ]
    assert card_problems("# x\n", [], ()) == ["no Source section"]


def user_documents() -> list[Path]:
    return sorted(
        {
            *REPO.glob("*.md"),
            *REPO.glob("docs/*.md"),
            *REPO.glob("evals/*/README.md"),
        }
    )


@pytest.mark.parametrize("doc", user_documents(), ids=lambda d: str(d.relative_to(REPO)))
def test_no_document_sends_a_reader_to_private_notes(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8").lower()
    assert [n for n in PRIVATE_NOTES if n in text] == []
