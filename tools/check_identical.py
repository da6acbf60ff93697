"""Check that a refactor changed no result: the quick subset's files, byte for byte.

Usage (from anywhere in the repository, with the dev venv's python):

    python tools/check_identical.py --before REV [--after WORKTREE_OR_REV] [--keep DIR]
                                    [--shared-cache]

It checks REV out into a temporary `git worktree` ("before"; removed at the end) and takes the
current working tree, or another directory or rev, as "after". In each tree, from its root, it runs

    python -m pytest evals -m quick --model oracle,chance --compat C -p no:randomly
        -p no:cacheprovider --results-dir R --run-id C --cache-dir CACHE

for C in writeup and source, then compares raw_results.jsonl, summary.csv, comparisons.csv and
report.md of every evaluation byte for byte, and prints a table: evaluation x compat x file ->
identical, or DIFFERENT with the first differing line of each side. Exit status 0 only when every
file is identical, every run exited 0 and each profile compared at least one evaluation.

Caches. By default each tree gets its own, empty --cache-dir, so it builds its own synthetic data
and asks its own models (a shared cache would hand "after" the data, canvases, embeddings and
responses that "before" made, hiding a change in the code that makes them). raw_results.jsonl
holds paths into the cache dir (the synthetic images), so each tree's cache-dir prefix is replaced
by <CACHE_DIR> before comparing (the output says so, with counts), and the two synthetic/ folders
are compared file by file instead. --shared-cache uses one cache dir for both trees (faster, no
replacement, weaker). Nothing else is ever rewritten; if a tree's own root path shows up in a
compared file it is replaced by <TREE> and reported loudly.

--keep DIR keeps the results, caches and pytest logs in DIR; otherwise they go to a temporary
folder that is removed at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PROFILES = ("writeup", "source")
FILES = ("raw_results.jsonl", "summary.csv", "comparisons.csv", "report.md")
MODELS = "oracle,chance"  # the default of --model (ModelSettings.names), named so both trees agree
EXCERPT = 110


@dataclass
class Tree:
    """One side of the comparison: a checkout, its cache and results folders."""

    label: str
    root: Path
    cache: Path
    results: Path
    worktree: bool = False
    runs: dict[str, int] = field(default_factory=dict)


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` and return its stdout (raises on failure)."""
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def add_worktree(repo: Path, rev: str, where: Path) -> Path:
    """Check `rev` out, detached, at `where` with `git worktree add`."""
    commit = git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}")
    git(repo, "worktree", "add", "--detach", str(where), commit)
    print(f"{rev} ({commit[:10]}) checked out at {where}")
    return where


def remove_worktree(repo: Path, where: Path) -> None:
    """Remove a worktree made by add_worktree; never fails the check."""
    done = subprocess.run(
        ["git", "-C", str(repo), "worktree", "remove", "--force", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        print(f"warning: could not remove worktree {where}: {done.stderr.strip()}")


def child_env() -> dict[str, str]:
    """The environment of the runs: offline, headless, no inherited cache dir."""
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("HF_DATASETS_OFFLINE", "1")
    env["MPLBACKEND"] = "Agg"
    env.pop("VLMBENCH_CACHE_DIR", None)
    return env


def check_imports(tree: Tree) -> None:
    """Fail unless the tree's own support/fixtures/reports are what its runs import."""
    code = "import support, fixtures, reports; print(support.__file__, fixtures.__file__)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tree.root, env=child_env(), capture_output=True, text=True
    )
    paths = done.stdout.split()
    root = str(tree.root.resolve())
    if done.returncode != 0 or not paths or not all(p.startswith(root) for p in paths):
        sys.exit(f"{tree.label}: imports do not come from {root}: {done.stdout}{done.stderr}")


def run_quick(tree: Tree, compat: str, logs: Path) -> None:
    """Run the quick subset under one compat profile in one tree; record its exit status."""
    cmd = [
        sys.executable, "-m", "pytest", "evals", "-m", "quick", "--model", MODELS,
        "--compat", compat, "-p", "no:randomly", "-p", "no:cacheprovider",
        "--results-dir", str(tree.results), "--run-id", compat, "--cache-dir", str(tree.cache),
    ]  # fmt: skip
    log = logs / f"{tree.label}-{compat}.log"
    start = time.perf_counter()
    with log.open("w") as out:
        code = subprocess.run(
            cmd, cwd=tree.root, env=child_env(), stdout=out, stderr=out
        ).returncode
    lines = log.read_text(errors="replace").strip().splitlines()
    tree.runs[compat] = code
    last = lines[-1] if lines else "(no output)"
    print(f"  {tree.label:6} {compat:7} exit {code}  {time.perf_counter() - start:6.1f} s  {last}")
    if code != 0:
        print("    ... " + "\n    ... ".join(lines[-15:]) + f"\n    (whole log: {log})")


def evaluations(tree: Tree, compat: str) -> set[str]:
    """The evaluations that wrote a results folder for this profile."""
    if not tree.results.is_dir():
        return set()
    return {p.name for p in tree.results.iterdir() if (p / compat).is_dir()}


def normalise(data: bytes, tree: Tree, shared: bool, counts: dict[str, int]) -> bytes:
    """Replace this tree's cache-dir prefix (unless shared) and its root path; count each."""
    swaps = [] if shared else [(str(tree.cache), "<CACHE_DIR>")]
    swaps.append((str(tree.root), "<TREE>"))
    for path, mark in swaps:
        n = data.count(path.encode())
        if n:
            counts[mark] = counts.get(mark, 0) + n
            data = data.replace(path.encode(), mark.encode())
    return data


def excerpt(line: bytes, col: int) -> str:
    """A short piece of a line around column `col`."""
    start = max(0, col - EXCERPT // 3)
    text = line[start : start + EXCERPT].decode(errors="replace")
    return ("..." if start else "") + text + ("..." if start + EXCERPT < len(line) else "")


def first_difference(a: bytes, b: bytes) -> str:
    """Where two different byte strings first differ: line number and both lines' excerpts."""
    la, lb = a.split(b"\n"), b.split(b"\n")
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else b"<end of file>"
        y = lb[i] if i < len(lb) else b"<end of file>"
        if x != y:
            col = next((j for j in range(min(len(x), len(y))) if x[j] != y[j]), min(len(x), len(y)))
            return (
                f"line {i + 1} (of {len(la)} / {len(lb)}), column {col + 1}\n"
                f"      before: {excerpt(x, col)}\n      after:  {excerpt(y, col)}"
            )
    return "same lines, different bytes"


def compare_file(
    before: Tree, after: Tree, rel: Path, shared: bool, counts: dict[str, int]
) -> str | None:
    """None when identical, else what differs."""
    a, b = before.results / rel, after.results / rel
    if not a.is_file() or not b.is_file():
        side = " and ".join(t.label for t, p in ((before, a), (after, b)) if not p.is_file())
        return f"missing in {side}"
    da = normalise(a.read_bytes(), before, shared, counts)
    db = normalise(b.read_bytes(), after, shared, counts)
    return None if da == db else first_difference(da, db)


def digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder` (lock files left out), by relative path."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix != ".lock":
            out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def compare_synthetic(before: Tree, after: Tree) -> bool:
    """Compare the two trees' synthetic data folders file by file; print the result."""
    da, db = digests(before.cache / "synthetic"), digests(after.cache / "synthetic")
    differ = sorted(k for k in da.keys() | db.keys() if da.get(k) != db.get(k))
    if not da and not db:
        print("synthetic data: none built on either side")
        return True
    if not differ:
        print(f"synthetic data: identical ({len(da)} files)")
        return True
    print(f"synthetic data: DIFFERENT ({len(differ)} of {len(da.keys() | db.keys())} files):")
    for k in differ[:10]:
        state = "missing in before" if k not in da else "missing in after" if k not in db else ""
        print(f"  {k} {state}")
    return False


def resolve_after(repo: Path, after: str | None, trees: Path) -> tuple[Path, bool]:
    """The "after" checkout: the working tree, a directory given, or a rev checked out."""
    if after is None:
        return repo, False
    if Path(after).is_dir():
        return Path(after).resolve(), False
    return add_worktree(repo, after, trees / "after"), True


def main(argv: list[str] | None = None) -> int:
    """Run both trees under both profiles, compare, print the table; 0 when all identical."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="rev checked out as the reference")
    ap.add_argument("--after", default=None, help="a directory or a rev (default: this tree)")
    ap.add_argument("--keep", default=None, help="keep results, caches and logs in this folder")
    ap.add_argument("--shared-cache", action="store_true", help="one cache dir for both trees")
    args = ap.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # progress lines show while the runs go

    repo = Path(git(Path(__file__).resolve().parent, "rev-parse", "--show-toplevel"))
    work = Path(args.keep).resolve() if args.keep else Path(tempfile.mkdtemp(prefix="identical-"))
    for sub in ("trees", "caches", "results", "logs"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    start = time.perf_counter()
    try:
        before_root = add_worktree(repo, args.before, work / "trees" / "before")
        made.append(before_root)
        after_root, is_worktree = resolve_after(repo, args.after, work / "trees")
        if is_worktree:
            made.append(after_root)
        shared = work / "caches" / "shared"
        before, after = (
            Tree(label, root, shared if args.shared_cache else work / "caches" / label,
                 work / "results" / label)
            for label, root in (("before", before_root), ("after", after_root))
        )  # fmt: skip
        note = " (the working tree, uncommitted changes included)" if args.after is None else ""
        print(f"after: {after.root}{note}")
        print(f"caches: {'one, shared: ' + str(shared) if args.shared_cache else 'one per tree'}")
        for tree in (before, after):
            check_imports(tree)
            for compat in PROFILES:
                run_quick(tree, compat, work / "logs")
        ok = report(before, after, args.shared_cache)
    finally:
        for where in made:
            remove_worktree(repo, where)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(
        f"wall time: {time.perf_counter() - start:.0f} s; {'IDENTICAL' if ok else 'NOT IDENTICAL'}"
    )
    return 0 if ok else 1


def report(before: Tree, after: Tree, shared: bool) -> bool:
    """Print the comparison table (and the synthetic data check); True when all identical."""
    ok = all(code == 0 for tree in (before, after) for code in tree.runs.values())
    if not ok:
        print("a pytest run exited non-zero (see above): counted as a failure")
    counts: dict[str, int] = {}
    rows = []
    for compat in PROFILES:
        ea, eb = evaluations(before, compat), evaluations(after, compat)
        print(f"{compat}: before has {sorted(ea)}; after has {sorted(eb)}")
        both = ea & eb
        if not both:
            ok = False
            print(f"{compat}: NO evaluation compared")
        for name in sorted(ea | eb):
            for file in FILES:
                if name not in both:
                    side = "before" if name not in ea else "after"
                    diff = f"evaluation missing in {side}"
                else:
                    diff = compare_file(before, after, Path(name, compat, file), shared, counts)
                rows.append((name, compat, file, diff))
                ok = ok and diff is None
    width = max((len(r[0]) for r in rows), default=10)
    print(f"\n{'evaluation':{width}}  {'compat':7}  {'file':17}  result")
    for name, compat, file, diff in rows:
        result = "identical" if diff is None else f"DIFFERENT: {diff}"
        print(f"{name:{width}}  {compat:7}  {file:17}  {result}")
    if "<CACHE_DIR>" in counts:
        print(
            f"\nNOTE: each tree's own cache-dir path was replaced by <CACHE_DIR> before comparing "
            f"({counts['<CACHE_DIR>']} occurrences: data paths of the synthetic sample); "
            "nothing else was rewritten"
        )
    if "<TREE>" in counts:
        print(
            f"\n!!! WARNING: a tree's root path was in compared files {counts['<TREE>']} times "
            "and was replaced by <TREE>: the results depend on where the checkout lies !!!"
        )
    if not shared:
        ok = compare_synthetic(before, after) and ok
    else:
        print("synthetic data: not compared (--shared-cache: both trees used the same files)")
    return ok


if __name__ == "__main__":
    sys.exit(main())
