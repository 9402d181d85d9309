"""Message content capture: off by default, and only where the setting puts it.

The fake model answers ``tok0 tok1 ...``; prompts carry a unique marker. "Nowhere" is checked by
scanning the JSON of every exported span, log record and metric.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from openai_latency.content.bounded_json import TRUNCATION_MARKER
from openai_latency.content.capture import EVENT_NAME
from tests.support.otel_capture import Full
from tests.support.span_checks import assert_same_shape, attrs

MARKER = "zq7-marker-x41"
COMPLETION = "tok0 tok1 tok2 tok3"
SCRIPT = {"x-fake-chunks": "4"}
MESSAGES = [
    {"role": "system", "content": f"You are terse. {MARKER}-system"},
    {"role": "user", "content": f"Say it {MARKER}-user"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": f"Looks things up {MARKER}-tool",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]
CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
)
EXPECTED_INPUT = [
    {"role": "system", "parts": [{"type": "text", "content": f"You are terse. {MARKER}-system"}]},
    {"role": "user", "parts": [{"type": "text", "content": f"Say it {MARKER}-user"}]},
]
EXPECTED_OUTPUT = [
    {"role": "assistant", "parts": [{"type": "text", "content": COMPLETION}], "finish_reason": "stop"}
]
EXPECTED_TOOLS = [
    {
        "type": "function",
        "name": "lookup",
        "description": f"Looks things up {MARKER}-tool",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
]


def _client(server: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def _chat_calls(server: Any) -> None:
    """One non-stream and one stream chat call with the marker in prompt, system message and tools."""
    client = _client(server)
    client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, tools=TOOLS, extra_headers=SCRIPT)
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, tools=TOOLS, stream=True, extra_headers=SCRIPT
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == COMPLETION


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_default_captures_no_content_anywhere(full: Callable[..., Full], server: Any) -> None:
    cap = full()
    _chat_calls(server)
    assert len(cap.captured.operations()) == 2
    exported = cap.everything_exported()
    assert "gen_ai.client.operation.duration" in exported  # the scan does see the metrics
    assert MARKER not in exported
    assert COMPLETION not in exported and "tok1" not in exported
    for key in CONTENT_KEYS:
        assert key not in exported
    assert cap.log_records() == []


def test_span_only_puts_schema_json_on_the_span(full: Callable[..., Full], server: Any) -> None:
    cap = full(capture_content="span_only")
    _chat_calls(server)
    plain, streamed = cap.captured.operations()
    for op in (plain, streamed):
        a = attrs(op)
        assert json.loads(a["gen_ai.input.messages"]) == EXPECTED_INPUT
        assert json.loads(a["gen_ai.output.messages"]) == EXPECTED_OUTPUT  # the stream's is accumulated
        assert json.loads(a["gen_ai.tool.definitions"]) == EXPECTED_TOOLS
        assert "gen_ai.system_instructions" not in a  # chat keeps its system message in the history
    assert cap.log_records() == []
    # content stays on the operation span: not on phase spans, not in metrics
    for span in cap.captured.spans():
        if span not in (plain, streamed):
            assert MARKER not in span.to_json()
    data = cap.captured.metric_reader.get_metrics_data()
    assert data is not None and MARKER not in data.to_json()


def _assert_cut_from(value: Any, whole: Any) -> None:
    """``value`` is ``whole`` with some strings cut to a prefix followed by the truncation marker."""
    assert_same_shape(value, whole, _cut_or_equal)


def _cut_or_equal(value: Any, whole: Any) -> None:
    if isinstance(whole, str) and value != whole:
        assert value.endswith(TRUNCATION_MARKER), (value, whole)
        assert whole.startswith(value[: -len(TRUNCATION_MARKER)]), (value, whole)
    else:
        assert value == whole


@pytest.mark.parametrize(
    ("key", "whole"),
    [
        ("gen_ai.input.messages", EXPECTED_INPUT),
        ("gen_ai.output.messages", EXPECTED_OUTPUT),
        ("gen_ai.tool.definitions", EXPECTED_TOOLS),
    ],
)
def test_span_only_cuts_a_value_to_the_limit_as_valid_json(
    full: Callable[..., Full], server: Any, key: str, whole: Any
) -> None:
    limit = len(_compact(whole)) - 5  # just too long: its strings get cut
    cap = full(capture_content="span_only", content_max_length=limit)
    _chat_calls(server)
    for op in cap.captured.operations():
        value = attrs(op)[key]
        assert len(value) <= limit and TRUNCATION_MARKER in value
        _assert_cut_from(json.loads(value), whole)


def test_a_structure_too_big_for_the_limit_is_cut_as_text(full: Callable[..., Full], server: Any) -> None:
    limit = 30  # less than the messages' structure with every string emptied
    cap = full(capture_content="span_only", content_max_length=limit)
    _chat_calls(server)
    for op in cap.captured.operations():
        whole = _compact(EXPECTED_INPUT)
        assert attrs(op)["gen_ai.input.messages"] == whole[:limit] + TRUNCATION_MARKER


def test_stream_output_is_accumulated_within_the_limit(full: Callable[..., Full], server: Any) -> None:
    """A long stream with a small limit: the value is the truncated whole, collected text stays bounded."""
    limit = 120
    cap = full(capture_content="span_only", content_max_length=limit)
    stream = _client(server).chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True, extra_headers={"x-fake-chunks": "300"}
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    whole = [{"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}]
    value = attrs(cap.captured.operation())["gen_ai.output.messages"]
    assert len(value) <= limit
    output = json.loads(value)
    _assert_cut_from(output, whole)
    assert output[0]["parts"][0]["content"].endswith(TRUNCATION_MARKER)


def test_event_only_emits_one_log_record_in_the_trace(full: Callable[..., Full], server: Any) -> None:
    cap = full(capture_content="event_only")
    _chat_calls(server)
    ops = cap.captured.operations()
    records = cap.log_records()
    assert len(records) == 2
    for op, record in zip(ops, records, strict=True):
        assert MARKER not in op.to_json()  # nothing on the span
        log = record.log_record
        assert log.event_name == EVENT_NAME
        assert log.trace_id == op.context.trace_id and log.span_id == op.context.span_id
        a = dict(log.attributes or {})
        assert json.loads(a["gen_ai.input.messages"]) == EXPECTED_INPUT
        assert json.loads(a["gen_ai.output.messages"]) == EXPECTED_OUTPUT
        assert json.loads(a["gen_ai.tool.definitions"]) == EXPECTED_TOOLS
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "gpt-4o-mini"
        assert a["gen_ai.response.id"] == attrs(op)["gen_ai.response.id"]
    data = cap.captured.metric_reader.get_metrics_data()
    assert data is not None and MARKER not in data.to_json()


def test_span_and_event_and_the_responses_api(full: Callable[..., Full], server: Any) -> None:
    cap = full(capture_content="span_and_event")
    client = _client(server)
    client.responses.create(
        model="gpt-4o-mini",
        instructions=f"Be brief {MARKER}",
        input=f"Hello {MARKER}",
        tools=[{"type": "function", "name": "lookup", "parameters": {"type": "object"}, "strict": True}],
        extra_headers=SCRIPT,
    )
    with client.responses.stream(
        model="gpt-4o-mini", input=f"Again {MARKER}", extra_headers=SCRIPT
    ) as stream:
        for _ in stream:
            pass
    ops = cap.captured.operations()
    assert len(ops) == 2 and len(cap.log_records()) == 2
    first, second = (attrs(op) for op in ops)
    assert json.loads(first["gen_ai.system_instructions"]) == [
        {"type": "text", "content": f"Be brief {MARKER}"}
    ]
    assert json.loads(first["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": f"Hello {MARKER}"}]}
    ]
    assert json.loads(first["gen_ai.tool.definitions"]) == [
        {"type": "function", "name": "lookup", "parameters": {"type": "object"}}
    ]
    for a in (first, second):
        output = json.loads(a["gen_ai.output.messages"])
        assert output[0]["role"] == "assistant" and output[0]["finish_reason"] == "stop"
        assert output[0]["parts"] == [{"type": "text", "content": COMPLETION}]
    for op, record in zip(ops, cap.log_records(), strict=True):
        log_attrs = dict(record.log_record.attributes or {})
        assert log_attrs["gen_ai.output.messages"] == attrs(op)["gen_ai.output.messages"]


def test_collected_stream_text_never_exceeds_the_limit() -> None:
    """The observer keeps at most limit + 1 characters, however long the stream."""
    from openai.types.chat import ChatCompletionChunk

    from openai_latency.content.capture import ContentCapture
    from openai_latency.model import StreamStats

    capture = ContentCapture("span_only", 50, None)
    observe = capture.observer(lambda st, item: True, "chat")
    chunk = ChatCompletionChunk.model_validate(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "0123456789"}, "finish_reason": None}],
        }
    )
    stats = StreamStats()
    for _ in range(1000):
        assert observe(stats, chunk) is True
    collected = "".join(capture._text[0])
    assert len(collected) == 51 and collected.startswith("0123456789")
