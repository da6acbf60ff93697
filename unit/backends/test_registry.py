"""The model registry: specs and kinds, `scripted:<module>:<function>` models, and plugins added
through the `vlmbench.models` entry point group (a dist-info folder on sys.path, nothing
installed)."""

from __future__ import annotations

import asyncio
import dataclasses
import textwrap
import uuid
from pathlib import Path

import pytest

from support.backends import registry
from support.backends.base import Backend, register_provider
from support.backends.registry import (
    BackendOptions,
    ModelSpec,
    PluginError,
    check_name,
    create_backend,
    known_names,
    model_kind,
    model_spec,
)
from support.backends.scripted import ScriptedBackend
from support.client.engine import ModelClient
from support.types import Part, Request


@pytest.fixture(autouse=True)
def fresh_plugins():
    """Each test finds the entry points on its own sys.path."""
    registry.plugin_models.cache_clear()
    yield
    registry.plugin_models.cache_clear()


def req(text: str, **kw) -> Request:
    return Request(parts=(Part.of_text(text),), **kw)


def generate(backend: Backend, request: Request) -> tuple[str, ...]:
    return asyncio.run(backend.generate(request)).texts


# -- specs and kinds ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "provider", "model_id"),
    [
        ("oracle", "reference", "reference", "oracle"),
        ("chance", "reference", "reference", "chance"),
        ("gpt-4o-mini", "api", "openai", "gpt-4o-mini"),
        ("claude-sonnet-4-20250514", "api", "anthropic", "claude-sonnet-4-20250514"),
        ("gemini-2.0-flash", "api", "google", "gemini-2.0-flash"),
        ("qwen25-vl-7b", "local-gpu", "vllm", "Qwen/Qwen2.5-VL-7B-Instruct"),
        ("openai:gpt-4.1", "api", "openai", "gpt-4.1"),
        ("openai-compatible:Qwen/Qwen2.5-VL-7B", "api", "openai-compatible", "Qwen/Qwen2.5-VL-7B"),
        ("vllm:/models/m", "local-gpu", "vllm", "/models/m"),
        ("hf:org/model", "local-cpu", "hf", "org/model"),
        ("scripted:pkg.mod:fn", "reference", "scripted", "pkg.mod:fn"),
    ],
)
def test_every_name_has_a_spec(name, kind, provider, model_id):
    spec = model_spec(name)
    assert (spec.name, spec.kind, spec.provider, spec.model_id) == (name, kind, provider, model_id)
    assert model_kind(name) == kind
    check_name(name)


@pytest.mark.parametrize("name", ["nope", "nope:x", "openai:", "oracle:x", ""])
def test_unknown_names_are_value_errors(name):
    with pytest.raises(ValueError, match="unknown model"):
        model_spec(name)
    with pytest.raises(ValueError, match="known: chance, "):
        check_name(name)


def test_the_registry_is_the_one_list_of_models():
    names = known_names()
    assert names[: len(registry.MODELS)] == sorted(registry.MODELS)
    assert {"oracle", "chance", "llama32-vision-11b", "scripted:<model-id>"} <= set(names)
    assert all(spec.name == name for name, spec in registry.MODELS.items())
    assert registry.DEFAULT_MODELS == ("oracle", "chance")
    # Llama-3.2-Vision runs on transformers, on a GPU unless --device says otherwise
    llama = model_spec("llama32-vision-11b")
    assert (llama.provider, llama.kind, dict(llama.engine)) == (
        "hf",
        "local-gpu",
        {"device": "cuda"},
    )
    assert llama.family is not None and llama.family.name == "mllama"


def test_a_spec_is_checked_frozen_and_hashable():
    with pytest.raises(ValueError, match="kind 'gpu' is not one of"):
        ModelSpec("m", "gpu", "vllm", "m")
    with pytest.raises(ValueError, match="needs a name"):
        ModelSpec("", "api", "openai", "m")
    with pytest.raises(ValueError, match="factory is not callable"):
        ModelSpec("m", "api", "openai", "m", "build")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="provider 'nobody' is not a registered one"):
        ModelSpec("m", "api", "nobody", "m")  # no factory, and no class to build it
    engine = {"max_num_seqs": 8}
    spec = ModelSpec("m", "local-gpu", "vllm", "org/m", engine=engine)
    engine["max_num_seqs"] = 9  # the caller's dict is copied
    assert spec.engine["max_num_seqs"] == 8
    with pytest.raises(TypeError):
        spec.engine["max_num_seqs"] = 1  # type: ignore[index]
    assert hash(spec) == hash(ModelSpec("m", "local-gpu", "vllm", "org/m"))


def test_registered_vllm_models_pass_their_engine_settings(monkeypatch):
    """The engine settings reach vllm.LLM's arguments and the cache identity (vLLM itself is
    imported only when the first batch runs, so no GPU is needed to build the backend)."""
    import importlib.util

    from support.backends import vllm_local

    real = importlib.util.find_spec
    monkeypatch.setattr(
        vllm_local.importlib.util,
        "find_spec",
        lambda m, *a: object() if m == "vllm" else real(m, *a),
    )
    batched = ModelSpec(
        "qwen-batched", "local-gpu", "vllm", "Qwen/Qwen2.5-VL-7B-Instruct",
        engine={"max_num_seqs": 100},
    )  # fmt: skip
    monkeypatch.setitem(registry.MODELS, "qwen-batched", batched)
    qwen = create_backend("qwen-batched", BackendOptions(seed=4, extra=(("gpus", (0,)),)))
    assert qwen.args["max_num_seqs"] == 100 and qwen.args["seed"] == 4
    assert qwen.args["model"] == "Qwen/Qwen2.5-VL-7B-Instruct"
    assert qwen.default_concurrency == 100  # the client keeps the engine's batch full
    plain = create_backend("vllm:Qwen/Qwen2.5-VL-7B-Instruct", BackendOptions(seed=4))
    assert "max_num_seqs" not in plain.args
    # the batch size shapes the engine, not the answers: the same cache identity
    assert "max_num_seqs" not in qwen.identity["engine"]
    assert plain.identity == qwen.identity
    monkeypatch.setitem(
        registry.MODELS,
        "qwen-long",
        dataclasses.replace(batched, name="qwen-long", engine={"max_model_len": 8192}),
    )
    longer = create_backend("qwen-long", BackendOptions(seed=4))
    assert "max_model_len" in longer.identity["engine"]
    assert longer.identity != plain.identity  # other engine settings, other answers


# -- scripted:<module>:<function> -----------------------------------------------------------------

SCRIPT = """
NOT_A_FUNCTION = 3


def shout(request):
    return request.parts[0].text.upper()


def numbered(request):
    return [f"{request.parts[0].text}-{i}" for i in range(request.n)]


def from_target(request):
    return request.target or "?"
"""


@pytest.fixture
def script_module(tmp_path, monkeypatch) -> str:
    """A module on sys.path holding scripts; its (unique) name."""
    name = f"vlmbench_scripts_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{name}.py").write_text(SCRIPT)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_a_scripted_model_runs_from_its_name(script_module):
    name = f"scripted:{script_module}:shout"
    backend = create_backend(name)
    assert isinstance(backend, ScriptedBackend) and backend.name == name
    assert generate(backend, req("liver", n=2)) == ("LIVER", "LIVER")
    many = create_backend(f"scripted:{script_module}:numbered")
    assert generate(many, req("x", n=3)) == ("x-0", "x-1", "x-2")
    # it sees the hints, so they are part of its cache key
    oracle_like = create_backend(f"scripted:{script_module}:from_target")
    assert oracle_like.reads_hints
    assert generate(oracle_like, req("q", target="B")) == ("B",)
    client = ModelClient(oracle_like, cache=None, concurrency=1)
    assert client.key(req("q", target="A")) != client.key(req("q", target="B"))


def test_editing_the_script_changes_its_identity(script_module, tmp_path):
    name = f"scripted:{script_module}:shout"
    before = create_backend(name).identity
    assert before == create_backend(name).identity
    (tmp_path / f"{script_module}.py").write_text(SCRIPT + "\n# edited\n")
    assert create_backend(name).identity != before
    assert create_backend(f"scripted:{script_module}:numbered").identity["model"] != name


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("shout", r"expected scripted:<module>:<function>"),
        (":shout", r"expected scripted:<module>:<function>"),
        (
            "no_such_module_for_vlmbench:shout",
            r"cannot import module 'no_such_module_for_vlmbench'",
        ),
        ("{mod}:missing", r"module '{mod}' has no 'missing'"),
        ("{mod}:NOT_A_FUNCTION", r"{mod}:NOT_A_FUNCTION is a int, not a function"),
    ],
)
def test_a_bad_script_name_is_an_error_naming_it(script_module, target, message):
    name = "scripted:" + target.format(mod=script_module)
    check_name(name)  # checked when the backend is built, not at configure
    with pytest.raises(ValueError, match=f"^{name}: {message.format(mod=script_module)}"):
        create_backend(name)


# -- plugins (entry point group vlmbench.models) --------------------------------------------------

PLUGIN = """
from support.backends.registry import ModelSpec
from support.backends.scripted import ScriptedBackend

LOADS = []


def build(spec, opts):
    return ScriptedBackend(
        lambda r: f"{{spec.model_id}}/{{spec.engine['style']}}/{{opts.seed}}: {{r.parts[0].text}}",
        name=spec.name,
    )


SPECS = [
    ModelSpec("{prefix}-echo", "reference", "scripted", "echo-v1", build, engine={{"style": "a"}}),
    ModelSpec("{prefix}-gpu", "local-gpu", "vllm", "org/tiny", build, engine={{"style": "b"}}),
]
ONE = ModelSpec("{prefix}-one", "api", "openai-compatible", "m", build, engine={{"style": "c"}})
CLASH = ModelSpec("oracle", "reference", "scripted", "o", build)
NOT_A_SPEC = 42
"""


def install_plugin(root: Path, monkeypatch, entry_points: dict[str, str]) -> str:
    """A distribution with `entry_points` (name -> "module:attr", `{mod}` for its own module) in
    the group vlmbench.models, written under `root` and put on sys.path; its module's name."""
    prefix = f"p{uuid.uuid4().hex[:12]}"
    module = f"vlmbench_plugin_{prefix}"
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(PLUGIN.format(prefix=prefix))
    info = root / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    lines = [f"{name} = {value.format(mod=module)}" for name, value in entry_points.items()]
    (info / "entry_points.txt").write_text("[vlmbench.models]\n" + "\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(root))
    return module


def test_a_plugin_adds_models_without_editing_the_suite(tmp_path, monkeypatch):
    import importlib.metadata

    module = install_plugin(tmp_path, monkeypatch, {"many": "{mod}:SPECS", "single": "{mod}:ONE"})
    prefix = module.removeprefix("vlmbench_plugin_")
    scans = []
    real = importlib.metadata.entry_points
    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda **kw: scans.append(kw) or real(**kw)
    )
    echo = f"{prefix}-echo"
    check_name(echo)
    assert model_kind(echo) == "reference"
    assert model_kind(f"{prefix}-gpu") == "local-gpu"
    assert model_kind(f"{prefix}-one") == "api"
    assert {echo, f"{prefix}-gpu", f"{prefix}-one"} <= set(known_names())
    spec = model_spec(echo)
    assert (spec.provider, spec.model_id, dict(spec.engine)) == (
        "scripted",
        "echo-v1",
        {"style": "a"},
    )
    backend = create_backend(echo, BackendOptions(seed=7))
    assert generate(backend, req("hi")) == ("echo-v1/a/7: hi",)
    assert model_kind("oracle") == "reference"  # the suite's own models stay
    assert len(scans) == 1  # loaded once, on the first lookup


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("no_such_plugin_module_for_vlmbench:SPECS", "failed to load: ModuleNotFoundError"),
        ("{mod}:MISSING", "failed to load: AttributeError"),
        ("{mod}:NOT_A_SPEC", "must give a ModelSpec or an iterable of ModelSpecs, not int"),
        ("{mod}:CLASH", "model name 'oracle' is already registered"),
    ],
)
def test_a_broken_plugin_is_an_error_naming_its_entry_point(tmp_path, monkeypatch, value, message):
    install_plugin(tmp_path, monkeypatch, {"good": "{mod}:SPECS", "broken": value})
    for lookup in (check_name, model_kind, create_backend):
        with pytest.raises(PluginError, match=f"vlmbench.models entry point 'broken' .*{message}"):
            lookup("oracle")


CONFTEST = (
    "from fixtures.suite import SETTINGS_PLUGINS\n"
    'pytest_plugins = [*SETTINGS_PLUGINS, "fixtures.models"]'
)
INNER_TEST = """
import asyncio
import dataclasses

from fixtures.models import client_or_reason
from support.types import Part, Request


def test_model(pytestconfig):
    client = client_or_reason(pytestconfig, {name!r})
    response = asyncio.run(client.generate(Request(parts=(Part.of_text("spleen"),))))
    assert response.texts == ({answer!r},)
"""


@pytest.mark.parametrize("which", ["scripted", "plugin"])
def test_both_kinds_of_model_are_reachable_from_the_command_line(
    pytester, tmp_path, monkeypatch, script_module, which
):
    if which == "scripted":
        name, answer = f"scripted:{script_module}:shout", "SPLEEN"
    else:
        module = install_plugin(tmp_path / "plugin", monkeypatch, {"mine": "{mod}:SPECS"})
        name, answer = f"{module.removeprefix('vlmbench_plugin_')}-echo", "echo-v1/a/0: spleen"
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(INNER_TEST.format(name=name, answer=answer))
    result = pytester.runpytest_inprocess(
        f"--model={name}", f"--cache-dir={pytester.path / 'cache'}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)


def test_a_broken_plugin_is_a_usage_error_at_configure(pytester, tmp_path, monkeypatch):
    install_plugin(tmp_path / "plugin", monkeypatch, {"broken": "{mod}:NOT_A_SPEC"})
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess(
        "--model=oracle", f"--cache-dir={pytester.path / 'cache'}", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*vlmbench.models entry point 'broken'*must give a ModelSpec*"])


def test_importing_the_registry_loads_no_plugin(tmp_path, monkeypatch):
    """Entry points load on the first lookup, not at import (the registry imports cheaply)."""
    import subprocess
    import sys

    module = install_plugin(tmp_path, monkeypatch, {"broken": "{mod}:NOT_A_SPEC"})
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from support.backends import registry
        print({module!r} in sys.modules)
        try:
            registry.check_name("oracle")
        except registry.PluginError as exc:
            print("PluginError", {module!r} in sys.modules)
    """)
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert out.stdout.split() == ["False", "PluginError", "True"], out.stderr


# -- providers: classes that carry their traits and register themselves ----------------------------


def test_a_provider_is_one_class_its_traits_read_without_building(monkeypatch):
    """A Backend subclass with `provider` set, decorated, is the whole registration: the name
    resolves, its kind, key, extra, prefill and box convention come from the class, and only
    `--model` building calls `create`."""
    from support.backends import base

    monkeypatch.setattr(base, "_providers", dict(base._providers))  # forget it afterwards
    built = []

    @register_provider
    class Echo(Backend):
        provider = "echo-test"
        kind = "api"
        key_env = ("ECHO_TEST_KEY",)
        needs = ("json",)
        extra = "api"
        prefill = "native"

        @classmethod
        def box_convention(cls, model_id):
            return "norm1000"

        @classmethod
        def create(cls, name, model_id, opts):
            built.append((name, model_id))
            return ScriptedBackend(lambda r: model_id, name=name)

    spec = model_spec("echo-test:m1")
    assert (spec.kind, spec.provider, spec.model_id) == ("api", "echo-test", "m1")
    assert spec.traits == {
        "box_convention": "norm1000",
        "prefill": "native",
        "modalities": "text,image",
    }
    assert "echo-test:<model-id>" in known_names() and built == []
    monkeypatch.delenv("ECHO_TEST_KEY", raising=False)
    assert registry.availability("echo-test:m1") == "echo-test:m1: ECHO_TEST_KEY is not set"
    assert registry.availability("echo-test:m1", BackendOptions(keyless=True)) is None
    monkeypatch.setenv("ECHO_TEST_KEY", "x")
    assert registry.availability("echo-test:m1") is None
    monkeypatch.setattr(Echo, "needs", ("no_such_module_for_vlmbench",))
    why = registry.availability("echo-test:m1")
    assert why == "echo-test:m1: the no_such_module_for_vlmbench package is not installed: " + (
        'pip install -e ".[api]"'
    )
    assert create_backend("echo-test:m1").name == "echo-test:m1"
    assert built == [("echo-test:m1", "m1")]
    with pytest.raises(TypeError, match="kind 'gpu' is not one of"):
        register_provider(type("Bad", (Backend,), {"provider": "bad-test", "kind": "gpu"}))
    with pytest.raises(TypeError, match=r"provider 'openai' is .*OpenAIChatBackend's already"):
        register_provider(type("Mine", (Backend,), {"provider": "openai"}))  # no hijack
    assert registry.provider_class("openai").__name__ == "OpenAIChatBackend"
    assert "echo-test:<model-id>" in known_names()


@pytest.mark.parametrize(
    ("provider", "kind", "extra", "prefill"),
    [
        ("openai", "api", "api", "assistant-turn fallback"),
        ("openai-compatible", "api", "api", "native"),
        ("anthropic", "api", "api", "native"),
        ("google", "api", "api", "model-turn fallback"),
        ("vllm", "local-gpu", "vllm", "native"),
        ("hf", "local-cpu", "hf", "native"),
        ("scripted", "reference", "", "request"),
        ("planted", "reference", "", "request"),
        ("python", "local-cpu", "", "request"),
    ],
)
def test_the_suites_providers_and_their_traits(provider, kind, extra, prefill):
    cls = registry.provider_class(provider)
    assert cls is not None and cls.provider == provider
    assert (cls.kind, cls.extra, cls.prefill) == (kind, extra, prefill)
    assert set(registry.provider_names()) >= {provider}


def test_the_provider_modules_import_without_their_extras(tmp_path):
    """The registry imports every provider module at import; none imports an SDK then, so a
    base install lists every provider and says which extra a model needs."""
    import subprocess
    import sys

    code = textwrap.dedent("""
        import sys
        for sdk in ("openai", "anthropic", "google", "google.genai", "httpx2", "tenacity",
                    "vllm", "torch", "transformers"):
            sys.modules[sdk] = None  # import fails, find_spec raises: as if not installed
        from support.backends import registry
        print(" ".join(registry.provider_names()))
        print(registry.availability("anthropic:claude-x"))
        print(registry.availability("hf:/models/m"))
    """)
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    lines = out.stdout.splitlines()
    assert out.returncode == 0, out.stderr
    assert lines[0].split() == [
        "anthropic", "google", "hf", "openai", "openai-compatible", "planted", "python",
        "scripted", "vllm",
    ]  # fmt: skip
    assert lines[1].endswith('the anthropic package is not installed: pip install -e ".[api]"')
    assert lines[2].endswith('the torch package is not installed: pip install -e ".[hf]"')


def test_the_worked_example_of_architecture_md_is_a_working_provider(monkeypatch):
    """ARCHITECTURE.md, Models: a vendor with an OpenAI-style API is one class (here under
    another prefix, so the suite's registry is left as it was)."""
    from support.backends import base
    from support.backends.openai_chat import OpenAIChatBackend

    monkeypatch.setattr(base, "_providers", dict(base._providers))

    @register_provider
    class TogetherBackend(OpenAIChatBackend):
        provider = "together-test"
        key_env = ("TOGETHER_TEST_API_KEY",)
        endpoint_variable = "TOGETHER_TEST_BASE_URL"
        vendor_url = "https://api.together.xyz/v1"

    pytest.importorskip("openai")
    monkeypatch.delenv("TOGETHER_TEST_API_KEY", raising=False)
    monkeypatch.delenv("TOGETHER_TEST_BASE_URL", raising=False)
    name = "together-test:meta/llama-vision"
    assert registry.availability(name) == f"{name}: TOGETHER_TEST_API_KEY is not set"
    monkeypatch.setenv("TOGETHER_TEST_API_KEY", "tg-key-0123456789")
    backend = create_backend(name)
    assert isinstance(backend, TogetherBackend) and model_kind(name) == "api"
    assert backend.identity == {
        "provider": "together-test",
        "model": "meta/llama-vision",
        "endpoint": "chat.completions",
    }  # the vendor's own endpoint: left out of the identity
    assert backend.endpoint_url == "https://api.together.xyz/v1"
    monkeypatch.setenv("TOGETHER_TEST_BASE_URL", "http://127.0.0.1:9/v1")
    assert create_backend(name).identity["base_url"] == "http://127.0.0.1:9/v1"
    assert model_spec(name).prefill == "assistant-turn fallback"
