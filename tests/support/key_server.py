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
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.loopback_http import LoopbackServer, send_json


@dataclass(frozen=True)
class Seen:
    path: str
    authorization: str
    body: dict[str, Any]


class KeyServer(LoopbackServer):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def handle(self, method: str, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = json.loads(request.rfile.read(length) or b"{}") if method == "POST" else {}
        with self._lock:
            self.seen.append(Seen(request.path, request.headers.get("Authorization", ""), body))
            number = next(self._numbers)
        if method != "POST" or not request.path.endswith("/chat/completions") or body.get("stream"):
            send_json(request, 404, {"error": {"message": "not here", "type": "invalid_request_error"}})
            return
        completion = _completion(number, str(body.get("model", "")))
        send_json(request, 200, completion, {"x-request-id": f"req_key{number}"})

    def __enter__(self) -> KeyServer:
        super().__enter__()
        return self


def _completion(number: int, model: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-key{number}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
