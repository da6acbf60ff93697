"""The import graph of the house (ARCHITECTURE.md, Layout): imports go one way.

- `support` imports none of `fixtures`, `reports` and the tests; `reports` imports no `fixtures`.
- The core (every module of `support` outside `support/evaluations/<name>/` and
  `support/doubles/`) imports no evaluation's package: the registry names them by string.
- An evaluation's package imports the core and its own modules, never another evaluation's nor
  `support.doubles`.
- No circle: no two files import each other, directly or round a loop, and no two rooms (a
  module or package of `support`, `reports`, `fixtures`) do, so every room has a floor and no
  arrow runs back up.

Read from the source with ast (imports inside functions and under TYPE_CHECKING included),
nothing imported.
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
        assert {"spec.py", "task.py", "profiles.py", sample} <= found, name
        assert "rules.py" not in found, name  # the compat choices are profiles
    assert not list((REPO / "support" / "synthetic").glob("*.py"))  # (a stale __pycache__ may stay)


@pytest.mark.parametrize(
    "layer, forbidden",
    [("support", ("fixtures", "reports", "unit", "examples")),
     ("reports", ("fixtures", "unit", "examples"))],
)  # fmt: skip
def test_layers_import_one_way(layer, forbidden):
    wrong = [
        f"{p.relative_to(REPO)}: {m}"
        for p, found in modules(layer).items()
        for m in found
        if m.split(".")[0] in forbidden
    ]
    assert not wrong


def test_the_pytest_side_never_imports_the_after_the_run_tool():
    """support/compare/ (vlmbench-compare) reads run folders after a run; the reporter and the
    plugins never import it, and nothing else of support does."""
    wrong = [
        f"{p.relative_to(REPO)}: {m}"
        for folder in ("reports", "fixtures", "support")
        for p, found in modules(folder).items()
        if "compare" not in p.relative_to(REPO).parts
        for m in found
        if m.split(".")[:2] == ["support", "compare"]
    ]
    assert not wrong


def test_rooms_say_what_they_hold():
    """support/ keeps at most 8 modules at its top level (the rest live in packages named for
    their concern), and outside the evaluations' own packages no two modules of the house share
    a file name."""
    top = [p.name for p in (REPO / "support").glob("*.py") if p.name != "__init__.py"]
    assert len(top) <= 8, top
    seen: dict[str, list[str]] = {}
    for folder in ("support", "reports", "fixtures"):
        for p in (REPO / folder).rglob("*.py"):
            if p.name in ("__init__.py", "__main__.py") or (folder == "support" and owner(p)):
                continue
            seen.setdefault(p.name, []).append(str(p.relative_to(REPO)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}


def test_the_core_imports_no_evaluation_and_evaluations_not_each_other():
    wrong = []
    for path, found in modules("support").items():
        mine = owner(path)
        in_doubles = path.relative_to(REPO / "support").parts[0] == "doubles"
        for m in found:
            parts = m.split(".")
            if parts[:2] == ["support", "doubles"] and mine is not None:
                wrong.append(f"{path.relative_to(REPO)}: {m} (an evaluation imports a test double)")
            if parts[:2] != ["support", "evaluations"] or len(parts) < 3:
                continue
            if parts[2] not in EVALUATIONS:
                continue  # the registry's own names (support.evaluations.register, ...)
            if mine is None and not in_doubles:
                wrong.append(f"{path.relative_to(REPO)}: {m} (the core imports an evaluation)")
            elif mine is not None and parts[2] != mine:
                wrong.append(f"{path.relative_to(REPO)}: {m} (another evaluation's module)")
    assert not wrong


def test_the_checks_see_a_wrong_import(tmp_path):
    """The reader finds imports inside functions too (so the graph tests can fail)."""
    path = tmp_path / "m.py"
    path.write_text(
        "def f():\n    from support.evaluations.pgt.task import X\n    import fixtures.models\n"
    )
    assert {"support.evaluations.pgt.task", "fixtures.models"} <= imports(path)


# -- circles: file by file, and room by room ----------------------------------------------------

HOUSE = ("support", "reports", "fixtures")  # the suite's code (tests and tools aside)


def module_file(name: str) -> Path | None:
    """The repository file of the longest importable prefix of `name` (a.b.C -> a/b.py)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:end])
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path
    return None


def targets(path: Path) -> set[Path]:
    """The house's files `path` imports, in functions and under TYPE_CHECKING too. `from pkg
    import sub` is an arrow to the submodule, not to the package's `__init__.py` (which Python
    runs first, but which only hands names on)."""
    found: set[Path | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {module_file(a.name) for a in node.names if a.name.split(".")[0] in HOUSE}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] not in HOUSE:
                continue
            package = module_file(node.module)
            for alias in node.names:
                sub = module_file(f"{node.module}.{alias.name}")
                is_sub = package is not None and package.name == "__init__.py"
                is_sub = is_sub and sub is not None and sub != package
                found.add(sub if is_sub else package)
    return {p for p in found if p is not None and p != path}


def file_graph() -> dict[Path, set[Path]]:
    """file -> the house's files it imports (`targets`)."""
    return {p: targets(p) for folder in HOUSE for p in sorted((REPO / folder).rglob("*.py"))}


def room(path: Path) -> str:
    """A file's room: a top-level package of the house, or a module or subpackage of support."""
    parts = path.relative_to(REPO).parts
    if parts[0] != "support" or len(parts) == 2:
        return parts[0] if parts[0] != "support" else "/".join(parts)
    return "/".join(parts[:2])


def circles(graph: dict) -> list[list]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    found: list[list] = []

    def visit(node) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(map(str, component)))

    for node in list(graph):
        if node not in index:
            visit(node)
    return found


def test_no_two_files_import_each_other_even_inside_functions():
    graph = file_graph()
    named = {
        str(p.relative_to(REPO)): {str(q.relative_to(REPO)) for q in qs} for p, qs in graph.items()
    }
    assert not circles(named)


def test_no_room_imports_a_room_that_imports_it_back():
    """Rooms as the layout names them (a module of support/, a package of support/, reports,
    fixtures): one way, so each has a floor and no arrow runs back up."""
    rooms: dict[str, set[str]] = {}
    for path, found in file_graph().items():
        rooms.setdefault(room(path), set()).update(room(p) for p in found)
    for name, found in rooms.items():
        found.discard(name)
    assert not circles(rooms)


def test_the_circle_finder_finds_circles():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    path = REPO / "support" / "types.py"
    assert room(path) == "support/types.py"
    assert room(REPO / "support" / "backends" / "base.py") == "support/backends"
    assert room(REPO / "reports" / "plugin.py") == "reports"
    assert module_file("support.backends.base.BackendError") == REPO / "support/backends/base.py"
