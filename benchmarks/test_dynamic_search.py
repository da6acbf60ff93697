"""Does the dynamic search find more planted failures than random sampling at the same budget?

    pytest benchmarks/test_dynamic_search.py --benchmark-only -s -p no:randomly

The model is the planted rule (planted.py), not a pytest case: no rendering, no backend. B=100,
K=10, N=1000 over seeds 42..51; strategies `random` and `dynamic` with lambda 0, 0.2 and 1; all of
one seed plan from the same pools (Search.variant). Target (issue 13): with `where_distance=0.9,
*=0.05`, lambda=0 finds at least twice as many errors as random on average. A pool holds all 19
categories (questions.CATEGORIES, the default): generate gives each 52 of N=1000 and the first 12
one more, so where_distance_closest and _farthest are 106 of 1000 and random expects
B * (0.106 * 0.9 + 0.894 * 0.05) = 14.0 errors (`random_expectation`, printed; 26.3 with the 8
categories before). Null control: with
`*=0.3` (failures spread at random, nothing to learn) every dynamic mean is within 3 standard errors
of the random one.

Embedder: the default here is a hashed bag of word uni- and bigrams (scikit-learn's
HashingVectorizer), because the suite's ONNX MiniLM embeds ~10-15 ms a text on this 2-core box and
each pool of 1,000 candidates holds ~1,000 new layout descriptions: ~14 s a round, ~25 min for the
whole benchmark. DYNAMIC_BENCH_EMBEDDER=minilm-int8 (any load_embedder spec) runs it with a real
model; DYNAMIC_BENCH_SEEDS=3 takes fewer seeds.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence

import numpy as np
import pytest

from support.evaluations.dynamic.assets import ensure_assets, read_assets
from support.evaluations.dynamic.embedder import load_embedder
from support.evaluations.dynamic.planted import PlantedRule
from support.evaluations.dynamic.questions import CATEGORIES
from support.evaluations.dynamic.search import Evaluated, Search, SearchConfig

PLANTED = "where_distance=0.9,*=0.05"
NULL = "*=0.3"
SEEDS = range(42, 42 + int(os.environ.get("DYNAMIC_BENCH_SEEDS", "10")))
VARIANTS = {  # label -> config changes
    "random": {"strategy": "random"},
    "lambda=0": {"lam": 0.0},
    "lambda=0.2": {"lam": 0.2},
    "lambda=1": {"lam": 1.0},
}


class HashingEmbedder:
    """Word uni/bigram counts hashed into 512 buckets, L2-normalised (scikit-learn)."""

    name = "hashing-512"

    def __init__(self) -> None:
        from sklearn.feature_extraction.text import HashingVectorizer

        self._vectorizer = HashingVectorizer(
            n_features=512, ngram_range=(1, 2), alternate_sign=False, norm="l2"
        )

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectorizer.transform(list(texts)).toarray().astype(np.float32)


def random_expectation(rule: PlantedRule, budget: int = 100, pool: int = 1000) -> float:
    """Errors random sampling expects in `budget` picks: each category's share of a pool (as
    generate splits it: equal shares, the first categories taking the remainder) times its rate."""
    base, extra = divmod(pool, len(CATEGORIES))
    shares = [(base + (i < extra)) / pool for i in range(len(CATEGORIES))]
    return budget * sum(p * rule.rate(c) for p, c in zip(shares, CATEGORIES, strict=True))


def errors_found(search: Search, rule: PlantedRule) -> int:
    """Failures met by one whole search, the rule answering (its seed = the search's seed)."""
    history: list[Evaluated] = []
    for k in range(search.rounds()):
        for task, _ in search.plan(k, history):
            history.append(
                Evaluated(task, not rule.fails(task.category, task.key, search.config.seed))
            )
    assert len(history) == search.config.budget
    return sum(not e.is_correct for e in history)


def simulate(assets, embedder) -> dict[str, dict[str, list[int]]]:
    """rule -> variant label -> errors found per seed."""
    rules = {PLANTED: PlantedRule.parse(PLANTED), NULL: PlantedRule.parse(NULL)}
    found: dict[str, dict[str, list[int]]] = {r: {v: [] for v in VARIANTS} for r in rules}
    for seed in SEEDS:
        base = Search(SearchConfig(seed=seed), assets, embedder)  # this seed's pools and vectors
        for label, changes in VARIANTS.items():
            search = base.variant(**changes)
            for text, rule in rules.items():
                found[text][label].append(errors_found(search, rule))
    return found


def _mean_se(values: list[int]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) / len(values) ** 0.5


def _table(rule: str, rows: dict[str, list[int]]) -> None:
    seeds = f"{SEEDS.start}..{SEEDS.stop - 1}"
    print(f"\nrule {rule!r}: errors found in B=100 (K=10, N=1000), seeds {seeds}")
    print(f"  random's expectation {random_expectation(PlantedRule.parse(rule)):.1f}")
    for label, values in rows.items():
        mean, se = _mean_se(values)
        spread = f"range {min(values)}-{max(values)}"
        print(f"  {label:<11} mean {mean:5.1f} (se {se:3.1f}) {spread}  {values}")


def test_dynamic_search_finds_planted_failures(benchmark, tmp_path_factory) -> None:
    assets = read_assets(ensure_assets(tmp_path_factory.mktemp("dyn-assets")))
    spec = os.environ.get("DYNAMIC_BENCH_EMBEDDER")
    if not spec:
        pytest.importorskip("sklearn", reason="the default benchmark embedder needs scikit-learn")
    embedder = load_embedder(spec) if spec else HashingEmbedder()
    start = time.perf_counter()
    found = benchmark.pedantic(simulate, args=(assets, embedder), rounds=1, iterations=1)
    wall = time.perf_counter() - start
    print(
        f"\nembedder {embedder.name}; wall time {wall:.1f} s for {len(SEEDS)} seeds x "
        f"{len(VARIANTS)} strategies x 2 rules"
    )
    for rule, rows in found.items():
        _table(rule, rows)
    benchmark.extra_info.update({"embedder": embedder.name, "wall_s": wall, "found": found})

    planted = found[PLANTED]
    assert statistics.fmean(planted["lambda=0"]) >= 2 * statistics.fmean(planted["random"])

    null = found[NULL]
    base_mean, base_se = _mean_se(null["random"])
    for label in ("lambda=0", "lambda=0.2", "lambda=1"):
        mean, se = _mean_se(null[label])
        assert abs(mean - base_mean) < 3 * (base_se**2 + se**2) ** 0.5, (label, mean, base_mean)


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "--benchmark-only", "-s", "-p", "no:randomly"])
