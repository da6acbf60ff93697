"""The loopback server's batch endpoints, in the three vendors' wire protocols.

    OpenAI     POST /v1/files (multipart, purpose "batch", a JSONL of requests, each line's
               `url` the batch's endpoint: /v1/chat/completions or /v1/responses)
               POST /v1/batches (`metadata` kept and returned), GET /v1/batches/<id>,
               POST /v1/batches/<id>/cancel, GET /v1/batches?limit=&after= (the list)
               GET /v1/files/<id>, GET /v1/files/<id>/content (output and error JSONL)
    Anthropic  POST /v1/messages/batches, GET /v1/messages/batches/<id>,
               GET /v1/messages/batches/<id>/results (JSONL), POST .../<id>/cancel,
               GET /v1/messages/batches?limit=&after_id=&before_id= (the list)
    Gemini     POST /v1beta/models/<model>:batchGenerateContent (inlined requests, displayName),
               GET /v1beta/batches/<id>, POST /v1beta/batches/<id>:cancel,
               GET /v1beta/batches?pageSize=&pageToken= (the list; on /v1/batches told from
               OpenAI's by its x-goog-api-key header)

Every list is newest first and paged as its vendor documents it (OpenAI:
platform.openai.com/docs/api-reference/batch/list, `limit` 1..100, default 20, `after` the last
id of the page before, `has_more`; Anthropic: docs.anthropic.com/en/api/listing-message-batches,
`limit` 1..1000, default 20, `after_id`/`before_id`, `has_more`, `first_id`, `last_id`; Gemini:
ai.google.dev/api/batch-mode#method:-batches.list, `pageSize`, `pageToken`, `nextPageToken`, the
operations in `operations`); `page_cap` makes pages smaller (a test of paging). `on_created`, when
set, is called with each batch created before its creation is answered (a test kills its client
there: the batch exists, the client never learns its id).

Each item is answered by the server's script, as a synchronous request with the same body would be
(`answer`); `item_fails(digest)` (the server's seeded faults) turns a share of items into item-level
errors, and an item its model's request rules refuse (support/doubles/loopback_validation.py: the
answer raises `Refused`) is an item-level error carrying the vendor's 400 body. How each batch
ends is its `BatchPlan`: the n-th batch created gets `plans[n]` (the last plan repeats): it stays
in progress for `polls` status reads, then ends completed, expired or cancelled (with the first
`done_before_end` items answered). A client's cancel ends the batch at the next read. State is in
memory, under one lock, and bounded: past `MAX_BATCHES` batches or `MAX_FILES` files the oldest is
forgotten.
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import json
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from support.doubles.loopback_validation import Refusal, Refused

MAX_BATCHES = 256  # batches kept; the oldest is dropped past it
MAX_FILES = 512  # uploaded and output files kept; the oldest is dropped past it
WINDOW_S = 24 * 3600  # the completion window every batch states (seconds)
LIST_DEFAULT = 20  # a list page's size when the client names none (OpenAI, Anthropic)
# the endpoints an OpenAI batch's lines may name (platform.openai.com/docs/api-reference/batch/
# create: "/v1/responses", "/v1/chat/completions", ...; every line's `url` is the batch's
# endpoint; read 2026-12-06)
RESPONSES_ENDPOINT = "/v1/responses"
OPENAI_ENDPOINTS = ("/v1/chat/completions", RESPONSES_ENDPOINT)
LIST_MAX = {"openai": 100, "anthropic": 1000, "gemini": 1000}  # the most a page holds
ENDINGS = ("completed", "expired", "cancelled")
GEMINI_BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch"

Answer = Callable[[str, str, dict], dict]  # (protocol, model, request body) -> success body


@dataclass(frozen=True)
class BatchPlan:
    """How a batch ends: after `polls` status reads in progress, `ends` ("completed", "expired",
    "cancelled"); an expired or cancelled batch has answered its first `done_before_end` items."""

    polls: int = 1
    ends: str = "completed"
    done_before_end: int = 0

    def __post_init__(self) -> None:
        if self.ends not in ENDINGS or self.polls < 0 or self.done_before_end < 0:
            raise ValueError(f"batch plan {self}: ends in {ENDINGS}, polls and done >= 0")


def plans_of(
    polls: Sequence[int], ends: Sequence[str], done_before_end: Sequence[int]
) -> list[BatchPlan]:
    """One plan a batch from per-field lists: the n-th plan takes each list's n-th value (its
    last repeats; an empty list leaves the field's default), as many plans as the longest list."""
    default = BatchPlan()

    def at(values: Sequence[Any], i: int, fallback: Any) -> Any:
        return values[min(i, len(values) - 1)] if values else fallback

    n = max(len(polls), len(ends), len(done_before_end), 1)
    return [
        BatchPlan(
            at(polls, i, default.polls),
            at(ends, i, default.ends),
            at(done_before_end, i, default.done_before_end),
        )
        for i in range(n)
    ]


@dataclass
class Item:
    """One request of a batch, and its outcome once the batch has ended."""

    key: str  # custom_id (OpenAI, Anthropic) or the position (Gemini)
    model: str  # the route's model, as the script sees it ("" where the route has none)
    body: dict
    meta: Any = None  # Gemini's per-request metadata, returned with its response
    status: str = "processing"  # processing | succeeded | errored | expired | canceled
    response: dict | None = None
    refusal: Refusal | None = None  # an errored item its model's request rules refuse


@dataclass
class Batch:
    protocol: str
    id: str
    plan: BatchPlan
    items: list[Item]
    created_at: float = field(default_factory=time.time)  # epoch seconds
    extra: dict = field(default_factory=dict)  # the protocol's echoed fields
    polls: int = 0
    cancel_requested_at: float | None = None
    ended: str | None = None  # "completed" | "expired" | "cancelled" once ended
    ended_at: float | None = None


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat()


def _digest(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class BatchStore:
    """The batches and files of one server (thread-safe)."""

    def __init__(
        self,
        answer: Answer,
        item_fails: Callable[[str], bool],
        plans: BatchPlan | Sequence[BatchPlan] | None = None,
    ) -> None:
        self.answer = answer
        self.item_fails = item_fails
        plans = plans if plans is not None else BatchPlan()
        self.plans = [plans] if isinstance(plans, BatchPlan) else list(plans) or [BatchPlan()]
        self.created = 0  # batches created so far (picks the plan)
        self.batches: OrderedDict[str, Batch] = OrderedDict()
        self.files: OrderedDict[str, tuple[dict, bytes]] = OrderedDict()  # id -> (meta, bytes)
        self.lock = threading.Lock()
        self.page_cap: int | None = None  # a list page's size at most (tests of paging)
        self.on_created: Callable[[Batch], None] | None = None  # before the create is answered
        self.lists = 0  # list pages served

    # ---- routing -------------------------------------------------------------------------
    @staticmethod
    def protocol_of(path: str, headers: Any = None) -> str | None:
        """The protocol of a batch route (its key check), or None for any other path. The lists
        of OpenAI and Gemini share /v1/batches: Gemini's sends x-goog-api-key."""
        if path.startswith("/v1/messages/batches"):
            return "anthropic"
        if path == "/v1beta/batches" or (
            path == "/v1/batches" and headers is not None and headers.get("x-goog-api-key")
        ):
            return "gemini"
        if ":batchGenerateContent" in path or re.search(r"/batches/[^/_]+(:cancel)?$", path):
            return "gemini"  # the SDK's /v1/batches/<id>: a Gemini id has no "batch_" prefix
        if path.startswith(("/v1/files", "/v1/batches")):
            return "openai"
        return None

    def handle(
        self, method: str, path: str, headers: Any, raw: bytes, base_url: str
    ) -> tuple[int, bytes, str]:
        """Answer one request on a batch route (`path` with its query): (status, body, type)."""
        parts = urlsplit(path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        try:
            lists = ("/v1/batches", "/v1beta/batches", "/v1/messages/batches")
            protocol = self.protocol_of(parts.path, headers)
            if method == "GET" and protocol and parts.path in lists:
                return _json(200, self._list(protocol, query, base_url))
            return self._dispatch(method, parts.path, headers, raw, base_url)
        except _NotFound as exc:
            return _json(404, {"error": {"message": str(exc)}})
        except (ValueError, KeyError, TypeError) as exc:  # a malformed request
            return _json(400, {"error": {"message": f"{type(exc).__name__}: {exc}"}})

    def _dispatch(
        self, method: str, path: str, headers: Any, raw: bytes, base_url: str
    ) -> tuple[int, bytes, str]:
        if m := re.search(r"/models/([^/:]+):batchGenerateContent$", path):
            return _json(200, self._gemini(self._create_gemini(m[1], json.loads(raw))))
        if m := re.search(r"/batches/([^/:_]+)(:cancel)?$", path):
            batch = self._poll(m[1], cancel=bool(m[2]))
            return _json(200, {} if m[2] else self._gemini(batch))
        if method == "POST" and path == "/v1/files":
            return _json(200, self._upload(headers.get("Content-Type", ""), raw))
        if m := re.fullmatch(r"/v1/files/([^/]+)(/content)?", path):
            meta, data = self._file(m[1])
            if m[2]:
                return 200, data, "application/octet-stream"
            return _json(200, meta)
        if method == "POST" and path == "/v1/batches":
            return _json(200, self._openai(self._create_openai(json.loads(raw))))
        if m := re.fullmatch(r"/v1/batches/([^/]+)(/cancel)?", path):
            return _json(200, self._openai(self._poll(m[1], cancel=bool(m[2]))))
        if method == "POST" and path == "/v1/messages/batches":
            return _json(200, self._anthropic(self._create_anthropic(json.loads(raw)), base_url))
        if m := re.fullmatch(r"/v1/messages/batches/([^/]+)(/cancel|/results)?", path):
            if m[2] == "/results":
                return 200, self._anthropic_results(m[1]), "application/binary"
            batch = self._poll(m[1], cancel=m[2] == "/cancel")
            return _json(200, self._anthropic(batch, base_url))
        raise _NotFound(f"no route {method} {path}")

    # ---- state ---------------------------------------------------------------------------
    def _add_file(self, meta: dict, data: bytes) -> None:
        with self.lock:
            self.files[meta["id"]] = (meta, data)
            while len(self.files) > MAX_FILES:
                self.files.popitem(last=False)

    def _file(self, file_id: str) -> tuple[dict, bytes]:
        with self.lock:
            if file_id not in self.files:
                raise _NotFound(f"no file {file_id}")
            return self.files[file_id]

    def _new_batch(self, protocol: str, prefix: str, items: list[Item], **extra: Any) -> Batch:
        if not items:
            raise ValueError("a batch needs at least one request")
        with self.lock:
            plan = self.plans[min(self.created, len(self.plans) - 1)]
            self.created += 1
            batch = Batch(protocol, f"{prefix}{uuid.uuid4().hex[:24]}", plan, items, extra=extra)
            self.batches[batch.id] = batch
            while len(self.batches) > MAX_BATCHES:
                self.batches.popitem(last=False)
        if self.on_created is not None:
            self.on_created(batch)
        return batch

    # ---- the lists -----------------------------------------------------------------------
    def _list(self, protocol: str, query: dict[str, str], base_url: str) -> dict:
        """One page of `protocol`'s batches, newest first, in that vendor's list format."""
        size_key = "pageSize" if protocol == "gemini" else "limit"
        size = int(query.get(size_key) or LIST_DEFAULT)
        if not 1 <= size <= LIST_MAX[protocol]:
            raise ValueError(f"{size_key} {size}: 1 to {LIST_MAX[protocol]}")
        size = min(size, self.page_cap or size)
        with self.lock:
            self.lists += 1
            newest = [b for b in reversed(self.batches.values()) if b.protocol == protocol]
        ids = [b.id for b in newest]

        def after(batch_id: str) -> int:
            if batch_id not in ids:
                raise _NotFound(f"no batch {batch_id}")
            return ids.index(batch_id) + 1

        if protocol == "gemini":
            start = int(query.get("pageToken") or 0)
            page = newest[start : start + size]
            body: dict[str, Any] = {"operations": [self._gemini(b) for b in page]}
            if start + size < len(newest):
                body["nextPageToken"] = str(start + size)
            return body
        if protocol == "openai":
            start = after(query["after"]) if query.get("after") else 0
            page = newest[start : start + size]
            return {
                "object": "list",
                "data": [self._openai(b) for b in page],
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
                "has_more": start + size < len(newest),
            }
        if query.get("before_id"):
            end = after(query["before_id"]) - 1
            start = max(end - size, 0)
            more = start > 0
        else:
            start = after(query["after_id"]) if query.get("after_id") else 0
            end = start + size
            more = end < len(newest)
        page = newest[start:end]
        return {
            "data": [self._anthropic(b, base_url) for b in page],
            "has_more": more,
            "first_id": page[0].id if page else None,
            "last_id": page[-1].id if page else None,
        }

    def _poll(self, batch_id: str, *, cancel: bool = False) -> Batch:
        """A status read (counts toward the plan's polls) or a cancel; ends the batch when due."""
        with self.lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                raise _NotFound(f"no batch {batch_id}")
            if cancel:
                if batch.ended is None and batch.cancel_requested_at is None:
                    batch.cancel_requested_at = time.time()
                return batch  # "cancelling": ends at the next read
            batch.polls += 1
            due = batch.polls > batch.plan.polls or batch.cancel_requested_at is not None
            if batch.ended is None and due:
                self._end(batch)
            return batch

    def _end(self, batch: Batch) -> None:
        """Answer the items the batch gets to, mark the rest (under the lock)."""
        ends = "cancelled" if batch.cancel_requested_at is not None else batch.plan.ends
        n_done = len(batch.items) if ends == "completed" else batch.plan.done_before_end
        if batch.cancel_requested_at is not None:
            n_done = min(n_done, batch.plan.done_before_end)
        for i, item in enumerate(batch.items):
            if i >= n_done:
                item.status = "expired" if ends == "expired" else "canceled"
            elif self.item_fails(_digest(item.body)):
                item.status = "errored"
            else:
                try:
                    protocol = batch.protocol
                    if batch.extra.get("endpoint") == RESPONSES_ENDPOINT:  # OpenAI's Responses
                        protocol = "responses"
                    item.response = self.answer(protocol, item.model, item.body)
                    item.status = "succeeded"
                except Refused as exc:  # the model's rules refuse it: the vendor's 400, per item
                    item.status, item.refusal = "errored", exc.refusal
                except Exception as exc:  # a bad item or a script bug: an item error
                    item.status, item.response = "errored", {"message": str(exc)}
        batch.ended, batch.ended_at = ends, time.time()
        if batch.protocol == "openai":
            self._openai_files(batch)

    def _counts(self, batch: Batch) -> dict[str, int]:
        counts = dict.fromkeys(("processing", "succeeded", "errored", "expired", "canceled"), 0)
        for item in batch.items:
            counts[item.status] += 1
        return counts

    # ---- OpenAI --------------------------------------------------------------------------
    def _upload(self, content_type: str, raw: bytes) -> dict:
        head = f"Content-Type: {content_type}\r\n\r\n".encode()
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
        if "file" not in fields:
            raise ValueError("multipart upload without a 'file' field")
        filename, data = fields["file"]
        purpose = fields.get("purpose", (None, b"batch"))[1].decode()
        meta = self._file_meta(filename or "upload.jsonl", purpose, data)
        self._add_file(meta, data)
        return meta

    @staticmethod
    def _file_meta(filename: str, purpose: str, data: bytes) -> dict:
        return {
            "id": f"file-{uuid.uuid4().hex[:24]}",
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }

    def _create_openai(self, body: dict) -> Batch:
        if body.get("endpoint") not in OPENAI_ENDPOINTS:
            raise ValueError(f"endpoint {body.get('endpoint')!r}: one of {OPENAI_ENDPOINTS}")
        _, data = self._file(body["input_file_id"])
        items = []
        for line in data.decode().splitlines():
            if line.strip():
                row = json.loads(line)
                if row.get("url") != body["endpoint"]:
                    raise ValueError(f"line {row.get('custom_id')!r}: url must be the endpoint")
                items.append(Item(row["custom_id"], "", row["body"]))
        extra = {k: body.get(k) for k in ("input_file_id", "endpoint", "completion_window")}
        return self._new_batch("openai", "batch_", items, metadata=body.get("metadata"), **extra)

    def _openai_files(self, batch: Batch) -> None:
        """Write the output and error files of an ended batch (under the lock)."""
        out, err = [], []
        for item in batch.items:
            row: dict[str, Any] = {"id": f"batch_req_{uuid.uuid4().hex[:24]}"}
            row["custom_id"] = item.key
            if item.status == "succeeded":
                row["response"] = {"status_code": 200, "request_id": row["id"]}
                row["response"]["body"] = item.response
                row["error"] = None
                out.append(row)
            elif item.status == "errored":
                body = {"error": {"message": "server error (injected)", "type": "server_error"}}
                code = 500
                if item.refusal is not None:  # the vendor's 400 and error body
                    code, body = item.refusal.status, item.refusal.body
                row["response"] = {"status_code": code, "request_id": row["id"], "body": body}
                row["error"] = None
                err.append(row)
            else:
                code = "batch_expired" if item.status == "expired" else "batch_cancelled"
                row["response"] = None
                row["error"] = {"code": code, "message": f"the batch was {batch.ended}"}
                err.append(row)
        for rows, key in ((out, "output_file_id"), (err, "error_file_id")):
            if rows:
                data = "".join(json.dumps(r) + "\n" for r in rows).encode()
                meta = self._file_meta(f"{batch.id}_{key}.jsonl", "batch_output", data)
                self.files[meta["id"]] = (meta, data)  # the caller holds the lock
                while len(self.files) > MAX_FILES:
                    self.files.popitem(last=False)
                batch.extra[key] = meta["id"]

    def _openai(self, batch: Batch) -> dict:
        with self.lock:
            c = self._counts(batch)
            if batch.ended is None:
                status = "cancelling" if batch.cancel_requested_at else "in_progress"
                if batch.polls == 0 and status == "in_progress":
                    status = "validating"
            else:
                status = batch.ended
            t_end = int(batch.ended_at) if batch.ended_at else None
            return {
                "id": batch.id,
                "object": "batch",
                "status": status,
                "created_at": int(batch.created_at),
                "expires_at": int(batch.created_at + WINDOW_S),
                "in_progress_at": int(batch.created_at),
                "completed_at": t_end if batch.ended == "completed" else None,
                "expired_at": t_end if batch.ended == "expired" else None,
                "cancelled_at": t_end if batch.ended == "cancelled" else None,
                "cancelling_at": int(batch.cancel_requested_at or 0) or None,
                "request_counts": {
                    "total": len(batch.items),
                    "completed": c["succeeded"],
                    "failed": c["errored"],
                },
                "output_file_id": None,
                "error_file_id": None,
                **batch.extra,
            }

    # ---- Anthropic -----------------------------------------------------------------------
    def _create_anthropic(self, body: dict) -> Batch:
        items = [
            Item(r["custom_id"], "", r["params"])  # the model as a synchronous request sees it
            for r in body["requests"]
        ]
        if len({i.key for i in items}) != len(items):
            raise ValueError("custom_id values must be unique within a batch")
        return self._new_batch("anthropic", "msgbatch_", items)

    def _anthropic(self, batch: Batch, base_url: str) -> dict:
        with self.lock:
            c = self._counts(batch)
            if batch.ended is not None:
                status = "ended"
            else:
                status = "canceling" if batch.cancel_requested_at else "in_progress"
            return {
                "id": batch.id,
                "type": "message_batch",
                "processing_status": status,
                "request_counts": {k: c[k] for k in ("processing", "succeeded", "errored")}
                | {"canceled": c["canceled"], "expired": c["expired"]},
                "created_at": _iso(batch.created_at),
                "expires_at": _iso(batch.created_at + WINDOW_S),
                "ended_at": _iso(batch.ended_at),
                "cancel_initiated_at": _iso(batch.cancel_requested_at),
                "archived_at": None,
                "results_url": (
                    f"{base_url}/v1/messages/batches/{batch.id}/results" if batch.ended else None
                ),
            }

    def _anthropic_results(self, batch_id: str) -> bytes:
        with self.lock:
            batch = self.batches.get(batch_id)
            if batch is None or batch.ended is None:
                raise _NotFound(f"no results for batch {batch_id} (not ended)")
            lines = []
            for item in batch.items:
                result: dict[str, Any] = {"type": item.status}
                if item.status == "succeeded":
                    result["message"] = item.response
                elif item.status == "errored":
                    error = {"type": "api_error", "message": "server error (injected)"}
                    result["error"] = {"type": "error", "error": error}
                    if item.refusal is not None:  # {"type": "error", "error": {...}} as sent
                        result["error"] = item.refusal.body
                lines.append(json.dumps({"custom_id": item.key, "result": result}) + "\n")
            return "".join(lines).encode()

    # ---- Gemini --------------------------------------------------------------------------
    def _create_gemini(self, model: str, body: dict) -> Batch:
        spec = body["batch"]
        requests = spec["inputConfig"]["requests"]["requests"]
        items = []
        for i, r in enumerate(requests):
            item_model = str(r["request"].get("model") or model).removeprefix("models/")
            items.append(Item(str(i), item_model, r["request"], meta=r.get("metadata")))
        name = spec.get("displayName") or ""
        return self._new_batch("gemini", "gb", items, model=f"models/{model}", displayName=name)

    def _gemini(self, batch: Batch) -> dict:
        states = {"completed": "SUCCEEDED", "expired": "EXPIRED", "cancelled": "CANCELLED"}
        with self.lock:
            state = states[batch.ended] if batch.ended else "PENDING"
            if batch.ended is None and batch.polls > 0:
                state = "RUNNING"
            meta: dict[str, Any] = {
                "@type": GEMINI_BATCH_TYPE,
                "name": f"batches/{batch.id}",
                "model": batch.extra["model"],
                "displayName": batch.extra["displayName"],
                "state": f"BATCH_STATE_{state}",
                "createTime": _iso(batch.created_at),
                "updateTime": _iso(batch.ended_at or batch.created_at),
            }
            if batch.ended:
                meta["endTime"] = _iso(batch.ended_at)
            if batch.ended == "completed":
                responses = []
                for item in batch.items:
                    row: dict[str, Any] = {}
                    if item.status == "succeeded":
                        row["response"] = item.response
                    elif item.refusal is not None:  # google.rpc.Status: 3 INVALID_ARGUMENT
                        row["error"] = {"code": 3, "message": item.refusal.message}
                    else:
                        row["error"] = {"code": 13, "message": "server error (injected)"}
                    if item.meta is not None:
                        row["metadata"] = item.meta
                    responses.append(row)
                meta["output"] = {"inlinedResponses": {"inlinedResponses": responses}}
            return {"name": f"batches/{batch.id}", "metadata": meta, "done": bool(batch.ended)}


class _NotFound(Exception):
    pass


def _json(status: int, obj: dict) -> tuple[int, bytes, str]:
    return status, json.dumps(obj).encode(), "application/json"
