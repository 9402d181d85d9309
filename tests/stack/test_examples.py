"""The example backend and load generator work against stand-in servers (no Docker, no fake server).

A minimal OpenAI-compatible stub (stdlib) plays the LLM server; the backend runs in uvicorn on a
loopback port. The full path through the real fake server and the instrumentation is the lead's
end-to-end test.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from .conftest import INSTALLER


class StubLLM(BaseHTTPRequestHandler):
    seen_headers: list[dict[str, str]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        StubLLM.seen_headers.append({k.lower(): v for k, v in self.headers.items()})
        model = body.get("model", "m")
        if self.headers.get("x-fake-error"):
            self._json(500, {"error": {"message": "boom", "type": "server_error", "code": None}})
        elif body.get("stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model}
            deltas: list[dict[str, Any]] = [
                {"role": "assistant", "content": ""},
                {"content": "Hel"},
                {"content": "lo"},
            ]
            for delta in deltas:
                chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            end = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
        else:
            self._json(
                200,
                {
                    "id": "c1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "Hello"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
                },
            )

    def do_GET(self) -> None:
        StubLLM.seen_headers.append({k.lower(): v for k, v in self.headers.items()})
        self._json(200, {"status": "ok"})

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def stub_llm() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubLLM)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    StubLLM.seen_headers.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture()
def backend(stub_llm: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    pytest.importorskip("fastapi", reason=f"fastapi missing: run {INSTALLER}")
    uvicorn = pytest.importorskip("uvicorn", reason=f"uvicorn missing: run {INSTALLER}")
    pytest.importorskip("openai", reason=f"openai missing: run {INSTALLER}")
    from examples.backend import app as app_module

    monkeypatch.setenv("OPENAI_BASE_URL", f"{stub_llm}/v1")
    monkeypatch.setenv("EXAMPLE_MAX_RETRIES", "0")
    monkeypatch.setattr(app_module, "_client", None)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app_module.app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=5)
    sock.close()


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_backend_ask_json_stream_health_and_header_forwarding(backend: str) -> None:
    status, body = get(f"{backend}/ask?q=hi&model=gpt-4o-mini", {"x-fake-delay-ms": "5", "x-other": "no"})
    assert status == 200
    assert json.loads(body)["answer"] == "Hello"
    assert StubLLM.seen_headers[-1]["x-fake-delay-ms"] == "5"
    assert "x-other" not in StubLLM.seen_headers[-1]

    status, body = get(f"{backend}/ask?q=hi&stream=true")
    assert (status, body) == (200, b"Hello")

    status, body = get(f"{backend}/ask?q=hi", {"x-fake-error": "500"})
    assert status == 500
    assert json.loads(body)["error"] == "InternalServerError"

    assert get(f"{backend}/healthz")[0] == 200


def test_loadgen_is_bounded_and_sends_the_scenario_headers(stub_llm: str) -> None:
    from examples.loadgen.__main__ import SCENARIOS, main

    assert sum(s.weight for s in SCENARIOS) == 100
    started = time.monotonic()
    # The stub answers any GET (here: /ask) with 200, which is all the load generator needs.
    assert main(["--target", stub_llm, "--rps", "40", "--duration", "0.5", "--seed", "1"]) == 0
    assert time.monotonic() - started < 5
    assert 10 <= len(StubLLM.seen_headers) <= 25
    assert any("x-fake-ttft-ms" in h for h in StubLLM.seen_headers)
    StubLLM.seen_headers.clear()
    assert main(["--target", stub_llm, "--rps", "1000", "--max-requests", "5", "--seed", "2"]) == 0
    assert len(StubLLM.seen_headers) == 5


def test_loadgen_scenarios_are_valid_fake_server_scripts() -> None:
    from examples.loadgen.__main__ import SCENARIOS

    from openai_latency.fake_server.script import normalize_key, parse_script

    for scenario in SCENARIOS:
        script = parse_script({normalize_key(k): v for k, v in scenario.headers.items()})
        assert script is not None, scenario.name
