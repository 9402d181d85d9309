"""Servers on 127.0.0.1 that fail in ways an HTTP server cannot, for the fault-matrix tests.

- :class:`RawServer`: accepts TCP connections and hands each socket to a behaviour
  (:func:`close_during_handshake`, :func:`reset_after_headers`), one thread per connection.
- :class:`FullBacklog`: a listening socket whose accept queue is full, so a connect never completes
  (the kernel drops the SYNs): a connect timeout on loopback.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from types import TracebackType

Behaviour = Callable[[socket.socket], None]


class RawServer:
    def __init__(self, behaviour: Behaviour) -> None:
        self._behaviour = behaviour
        self._listener = socket.socket()
        # a small receive window: a client sending a large body blocks (instead of having all of it
        # buffered by the kernels) and so is still sending when the behaviour resets the connection
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, name="raw-server", daemon=True)
        self._accept.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            worker = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            self._threads.append(worker)
            worker.start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            with contextlib.suppress(OSError):
                self._behaviour(conn)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self._accept.join(5)
        for worker in self._threads:
            worker.join(5)

    def __enter__(self) -> RawServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def close_during_handshake(conn: socket.socket) -> None:
    """Reads the TLS ClientHello, then closes: the handshake fails half-way."""
    conn.recv(4096)


def reset_after_headers(conn: socket.socket) -> None:
    """Reads the request headers, then resets the connection while the client is sending the body."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            return
        data += piece
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST


class FullBacklog:
    """A port that accepts no connection: backlog 0, its accept queue filled by our own connects."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(0)
        self.port: int = self._listener.getsockname()[1]
        self._fillers: list[socket.socket] = []
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", self.port))
            self._fillers.append(filler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        for filler in self._fillers:
            filler.close()
        self._listener.close()

    def __enter__(self) -> FullBacklog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
