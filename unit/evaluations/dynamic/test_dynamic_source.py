"""`--compat source` in the dynamic evaluation: the planner's rules as AnyPoint's evaluator at
2650ead (dynamic_evaluation/evaluator.py). The prompt and parser rules are in
unit/evaluations/dynamic/test_dynamic_prompts.py."""

from __future__ import annotations

import numpy as np
import pytest
from test_dynamic_search import BagOfWords, small

from support.evaluations.dynamic.assets import Asset, ensure_assets, read_assets
from support.evaluations.dynamic.search import Evaluated, Search
from support.evaluations.dynamic.utility import utility


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Asset]:
    return read_assets(ensure_assets(tmp_path_factory.mktemp("dyn-assets")))


def test_source_plans_a_failed_task_again(assets) -> None:
    # evaluator.py _iterate: a fresh pool each round, never checked against H, so a candidate
    # equal to a failed task (U = 1 at lambda 0) is evaluated again; writeup drops it
    history = None
    for rules in ("writeup", "source"):
        search = Search(small(lam=0.0, rules=rules), assets, BagOfWords())
        history = [Evaluated(t, False) for t in search.candidates(1)[:10]]
        picked = {t.key for t, _ in search.plan(1, history)}
        again = picked & {e.task.key for e in history}
        assert (len(again) == 10) if rules == "source" else not again, rules


def test_source_top_k_is_argsort_from_the_end(assets) -> None:
    # evaluator.py _select_topk: top_idx = np.argsort(scores)[-k:][::-1]; here every utility is
    # 0 (lambda 0, no error yet), so the order is numpy's for ties, not a seeded draw
    search = Search(small(lam=0.0, rules="source"), assets, BagOfWords())
    history = [Evaluated(t, True) for t, _ in search.plan(0, [])]
    pool = search.candidates(1)
    cand = search.vectors(pool)
    scores = utility(
        cand, np.zeros((0, cand.shape[1])), search.vectors([e.task for e in history]), 0
    )
    assert not scores.any()
    expected = [pool[i].key for i in np.argsort(scores)[-10:][::-1]]
    assert [t.key for t, _ in search.plan(1, history)] == expected
    writeup = Search(small(lam=0.0), assets, BagOfWords())
    assert [t.key for t, _ in writeup.plan(1, history)] != expected  # seeded tie order


def test_rules_must_be_a_profile() -> None:
    with pytest.raises(ValueError, match=r"SearchConfig\.rules: 'paper'"):
        small(rules="paper")
