"""The public handles: :class:`FakeServer` (in-process, own thread and event loop) and
:class:`SpawnedServer` (a ``python -m openai_latency.fake_server`` subprocess)."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import select
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from .app import HTTP2_AVAILABLE, FakeApp
from .payloads import Canned
from .records import RecordLog, RequestRecord
from .script import normalize_defaults
from .server_spans import SERVICE, ServerSpans

#: How long ``records()``/``record()``/``last_record()`` wait, by default, for requests in flight to finish
#: (the client can see the last byte a moment before the server has logged it).
DEFAULT_WAIT = 1.0


LISTEN_BACKLOG = 1024
"""Connections waiting to be accepted: a burst of hundreds of new connections (one per concurrent
stream) must not overflow the queue, or the kernel drops SYNs and clients see connect timeouts."""


class FakeServer:
    """An OpenAI-compatible fake server running on its own event loop in a daemon thread.

    With an ``ssl_context`` it offers HTTP/2 by ALPN (``h2``, then ``http/1.1``) when ``http2`` is true
    and the ``h2`` package is installed; otherwise ALPN negotiates ``http/1.1`` only. The context's
    ALPN protocols are set accordingly.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        defaults: Mapping[str, object] | None = None,
        http2: bool = True,
        export_spans: str | None = None,
        span_service: str = SERVICE,
    ) -> None:
        """``export_spans``: an OTLP/HTTP URL or a file, for each request's ``llm_request`` span
        (:mod:`.server_spans`), its ``service.name`` ``span_service``."""
        self.host = host
        self._requested_port = port
        self._ssl = ssl_context
        self._log = RecordLog()
        self.http2 = bool(http2 and HTTP2_AVAILABLE and ssl_context is not None)
        """HTTP/2 is offered (TLS, ``h2`` installed, not disabled)."""
        if ssl_context is not None:
            ssl_context.set_alpn_protocols(["h2", "http/1.1"] if self.http2 else ["http/1.1"])
        self._app = FakeApp(self._log, defaults, http2=self.http2)
        if export_spans:
            self._app.server_spans = ServerSpans(export_spans, span_service)
        self._port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start listening; returns once the socket accepts connections."""
        if self._thread is not None:
            raise RuntimeError("the fake server is already running")
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._run, args=(ready, failure), name="openai-latency-fake-server", daemon=True
        )
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            try:
                self._server = loop.run_until_complete(
                    loop.create_server(
                        self._app.protocol,
                        self.host,
                        self._requested_port,
                        ssl=self._ssl,
                        reuse_address=True,
                        backlog=LISTEN_BACKLOG,
                    )
                )
                self._port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:
                failure.append(exc)
                return
            finally:
                ready.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
        finally:
            loop.close()

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for conn in list(self._app.connections):
            conn.abort()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()

    def stop(self) -> None:
        """Stop listening, drop open connections and join the server thread. Idempotent."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        self._thread = None
        self._loop = None
        if self._app.server_spans is not None:
            self._app.server_spans.close()

    def __enter__(self) -> FakeServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- addresses --------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the fake server has not been started")
        return self._port

    @property
    def origin(self) -> str:
        """``http://HOST:PORT`` (``https`` with an SSL context), without the ``/v1`` API prefix."""
        return f"{'https' if self._ssl else 'http'}://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The ``base_url`` for an OpenAI client: ``http://HOST:PORT/v1``."""
        return f"{self.origin}/v1"

    # -- the log ----------------------------------------------------------------------------------

    def records(self, wait: float = DEFAULT_WAIT) -> list[RequestRecord]:
        """Copies of every logged request in arrival order (waits up to ``wait`` s for ones in flight)."""
        return self._log.snapshot(wait)

    def record(self, request_id: str, wait: float = DEFAULT_WAIT) -> RequestRecord:
        """The record of one request id (``x-request-id``); ``KeyError`` if unknown."""
        return self._log.get(request_id, wait)

    def last_record(self, wait: float = DEFAULT_WAIT) -> RequestRecord:
        """The latest request's record; ``LookupError`` if none."""
        return self._log.last(wait)

    def clear(self) -> None:
        """Forget every record (connection ids keep counting)."""
        self._log.clear()

    def flush_spans(self) -> None:
        """With ``export_spans``: return once the spans of the requests so far were sent (those in
        flight: once they have finished, up to ``DEFAULT_WAIT``)."""
        if self._app.server_spans is not None:
            self._log.snapshot(DEFAULT_WAIT)
            self._app.server_spans.flush()

    def enqueue(self, canned: Canned) -> None:
        """The next request gets ``canned`` as it is, whatever it asks (in-process servers only)."""
        self._app.canned.append(canned)

    def set_defaults(self, defaults: Mapping[str, object] | None) -> None:
        """Replace the server-wide script defaults (applies to requests that arrive afterwards)."""
        self._app.set_defaults(defaults)

    @staticmethod
    def spawn(
        defaults: Mapping[str, object] | None = None,
        *,
        host: str = "127.0.0.1",
        timeout: float = 20.0,
        certfile: str | None = None,
        keyfile: str | None = None,
        export_spans: str | None = None,
    ) -> SpawnedServer:
        """Run the server in a subprocess (off the client's GIL); use as a context manager.

        ``certfile``/``keyfile`` (PEM) serve HTTPS, with HTTP/2 by ALPN when ``h2`` is installed."""
        return SpawnedServer(
            defaults,
            host=host,
            timeout=timeout,
            certfile=certfile,
            keyfile=keyfile,
            export_spans=export_spans,
        )


def _source_root() -> str:
    """The directory that holds the ``openai_latency`` package this module was imported from."""
    return str(Path(__file__).resolve().parents[2])


class SpawnedServer:
    """A fake server in a child process; its log is read through the debug endpoint."""

    def __init__(
        self,
        defaults: Mapping[str, object] | None = None,
        *,
        host: str = "127.0.0.1",
        timeout: float = 20.0,
        certfile: str | None = None,
        keyfile: str | None = None,
        export_spans: str | None = None,
    ) -> None:
        args = [sys.executable, "-m", "openai_latency.fake_server", "--host", host, "--port", "0"]
        if certfile:
            args += ["--certfile", certfile] + (["--keyfile", keyfile] if keyfile else [])
        self._tls = bool(certfile)
        if export_spans:  # sent by the child; all of them once it has stopped
            args += ["--export-spans", export_spans]
        for key, value in normalize_defaults(defaults).items():
            args += [f"--{key}", value]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_source_root(), env.get("PYTHONPATH")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, env=env)
        self.host = host
        try:
            line = self._read_line(timeout)
            if not line.startswith("listening on "):
                raise RuntimeError(f"unexpected fake server output: {line!r}")
            self.base_url = line.removeprefix("listening on ").strip()
            self.port = urlsplit(self.base_url).port or 0
        except BaseException:
            self.stop()
            raise

    def _read_line(self, timeout: float) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        buf = b""
        fd = self.process.stdout.fileno()
        while not buf.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the fake server subprocess did not report its port")
            readable, _, _ = select.select([fd], [], [], remaining)
            if readable:
                chunk = os.read(fd, 1)
                if not chunk:
                    raise RuntimeError(f"the fake server subprocess exited ({self.process.poll()})")
                buf += chunk
        return buf.decode()

    def _request(self, method: str, path: str) -> Any:
        conn = (
            # the log endpoint of our own child: no need to verify its certificate
            http.client.HTTPSConnection(
                self.host, self.port, timeout=30, context=ssl._create_unverified_context()
            )
            if self._tls
            else http.client.HTTPConnection(self.host, self.port, timeout=30)
        )
        try:
            conn.request(method, path)
            response = conn.getresponse()
            data = response.read()
            if response.status == 404:
                raise KeyError(path)
            if response.status != 200:
                raise RuntimeError(f"{method} {path}: HTTP {response.status}")
            return json.loads(data)
        finally:
            conn.close()

    def records(self, wait: float = DEFAULT_WAIT) -> list[RequestRecord]:
        return [RequestRecord.from_dict(d) for d in self._request("GET", f"/_fake/log?wait={wait}")]

    def record(self, request_id: str, wait: float = DEFAULT_WAIT) -> RequestRecord:
        try:
            return RequestRecord.from_dict(self._request("GET", f"/_fake/log/{request_id}?wait={wait}"))
        except KeyError:
            raise KeyError(request_id) from None

    def last_record(self, wait: float = DEFAULT_WAIT) -> RequestRecord:
        records = self.records(wait)
        if not records:
            raise LookupError("the fake server has not logged any request")
        return records[-1]

    def clear(self) -> None:
        self._request("POST", "/_fake/reset")

    def stop(self) -> None:
        """Terminate the subprocess (SIGTERM, then SIGKILL after 5 s). Idempotent."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> SpawnedServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
