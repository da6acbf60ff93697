"""The import graph of the house (ARCHITECTURE.md, Layout): imports go one way.

- `support` imports none of `fixtures`, `reports` and the tests; `reports` imports no `fixtures`.
- The core (every module of `support` outside `support/evaluations/<name>/` and
  `support/testing/`) imports no evaluation's package: the registry names them by string.
- An evaluation's package imports the core and its own modules, never another evaluation's nor
  `support.testing`.

Read from the source with ast (imports inside functions included), nothing imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EVALUATIONS = sorted(
    p.name for p in (REPO / "support" / "evaluations").iterdir() if (p / "spec.py").is_file()
)


def imports(path: Path) -> set[str]:
    """Every module name a file imports (absolute imports; `from a import b` gives a and a.b)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def modules(folder: str) -> dict[Path, set[str]]:
    return {p: imports(p) for p in sorted((REPO / folder).rglob("*.py"))}


def owner(path: Path) -> str | None:
    """The evaluation a file of support/evaluations/<name>/ belongs to, else None."""
    parts = path.relative_to(REPO / "support").parts
    return parts[1] if len(parts) > 2 and parts[0] == "evaluations" else None


def test_the_five_evaluations_are_packages_of_support_evaluations():
    assert EVALUATIONS == ["dynamic", "nyu_distance", "pgt", "pointing", "surgvqa"]
    for name in EVALUATIONS:  # each holds all of it, its sample data included
        found = {p.name for p in (REPO / "support" / "evaluations" / name).iterdir()}
        sample = "assets.py" if name == "dynamic" else "synthetic.py"  # dynamic's: procedural
        assert {"spec.py", "task.py", "rules.py", sample} <= found, name
    assert not list((REPO / "support" / "synthetic").glob("*.py"))  # (a stale __pycache__ may stay)


@pytest.mark.parametrize("layer, forbidden", [("support", ("fixtures", "reports", "unit")),
                                              ("reports", ("fixtures", "unit"))])  # fmt: skip
def test_layers_import_one_way(layer, forbidden):
    wrong = [
        f"{p.relative_to(REPO)}: {m}"
        for p, found in modules(layer).items()
        for m in found
        if m.split(".")[0] in forbidden
    ]
    assert not wrong


def test_the_core_imports_no_evaluation_and_evaluations_not_each_other():
    wrong = []
    for path, found in modules("support").items():
        mine = owner(path)
        in_testing = path.relative_to(REPO / "support").parts[0] == "testing"
        for m in found:
            parts = m.split(".")
            if parts[:2] == ["support", "testing"] and mine is not None:
                wrong.append(f"{path.relative_to(REPO)}: {m} (an evaluation imports a test double)")
            if parts[:2] != ["support", "evaluations"] or len(parts) < 3:
                continue
            if parts[2] not in EVALUATIONS:
                continue  # the registry's own names (support.evaluations.register, ...)
            if mine is None and not in_testing:
                wrong.append(f"{path.relative_to(REPO)}: {m} (the core imports an evaluation)")
            elif mine is not None and parts[2] != mine:
                wrong.append(f"{path.relative_to(REPO)}: {m} (another evaluation's module)")
    assert not wrong


def test_the_checks_see_a_wrong_import(tmp_path):
    """The reader finds imports inside functions too (so the graph tests can fail)."""
    path = tmp_path / "m.py"
    path.write_text(
        "def f():\n    from support.evaluations.pgt.task import X\n    import fixtures.options\n"
    )
    assert {"support.evaluations.pgt.task", "fixtures.options"} <= imports(path)
