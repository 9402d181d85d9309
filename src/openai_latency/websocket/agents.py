"""The OpenAI Agents SDK's WebSocket transport (``openai-agents``, ``OpenAIResponsesWSModel``): a turn span
per model call.

Its WebSocket transport does not go through the OpenAI SDK's ``responses.connect()``: it opens its
own ``websockets`` asyncio connection (``_open_websocket_connection``) and runs each model call in
``_iter_websocket_response_events(create_kwargs)``, an async generator that sends one
``response.create`` frame and yields the parsed events up to the terminal one (an ``error`` frame
raises its ``ResponsesWebSocketError``). So the hooks are there (openai-agents 0.24; a version
without them is skipped):

- ``_open_websocket_connection``: the ``openai.websocket.connect`` span; on the connection it
  returns, the arrival stamps (:mod:`.arrivals`) and instance wrappers of ``send`` (when the frame
  was written) and ``recv`` (each frame's arrival, paired by length, and its hand-over);
- ``_iter_websocket_response_events``: the turn, from the generator's start to its terminal event,
  with the phases of :mod:`.responses` (its own retries of a connection that failed before any
  event stay inside the one turn).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping
from types import ModuleType
from typing import Any, Final

import wrapt
from opentelemetry.instrumentation.utils import is_instrumentation_enabled, unwrap
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import semconv as sc
from .._guard import guarded, report
from ..clock import EPOCH_OFFSET_NS, clock
from ..model import Args, Kwargs, Telemetry, Wrapped
from ..read.attributes import client_attributes, request_attributes
from ..read.errors import qualified_name
from ..read.routing import RESPONSES
from . import arrivals, handshake
from .responses import FINAL, observe
from .turns import Turn, Turns, capture_content, created, end, feed, frame_written, open_operation

MODULE: Final = "agents.models.openai_responses"
SENT: Final = "_openai_latency_sent"
PENDING: Final = "_openai_latency_pending"


_Started = tuple[Any, dict[str, Any], handshake.Marks]
"""The handshake span, the client's attributes, the handshake's inner moments."""


class AgentsHooks:
    def __init__(self, gate: Any) -> None:
        self.gate = gate

    @property
    def telemetry(self) -> Telemetry:
        telemetry: Telemetry = self.gate.telemetry
        return telemetry

    # -- the connection -----------------------------------------------------------------------------

    def open_connection(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        if not self.gate._active or not is_instrumentation_enabled():
            return wrapped(*args, **kwargs)
        return self._open(wrapped(*args, **kwargs), instance)

    async def _open(self, coro: Any, model: Any) -> Any:
        started = self._start(model)
        token = handshake.enter(started[2] if started is not None else None)
        try:
            ws = await coro
        except BaseException as exc:
            self._failed(started, exc)
            raise
        finally:
            handshake.leave(token)
        self._opened(started, ws)
        return ws

    @guarded()
    def _start(self, model: Any) -> _Started:
        client = client_attributes(getattr(model, "_client", None))
        attributes = {**client, sc.OPENAI_LATENCY_TRANSPORT: "websocket"}
        start = clock()
        span = self.telemetry.tracer.start_span(
            handshake.SPAN_NAME,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=start + EPOCH_OFFSET_NS,
        )
        return span, client, handshake.Marks(start)

    @guarded()
    def _failed(self, started: _Started | None, exc: BaseException) -> None:
        if started is None:
            return
        span, _, marks = started
        span.set_attributes(marks.attributes(clock()))
        status = getattr(getattr(exc, "response", None), "status_code", None)
        span.set_attribute(
            sc.ERROR_TYPE, str(status) if isinstance(status, int) else qualified_name(type(exc))
        )
        span.set_status(Status(StatusCode.ERROR, str(exc)[:256]))
        span.end(end_time=clock() + EPOCH_OFFSET_NS)

    @guarded()
    def _opened(self, started: _Started | None, ws: Any) -> None:
        if started is None:
            return
        span, client, marks = started
        span.set_attributes(marks.attributes(clock()))
        status = getattr(getattr(ws, "response", None), "status_code", None)
        if isinstance(status, int):
            span.set_attribute(sc.HTTP_RESPONSE_STATUS_CODE, status)
        store = ws.__dict__
        store[handshake.LINK] = span.get_span_context()
        store[handshake.CLIENT] = client
        arrivals.install(ws)
        _wrap_io(ws)
        span.end(end_time=clock() + EPOCH_OFFSET_NS)

    # -- the turn -----------------------------------------------------------------------------------

    def iter_events(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        events = wrapped(*args, **kwargs)
        if not self.gate._active or not is_instrumentation_enabled():
            return events
        create_kwargs = args[0] if args else kwargs.get("create_kwargs")
        return self._traced(events, instance, create_kwargs if isinstance(create_kwargs, Mapping) else {})

    async def _traced(self, events: AsyncIterator[Any], model: Any, create_kwargs: Mapping[str, Any]) -> Any:
        turn = _open_turn(self.telemetry, model, create_kwargs)
        ended = False
        try:
            async for event in events:
                if turn is not None:
                    try:
                        ended = _on_event(turn, model, event)
                    except Exception:
                        report("agents websocket event")
                yield event
        except BaseException as exc:
            if turn is not None and not ended:
                state = "abandoned" if isinstance(exc, GeneratorExit) else "error"
                _end(turn, clock(), state, None if isinstance(exc, GeneratorExit) else exc)
            raise
        if turn is not None and not ended:
            _end(turn, clock(), "closed_early")


def _wrap_io(ws: Any) -> None:
    """Instance wrappers of the connection's ``send`` (when the frame was written) and ``recv`` (the
    frame's arrival stamp, and its hand-over), for the turn that reads them."""
    store = ws.__dict__
    send, recv = ws.send, ws.recv

    async def traced_send(*args: Any, **kwargs: Any) -> Any:
        result = await send(*args, **kwargs)
        store[SENT] = clock()
        return result

    async def traced_recv(*args: Any, **kwargs: Any) -> Any:
        message = await recv(*args, **kwargs)
        handover = clock()
        try:
            data = message.encode() if isinstance(message, str) else message
            store[PENDING] = (arrivals.take(ws, data) or handover, handover)
        except Exception:
            report("agents websocket recv")
        return message

    ws.send, ws.recv = traced_send, traced_recv
    arrivals.track(ws, ("send", "recv"))


@guarded()
def _open_turn(telemetry: Telemetry, model: Any, create_kwargs: Mapping[str, Any]) -> Turn:
    kwargs = {k: v for k, v in create_kwargs.items() if isinstance(k, str)}
    attributes = request_attributes(kwargs, RESPONSES.operation, RESPONSES.api_type)
    attributes[gen_ai.GEN_AI_REQUEST_STREAM] = True
    attributes.update(client_attributes(getattr(model, "_client", None)))
    name = f"{RESPONSES.operation} {attributes.get(sc.GEN_AI_REQUEST_MODEL) or ''}".strip()
    start = clock()
    op = open_operation(telemetry, RESPONSES, name, attributes, start, None, False)
    turn = Turn(op)
    capture_content(turn, telemetry, observe, kwargs)
    return turn


_TURNS = Turns(observe)  # only its observer: the agent's turns are not kept in lanes


def _on_event(turn: Turn, model: Any, event: Any) -> bool:
    """One event the agent got; True when it ended the turn."""
    op = turn.op
    ws = getattr(model, "_ws_connection", None)
    store = getattr(ws, "__dict__", {})
    if not op.timeline.attempts:
        frame_written(op, store.get(SENT) or op.timeline.start_ns)
        link = store.get(handshake.LINK)
        if link is not None:
            op.span.add_link(link)
    now = clock()
    arrival, handover = store.pop(PENDING, (now, now))
    kind = getattr(event, "type", None)
    if kind == "response.created":
        created(turn, arrival)
    feed(_TURNS, turn, event, arrival, handover)
    if kind in FINAL:
        _end(turn, arrival, "completed")
        return True
    return False


def _end(turn: Turn, end_ns: int, state: str, error: BaseException | None = None) -> None:
    try:
        end(turn, end_ns, state, error)
    except Exception:
        report("agents websocket end")


# openai-agents is imported only if the application imports it: a post-import hook wraps its model
# class then (wrapt cannot unregister a hook: it is registered once and consults the current hooks).
_state: dict[str, Any] = {"hooks": None, "registered": False, "wrapped": []}
_METHODS: Final = ("_open_websocket_connection", "_iter_websocket_response_events")


def install(gate: Any) -> None:
    _state["hooks"] = AgentsHooks(gate)
    if not _state["registered"]:
        _state["registered"] = True
        wrapt.register_post_import_hook(_on_import, MODULE)  # runs now if it is already imported
    else:
        module = sys.modules.get(MODULE)
        if module is not None:
            _on_import(module)


@guarded()
def _on_import(module: ModuleType) -> None:
    hooks: AgentsHooks | None = _state["hooks"]
    owner = getattr(module, "OpenAIResponsesWSModel", None)
    if hooks is None or _state["wrapped"] or owner is None:
        return
    if not all(name in vars(owner) for name in _METHODS):
        return  # another openai-agents version: nothing of ours
    wrapt.wrap_function_wrapper(owner, _METHODS[0], hooks.open_connection)
    wrapt.wrap_function_wrapper(owner, _METHODS[1], hooks.iter_events)
    _state["wrapped"].append(owner)


def uninstall() -> None:
    _state["hooks"] = None
    for owner in _state["wrapped"]:
        for name in _METHODS:
            unwrap(owner, name)
    _state["wrapped"] = []
