"""``tokenizer pieces``: the fake's BPE-shaped prompt count, by hand on small texts and through the
server's usage (chat, completions, Responses) with the real SDK."""

from __future__ import annotations

import openai

from openai_latency.fake_server import FakeServer
from openai_latency.fake_server.tokens import pieces_tokens, text_pieces


def test_pieces_by_hand() -> None:
    # "bench" 2 (letters by 4, begun), "-" 1, four groups of three digits, "\n" 1, "the" and " the" 1 each
    assert text_pieces("bench-000123456789\nthe the") == 2 + 1 + 4 + 1 + 2
    assert text_pieces("latency data") == 2 + 1
    assert text_pieces("1234567") == 3  # 123 456 7
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert pieces_tokens(messages) == (3 + 1 + 2) + (3 + 1) + 3  # per message 3, the prompt 3
    assert pieces_tokens("hi there") == 1 + 2 + 1  # " there" 2; no messages: the begin-of-sequence token
    parts = [{"role": "user", "content": [{"type": "text", "text": "one two"}]}]
    assert pieces_tokens(parts) == 3 + 2 + 3


def test_the_server_reports_the_pieces_count() -> None:
    text = "bench-000000000001\nthe latency of the first token"
    with FakeServer(defaults={"tokenizer": "pieces", "chunks": 1}) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-x", max_retries=0)
        chat = client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
        completion = client.completions.create(model="m", prompt=text)
        response = client.responses.create(model="m", input=[{"role": "user", "content": text}])
        words = openai.OpenAI(
            base_url=server.base_url, api_key="sk-x", default_headers={"x-fake-tokenizer": "words"}
        )
        plain = words.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
    body = text_pieces(text)
    assert body == 2 + 1 + 4 + 1 + 1 + 2 + 1 + 1 + 2 + 2
    assert chat.usage is not None and chat.usage.prompt_tokens == body + 3 + 3
    assert completion.usage is not None and completion.usage.prompt_tokens == body + 1
    assert response.usage is not None and response.usage.input_tokens == body + 3 + 3
    assert plain.usage is not None and plain.usage.prompt_tokens == len(text.split())
