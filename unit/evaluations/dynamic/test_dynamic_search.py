"""The dynamic search planner (support/evaluations/dynamic/search.py) and the planted-failure
rule."""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from support.evaluations.dynamic.assets import Asset, ensure_assets, read_assets
from support.evaluations.dynamic.planted import PlantedRule, planted_answer
from support.evaluations.dynamic.questions import Task
from support.evaluations.dynamic.search import Evaluated, Search, SearchConfig
from support.evaluations.dynamic.utility import utility

WHERE_DISTANCE = "where_distance=1.0,*=0.0"


class BagOfWords:
    """A tiny deterministic embedder for the tests: hashed word counts, unit rows (the real
    ONNX model embeds ~10 ms a text; the planner only needs some fixed map to unit vectors)."""

    name = "bag-of-words"
    dimension = 64

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace("?", " ").replace(".", " ").split():
                bucket = int(hashlib.sha1(word.encode()).hexdigest(), 16) % self.dimension
                rows[i, bucket] += 1.0
        rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
        return rows


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Asset]:
    return read_assets(ensure_assets(tmp_path_factory.mktemp("dyn-assets")))


def run_search(search: Search, rule: PlantedRule) -> list[list[tuple[Task, float | None]]]:
    """Every round's plan, the planted rule answering (seed = the search's seed)."""
    history: list[Evaluated] = []
    plans = []
    for k in range(search.rounds()):
        plan = search.plan(k, history)
        plans.append(plan)
        history += [
            Evaluated(t, not rule.fails(t.category, t.key, search.config.seed)) for t, _ in plan
        ]
    return plans


def small(**changes: object) -> SearchConfig:
    values: dict = {"budget": 40, "batch": 10, "pool": 80, "lam": 0.2, "seed": 3}
    values.update(changes)
    return SearchConfig(**values)


# --- SearchConfig -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"budget": 0}, "budget"),
        ({"batch": 0}, "batch"),
        ({"pool": 5, "batch": 10}, "pool"),
        ({"lam": float("nan")}, "lam"),
        ({"strategy": "greedy"}, "strategy"),
        ({"seed": -1}, "seed"),
        ({"budget": 10.5}, "budget"),
    ],
)
def test_config_rejects_bad_values_naming_the_field(changes: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SearchConfig(**changes)


def test_defaults_are_the_write_ups() -> None:
    # issue 13 "The algorithm": B=100, K=10, N=1000, lambda=0.2, seed 42
    config = SearchConfig()
    assert (config.budget, config.batch, config.pool, config.lam, config.seed) == (
        100,
        10,
        1000,
        0.2,
        42,
    )


@pytest.mark.parametrize(("budget", "batch", "rounds"), [(100, 10, 10), (25, 10, 3), (7, 10, 1)])
def test_rounds_is_ceil_budget_over_batch(assets, budget: int, batch: int, rounds: int) -> None:
    config = SearchConfig(budget=budget, batch=batch, pool=max(batch, 20))
    assert Search(config, assets, BagOfWords()).rounds() == rounds


# --- budget accounting ----------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["dynamic", "random"])
@pytest.mark.parametrize("budget", [40, 25])
def test_exactly_budget_distinct_tasks_and_utility_only_after_the_cold_start(
    assets, strategy: str, budget: int
) -> None:
    search = Search(small(budget=budget, strategy=strategy), assets, BagOfWords())
    plans = run_search(search, PlantedRule.parse(WHERE_DISTANCE))
    sizes = [len(p) for p in plans]
    assert sizes == [10] * (budget // 10) + ([budget % 10] if budget % 10 else [])
    keys = [t.key for plan in plans for t, _ in plan]
    assert len(keys) == budget and len(set(keys)) == budget  # never a task twice
    assert all(u is None for _, u in plans[0])
    for plan in plans[1:]:
        if strategy == "dynamic":
            assert all(isinstance(u, float) for _, u in plan)
            utilities = [u for _, u in plan]
            assert utilities == sorted(utilities, reverse=True)  # best first
        else:
            assert all(u is None for _, u in plan)


def test_both_strategies_share_the_cold_start(assets) -> None:
    dynamic = Search(small(), assets, BagOfWords()).plan(0, [])
    rand = Search(small(strategy="random"), assets, BagOfWords()).plan(0, [])
    assert [t.key for t, _ in dynamic] == [t.key for t, _ in rand]
    other_seed = Search(small(seed=4), assets, BagOfWords()).plan(0, [])
    assert [t.key for t, _ in other_seed] != [t.key for t, _ in dynamic]


def test_history_of_the_wrong_size_or_a_round_out_of_range_is_an_error(assets) -> None:
    search = Search(small(), assets, BagOfWords())
    first = [Evaluated(t, True) for t, _ in search.plan(0, [])]
    with pytest.raises(ValueError, match="history holds 9 tasks, expected the 10"):
        search.plan(1, first[:9])
    with pytest.raises(ValueError, match="round 4: a search of 4 rounds"):
        search.plan(4, first * 4)
    with pytest.raises(ValueError, match="round -1"):
        search.plan(-1, [])


def test_tasks_already_evaluated_are_never_planned_again(assets) -> None:
    # a history holding tasks of this very round's pool, all failed: with lam=0 they would score
    # 1.0 (a candidate equal to an error) and win, unless already-evaluated tasks are dropped
    search = Search(small(lam=0.0), assets, BagOfWords())
    history = [Evaluated(t, False) for t in search.candidates(1)[:10]]
    plan = search.plan(1, history)
    assert len(plan) == 10
    assert not {t.key for t, _ in plan} & {e.task.key for e in history}
    assert all(u < 1.0 - 1e-9 for _, u in plan)


def test_too_few_new_candidates_is_an_error(assets) -> None:
    search = Search(small(pool=10, budget=20), assets, BagOfWords())
    history = [Evaluated(t, True) for t in search.candidates(1)]  # the whole pool of round 1
    with pytest.raises(ValueError, match="only 0 of 10 candidates are new"):
        search.plan(1, history)


# --- determinism (a resumed run plans every round as the first run did) ------------------------


def test_same_config_and_history_give_identical_plans(assets) -> None:
    rule = PlantedRule.parse("where_*=0.8,*=0.1")
    first = run_search(Search(small(), assets, BagOfWords()), rule)
    fresh = Search(small(), assets, BagOfWords())  # no cached pools or vectors
    history: list[Evaluated] = []
    for k, plan in enumerate(first):
        again = fresh.plan(k, history)
        assert [(t.key, u) for t, u in again] == [(t.key, u) for t, u in plan]
        history += [Evaluated(t, not rule.fails(t.category, t.key, 3)) for t, _ in plan]
    # the history is a set: its order does not change a plan
    shuffled = history[:30]
    random.Random(0).shuffle(shuffled)
    late = Search(small(), assets, BagOfWords()).plan(3, shuffled)
    assert [(t.key, u) for t, u in late] == [(t.key, u) for t, u in first[3]]


def test_a_variant_shares_pools_but_plans_as_a_fresh_search(assets) -> None:
    rule = PlantedRule.parse(WHERE_DISTANCE)
    base = Search(small(), assets, BagOfWords())
    run_search(base, rule)  # fills the caches
    for changes in ({"lam": 0.0}, {"strategy": "random"}, {"lam": 1.0}):
        shared = run_search(base.variant(**changes), rule)
        alone = run_search(Search(small(**changes), assets, BagOfWords()), rule)
        assert [[(t.key, u) for t, u in p] for p in shared] == [
            [(t.key, u) for t, u in p] for p in alone
        ]


# --- the dynamic choice follows the utility ---------------------------------------------------


@pytest.mark.parametrize("lam", [0.0, 0.2, 1.0])
def test_picks_are_the_top_utilities_of_the_new_candidates(assets, lam: float) -> None:
    rule = PlantedRule.parse(WHERE_DISTANCE)
    search = Search(small(lam=lam), assets, BagOfWords())
    history: list[Evaluated] = []
    for k in range(2):
        plan = search.plan(k, history)
        history += [Evaluated(t, not rule.fails(t.category, t.key, 3)) for t, _ in plan]
    plan = search.plan(2, history)
    seen = {e.task.key for e in history}
    open_ = [t for t in search.candidates(2) if t.key not in seen]
    failed = [e.task for e in history if not e.is_correct]
    assert failed, "the cold start should have met a where_distance task; change the seed"
    scores = utility(
        search.vectors(open_),
        search.vectors(failed),
        search.vectors([e.task for e in history]),
        lam,
    )
    by_key = dict(zip((t.key for t in open_), scores, strict=True))
    picked = {t.key for t, _ in plan}
    for task, u in plan:
        assert u == pytest.approx(by_key[task.key])
    worst_pick = min(u for _, u in plan)
    assert all(s <= worst_pick + 1e-12 for key, s in by_key.items() if key not in picked)


def test_lambda_zero_chases_the_failing_category(assets) -> None:
    # a model failing only where_distance_*: after the cold start, most picks are of that kind
    rule = PlantedRule.parse(WHERE_DISTANCE)
    dynamic = run_search(Search(small(lam=0.0, budget=60), assets, BagOfWords()), rule)
    rand = run_search(Search(small(budget=60, strategy="random"), assets, BagOfWords()), rule)

    def hits(plans: list) -> int:
        return sum(t.category.startswith("where_distance") for p in plans[1:] for t, _ in p)

    assert hits(dynamic) >= 35  # of 50 picks after the cold start (random: about 5)
    assert hits(dynamic) > 2 * hits(rand)


# --- the planted rule ---------------------------------------------------------------------------


def test_parse_forms() -> None:
    assert PlantedRule.parse("where_distance").rates == (("where_distance", 1.0),)
    assert PlantedRule.parse("where_distance=0.9, *=0.05").rates == (
        ("where_distance", 0.9),
        ("*", 0.05),
    )
    assert PlantedRule.parse("what_*_closest=0").rates == (("what_*_closest", 0.0),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty rule"),
        ("  ", "empty rule"),
        ("=0.5", "part '=0.5' has no category pattern"),
        ("where_size=often", "rate 'often' is not a number"),
        ("a=0.5,,b", "part '' has no category pattern"),
        ("*=1.5", r"part '\*=1.5': rate 1.5 is not within \[0, 1\]"),
        ("*=-0.1", "not within"),
        ("*=nan", "not within"),
    ],
)
def test_parse_errors_name_the_part(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PlantedRule.parse(text)


def test_first_match_wins_and_bare_patterns_are_prefixes() -> None:
    rule = PlantedRule.parse("where_distance=0.9,where_*=0.5,*_size_=0.3,count=0.2")
    assert rule.rate("where_distance_closest") == 0.9
    assert rule.rate("where_distance_farthest") == 0.9
    assert rule.rate("where_size_") == 0.5  # where_* before *_size_
    assert rule.rate("what_size_") == 0.3
    assert rule.rate("count_object_") == 0.2  # prefix
    assert rule.rate("what_attribute_") == 0.0  # no match: never failed
    assert (
        PlantedRule.parse("*_closest").rate("what_distance_farthest") == 0.0
    )  # a '*' pattern is whole


def test_rates_one_and_zero_are_certain() -> None:
    keys = [f"task-{i}" for i in range(500)]
    always = PlantedRule.parse("where_distance")
    never = PlantedRule.parse("where_distance=0.0")
    assert all(always.fails("where_distance_closest", k) for k in keys)
    assert not any(always.fails("what_size_", k) for k in keys)
    assert not any(never.fails("where_distance_closest", k) for k in keys)


@pytest.mark.parametrize("rate", [0.05, 0.3, 0.9])
def test_empirical_failure_rate_within_three_sigma(rate: float) -> None:
    rule = PlantedRule.parse(f"*={rate}")
    n = 2000
    failures = sum(rule.fails("what_size_", f"key-{i}", seed=7) for i in range(n))
    sigma = math.sqrt(n * rate * (1 - rate))
    assert abs(failures - n * rate) < 3 * sigma


def test_failures_are_deterministic_per_seed_and_key() -> None:
    rule = PlantedRule.parse("*=0.5")
    keys = [f"k{i}" for i in range(400)]
    first = [rule.fails("what_size_", k, seed=1) for k in keys]
    assert first == [PlantedRule.parse("*=0.5").fails("what_size_", k, seed=1) for k in keys]
    other = [rule.fails("what_size_", k, seed=2) for k in keys]
    assert first != other  # another seed, other failures (400 fair coins: never all equal)


def _task(key: str, category: str = "where_distance_closest") -> Task:
    options = ("to the left of", "behind", "in front of", "to the right of")
    return Task(
        key=key,
        category=category,
        question="Where is the object that is closest from the mug?",
        options=options,
        answer="behind",
        layout={"id": "x", "description": "", "objects": [], "relations": []},
        assignment={},
        layout_description="",
    )


def test_planted_answer_is_right_or_a_wrong_option() -> None:
    rule = PlantedRule.parse("where_distance")
    wrong = [planted_answer(_task(f"t{i}"), rule, seed=0) for i in range(60)]
    assert all(a in _task("x").options and a != "behind" for a in wrong)
    assert len(set(wrong)) == 3  # the wrong option varies with the key
    assert wrong == [planted_answer(_task(f"t{i}"), rule, seed=0) for i in range(60)]
    assert planted_answer(_task("t0", "what_size_"), rule) == "behind"  # not failed: correct


def test_planted_answer_without_a_wrong_option_is_still_wrong() -> None:
    task = _task("solo")
    lonely = Task(**{**task.__dict__, "options": ("behind",)})
    assert planted_answer(lonely, PlantedRule.parse("*")) not in lonely.options


def test_search_on_real_tasks_with_planted_model(tmp_path: Path, assets) -> None:
    # the planted answer agrees with fails(): wrong exactly on the failed tasks
    rule = PlantedRule.parse("where_distance=0.9,*=0.05")
    search = Search(small(), assets, BagOfWords())
    tasks = search.candidates(0)
    for task in tasks:
        right = planted_answer(task, rule, seed=3) == task.answer
        assert right == (not rule.fails(task.category, task.key, seed=3))
