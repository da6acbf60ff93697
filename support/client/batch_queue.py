"""`--batch`: the requests a run needs that the cache lacks go through the provider's batch API.

A `BatchQueue` sits in a model client (its `Queued` layer, support/client/queueing.py) in place
of the synchronous call. Cases run as always; a request the cache lacks waits in the queue's
gathering round. When every case that is evaluating is waiting on the queue (the engine can make
no other progress), the round is cut and submitted as one batch (several when it passes the
provider's limits, `BatchLimits`).
So a case of two stages (pgt) or a search of rounds (dynamic) advances one stage per batch: its
next request exists only once the batch holding the last one has ended.

Each batch submitted leaves a record in `<cache-dir>/batches/` (`BatchRecords`: provider, the
model's cache identity, batch id, the cache key of each request in order). Never paid twice: before
a batch is created its intent is written (`BatchIntent`: the keys in order and a random nonce, in
`<identity>/intents/`), and the nonce travels with the batch (OpenAI: `metadata`; Gemini: the
display name; Anthropic, whose batches carry no metadata: each item's custom_id); once created, the
intent becomes the record. A run killed in between leaves an intent and no record: every run first
lists the provider's batches (`list_batches`, newest first, those created since the oldest intent,
less `CLOCK_SKEW_S`, at most `MAX_LISTED`) and turns an intent whose nonce it finds into a record
(waited on and collected as any). An intent the list does not hold is dropped (its requests are
sent again) only when the list was read whole and the intent is `LIST_LAG_S` old (a batch created
moments ago may not be listed yet: a younger one is looked up again once it is that old); when the
list cannot be read, or stops at `MAX_LISTED`, the intent stays and its requests are not sent
(skipped, naming the intent's file). Anthropic's list shows no nonce until a batch has ended: a
running batch created after the intent, with the intent's item count and no record, is taken for
it, and its results are read only for custom_ids carrying the nonce. An intent whose process still
runs on this host (another xdist worker creating it now) is left to that process.

The modes:
- `wait` (default): poll every `poll_s` seconds until each batch has ended, then score.
- `submit`: submit what the cache and the pending batches lack, and end: its cases are skipped,
  naming the batch. Rerun (`--batch collect`, or the same command) once the batch has ended.
- `collect`: submit nothing; what ended is collected, the rest skipped.
Every mode first collects the batches of earlier runs that have ended, so a rerun finds their
answers in the cache, and waits for (wait) or skips on (submit, collect) those still running
rather than sending their requests again.

Collecting a batch stores each answer in the response cache (`Response.batch`: priced at the
batch price in usage.csv), through the `store` the queue is built with (the model's
`AnswerCache.put`), whether or not a case of this run asked for it. An item that failed, and an
item an expired or cancelled batch left unanswered, is an error outcome of this run, never cached:
the record is marked collected, so the next run sends it again.

Everything here runs on the engine's one event loop, except the record files (atomic writes).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.backends.base import BackendError
from support.backends.batch_protocol import (
    BatchApi,
    BatchLimits,
    BatchNotCreated,
    BatchState,
    ListedBatch,
)
from support.secrets import redact
from support.settings import ApiSettings
from support.types import Request, Response, canonical_json, sha256_hex

log = logging.getLogger(__name__)

MODES = ("wait", "submit", "collect")
POLL_S = ApiSettings.batch_poll_s  # seconds between status reads of a batch in progress
SETTLE_S = 0.25  # seconds the queue must stay blocked before a round is cut
SUBMITS_AT_ONCE = 2  # batches of one round uploaded at the same time
MAX_POLL_ERRORS = 5  # failed status reads in a row before the batch's waiters fail
CLOCK_SKEW_S = 600.0  # seconds the provider's clock may be behind ours (the list's lower bound)
LIST_LAG_S = 60.0  # seconds after its intent before a batch missing from the list is taken as
# never created (a list may not yet show a batch created moments ago)
MAX_LISTED = 5_000  # batches read from a provider's list at most: past it, intents stay unresolved
NONCE_HEX = 12  # hex digits of an intent's nonce (48 random bits)

# which case a request belongs to: set while a case evaluates (ModelClient.admitted); the tasks a
# case forks copy it, so a case is blocked when any of its requests waits in the queue
CASE = contextvars.ContextVar[object | None]("vlmbench_batch_case", default=None)


class BatchPending(Exception):
    """A request not answered in this run: submitted (or still running) in a batch, or not sent
    under `--batch collect`; its case is skipped with this reason, nothing is cached for it.
    `billed`: it was submitted in this run (a spending cap counts its estimate)."""

    def __init__(self, reason: str, billed: bool = False) -> None:
        super().__init__(reason)
        self.billed = billed


def request_bytes(request: Request) -> int:
    """The size of a request's JSON, estimated: images as base64, text, 1 KB of the rest."""
    images = sum((len(p.image) + 2) // 3 * 4 for p in request.images if p.image is not None)
    texts = sum(len((p.text or "").encode()) for p in request.parts if not p.is_image)
    return images + texts + len((request.system or "").encode()) + 1024


def chunks(
    items: Sequence[tuple[str, Request]], limits: BatchLimits
) -> Iterator[list[tuple[str, Request]]]:
    """`items` in order, cut into batches within `limits` (a request alone over the byte limit
    is a batch of its own: the provider then refuses it, and that batch's requests fail)."""
    batch: list[tuple[str, Request]] = []
    size = 0
    for key, request in items:
        n = request_bytes(request)
        if batch and (len(batch) >= limits.requests or size + n > limits.bytes):
            yield batch
            batch, size = [], 0
        batch.append((key, request))
        size += n
    if batch:
        yield batch


# ---- records ------------------------------------------------------------------------------------
@dataclass
class BatchRecord:
    """One submitted batch, as kept in `<cache-dir>/batches/` (plain JSON)."""

    provider: str
    model: str  # the --model name that submitted it
    identity: dict[str, Any]  # the model's cache identity: which answers these are
    batch_id: str
    keys: list[str]  # cache keys of the requests, in the batch's order
    submitted_at: float  # epoch seconds
    state: str = "submitted"  # "submitted" | "collected"
    ended: str | None = None  # how the batch ended (BatchState.ended), once collected
    answered: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # key -> the item's error
    unanswered: int = 0  # left by an expired or cancelled batch
    nonce: str | None = None  # its intent's nonce (None: a record written before intents)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class BatchIntent:
    """A batch about to be created, kept in `<cache-dir>/batches/<identity>/intents/` until it
    is a record (or found never created)."""

    provider: str
    model: str
    identity: dict[str, Any]
    nonce: str
    keys: list[str]  # cache keys of the requests, in the batch's order
    items: int  # items as the provider may count them (samples: Anthropic's items)
    written_at: float  # epoch seconds
    host: str  # the writing process: its host and pid (a live one owns its intent)
    pid: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def record(self, batch_id: str, submitted_at: float) -> BatchRecord:
        return BatchRecord(
            provider=self.provider,
            model=self.model,
            identity=self.identity,
            batch_id=batch_id,
            keys=list(self.keys),
            submitted_at=submitted_at,
            nonce=self.nonce,
        )

    def owned_elsewhere(self) -> bool:
        """Whether another process on this host that is still running wrote it."""
        if self.host != socket.gethostname() or self.pid == os.getpid():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except OSError:  # exists, another user's
            return True
        return True


def identity_digest(identity: Mapping[str, Any]) -> str:
    return sha256_hex(canonical_json(dict(identity)))[:16]


class BatchRecords:
    """The record files of one cache dir: `<dir>/<identity digest>/<batch id>.json`."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def _path(self, record: BatchRecord) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in record.batch_id)
        return self.directory / identity_digest(record.identity) / f"{safe}.json"

    def save(self, record: BatchRecord) -> None:
        from support.storage.files import atomic_write_text

        atomic_write_text(self._path(record), json.dumps(record.to_json(), indent=1) + "\n")

    def intent_path(self, intent: BatchIntent) -> Path:
        folder = self.directory / identity_digest(intent.identity) / "intents"
        return folder / f"{intent.nonce}.json"

    def save_intent(self, intent: BatchIntent) -> None:
        from support.storage.files import atomic_write_text

        atomic_write_text(self.intent_path(intent), json.dumps(intent.to_json(), indent=1) + "\n")

    def drop_intent(self, intent: BatchIntent) -> None:
        try:
            self.intent_path(intent).unlink(missing_ok=True)
        except OSError as exc:  # a read-only folder: the next run looks it up again
            log.warning("batch intent %s not removed (%s)", self.intent_path(intent), exc)

    def intents(self, identity: Mapping[str, Any]) -> list[BatchIntent]:
        """The intents of `identity` that never became records, oldest first (an unreadable
        one is warned about and left alone)."""
        folder = self.directory / identity_digest(identity) / "intents"
        found = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                intent = BatchIntent(**json.loads(path.read_text()))
            except (OSError, ValueError, TypeError) as exc:
                log.warning("batch intent %s unreadable (%s): left alone", path, exc)
                continue
            if intent.identity == json.loads(canonical_json(dict(identity))):
                found.append(intent)
        return sorted(found, key=lambda i: i.written_at)

    def recorded(self, identity: Mapping[str, Any]) -> tuple[set[str], set[str]]:
        """The batch ids and nonces of every record of `identity`, collected or not."""
        folder = self.directory / identity_digest(identity)
        ids, nonces = set(), set()
        for path in folder.glob("*.json") if folder.is_dir() else []:
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                ids.add(str(data.get("batch_id")))
                if data.get("nonce"):
                    nonces.add(str(data["nonce"]))
        return ids, nonces

    def pending(self, identity: Mapping[str, Any]) -> list[BatchRecord]:
        """The records of `identity` not yet collected, oldest first. An unreadable record is
        warned about and left alone (its batch's requests are then sent again)."""
        folder = self.directory / identity_digest(identity)
        found = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                record = BatchRecord(**json.loads(path.read_text()))
            except (OSError, ValueError, TypeError) as exc:
                log.warning("batch record %s unreadable (%s): left alone", path, exc)
                continue
            if record.state == "submitted" and record.identity == json.loads(
                canonical_json(dict(identity))
            ):
                found.append(record)
        return sorted(found, key=lambda r: r.submitted_at)


# ---- the queue ----------------------------------------------------------------------------------
@dataclass
class _Batch:
    """A batch this process waits on."""

    record: BatchRecord
    waiters: dict[str, asyncio.Future[Response]] = field(default_factory=dict)
    state: BatchState | None = None
    poll_errors: int = 0


class BatchQueue:
    """A model client's batch path: `answer(key, request)` for each request the cache lacks.
    `store(key, response)` stores each answer collected (the client's cache layer stores none on
    this path)."""

    def __init__(
        self,
        backend: BatchApi,
        records: BatchRecords,
        mode: str = "wait",
        poll_s: float = POLL_S,
        settle_s: float = SETTLE_S,
        store: Callable[[str, Response], None] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"--batch {mode!r}: one of {', '.join(MODES)}")
        self.backend = backend
        # how a collected answer is stored: the model's AnswerCache.put (support/client/caching.py:
        # a failed write costs the cache entry only, warned once); None stores nothing
        self.store = store
        self.records = records
        self.mode = mode
        self.poll_s = poll_s
        self.settle_s = settle_s
        self._prepared: asyncio.Task[None] | None = None
        self._gathering: dict[str, tuple[Request, asyncio.Future[Response]]] = {}
        self._batches: dict[str, _Batch] = {}  # batch id -> a batch waited on (wait mode)
        self._in_batch: dict[str, str] = {}  # key -> id of the pending batch holding it
        self._answered: dict[str, Response] = {}  # key -> answer, of batches collected this run
        self._failed_now: dict[str, str] = {}  # key -> why, for batches collected in this run
        self._unresolved: dict[str, str] = {}  # key -> why: in an intent not resolved (not sent)
        self._active: set[object] = set()  # cases evaluating (ModelClient.admitted)
        self._blocked: dict[object, int] = {}  # case -> its requests waiting here
        self._holds = 0  # cases still being started (fixtures: the prefetch)
        self._timer: asyncio.TimerHandle | None = None
        self._poller: asyncio.Task[None] | None = None
        self.submitted: list[dict[str, Any]] = []  # batches this run submitted
        self.collected: list[dict[str, Any]] = []  # batches this run collected
        self.waited_s = 0.0  # seconds from the first submission or wait to the last answer
        self._wait_started: float | None = None

    # ---- which cases are blocked ----------------------------------------------------------
    @contextlib.contextmanager
    def evaluating(self) -> Iterator[None]:
        """Mark the current task's case as evaluating (ModelClient.admitted, batch mode)."""
        token = object()
        reset = CASE.set(token)
        self._active.add(token)
        try:
            yield
        finally:
            self._active.discard(token)
            CASE.reset(reset)
            self._changed()

    def hold(self, delta: int) -> None:
        """+1 while cases are still being started (none is cut meanwhile), -1 when they are."""
        self._holds += delta
        self._changed()

    def _changed(self) -> None:
        """Something moved: (re)arm the timer that cuts a round once nothing moves."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._gathering and self._holds <= 0:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.settle_s, self._maybe_cut)

    def _maybe_cut(self) -> None:
        self._timer = None
        if not self._gathering or self._holds > 0:
            return
        if any(self._blocked.get(case, 0) == 0 for case in self._active):
            return  # a case is still building its requests: it will call again
        round_, self._gathering = self._gathering, {}
        asyncio.get_running_loop().create_task(self._submit(round_))

    # ---- answers --------------------------------------------------------------------------
    async def _prepare(self) -> None:
        """Once, before the first answer: collect the ended batches of earlier runs, and note
        the keys of those still running."""
        await self.backend.start()
        adopted = await self._resolve_intents()
        pending = {r.batch_id: r for r in self.records.pending(self.backend.identity)}
        for record in adopted:  # also when its record could not be written
            pending.setdefault(record.batch_id, record)
        for record in sorted(pending.values(), key=lambda r: r.submitted_at):
            try:
                state = await self.backend.batch_state(record.batch_id)
            except BackendError as exc:
                log.warning("%s: batch %s unreadable (%s)", self.backend.name, record.batch_id, exc)
                continue
            if state.ended is not None:
                await self._collect(_Batch(record, state=state))
                continue
            self._batches[record.batch_id] = _Batch(record, state=state)
            for key in record.keys:
                self._in_batch[key] = record.batch_id

    async def _resolve_intents(self) -> list[BatchRecord]:
        """The intents of earlier runs that never became records: each batch found in the
        provider's list (by its nonce) becomes a record; an intent whose batch is surely absent
        is dropped; the rest keep their requests from being sent. The records made, in order."""
        identity = self.backend.identity
        intents = [i for i in self.records.intents(identity) if not i.owned_elsewhere()]
        ids, nonces = self.records.recorded(identity)
        for intent in [i for i in intents if i.nonce in nonces]:  # killed after the record
            self.records.drop_intent(intent)
            intents.remove(intent)
        adopted: list[BatchRecord] = []
        for _ in range(2):  # a second look once the youngest intent is LIST_LAG_S old
            if not intents:
                break
            since = min(i.written_at for i in intents) - CLOCK_SKEW_S
            try:
                listed, whole = await self._listed(since)
            except Exception as exc:
                why = redact(f"the batch list is unreadable: {exc}")
                self._leave_unresolved(intents, why)
                return adopted
            young, now = [], time.time()
            for intent in intents:
                found = self._match(intent, listed, ids)
                if found is not None:
                    record = intent.record(found.batch_id, found.created_at)
                    ids.add(found.batch_id)
                    adopted.append(record)
                    log.warning(
                        "%s: batch %s of an interrupted run found (intent %s): collected, not "
                        "sent again",
                        self.backend.name,
                        found.batch_id,
                        intent.nonce,
                    )
                    try:
                        self.records.save(record)
                        self.records.drop_intent(intent)
                    except OSError as exc:
                        log.warning("batch %s: record not written (%s)", found.batch_id, exc)
                elif not whole:
                    self._leave_unresolved([intent], f"the list stopped at {MAX_LISTED} batches")
                elif now - intent.written_at >= LIST_LAG_S:
                    log.info(
                        "%s: batch intent %s was never created: its requests are sent",
                        self.backend.name,
                        intent.nonce,
                    )
                    self.records.drop_intent(intent)
                else:
                    young.append(intent)
            intents = young
            if intents:  # a batch created moments ago may not be listed yet
                wait = max(LIST_LAG_S - (time.time() - i.written_at) for i in intents)
                await asyncio.sleep(max(wait, 0.0))
        return adopted

    async def _listed(self, since: float) -> tuple[list[ListedBatch], bool]:
        """The provider's batches created since `since`, and whether the list was read whole."""
        listed: list[ListedBatch] = []
        async for batch in self.backend.list_batches(since):
            if len(listed) >= MAX_LISTED:
                return listed, False
            listed.append(batch)
        return listed, True

    @staticmethod
    def _match(intent: BatchIntent, listed: list[ListedBatch], ids: set[str]) -> ListedBatch | None:
        """The listed batch carrying the intent's nonce; else (Anthropic, running: no nonce to
        read) the unrecorded one created after the intent, closest to it, of its item count."""
        for batch in listed:
            if batch.nonce == intent.nonce:
                return batch
        candidates = [
            b
            for b in listed
            if not b.readable
            and b.batch_id not in ids
            and b.items in (len(intent.keys), intent.items)
            and b.created_at >= intent.written_at - CLOCK_SKEW_S
        ]
        return min(candidates, key=lambda b: abs(b.created_at - intent.written_at), default=None)

    def _leave_unresolved(self, intents: list[BatchIntent], why: str) -> None:
        for intent in intents:
            path = self.records.intent_path(intent)
            reason = (
                f"batch intent {path} unresolved ({why}): not sent, so as not to pay twice; "
                "rerun, or delete that file to send its requests again"
            )
            log.warning("%s: %s", self.backend.name, reason)
            for key in intent.keys:
                self._unresolved.setdefault(key, reason)

    async def answer(self, key: str, request: Request) -> Response:
        """The answer to a request the cache lacked: from a batch collected now, a pending one,
        or the next round's; BackendError for an item that failed; BatchPending when it is not
        answered in this run."""
        if self._prepared is None:
            self._prepared = asyncio.ensure_future(self._prepare())
        case = CASE.get()
        if case is not None:
            self._blocked[case] = self._blocked.get(case, 0) + 1
        try:
            await asyncio.shield(self._prepared)
            return await self._answer(key, request)
        finally:
            if case is not None:
                self._blocked[case] -= 1
            self._changed()

    async def _answer(self, key: str, request: Request) -> Response:
        if key in self._answered:  # collected in this run (before the client asked)
            return self._answered[key]
        if key in self._failed_now:
            raise BackendError(self._failed_now[key])
        batch_id = self._in_batch.get(key)
        if batch_id is not None:
            batch = self._batches[batch_id]
            if self.mode != "wait":
                raise BatchPending(self._pending_reason(batch))
            fut = batch.waiters.get(key)
            if fut is None:
                fut = batch.waiters[key] = asyncio.get_running_loop().create_future()
            self._ensure_poller()
            return await asyncio.shield(fut)
        if key in self._unresolved:
            raise BatchPending(self._unresolved[key])
        if self.mode == "collect":
            raise BatchPending(
                f"not sent: --batch collect submits nothing ({self.backend.name}); "
                "--batch submit or --batch wait sends it"
            )
        found = self._gathering.get(key)
        if found is None:
            fut = asyncio.get_running_loop().create_future()
            self._gathering[key] = (request, fut)
        else:
            fut = found[1]
        self._changed()
        return await asyncio.shield(fut)

    def _pending_reason(self, batch: _Batch) -> str:
        state = batch.state
        total = (state.total if state else 0) or len(batch.record.keys)
        progress = f"{state.status}, {state.done}/{total} done" if state else "submitted"
        return (
            f"in {batch.record.provider} batch {batch.record.batch_id} ({progress}): "
            "rerun with --batch collect (or this command) once it has ended"
        )

    # ---- submitting -----------------------------------------------------------------------
    async def _submit(self, round_: dict[str, tuple[Request, asyncio.Future[Response]]]) -> None:
        """A round as one batch, or several past the provider's limits, SUBMITS_AT_ONCE at a time
        (each one's input file is built in memory: up to its byte limit)."""
        items = [(key, request) for key, (request, _) in round_.items()]
        places = asyncio.Semaphore(SUBMITS_AT_ONCE)

        async def submit(chunk: list[tuple[str, Request]]) -> None:
            async with places:
                await self._submit_one(chunk, round_)

        await asyncio.gather(*(submit(c) for c in chunks(items, self.backend.batch_limits)))

    async def _submit_one(
        self,
        chunk: list[tuple[str, Request]],
        round_: dict[str, tuple[Request, asyncio.Future[Response]]],
    ) -> None:
        futures = {key: round_[key][1] for key, _ in chunk}
        intent = BatchIntent(
            provider=self.backend.provider,
            model=self.backend.name,
            identity=json.loads(canonical_json(dict(self.backend.identity))),
            nonce=secrets.token_hex(NONCE_HEX // 2),
            keys=[key for key, _ in chunk],
            items=sum(request.n for _, request in chunk),
            written_at=time.time(),
            host=socket.gethostname(),
            pid=os.getpid(),
        )
        try:  # first: a run killed once the batch exists finds it by this
            self.records.save_intent(intent)
        except OSError as exc:
            log.warning("batch intent %s not written (%s)", intent.nonce, exc)
        try:
            batch_id = await self.backend.submit_batch(chunk, intent.nonce)
        except Exception as exc:  # the batch as a whole refused: its requests fail
            if isinstance(exc, BatchNotCreated):  # else a batch may exist: the intent stays
                self.records.drop_intent(intent)
            message = redact(f"{self.backend.name}: batch not submitted: {exc}")
            for fut in futures.values():
                if not fut.done():
                    fut.set_exception(BackendError(message))
            return
        record = intent.record(batch_id, time.time())
        try:
            self.records.save(record)
            self.records.drop_intent(intent)  # after the record: a kill between leaves both
        except OSError as exc:  # the batch runs anyway; a rerun finds it by its intent
            log.warning("batch %s: record not written (%s)", batch_id, exc)
        self.submitted.append({"batch_id": batch_id, "requests": len(chunk)})
        log.info("%s: batch %s: %d requests", self.backend.name, batch_id, len(chunk))
        batch = _Batch(record, waiters=futures)
        if self.mode != "wait":
            reason = BatchPending(self._pending_reason(batch), billed=True)
            for fut in futures.values():
                if not fut.done():
                    fut.set_exception(reason)
            return
        self._batches[batch_id] = batch
        for key in record.keys:
            self._in_batch[key] = batch_id
        self._ensure_poller()

    # ---- waiting --------------------------------------------------------------------------
    def _ensure_poller(self) -> None:
        if self._wait_started is None:
            self._wait_started = time.monotonic()
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        """Read each waited batch's status every poll_s seconds; collect those that ended."""
        while any(b.waiters for b in self._batches.values()):
            for batch in [b for b in self._batches.values() if b.waiters]:
                try:
                    batch.state = await self.backend.batch_state(batch.record.batch_id)
                    batch.poll_errors = 0
                except Exception as exc:
                    batch.poll_errors += 1
                    if batch.poll_errors >= MAX_POLL_ERRORS:
                        self._fail(batch, redact(f"status of batch unreadable: {exc}"))
                    continue
                if batch.state.ended is not None:
                    await self._collect(batch)
            if any(b.waiters for b in self._batches.values()):
                await asyncio.sleep(self.poll_s)
        if self._wait_started is not None:
            self.waited_s = time.monotonic() - self._wait_started

    def _fail(self, batch: _Batch, message: str) -> None:
        for fut in batch.waiters.values():
            if not fut.done():
                fut.set_exception(BackendError(f"{self.backend.name}: {message}"))
        batch.waiters = {}
        self._batches.pop(batch.record.batch_id, None)

    async def _collect(self, batch: _Batch) -> None:
        """A batch that ended: answers into the cache and to their waiters, failures to theirs;
        its record marked collected (what it did not answer is sent again by the next run)."""
        record, state = batch.record, batch.state
        assert state is not None
        try:
            results = await self.backend.batch_results(record.batch_id, record.keys, record.nonce)
        except Exception as exc:
            batch.poll_errors += 1
            if batch.poll_errors >= MAX_POLL_ERRORS:
                self._fail(batch, redact(f"results of batch {record.batch_id} unreadable: {exc}"))
            return
        name = self.backend.name
        for key in record.keys:
            found = results.get(key)
            if isinstance(found, Response):
                record.answered += 1
                self._answered[key] = found  # kept for this run whatever the cache does
                if self.store is not None:
                    self.store(key, found)
                outcome: Response | BaseException = found
            else:
                if found is None:
                    record.unanswered += 1
                    message = f"batch {record.batch_id} {state.ended} before answering it"
                else:
                    record.failed[key] = found
                    message = f"failed in batch {record.batch_id}: {found}"
                message = redact(f"{name}: {message}; the next run sends it again")
                self._failed_now[key] = message
                outcome = BackendError(message)
            fut = batch.waiters.pop(key, None)
            if fut is not None and not fut.done():
                if isinstance(outcome, Response):
                    fut.set_result(outcome)
                else:
                    fut.set_exception(outcome)
            self._in_batch.pop(key, None)
        record.state, record.ended = "collected", state.ended
        try:
            self.records.save(record)
        except OSError as exc:
            log.warning("batch %s: record not updated (%s)", record.batch_id, exc)
        self._batches.pop(record.batch_id, None)
        self.collected.append(
            {
                "batch_id": record.batch_id,
                "ended": state.ended,
                "requests": len(record.keys),
                "answered": record.answered,
                "failed": len(record.failed),
                "unanswered": record.unanswered,
            }
        )

    # ---- what the run sees ----------------------------------------------------------------
    def progress(self) -> str | None:
        """One line on the batches waited on (None when there are none)."""
        waited = [b for b in self._batches.values() if b.waiters]
        if not waited:
            return None
        done = sum(b.state.done for b in waited if b.state)
        total = sum((b.state.total if b.state else 0) or len(b.record.keys) for b in waited)
        since = time.monotonic() - (self._wait_started or time.monotonic())
        ids = ", ".join(b.record.batch_id for b in waited[:3]) + (" ..." if len(waited) > 3 else "")
        return (
            f"{self.backend.name}: waiting on {len(waited)} batch(es) ({ids}): "
            f"{done}/{total} requests done, {since:.0f} s"
        )

    def stats(self) -> dict[str, Any]:
        """Plain JSON for the engine statistics and the terminal."""
        return {
            "mode": self.mode,
            "submitted": list(self.submitted),
            "collected": list(self.collected),
            "waited_s": round(self.waited_s, 3),
        }
