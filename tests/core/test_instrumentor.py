"""instrument()/uninstrument(), settings, safety, and ``opentelemetry-instrument`` end to end."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
import wrapt

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.config import Settings, load_settings
from openai_latency.read import attributes as attributes_module
from tests.support.patch_targets import patched_targets
from tests.support.span_checks import Captured, attrs

MESSAGES = [{"role": "user", "content": "hello"}]
ROOT = Path(__file__).resolve().parents[2]


def test_uninstrument_leaves_no_wrapper(instrument: Callable[..., Captured]) -> None:
    targets = patched_targets()
    assert len(targets) >= 25
    instrument()
    assert all(isinstance(vars(owner)[name], wrapt.FunctionWrapper) for owner, name in targets)
    OpenAILatencyInstrumentor().uninstrument()
    leftovers = [
        f"{owner.__name__}.{name}"
        for owner, name in targets
        if isinstance(vars(owner)[name], wrapt.FunctionWrapper)
    ]
    assert leftovers == []


def test_instrument_twice_is_harmless(instrument: Callable[..., Captured], server: Any) -> None:
    captured = instrument()
    OpenAILatencyInstrumentor().instrument()  # the singleton warns and does nothing
    openai.OpenAI(base_url=server.base_url, api_key="sk-test").chat.completions.create(
        model="m", messages=MESSAGES
    )
    assert len(captured.operations()) == 1


def test_no_telemetry_after_uninstrument(instrument: Callable[..., Captured], server: Any) -> None:
    captured = instrument()
    OpenAILatencyInstrumentor().uninstrument()
    openai.OpenAI(base_url=server.base_url, api_key="sk-test").chat.completions.create(
        model="m", messages=MESSAGES
    )
    assert captured.spans() == []


def test_phase_spans_settings(instrument: Callable[..., Captured], server: Any) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
    captured = instrument(phase_spans="phases")
    client.chat.completions.create(model="m", messages=MESSAGES)
    network_wait = captured.phases()[1]
    assert captured.children(network_wait) == []
    captured = instrument(phase_spans="off")
    client.chat.completions.create(model="m", messages=MESSAGES)
    assert [s.name for s in captured.spans()] == ["chat m"]
    a = attrs(captured.operation())
    assert a["openai_latency.phase.network_wait"] > 0
    assert a["openai_latency.dominant_phase"]


def test_settings_from_env_and_kwargs(caplog: pytest.LogCaptureFixture) -> None:
    env = {
        "OPENAI_LATENCY_PHASE_SPANS": "phases",
        "OPENAI_LATENCY_STALL_THRESHOLD": "0.5",
        "OPENAI_LATENCY_TRACE_DNS": "TRUE",
        "OPENAI_LATENCY_PROPAGATE": "0",
    }
    settings = load_settings({"stall_threshold": 1.5}, environ=env)
    assert settings == Settings(phase_spans="phases", stall_threshold=1.5, trace_dns=True, propagate=False)


def test_invalid_settings_warn_and_fall_back(caplog: pytest.LogCaptureFixture) -> None:
    env = {"OPENAI_LATENCY_PHASE_SPANS": "verbose", "OPENAI_LATENCY_STALL_THRESHOLD": "-1"}
    with caplog.at_level(logging.WARNING, logger="openai_latency"):
        settings = load_settings({"trace_dns": "maybe"}, environ=env)
    assert settings == Settings()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert any("OPENAI_LATENCY_PHASE_SPANS" in m and "detailed|phases|off" in m for m in messages)
    assert any("OPENAI_LATENCY_STALL_THRESHOLD" in m for m in messages)
    assert any("trace_dns" in m for m in messages)


def test_an_internal_error_never_reaches_the_caller(
    captured: Captured, server: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(result: Any) -> dict[str, Any]:
        raise RuntimeError("bug in openai-latency")

    monkeypatch.setattr(attributes_module, "response_attributes", broken)
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
    with caplog.at_level(logging.WARNING, logger="openai_latency"):
        for _ in range(3):
            completion = client.chat.completions.create(model="m", messages=MESSAGES)
            assert completion.choices[0].message.content
    warnings = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert len(warnings) == 1  # logged once, not per call
    assert len(captured.operations()) == 3  # and every span still ended


def test_never_imports_httpx() -> None:
    code = textwrap.dedent(
        """
        import sys
        import openai
        before = set(sys.modules)
        from openai_latency import OpenAILatencyInstrumentor
        OpenAILatencyInstrumentor().instrument()
        added = set(sys.modules) - before
        print(sorted(m for m in added if m == "httpx" or m.startswith("httpx.")))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


APP = """
import openai
from openai_latency.fake_server import FakeServer

with FakeServer() as server:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-secret-key-never-exported", max_retries=2)
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True,
        extra_headers={"x-fake-chunks": "4"},
    )
    for _ in stream:
        pass
    client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-fake-fail-attempts": "1", "x-fake-retry-after-ms": "50"},
    )
"""


def _console_spans(stdout: str) -> list[dict[str, Any]]:
    decoder = json.JSONDecoder()
    spans, index = [], 0
    while True:
        start = stdout.find("{", index)
        if start < 0:
            return spans
        span, index = decoder.raw_decode(stdout, start)
        spans.append(span)


def test_opentelemetry_instrument_command(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(APP)
    command = Path(sys.executable).with_name("opentelemetry-instrument")
    env = {
        **os.environ,
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_SERVICE_NAME": "instrument-test",
        # the official OpenAI (entry point ``openai``) and httpx instrumentations may be installed
        # too (tests/test_coexistence.py); this test is about ours alone
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai,httpx",
    }
    out = subprocess.run(
        [str(command), sys.executable, str(app)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "sk-secret-key-never-exported" not in out.stdout
    spans = _console_spans(out.stdout)
    ops = [s for s in spans if s["name"] == "chat gpt-4o-mini"]
    assert len(ops) == 2
    by_parent: dict[str, list[str]] = {}
    for span in spans:
        by_parent.setdefault(span.get("parent_id") or "", []).append(span["name"])
    stream_op, retried_op = sorted(ops, key=lambda s: s["start_time"])
    assert by_parent[stream_op["context"]["span_id"]] == [
        "openai.request_build",
        "openai.network_wait",
        "openai.first_token",
        "openai.stream_drain",
    ]
    assert sorted(by_parent[retried_op["context"]["span_id"]]) == sorted(
        [
            "openai.request_build",
            "openai.network_wait",
            "openai.retry_backoff",
            "openai.request_build",
            "openai.network_wait",
            "openai.response_read",
        ]
    )
    assert retried_op["attributes"]["openai_latency.attempts"] == 2
    assert {s["context"]["trace_id"] for s in spans if s["name"].startswith("openai.")} <= {
        op["context"]["trace_id"] for op in ops
    }
