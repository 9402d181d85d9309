"""Reading the SDK's response objects: field values through the model's field mapping.

``attributes.fields`` reads a pydantic v2 model's ``__dict__`` and extras instead of ``getattr``: an
absent name no longer goes through pydantic's ``__getattr__`` (a raised and caught AttributeError per
name, ten per embeddings response). These tests pin what that must not change: the same attributes
from validated and unvalidated (``construct``) objects, extras a provider adds, stand-ins that are not
pydantic models; and that an embeddings response is read without a single miss.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
from openai.types import CreateEmbeddingResponse
from openai.types.chat import ChatCompletion

from openai_latency.read import attributes

CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "gpt-4o-mini",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"},
        {"index": 1, "message": {"role": "assistant", "content": "yo"}, "finish_reason": "length"},
    ],
    "service_tier": "default",
    "system_fingerprint": "fp_1",
    "usage": {
        "prompt_tokens": 3,
        "completion_tokens": 5,
        "total_tokens": 8,
        "prompt_tokens_details": {"cached_tokens": 2},
        "completion_tokens_details": {"reasoning_tokens": 1},
    },
}
CHAT_ATTRIBUTES = {
    "gen_ai.response.id": "chatcmpl-1",
    "gen_ai.response.model": "gpt-4o-mini",
    "gen_ai.response.finish_reasons": ["stop", "length"],
    "openai.response.system_fingerprint": "fp_1",
    "openai.response.service_tier": "default",
    "gen_ai.usage.input_tokens": 3,
    "gen_ai.usage.output_tokens": 5,
    "gen_ai.usage.cache_read.input_tokens": 2,
    "gen_ai.usage.reasoning.output_tokens": 1,
}
EMBEDDINGS = {
    "object": "list",
    "data": [{"object": "embedding", "index": 0, "embedding": [0.5, -0.25, 0.125]}],
    "model": "text-embedding-3-small",
    "usage": {"prompt_tokens": 4, "total_tokens": 4},
}


@pytest.mark.parametrize("build", ["validate", "construct"])
def test_chat_completion_attributes_validated_or_not(build: str) -> None:
    body = json.loads(json.dumps(CHAT))
    result = ChatCompletion.model_validate(body) if build == "validate" else ChatCompletion.construct(**body)
    assert attributes.response_attributes(result) == CHAT_ATTRIBUTES


def test_embeddings_response_is_read_without_a_pydantic_miss(monkeypatch: pytest.MonkeyPatch) -> None:
    result = CreateEmbeddingResponse.model_validate(EMBEDDINGS)
    misses: list[str] = []
    original = pydantic.BaseModel.__getattr__

    def counting(self: pydantic.BaseModel, name: str) -> Any:
        misses.append(name)
        return original(self, name)

    monkeypatch.setattr(pydantic.BaseModel, "__getattr__", counting)
    read = attributes.response_attributes(result)
    assert misses == []
    assert read == {
        "gen_ai.response.model": "text-embedding-3-small",
        "gen_ai.embeddings.dimension.count": 3,
        "gen_ai.usage.input_tokens": 4,
    }


def test_a_providers_extra_fields_are_read() -> None:
    # An OpenAI-compatible server may add what the SDK's model does not declare: pydantic keeps it
    # in the model's extras, and getattr found it there; the field mapping must too.
    body = {**EMBEDDINGS, "id": "emb-7", "system_fingerprint": "fp_x"}
    body["usage"] = {**EMBEDDINGS["usage"], "completion_tokens": 0}
    read = attributes.response_attributes(CreateEmbeddingResponse.model_validate(body))
    assert read["gen_ai.response.id"] == "emb-7"
    assert read["openai.response.system_fingerprint"] == "fp_x"
    assert read["gen_ai.usage.output_tokens"] == 0


def test_objects_that_are_not_pydantic_models_are_read_with_getattr() -> None:
    class Usage:
        prompt_tokens = 9  # a class attribute: not in the instance's __dict__

    class Result:
        object = "chat.completion"

        def __init__(self) -> None:
            self.model = "m"
            self.usage = Usage()

        @property
        def id(self) -> str:
            return "r-1"

    assert attributes.response_attributes(Result()) == {
        "gen_ai.response.id": "r-1",
        "gen_ai.response.model": "m",
        "gen_ai.usage.input_tokens": 9,
    }
    assert attributes.response_attributes(None) == {}


@pytest.mark.parametrize("build", ["validate", "construct"])
def test_deepseek_cache_hits_are_cached_input_tokens(build: str) -> None:
    """DeepSeek reports its prompt cache as ``prompt_cache_hit_tokens`` / ``_miss_tokens`` (extras)."""
    usage = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
    deepseek = {**CHAT, "usage": {**usage, "prompt_cache_hit_tokens": 6, "prompt_cache_miss_tokens": 3}}
    if build == "validate":
        response = ChatCompletion.model_validate(deepseek)
    else:
        response = ChatCompletion.construct(**deepseek)
    found = attributes.response_attributes(response)
    assert found["gen_ai.usage.cache_read.input_tokens"] == 6
    # OpenAI's field wins when both are there; neither: no attribute (a hit cannot be told from a miss)
    both = {**deepseek, "usage": {**deepseek["usage"], "prompt_tokens_details": {"cached_tokens": 4}}}
    assert (
        attributes.response_attributes(ChatCompletion.model_validate(both))[
            "gen_ai.usage.cache_read.input_tokens"
        ]
        == 4
    )
    plain = attributes.response_attributes(ChatCompletion.model_validate({**CHAT, "usage": usage}))
    assert "gen_ai.usage.cache_read.input_tokens" not in plain
