"""cache_key, the response cache's content address (support/client/response_cache.py docstring):
sha256 of the schema version, the model identity and the canonical request. Every field that
determines the answer changes the key; the offline models' hints (target, answer_space) change it
only with `with_hints`; how the identity mapping is built (its order, its type) never does, so a
cache written by one run is read by the next."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

from support.client import response_cache as cache_module
from support.client.response_cache import cache_key
from support.types import Part, Request

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24  # the bytes are hashed, never decoded
IDENTITY = {"provider": "openai", "model": "gpt-x", "endpoint": "https://api.example/v1"}


@dataclasses.dataclass(frozen=True)
class Choices:
    """A stand-in answer space: cache_key reads only its repr."""

    options: tuple[str, ...]

    def sample(self, rng: np.random.Generator) -> str:
        return self.options[int(rng.integers(len(self.options)))]


REQUEST = Request(
    parts=(Part.of_text("Organ: Liver"), Part(image=PNG, mime="image/png")),
    system="be brief",
    prefill="Answer:",
    temperature=0.0,
    max_tokens=20,
    n=1,
    seed=7,
    target="real",
    answer_space=Choices(("real", "fake")),
)


def by_hand(identity: dict[str, Any], request: Request, with_hints: bool) -> str:
    """The key as the cache docstring defines it, written out without support.types."""
    parts = [
        {"text": p.text}
        if p.image is None
        else {"image_sha256": hashlib.sha256(p.image).hexdigest(), "mime": p.mime}
        for p in request.parts
    ]
    req: dict[str, Any] = {
        "system": request.system,
        "parts": parts,
        "prefill": request.prefill,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "n": request.n,
        "seed": request.seed,
    }
    if with_hints:
        req["target"] = request.target
        req["answer_space"] = repr(request.answer_space)
    material = {"v": cache_module.SCHEMA_VERSION, "model": identity, "request": req}
    text = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.parametrize("with_hints", [False, True])
def test_the_key_is_the_sha256_of_version_identity_and_request(with_hints: bool) -> None:
    # a changed layout (a renamed field, a dropped version) would orphan every stored answer
    assert cache_key(IDENTITY, REQUEST, with_hints=with_hints) == by_hand(
        IDENTITY, REQUEST, with_hints
    )


def test_hints_are_left_out_by_default() -> None:
    assert cache_key(IDENTITY, REQUEST) == by_hand(IDENTITY, REQUEST, with_hints=False)
    assert cache_key(IDENTITY, REQUEST) != cache_key(IDENTITY, REQUEST, with_hints=True)


# every field of the request that determines the answer, changed one at a time
CHANGED_REQUESTS = {
    "system": dataclasses.replace(REQUEST, system="be thorough"),
    "no system": dataclasses.replace(REQUEST, system=None),
    "text part": dataclasses.replace(
        REQUEST, parts=(Part.of_text("Organ: Kidney"), REQUEST.parts[1])
    ),
    "image bytes": dataclasses.replace(
        REQUEST, parts=(REQUEST.parts[0], Part(image=PNG + b"\x01", mime="image/png"))
    ),
    "image mime": dataclasses.replace(
        REQUEST, parts=(REQUEST.parts[0], Part(image=PNG, mime="image/jpeg"))
    ),
    "part order": dataclasses.replace(REQUEST, parts=REQUEST.parts[::-1]),
    "one part fewer": dataclasses.replace(REQUEST, parts=REQUEST.parts[:1]),
    "prefill": dataclasses.replace(REQUEST, prefill=None),
    "temperature": dataclasses.replace(REQUEST, temperature=0.7),
    "max_tokens": dataclasses.replace(REQUEST, max_tokens=21),
    "n": dataclasses.replace(REQUEST, n=2),
    "seed": dataclasses.replace(REQUEST, seed=8),
    "no seed": dataclasses.replace(REQUEST, seed=None),
}


@pytest.mark.parametrize("with_hints", [False, True])
@pytest.mark.parametrize("field", list(CHANGED_REQUESTS))
def test_each_field_of_the_request_changes_the_key(field: str, with_hints: bool) -> None:
    other = CHANGED_REQUESTS[field]
    assert cache_key(IDENTITY, other, with_hints) != cache_key(IDENTITY, REQUEST, with_hints)
    assert cache_key(IDENTITY, other, with_hints) == by_hand(IDENTITY, other, with_hints)


HINTS = {
    "target": dataclasses.replace(REQUEST, target="ai-generated"),
    "answer_space": dataclasses.replace(REQUEST, answer_space=Choices(("yes", "no"))),
}


@pytest.mark.parametrize("field", list(HINTS))
def test_hints_change_the_key_only_with_hints(field: str) -> None:
    # real backends never see target / answer_space: their answers are shared across hints
    other = HINTS[field]
    assert cache_key(IDENTITY, other) == cache_key(IDENTITY, REQUEST)
    assert cache_key(IDENTITY, other, with_hints=True) != cache_key(
        IDENTITY, REQUEST, with_hints=True
    )


@pytest.mark.parametrize("name", [*IDENTITY, "revision"])
def test_each_field_of_the_identity_changes_the_key(name: str) -> None:
    # a changed value, and a field added (e.g. a local model's revision)
    other = IDENTITY | {name: "other"}
    assert cache_key(other, REQUEST) != cache_key(IDENTITY, REQUEST)
    assert cache_key(other, REQUEST) == by_hand(other, REQUEST, with_hints=False)


def test_the_identitys_order_and_mapping_type_do_not_change_the_key() -> None:
    reordered = dict(reversed(list(IDENTITY.items())))
    assert list(reordered) != list(IDENTITY)
    assert cache_key(reordered, REQUEST) == cache_key(IDENTITY, REQUEST)
    assert cache_key(MappingProxyType(IDENTITY), REQUEST) == cache_key(IDENTITY, REQUEST)


def test_equal_images_in_separate_parts_give_one_key() -> None:
    # the image enters by content: the same bytes read twice are one cached answer
    again = dataclasses.replace(
        REQUEST, parts=(Part.of_text("Organ: Liver"), Part(image=bytes(PNG), mime="image/png"))
    )
    assert cache_key(IDENTITY, again) == cache_key(IDENTITY, REQUEST)


@pytest.mark.parametrize("with_hints", [False, True])
def test_the_requests_canonical_text_is_made_once_and_is_its_canonical_json(with_hints) -> None:
    """The key and the prompt hash read one text per request (Request.canonical_text)."""
    request = dataclasses.replace(REQUEST)  # a fresh object: nothing memoised yet
    text = request.canonical_text(with_hints)
    assert text == json.dumps(
        request.canonical(with_hints), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert request.canonical_text(with_hints) is text  # kept, not made again
    assert request.digest(with_hints) == hashlib.sha256(text.encode()).hexdigest()
    assert dataclasses.replace(request, seed=99).canonical_text(with_hints) != text
