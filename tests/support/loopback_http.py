"""A small HTTP server on 127.0.0.1 in a thread of its own, for test stand-ins of other services
(an endpoint that logs API keys, Jaeger's query API). Subclasses answer in :meth:`handle`."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoopbackServer:
    def __init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the openai SDK expects

            def do_GET(self) -> None:
                owner.handle("GET", self)

            def do_POST(self) -> None:
                owner.handle("POST", self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def handle(self, method: str, request: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def send_json(
    request: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None
) -> None:
    """``body`` as JSON (bytes are sent as they are), with Content-Length."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(data)))
    for name, value in (headers or {}).items():
        request.send_header(name, value)
    request.end_headers()
    request.wfile.write(data)
