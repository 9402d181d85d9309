"""``openai.websocket.connect``: the span of one opening handshake (and of each reconnect the SDK makes).

The SDK's connection managers open every WebSocket through their ``_connect_ws(extra_query,
extra_headers)`` (``responses.connect()``, ``realtime.connect()``, sync and async); a reconnect calls
the same method (the connection's ``make_ws``). The wrapper times it as one span with
``server.address``/``server.port``/``gen_ai.provider.name`` from the client, the upgrade's status, the
reconnect attempt (0 for the first handshake), and ``error.type`` when it failed: the status of a
rejected upgrade, else the exception's name. Nothing of the request is recorded: no header (the
Authorization header among them), no query.

openai 1.x's Realtime managers (``realtime.connect()`` and ``beta.realtime.connect()``) open the socket
in ``__enter__``/``__aenter__`` (and ``enter``, the same function under a second name) with websockets'
``connect`` directly: those are wrapped instead (only where the class has no ``_connect_ws``), the
websockets connection is the returned SDK connection's ``_connection``, and the attempt is always 0
(1.x does not reconnect).

Inside, where they can be observed (:class:`.phases.Marks`, current in ``registry.HANDSHAKE`` while
the handshake runs; what is hooked and why: :mod:`.phases`): ``openai_latency.websocket.dns`` with
``OPENAI_LATENCY_TRACE_DNS=true`` (sync: ``socket.create_connection``'s lookup; asyncio: the loop's
``getaddrinfo`` awaited by the handshake's task); ``openai_latency.websocket.connect``, the TCP connect
(from the span's start or DNS's end); ``openai_latency.websocket.tls``, the TLS handshake of ``wss://``
(sync: ``SSLContext.wrap_socket``; asyncio: ``sock_connect``'s end -> ``create_connection``'s return;
absent where not observed, e.g. uvloop or a proxy: then ``connect`` includes TLS);
``openai_latency.websocket.upgrade``, the HTTP upgrade (websockets' ``ClientConnection.handshake``:
request written -> 101 response read). They follow each other: their sum is at most the span.

On the websockets connection it returns it leaves what the turns need: the span's context (their
link), the client's attributes and the model (Realtime), and the arrival stamps (:mod:`.arrivals`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .. import semconv as sc
from .._guard import guarded
from ..clock import EPOCH_OFFSET_NS, clock
from ..model import Args, Attributes, Kwargs, Telemetry, Wrapped
from ..read.attributes import client_attributes
from ..read.errors import qualified_name
from . import arrivals
from .phases import Marks, enter, leave

__all__ = ["SPAN_NAME", "Handshakes", "Marks", "enter", "leave", "query_model"]

SPAN_NAME: Final = "openai.websocket.connect"
LINK: Final = "_openai_latency_handshake"
CLIENT: Final = "_openai_latency_client"
MODEL: Final = "_openai_latency_model"
RECONNECTS: Final = "_openai_latency_reconnects"


WsOf = Callable[[Any], Any]
"""What gives the websockets connection from what the wrapped method returned."""


def _sdk_ws(connection: Any) -> Any:
    return getattr(connection, "_connection", None)


def _private(instance: object, suffix: str) -> Any:
    """A name-mangled attribute of an SDK manager (``_RealtimeConnectionManager__client``...)."""
    for key, value in vars(instance).items():
        if key.endswith(suffix):
            return value
    return None


class Handshakes:
    def __init__(self, gate: Any) -> None:
        self.gate = gate
        """The instrumentation's hooks: ``gate._active`` is False after ``uninstrument()``."""

    def sync(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        """A manager's ``_connect_ws``: the websockets connection."""
        return self._sync(wrapped, instance, args, kwargs, None)

    def async_(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        return self._async(wrapped, instance, args, kwargs, None)

    def enter_sync(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        """openai 1.x: a Realtime manager's ``__enter__``/``enter`` (it connects without ``_connect_ws``
        and never reconnects): the SDK connection, whose ``_connection`` is the websockets one."""
        return self._sync(wrapped, instance, args, kwargs, _sdk_ws)

    def enter_async(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        return self._async(wrapped, instance, args, kwargs, _sdk_ws)

    def _sync(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs, ws_of: WsOf | None) -> Any:
        if not self.gate._active or not is_instrumentation_enabled():
            return wrapped(*args, **kwargs)
        started = self._start(instance, ws_of is None)
        token = enter(started[2] if started is not None else None)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            self._failed(started, exc)
            raise
        finally:
            leave(token)
        self._opened(started, result if ws_of is None else ws_of(result))
        return result

    def _async(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs, ws_of: WsOf | None) -> Any:
        if not self.gate._active or not is_instrumentation_enabled():
            return wrapped(*args, **kwargs)
        return self._await(wrapped(*args, **kwargs), instance, ws_of)

    async def _await(self, coro: Awaitable[Any], instance: Any, ws_of: WsOf | None) -> Any:
        started = self._start(instance, ws_of is None)
        token = enter(started[2] if started is not None else None)
        try:
            result = await coro
        except BaseException as exc:
            self._failed(started, exc)
            raise
        finally:
            leave(token)
        self._opened(started, result if ws_of is None else ws_of(result))
        return result

    @guarded()
    def _start(self, instance: Any, reconnects: bool) -> tuple[Span, Attributes, Marks]:
        client = client_attributes(_private(instance, "__client"))
        connection = _private(instance, "__connection") if reconnects else None
        attempt = getattr(connection, "_reconnect_attempt", None) if connection is not None else 0
        if not isinstance(attempt, int):  # openai 2.x keeps it local: the reconnects made so far
            attempt = instance.__dict__[RECONNECTS] = instance.__dict__.get(RECONNECTS, 0) + 1
        attributes: Attributes = {
            **client,
            sc.OPENAI_LATENCY_TRANSPORT: "websocket",
            sc.OPENAI_LATENCY_WEBSOCKET_RECONNECT_ATTEMPT: attempt,
        }
        telemetry: Telemetry = self.gate.telemetry
        start = clock()
        span = telemetry.tracer.start_span(
            SPAN_NAME, kind=SpanKind.CLIENT, attributes=attributes, start_time=start + EPOCH_OFFSET_NS
        )
        model = _private(instance, "__model")
        client[MODEL] = model if isinstance(model, str) else ""
        return span, client, Marks(start)

    @guarded()
    def _opened(self, started: tuple[Span, Attributes, Marks] | None, ws: Any) -> None:
        if started is None:
            return
        span, client, marks = started
        end = clock()
        try:
            span.set_attributes(marks.attributes(end))
            response = getattr(ws, "response", None)
            status = getattr(response, "status_code", None)
            if isinstance(status, int):
                span.set_attribute(sc.HTTP_RESPONSE_STATUS_CODE, status)
            model = client.pop(MODEL, "")
            store = ws.__dict__
            store[LINK] = span.get_span_context()
            store[CLIENT] = client
            store[MODEL] = model or query_model(ws)
            arrivals.install(ws)
        finally:
            span.end(end_time=end + EPOCH_OFFSET_NS)

    @guarded()
    def _failed(self, started: tuple[Span, Attributes, Marks] | None, exc: BaseException) -> None:
        if started is None:
            return
        span, _, marks = started
        end = clock()
        span.set_attributes(marks.attributes(end))
        status = getattr(getattr(exc, "response", None), "status_code", None)  # websockets InvalidStatus
        if isinstance(status, int):
            span.set_attribute(sc.HTTP_RESPONSE_STATUS_CODE, status)
            span.set_attribute(sc.ERROR_TYPE, str(status))
        else:
            span.set_attribute(sc.ERROR_TYPE, qualified_name(type(exc)))
        span.set_status(Status(StatusCode.ERROR, str(exc)[:256]))
        span.record_exception(exc)
        span.end(end_time=end + EPOCH_OFFSET_NS)


def query_model(ws: Any) -> str:
    """The ``model`` of the handshake's query (``/v1/realtime?model=...``), if any."""
    path = getattr(getattr(ws, "request", None), "path", "")
    _, _, query = str(path).partition("?")
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name == "model":
            return value
    return ""
