"""How much of a text (a model's answer, an error, a parsed value) a page shows: the HTML report
(fixtures.case_extras) and the comparison page (support.compare.page) cut it the same way."""

from __future__ import annotations

# at most this many characters of each shown text go into a page: a model's 1 MB answer would
# otherwise be 1 MB of HTML per case
SHOWN_CHARS = 8192


def shown(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` cut to `limit` characters, saying how many more there are and where they are; a
    cut never splits a surrogate pair (text read from JSON may hold one)."""
    if len(text) <= limit:
        return text
    cut = limit - 1 if "\ud800" <= text[limit - 1] <= "\udbff" else limit
    return (
        f"{text[:cut]}\n... {len(text) - cut} more characters; "
        "the whole answer is in raw_results.jsonl"
    )
