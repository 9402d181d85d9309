"""What the fake does with one request: log it, apply its script, pick the endpoint from the table in
:mod:`.endpoints` and answer through :mod:`.respond` (JSON, canned, corrupt, or the stream engine).

The same :class:`FakeApp` serves both protocols: an HTTP/1.1 :class:`~.protocol.Connection` and an
HTTP/2 :class:`~.h2_protocol.H2Stream` are each a :class:`~.exchange.ResponseWriter`.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import json
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, Final

from . import payloads, respond, server_account, stream_engine
from .capacity import Capacity
from .endpoints import ENDPOINTS, Call, route
from .errors import ErrorSpec, error_for_status
from .exchange import Request, ResponseWriter, ServerConnection
from .payloads import JSON
from .prefix_cache import PrefixCache
from .protocol import AlpnSwitch, Connection
from .records import Outcome, RecordLog, RequestRecord
from .script import Script, ScriptError, normalize_defaults, parse_script
from .server_spans import ServerSpans

try:  # HTTP/2 needs the optional ``h2`` package
    from . import h2_protocol
except ImportError:  # pragma: no cover - depends on the environment
    h2_protocol = None  # type: ignore[assignment]

try:  # WebSocket (/v1/responses, /v1/realtime) needs the optional ``websockets`` package
    from . import ws_app, ws_session
except ImportError:  # pragma: no cover - depends on the environment
    ws_app = ws_session = None  # type: ignore[assignment]

HTTP2_AVAILABLE: Final = h2_protocol is not None
WEBSOCKET_AVAILABLE: Final = ws_app is not None

logger = logging.getLogger("openai_latency.fake_server")

#: Request headers never stored in a record.
SECRET_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "cookie", "api-key", "x-api-key"})
#: Entries kept by ``every`` (trace ids), oldest dropped first.
MAX_REMEMBERED: Final = 4096
_LOG_PREFIX: Final = "/_fake/log/"
#: A debug endpoint's answer: ``(status, JSON-ready value)``.
DebugResult = tuple[int, Any]


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
        self._prefixes = PrefixCache()  # for ``prompt-cache``
        self._capacity = Capacity()  # for ``capacity``
        self.canned: collections.deque[payloads.Canned] = collections.deque()
        """Responses for the next requests, written as given (:meth:`FakeServer.enqueue`)."""
        self.server_spans: ServerSpans | None = None
        """``--export-spans``: each request's ``llm_request`` span (:mod:`.server_spans`)."""
        self._span_parents: dict[str, str] = {}  # request id -> ``server-span-parent``
        self._debug_routes: dict[tuple[str, str], Callable[[str, float], Awaitable[DebugResult]]] = {
            ("POST", "/_fake/reset"): self._reset,
            ("GET", "/_fake/log"): self._log,
            ("GET", _LOG_PREFIX + "{id}"): self._one_record,
        }
        """The debug endpoints (not logged): ``(method, path)`` -> ``handler(id, wait)``."""
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
        if (
            ws_app is not None
            and isinstance(conn, Connection)
            and ws_session.is_upgrade(req)
            and req.path in ws_session.WS_PATHS
        ):
            await ws_app.serve(conn, req, self.log, self._defaults, self._ws_turn, self.canned)
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
                await respond.send_json(conn, record, Script(), 500, spec.body(""))
            else:
                conn.abort()
        finally:
            finished_ns = time.perf_counter_ns()
            if self.server_spans is not None:  # queued before the log says finished: flush_spans
                parent = self._span_parents.pop(record.request_id, "traceparent")
                self.server_spans.add(record, parent, outcome, finished_ns)
            self.log.finish(record, outcome, finished_ns)

    async def _respond(self, conn: ResponseWriter, req: Request, record: RequestRecord) -> Outcome:
        if self.canned:
            return await respond.send_canned(conn, record, self.canned.popleft())
        raw_defaults, script = self._defaults
        try:
            if req.script:
                script = parse_script({**raw_defaults, **req.script})
            overrides = self._every(script, record, req.headers.get("traceparent"))
            if overrides:
                script = parse_script({**raw_defaults, **req.script, **overrides})
            if self.server_spans is not None:
                self._span_parents[record.request_id] = script.server_span_parent
        except ScriptError as exc:
            spec = ErrorSpec(400, "invalid_request_error", "invalid_fake_script", exc.key, str(exc))
            return await respond.send_json(conn, record, Script(), 400, spec.body(""))
        if not script.capacity:
            return await self._scripted(conn, req, record, script)
        await self._capacity.enter(script.capacity)
        try:
            return await self._scripted(conn, req, record, script)
        finally:
            self._capacity.leave()

    async def _scripted(
        self, conn: ResponseWriter, req: Request, record: RequestRecord, script: Script
    ) -> Outcome:

        target = route(req.method, req.path)
        body = record.body if isinstance(record.body, dict) else {}
        deployment = target[1] if target and req.method == "POST" else None
        model = deployment or str(body.get("model") or "") or payloads.DEFAULT_MODEL
        failure = self._failure(script, record, target, req, model)
        if not await conn.sleep(script.delay):
            return "client_closed"
        if failure is not None:
            status, error_body, extra = failure
            return await respond.send_json(conn, record, script, status, error_body, extra)

        assert target is not None
        name, argument = target
        endpoint = ENDPOINTS[name]
        status = script.status or 200
        prompt = endpoint.prompt(body)
        cached = self._prefixes.lookup(model, prompt) if script.prompt_cache else 0
        if cached and script.cached_ttft is not None:
            script = dataclasses.replace(script, ttft=script.cached_ttft)
        if script.tool_plan:  # the next tool of the plan, by the tool results the conversation holds
            done = sum(
                1 for m in body.get("messages") or () if isinstance(m, dict) and m.get("role") == "tool"
            )
            if done < len(script.tool_plan):
                script = dataclasses.replace(script, tool_call=True, tool_name=script.tool_plan[done])
        limit = _ignore_eos_limit(body)
        if limit is not None:  # generate exactly the asked tokens, as vLLM and llama.cpp do
            script = dataclasses.replace(script, chunks=max(0, limit - script.reasoning_tokens))
        out = payloads.make_output(record.request_id[4:], model, prompt, script, cached)
        if endpoint.output_id_from_argument and argument:
            out = dataclasses.replace(out, id=argument.removeprefix("resp_"), cached_tokens=0)
        if script.server_timings is not None or script.server_metrics is not None:
            asked = body.get("include_metrics") is True
            fields = server_account.account(
                script, out.prompt_tokens, out.cached_tokens, out.completion_tokens, asked
            )
            out = dataclasses.replace(out, account=fields)
        if endpoint.stream is not None and endpoint.streams(body, req.query):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            plan = endpoint.stream(out, include_usage)
            return await stream_engine.send_stream(conn, record, script, status, plan)
        if script.corrupt is not None:
            return await respond.send_corrupt(conn, record, script, script.corrupt, out)
        n = body["n"] if isinstance(body.get("n"), int) and body["n"] > 0 else 1
        result = endpoint.json(Call(out, body, model, argument, n))
        return await respond.send_json(conn, record, script, status, result)

    async def _ws_turn(
        self, conn: ResponseWriter, req: Request, record: RequestRecord, raw: dict[str, str]
    ) -> Outcome:
        """A WebSocket turn (:mod:`.ws_app`): its script keys (``raw``: the server's defaults, the
        handshake's and the turn's own), with ``every`` and ``capacity`` applied as for HTTP."""
        script = parse_script(raw)
        overrides = self._every(script, record, None)
        if overrides:
            script = parse_script({**raw, **overrides})
        script = dataclasses.replace(script, fail_attempts=0)
        if not script.capacity:
            return await self._scripted(conn, req, record, script)
        await self._capacity.enter(script.capacity)
        try:
            return await self._scripted(conn, req, record, script)
        finally:
            self._capacity.leave()

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

    # -- debug endpoints (not logged) -------------------------------------------------------------

    async def _debug(self, conn: ResponseWriter, req: Request) -> None:
        wait = _float(req.query.get("wait"), 0.0)
        key, argument = (req.method, req.path), ""
        if key not in self._debug_routes and req.path.startswith(_LOG_PREFIX):
            key, argument = (req.method, _LOG_PREFIX + "{id}"), req.path[len(_LOG_PREFIX) :]
        handler = self._debug_routes.get(key)
        if handler is None:
            status, result = 404, payloads.not_found_json(req.method, req.path)
        else:
            status, result = await handler(argument, wait)
        payload = json.dumps(result).encode()
        await conn.send_head(status, [("content-type", respond.JSON_TYPE)], len(payload), payload)

    async def _reset(self, _argument: str, _wait: float) -> DebugResult:
        self.log.clear()
        return 200, {"ok": True}

    async def _log(self, _argument: str, wait: float) -> DebugResult:
        await _wait_finished([r for r in self.log.live() if not r.finished], wait)
        return 200, [r.to_dict() for r in self.log.snapshot()]

    async def _one_record(self, request_id: str, wait: float) -> DebugResult:
        record = self.log.find(request_id)
        if record is None:
            return 404, {"error": {"message": "unknown request id", "type": "not_found"}}
        await _wait_finished([record], wait)
        return 200, record.copy().to_dict()


async def _wait_finished(records: list[RequestRecord], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(not r.finished for r in records) and time.monotonic() < deadline:
        await asyncio.sleep(0.001)


def _ignore_eos_limit(body: dict[str, Any]) -> int | None:
    """``ignore_eos: true`` with a max tokens field: the output tokens the request asks for."""
    if body.get("ignore_eos") is not True:
        return None
    for name in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


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
