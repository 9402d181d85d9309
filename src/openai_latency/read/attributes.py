"""Request kwargs and response objects -> span attributes (response headers: :mod:`.headers`;
exceptions: :mod:`.errors`).

Everything here reads SDK objects by duck typing (``getattr`` with defaults) so one code path
serves openai 1.x to 3.x, and nothing here ever records keys, auth headers, cookies or query strings.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Mapping
from typing import Any, Protocol

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.attributes import openai_attributes as openai_attrs

from .. import semconv as sc
from ..model import Attributes

# kwarg name -> attribute, for the request parameters the GenAI conventions name
_REQUEST_PARAMS = {
    "temperature": gen_ai.GEN_AI_REQUEST_TEMPERATURE,
    "top_p": gen_ai.GEN_AI_REQUEST_TOP_P,
    "max_tokens": gen_ai.GEN_AI_REQUEST_MAX_TOKENS,
    "max_completion_tokens": gen_ai.GEN_AI_REQUEST_MAX_TOKENS,
    "max_output_tokens": gen_ai.GEN_AI_REQUEST_MAX_TOKENS,
    "frequency_penalty": gen_ai.GEN_AI_REQUEST_FREQUENCY_PENALTY,
    "presence_penalty": gen_ai.GEN_AI_REQUEST_PRESENCE_PENALTY,
    "seed": gen_ai.GEN_AI_REQUEST_SEED,
    "n": gen_ai.GEN_AI_REQUEST_CHOICE_COUNT,
}

_OPTIONAL_PARAMS = frozenset(
    (
        *_REQUEST_PARAMS,
        "stop",
        "service_tier",
        "encoding_format",
        "dimensions",
        "reasoning_effort",
        "reasoning",
    )
)

# Known OpenAI-compatible hosts -> gen_ai.provider.name: the semconv well-known value where one exists
# (GenAiProviderNameValues: azure.ai.openai, azure.ai.inference, deepseek, groq, mistral_ai, perplexity,
# x_ai, gcp.gemini, gcp.vertex_ai, anthropic, cohere), else a lowercase custom value. A host matches a
# suffix exactly or after a "." or "-" (regional Vertex hosts: us-central1-aiplatform.googleapis.com).
_PROVIDER_HOSTS = (
    ("openai.azure.com", "azure.ai.openai"),
    ("cognitiveservices.azure.com", "azure.ai.openai"),
    ("services.ai.azure.com", "azure.ai.inference"),
    ("models.inference.ai.azure.com", "azure.ai.inference"),
    ("api.deepseek.com", "deepseek"),
    ("api.groq.com", "groq"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.together.xyz", "together_ai"),
    ("openrouter.ai", "openrouter"),
    ("api.fireworks.ai", "fireworks_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("api.x.ai", "x_ai"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("api.anthropic.com", "anthropic"),
    ("api.cohere.ai", "cohere"),
    ("api.cohere.com", "cohere"),
)
_LOCAL_PORTS = {11434: "ollama", 8000: "vllm"}


class Fields(Protocol):
    """What is read of an SDK object's fields: ``get(name)`` (a dict is one)."""

    def get(self, name: str, default: Any = None, /) -> Any: ...


class _Getattr:
    """An object's attributes, read with the plain ``getattr``."""

    __slots__ = ("_obj",)

    def __init__(self, obj: object) -> None:
        self._obj = obj

    def get(self, name: str, default: Any = None, /) -> Any:
        return getattr(self._obj, name, default)


def fields(obj: object) -> Fields:
    """An SDK object's field values by name, for ``.get(name)`` reads.

    A pydantic v2 model keeps its declared fields in ``__dict__`` and the extra ones in
    ``__pydantic_extra__``: reading those costs a dict lookup, where ``getattr`` of an absent name
    goes through the model's ``__getattr__``, which builds and raises an AttributeError (~2 µs; an
    embeddings response lacks ten of the names a chat completion has). Anything else (pydantic v1
    models, stand-ins) is read with ``getattr``."""
    values = getattr(obj, "__dict__", None)
    extra = getattr(obj, "__pydantic_extra__", None)
    if values is None or not isinstance(extra, dict):
        return _Getattr(obj)
    return {**extra, **values} if extra else values


def is_given(value: object) -> bool:
    """False for None and the SDK's NOT_GIVEN / Omit sentinels."""
    return value is not None and type(value).__name__ not in ("NotGiven", "Omit")


def request_attributes(kwargs: Mapping[str, Any], operation: str, api_type: str | None) -> Attributes:
    attributes: Attributes = {sc.GEN_AI_OPERATION_NAME: operation}
    if api_type:
        attributes[openai_attrs.OPENAI_API_TYPE] = api_type
    model = kwargs.get("model")
    if is_given(model):
        attributes[sc.GEN_AI_REQUEST_MODEL] = str(model)
    if operation != "embeddings":  # an embeddings call cannot stream: nothing to say
        attributes[gen_ai.GEN_AI_REQUEST_STREAM] = kwargs.get("stream") is True
    # One pass over what the caller passed (a few keys), not over every parameter we know.
    for name in kwargs.keys() & _OPTIONAL_PARAMS:
        value = kwargs[name]
        key = _REQUEST_PARAMS.get(name)
        if key is not None:
            if name == "max_tokens" and key in attributes:
                continue  # max_completion_tokens / max_output_tokens win, whatever the set's order
            if is_given(value) and isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[key] = value
        elif name == "stop":
            if isinstance(value, str):
                attributes[gen_ai.GEN_AI_REQUEST_STOP_SEQUENCES] = [value]
            elif isinstance(value, (list, tuple)) and all(isinstance(s, str) for s in value):
                attributes[gen_ai.GEN_AI_REQUEST_STOP_SEQUENCES] = list(value)
        elif name == "service_tier":
            if isinstance(value, str):
                attributes[openai_attrs.OPENAI_REQUEST_SERVICE_TIER] = value
        elif name == "encoding_format":
            if isinstance(value, str):
                attributes[gen_ai.GEN_AI_REQUEST_ENCODING_FORMATS] = [value]
        elif name in ("reasoning_effort", "reasoning"):  # chat's effort; Responses' {"effort": ...}
            effort = value if name == "reasoning_effort" else param_field(value, "effort")
            if isinstance(effort, str):
                attributes[sc.GEN_AI_REQUEST_REASONING_LEVEL] = effort
        elif operation == "embeddings" and isinstance(value, int) and not isinstance(value, bool):
            attributes[gen_ai.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = value  # dimensions
    return attributes


_BY_CLIENT: weakref.WeakKeyDictionary[object, tuple[object, Attributes]] = weakref.WeakKeyDictionary()
"""client -> (its base_url object, the attributes read from it): reading them parses the URL."""


def client_attributes(client: object) -> Attributes:
    """gen_ai.provider.name, server.address and server.port from the SDK client object."""
    # the attribute behind the SDK's ``base_url`` property (a function call in openai 3)
    url = getattr(client, "_base_url", None) or getattr(client, "base_url", None)
    try:
        cached = _BY_CLIENT.get(client)
    except TypeError:  # not weak-referenceable (None, a stand-in)
        return _url_attributes(client, url)
    if cached is not None and cached[0] is url:
        return dict(cached[1])
    attributes = _url_attributes(client, url)
    _BY_CLIENT[client] = (url, attributes)
    return dict(attributes)


def _url_attributes(client: object, url: object) -> Attributes:
    attributes: Attributes = {}
    host = getattr(url, "host", None)
    port = getattr(url, "port", None)
    scheme = getattr(url, "scheme", "https")
    if host:
        attributes[sc.SERVER_ADDRESS] = host
        attributes[sc.SERVER_PORT] = port or (443 if scheme == "https" else 80)
    attributes[sc.GEN_AI_PROVIDER_NAME] = provider_name(type(client).__name__, host or "", port)
    return attributes


@functools.lru_cache(maxsize=256)
def provider_name(client_class: str, host: str, port: int | None) -> str:
    if "Azure" in client_class:
        return "azure.ai.openai"
    host = host.lower()
    for suffix, name in _PROVIDER_HOSTS:
        if host == suffix or host.endswith(("." + suffix, "-" + suffix)):
            return name
    if host in ("localhost", "127.0.0.1", "::1") and port in _LOCAL_PORTS:
        return _LOCAL_PORTS[port]
    return "openai"


def response_attributes(result: object) -> Attributes:
    """Attributes of a parsed response (ChatCompletion, Response, Completion, embeddings)."""
    attributes: Attributes = {}
    if result is None:
        return attributes
    f = fields(result)
    response_id = f.get("id")
    if isinstance(response_id, str):
        attributes[gen_ai.GEN_AI_RESPONSE_ID] = response_id
    model = f.get("model")
    if isinstance(model, str):
        attributes[sc.GEN_AI_RESPONSE_MODEL] = model
    reasons = finish_reasons(f.get("choices"))
    kind = f.get("object")
    if kind == "response":
        status = f.get("status")
        reasons = [status] if isinstance(status, str) else reasons
    elif kind == "list":
        dimensions = embedding_dimensions(f.get("data"))
        if dimensions:
            attributes[gen_ai.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = dimensions
    if reasons:
        attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = reasons
    fingerprint = f.get("system_fingerprint")
    if isinstance(fingerprint, str):
        attributes[openai_attrs.OPENAI_RESPONSE_SYSTEM_FINGERPRINT] = fingerprint
    tier = f.get("service_tier")
    if isinstance(tier, str):
        attributes[openai_attrs.OPENAI_RESPONSE_SERVICE_TIER] = tier
    usage = f.get("usage")
    if usage is not None:
        attributes.update(usage_attributes(usage))
    return attributes


def param_field(value: object, name: str) -> Any:
    """A request parameter's field: params are TypedDicts (plain dicts) or, sometimes, SDK models."""
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


CHAT_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_details")
"""Where OpenAI-compatible servers put reasoning text in a chat message or delta: ``reasoning_content``
(DeepSeek, SGLang, older vLLM), ``reasoning`` (vLLM since late 2025, OpenRouter, Groq), OpenRouter's
``reasoning_details``. None is a field of the SDK's models: a pydantic v2 model keeps them in its
extras (``getattr`` of an absent name on it raises and catches an AttributeError, ~2 µs)."""


def reasoning_visibility(result: object, reasoning_tokens: object) -> str:
    """How much of a non-stream result's reasoning reached the caller: ``streamed`` (its text: a chat
    message's ``reasoning_content``/``reasoning``, a Responses reasoning item's content),
    ``summary`` (Responses reasoning summaries only), ``hidden`` (usage reports reasoning tokens,
    no text came) or ``none``."""
    f = fields(result)
    summary = False
    if f.get("object") == "response":
        for item in f.get("output") or ():
            item_fields = fields(item)
            if item_fields.get("type") == "reasoning":
                if item_fields.get("content"):
                    return "streamed"
                summary = summary or bool(item_fields.get("summary"))
    else:
        choices = f.get("choices")
        message = fields(choices[0]).get("message") if isinstance(choices, list) and choices else None
        if message is not None:
            message_fields = fields(message)
            if any(message_fields.get(name) for name in CHAT_REASONING_FIELDS):
                return "streamed"
    if summary:
        return "summary"
    return "hidden" if isinstance(reasoning_tokens, int) and reasoning_tokens > 0 else "none"


def embedding_dimensions(data: object) -> int | None:
    """Length of the first vector of an embeddings response; the vectors themselves are never read."""
    if not isinstance(data, list) or not data:
        return None
    vector = fields(data[0]).get("embedding")
    if isinstance(vector, list):
        return len(vector)
    if isinstance(vector, str):  # encoding_format="base64": little-endian float32s
        return (len(vector) * 3 // 4 - len(vector) + len(vector.rstrip("="))) // 4
    return None


def finish_reasons(choices: Any) -> list[str]:
    if not choices or not isinstance(choices, (list, tuple)):  # unvalidated JSON: any shape
        return []
    reasons = [fields(choice).get("finish_reason") for choice in choices]
    return [str(reason) for reason in reasons if reason]


def usage_attributes(usage: object) -> Attributes:
    if usage is None:
        return {}
    attributes: Attributes = {}
    f = fields(usage)
    input_tokens = _first_int(f, "prompt_tokens", "input_tokens")
    output_tokens = _first_int(f, "completion_tokens", "output_tokens")
    if input_tokens is not None:
        attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
    if output_tokens is not None:
        attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
    input_details = f.get("prompt_tokens_details") or f.get("input_tokens_details")
    cached = None
    if input_details is not None:
        cached = _first_int(fields(input_details), "cached_tokens")
    if cached is None:  # DeepSeek: ``prompt_cache_hit_tokens`` beside the prompt tokens
        cached = _first_int(f, "prompt_cache_hit_tokens")
    if cached is not None:
        attributes[gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = cached
    output_details = f.get("completion_tokens_details") or f.get("output_tokens_details")
    if output_details is not None:
        reasoning = _first_int(fields(output_details), "reasoning_tokens")
        if reasoning is not None:
            attributes[gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = reasoning
    return attributes


def _first_int(values: Fields, *names: str) -> int | None:
    for name in names:
        value = values.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
