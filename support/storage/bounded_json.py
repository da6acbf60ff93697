"""JSON from files the suite did not write, read without a RecursionError.

Python's parser recurses once per level: a file nested some thousands deep (`[[[[...`) raises
RecursionError, which no caller expects from a parser. `loads` turns it into `TooDeep`, a
ValueError; `nesting` measures how deep a parsed value goes without recursing, for a reader that
bounds the depth it accepts (the run folder's files, a scorer model's config.json).
"""

from __future__ import annotations

import json
from typing import Any


class TooDeep(ValueError):
    """JSON nested deeper than Python's parser can read."""


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`; TooDeep (a ValueError) where the parser would recurse too deep."""
    try:
        return json.loads(text)
    except RecursionError:
        raise TooDeep("JSON nested too deep for Python's parser") from None


def nesting(value: Any) -> int:
    """How deep `value` nests (a scalar 0, `{}` or `[]` 1), without recursing."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            todo += [(v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)]
    return deepest
