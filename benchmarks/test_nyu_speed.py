"""NYU speed targets that were wall-clock assertions in unit tests (which still check behaviour).

    pytest benchmarks/test_nyu_speed.py --benchmark-only -p no:randomly

- The distance parser on inputs that backtrack catastrophically in a careless pattern (the
  BACKTRACKING inputs of unit/evaluations/nyu_distance/test_nyu_parser.py): all five in under 2 s
  together.
- The synthetic NYU .mat file (support/evaluations/nyu_distance/synthetic.py) built in under 5 s.

Each is the best of a few rounds (the machine is shared). Measured on the 2-core box with a unit
suite running beside it: parse 3 ms best (101 ms worst), build 3.7 s best (5.0 s worst).
"""

from __future__ import annotations

from pathlib import Path

from support.evaluations.nyu_distance.parser import parse_distance
from support.evaluations.nyu_distance.synthetic import ensure_nyu_mat

PARSE_TARGET_S = 2.0
BUILD_TARGET_S = 5.0
INPUTS = ("1," * 3000, "1 " * 3000 + "x", "1.1.1." * 1000, "- " * 3000, "5'" * 2000)


def parse_all() -> list[float | None]:
    """Every backtracking input, parsed once."""
    return [parse_distance(text) for text in INPUTS]


def test_backtracking_inputs_parse_quickly(benchmark) -> None:
    benchmark.pedantic(parse_all, rounds=5, iterations=1)
    best = benchmark.stats.stats.min
    assert best < PARSE_TARGET_S, f"catastrophic backtracking in the NYU parser: {best:.2f} s"


def test_synthetic_mat_builds_quickly(benchmark, tmp_path: Path) -> None:
    folders = iter(tmp_path / str(i) for i in range(100))
    benchmark.pedantic(lambda: ensure_nyu_mat(next(folders)), rounds=3, iterations=1)
    best = benchmark.stats.stats.min
    assert best < BUILD_TARGET_S, f"building the synthetic NYU file took {best:.1f} s"
