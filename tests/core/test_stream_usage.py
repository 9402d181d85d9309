"""``stream_usage=inject``: usage for chat streams without the caller ever seeing the extra chunk.

The fake server's record holds the request body it received, so "sent unchanged" is checked on
the wire, not on our kwargs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest

from tests.support.span_checks import Captured, assert_close_ns, attrs

MESSAGES = [{"role": "user", "content": "one two three"}]
CHUNKS = 6
SCRIPT = {"x-fake-chunks": str(CHUNKS)}


def _client(server: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def _naive_text(stream: Any) -> str:
    """What plenty of application code does: index choices[0] on every chunk."""
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream)


def _expected_text() -> str:
    return " ".join(f"tok{i}" for i in range(CHUNKS))


def _assert_real_usage(captured: Captured) -> dict[str, Any]:
    a = attrs(captured.operation())
    assert a["gen_ai.usage.input_tokens"] == 3
    assert a["gen_ai.usage.output_tokens"] == CHUNKS
    assert "openai_latency.usage.estimated" not in a
    assert a["openai_latency.stream.end_state"] == "completed"
    return a


def test_inject_naive_consumer_works_and_span_has_usage(
    instrument: Callable[..., Captured], server: Any
) -> None:
    captured = instrument(stream_usage="inject")
    stream = _client(server).chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True, extra_headers=SCRIPT
    )
    assert _naive_text(stream) == _expected_text()
    record = server.last_record()
    assert record.body["stream_options"] == {"include_usage": True}
    assert "usage" in [kind for kind, _ in record.events]  # the server did send the usage chunk
    a = _assert_real_usage(captured)
    assert a["openai_latency.stream.chunks"] == CHUNKS + 3  # role, contents, finish, usage (read by us)


def test_inject_works_with_the_stream_helper(instrument: Callable[..., Captured], server: Any) -> None:
    captured = instrument(stream_usage="inject")
    with _client(server).chat.completions.stream(
        model="gpt-4o-mini", messages=MESSAGES, extra_headers=SCRIPT
    ) as stream:
        deltas = [event.delta for event in stream if event.type == "content.delta"]
        completion = stream.get_final_completion()
    assert "".join(deltas) == _expected_text()
    assert completion.choices[0].message.content == _expected_text()
    assert server.last_record().body["stream_options"] == {"include_usage": True}
    _assert_real_usage(captured)


async def test_inject_async_naive_consumer(instrument: Callable[..., Captured], server: Any) -> None:
    captured = instrument(stream_usage="inject")
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=True, extra_headers=SCRIPT
        )
        text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream])
    assert text == _expected_text()
    assert server.last_record().body["stream_options"] == {"include_usage": True}
    _assert_real_usage(captured)


@pytest.mark.parametrize("include_usage", [True, False])
def test_callers_own_stream_options_are_sent_unchanged(
    instrument: Callable[..., Captured], server: Any, include_usage: bool
) -> None:
    captured = instrument(stream_usage="inject")
    own = {"include_usage": include_usage}
    stream = _client(server).chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True, stream_options=own, extra_headers=SCRIPT
    )
    chunks = list(stream)
    assert server.last_record().body["stream_options"] == own
    usage_only = [c for c in chunks if not c.choices]
    a = attrs(captured.operation())
    if include_usage:  # the caller asked for it, so the caller gets it
        assert len(usage_only) == 1 and usage_only[0].usage is not None
        assert a["gen_ai.usage.output_tokens"] == CHUNKS
    else:
        assert usage_only == []
        assert "gen_ai.usage.output_tokens" not in a
        assert a["openai_latency.usage.estimated"] is True


def test_stream_options_in_extra_body_are_left_alone(
    instrument: Callable[..., Captured], server: Any
) -> None:
    instrument(stream_usage="inject")
    stream = _client(server).chat.completions.create(
        model="gpt-4o-mini",
        messages=MESSAGES,
        stream=True,
        extra_body={"stream_options": {"include_usage": False}},
        extra_headers=SCRIPT,
    )
    assert _naive_text(stream) == _expected_text()
    assert server.last_record().body["stream_options"] == {"include_usage": False}


def test_non_stream_and_other_apis_are_never_touched(
    instrument: Callable[..., Captured], server: Any
) -> None:
    instrument(stream_usage="inject")
    client = _client(server)
    client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert "stream_options" not in server.last_record().body
    for _ in client.completions.create(model="gpt-4o-mini", prompt="hi", stream=True):
        pass
    assert "stream_options" not in server.last_record().body


def test_default_is_off_and_estimates_output_tokens(
    instrument: Callable[..., Captured], timing_server: Any
) -> None:
    """No usage and no injection: output tokens unset, time per output token from output chunks."""
    captured = instrument()
    script = {"x-fake-chunks": "8", "x-fake-chunk-delay-ms": "25", "x-fake-ttft-ms": "30"}
    stream = _client(timing_server).chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True, extra_headers=script
    )
    assert _naive_text(stream) == " ".join(f"tok{i}" for i in range(8))
    a = attrs(captured.operation())
    record = timing_server.record(a["openai_latency.request_id"])
    assert "stream_options" not in record.body
    assert "gen_ai.usage.output_tokens" not in a
    assert a["openai_latency.usage.estimated"] is True
    content_ns = record.content_event_ns
    assert len(content_ns) == 8
    per_token_ns = (content_ns[-1] - content_ns[0]) / (len(content_ns) - 1)
    assert_close_ns(int(a["openai_latency.time_per_output_token"] * 1e9), int(per_token_ns), "time per token")
