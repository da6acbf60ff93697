"""Your own OpenAI-compatible endpoint (issue 39, item 3): the preflight that stops a run with a
refused key, a wrong path or no server before anything is collected; "model calls: N sent"
counting the requests that failed after they went out; and `--dry-run` without the `api` extra.
Against the loopback server (support/doubles/loopback.py) and a closed port on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

from support.backends import preflight as pf
from support.backends.base import BackendError, BackendOptions, split_api_bases
from support.backends.registry import provider_names
from support.backends.scripted import ScriptedBackend
from support.client.engine import ModelClient
from support.contract.runner import LoggedClient, error_outcome
from support.doubles.loopback import LoopbackServer
from support.types import Case, Part, Request, Response
from unit.helpers.rounds_runs import plant_rounds, rounds_args

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

HERE = Path(__file__).parent
KEY = "sk-own-server-SECRET-5b1e0c"
WRONG = "sk-wrong-SECRET-77aa01"
VARIABLES = {  # provider -> the variable its key is read from
    "openai-compatible": "VLMBENCH_API_KEY",
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GEMINI_API_KEY",
}


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch):
    """keys(provider, value): only that provider's key variable set (to `value`)."""
    for variable in (*VARIABLES.values(), "GOOGLE_API_KEY", "VLMBENCH_CACHE_DIR"):
        monkeypatch.delenv(variable, raising=False)
    for variable in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)

    def _set(provider: str, value: str) -> None:
        monkeypatch.setenv(VARIABLES[provider], value)

    return _set


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def base(url: str, provider: str) -> str:
    """--api-base of `provider` at the loopback: OpenAI's protocol under /v1, the others' root."""
    return f"{url}/v1" if provider.startswith("openai") else url


# ---- the preflight, in process ------------------------------------------------------------------
@pytest.mark.parametrize("provider", list(VARIABLES))
def test_the_right_key_passes_with_one_free_request(provider, keys):
    keys(provider, KEY)
    with LoopbackServer(lambda _r: "A", api_key=KEY, models=("m",)) as server:
        found = pf.preflight(
            [f"{provider}:m", "oracle"], BackendOptions(api_base=base(server.url, provider))
        )
        assert (found.errors, found.warnings) == ([], [])
        assert server.stats.listed == 1 and server.stats.attempts == 0  # no model request


@pytest.mark.parametrize("provider", list(VARIABLES))
def test_a_refused_key_names_the_endpoint_and_the_variable(provider, keys):
    keys(provider, WRONG)
    with LoopbackServer(lambda _r: "A", api_key=KEY) as server:
        url = base(server.url, provider)
        found = pf.preflight([f"{provider}:m"], BackendOptions(api_base=url))
    (error,) = found.errors
    assert f"--model {provider}:m: {url} refused the key (HTTP 401" in error
    assert f"${VARIABLES[provider]}" in error and WRONG not in error


def test_openai_compatible_without_its_variable_says_a_placeholder_went(keys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # the user's OpenAI key: never sent to a server
    with LoopbackServer(lambda _r: "A", api_key=KEY) as server:
        found = pf.preflight(["openai-compatible:m"], BackendOptions(api_base=server.url + "/v1"))
    (error,) = found.errors
    assert "the placeholder 'EMPTY': $VLMBENCH_API_KEY is not set" in error
    assert "never $OPENAI_API_KEY" in error and KEY not in error


def test_a_wrong_path_is_a_404_naming_what_was_asked(keys):
    keys("openai-compatible", KEY)
    with LoopbackServer(lambda _r: "A", api_key=KEY) as server:
        url = server.url + "/v1/chat/completions"  # the endpoint, not the base URL
        found = pf.preflight(["openai-compatible:m"], BackendOptions(api_base=url))
    (error,) = found.errors
    assert f"HTTP 404 for GET {url}/models" in error and "version path" in error


def test_several_providers_on_one_server_each_take_their_own_base(keys):
    """`--api-base openai=URL/v1 --api-base anthropic=URL`: each provider's models go to its
    own base URL, and the preflight passes for both."""
    for provider in ("openai", "anthropic"):
        keys(provider, KEY)
    with LoopbackServer(lambda _r: "A", api_key=KEY, models=("m",)) as server:
        every, own = split_api_bases(
            [f"openai={server.url}/v1", f"anthropic={server.url}"], provider_names()
        )
        opts = BackendOptions(api_base=every, api_bases=own)
        assert opts.base_for("openai") == f"{server.url}/v1" and opts.base_for("google") is None
        found = pf.preflight(["openai:m", "anthropic:m"], opts)
        assert (found.errors, found.warnings) == ([], [])
        assert server.stats.listed == 2


@pytest.mark.parametrize(
    ("provider", "says"),
    [
        ("anthropic", "no version path (http://host:port, not .../v1"),
        ("openai", "with its version path and nothing after it"),
    ],
)
def test_a_404_says_each_providers_base_url_form(provider, says, keys):
    """Anthropic's base URL has no /v1 (its SDK appends /v1/messages): the hint says so, and
    names the per-provider option."""
    keys(provider, KEY)
    with LoopbackServer(lambda _r: "A", api_key=KEY) as server:
        url = f"{server.url}/v1" + ("" if provider == "anthropic" else "/chat/completions")
        found = pf.preflight([f"{provider}:m"], BackendOptions(api_base=url))
    (error,) = found.errors
    assert "HTTP 404" in error and says in error
    assert f"--api-base {provider}=URL" in error


@pytest.mark.parametrize(
    ("values", "error"),
    [
        (["nosuch=http://h"], "--api-base nosuch=http://h: no provider 'nosuch'; the providers: "),
        (["http://a", "Nope=http://b"], "--api-base Nope=http://b: no provider 'Nope'"),
    ],
)
def test_api_base_values_are_checked(values, error):
    with pytest.raises(ValueError) as found:
        split_api_bases(values, provider_names())
    assert str(found.value).startswith(error)
    # a later value replaces an earlier one of its kind, as a repeated option does
    later = ["http://a", "openai=http://o1", "http://b", "openai=http://o2"]
    assert split_api_bases(later, provider_names()) == ("http://b", (("openai", "http://o2"),))
    # a URL with a query is no provider's: it is the endpoint for every model
    assert split_api_bases(["http://h/v1?a=b"], provider_names()) == ("http://h/v1?a=b", ())


@pytest.mark.filterwarnings("ignore:.*the credentials in --api-base are dropped")
def test_a_closed_port_is_an_error_within_seconds(keys):
    keys("openai-compatible", KEY)
    url = f"http://user:pw-SECRET@127.0.0.1:{closed_port()}/v1"
    start = time.perf_counter()
    found = pf.preflight(
        ["openai-compatible:a", "openai-compatible:b"], BackendOptions(api_base=url)
    )
    assert time.perf_counter() - start < pf.PREFLIGHT_S
    (error,) = found.errors  # one endpoint, asked once for both models
    assert error.startswith("--model openai-compatible:a, --model openai-compatible:b: cannot ")
    assert f"connect to {url.replace('user:pw-SECRET@', '')}" in error
    assert "pw-SECRET" not in error and "--no-preflight" in error


def test_a_model_the_server_does_not_list_is_named_with_those_it_does(keys):
    keys("openai-compatible", KEY)
    with LoopbackServer(lambda _r: "A", api_key=KEY, models=("Qwen/Qwen2.5-VL-7B",)) as server:
        names = ["openai-compatible:Qwen/Qwen2.5-VL-7B", "openai-compatible:qwen"]
        found = pf.preflight(names, BackendOptions(api_base=server.url + "/v1"))
    (error,) = found.errors
    assert error.startswith("--model openai-compatible:qwen: ")
    assert "does not serve 'qwen'; its models: Qwen/Qwen2.5-VL-7B" in error


def test_a_silent_server_is_a_warning_at_the_deadline(keys, monkeypatch):
    keys("openai-compatible", KEY)
    monkeypatch.setattr(pf, "PREFLIGHT_S", 0.5)
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        start = time.perf_counter()
        found = pf.preflight(["openai-compatible:m"], BackendOptions(api_base=url))
        elapsed = time.perf_counter() - start
    assert found.errors == [] and elapsed < 3
    (warning,) = found.warnings
    assert "did not answer its models list within 0.5 s" in warning


def test_no_api_model_no_request():
    found = pf.preflight(["oracle", "chance"], BackendOptions(api_base="http://127.0.0.1:9/v1"))
    assert found == pf.Preflight()


# ---- "sent" counts the requests that failed after they went out ---------------------------------
def request(text: str) -> Request:
    return Request(parts=(Part.of_text(text),), max_tokens=4)


def refuse(request: Request) -> str:
    raise BackendError("HTTP 401 (a refused key)")


def test_a_request_that_failed_after_it_went_out_counts_as_sent():
    client = ModelClient(ScriptedBackend(refuse), cache=None, concurrency=4)
    case = Case("c1", "rounds", {})

    async def evaluate() -> LoggedClient:
        logged = LoggedClient(client)
        forks = [logged.fork(), logged.fork()]
        results = await asyncio.gather(
            *(f.generate(request(str(i))) for i, f in enumerate(forks)), return_exceptions=True
        )
        assert all(isinstance(r, BackendError) for r in results)
        with pytest.raises(BackendError):
            await logged.generate(request("own"))
        return logged

    logged = asyncio.run(evaluate())
    assert logged.log.failed == 1 and [f.failed for f in logged.log.forks] == [1, 1]
    outcome = error_outcome(case, "scripted", "HTTP 401", logged.log)
    assert outcome.backend_calls == 3 == client.sent  # the forks' failed sends included


class HeldBackend(ScriptedBackend):
    """Refuses "fail" at once; answers anything else once `release` is set."""

    def __init__(self) -> None:
        super().__init__(lambda r: "4")
        self.release = asyncio.Event()

    async def generate(self, request: Request) -> Response:
        if request.parts[0].text == "fail":
            raise BackendError("HTTP 401")
        await self.release.wait()
        return await super().generate(request)


def test_a_sibling_still_in_flight_when_the_case_broke_counts_as_sent():
    backend = HeldBackend()
    client = ModelClient(backend, cache=None, concurrency=4)
    case = Case("c1", "rounds", {})

    async def evaluate() -> int:
        logged = LoggedClient(client)
        forks = [logged.fork(), logged.fork()]
        pending = asyncio.ensure_future(forks[1].generate(request("slow")))
        for _ in range(100):  # until it is at the backend
            if client.sent:
                break
            await asyncio.sleep(0)
        with pytest.raises(BackendError):
            await forks[0].generate(request("fail"))
        outcome = error_outcome(case, "scripted", "HTTP 401", logged.log)  # as run_case does
        backend.release.set()
        await pending
        return outcome.backend_calls

    assert asyncio.run(evaluate()) == 2


def test_an_answered_request_is_counted_once_and_a_cached_one_not_at_all(tmp_path):
    from support.client.response_cache import ResponseCache

    cache = ResponseCache(tmp_path / "responses.sqlite")
    client = ModelClient(ScriptedBackend(lambda r: "4"), cache=cache, concurrency=1)

    async def twice() -> LoggedClient:
        logged = LoggedClient(client)
        await logged.generate(request("q"))
        await logged.generate(request("q"))  # from the cache
        return logged

    books = asyncio.run(twice()).log.bookkeeping()
    cache.close()
    assert (books["backend_calls"], books["cache_hits"]) == (1, 1)


# ---- end to end: the suite's runs ---------------------------------------------------------------
@pytest.fixture
def rounds(pytester: pytest.Pytester, tmp_path: Path):
    """rounds(*args) -> RunResult: the small rounds evaluation (2 sequences x 1 round x 2
    tasks: 4 requests) through the real suite, in a subprocess."""

    def _run(*args: str, conftest_head: str = "") -> pytest.RunResult:
        plant_rounds(pytester, conftest_head)
        return pytester.runpytest_subprocess(*rounds_args(tmp_path), *args, timeout=180)

    return _run


@pytest.mark.slow
def test_a_refused_key_stops_the_run_before_collection(rounds, keys):
    keys("openai-compatible", WRONG)
    with LoopbackServer(lambda _r: "1", api_key=KEY, lifetime_s=120) as server:
        url = server.url + "/v1"
        result = rounds("--model=openai-compatible:m", f"--api-base={url}")
        assert server.stats.listed == 1 and server.stats.headers == []  # no model request
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    err = result.stderr.str()
    assert f"--model openai-compatible:m: {url} refused the key (HTTP 401" in err
    assert "VLMBENCH_API_KEY" in err and "--no-preflight skips it" in err
    assert "collected" not in result.stdout.str()
    assert WRONG not in err + result.stdout.str()


@pytest.mark.slow
def test_a_closed_port_stops_the_run_before_collection(rounds, keys):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    result = rounds("--model=openai-compatible:m", f"--api-base={url}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    assert f"cannot connect to {url}" in result.stderr.str()


@pytest.mark.slow
def test_without_the_preflight_every_refused_request_counts_as_sent(rounds, keys):
    keys("openai-compatible", WRONG)
    with LoopbackServer(lambda _r: "1", api_key=KEY, lifetime_s=120) as server:
        args = ("--model=openai-compatible:m", f"--api-base={server.url}/v1", "--api-retries=0")
        result = rounds(*args, "--no-preflight")
        refused = len(server.stats.headers)  # every request, 401s included (before the check)
        assert server.stats.listed == 0
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-2000:]
    assert refused == 4 and "model calls: 4 sent, 0 served from cache" in out


@pytest.mark.slow
def test_the_right_key_runs_after_one_models_list(rounds, keys):
    keys("openai-compatible", KEY)
    with LoopbackServer(lambda _r: "1", api_key=KEY, lifetime_s=120) as server:
        result = rounds("--model=openai-compatible:m", f"--api-base={server.url}/v1")
        assert server.stats.listed == 1 and server.stats.answered == 4
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert "model calls: 4 sent" in result.stdout.str()


BLOCKED_SDKS = """
import sys

# no `api` extra: the SDKs (and what they bring) cannot be imported
for name in ("openai", "anthropic", "google.genai", "tenacity", "httpx2"):
    sys.modules[name] = None
"""


@pytest.mark.slow
def test_a_dry_run_needs_no_sdk(rounds, keys):
    models = "gpt-4o,claude-haiku-4-5,gemini-2.0-flash,openai-compatible:m"
    result = rounds(
        f"--model={models}",
        f"--api-base=http://127.0.0.1:{closed_port()}/v1",
        "--dry-run",
        conftest_head=BLOCKED_SDKS,
    )
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:] + result.stderr.str()[-2000:]
    result.assert_outcomes(skipped=8)  # 2 cases x 4 models: a dry run scores nothing
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in out.splitlines()
            if line.startswith("| ")}  # fmt: skip
    assert {m: rows.get(m) for m in models.split(",")} == dict.fromkeys(models.split(","), "4")


@pytest.mark.slow
def test_the_later_rounds_of_a_broken_search_are_skipped_quoting_its_error(run_suite, keys):
    keys("openai-compatible", WRONG)
    with LoopbackServer(lambda _r: "A", api_key=KEY, lifetime_s=240) as server:
        result, _ = run_suite(
            "dynamic",
            *("--dynamic-budget=12", "--dynamic-batch=5", "--dynamic-pool=40"),  # 3 rounds
            "--dynamic-strategy=random",
            "--model=openai-compatible:m",
            f"--api-base={server.url}/v1",
            "--api-retries=0",
            "--no-preflight",
        )
        refused = len(server.stats.headers)
    out = result.stdout.str()
    result.assert_outcomes(errors=1, skipped=2)  # round 0 failed; rounds 1 and 2 never ran
    assert refused == 5  # round 0's tasks, nothing after
    assert "RuntimeError" not in out and "Traceback" not in out
    (line,) = [line for line in out.splitlines() if line.startswith("skipped 2: ")]
    assert line.startswith(
        "skipped 2: an earlier round of this search ended in an error: openai-compatible:m: "
    )
    assert "401" in line and WRONG not in out
