"""A scripted model that any test or user can run: answers come from a function of the request.

From the command line: `--model scripted:<module>:<function>`, e.g.
`scripted:my_package.answers:reply`, where `reply(request: support.types.Request)` returns the
answer (a `str`, or one `str` per sample). The function is imported when the backend is built; a
malformed name, a module that does not import or a missing function raises ValueError naming it.
Such a model is a reference model: it sees the whole Request, hints (`target`, `answer_space`)
included, so they enter its cache key, as does a hash of the function's module file (editing the
script invalidates its cached answers).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from support.backends.base import Backend, BackendOptions, register_provider
from support.types import Request, Response

Script = Callable[[Request], str | list[str]]
SYNTAX = "scripted:<module>:<function>, e.g. scripted:my_package.answers:reply"


@register_provider
class ScriptedBackend(Backend):
    """Answers with `script(request)` (a string, or one string per sample); counts its calls.

    `max_batch` makes it a batching backend, so tests can count `generate_batch` calls.
    """

    provider = "scripted"

    @classmethod
    def create(cls, name: str, model_id: str, opts: BackendOptions) -> Backend:
        return make_scripted_backend(name, model_id)

    def __init__(
        self,
        script: Script,
        name: str = "scripted",
        max_batch: int | None = None,
        *,
        reads_hints: bool = False,
        revision: str | None = None,
    ) -> None:
        self.name = name
        self.script = script
        self.max_batch = max_batch
        self.reads_hints = reads_hints
        self.identity = {"provider": "scripted", "model": name}
        if revision is not None:
            self.identity["revision"] = revision
        self.calls = 0
        self.batch_calls = 0

    def _answer(self, request: Request) -> Response:
        out = self.script(request)
        texts = (out,) * request.n if isinstance(out, str) else tuple(out)
        return Response(texts=texts, model=self.name)

    async def generate(self, request: Request) -> Response:
        self.calls += 1
        return self._answer(request)

    async def generate_batch(self, requests: list[Request]) -> list[Response]:
        self.batch_calls += 1
        return [self._answer(r) for r in requests]


def load_script(name: str, target: str, syntax: str = SYNTAX) -> tuple[Script, str]:
    """The callable `target` ("module:function") names, and a revision: the sha256 of its
    module's file (the qualified name when the module has none). ValueError naming what failed
    (`syntax`: the form the name should have, for a malformed one)."""
    module_name, sep, attr = target.partition(":")
    if not (sep and module_name and attr):
        raise ValueError(f"{name}: expected {syntax}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ValueError(
            f"{name}: cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        fn = functools.reduce(getattr, attr.split("."), module)
    except AttributeError:
        raise ValueError(f"{name}: module {module_name!r} has no {attr!r}") from None
    if not callable(fn):
        raise ValueError(f"{name}: {module_name}:{attr} is a {type(fn).__name__}, not a function")
    return fn, _module_revision(module)


def _module_revision(module: ModuleType) -> str:
    """sha256 of the module's file; its name when it has none (namespace, built-in, zip)."""
    path = getattr(module, "__file__", None)
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else module.__name__
    except OSError:
        return module.__name__


def make_scripted_backend(name: str, target: str) -> ScriptedBackend:
    """Factory of `scripted:<module>:<function>` (target: what follows `scripted:`)."""
    fn, revision = load_script(name, target)
    return ScriptedBackend(fn, name=name, reads_hints=True, revision=revision)
