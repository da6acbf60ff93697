"""The garbage collector told what is permanent (`freeze_permanent`).

A run's objects fall in two kinds. What start-up and collection build (the suite's and the
libraries' modules, the evaluations' data, the cases, pytest's items) lives until the process
ends; what a case makes (requests, responses, outcomes) is garbage soon after. CPython's full
collections walk both, and an API run makes enough garbage for several of them: each walks every
permanent object again (benchmarks/README.md has the measurement). `freeze_permanent` collects
once, so nothing unreachable is kept, then moves every object that is left to the permanent
generation, which later collections skip. Objects made after it are collected as always; frozen
ones still die when their last reference goes (reference counting is untouched); only a cycle
among frozen objects that is broken later stays until the process exits.

Called after collection (fixtures.permanent_heap) and after the report modules are imported
(reports.plugin).
"""

from __future__ import annotations

import gc


def freeze_permanent() -> int:
    """Collect the garbage there is, then freeze what is left; the number of objects frozen in
    all (gc.get_freeze_count())."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
