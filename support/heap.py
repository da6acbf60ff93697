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

`RUN_THRESHOLDS` are the collector's thresholds for a run: a young collection every 20,000 net
allocations instead of CPython's 700. An API run allocates many short-lived objects a request
(bodies, responses, pytest's reports), nearly all freed by reference counting; at 700 the
collector ran ~830 young and ~75 middle collections in a 1,080-request run for ~0.25 s of CPU;
with these thresholds from configure on, ~200 and 17 (most of them while the process starts)
for ~0.09 s (benchmarks/README.md). What waits longer for collection is cyclic garbage, at
most 20,000 objects.
"""

from __future__ import annotations

import gc

# (young, middle, old) as gc.set_threshold takes them: see the module docstring
RUN_THRESHOLDS = (20_000, 20, 10)


def freeze_permanent() -> int:
    """Collect the garbage there is, then freeze what is left; the number of objects frozen in
    all (gc.get_freeze_count())."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
