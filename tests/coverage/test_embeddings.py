"""Embeddings: one ``embeddings {model}`` span with usage, dimensions and encoding; never the vectors."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from openai.types import CreateEmbeddingResponse
from opentelemetry.trace import StatusCode

from tests.support.span_checks import Captured, assert_tiles, attrs

MODEL = "text-embedding-3-small"
PHASES = ["openai.request_build", "openai.network_wait", "openai.response_read"]


def _client(server: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def _operation(captured: Captured) -> dict[str, Any]:
    op = captured.operation()
    assert op.name == f"embeddings {MODEL}"
    assert captured.phase_names(op) == PHASES
    assert_tiles(op, captured.phases(op))
    a = attrs(op)
    assert a["gen_ai.operation.name"] == "embeddings"
    assert a["gen_ai.request.model"] == MODEL
    assert a["gen_ai.response.model"] == MODEL
    assert a["gen_ai.provider.name"] == "openai"
    assert a["http.response.status_code"] == 200
    assert "gen_ai.usage.output_tokens" not in a
    assert "gen_ai.request.stream" not in a  # an embeddings call cannot stream
    return a


def _assert_no_vectors(captured: Captured, response: CreateEmbeddingResponse) -> None:
    """No attribute of any span or event holds a vector, or any number from one."""
    numbers = {value for item in response.data for value in item.embedding if isinstance(value, float)}
    for span in captured.spans():
        values = list((span.attributes or {}).values())
        values += [v for event in span.events for v in (event.attributes or {}).values()]
        for value in values:
            items = value if isinstance(value, (list, tuple)) else [value]
            assert not any(isinstance(v, float) and v in numbers for v in items), (span.name, value)
            assert not (isinstance(value, (list, tuple)) and len(value) > 4), (span.name, value)


def test_embeddings(captured: Captured, server: Any) -> None:
    response = _client(server).embeddings.create(
        model=MODEL, input=["the quick brown fox", "jumps"], dimensions=16, encoding_format="float"
    )
    assert type(response) is CreateEmbeddingResponse and len(response.data[0].embedding) == 16
    a = _operation(captured)
    assert a["gen_ai.usage.input_tokens"] == response.usage.prompt_tokens == 5
    assert a["gen_ai.embeddings.dimension.count"] == 16
    assert a["gen_ai.request.encoding_formats"] == ("float",)
    _assert_no_vectors(captured, response)


async def test_async_embeddings(captured: Captured, server: Any) -> None:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    response = await client.embeddings.create(model=MODEL, input="hello world", dimensions=4)
    assert len(response.data[0].embedding) == 4
    a = _operation(captured)
    assert a["gen_ai.usage.input_tokens"] == 2
    assert a["gen_ai.embeddings.dimension.count"] == 4
    _assert_no_vectors(captured, response)


def test_dimension_count_from_the_response(captured: Captured, server: Any) -> None:
    """No ``dimensions`` asked: the count comes from the returned vectors (the SDK asks for base64
    on the wire and decodes it to floats, so the caller never named a format: none recorded)."""
    response = _client(server).embeddings.create(model=MODEL, input="hello")
    assert len(response.data[0].embedding) == 8  # the fake's default
    a = _operation(captured)
    assert a["gen_ai.embeddings.dimension.count"] == 8
    assert "gen_ai.request.encoding_formats" not in a
    _assert_no_vectors(captured, response)


def test_base64_vectors(captured: Captured, server: Any) -> None:
    response = _client(server).embeddings.create(model=MODEL, input="hello", encoding_format="base64")
    assert isinstance(response.data[0].embedding, str)  # the SDK hands base64 through when asked for it
    a = _operation(captured)
    assert a["gen_ai.embeddings.dimension.count"] == 8
    assert a["gen_ai.request.encoding_formats"] == ("base64",)
    for span in captured.spans():
        assert response.data[0].embedding not in (span.attributes or {}).values()


def test_error(captured: Captured, server: Any) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        _client(server).embeddings.create(
            model=MODEL, input="x", extra_headers={"x-fake-error": "model_not_found"}
        )
    assert info.value.code == "model_not_found"
    op = captured.operation()
    assert op.status.status_code == StatusCode.ERROR
    assert attrs(op)["error.type"] == "model_not_found"
    assert attrs(op)["openai_latency.error.category"] == "not_found"
