"""A vLLM OpenAI-compatible server on 127.0.0.1, started and stopped (the lane and benchmarks).

`python -m vllm.entrypoints.openai.api_server` (`vllm serve` looks up the distribution `vllm`,
which vLLM's CPU build is not) in its own process group, its output in a log file; `serve()`
yields the base URL (`http://127.0.0.1:PORT/v1`) once `/health` answers and stops the group on
exit. On vLLM's CPU platform the server gets `--no-enable-chunked-prefill`, as the `vllm:`
backend's engine does (support.backends.vllm_local.CPU_ENGINE_ARGS says why).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path


class ServerError(RuntimeError):
    """The server exited or did not answer in time; the message ends with its log's tail."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(root: str) -> bool:
    """Whether `root`/health answers 200 (2 s at most)."""
    try:
        with urllib.request.urlopen(f"{root}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def server_argv(
    model: str | Path, name: str, port: int, max_images: int, extra: Sequence[str] = ()
) -> list[str]:
    """The command line of a server for `model` served as `name`."""
    from support.backends.vllm_local import on_cpu

    argv = [
        *(sys.executable, "-m", "vllm.entrypoints.openai.api_server", f"--model={model}"),
        *(f"--served-model-name={name}", "--host=127.0.0.1", f"--port={port}", "--seed=0"),
        f"--limit-mm-per-prompt={json.dumps({'image': max_images})}",
    ]
    if on_cpu():
        argv.append("--no-enable-chunked-prefill")
    return [*argv, *extra]


@contextlib.contextmanager
def serve(
    model: str | Path,
    log: Path,
    *,
    name: str = "tiny",
    max_images: int = 8,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    start_s: float = 600.0,  # seconds the server may take to answer /health
) -> Iterator[str]:
    """Run a server while the block runs; yields its base URL (…/v1)."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            server_argv(model, name, port, max_images, extra),
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,  # its engine processes stop with it
        )
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_s
        while not healthy(root):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-4000:]
                raise ServerError(f"the vLLM server did not start (exit {proc.poll()}):\n{tail}")
            time.sleep(1)
        yield f"{root}/v1"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
