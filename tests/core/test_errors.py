"""Failed calls: ERROR status, the right error attributes, and the caller's exception unchanged."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import openai
import pytest
from opentelemetry.trace import StatusCode

from tests.support.span_checks import Captured, attrs

MESSAGES = [{"role": "user", "content": "hello"}]

# script -> (exception class, error.type, error.category, status code or None)
HTTP_ERRORS = {
    "invalid_api_key": (openai.AuthenticationError, "invalid_api_key", "auth", 401),
    "model_not_found": (openai.NotFoundError, "model_not_found", "not_found", 404),
    "context_length_exceeded": (openai.BadRequestError, "context_length_exceeded", "context_length", 400),
    "rate_limit_exceeded": (openai.RateLimitError, "rate_limit_exceeded", "rate_limit", 429),
    "insufficient_quota": (openai.RateLimitError, "insufficient_quota", "quota", 429),
    "server_error": (openai.InternalServerError, "server_error", "server", 500),
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _outcome(call: Callable[[], Any]) -> tuple[type[BaseException], str]:
    with pytest.raises(openai.OpenAIError) as raised:
        call()
    return type(raised.value), str(raised.value)


def _check(captured: Captured, error_type: str, category: str, status: int | None) -> dict[str, Any]:
    op = captured.operation()
    assert op.status.status_code == StatusCode.ERROR
    a = attrs(op)
    assert a["error.type"] == error_type
    assert a["openai_latency.error.category"] == category
    if status is None:
        assert "http.response.status_code" not in a
    else:
        assert a["http.response.status_code"] == status
    assert any(event.name == "exception" for event in op.events)
    return a


@pytest.mark.parametrize("error", sorted(HTTP_ERRORS))
def test_http_errors(instrument: Callable[..., Captured], server: Any, error: str) -> None:
    exc_class, error_type, category, status = HTTP_ERRORS[error]
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)

    def call() -> Any:
        return client.chat.completions.create(
            model="m", messages=MESSAGES, extra_headers={"x-fake-error": error}
        )

    baseline = _outcome(call)  # not instrumented yet
    captured = instrument()
    assert _outcome(call) == baseline
    assert baseline[0] is exc_class
    _check(captured, error_type, category, status)


def test_429_with_retries_exhausted(captured: Captured, server: Any) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=1)
    script = {"x-fake-error": "rate_limit_exceeded", "x-fake-retry-after-ms": "10"}
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="m", messages=MESSAGES, extra_headers=script)
    a = _check(captured, "rate_limit_exceeded", "rate_limit", 429)
    assert a["openai_latency.attempts"] == 2
    assert captured.phase_names().count("openai.network_wait") == 2


def test_read_timeout(instrument: Callable[..., Captured], server: Any) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=0.2)

    def call() -> Any:
        return client.chat.completions.create(
            model="m", messages=MESSAGES, extra_headers={"x-fake-delay-ms": "1000"}
        )

    baseline = _outcome(call)
    captured = instrument()
    assert _outcome(call) == baseline
    assert baseline[0] is openai.APITimeoutError
    _check(captured, "openai.APITimeoutError", "timeout", None)
    network_wait = captured.phases()[1]
    assert network_wait.name == "openai.network_wait"
    assert attrs(network_wait)["error.type"].endswith("ReadTimeout")


def test_connection_refused(instrument: Callable[..., Captured]) -> None:
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{_free_port()}/v1", api_key="sk-test", max_retries=0)

    def call() -> Any:
        return client.chat.completions.create(model="m", messages=MESSAGES)

    baseline = _outcome(call)
    captured = instrument()
    assert _outcome(call) == baseline
    assert baseline[0] is openai.APIConnectionError
    _check(captured, "openai.APIConnectionError", "connection", None)


def test_async_http_error(captured: Captured, server: Any) -> None:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    with pytest.raises(openai.NotFoundError):
        asyncio.run(
            client.chat.completions.create(
                model="m", messages=MESSAGES, extra_headers={"x-fake-error": "model_not_found"}
            )
        )
    _check(captured, "model_not_found", "not_found", 404)


def test_sdk_exception_is_the_same_object(captured: Captured, server: Any) -> None:
    """What the SDK raised reaches the caller as is: same object, same cause chain."""
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    seen: list[BaseException] = []
    original = client._make_status_error_from_response

    def spy(response: Any) -> Any:
        exc = original(response)
        seen.append(exc)
        return exc

    client._make_status_error_from_response = spy  # type: ignore[method-assign]
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(
            model="m", messages=MESSAGES, extra_headers={"x-fake-error": "server_error"}
        )
    assert seen and raised.value is seen[0]


def test_argument_errors_stay_at_call_time_for_async(captured: Captured, server: Any) -> None:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
    with pytest.raises(TypeError):
        client.chat.completions.create(model="m", messages=MESSAGES, no_such_argument=1)  # type: ignore[call-overload]
    assert captured.operations() == []


def test_stream_request_that_fails_before_streaming(captured: Captured, server: Any) -> None:
    """A 400 to a stream=True call never became a stream: it reads an error body, nothing streams."""
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,
            extra_headers={"x-fake-error": "context_length_exceeded"},
        )
    a = _check(captured, "context_length_exceeded", "context_length", 400)
    assert captured.phase_names() == ["openai.request_build", "openai.network_wait", "openai.response_read"]
    assert a["gen_ai.request.stream"] is True
    assert not any(key.startswith("openai_latency.stream.") for key in a)
