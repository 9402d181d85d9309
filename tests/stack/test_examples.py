"""The example backend and load generator work against stand-in servers (no Docker, no fake server).

A minimal OpenAI-compatible stub (stdlib) plays the LLM server; the backend runs in uvicorn on a
loopback port. The full path through the real fake server and the instrumentation is
tests/e2e (test_example_turn.py: the turn's trace and its report).
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
    seen_bodies: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        StubLLM.seen_headers.append({k.lower(): v for k, v in self.headers.items()})
        StubLLM.seen_bodies.append(body)
        model = body.get("model", "m")
        # As the fake server: a call of the tool when asked for one (in OpenAI's shape: a query)
        asked = body.get("tools") and self.headers.get("x-fake-tool-plan") == "search_documents"
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
        elif asked:
            function = {"name": "search_documents", "arguments": json.dumps({"query": "sky colour"})}
            call = {"id": "call_1", "type": "function", "function": function}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
            self._json(
                200,
                {"id": "c0", "object": "chat.completion", "created": 0, "model": model, "choices": [choice]},
            )
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
    StubLLM.seen_bodies.clear()
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
    return send(urllib.request.Request(url, headers=headers or {}))


def post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    data = json.dumps(body).encode()
    return send(urllib.request.Request(url, data, {"content-type": "application/json"}, method="POST"))


def send(req: urllib.request.Request) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_backend_ask_json_stream_health_and_header_forwarding(backend: str) -> None:
    status, body = get(f"{backend}/ask?q=hi&model=gpt-4o-mini", {"x-fake-delay-ms": "5", "x-other": "no"})
    assert status == 200
    assert json.loads(body)["answer"] == "Hello"
    assert len(StubLLM.seen_headers) == 2  # the turn's two calls
    for headers in StubLLM.seen_headers:
        assert headers["x-fake-delay-ms"] == "5"
        assert "x-other" not in headers

    status, body = get(f"{backend}/ask?q=hi&stream=true")
    assert (status, body) == (200, b"Hello")
    assert StubLLM.seen_bodies[-1]["stream"] is True and "stream" not in StubLLM.seen_bodies[-2]

    before = len(StubLLM.seen_headers)
    status, body = get(f"{backend}/ask?q=hi", {"x-fake-error": "500"})
    assert status == 500
    assert json.loads(body)["error"] == "InternalServerError"
    assert len(StubLLM.seen_headers) == before + 1, "a failed planning call ends the turn"

    assert get(f"{backend}/healthz")[0] == 200


def test_backend_ask_hands_the_tool_result_to_the_answer_call(backend: str) -> None:
    """The planning call offers the tool; the model's call of it (its query) gets the documents
    back as a ``tool`` message of the answer call; a model that answered in words, as context."""
    status, body = get(f"{backend}/ask?q=hi&tool_ms=1&db_ms=1", {"x-fake-tool-plan": "search_documents"})
    assert status == 200
    documents = json.loads(body)["documents"]
    assert documents == ["Rayleigh scattering", "Why sunsets are red"]
    plan, answer = StubLLM.seen_bodies
    assert [t["function"]["name"] for t in plan["tools"]] == ["search_documents"]
    assert plan["tool_choice"] == "required" and "tools" not in answer
    assert answer["messages"][: len(plan["messages"])] == plan["messages"]
    asked, result = answer["messages"][len(plan["messages"]) :]
    assert asked["role"] == "assistant" and asked["tool_calls"][0]["id"] == "call_1"
    assert json.loads(asked["tool_calls"][0]["function"]["arguments"]) == {"query": "sky colour"}
    assert result == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": json.dumps({"documents": documents}),
    }

    StubLLM.seen_bodies.clear()
    status, body = post(f"{backend}/ask", {"q": "hi", "tool_ms": 1, "db_ms": 1})  # the stub answers in words
    assert status == 200 and json.loads(body)["documents"] == documents
    plan, answer = StubLLM.seen_bodies
    (context,) = answer["messages"][len(plan["messages"]) :]
    assert context == {"role": "user", "content": "Documents found: " + json.dumps({"documents": documents})}


def test_loadgen_is_bounded_and_sends_the_scenario_headers(stub_llm: str) -> None:
    from examples.loadgen.__main__ import SCENARIOS, main

    assert sum(s.weight for s in SCENARIOS) == 100
    started = time.monotonic()
    # The stub answers any GET (here: /ask) with 200, which is all the load generator needs.
    assert main(["--target", stub_llm, "--rps", "40", "--duration", "0.5", "--seed", "1"]) == 0
    assert time.monotonic() - started < 5
    assert 10 <= len(StubLLM.seen_headers) <= 25
    assert any("x-fake-ttft-ms" in h for h in StubLLM.seen_headers)
    assert all(h["x-fake-tool-plan"] == "search_documents" for h in StubLLM.seen_headers)
    StubLLM.seen_headers.clear()
    assert main(["--target", stub_llm, "--rps", "1000", "--max-requests", "5", "--seed", "2"]) == 0
    assert len(StubLLM.seen_headers) == 5


def test_loadgen_scenarios_are_valid_fake_server_scripts() -> None:
    from examples.loadgen.__main__ import SCENARIOS, TURN_HEADERS

    from openai_latency.fake_server.script import normalize_key, parse_script

    for scenario in SCENARIOS:
        headers = {**TURN_HEADERS, **scenario.headers}
        script = parse_script({normalize_key(k): v for k, v in headers.items()})
        assert script is not None, scenario.name
