"""fixtures.process_exit: the interpreter's exit collections skipped, registered once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Run in a child: the hook acts at interpreter exit. A probe registered first runs last (atexit is
# last-in first-out), so it sees what the registered hook left. Objects in a reference cycle with
# a __del__ are collected at exit unless the hook froze them first.
CHILD = """
import atexit, gc, sys
gc.disable()
atexit.register(lambda: print("frozen", gc.get_freeze_count() > 0, flush=True))

class Cyclic:
    def __del__(self):
        print("collected", flush=True)

a, b = Cyclic(), Cyclic()
a.other, b.other = b, a
del a, b
if "--install" in sys.argv:
    import fixtures.process_exit as m
    m.pytest_configure(None)
    m.pytest_configure(None)  # a second configure in one process registers nothing more
    print("registered", m._registered, flush=True)
"""


def run_child(*args: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("\n")


def test_the_exit_hook_freezes_what_is_left():
    out = run_child("--install")
    assert "registered True" in out
    assert "frozen True" in out
    assert "collected" not in out  # the exit collections found nothing to walk


def test_without_the_hook_exit_collects_cycles():
    """The control: the same child without the hook collects the cycle at exit (so the test
    above would fail if the hook did nothing)."""
    out = run_child()
    assert "frozen False" in out
    assert "collected" in out
