"""The dynamic evaluation's search, as a pure planner: round k's tasks from the rounds before it.

A search evaluates `budget` tasks in rounds of `batch`. Round 0 (the cold start) takes `batch`
random tasks; every later round draws a fresh pool of `pool` candidates, drops those already
evaluated, scores the rest with U(t) = max_E <v_t, v_e> - lam * max_H <v_t, v_h> (E: failed tasks,
H: every task tested; utility.py) and takes the top `batch`; the last round takes only what is left
of the budget. The `random` strategy takes its tasks at random from the same pools (the baseline at
the same budget). Every random choice of round k comes from one rng seeded by (seed, k), so a
resumed run plans a round exactly as the first run did, and all strategies and lambdas of one seed
see the same pools.

`rules="source"` (`--compat source`) plans as AnyPoint's evaluator at 2650ead: tasks already
evaluated stay candidates, and top-K is `np.argsort(U)[-K:][::-1]` (ties as numpy leaves them).

Task vectors embed the layout description, the question and the answer (embedder.task_vectors;
AnyPoint dynamic_evaluation/embedder.py also embeds the answer). They are cached by task key.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from support.evaluations.dynamic.assets import Asset
from support.evaluations.dynamic.embedder import Embedder, task_vectors
from support.evaluations.dynamic.questions import Task, generate
from support.evaluations.dynamic.utility import fresh, top_k, utility

STRATEGIES = ("dynamic", "random")
RULES = ("writeup", "source")
_POOL, _PICK = 0, 1  # rng streams of a round


@dataclass(frozen=True)
class SearchConfig:
    """One search: budget B, batch K, pool N, exploration weight lam, seed, strategy."""

    budget: int = 100  # tasks evaluated in all
    batch: int = 10  # tasks per round
    pool: int = 1000  # candidates drawn per round
    lam: float = 0.2  # weight of the similarity to already tested tasks
    seed: int = 42
    strategy: str = "dynamic"  # or "random"
    # "writeup": never a task twice, ties in a seeded order; "source": as AnyPoint at 2650ead
    # (evaluated tasks stay candidates; top-K is np.argsort(U)[-K:][::-1])
    rules: str = "writeup"

    def __post_init__(self) -> None:
        for name in ("budget", "batch", "pool", "seed"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"SearchConfig.{name}: expected an integer, got {value!r}")
        if self.budget < 1 or self.batch < 1:
            raise ValueError(
                f"SearchConfig: budget ({self.budget}) and batch ({self.batch}) must be >= 1"
            )
        if self.pool < self.batch:
            raise ValueError(
                f"SearchConfig.pool: {self.pool} candidates cannot fill a batch of {self.batch}"
            )
        if self.seed < 0:
            raise ValueError(f"SearchConfig.seed: expected a non-negative seed, got {self.seed}")
        if not isinstance(self.lam, int | float) or not math.isfinite(self.lam):
            raise ValueError(f"SearchConfig.lam: expected a finite number, got {self.lam!r}")
        if self.rules not in RULES:
            raise ValueError(f"SearchConfig.rules: {self.rules!r} is not one of {list(RULES)}")
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"SearchConfig.strategy: {self.strategy!r} is not one of {list(STRATEGIES)}"
            )


class Evaluated(NamedTuple):
    """What a finished task contributes to the history (a tuple: `task, is_correct = item`)."""

    task: Task
    is_correct: bool


class Search:
    """Plans the rounds of one search; holds nothing but caches (pools and vectors)."""

    def __init__(
        self,
        config: SearchConfig,
        assets: Mapping[str, Asset],
        embedder: Embedder,
        categories: Sequence[str] | None = None,
        layouts: Sequence[dict] | None = None,
    ) -> None:
        self.config = config
        self.assets = assets
        self.embedder = embedder
        self.categories = tuple(categories) if categories is not None else None
        self.layouts = layouts
        self._pools: dict[int, list[Task]] = {}  # round -> candidates (depends on seed and N)
        self._vectors: dict[str, np.ndarray] = {}  # task key -> (3d,) unit vector

    def variant(self, **changes: object) -> Search:
        """The same search with other config fields (e.g. strategy, lam); it shares the pools
        and vectors when seed and pool size are unchanged, as their candidates are the same."""
        config = dataclasses.replace(self.config, **changes)
        other = Search(config, self.assets, self.embedder, self.categories, self.layouts)
        if (config.seed, config.pool) == (self.config.seed, self.config.pool):
            other._pools = self._pools
        other._vectors = self._vectors
        return other

    def rounds(self) -> int:
        """Number of rounds: ceil(budget / batch)."""
        return -(-self.config.budget // self.config.batch)

    def _rng(self, round_index: int, stream: int) -> np.random.Generator:
        """The rng of one round: separate streams for the pool and the picks, so the picks do
        not depend on whether the pool came from the cache."""
        return np.random.default_rng([self.config.seed, round_index, stream])

    def candidates(self, round_index: int) -> list[Task]:
        """The pool of round `round_index` (the same whatever the history)."""
        if round_index not in self._pools:
            self._pools[round_index] = generate(
                self._rng(round_index, _POOL),
                self.assets,
                self.config.pool,
                categories=self.categories,
                layouts=self.layouts,
            )
        return self._pools[round_index]

    def vectors(self, tasks: Sequence[Task]) -> np.ndarray:
        """(n, 3d) task vectors, embedded once per task key."""
        missing = list({t.key: t for t in tasks if t.key not in self._vectors}.values())
        if missing:
            rows = task_vectors(
                self.embedder,
                [t.layout_description for t in missing],
                [t.question for t in missing],
                [t.answer for t in missing],
            )
            self._vectors.update(zip((t.key for t in missing), rows, strict=True))
        if not tasks:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._vectors[t.key] for t in tasks])

    def plan(
        self, round_index: int, history: Sequence[tuple[Task, bool]]
    ) -> list[tuple[Task, float | None]]:
        """The tasks of round `round_index` with their utility (None in round 0 and for the
        random strategy), best first. `history` holds every task of the earlier rounds, in any
        order, each with whether the model answered it correctly."""
        config = self.config
        if not 0 <= round_index < self.rounds():
            raise ValueError(f"round {round_index}: a search of {self.rounds()} rounds")
        done = round_index * config.batch
        if len(history) != done:
            raise ValueError(
                f"round {round_index}: history holds {len(history)} tasks, expected the {done} "
                "of the earlier rounds"
            )
        take = min(config.batch, config.budget - done)
        pool = self.candidates(round_index)
        rng = self._rng(round_index, _PICK)
        seen = {task.key for task, _ in history} if config.rules == "writeup" else set()
        open_ = [pool[i] for i in fresh([t.key for t in pool], seen)]
        if len(open_) < take:
            raise ValueError(
                f"round {round_index}: only {len(open_)} of {len(pool)} candidates are new, "
                f"{take} needed; raise SearchConfig.pool"
            )
        if round_index == 0 or config.strategy == "random":
            picks = rng.choice(len(open_), size=take, replace=False)
            return [(open_[int(i)], None) for i in picks]
        tested = [task for task, _ in history]
        failed = [task for task, ok in history if not ok]
        cand = self.vectors(open_)
        hist = self.vectors(tested)
        err = self.vectors(failed) if failed else np.zeros((0, cand.shape[1]), dtype=np.float32)
        scores = utility(cand, err, hist, config.lam)
        if (
            config.rules == "source"
        ):  # evaluator.py _select_topk: argsort, ties as numpy leaves them
            picks = [int(i) for i in np.argsort(scores)[-take:][::-1]]
        else:
            picks = top_k(scores, take, rng)
        return [(open_[i], float(scores[i])) for i in picks]
