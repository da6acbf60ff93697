"""The response cache survives an SDK upgrade: API identities name what the provider sees
(provider, model id, endpoint kind, and the URL that answers unless it is the vendor's own), never
an SDK version; one endpoint's answers are never served for another's. In-process, against the
loopback server."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json

import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
genai = pytest.importorskip("google.genai")

from support.backends import (  # noqa: E402
    anthropic_messages,
    api_backend,
    gemini,
    openai_chat,
)
from support.backends.registry import BackendOptions, create_backend  # noqa: E402
from support.client.engine import ModelClient  # noqa: E402
from support.client.response_cache import ResponseCache, cache_key  # noqa: E402
from support.doubles.loopback import LoopbackServer, ScriptRequest  # noqa: E402
from support.types import Part, Request  # noqa: E402

KEY = "sk-loop-0123456789abcdef"
KEY_VARS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GEMINI_API_KEY",
}
SDKS = {"openai": openai, "anthropic": anthropic, "google": genai}
# provider -> (the variable its SDK reads for the endpoint, the path its base URL has)
BASE_URL_VARS = {
    "openai": ("OPENAI_BASE_URL", "/v1"),
    "anthropic": ("ANTHROPIC_BASE_URL", ""),
    "google": ("GOOGLE_GEMINI_BASE_URL", ""),
}
DISTRIBUTIONS = {"openai", "anthropic", "google-genai", "httpx", "httpx2"}
REQUEST = Request(parts=(Part.of_text("Organ: Liver"),), system="be brief", max_tokens=20)


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    for var in KEY_VARS.values():
        monkeypatch.setenv(var, KEY)
    for var, _ in BASE_URL_VARS.values():
        monkeypatch.delenv(var, raising=False)


def upgrade_sdks(monkeypatch) -> None:
    """Make every version an API backend could read look like a newer release: the SDKs'
    `__version__`, their distributions' metadata, and any constant or class attribute of the
    backend modules that holds an SDK's version."""
    versions = {sdk.__version__ for sdk in SDKS.values()}
    for module in (openai, anthropic, genai, openai._version, anthropic._version, genai.version):
        monkeypatch.setattr(module, "__version__", "99.0.0")
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda dist: "99.0.0" if dist in DISTRIBUTIONS else real(dist),
    )
    for module in (api_backend, openai_chat, anthropic_messages, gemini):
        classes = [v for v in vars(module).values() if isinstance(v, type)]
        for holder in (module, *classes):
            for attr, value in list(vars(holder).items()):
                if isinstance(value, str) and value in versions:
                    monkeypatch.setattr(holder, attr, "99.0.0")


@pytest.mark.parametrize("provider", list(SDKS))
def test_the_cache_key_does_not_change_with_the_sdk_version(monkeypatch, provider):
    name = f"{provider}:model-x"
    before = create_backend(name).identity
    assert SDKS[provider].__version__ not in json.dumps(before)  # no version at all
    assert not any("version" in field for field in before)
    upgrade_sdks(monkeypatch)
    after = create_backend(name).identity
    assert cache_key(after, REQUEST) == cache_key(before, REQUEST)
    # what the provider sees still counts
    other_model = create_backend(f"{provider}:model-y").identity
    assert cache_key(other_model, REQUEST) != cache_key(before, REQUEST)


def test_an_openai_compatible_identity_is_the_server_not_the_sdk(monkeypatch):
    name = "openai-compatible:org/m"
    one = create_backend(name, BackendOptions(api_base="http://gpu-a:8000/v1")).identity
    upgrade_sdks(monkeypatch)
    assert create_backend(name, BackendOptions(api_base="http://gpu-a:8000/v1/")).identity == one
    other = create_backend(name, BackendOptions(api_base="http://gpu-b:8000/v1")).identity
    assert cache_key(other, REQUEST) != cache_key(one, REQUEST)


def answer(request: ScriptRequest) -> str:
    return f"{request.protocol}: {request.texts[-1]}"


def ask(name: str, url: str | None, cache: ResponseCache) -> tuple[str, bool]:
    """One request through a fresh backend and ModelClient; (text, served from cache)."""
    backend = create_backend(name, BackendOptions(api_base=url, max_retries=0))
    client = ModelClient(backend, cache, concurrency=1)

    async def go():
        try:
            return await client.generate(REQUEST)
        finally:
            await client.aclose()

    response = asyncio.run(go())
    return response.text, response.cached


@pytest.mark.parametrize(
    ("provider", "path"), [("openai", "/v1"), ("anthropic", ""), ("google", "")]
)
def test_an_sdk_upgrade_is_served_from_the_cache(monkeypatch, tmp_path, provider, path):
    name = f"{provider}:loop-model"
    with LoopbackServer(answer, api_key=KEY, lifetime_s=60) as server:
        url = server.url + path
        first = ResponseCache(tmp_path / "responses.sqlite")
        text, cached = ask(name, url, first)
        assert not cached and text.endswith(": Organ: Liver")
        assert server.stats.answered == 1
        first.close()

        upgrade_sdks(monkeypatch)
        again = ResponseCache(tmp_path / "responses.sqlite")  # as a later run opens it
        assert ask(name, url, again) == (text, True)
        assert server.stats.attempts == 1  # nothing new reached the server
        again.close()


# -- the endpoint is part of the identity ----------------------------------------------------------


def tagged(tag: str):
    """A script answering `<tag>: <the request's last text>`: which server answered shows."""
    return lambda request: f"{tag}: {request.texts[-1]}"


@pytest.mark.parametrize("provider", list(SDKS))
def test_a_second_endpoint_is_asked_again_not_served_the_firsts_answers(tmp_path, provider):
    """The red-team's reproduction: after a run against one server, the same vendor model
    against another endpoint sends its request there (the second server's answer comes back),
    and each endpoint is then served from its own cache entry."""
    name, path = f"{provider}:gpt-4o", BASE_URL_VARS[provider][1]
    cache = ResponseCache(tmp_path / "responses.sqlite")
    try:
        with (
            LoopbackServer(tagged("first"), api_key=KEY, lifetime_s=60) as first,
            LoopbackServer(tagged("second"), api_key=KEY, lifetime_s=60) as second,
        ):
            assert ask(name, first.url + path, cache) == ("first: Organ: Liver", False)
            assert ask(name, second.url + path, cache) == ("second: Organ: Liver", False)
            assert second.stats.answered == 1
            assert ask(name, first.url + path, cache) == ("first: Organ: Liver", True)
            assert ask(name, second.url + path, cache) == ("second: Organ: Liver", True)
            assert (first.stats.attempts, second.stats.attempts) == (1, 1)
    finally:
        cache.close()


@pytest.mark.parametrize("provider", list(SDKS))
def test_the_sdks_own_endpoint_variable_is_an_endpoint_too(monkeypatch, tmp_path, provider):
    """An endpoint given by the variable the SDK reads (OPENAI_BASE_URL, ANTHROPIC_BASE_URL,
    GOOGLE_GEMINI_BASE_URL) is the one the request goes to, and enters the identity as
    --api-base does."""
    name, (variable, path) = f"{provider}:gpt-4o", BASE_URL_VARS[provider]
    cache = ResponseCache(tmp_path / "responses.sqlite")
    try:
        with (
            LoopbackServer(tagged("first"), api_key=KEY, lifetime_s=60) as first,
            LoopbackServer(tagged("second"), api_key=KEY, lifetime_s=60) as second,
        ):
            assert ask(name, first.url + path, cache) == ("first: Organ: Liver", False)
            monkeypatch.setenv(variable, second.url + path)
            backend = create_backend(name)
            assert backend.identity["base_url"] == second.url + path
            assert backend.endpoint_url == second.url + path
            assert ask(name, None, cache) == ("second: Organ: Liver", False)
            with_option = create_backend(name, BackendOptions(api_base=second.url + path))
            assert with_option.identity == backend.identity
            assert (first.stats.attempts, second.stats.attempts) == (1, 1)
    finally:
        cache.close()


DEFAULT_ENDPOINTS = {
    "openai": ("https://api.openai.com/v1", "chat.completions"),
    "anthropic": ("https://api.anthropic.com", "messages"),
    "google": ("https://generativelanguage.googleapis.com", "generateContent"),
}


@pytest.mark.parametrize("provider", list(SDKS))
def test_the_vendors_own_endpoint_keeps_the_identity_of_a_default_run(monkeypatch, provider):
    """Users' caches stay valid: a default run's identity is what it was before endpoints
    entered it, and naming the vendor's own endpoint (any spelling) changes nothing."""
    name, (default, endpoint) = f"{provider}:model-x", DEFAULT_ENDPOINTS[provider]
    before = {"provider": provider, "model": "model-x", "endpoint": endpoint}
    assert dict(create_backend(name).identity) == before
    assert create_backend(name).endpoint_url == default  # the manifest still names it
    scheme, rest = default.split("://")
    host, _, path = rest.partition("/")
    for spelling in (default, f"{default}/", f"{scheme}://{host.upper()}:443/{path}"):
        same = create_backend(name, BackendOptions(api_base=spelling))
        assert dict(same.identity) == before, spelling
        monkeypatch.setenv(BASE_URL_VARS[provider][0], spelling)
        assert dict(create_backend(name).identity) == before, spelling
        monkeypatch.delenv(BASE_URL_VARS[provider][0])


@pytest.mark.filterwarnings("ignore:.*the credentials in --api-base are dropped")
@pytest.mark.parametrize("provider", list(SDKS))
def test_the_identity_holds_scheme_host_port_and_path_never_credentials(provider):
    url = "http://user:pa55word@Proxy.example:8443/api/v1/?key=secret-q#frag"
    identity = create_backend(f"{provider}:m", BackendOptions(api_base=url)).identity
    assert identity["base_url"] == "http://proxy.example:8443/api/v1"
    for secret in ("user", "pa55word", "secret-q", "frag"):
        assert secret not in json.dumps(dict(identity))
    # each part of the endpoint counts
    for other in (
        "https://proxy.example:8443/api/v1",
        "http://proxy2.example:8443/api/v1",
        "http://proxy.example:8444/api/v1",
        "http://proxy.example:8443/api/v2",
    ):
        moved = create_backend(f"{provider}:m", BackendOptions(api_base=other)).identity
        assert cache_key(moved, REQUEST) != cache_key(identity, REQUEST), other
