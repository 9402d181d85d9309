"""gen_ai.provider.name from the client class and base URL; Azure deployments and api-version."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import GenAiProviderNameValues as Known

from openai_latency.fake_server import FakeServer
from openai_latency.read.attributes import client_attributes, provider_name
from tests.support.span_checks import Captured, attrs

API_VERSION = "2024-10-21"
MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize(
    ("host", "port", "expected"),
    [
        ("api.openai.com", 443, "openai"),
        ("api.deepseek.com", 443, Known.DEEPSEEK.value),
        ("api.groq.com", 443, Known.GROQ.value),
        ("api.mistral.ai", 443, Known.MISTRAL_AI.value),
        ("api.perplexity.ai", 443, Known.PERPLEXITY.value),
        ("api.x.ai", 443, Known.X_AI.value),
        ("generativelanguage.googleapis.com", 443, Known.GCP_GEMINI.value),
        ("us-central1-aiplatform.googleapis.com", 443, Known.GCP_VERTEX_AI.value),
        ("api.anthropic.com", 443, Known.ANTHROPIC.value),
        ("api.cohere.ai", 443, Known.COHERE.value),
        ("my-resource.openai.azure.com", 443, Known.AZURE_AI_OPENAI.value),
        ("my-resource.cognitiveservices.azure.com", 443, Known.AZURE_AI_OPENAI.value),
        ("my-project.services.ai.azure.com", 443, Known.AZURE_AI_INFERENCE.value),
        ("API.Groq.com", 443, Known.GROQ.value),
        ("api.together.xyz", 443, "together_ai"),
        ("openrouter.ai", 443, "openrouter"),
        ("api.fireworks.ai", 443, "fireworks_ai"),
        ("localhost", 11434, "ollama"),
        ("127.0.0.1", 8000, "vllm"),
        ("localhost", 8080, "openai"),  # an unknown OpenAI-compatible server: server.address tells it apart
        ("llm.internal.example", 443, "openai"),
        ("notgroq.com", 443, "openai"),
    ],
)
def test_provider_by_host(host: str, port: int, expected: str) -> None:
    assert provider_name("OpenAI", host, port) == expected


def test_provider_by_client_class() -> None:
    assert provider_name("AzureOpenAI", "10.0.0.5", 443) == "azure.ai.openai"
    assert provider_name("AsyncAzureOpenAI", "gateway.example", 8443) == "azure.ai.openai"


@pytest.mark.parametrize(
    ("base_url", "provider", "address", "port"),
    [
        ("https://api.deepseek.com/v1", "deepseek", "api.deepseek.com", 443),
        ("https://api.groq.com/openai/v1", "groq", "api.groq.com", 443),
        ("https://api.mistral.ai/v1", "mistral_ai", "api.mistral.ai", 443),
        ("https://openrouter.ai/api/v1?x=1", "openrouter", "openrouter.ai", 443),
        ("http://localhost:11434/v1", "ollama", "localhost", 11434),
    ],
)
def test_client_attributes_of_real_clients(base_url: str, provider: str, address: str, port: int) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk-test")
    assert client_attributes(client) == {
        "gen_ai.provider.name": provider,
        "server.address": address,
        "server.port": port,
    }


def _all_text(captured: Captured) -> str:
    """Every span name, attribute and event attribute, as one string to search."""
    parts: list[str] = []
    for span in captured.spans():
        parts.append(span.name)
        parts += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
        for event in span.events:
            parts += [f"{k}={v}" for k, v in (event.attributes or {}).items()]
    return "\n".join(parts)


def _no_query(captured: Captured, server: Any) -> None:
    assert server.last_record().query == {"api-version": API_VERSION}  # it was sent...
    text = _all_text(captured)
    assert "api-version" not in text and API_VERSION not in text and "?" not in text  # ...never recorded
    assert "sk-azure" not in text


def test_azure_openai(captured: Captured, server: Any) -> None:
    client = openai.AzureOpenAI(azure_endpoint=server.origin, api_version=API_VERSION, api_key="sk-azure")
    completion = client.chat.completions.create(model="my-gpt4o", messages=MESSAGES)
    assert server.last_record().path == "/openai/deployments/my-gpt4o/chat/completions"
    op = captured.operation()
    assert op.name == "chat my-gpt4o"
    a = attrs(op)
    assert a["gen_ai.provider.name"] == "azure.ai.openai"
    assert a["gen_ai.response.model"] == completion.model
    assert a["server.address"] == "127.0.0.1"
    assert a["http.response.status_code"] == 200
    _no_query(captured, server)


async def test_async_azure_openai_embeddings_and_fallback(captured: Captured, server: Any) -> None:
    client = openai.AsyncAzureOpenAI(
        azure_endpoint=server.origin, api_version=API_VERSION, api_key="sk-azure"
    )
    await client.embeddings.create(model="my-embedder", input="hello")
    op = captured.operation()
    assert op.name == "embeddings my-embedder"
    assert attrs(op)["gen_ai.provider.name"] == "azure.ai.openai"
    _no_query(captured, server)
    captured.clear()
    await client.images.generate(model="my-dalle", prompt="a cat")  # a deployment path, through the fallback
    assert server.last_record().path == "/openai/deployments/my-dalle/images/generations"
    op = captured.operation()
    assert op.name == "openai POST /images/generations"
    assert attrs(op)["gen_ai.provider.name"] == "azure.ai.openai"
    _no_query(captured, server)


def test_azure_client_with_a_fixed_deployment(captured: Captured, server: Any) -> None:
    client = openai.AzureOpenAI(
        azure_endpoint=server.origin, azure_deployment="fixed", api_version=API_VERSION, api_key="sk-azure"
    )
    stream = client.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
    for _chunk in stream:
        pass
    assert server.last_record().path == "/openai/deployments/fixed/chat/completions"
    op = captured.operation()
    assert op.name == "chat gpt-4o"
    assert attrs(op)["gen_ai.provider.name"] == "azure.ai.openai"
    assert attrs(op)["openai_latency.stream.end_state"] == "completed"
    _no_query(captured, server)
    captured.clear()
    with pytest.raises(openai.NotFoundError):  # /openai/models: a non-deployment path the fake does not serve
        client.models.list()
    op = captured.operation()
    assert op.name == "openai GET /models"
    assert attrs(op)["http.response.status_code"] == 404
    _no_query(captured, server)


@pytest.fixture
def ollama_port() -> Iterator[FakeServer]:
    """A fake server on Ollama's port, when that port is free here."""
    fake = FakeServer(port=11434)
    try:
        fake.start()
    except OSError:
        pytest.skip("port 11434 is in use")
    yield fake
    fake.stop()


def test_local_servers_by_port(captured: Captured, ollama_port: FakeServer, server: Any) -> None:
    openai.OpenAI(base_url="http://localhost:11434/v1", api_key="x").chat.completions.create(
        model="llama3.2", messages=MESSAGES
    )
    a = attrs(captured.operation())
    assert (a["gen_ai.provider.name"], a["server.address"], a["server.port"]) == (
        "ollama",
        "localhost",
        11434,
    )
    captured.clear()
    openai.OpenAI(base_url=f"http://localhost:{server.port}/v1", api_key="x").chat.completions.create(
        model="local-model", messages=MESSAGES
    )
    a = attrs(captured.operation())
    assert (a["gen_ai.provider.name"], a["server.address"], a["server.port"]) == (
        "openai",
        "localhost",
        server.port,
    )
