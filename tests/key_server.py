"""A minimal OpenAI-compatible endpoint on 127.0.0.1 that records what the fake server never keeps:
the ``Authorization`` header of each request (which API key a target sent), with its JSON body.

It answers ``POST .../chat/completions`` without streaming (a fixed one-word completion with usage);
anything else gets a 404. Used by the bench tests of ``--api-key-env``.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Seen:
    path: str
    authorization: str
    body: dict[str, Any]


class KeyServer:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        lock = threading.Lock()
        numbers = itertools.count(1)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the SDK expects

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with lock:
                    owner.seen.append(Seen(self.path, self.headers.get("Authorization", ""), body))
                    number = next(numbers)
                if not self.path.endswith("/chat/completions") or body.get("stream"):
                    self._send(404, {"error": {"message": "not here", "type": "invalid_request_error"}})
                    return
                self._send(200, _completion(number, str(body.get("model", ""))), f"req_key{number}")

            def _send(self, status: int, payload: dict[str, Any], request_id: str = "") -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if request_id:
                    self.send_header("x-request-id", request_id)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> KeyServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def _completion(number: int, model: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-key{number}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
