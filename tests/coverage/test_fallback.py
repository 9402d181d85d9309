"""Every other endpoint: the fallback at ``request`` gives one ``openai {METHOD} {path template}`` span."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from opentelemetry.trace import StatusCode

from openai_latency.read.routing import api_path, fallback_kind, path_template
from tests.support.span_checks import Captured, assert_tiles, attrs

PHASES = ["openai.request_build", "openai.network_wait", "openai.response_read"]


def _client(server: Any, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", **{"max_retries": 0, **options})


def _aclient(server: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def _fallback(captured: Captured, method: str, template: str, status: int = 200) -> dict[str, Any]:
    op = captured.operation()  # exactly one operation span
    assert op.name == f"openai {method} {template}"
    assert captured.phase_names(op) == PHASES
    assert_tiles(op, captured.phases(op))
    a = attrs(op)
    assert a["http.request.method"] == method
    assert a["url.template"] == template
    assert a["http.response.status_code"] == status
    assert a["openai_latency.request_id"].startswith("req_")
    assert a["gen_ai.provider.name"] == "openai"
    assert "gen_ai.operation.name" not in a  # not a GenAI operation
    assert (op.status.status_code == StatusCode.ERROR) is (status >= 400)
    return a


def test_images_generate(captured: Captured, server: Any) -> None:
    result = _client(server).images.generate(model="dall-e-3", prompt="a cat")
    assert result.data and result.data[0].b64_json
    a = _fallback(captured, "POST", "/images/generations")
    assert a["gen_ai.request.model"] == "dall-e-3"


async def test_async_images_generate(captured: Captured, server: Any) -> None:
    result = await _aclient(server).images.generate(model="dall-e-3", prompt="a cat")
    assert result.data
    _fallback(captured, "POST", "/images/generations")


def test_models_list_and_retrieve(captured: Captured, server: Any) -> None:
    client = _client(server)
    assert [m.id for m in client.models.list()]
    _fallback(captured, "GET", "/models")
    captured.clear()
    assert client.models.retrieve("gpt-4o-mini").id == "gpt-4o-mini"
    _fallback(captured, "GET", "/models/{id}")


def test_files_list(captured: Captured, server: Any) -> None:
    assert len(list(_client(server).files.list())) == 2
    _fallback(captured, "GET", "/files")


async def test_async_paginated_lists(captured: Captured, server: Any) -> None:
    """``AsyncPaginator``: awaited for one page, or iterated page by page; both are the SDK's own."""
    client = _aclient(server)
    page = await client.files.list()
    assert isinstance(page, openai.pagination.AsyncCursorPage) and len(page.data) == 2
    _fallback(captured, "GET", "/files")
    captured.clear()
    assert [m.id async for m in client.models.list()]
    _fallback(captured, "GET", "/models")


def test_unknown_endpoint(captured: Captured, server: Any) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        _client(server).post("/unknown/thing-123", cast_to=object, body={"x": 1})
    assert info.value.status_code == 404  # the SDK's own exception, unchanged
    a = _fallback(captured, "POST", "/unknown/{id}", status=404)
    assert a["error.type"] == "404"
    assert a["openai_latency.error.category"] == "not_found"


async def test_async_unknown_endpoint(captured: Captured, server: Any) -> None:
    with pytest.raises(openai.NotFoundError):
        await _aclient(server).get("/files/file-abc123/content", cast_to=object)
    _fallback(captured, "GET", "/files/{id}/content", status=404)


def test_provider_error_code(captured: Captured, server: Any) -> None:
    with pytest.raises(openai.AuthenticationError):
        _client(server).models.list(extra_headers={"x-fake-error": "invalid_api_key"})
    a = _fallback(captured, "GET", "/models", status=401)
    assert a["error.type"] == "invalid_api_key"
    assert a["openai_latency.error.category"] == "auth"


def test_retry_backoff(captured: Captured, server: Any) -> None:
    client = _client(server, max_retries=2)
    client.files.list(extra_headers={"x-fake-fail-attempts": "1", "x-fake-retry-after-ms": "30"})
    op = captured.operation()
    assert captured.phase_names(op) == [
        "openai.request_build",
        "openai.network_wait",
        "openai.retry_backoff",
        "openai.request_build",
        "openai.network_wait",
        "openai.response_read",
    ]
    a = attrs(op)
    assert op.name == "openai GET /files"
    assert a["http.request.resend_count"] == 1 and a["openai_latency.attempts"] == 2
    assert a["http.response.status_code"] == 200
    statuses = [attrs(p).get("http.response.status_code") for p in captured.phases(op)]
    assert statuses[1:5] == [429, None, None, 200]


def test_no_double_span_for_covered_calls(instrument: Any, server: Any) -> None:
    """Bound methods captured before instrumentation reach only the fallback, which routes them to
    their own kind; calls through the wrapped resource methods never add a fallback span."""
    client = _client(server)
    early_create = client.embeddings.create  # the unwrapped function, bound before instrument()
    captured = instrument()
    early_create(model="text-embedding-3-small", input="hi")
    op = captured.operation()
    assert (
        op.name == "embeddings text-embedding-3-small" and attrs(op)["gen_ai.operation.name"] == "embeddings"
    )
    captured.clear()
    client.images.generate(model="dall-e-3", prompt="x")
    client.embeddings.create(model="text-embedding-3-small", input="hi")
    client.completions.create(model="gpt-3.5-turbo-instruct", prompt="hi")
    client.responses.create(model="gpt-4o", input="hi")
    assert [s.name for s in captured.operations()] == [
        "openai POST /images/generations",
        "embeddings text-embedding-3-small",
        "text_completion gpt-3.5-turbo-instruct",
        "chat gpt-4o",
    ]
    assert all(len(captured.phases(op)) == 3 for op in captured.operations())


@pytest.mark.parametrize(
    ("path", "template", "operation"),
    [
        ("/chat/completions", "/chat/completions", "chat"),
        ("/v1/embeddings", "/v1/embeddings", "embeddings"),
        (
            "/openai/deployments/my-gpt4/chat/completions?api-version=2024-10-21",
            "/openai/deployments/{id}/chat/completions",
            "chat",
        ),
        ("/deployments/gpt4/completions", "/deployments/{id}/completions", "text_completion"),
        (
            "https://x.openai.azure.com/openai/v1/responses?api-version=preview",
            "/openai/v1/responses",
            "chat",
        ),
        ("/files/file-abc123/content?purpose=x", "/files/{id}/content", "openai"),
        ("/models/davinci", "/models/{id}", "openai"),
        ("/vector_stores/vs_abc123/files/file-1", "/vector_stores/{id}/files/{id}", "openai"),
        ("/fine_tuning/jobs/ftjob-1/events", "/fine_tuning/jobs/{id}/events", "openai"),
        ("/openaix/chat/completions", "/openaix/chat/completions", "openai"),
    ],
)
def test_routing(path: str, template: str, operation: str) -> None:
    assert path_template(path) == template
    assert "?" not in api_path(path)
    assert fallback_kind("POST", path).operation == operation
    assert fallback_kind("GET", "/responses/resp_123").api_type == "responses"
