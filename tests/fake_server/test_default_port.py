"""The fake server's default port is no known provider's, so its calls say ``gen_ai.provider.name=openai``.

``gen_ai.provider.name`` names a local server by its port (11434 Ollama, 8000 vLLM): a fake server on
8000 showed up as vLLM in every trace of the demo stack. Checked on the real commands a user runs:
``openai-latency fake-server`` with no ``--port``, then ``openai-latency bench --out`` against it
(the SDK instrumented, the spans written as OTLP JSON). tests/realstack checks the same through the
Collector and Jaeger, tests/stack that the compose files and the example use this port.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openai_latency.fake_server.cli import build_parser
from openai_latency.read.attributes import provider_name
from tests.support.cli_runs import COMMAND, run_cli

DEFAULT_PORT: int = build_parser().get_default("port")

# Default ports of OpenAI-compatible servers and tools a developer runs locally, and of the demo
# stack's own services: the fake server must not be mistaken for one, nor collide with one.
WELL_KNOWN = {
    8000: "vLLM, Triton, NIM, llama-cpp-python",
    11434: "Ollama",
    8080: "llama.cpp server, TGI, LocalAI, the example backend",
    1234: "LM Studio",
    30000: "SGLang",
    4000: "LiteLLM proxy",
    5000: "text-generation-webui API, Flask",
    5001: "KoboldCpp",
    3000: "Grafana, OpenLLM",
    9000: "many",
    8001: "Triton gRPC",
    7860: "Gradio",
    4010: "Prism mock server (the openai SDK's tests)",
    8321: "Llama Stack",
    1337: "Jan",
    4891: "GPT4All",
    9997: "Xinference",
    4317: "OTLP gRPC",
    4318: "OTLP HTTP",
    16686: "Jaeger UI",
    9090: "Prometheus",
    8888: "collector telemetry",
    8889: "collector Prometheus exporter",
}


def test_the_default_port_is_no_known_servers() -> None:
    assert DEFAULT_PORT not in WELL_KNOWN, WELL_KNOWN.get(DEFAULT_PORT)
    for host in ("localhost", "127.0.0.1"):
        assert provider_name("OpenAI", host, DEFAULT_PORT) == "openai"
    assert provider_name("OpenAI", "127.0.0.1", 8000) == "vllm"  # the reason it moved


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def fake_server_on_its_default_port() -> Iterator[int]:
    if _listening(DEFAULT_PORT):
        pytest.skip(f"something already listens on 127.0.0.1:{DEFAULT_PORT}")
    process = subprocess.Popen(
        [COMMAND, "fake-server"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "listening on http://127.0.0.1:<port>/v1"
        assert line.strip() == f"listening on http://127.0.0.1:{DEFAULT_PORT}/v1", line
        yield DEFAULT_PORT
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def _operation_spans(path: Path) -> list[dict[str, Any]]:
    """The operation spans of an OTLP JSON lines file, attributes as a plain dict."""
    found = []
    for line in path.read_text().splitlines():
        for resource in json.loads(line).get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    attrs = {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}
                    if "gen_ai.operation.name" in attrs:
                        found.append(attrs)
    return found


def test_bench_against_the_fake_server_names_it_openai(
    fake_server_on_its_default_port: int, tmp_path: Path
) -> None:
    port = fake_server_on_its_default_port
    out = tmp_path / "spans.jsonl"
    started = time.monotonic()
    result = run_cli(
        [
            "bench",
            "--target",
            f"local=http://localhost:{port}/v1",
            "--model",
            "gpt-4o-mini",
            "-n",
            "4",
            "--out",
            str(out),
        ]
    )
    assert result.code == 0, result.err
    operations = _operation_spans(out)
    assert len(operations) == 4, operations
    for attrs in operations:
        assert attrs["gen_ai.provider.name"] == "openai", attrs
        assert attrs["server.address"] == "localhost"
        assert int(attrs["server.port"]) == port
    print(f"bench: 4 calls to localhost:{port}, provider openai ({time.monotonic() - started:.1f} s)")
