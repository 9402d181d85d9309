"""Routing, scripted behaviour and the stream engine: what the fake does with one request."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import json
import logging
import random
import secrets
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Final, cast

from . import payloads
from .payloads import JSON, StreamPlan
from .protocol import AlpnSwitch, Connection, Request, ResponseWriter, ServerConnection
from .records import Outcome, RecordLog, RequestRecord
from .script import (
    DEFAULT_RATE_LIMITS,
    ErrorSpec,
    Script,
    ScriptError,
    error_for_status,
    normalize_defaults,
    parse_script,
)

try:  # HTTP/2 needs the optional ``h2`` package
    from . import h2_protocol
except ImportError:  # pragma: no cover - depends on the environment
    h2_protocol = None  # type: ignore[assignment]

HTTP2_AVAILABLE: Final = h2_protocol is not None

logger = logging.getLogger("openai_latency.fake_server")

#: Request headers never stored in a record.
SECRET_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "cookie", "api-key", "x-api-key"})
#: Entries kept by ``every`` (trace ids) and ``prompt-cache`` (prompts), oldest dropped first.
MAX_REMEMBERED: Final = 4096
STREAMABLE: Final = frozenset({"chat", "completions", "responses", "response_get"})
_POST_ROUTES: Final = {
    "chat/completions": "chat",
    "completions": "completions",
    "responses": "responses",
    "embeddings": "embeddings",
    "images/generations": "images",
}
_GET_ROUTES: Final = {"models": "models", "files": "files"}
_SSE_TYPE: Final = "text/event-stream; charset=utf-8"
_JSON_TYPE: Final = "application/json"


def _rate_limit_headers(limits: Mapping[str, str]) -> list[tuple[str, str]]:
    return [(f"x-{key}", value) for key, value in limits.items()]


_DEFAULT_RATE_LIMIT_HEADERS: Final = _rate_limit_headers(DEFAULT_RATE_LIMITS)


def route(method: str, path: str) -> tuple[str, str | None] | None:
    """``(endpoint, argument)`` for a path, or ``None``. The argument is an Azure deployment or an id."""
    if path.startswith("/openai/v1/"):
        path = path[len("/openai") :]
    if path.startswith("/openai/deployments/"):
        deployment, _, rest = path[len("/openai/deployments/") :].partition("/")
        endpoint = _POST_ROUTES.get(rest) if method == "POST" else None
        return (endpoint, deployment) if endpoint and deployment else None
    if not path.startswith("/v1/"):
        return None
    rest = path[len("/v1/") :].rstrip("/")
    if method == "POST":
        endpoint = _POST_ROUTES.get(rest)
        return (endpoint, None) if endpoint else None
    if method == "GET":
        if rest in _GET_ROUTES:
            return _GET_ROUTES[rest], None
        prefix, _, ident = rest.partition("/")
        if ident and "/" not in ident and prefix in ("models", "responses"):
            return ("model" if prefix == "models" else "response_get"), ident
    return None


class FakeApp:
    """The request handler shared by every connection of one server."""

    def __init__(
        self, log: RecordLog, defaults: Mapping[str, object] | None = None, http2: bool = False
    ) -> None:
        self.log = log
        self.connections: set[ServerConnection] = set()
        self.http2 = http2 and HTTP2_AVAILABLE
        """Serve HTTP/2 on TLS connections whose ALPN negotiated ``h2``."""
        self._connection_ids = itertools.count(1)
        self._request_numbers = itertools.count(1)  # for ``every``
        self._overrides: OrderedDict[str, dict[str, str]] = OrderedDict()  # trace id -> ``every`` overrides
        self._seen_prompts: OrderedDict[str, None] = OrderedDict()  # for ``prompt-cache``
        self.canned: collections.deque[payloads.Canned] = collections.deque()
        """Responses for the next requests, written as given (:meth:`FakeServer.enqueue`)."""
        self.set_defaults(defaults)

    def set_defaults(self, defaults: Mapping[str, object] | None) -> None:
        raw = normalize_defaults(defaults)
        # One tuple, swapped atomically: requests in flight keep the script they started with.
        self._defaults = (raw, parse_script(raw))

    def protocol(self) -> asyncio.Protocol:
        args = (self.handle, next(self._connection_ids), self.connections)
        if not self.http2 or h2_protocol is None:
            return Connection(*args)
        return AlpnSwitch({"h2": partial(h2_protocol.H2Connection, *args)}, partial(Connection, *args))

    # -- entry point ------------------------------------------------------------------------------

    async def handle(self, conn: ResponseWriter, req: Request) -> None:
        if req.path.startswith("/_fake/"):
            await self._debug(conn, req)
            return
        record = RequestRecord(
            request_id=f"req_{secrets.token_hex(16)}",
            method=req.method,
            path=req.path,
            query=req.query,
            headers={k: v for k, v in req.headers.items() if k not in SECRET_HEADERS},
            body=_parse_json(req.body),
            attempt=_attempt(req.headers.get("x-stainless-retry-count")),
            connection_id=conn.connection_id,
            connection_request_index=conn.request_index,
            received_ns=req.received_ns,
        )
        self.log.add(record)
        outcome: Outcome = "error"
        try:
            outcome = await self._respond(conn, req, record)
        except Exception:
            logger.exception("fake server: error while answering %s %s", req.method, req.path)
            if record.headers_sent_ns is None and not conn.peer_gone:
                spec = error_for_status(500)
                await self._send_json(conn, req, record, Script(), 500, spec.body(""))
            else:
                conn.abort()
        finally:
            self.log.finish(record, outcome, time.perf_counter_ns())

    async def _respond(self, conn: ResponseWriter, req: Request, record: RequestRecord) -> Outcome:
        if self.canned:
            return await self._send_canned(conn, record, self.canned.popleft())
        raw_defaults, script = self._defaults
        try:
            if req.script:
                script = parse_script({**raw_defaults, **req.script})
            overrides = self._every(script, record, req.headers.get("traceparent"))
            if overrides:
                script = parse_script({**raw_defaults, **req.script, **overrides})
        except ScriptError as exc:
            spec = ErrorSpec(400, "invalid_request_error", "invalid_fake_script", exc.key, str(exc))
            return await self._send_json(conn, req, record, Script(), 400, spec.body(""))

        target = route(req.method, req.path)
        body = record.body if isinstance(record.body, dict) else {}
        deployment = target[1] if target and req.method == "POST" else None
        model = deployment or str(body.get("model") or "") or payloads.DEFAULT_MODEL
        failure = self._failure(script, record, target, req, model)
        if not await conn.sleep(script.delay):
            return "client_closed"
        if failure is not None:
            status, error_body, extra = failure
            return await self._send_json(conn, req, record, script, status, error_body, extra)

        assert target is not None
        endpoint, argument = target
        status = script.status or 200
        if endpoint == "response_get":
            stream = req.query.get("stream") == "true"
        else:
            stream = endpoint in STREAMABLE and body.get("stream") is True
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        prompt = {"chat": body.get("messages"), "completions": body.get("prompt")}.get(
            endpoint, [body.get("instructions"), body.get("input")]
        )
        cache_hit = script.prompt_cache and self._cache_lookup(model, prompt)
        if cache_hit and script.cached_ttft is not None:
            script = dataclasses.replace(script, ttft=script.cached_ttft)
        out = payloads.make_output(record.request_id[4:], model, prompt, script, cache_hit)
        if endpoint == "response_get" and argument:
            out = payloads.Output(argument.removeprefix("resp_"), model, out.words, out.prompt_tokens, script)
        if stream:
            if endpoint == "chat":
                plan = payloads.chat_stream(out, include_usage)
            elif endpoint == "completions":
                plan = payloads.completion_stream(out, include_usage)
            else:
                plan = payloads.responses_stream(out)
            return await self._send_stream(conn, req, record, script, status, plan)
        if script.corrupt is not None:
            return await self._send_corrupt(conn, record, script, script.corrupt, out)
        n = body["n"] if isinstance(body.get("n"), int) and body["n"] > 0 else 1
        result: JSON
        if endpoint == "chat":
            result = payloads.chat_json(out, n)
        elif endpoint == "completions":
            result = payloads.completion_json(out, n)
        elif endpoint in ("responses", "response_get"):
            result = payloads.response_json(out)
        elif endpoint == "embeddings":
            result = payloads.embeddings_json(body, model)
        elif endpoint == "images":
            result = payloads.images_json(body)
        elif endpoint == "model":
            result = payloads.model_json(argument or model)
        elif endpoint == "models":
            result = payloads.models_json()
        else:
            result = payloads.files_json()
        return await self._send_json(conn, req, record, script, status, result)

    def _every(self, script: Script, record: RequestRecord, traceparent: str | None) -> dict[str, str]:
        """The ``every`` settings that apply to this request (its retries get the same ones)."""
        if not script.every:
            return {}
        parts = (traceparent or "").split("-")
        trace_id = parts[1] if len(parts) == 4 else None
        if record.attempt > 0:
            return self._overrides.get(trace_id, {}) if trace_id else {}
        number = next(self._request_numbers)
        chosen = {key: value for every, key, value in script.every if number % every == 0}
        if chosen and trace_id:
            self._overrides[trace_id] = chosen
            while len(self._overrides) > MAX_REMEMBERED:
                self._overrides.popitem(last=False)
        return chosen

    def _cache_lookup(self, model: str, prompt: object) -> bool:
        """``prompt-cache``: has this prompt been seen before? (Remembers it either way.)"""
        key = json.dumps([model, prompt], sort_keys=True, default=str)
        hit = key in self._seen_prompts
        self._seen_prompts[key] = None
        if len(self._seen_prompts) > MAX_REMEMBERED:
            self._seen_prompts.popitem(last=False)
        return hit

    def _failure(
        self,
        script: Script,
        record: RequestRecord,
        target: tuple[str, str | None] | None,
        req: Request,
        model: str,
    ) -> tuple[int, JSON, list[tuple[str, str]]] | None:
        """The error response this request gets, if any: ``(status, body, extra headers)``."""
        if target is None:
            return 404, payloads.not_found_json(req.method, req.path), []
        if req.method == "POST" and req.body and not isinstance(record.body, dict):
            message = "We could not parse the JSON body of your request."
            return 400, ErrorSpec(400, "invalid_request_error", None, None, message).body(model), []
        spec: ErrorSpec | None = script.error
        if spec is None and script.status is not None and script.status >= 400:
            spec = error_for_status(script.status)
        retry_headers = False
        if spec is None and record.attempt < script.fail_attempts:
            spec, retry_headers = script.fail_error or error_for_status(script.fail_status), True
        if spec is None:
            return None
        extra: list[tuple[str, str]] = []
        if retry_headers or script.error is not None or script.status is not None:
            if script.retry_after_ms is not None:
                extra.append(("retry-after-ms", script.retry_after_ms))
            if script.retry_after is not None:
                extra.append(("retry-after", script.retry_after))
        if script.should_retry is not None:
            extra.append(("x-should-retry", script.should_retry))
        return spec.status, spec.body(model), extra

    # -- writing ----------------------------------------------------------------------------------

    def _head(
        self,
        record: RequestRecord,
        script: Script,
        content_type: str,
        streamed: bool,
        extra: Sequence[tuple[str, str]] = (),
    ) -> list[tuple[str, str]]:
        """Response headers but the framing ones (length, connection), which the writer adds."""
        processing = script.processing_ms
        if processing is None:
            processing = str(round((time.perf_counter_ns() - record.received_ns) / 1e6))
        limits = script.rate_limits
        return [
            ("content-type", content_type),
            *((("cache-control", "no-cache"),) if streamed else ()),
            ("x-request-id", record.request_id),
            ("openai-processing-ms", processing),
            ("openai-version", "2020-10-01"),
            *(_DEFAULT_RATE_LIMIT_HEADERS if limits is DEFAULT_RATE_LIMITS else _rate_limit_headers(limits)),
            *extra,
        ]

    async def _send_json(
        self,
        conn: ResponseWriter,
        req: Request,
        record: RequestRecord,
        script: Script,
        status: int,
        body: JSON,
        extra: Sequence[tuple[str, str]] = (),
    ) -> Outcome:
        payload = payloads.dumps(body).encode()
        head = self._head(record, script, _JSON_TYPE, False, extra)
        record.status = status
        done: Outcome = "ok" if status < 400 else "error"
        if script.body_delay <= 0 and script.disconnect_after is None:
            sent = await conn.send_head(status, head, len(payload), payload)
            record.headers_sent_ns = now = time.perf_counter_ns()
            record.events.append(("body", now))
            return done if sent else "client_closed"
        sent = await conn.send_head(status, head, len(payload))
        record.headers_sent_ns = time.perf_counter_ns()
        if not sent:
            return "client_closed"
        if script.disconnect_after is not None:
            conn.abort()
            record.events.append(("disconnect", time.perf_counter_ns()))
            return "disconnected"
        if not await conn.sleep(script.body_delay) or not await conn.send_body(payload, end=True):
            return "client_closed"
        record.events.append(("body", time.perf_counter_ns()))
        return done

    async def _send_canned(
        self, conn: ResponseWriter, record: RequestRecord, canned: payloads.Canned
    ) -> Outcome:
        record.status = canned.status
        head = [("content-type", canned.content_type), ("x-request-id", record.request_id)]
        if not canned.stream:
            body = b"".join(canned.pieces)
            sent = await conn.send_head(canned.status, head, len(body), body)
            record.headers_sent_ns = time.perf_counter_ns()
            return "ok" if sent else "client_closed"
        sent = await conn.send_head(canned.status, head, None)
        record.headers_sent_ns = time.perf_counter_ns()
        for index, piece in enumerate(canned.pieces):
            if not sent or not await conn.send_body(piece, end=index == len(canned.pieces) - 1):
                return "client_closed"
        if not canned.pieces and sent:
            await conn.send_body(b"", end=True)
        return "ok"

    async def _send_corrupt(
        self, conn: ResponseWriter, record: RequestRecord, script: Script, corrupt: str, out: payloads.Output
    ) -> Outcome:
        """A 200 whose body is broken the ``corrupt`` way (non-stream)."""
        good = payloads.dumps(payloads.chat_json(out, 1)).encode()
        payload = payloads.dumps(payloads.WRONG_SHAPE).encode() if corrupt == "wrong-shape" else good
        if corrupt == "invalid-json":
            payload = good[: len(good) // 2]
        record.status = 200
        head = self._head(record, script, _JSON_TYPE, False)
        if corrupt != "truncated":
            sent = await conn.send_head(200, head, len(payload), payload)
            record.headers_sent_ns = time.perf_counter_ns()
            return "ok" if sent else "client_closed"
        sent = await conn.send_head(200, head, len(payload))
        record.headers_sent_ns = time.perf_counter_ns()
        if not sent or not await conn.send_body(payload[: len(payload) // 2]):
            return "client_closed"
        conn.abort()
        record.events.append(("disconnect", time.perf_counter_ns()))
        return "disconnected"

    async def _send_stream(
        self,
        conn: ResponseWriter,
        req: Request,
        record: RequestRecord,
        script: Script,
        status: int,
        plan: StreamPlan,
    ) -> Outcome:
        record.status = status
        sent = await conn.send_head(status, self._head(record, script, _SSE_TYPE, True), None)
        record.headers_sent_ns = time.perf_counter_ns()
        if not sent:
            return "client_closed"
        events = record.events
        emitted = 0

        async def emit(kind: str, data: bytes, last: bool = False) -> bool:
            nonlocal emitted
            if not await conn.send_body(data, end=last):
                return False
            events.append((kind, time.perf_counter_ns()))
            emitted += 1
            return True

        for kind, data in plan.preamble:
            if not await emit(kind, data):
                return "client_closed"
        faults = [
            (n, fault)
            for n, fault in (
                (script.disconnect_after, "disconnect"),
                (script.malformed_after, "malformed"),
                (script.stream_error_after, "error_event"),
            )
            if n is not None
        ]
        cut, fault = min(faults) if faults else (-1, "")
        rng = random.Random(script.seed) if script.jitter > 0 else None
        content = plan.content
        if script.corrupt == "wrong-shape" and content:
            content = [(content[0][0], payloads.sse(payloads.dumps(payloads.WRONG_SHAPE))), *content[1:]]
        for i in range(len(content) + 1):
            pause = script.stall if script.stall_after == i else 0.0
            if i < len(content):
                if i == 0:
                    pause += script.ttft
                else:
                    gap = script.chunk_delay + (rng.uniform(-script.jitter, script.jitter) if rng else 0.0)
                    pause += max(0.0, gap)
            if not await conn.sleep(pause):
                return "client_closed"
            if i == cut:
                if fault == "disconnect":
                    conn.abort()
                    events.append(("disconnect", time.perf_counter_ns()))
                    return "disconnected"
                data = payloads.MALFORMED if fault == "malformed" else plan.error_event(emitted)
                return "error" if await emit(fault, data, last=True) else "client_closed"
            if i < len(content) and not await emit(*content[i]):
                return "client_closed"
        for index, (kind, data) in enumerate(plan.epilogue):
            if not await emit(kind, data, last=index == len(plan.epilogue) - 1):
                return "client_closed"
        return "ok" if status < 400 else "error"

    # -- debug endpoints (not logged) -------------------------------------------------------------

    async def _debug(self, conn: ResponseWriter, req: Request) -> None:
        status, result = 200, cast(Any, None)
        wait = _float(req.query.get("wait"), 0.0)
        if req.method == "POST" and req.path == "/_fake/reset":
            self.log.clear()
            result = {"ok": True}
        elif req.method == "GET" and req.path == "/_fake/log":
            pending = [r for r in self.log.live() if not r.finished]
            await _wait_finished(pending, wait)
            result = [r.to_dict() for r in self.log.snapshot()]
        elif req.method == "GET" and req.path.startswith("/_fake/log/"):
            record = self.log.find(req.path[len("/_fake/log/") :])
            if record is None:
                status, result = 404, {"error": {"message": "unknown request id", "type": "not_found"}}
            else:
                await _wait_finished([record], wait)
                result = record.copy().to_dict()
        else:
            status, result = 404, payloads.not_found_json(req.method, req.path)
        payload = json.dumps(result).encode()
        await conn.send_head(status, [("content-type", _JSON_TYPE)], len(payload), payload)


async def _wait_finished(records: list[RequestRecord], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(not r.finished for r in records) and time.monotonic() < deadline:
        await asyncio.sleep(0.001)


def _parse_json(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def _attempt(value: str | None) -> int:
    try:
        return int(value) if value else 0
    except ValueError:
        return 0


def _float(value: str | None, default: float) -> float:
    try:
        return float(value) if value else default
    except ValueError:
        return default
