"""The inside of one WebSocket opening handshake: :class:`Marks`, and the hooks that fill it in.

The handshake in flight is the :class:`Marks` current in ``registry.HANDSHAKE`` (set by
:mod:`.handshake` around the SDK's connect, in the caller's thread or task). Each hook below reads it
first and only calls through when there is none (anyone else's socket, TLS or event-loop call: one
contextvar read), or when it is already over (a task the handshake started inherits the contextvar).

Where websockets does each step, and what is hooked:

- DNS (``OPENAI_LATENCY_TRACE_DNS=true``, :mod:`..hooks.dns`): the sync client resolves in
  ``socket.create_connection``'s ``getaddrinfo``, in the caller's thread; asyncio's
  ``loop.create_connection`` awaits ``loop.getaddrinfo`` in the caller's task (the lookup itself runs
  in the loop's executor, where the context is absent: only the awaiting is timed, so nothing is
  counted twice). An IP address is not looked up by asyncio: no ``dns`` then.
- TCP connect, then TLS (``wss://``): the sync client calls ``SSLContext.wrap_socket`` on the connected
  socket, which does the TLS handshake (:func:`tls_sync` times it). asyncio's
  ``loop.create_connection`` connects with ``loop.sock_connect`` (:func:`tcp_async`: its end is the TCP
  connect's), then returns once its SSL protocol finished the TLS handshake and made the connection
  (:func:`create_connection_async`: its end is the TLS end). An event loop that connects otherwise
  (uvloop) gives no TCP end, so no ``tls`` there.
- The HTTP upgrade: websockets' ``ClientConnection.handshake`` (sync and asyncio; :func:`upgrade_sync`).

TLS counts only when it was the server's: its socket (sync) or protocol (asyncio) is the one the
upgrade ran on (through a proxy, the TLS observed is the proxy's and the server's runs elsewhere:
then ``connect`` keeps all of it), or, when the handshake failed before the upgrade, when the TLS
handshake observed is where it failed.
"""

from __future__ import annotations

from collections.abc import Awaitable
from contextvars import Token
from typing import Any

from .. import semconv as sc
from ..clock import clock, seconds
from ..hooks.registry import HANDSHAKE, DnsMarks
from ..model import Args, Attributes, Kwargs, Wrapped


class Marks:
    """One handshake's inner moments (monotonic ns; 0: not observed)."""

    __slots__ = (
        "dns",
        "end",
        "start",
        "tcp_end",
        "tls_end",
        "tls_failed",
        "tls_owner",
        "tls_start",
        "upgrade_end",
        "upgrade_owner",
        "upgrade_start",
    )

    def __init__(self, start: int) -> None:
        self.start = start
        self.end = 0
        self.dns: tuple[int, int] | None = None
        self.tcp_end = 0
        self.tls_start = 0
        self.tls_end = 0
        self.tls_failed = False
        self.tls_owner: object = None
        """What the TLS observed produced: the sync client's ``SSLSocket``, asyncio's protocol."""
        self.upgrade_start = 0
        self.upgrade_end = 0
        self.upgrade_owner: object = None
        """What the upgrade ran on: the sync connection's socket, the asyncio connection."""

    def note_dns(self, start_ns: int, end_ns: int) -> None:
        if self.end:
            return
        first = self.dns[0] if self.dns is not None else start_ns
        self.dns = (first, end_ns)

    def _tls(self) -> bool:
        if not self.tls_start:
            return False
        if self.upgrade_start:
            return self.upgrade_owner is not None and self.upgrade_owner is self.tls_owner
        return self.tls_failed

    def attributes(self, end: int) -> Attributes:
        """``dns``, ``connect`` (to the TLS start, or to the upgrade's start, or to ``end`` when neither
        came), ``tls`` (when it was the server's: to its end, or to ``end`` when it failed) and
        ``upgrade`` (to its response, or to ``end`` when it failed), in seconds. The handshake is over:
        the hooks leave these marks alone from now on."""
        self.end = end
        out: Attributes = {}
        connect_start = self.start
        if self.dns is not None:
            out[sc.OPENAI_LATENCY_WEBSOCKET_DNS] = seconds(self.dns[1] - self.dns[0])
            connect_start = self.dns[1]
        tls = self._tls()
        connect_end = self.tls_start if tls else (self.upgrade_start or end)
        out[sc.OPENAI_LATENCY_WEBSOCKET_CONNECT] = seconds(connect_end - connect_start)
        if tls:
            out[sc.OPENAI_LATENCY_WEBSOCKET_TLS] = seconds((self.tls_end or end) - self.tls_start)
        if self.upgrade_start:
            out[sc.OPENAI_LATENCY_WEBSOCKET_UPGRADE] = seconds((self.upgrade_end or end) - self.upgrade_start)
        return out


def enter(marks: Marks | None) -> Token[DnsMarks | None] | None:
    return HANDSHAKE.set(marks) if marks is not None else None


def leave(token: Token[DnsMarks | None] | None) -> None:
    if token is not None:
        HANDSHAKE.reset(token)


def in_flight() -> Marks | None:
    """The handshake in flight here, if it is not over."""
    marks = HANDSHAKE.get()
    return marks if isinstance(marks, Marks) and not marks.end else None


# -- the HTTP upgrade ---------------------------------------------------------------------------------


def upgrade_sync(wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
    """websockets' sync ``ClientConnection.handshake``: the HTTP upgrade, on the connection's socket."""
    marks = in_flight()
    if marks is None:
        return wrapped(*args, **kwargs)
    marks.upgrade_owner = getattr(instance, "socket", None)
    marks.upgrade_start = clock()
    try:
        return wrapped(*args, **kwargs)
    finally:
        marks.upgrade_end = clock()


def upgrade_async(wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
    """websockets' asyncio ``ClientConnection.handshake`` (the connection is the loop's protocol)."""
    marks = in_flight()
    if marks is None:
        return wrapped(*args, **kwargs)
    marks.upgrade_owner = instance
    return _timed_upgrade(marks, wrapped(*args, **kwargs))


async def _timed_upgrade(marks: Marks, upgrading: Awaitable[Any]) -> Any:
    marks.upgrade_start = clock()
    try:
        return await upgrading
    finally:
        marks.upgrade_end = clock()


# -- TCP and TLS --------------------------------------------------------------------------------------


def tls_sync(wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
    """``ssl.SSLContext.wrap_socket`` of a connected socket: the TLS handshake (websockets leaves
    ``do_handshake_on_connect`` on). The last one counts (:meth:`Marks._tls` checks it is the server's)."""
    marks = in_flight()
    if marks is None:
        return wrapped(*args, **kwargs)
    start = clock()
    marks.tls_start, marks.tls_end, marks.tls_owner, marks.tls_failed = start, 0, None, False
    try:
        wrapped_socket = wrapped(*args, **kwargs)
    except BaseException:
        if marks.tls_start == start:
            marks.tls_failed = True
        raise
    if marks.tls_start == start:
        marks.tls_end = clock()
        marks.tls_owner = wrapped_socket
    return wrapped_socket


def tcp_async(wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
    """An event loop's ``sock_connect``, awaited by its ``create_connection``: when TCP connected."""
    marks = in_flight()
    if marks is None:
        return wrapped(*args, **kwargs)
    return _timed_tcp(marks, wrapped(*args, **kwargs))


async def _timed_tcp(marks: Marks, connecting: Awaitable[Any]) -> Any:
    result = await connecting
    marks.tcp_end = clock()
    return result


def create_connection_async(wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
    """An event loop's ``create_connection``: with ``ssl``, it returns (or fails) once the TLS
    handshake that began at the TCP connect's end is over."""
    marks = in_flight()
    if marks is None or not kwargs.get("ssl"):
        return wrapped(*args, **kwargs)
    return _timed_tls(marks, wrapped(*args, **kwargs))


async def _timed_tls(marks: Marks, connecting: Awaitable[Any]) -> Any:
    marks.tcp_end = marks.tls_start = marks.tls_end = 0
    marks.tls_owner, marks.tls_failed = None, False
    try:
        result = await connecting
    except BaseException:
        if marks.tcp_end:  # TCP connected: the TLS handshake is what failed
            marks.tls_start, marks.tls_failed = marks.tcp_end, True
        raise
    if marks.tcp_end:
        marks.tls_start, marks.tls_end = marks.tcp_end, clock()
        marks.tls_owner = result[1] if isinstance(result, tuple) and len(result) == 2 else None
    return result


#: ``(module, "Class.method", wrapper)``: the TCP, TLS and upgrade steps of websockets' clients.
PATCHES = (
    ("websockets.sync.client", "ClientConnection.handshake", upgrade_sync),
    ("websockets.asyncio.client", "ClientConnection.handshake", upgrade_async),
    ("ssl", "SSLContext.wrap_socket", tls_sync),
    ("asyncio.base_events", "BaseEventLoop.create_connection", create_connection_async),
    ("asyncio.selector_events", "BaseSelectorEventLoop.sock_connect", tcp_async),
    ("asyncio.proactor_events", "BaseProactorEventLoop.sock_connect", tcp_async),
)
