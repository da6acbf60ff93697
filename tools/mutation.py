"""Mutation check of the modules whose mistakes change published numbers (mutmut 3).

Usage (from anywhere in the repository, with the dev venv's python and the `mutation` extra):

    python tools/mutation.py [MODULE ...] [--rev REV] [--workdir DIR] [--jobs N]
                             [--tests PATH ...] [--fresh] [--report FILE] [--report-only]

MODULE is a path from MODULES below (`support/statistics/metrics.py`) or an evaluation's name
(`pgt`); none means all of them. The tree (the working tree, tracked and untracked-but-not-ignored
files, or the committed tree of --rev) is copied to DIR/tree (default `.mutation/`, ignored by git),
mutmut is configured there (`[tool.mutmut]` appended to the copy's pyproject.toml) and run with the
modules' own unit test files (MODULES below; `--tests unit` for the whole lane), not-slow tests
only. mutmut makes each mutant a one-token change of one function (an operator, a constant, a
keyword argument, a string), learns once which tests reach which function (its stats, kept in DIR
between runs), then runs only those tests against each mutant, fastest first, stopping at the first
failure.

The report (DIR/report.md, or --report) has, per module: mutants, killed (a test failed or the
mutant timed out), survived, equivalent (a survivor listed in EQUIVALENTS, with why), no tests,
not run (yet: `--report-only` reads a run under way) and the kill rate = killed / (mutants -
equivalent - not run). Then every survivor's diff, the equivalent ones with their reason. Exit
status 0 when every module reaches GOAL, else 1.

Equivalent mutants live in tools/mutation_equivalents/<area>.toml (`support`, or an evaluation's
name), keyed by module, function and the mutated line (not by mutmut's numbering, which shifts
when a function changes):

    [[equivalent]]
    module = "support/statistics/metrics.py"
    function = "safe_ratio"
    mutated = "num = np.asarray(num, dtype=None)"
    why = "np.asarray of ints and floats gives the same division result"

Mutants that only change the text of an error message are not counted as equivalent: tests that
match the message (`pytest.raises(..., match=...)`) kill them, and the rest are listed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENTS = ROOT / "tools" / "mutation_equivalents"  # one TOML file an area
GOAL = 0.90  # kill rate asked of each module


@dataclass(frozen=True)
class Target:
    """A module to mutate: the functions there (empty: all), the unit test files run against its
    mutants (globs; not-slow tests only), and what its mistakes would change."""

    functions: tuple[str, ...]
    tests: tuple[str, ...]
    changes: str


# The tests are each module's own fast files. The whole not-slow lane is too slow here: mutmut
# forks a fresh process for each mutant and runs its tests there, so a file with a costly setup
# (test_summary_matrix.py builds every evaluation's outcomes, ~62 s) costs that much per mutant.
# New tests for a module go in a file these globs match (unit/statistics/test_metrics_*.py, ...).
MODULES: dict[str, Target] = {
    "support/statistics/metrics.py": Target(
        (),
        (
            "unit/statistics/test_metrics*.py",
            "unit/statistics/test_comparisons*.py",
            "unit/evaluations/nyu_distance/test_nyu_summary*.py",
        ),
        "accuracy, precision/recall/F1, cluster-bootstrap intervals",
    ),
    "support/statistics/paired.py": Target(
        (),
        (
            "unit/statistics/test_comparisons*.py",
            "unit/compare/test_compare_runs*.py",
            "unit/statistics/test_contrasts*.py",
        ),
        "paired differences, McNemar, Holm",
    ),
    "support/client/response_cache.py": Target(
        ("cache_key",), ("unit/client/test_cache_*.py",), "which cached answer a request is served"
    ),
    "support/evaluations/pointing/parser.py": Target(
        (),
        (
            "unit/evaluations/pointing/test_pointing_parser*.py",
            "unit/evaluations/pointing/test_pointing_source*.py",
        ),
        "the point and presence read from an answer",
    ),
    "support/evaluations/pointing/letterbox.py": Target(
        (),
        ("unit/evaluations/pointing/test_geometry*.py",),
        "canvas <-> image pixels, the hit test",
    ),
    "support/evaluations/pointing/summary.py": Target(
        (),
        (
            "unit/evaluations/pointing/test_pointing_recorded*.py",
            "unit/evaluations/pointing/test_pointing_summary*.py",
        ),
        "pointing's tables",
    ),
    "support/evaluations/pgt/answers.py": Target(
        (),
        ("unit/evaluations/pgt/test_pgt_answers*.py", "unit/evaluations/pgt/test_pgt_source*.py"),
        "real / ai-generated read",
    ),
    "support/evaluations/pgt/source_metrics.py": Target(
        (), ("unit/evaluations/pgt/test_pgt_source*.py",), "pgt's --compat source metrics"
    ),
    "support/evaluations/pgt/summary.py": Target(
        (),
        ("unit/evaluations/pgt/test_pgt_summary*.py", "unit/evaluations/pgt/test_pgt_source*.py"),
        "pgt's tables",
    ),
    "support/evaluations/nyu_distance/parser.py": Target(
        (),
        (
            "unit/evaluations/nyu_distance/test_nyu_parser*.py",
            "unit/evaluations/nyu_distance/test_nyu_source*.py",
        ),
        "metres read from an answer",
    ),
    "support/evaluations/nyu_distance/camera.py": Target(
        (),
        (
            "unit/evaluations/nyu_distance/test_nyu_geometry*.py",
            "unit/evaluations/nyu_distance/test_nyu_summary*.py",
        ),
        "the pinhole camera, 3-D distances",
    ),
    "support/evaluations/nyu_distance/task.py": Target(
        ("delta_ratio",),
        ("unit/evaluations/nyu_distance/test_nyu_summary*.py",),
        "nyu_distance's delta score",
    ),
    "support/evaluations/nyu_distance/summary.py": Target(
        (), ("unit/evaluations/nyu_distance/test_nyu_summary*.py",), "nyu_distance's tables"
    ),
    "support/evaluations/surgvqa/bleu.py": Target(
        (), ("unit/evaluations/surgvqa/test_surgvqa_bleu*.py",), "the official sentence-BLEU"
    ),
    "support/evaluations/surgvqa/boxes.py": Target(
        (),
        (
            "unit/evaluations/surgvqa/test_surgvqa_boxes*.py",
            "unit/evaluations/surgvqa/test_surgvqa_coco*.py",
        ),
        "boxes read from a detection answer",
    ),
    "support/evaluations/surgvqa/coco.py": Target(
        (),
        (
            "unit/evaluations/surgvqa/test_surgvqa_coco*.py",
            "unit/evaluations/surgvqa/test_surgvu_category1*.py",
        ),
        "COCO bbox mAP and its interval",
    ),
    "support/evaluations/surgvqa/summary.py": Target(
        (),
        (
            "unit/evaluations/surgvqa/test_surgvqa_summary*.py",
            "unit/evaluations/surgvqa/test_surgvu_category1*.py",
        ),
        "surgvqa's tables",
    ),
    "support/evaluations/dynamic/utility.py": Target(
        (),
        (
            "unit/evaluations/dynamic/test_dynamic_utility*.py",
            "unit/evaluations/dynamic/test_dynamic_search*.py",
        ),
        "the search's utility, top-K",
    ),
    "support/evaluations/dynamic/summary.py": Target(
        (),
        (
            "unit/evaluations/dynamic/test_dynamic_summary*.py",
            "unit/evaluations/dynamic/test_anypoint_formats*.py",
        ),
        "dynamic's tables",
    ),
}

# mutmut's exit codes (mutmut/stats.py status_by_exit_code) -> the report's columns
KILLED = {1, 3, 36, -24, 24, 152, 255, 37, -9, -11}  # failed, errored, timed out, crashed
TIMED_OUT = {36, -24, 24, 152, 255}  # shown apart too: under load a slow survivor can time out
SURVIVED = {0}
NO_TESTS = {5, 33}


@dataclass
class ModuleResult:
    module: str
    counts: Counter = field(default_factory=Counter)
    # name, diff, status: "survived", "no tests" (no selected test reaches it) or "equivalent: why"
    survivors: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def mutants(self) -> int:
        return sum(v for k, v in self.counts.items() if k != "timeout")

    @property
    def kill_rate(self) -> float:
        tested = self.mutants - self.counts["equivalent"] - self.counts["not run"]
        return self.counts["killed"] / tested if tested else float("nan")


def module_of(arg: str) -> list[str]:
    """A module path or an evaluation's name -> MODULES keys."""
    if arg in MODULES:
        return [arg]
    chosen = [m for m in MODULES if f"/evaluations/{arg}/" in m]
    if not chosen:
        raise SystemExit(f"mutation: {arg!r} is neither a module of MODULES nor an evaluation")
    return chosen


def tree_files(rev: str | None) -> dict[str, bytes]:
    """The files to copy: a committed tree, or the working tree git would commit."""
    if rev:
        tar = subprocess.run(
            ["git", "archive", "--format=tar", rev], cwd=ROOT, check=True, capture_output=True
        ).stdout
        with tarfile.open(fileobj=BytesIO(tar)) as t:
            return {
                m.name: t.extractfile(m).read()  # type: ignore[union-attr]
                for m in t.getmembers()
                if m.isfile()
            }
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    paths = [p.decode() for p in listed if p]
    return {p: (ROOT / p).read_bytes() for p in paths if (ROOT / p).is_file()}


def sync(tree: Path, files: dict[str, bytes]) -> None:
    """Make `tree` hold exactly `files` (outside mutmut's mutants/), and drop mutants/ copies of
    unmutated files that changed (mutmut copies a source file once and never refreshes it)."""
    tree.mkdir(parents=True, exist_ok=True)
    for path in [p for p in tree.rglob("*") if p.is_file()]:
        rel = path.relative_to(tree).as_posix()
        if rel.startswith("mutants/") or "__pycache__" in rel:
            continue
        if rel not in files:
            path.unlink()
    for rel, data in files.items():
        path = tree / rel
        if path.is_file() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        copied = tree / "mutants" / rel
        if copied.is_file() and rel not in MODULES:
            copied.unlink()


def configure(tree: Path, modules: list[str], tests: list[str]) -> None:
    """Append the [tool.mutmut] section to the copy's pyproject.toml, and drop the plain copy
    mutmut made of a module an earlier run did not select (it would not mutate it now)."""
    for module in modules:
        copied = tree / "mutants" / module
        if copied.is_file() and not meta_of(tree, module).is_file():
            copied.unlink()
    pyproject = tree / "pyproject.toml"
    text = pyproject.read_text()
    cut = text.find("\n[tool.mutmut]")
    if cut >= 0:
        text = text[:cut]
    # everything but the mutated package: tests read docs, tools and .ci files too
    copy = sorted(
        {p.relative_to(tree).parts[0] for p in tree.iterdir()}
        - {"support", "mutants", "pyproject.toml", "__pycache__"}
    )
    section = {
        "source_paths": ["support"],
        "only_mutate": modules,
        # every mutant runs with the not-slow markers; the cache provider stays off (each mutant
        # would otherwise rewrite .pytest_cache)
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-m", "not slow"],
        "pytest_add_cli_args_test_selection": tests,
        "also_copy": copy,
        "use_git_change_detection": False,
        # workers fork from a server that never ran the tests (some tests load torch, whose
        # threads do not survive a fork)
        "process_isolation": "forkserver",
    }
    lines = ["", "[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in section.items()]
    pyproject.write_text(text + "\n".join(lines) + "\n")


def load_equivalents() -> list[dict[str, str]]:
    """Every entry of every EQUIVALENTS/*.toml, checked for its four fields."""
    listed = []
    for path in sorted(EQUIVALENTS.glob("*.toml")):
        try:
            entries = tomllib.loads(path.read_text()).get("equivalent", [])
        except tomllib.TOMLDecodeError as exc:
            raise SystemExit(f"mutation: {path}: {exc}") from None
        for i, entry in enumerate(entries):
            missing = {"module", "function", "mutated", "why"} - entry.keys()
            if missing:
                raise SystemExit(
                    f"mutation: {path}: [[equivalent]] {i + 1} lacks {sorted(missing)}"
                )
        listed += entries
    return listed


def function_of(mutant: str) -> str:
    """`support.statistics.metrics.x_safe_ratio__mutmut_3` -> `safe_ratio`; a method ->
    `Class.method`."""
    name = mutant.rsplit(".", 1)[-1].rsplit("__mutmut_", 1)[0]
    return name.removeprefix("x_").removeprefix("xǁ").replace("ǁ", ".")


def mutated_line(diff: str) -> str:
    """The first added line of a mutant's diff, stripped (`deleted: <line>` for a deletion)."""
    lines = [ln for ln in diff.splitlines() if not ln.startswith(("+++", "---"))]
    added = [ln[1:].strip() for ln in lines if ln.startswith("+") and ln[1:].strip()]
    if added:
        return added[0]
    # a mutant that only deletes a line (an argument of a call written over several lines)
    deleted = [ln[1:].strip() for ln in lines if ln.startswith("-") and ln[1:].strip()]
    return f"deleted: {deleted[0]}" if deleted else ""


def meta_of(tree: Path, module: str) -> Path:
    """mutmut's results of one module: {"exit_code_by_key": {mutant: exit code or None}, ...}."""
    return tree / "mutants" / f"{module}.meta"


def undecided(tree: Path, modules: list[str], only_unseen: bool = False) -> list[str]:
    """The mutants of `modules` (their functions) not killed yet, or only those never run."""
    names = []
    for module in modules:
        functions = MODULES[module].functions
        codes = json.loads(meta_of(tree, module).read_text())["exit_code_by_key"]
        for name, code in codes.items():
            if functions and function_of(name) not in functions:
                continue
            if code is None or (not only_unseen and code not in KILLED):
                names.append(name)
    return names


def collect(tree: Path, modules: list[str]) -> list[ModuleResult]:
    """Read mutmut's per-file results (mutants/<module>.meta) and every survivor's diff."""
    os.chdir(tree)
    sys.path.insert(0, str(tree))
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    equivalents = load_equivalents()
    results = []
    for module in modules:
        functions = MODULES[module].functions
        meta = json.loads(meta_of(tree, module).read_text())
        result = ModuleResult(module)
        for name, code in sorted(meta["exit_code_by_key"].items()):
            function = function_of(name)
            if functions and function not in functions:
                continue
            if code in KILLED:
                result.counts["killed"] += 1
                result.counts["timeout"] += code in TIMED_OUT
                continue
            if code is None:  # mutmut has not run it yet
                result.counts["not run"] += 1
                continue
            if code in NO_TESTS:
                result.counts["no tests"] += 1
            elif code not in SURVIVED:
                result.counts[f"other ({code})"] += 1
            diff = get_diff_for_mutant(name, path=module)
            line = mutated_line(diff)
            why = next(
                (
                    e["why"]
                    for e in equivalents
                    if e["module"] == module
                    and e["function"] == function
                    and e["mutated"].strip() == line
                ),
                None,
            )
            if code in SURVIVED:
                result.counts["equivalent" if why else "survived"] += 1
            status = (
                "no tests" if code in NO_TESTS else "survived" if code in SURVIVED else str(code)
            )
            result.survivors.append((name, diff, f"equivalent: {why}" if why else status))
        results.append(result)
    return results


def report(results: list[ModuleResult], tests: list[str]) -> str:
    head = [
        "# Mutation check",
        "",
        f"mutmut with `{' '.join(tests)} -m 'not slow'`; kill rate = killed / (mutants - "
        f"equivalent - not run); goal {GOAL:.0%} a module.",
        "",
        "| module | mutants | killed (timed out) | survived | equivalent | no tests | not run "
        "| kill rate |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        c = r.counts
        head.append(
            f"| {r.module} | {r.mutants} | {c['killed']} ({c['timeout']}) | {c['survived']} "
            f"| {c['equivalent']} "
            f"| {c['no tests']} | {c['not run']} | {r.kill_rate:.1%} |"
        )
    body = []
    for r in results:
        if not r.survivors:
            continue
        body += ["", f"## {r.module}"]
        for name, diff, status in r.survivors:
            lines = [ln for ln in diff.splitlines()[2:] if ln[:1] in "+-"]
            body += ["", f"`{name}` ({status})", "```diff", *lines, "```"]
    return "\n".join(head + body) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="module paths or evaluation names")
    parser.add_argument("--rev", help="mutate this commit's tree instead of the working tree")
    parser.add_argument("--workdir", type=Path, default=ROOT / ".mutation")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--tests", nargs="+", help="test paths instead of the modules' own files (e.g. unit)"
    )
    parser.add_argument("--fresh", action="store_true", help="forget mutmut's stats and results")
    parser.add_argument("--report", type=Path, help="default: WORKDIR/report.md")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="write the report from WORKDIR's results as they are (after editing the equivalents, "
        "or while a run is under way: mutants not yet run are counted as such)",
    )
    args = parser.parse_args(argv)

    modules = [m for arg in args.modules for m in module_of(arg)] or list(MODULES)
    modules = list(dict.fromkeys(modules))
    tree = args.workdir.resolve() / "tree"
    if args.report_only:
        configured = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["mutmut"]
        return write_report(args, tree, modules, configured["pytest_add_cli_args_test_selection"])
    if args.fresh and tree.exists():
        shutil.rmtree(tree)
    sync(tree, tree_files(args.rev))
    tests = args.tests or sorted(
        {
            p.relative_to(tree).as_posix()
            for m in modules
            for g in MODULES[m].tests
            for p in tree.glob(g)
        }
    )
    if not tests:
        raise SystemExit(f"mutation: no test file matches the globs of {modules}")
    configure(tree, modules, tests)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", MPLBACKEND="Agg")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    mutmut = [
        str(Path(sys.executable).with_name("mutmut")),
        "run",
        "--max-children",
        str(args.jobs),
    ]
    # mutmut runs every mutant it is named and keeps any other's earlier verdict, even where a
    # new test could now kill it: a first run names every mutant of the modules, a later one
    # only those not killed before (survived, no tests, not run), then any it has not seen
    passes = [undecided(tree, modules)] if all(meta_of(tree, m).is_file() for m in modules) else []
    passes = passes or [
        [
            f"{m.removesuffix('.py').replace('/', '.')}.x*{f}__mutmut_*"
            for m in modules
            for f in (MODULES[m].functions or ("",))
        ]
    ]
    for names in passes:
        if not names:
            continue
        run = subprocess.run([*mutmut, *names], cwd=tree, env=env)
        if run.returncode != 0:
            print(f"mutation: mutmut exited {run.returncode}", file=sys.stderr)
            return run.returncode
        unseen = undecided(tree, modules, only_unseen=True)
        if unseen:
            passes.append(unseen)
    return write_report(args, tree, modules, tests)


def write_report(args: argparse.Namespace, tree: Path, modules: list[str], tests: list[str]) -> int:
    """Collect, write the report, print its table; 0 when every module reaches GOAL."""
    out = (args.report or args.workdir / "report.md").resolve()
    results = collect(tree, modules)
    text = report(results, tests)
    out.write_text(text)
    print(text.split("\n\n## ")[0])
    print(f"report: {out}")
    return 0 if all(r.kill_rate >= GOAL for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
