"""The wrappers of the SDK's WebSocket connections, and what they wrap (:func:`patch_table`).

Per connection class (Responses and Realtime, sync and async):

- ``send``: a ``response.create`` (Realtime: a trigger) opens a turn before the frame leaves;
- (the websockets connection's ``recv``, an instance attribute of :mod:`.arrivals`: a connection
  that was lost ends its open turns as errors; the exception passes unchanged);
- ``parse_event``: the message's arrival stamp (:mod:`.arrivals`), then the parsed event goes to its
  turn (the SDK's ``recv`` is ``parse_event(recv_bytes())``; a caller of ``recv_bytes`` who parses
  with ``parse_event`` is seen the same way);
- ``close`` (the connection base classes): open turns end ``closed_early``.

The managers' ``_connect_ws`` get the handshake span (:mod:`.handshake`); openai 1.x's Realtime
managers, which connect in ``__enter__``/``__aenter__`` (and ``enter``, the same function under a
second name), get it there; websockets' and the event loop's steps inside are timed by
:mod:`.phases`. Every wrapper checks ``_active`` first (False after ``uninstrument()``) and calls the
SDK outside any ``try`` of ours.
"""

from __future__ import annotations

import importlib
import weakref
from collections import deque
from types import ModuleType
from typing import Any

from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from .._guard import report
from ..clock import clock
from ..model import Args, Kwargs, Telemetry, Wrapped, Wrapper
from . import agents, arrivals, phases, realtime, responses
from .arrivals import ATTRIBUTE
from .handshake import Handshakes
from .responses import STATE

_RESPONSES = "openai.resources.responses.responses"
_REALTIME = "openai.resources.realtime.realtime"
_BETA_REALTIME = "openai.resources.beta.realtime.realtime"
_BASE = "openai._websocket_connection"
#: openai 1.x: ``enter`` is the same function as ``__enter__`` (``__aenter__``), under its own name
_ENTER = ("__enter__", "enter")
_AENTER = ("__aenter__", "enter")


class WsHooks:
    """``gate``: the instrumentation's :class:`..sdk_hooks.Hooks`, its ``_active`` (False after
    ``uninstrument()``) and ``telemetry``."""

    def __init__(self, gate: Any) -> None:
        self.gate = gate
        self.handshakes = Handshakes(gate)

    @property
    def telemetry(self) -> Telemetry:
        telemetry: Telemetry = self.gate.telemetry
        return telemetry

    # -- send -------------------------------------------------------------------------------------

    def _begin(self, proto: ModuleType, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        if not is_instrumentation_enabled():
            return None
        try:
            event = args[0] if args else kwargs.get("event")
            return proto.begin(self.telemetry, instance, event, clock())
        except Exception:
            report("websocket send")
            return None

    def send(self, proto: ModuleType) -> Wrapper:
        def wrapper(wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
            if not self.gate._active:
                return wrapped(*args, **kwargs)
            started = self._begin(proto, instance, args, kwargs)
            if started is None:
                return wrapped(*args, **kwargs)
            try:
                result = wrapped(*args, **kwargs)
            except BaseException as exc:
                _call("websocket send failed", proto.send_failed, started, exc, clock())
                raise
            _call("websocket sent", proto.sent, started, clock())
            return result

        return wrapper

    def async_send(self, proto: ModuleType) -> Wrapper:
        def wrapper(wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
            if not self.gate._active:
                return wrapped(*args, **kwargs)
            return self._async_send(proto, wrapped, instance, args, kwargs)

        return wrapper

    async def _async_send(
        self, proto: ModuleType, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs
    ) -> Any:
        started = self._begin(proto, instance, args, kwargs)
        if started is None:
            return await wrapped(*args, **kwargs)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            _call("websocket send failed", proto.send_failed, started, exc, clock())
            raise
        _call("websocket sent", proto.sent, started, clock())
        return result

    # -- receive ----------------------------------------------------------------------------------

    def parse_event(self, proto: ModuleType) -> Wrapper:
        """The message's arrival stamp (paired with the bytes being parsed: :func:`.arrivals.take`,
        taken before the parse so that a message that is no JSON keeps the pairing), the parse, then
        the event to its turn; the hand-over is when the parsed event goes back to the caller."""

        def wrapper(wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
            store = instance.__dict__
            ws = store.get("_connection")
            if not self.gate._active or ws is None:
                return wrapped(*args, **kwargs)
            arrival = 0
            try:
                stamps = ws.__dict__.get(ATTRIBUTE)
                if stamps:
                    arrival = arrivals.pop(stamps, args[0] if args else kwargs["data"])
                elif stamps is None:
                    # a connection opened while uninstrumented, or whose handshake hook failed:
                    # stamps from the next message on
                    arrivals.install(ws)
            except Exception:
                arrival = 0
            event = wrapped(*args, **kwargs)
            handover = clock()
            turns = store.get(STATE)
            try:
                if turns is None:
                    turns = proto.receiving(instance, self.telemetry)
                    if turns is None:
                        return event
                proto.on_event(turns, event, arrival or handover, handover)
                if "parse_event" not in store:
                    _fast_path(self.gate, proto, instance, wrapped, ws, turns)
            except Exception:
                report("websocket event")
            return event

        return wrapper

    def close(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        turns = instance.__dict__.get(STATE)
        if turns is not None and self.gate._active:
            _call("websocket close", turns.end_all, clock(), "closed_early")
        return wrapped(*args, **kwargs)


def _fast_path(gate: Any, proto: ModuleType, instance: Any, wrapped: Any, ws: Any, turns: Any) -> None:
    """From the connection's first turn on, its own ``parse_event`` (an instance attribute, removed by
    ``uninstrument()``): the class wrapper's work without wrapt's dispatch, which cost about a third of
    ours per event. It holds the connection weakly (no cycle through the connection's ``__dict__``: a
    connection dropped mid-turn is still collected, and its turn ends ``abandoned``). Responses turns
    get their own (:func:`.responses.event_parser`: a token event's bookkeeping in the same frame)."""
    parse = getattr(wrapped, "__func__", None)
    if parse is None:
        return
    connection = weakref.ref(instance)
    # the connection's stamps, made before its first event got here (an empty deque when it has none)
    stamps = ws.__dict__.get(ATTRIBUTE)
    if stamps is None:
        stamps = deque()
    make = getattr(proto, "event_parser", None) or _event_parser(proto.on_event)
    instance.__dict__["parse_event"] = make(gate, parse, connection, stamps, turns)
    arrivals.track(instance, ("parse_event",))


def _event_parser(on_event: Any) -> Any:
    """The connection's own ``parse_event`` for any protocol: the stamp's pairing, the parse, then
    ``on_event`` (the class wrapper's work)."""

    def make(gate: Any, parse: Any, connection: Any, stamps: Any, turns: Any) -> Any:
        def parse_event(data: Any) -> Any:
            owner = connection()
            if not gate._active or owner is None:
                return parse(owner, data)
            arrival = arrivals.pop(stamps, data) if stamps else 0
            event = parse(owner, data)
            handover = clock()
            try:
                on_event(turns, event, arrival or handover, handover)
            except Exception:
                report("websocket event")
            return event

        return parse_event

    return make


def _call(what: str, fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        report(what)


def patch_table(hooks: WsHooks) -> list[tuple[str, str, Wrapper]]:
    """``(module, "Class.method", wrapper)`` of the WebSocket transports (absent ones are skipped)."""
    table: list[tuple[str, str, Wrapper]] = []
    for module, prefix, proto in ((_RESPONSES, "Responses", responses), (_REALTIME, "Realtime", realtime)):
        table += [
            (module, f"{prefix}ConnectionManager._connect_ws", hooks.handshakes.sync),
            (module, f"Async{prefix}ConnectionManager._connect_ws", hooks.handshakes.async_),
            (module, f"{prefix}Connection.send", hooks.send(proto)),
            (module, f"Async{prefix}Connection.send", hooks.async_send(proto)),
            (module, f"{prefix}Connection.parse_event", hooks.parse_event(proto)),
            (module, f"Async{prefix}Connection.parse_event", hooks.parse_event(proto)),
            # openai 2.x defines close on each class; 3.x inherits it from the bases below
            (module, f"{prefix}Connection.close", hooks.close),
            (module, f"Async{prefix}Connection.close", hooks.close),
        ]
    # the beta API (``client.beta.realtime.connect()``, every SDK generation): connection classes of its
    # own, the same turns; its managers connect in ``__enter__`` (below)
    table += [
        (_BETA_REALTIME, "RealtimeConnection.send", hooks.send(realtime)),
        (_BETA_REALTIME, "AsyncRealtimeConnection.send", hooks.async_send(realtime)),
        (_BETA_REALTIME, "RealtimeConnection.parse_event", hooks.parse_event(realtime)),
        (_BETA_REALTIME, "AsyncRealtimeConnection.parse_event", hooks.parse_event(realtime)),
        (_BETA_REALTIME, "RealtimeConnection.close", hooks.close),
        (_BETA_REALTIME, "AsyncRealtimeConnection.close", hooks.close),
    ]
    for module in (_REALTIME, _BETA_REALTIME):  # Realtime managers without _connect_ws (openai 1.x, beta)
        if _without_connect_ws(module, "RealtimeConnectionManager"):
            table += [(module, f"RealtimeConnectionManager.{m}", hooks.handshakes.enter_sync) for m in _ENTER]
        if _without_connect_ws(module, "AsyncRealtimeConnectionManager"):
            table += [
                (module, f"AsyncRealtimeConnectionManager.{m}", hooks.handshakes.enter_async) for m in _AENTER
            ]
    table += [
        # the steps inside websockets' connect, timed for the handshake in flight (phases.Marks)
        *phases.PATCHES,
        (_BASE, "WebSocketConnectionBase.close", hooks.close),
        (_BASE, "AsyncWebSocketConnectionBase.close", hooks.close),
    ]
    return table


def _without_connect_ws(module_name: str, class_name: str) -> bool:
    """The SDK's manager class exists and connects in its ``__enter__`` (openai 1.x), not through
    ``_connect_ws`` (wrapped above: wrapping both would time one handshake twice)."""
    try:
        owner = getattr(importlib.import_module(module_name), class_name, None)
    except ImportError:
        return False
    return owner is not None and not hasattr(owner, "_connect_ws")


def install(gate: Any) -> None:
    """What is wrapped when it is imported: the OpenAI Agents SDK's WebSocket model (:mod:`.agents`)."""
    agents.install(gate)


def uninstall() -> None:
    agents.uninstall()
    arrivals.uninstall_all()
