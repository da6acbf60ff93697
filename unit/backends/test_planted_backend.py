"""The `planted:RULE` reference model (support/backends/planted.py): its registry entry, its
answers (the oracle's, or wrong ones where the rule fails a request) and `--model` parsing that
keeps a rule's commas (fixtures/model_options.py parse_models)."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

import numpy as np
import pytest

from fixtures.model_options import parse_models
from support.backends.base import BackendError
from support.backends.planted import PlantedBackend, PlantedRule
from support.backends.registry import (
    DEFAULT_MODELS,
    BackendOptions,
    check_name,
    create_backend,
    model_kind,
    model_spec,
)
from support.client.response_cache import cache_key
from support.types import Part, Request

OPTIONS = tuple(f"option {i}" for i in range(10))


@dataclass(frozen=True)
class TaskSpace:
    """A space like the dynamic evaluation's: a category, a key, and a `wrong` answer."""

    category: str
    key: str
    answer: str = "option 0"

    def sample(self, rng: np.random.Generator) -> str:
        return OPTIONS[int(rng.integers(len(OPTIONS)))]

    def wrong(self, rng: np.random.Generator) -> str:
        others = [o for o in OPTIONS if o != self.answer]
        return others[int(rng.integers(len(others)))]


@dataclass(frozen=True)
class SampleSpace:
    """Only `sample`, no category or key (like the existing evaluations' spaces)."""

    choices: tuple[str, ...] = OPTIONS

    def sample(self, rng: np.random.Generator) -> str:
        return self.choices[int(rng.integers(len(self.choices)))]


def request(text: str = "q", *, target: str | None = "option 0", space=None, n: int = 1) -> Request:
    return Request(parts=(Part.of_text(text),), target=target, answer_space=space, n=n)


def task(i: int, category: str = "where_distance_closest", **kw) -> Request:
    return request(f"question {i}", space=TaskSpace(category, f"key-{i}"), **kw)


def answers(backend: PlantedBackend, req: Request) -> tuple[str, ...]:
    return asyncio.run(backend.generate(req)).texts


def planted(rule: str, seed: int = 0) -> PlantedBackend:
    return PlantedBackend(f"planted:{rule}", rule, seed=seed)


# -- the registry ---------------------------------------------------------------------------------


def test_planted_names_are_reference_models():
    assert model_kind("planted:x") == "reference"
    spec = model_spec("planted:where_distance=0.9,*=0.05")
    assert (spec.kind, spec.provider, spec.model_id) == (
        "reference",
        "planted",
        "where_distance=0.9,*=0.05",
    )


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("planted:where=2", r"'planted:where=2'.*part 'where=2': rate 2.0 is not within"),
        ("planted:a=0.5,,b", r"'planted:a=0.5,,b'.*part '' has no category pattern"),
        ("planted:*=often", r"part '\*=often': rate 'often' is not a number"),
    ],
)
def test_a_bad_rule_is_refused_when_the_name_is_checked(name, message):
    with pytest.raises(ValueError, match=message):
        check_name(name)
    with pytest.raises(ValueError, match=message):
        model_kind(name)


def test_create_backend_builds_with_the_session_seed():
    backend = create_backend("planted:where_distance=0.9, *=0.05", BackendOptions(seed=7))
    assert isinstance(backend, PlantedBackend)
    assert backend.name == "planted:where_distance=0.9, *=0.05"  # as written on the command line
    assert backend.reads_hints and backend.default_concurrency == 64
    assert backend.identity == {
        "provider": "reference",
        "model": "planted",
        "rule": "where_distance=0.9,*=0.05",  # canonical: spaces gone, rates written out
        "seed": 7,
        "version": "1",
    }


# -- answers --------------------------------------------------------------------------------------


def test_rate_one_fails_every_request_of_the_category_and_only_those():
    backend = planted("where_distance")
    for i in range(50):
        wrong = answers(backend, task(i, n=3))
        assert len(wrong) == 3 and all(a in OPTIONS and a != "option 0" for a in wrong)
        assert answers(backend, task(i, category="what_size_")) == ("option 0",)


def test_rate_zero_is_the_oracle():
    backend = planted("where_distance=0,*=0.0")
    for i in range(50):
        assert answers(backend, task(i, n=2)) == ("option 0", "option 0")


def test_usage_is_zero_and_the_response_names_the_model():
    response = asyncio.run(planted("*").generate(task(0)))
    assert response.model == "planted:*"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (0, 0)


def test_failure_rate_within_three_sigma():
    backend, n, rate = planted("where_distance=0.3"), 2000, 0.3
    failures = sum(answers(backend, task(i)) != ("option 0",) for i in range(n))
    assert abs(failures - n * rate) < 3 * math.sqrt(n * rate * (1 - rate))


def test_the_space_key_decides_not_the_prompt():
    # same key under another prompt: the same failure; failures are exactly the rule's draws
    backend, rule = planted("*=0.5", seed=4), PlantedRule.parse("*=0.5")
    for i in range(200):
        space = TaskSpace("what_size_", f"key-{i}")
        failed = answers(backend, request(f"prompt {i}", space=space)) != ("option 0",)
        assert failed == rule.fails("what_size_", f"key-{i}", seed=4)
        other = request(f"another wording {i}", space=space)
        assert (answers(backend, other) != ("option 0",)) == failed


def test_without_a_key_the_request_digest_decides():
    backend, rule = planted("*=0.5", seed=2), PlantedRule.parse("*=0.5")
    for i in range(200):
        req = request(f"prompt {i}", space=SampleSpace())
        failed = answers(backend, req) != ("option 0",)
        assert failed == rule.fails("", req.digest(with_hints=True), seed=2)


def test_same_request_same_answers_in_fresh_backends():
    reqs = [task(i, n=4) for i in range(100)] + [
        request(f"p{i}", space=SampleSpace(), n=4) for i in range(100)
    ]
    first = [answers(planted("*=0.5", seed=1), r) for r in reqs]
    assert first == [answers(planted("*=0.5", seed=1), r) for r in reqs]
    wrong = [a for a in first if a[0] != "option 0"]
    assert len({a for answer in wrong for a in answer}) > 3  # wrong answers vary ...
    assert any(len(set(a)) > 1 for a in wrong)  # ... with the sample index too


def test_another_seed_fails_other_requests():
    reqs = [task(i) for i in range(400)]
    one = [answers(planted("*=0.5", seed=1), r) != ("option 0",) for r in reqs]
    two = [answers(planted("*=0.5", seed=2), r) != ("option 0",) for r in reqs]
    assert one != two  # 400 fair coins: never all equal


def test_identity_separates_rules_and_seeds_in_the_cache():
    req = task(0)
    backends = [planted("where=0.9,*=0.05"), planted("where=0.9,*=0.1"), planted("*", seed=1)]
    backends.append(planted("*", seed=2))
    keys = {cache_key(b.identity, req, with_hints=True) for b in backends}
    assert len(keys) == len(backends)
    # one rule written two ways is one model: the same cached answers
    assert planted("where").identity == planted(" where = 1 ").identity


def test_star_fails_requests_without_a_category_and_prefixes_do_not():
    for i in range(30):
        req = request(f"p{i}", space=SampleSpace())
        assert answers(planted("*"), req)[0] != "option 0"
        assert answers(planted("where,what"), req) == ("option 0",)


def test_sample_only_spaces_answer_a_text_other_than_the_target():
    # the compare is stripped and case-insensitive: " OPTION 0" is the target, never a wrong answer
    space = SampleSpace(("option 0", "OPTION 0 ", "option 1"))
    for i in range(40):
        assert answers(planted("*"), request(f"p{i}", target=" Option 0", space=space)) == (
            "option 1",
        )


def test_no_wrong_answer_to_draw_is_an_empty_answer():
    only_target = SampleSpace(("option 0", "Option 0"))
    assert answers(planted("*"), request(space=only_target, n=2)) == ("", "")
    assert answers(planted("*"), request(space=None)) == ("",)
    assert answers(planted("where"), request(space=None)) == ("option 0",)  # not failed


def test_no_target_is_a_backend_error():
    with pytest.raises(BackendError, match=r"planted:\*: .*no target"):
        answers(planted("*"), request(target=None, space=SampleSpace()))


# -- --model parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "names"),
    [
        (
            ["oracle,planted:where_distance=0.9,*=0.05,chance"],
            ("oracle", "planted:where_distance=0.9,*=0.05", "chance"),
        ),
        (["planted:where=0.9, *=0.05"], ("planted:where=0.9,*=0.05",)),
        (["planted:a,*_size_=0.3,what*"], ("planted:a,*_size_=0.3,what*",)),
        (["planted:a,b"], ("planted:a", "b")),  # a bare second part is a model name
        (["planted:a=1,scripted:m:f"], ("planted:a=1", "scripted:m:f")),  # ':' starts a name
        (["oracle,x=1"], ("oracle", "x=1")),  # glued only after a planted: name
        (["planted:a", "*=0.1"], ("planted:a", "*=0.1")),  # never across --model values
        (["chance,oracle", "chance", "planted:*", "planted:*"], ("chance", "oracle", "planted:*")),
        ([], DEFAULT_MODELS),
        ([" , "], DEFAULT_MODELS),
    ],
)
def test_parse_models_keeps_planted_rules_whole(values, names):
    assert parse_models(values) == names
