"""An outside framework's cost: replay recorded request bodies through inspect_ai's eval loop.

    VLMBENCH_API_KEY=... python benchmarks/inspect_client.py URL BODIES_DIR [--concurrency 32]

The same requests as `bare_client.py` (`BODIES_DIR/*.json`, as `python -m support.doubles.loopback
--record` writes them, each the JSON body of one POST /v1/chat/completions), sent by inspect_ai,
the UK AISI evaluation framework, so vlmbench's speed can be set beside an established harness's.
inspect_ai is not a dependency of vlmbench: run this with an interpreter that has it
(`pip install inspect_ai openai`); the script imports nothing from this project.

Every body, sorted by file name, is read, parsed and turned into one inspect `Sample` whose input
is its messages as inspect ChatMessages (system text; user text and image parts in order, the
images as the body's data URLs; a trailing assistant message kept as a prefill), all before
`eval()` starts. One `Task` holds them, with the `generate()` solver and a scorer that only checks
that a completion came back. The generation parameters (temperature, max_tokens, n, seed; other
top-level fields go as `extra_body`) are the same in every body of a run and are taken from the
first; bodies that disagree are refused. The model is inspect's generic OpenAI-compatible provider,
`openai-api/bench/<model of the body>`, pointed at `URL/v1` with the key from `--key-env`; it
sends `<model of the body>` as the request's model. `eval()` runs with `max_connections` (and so
`max_samples`) = `--concurrency`, a static limit (an explicit `max_connections` turns inspect's
adaptive concurrency off), inspect's default retries, `fail_on_error=False` (an errored sample is
counted and its first error written to stderr, not fatal), no sandbox, no display, and inspect's
other defaults (sample logging and realtime buffering on); its log, and inspect's data directory
(realtime sample buffers, traces), go to a temporary directory removed at exit.

What inspect adds per request, unlike the bare client's byte-for-byte POSTs: each request is
re-serialized by the openai SDK from inspect's messages (the same messages and fields, except that
every image part gains `"detail": "auto"`; the images' base64 is passed through, not re-encoded),
and each sample runs its own task state, transcript events and log writing (the samples, images
included, go to the realtime buffer and the zstd-compressed log, which `eval()` reads back at the
end). That per-sample bookkeeping, not the HTTP, is most of the span.

Prints one JSON line: library ("inspect_ai <version>"), n (samples), ok (samples with a non-empty
completion), load_s and load_cpu_s (reading the bodies and building the samples: wall and CPU
seconds) and span_s (the wall seconds of the `eval()` call, inspect's setup and log writing
included), all on this process's clocks.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inspect_ai import Task
    from inspect_ai.dataset import Sample
    from inspect_ai.log import EvalLog
    from inspect_ai.model import ChatMessage, Content

SERVICE = "bench"  # the service prefix openai-api needs: model strings are openai-api/bench/<model>
CONFIG_FIELDS = {"temperature": "temperature", "max_tokens": "max_tokens", "n": "num_choices"}
CONFIG_FIELDS |= {"seed": "seed"}  # body field -> GenerateConfig field; the rest is extra_body


def load_bodies(folder: Path) -> list[dict[str, Any]]:
    """Every `*.json` request body in `folder`, parsed, sorted by file name."""
    return [json.loads(p.read_bytes()) for p in sorted(folder.glob("*.json"))]


def to_content(content: str | list[dict[str, Any]]) -> str | list[Content]:
    """A chat message's content as inspect content: text stays text, image_url parts images."""
    from inspect_ai.model import ContentImage, ContentText

    if isinstance(content, str):
        return content
    parts: list[Content] = []
    for part in content:
        if part["type"] == "text":
            parts.append(ContentText(text=part["text"]))
        elif part["type"] == "image_url":
            parts.append(ContentImage(image=part["image_url"]["url"]))
        else:
            raise ValueError(f"unsupported content part type {part['type']!r}")
    return parts


def to_messages(body: dict[str, Any]) -> list[ChatMessage]:
    """The body's messages as inspect ChatMessages, in order."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser}
    kinds |= {"assistant": ChatMessageAssistant}
    messages: list[ChatMessage] = []
    for message in body["messages"]:
        kind = kinds.get(message["role"])
        if kind is None:
            raise ValueError(f"unsupported message role {message['role']!r}")
        messages.append(kind(content=to_content(message["content"])))
    return messages


def generation_params(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    """GenerateConfig arguments from the first body; SystemExit if any body asks otherwise."""
    first = {k: v for k, v in bodies[0].items() if k != "messages"}
    if any({k: v for k, v in body.items() if k != "messages"} != first for body in bodies[1:]):
        raise SystemExit("the bodies' models or generation parameters differ: one config can't")
    params = {k: v for k, v in first.items() if k != "model"}
    config = {CONFIG_FIELDS[k]: v for k, v in params.items() if k in CONFIG_FIELDS}
    extra = {k: v for k, v in params.items() if k not in CONFIG_FIELDS}
    return config | ({"extra_body": extra} if extra else {})


def build_task(bodies: list[dict[str, Any]]) -> Task:
    """One Task: a sample per body, generate(), and a scorer that checks for a completion."""
    from inspect_ai import Task
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer
    from inspect_ai.solver import TaskState, generate

    @scorer(metrics=[accuracy()])
    def answered() -> Scorer:
        async def score(state: TaskState, target: Target) -> Score:
            return Score(value=CORRECT if state.output.completion else INCORRECT)

        return score

    samples = [to_sample(i, body) for i, body in enumerate(bodies)]
    return Task(dataset=samples, solver=generate(), scorer=answered(), name="replay")


def to_sample(index: int, body: dict[str, Any]) -> Sample:
    """The inspect Sample for one body (ids from 1, in file order)."""
    from inspect_ai.dataset import Sample

    return Sample(id=index + 1, input=to_messages(body))


def answered_count(log: EvalLog) -> int:
    """Samples with a non-empty completion: from the logged samples, else from the scorer."""
    if log.samples:
        return sum(1 for s in log.samples if s.error is None and s.output.completion)
    if log.results is None or not log.results.scores:  # e.g. the eval failed before scoring
        return 0
    score = log.results.scores[0]  # answered(): accuracy is the share with a completion
    return round(score.metrics["accuracy"].value * (score.scored_samples or 0))


def run(url: str, key: str, folder: Path, concurrency: int, scratch: Path) -> dict[str, Any]:
    """Load the bodies, run them through inspect_ai's eval(); the result line's fields."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    start, start_cpu = time.perf_counter(), time.process_time()
    bodies = load_bodies(folder)
    if not bodies:
        raise SystemExit(f"{folder}: no *.json request bodies")
    params = generation_params(bodies)
    task = build_task(bodies)
    load_s, load_cpu_s = time.perf_counter() - start, time.process_time() - start_cpu

    model = get_model(
        f"openai-api/{SERVICE}/{bodies[0]['model']}",
        base_url=f"{url.rstrip('/')}/v1",
        api_key=key,
        memoize=False,
    )
    start = time.perf_counter()
    logs = inspect_eval(
        task,
        model=model,
        max_connections=concurrency,
        log_dir=str(scratch / "logs"),
        display="none",
        fail_on_error=False,
        sandbox=None,
        **params,
    )
    span_s = time.perf_counter() - start
    log = logs[0]
    errors = [s.error.message for s in log.samples or [] if s.error is not None]
    if log.status != "success" and log.error is not None:
        errors.insert(0, f"eval {log.status}: {log.error.message}")
    if errors:  # to stderr, the key masked should a server echo it
        first = errors[0].replace(key, "***")[:500]
        print(f"inspect_ai: {len(errors)} error(s), the first: {first}", file=sys.stderr)
    ok = answered_count(log)
    library = f"inspect_ai {importlib.metadata.version('inspect_ai')}"
    loaded = {"load_s": load_s, "load_cpu_s": load_cpu_s}
    return {"library": library, "n": len(bodies), "ok": ok, **loaded, "span_s": span_s}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("url", help="server root, e.g. http://127.0.0.1:8000")
    ap.add_argument("bodies", type=Path, help="folder of recorded request bodies (*.json)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument(
        "--key-env",
        default="VLMBENCH_API_KEY",  # what vlmbench's openai-compatible: reads
        help="variable holding the API key",
    )
    args = ap.parse_args(argv)
    if importlib.util.find_spec("inspect_ai") is None:
        raise SystemExit("inspect_ai is not importable here: pip install inspect_ai openai")
    key = os.environ.get(args.key_env, "")
    if not key:
        raise SystemExit(f"${args.key_env} is not set (inspect_ai requires an API key)")
    with tempfile.TemporaryDirectory(prefix="inspect-client-") as tmp:
        # inspect keeps realtime sample buffers and traces under the platform data directory:
        # point it into the scratch folder so the run leaves nothing behind (set before import)
        os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "data")
        result = run(args.url, key, args.bodies, args.concurrency, Path(tmp))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
