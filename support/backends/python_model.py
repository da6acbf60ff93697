"""Your own model, a Python object: `--model python:<module>:<Factory>` (`--model-arg KEY=VALUE`).

The factory (a class, or a function returning the model) is imported when the name is checked
(configure: a malformed name, a module that does not import or a missing factory is a usage
error naming it) and called once per process, with the run's `--model-arg` pairs as keyword
arguments (strings): `PointQAModel(checkpoint="checkpoints/model.pth")`; a factory that raises
fails the model's cases with its error (BackendBuildError), never a silent skip. The module is
found on the import path, else in the working folder (`_from_working_folder`): the working
folder is on the path only while that module imports, so nothing is imported from it afterwards
(a planted file named like an optional package that is not installed, say). The object answers

    generate(request: support.types.Request) -> str | list[str]       (sync or async)
    generate_batch(requests: list[Request]) -> list[str | list[str]]  (optional, sync or async)

a list being one text per sample (`request.n`). Its traits are attributes of the factory (a
class's class attributes, or attributes set on a function), read without building it, so the
run knows them before any weight loads:

    modalities  what it reads besides text: ("text", "image") by default; ("text", "points")
                for a point-cloud model, ("text", "image", "points") for both
    max_images  images a request may hold (None: no limit); more: that request is refused
    max_batch   requests given to generate_batch at once (1, the default: no batching)
    concurrency requests in flight at once (default 1 for a sync generate, which runs in a
                worker thread, 8 for an async one)
    prefill     "request" (default: the object reads `request.prefill`) or "unsupported" (the
                prefill is sent as a continuation instruction, as for an API that refuses one)
    version     a text naming the model's revision (read from the built object too)

The response cache keys its answers by the factory's path, the sha256 of its module's file, the
arguments (an argument naming an existing file is keyed by the file's content too, so a new
checkpoint at the same path is a new model) and `version`. Each request stands alone: an
exception of the object is a BackendError for that request, and a batch that fails is answered
again request by request, so one bad request fails only itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

from support.backends.api_models import without_prefill
from support.backends.base import (
    DEFAULT_MODALITIES,
    REQUEST_PREFILL,
    UNSUPPORTED_PREFILL,
    Backend,
    BackendBuildError,
    BackendError,
    BackendOptions,
    register_provider,
)
from support.backends.scripted import load_script
from support.storage.file_hashes import HASH_MEMO, FileHashes
from support.types import MODALITIES, Request, Response, Usage

SYNTAX = "python:<module>:<Factory>, e.g. python:my_package.models:PointQAModel"
PREFILLS = (REQUEST_PREFILL, UNSUPPORTED_PREFILL)
MODEL_ARGS = "model_args"  # BackendOptions.extra key: the run's --model-arg pairs


@dataclasses.dataclass(frozen=True)
class Traits:
    """What a `python:` model declares (module docstring), defaults filled in."""

    modalities: frozenset[str] = DEFAULT_MODALITIES
    max_images: int | None = None
    max_batch: int = 1
    concurrency: int | None = None  # None: 1 for a sync generate, 8 for an async one
    prefill: str = REQUEST_PREFILL
    version: str | None = None


def _int_trait(where: str, attr: str, value: Any, allow_none: bool) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}.{attr} = {value!r}: expected a whole number >= 1")
    return value


def read_traits(where: str, source: object) -> Traits:
    """The traits `source` (a factory or a built model) declares; ValueError naming the bad
    attribute as `where.attr`."""
    found = Traits()
    raw = getattr(source, "modalities", None)
    if raw is not None:
        kinds = [raw] if isinstance(raw, str) else list(raw)
        unknown = [k for k in kinds if k not in MODALITIES]
        if unknown or not kinds:
            raise ValueError(
                f"{where}.modalities = {raw!r}: expected some of {', '.join(MODALITIES)}"
            )
        found = dataclasses.replace(found, modalities=frozenset({"text", *kinds}))
    prefill = getattr(source, "prefill", REQUEST_PREFILL)
    if prefill not in PREFILLS:
        raise ValueError(f"{where}.prefill = {prefill!r}: expected one of {PREFILLS}")
    version = getattr(source, "version", None)
    if version is not None and not isinstance(version, str):
        raise ValueError(f"{where}.version = {version!r}: expected a text")
    return dataclasses.replace(
        found,
        max_images=_int_trait(where, "max_images", getattr(source, "max_images", None), True),
        max_batch=_int_trait(where, "max_batch", getattr(source, "max_batch", 1), False) or 1,
        concurrency=_int_trait(where, "concurrency", getattr(source, "concurrency", None), True),
        prefill=prefill,
        version=version,
    )


@functools.cache
def factory_of(name: str, target: str) -> tuple[Callable[..., Any], str, Traits]:
    """The factory `target` ("module:Factory") names, its module file's sha256 and its traits
    (imported once per process). The working folder is searched last, as `python -m pytest`
    searches it first: a module beside the command imports under plain `pytest` too, and the
    folder leaves the import path once it has (`_from_working_folder`). ValueError naming what
    failed."""
    with _from_working_folder(target.partition(":")[0]):
        factory, revision = load_script(name, target, SYNTAX)
    return factory, revision, read_traits(f"{name}: {target}", factory)


def _importable(top: str) -> bool:
    """Whether the top-level module `top` imports from the import path as it is (found, or
    already imported), without running it."""
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):  # a module without a spec: left to the import's error
        return True


@contextlib.contextmanager
def _from_working_folder(module: str) -> Iterator[None]:
    """While the user's `module` ("pkg.sub") imports: the working folder last on sys.path, where
    the module is not importable otherwise but is a file or package there; else nothing changes.

    The folder is on the path for that import alone, so the module's own imports of modules
    beside it (at import time) find them, and it is taken off afterwards: the suite's later
    imports (an optional package that is not installed: bpe_openai, vllm) never find a file
    planted there. A sibling first imported when the model is called, not when its module
    imports, is therefore not found."""
    here = os.getcwd()
    top = module.partition(".")[0]
    on_path = here in sys.path or "" in sys.path  # `python -m pytest`: searched already
    if on_path or not top.isidentifier() or _importable(top):
        yield
        return
    if PathFinder.find_spec(top, [here]) is None:  # not there either: the import says so
        yield
        return
    # `here` is a str object of our own: removed by identity, so an equal entry the module itself
    # put on sys.path stays (its business), and ours goes wherever the module moved it
    sys.path.append(here)
    try:
        yield
    finally:
        for i in reversed(range(len(sys.path))):
            if sys.path[i] is here:
                del sys.path[i]
                break


def model_args(opts: BackendOptions) -> dict[str, str]:
    """The run's --model-arg pairs (BackendOptions.extra)."""
    return dict(dict(opts.extra).get(MODEL_ARGS) or ())


def arg_files(args: Mapping[str, str], hashes: FileHashes) -> dict[str, str]:
    """sha256 of each argument that names an existing file (a checkpoint), by argument."""
    out = {}
    for key, value in sorted(args.items()):
        path = Path(value).expanduser()
        try:
            if path.is_file():
                out[key] = hashes.sha256(path)[1]
        except (OSError, ValueError):  # a value too long or odd to be a path is just text
            continue
    return out


def args_identity(
    args: Mapping[str, str], opts: BackendOptions
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(shown, keyed, files): the arguments as messages show them (a secret one `[redacted]`), as
    the cache identity holds them (a secret one as its keyed hash, support.secrets.keyed_digest:
    two secrets are two models, the value never stored) and the sha256 of each naming a file
    (`arg_files`; a secret one's keyed too, and not memoised, as the memo names the path). An
    argument is secret by its name or by --model-arg-secret (support.secrets.secret_arg)."""
    from support.secrets import REDACTED, SECRET_ARGS, keyed_digest, secret_arg

    given = tuple(dict(opts.extra).get(SECRET_ARGS) or ())
    secret = {k for k in args if secret_arg(k, given)}
    memo = Path(opts.cache_dir) / HASH_MEMO if opts.cache_dir else None
    hashes = FileHashes(memo)
    files = arg_files({k: v for k, v in args.items() if k not in secret}, hashes)
    if memo is not None and hashes.hashed:
        hashes.save()
    hidden = arg_files({k: args[k] for k in secret}, FileHashes(None))
    files.update({k: keyed_digest(v, opts.cache_dir) for k, v in hidden.items()})
    shown = {k: REDACTED if k in secret else v for k, v in args.items()}
    keyed = {
        k: keyed_digest(v, opts.cache_dir) if k in secret else v for k, v in sorted(args.items())
    }
    return shown, keyed, dict(sorted(files.items()))


def _texts(name: str, answer: object, n: int) -> tuple[str, ...]:
    """The object's answer as n texts; BackendError saying what came back otherwise."""
    if isinstance(answer, str):
        return (answer,) * n
    if (
        isinstance(answer, list | tuple)
        and len(answer) == n
        and all(isinstance(t, str) for t in answer)
    ):
        return tuple(answer)
    shown = repr(answer)[:120]
    raise BackendError(f"{name}: generate returned {shown}; expected a str or a list of {n} str")


@register_provider
class PythonBackend(Backend):
    """`python:<module>:<Factory>`: a model object of the user's own code (module docstring)."""

    provider = "python"
    kind = "local-cpu"  # one process holds the object (xdist: one group); it may use a GPU

    @classmethod
    def check_model_id(cls, name: str, model_id: str) -> None:
        factory_of(name, model_id)

    @classmethod
    def modalities_of(cls, model_id: str) -> frozenset[str]:
        return factory_of(f"python:{model_id}", model_id)[2].modalities

    @classmethod
    def prefill_of(cls, model_id: str) -> str:
        return factory_of(f"python:{model_id}", model_id)[2].prefill

    @classmethod
    def unavailable(cls, name: str, model_id: str, opts: BackendOptions) -> str | None:
        return None  # the factory imported when the name was checked; building may still fail

    @classmethod
    def create(cls, name: str, model_id: str, opts: BackendOptions) -> Backend:
        factory, revision, traits = factory_of(name, model_id)
        args = model_args(opts)
        shown, keyed, files = args_identity(args, opts)  # secret ones hidden: support.secrets
        call = f"{model_id.rpartition(':')[2]}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"
        try:
            model = factory(**args)
        except Exception as exc:
            raise BackendBuildError(f"{name}: {call} raised {type(exc).__name__}: {exc}") from exc
        if not callable(getattr(model, "generate", None)):
            kind = type(model).__name__
            raise BackendBuildError(f"{name}: {call} gave a {kind} without a generate method")
        try:
            own = read_traits(f"{name}: {call}", model)
        except ValueError as exc:
            raise BackendBuildError(str(exc)) from exc
        identity = {
            "provider": "python",
            "model": model_id,
            "revision": revision,
            "args": keyed,
            "files": files,
            "version": own.version or traits.version,
        }
        return cls(name, model, traits, identity)

    def __init__(self, name: str, model: Any, traits: Traits, identity: Mapping[str, Any]) -> None:
        self.name = name
        self.model = model
        self.traits = traits
        self.identity = dict(identity)
        self.modalities = traits.modalities
        self.max_batch = traits.max_batch if traits.max_batch > 1 else None
        self._async = inspect.iscoroutinefunction(model.generate)
        batch = getattr(model, "generate_batch", None)
        self._batch = batch if callable(batch) else None
        self.default_concurrency = traits.concurrency or (8 if self._async else 1)

    def _prepared(self, request: Request) -> Request:
        """The request as the object gets it: refused past `max_images`; the prefill as an
        instruction where the model declares it takes none."""
        limit = self.traits.max_images
        if limit is not None and len(request.images) > limit:
            raise BackendError(
                f"{self.name}: {len(request.images)} images in one request; it takes {limit}"
            )
        if request.prefill and self.traits.prefill == UNSUPPORTED_PREFILL:
            return without_prefill(request)
        return request

    async def _call(self, fn: Callable[..., Any], arg: Any) -> Any:
        if inspect.iscoroutinefunction(fn):
            return await fn(arg)
        return await asyncio.to_thread(fn, arg)

    async def generate(self, request: Request) -> Response:
        sent = self._prepared(request)
        try:
            answer = await self._call(self.model.generate, sent)
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(f"{self.name}: generate raised {type(exc).__name__}: {exc}") from exc
        return Response(texts=_texts(self.name, answer, request.n), model=self.name, usage=Usage())

    async def generate_batch(self, requests: list[Request]) -> list[Response | BackendError]:
        """One call of the object's generate_batch when it has one; a batch that fails or
        answers otherwise than one answer a request is answered again one request at a time,
        each failure its request's own (a BackendError in its place)."""
        if self._batch is not None and len(requests) > 1:
            with contextlib.suppress(Exception):  # answered one by one below, errors apart
                answers = await self._call(self._batch, [self._prepared(r) for r in requests])
                if isinstance(answers, Sequence) and len(answers) == len(requests):
                    return [
                        Response(texts=_texts(self.name, a, r.n), model=self.name, usage=Usage())
                        for a, r in zip(answers, requests, strict=True)
                    ]
        return [await self._one(r) for r in requests]

    async def _one(self, request: Request) -> Response | BackendError:
        try:
            return await self.generate(request)
        except BackendError as exc:
            return exc
