"""The fake's prefix cache (``prompt-cache``) and the names it reports hits in (``cache-fields``)."""

from __future__ import annotations

from typing import Any

import openai

from openai_latency.fake_server import FakeServer
from openai_latency.fake_server.prefix_cache import PrefixCache


def _words(count: int, start: int = 0) -> str:
    return " ".join(f"w{i}" for i in range(start, start + count))


def test_the_longest_remembered_prefix_is_cached() -> None:
    cache = PrefixCache(block=4)
    first = [{"role": "user", "content": _words(10)}]
    assert cache.lookup("m", first) == 0
    assert cache.lookup("m", first) == 10  # the whole prompt again
    assert cache.lookup("other-model", first) == 0  # per model
    # a conversation's next turn: the previous prompt, the answer, the next message
    turn = [*first, {"role": "assistant", "content": "a b"}, {"role": "user", "content": "c d e"}]
    assert cache.lookup("m", turn) == 10
    assert cache.lookup("m", turn) == 15
    # a prompt that shares 9 words: the block boundaries remembered (4, 8) give 8
    assert cache.lookup("m", [{"role": "user", "content": _words(9) + " x y"}]) == 8
    # a different first word: nothing in common
    assert cache.lookup("m", [{"role": "user", "content": "header " + _words(10)}]) == 0


def _usage(server: FakeServer, api: str, content: str) -> dict[str, Any]:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-x")
    if api == "responses":
        response = client.responses.create(model="m", input=content)
        assert response.usage is not None
        return response.usage.model_dump(exclude_none=True)
    result = client.chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
    assert result.usage is not None
    return result.usage.model_dump(exclude_none=True)


def test_cache_fields_openai_deepseek_and_none() -> None:
    with FakeServer(defaults={"prompt-cache": 1}) as server:
        assert _usage(server, "chat", "p q r")["prompt_tokens_details"]["cached_tokens"] == 0
        assert _usage(server, "chat", "p q r s")["prompt_tokens_details"]["cached_tokens"] == 3
        assert _usage(server, "responses", "p q r s t")["input_tokens_details"]["cached_tokens"] == 4
        server.set_defaults({"prompt-cache": 1, "cache-fields": "deepseek"})
        usage = _usage(server, "chat", "p q r s t u")
        assert (usage["prompt_cache_hit_tokens"], usage["prompt_cache_miss_tokens"]) == (5, 1)
        assert "cached_tokens" not in str(usage)
        server.set_defaults({"prompt-cache": 1, "cache-fields": "none"})
        usage = _usage(server, "chat", "p q r s t u v")
        assert "cache" not in str(usage) and usage["prompt_tokens"] == 7
        assert "cache" not in str(_usage(server, "responses", "p q"))
