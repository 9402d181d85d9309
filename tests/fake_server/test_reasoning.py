"""The fake server's reasoning mode and batched writes, driven by the openai SDK over loopback sockets:
what the SDK parses, and what the server's own log says it did (kinds, schedule, batches)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import openai
import pytest

from openai_latency.fake_server import FakeServer, RequestRecord, ScriptError, SpawnedServer
from tests.support.fake_server_checks import (
    MESSAGES,
    MS,
    SRC,
    Lateness,
    fake,
    gaps_ms,
    run_concurrently,
)
from tests.support.retry import retry_timing

MODES = ("reasoning_content", "reasoning", "hidden", "summary")
THOUGHT = "think0 think1 think2"
#: How far the mean of paced gaps may exceed the pace (lower bounds are exact: the server sleeps at
#: least the pause; one gap may exceed it by ``SLACK_MS``, scheduling noise on a loaded machine).
PACE_SLACK_MS = 2


def reasoning(mode: str = "reasoning_content", tokens: int = 3, **script: object) -> dict[str, str]:
    """``extra_headers`` of a reasoning script (``chunks`` 2 unless given)."""
    return fake(reasoning_tokens=tokens, reasoning_mode=mode, **{"chunks": 2, **script})


def kinds(record: RequestRecord) -> list[str]:
    return [kind for kind, _ in record.events]


def chat_stream(client: openai.OpenAI, headers: dict[str, str], **kwargs: Any) -> tuple[list[Any], str]:
    """The chunks of a chat stream, and its request id."""
    with client.chat.completions.with_streaming_response.create(
        model="o4-mini", messages=MESSAGES, stream=True, extra_headers=headers, **kwargs
    ) as response:
        return list(response.parse()), response.headers["x-request-id"]


def delta_field(chunks: list[Any], name: str) -> list[str]:
    """The non-empty values of one delta field (an extra of the SDK's delta, like reasoning_content)."""
    values = [getattr(c.choices[0].delta, name, None) for c in chunks if c.choices]
    return [v for v in values if v]


# -- chat --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_chat_stream_in_each_mode(server: FakeServer, mode: str) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    chunks, request_id = chat_stream(
        client, reasoning(mode), stream_options={"include_usage": True}, reasoning_effort="high"
    )
    record = server.record(request_id)
    streamed = mode in ("reasoning_content", "reasoning")
    assert "".join(delta_field(chunks, mode if streamed else "reasoning_content")) == (
        THOUGHT if streamed else ""
    )
    other = "reasoning" if mode == "reasoning_content" else "reasoning_content"
    assert delta_field(chunks, other) == []
    assert "".join(delta_field(chunks, "content")) == "tok0 tok1"
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens == 5  # 3 reasoning + 2 answer, in every mode
    assert usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 3
    assert record.body["reasoning_effort"] == "high" and record.outcome == "ok"
    middle = ["reasoning"] * 3 if streamed else ["reasoning_hidden_start", "reasoning_hidden_end"]
    assert kinds(record) == ["role", *middle, "content", "content", "finish", "usage", "done"]
    assert len(record.content_event_ns) == 2 and len(record.reasoning_event_ns) == (3 if streamed else 0)
    assert record.first_content_ns == record.event_ns("content")[0]
    assert record.first_token_ns == (record.event_ns("reasoning") or record.event_ns("content"))[0]
    assert record.last_token_ns == record.last_content_ns == record.event_ns("content")[-1]
    if streamed:
        assert record.first_reasoning_ns == record.event_ns("reasoning")[0]
        assert record.last_reasoning_ns == record.event_ns("reasoning")[-1]
        assert record.hidden_reasoning_ns is None
    else:
        assert record.first_reasoning_ns is None and record.hidden_reasoning_ns is not None
    assert record.scripted_token_ns == record.token_event_ns and record.scripted_ns == []


@pytest.mark.parametrize("mode", MODES)
def test_chat_json_in_each_mode(server: FakeServer, mode: str) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    completion = client.chat.completions.create(
        model="o4-mini", messages=MESSAGES, extra_headers=reasoning(mode), reasoning_effort="low", n=2
    )
    for choice in completion.choices:
        message = choice.message
        assert message.content == "tok0 tok1"
        extras = message.model_extra or {}
        assert extras == ({mode: THOUGHT} if mode in ("reasoning_content", "reasoning") else {})
    assert completion.usage is not None and completion.usage.completion_tokens == 10  # n=2
    assert completion.usage.completion_tokens_details is not None
    assert completion.usage.completion_tokens_details.reasoning_tokens == 6
    assert kinds(server.last_record()) == ["body"]


def test_chat_helpers_and_tool_calls_with_reasoning(server: FakeServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    with client.chat.completions.stream(
        model="o4-mini", messages=MESSAGES, extra_headers=reasoning("reasoning")
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "tok0 tok1"
    chunks, request_id = chat_stream(client, reasoning(tool_call=1))
    assert "".join(delta_field(chunks, "reasoning_content")) == THOUGHT
    assert kinds(server.record(request_id))[:6] == ["role", *["reasoning"] * 3, "content", "content"]


def test_capped_while_reasoning_and_faults_count_answer_chunks(server: FakeServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    chunks, request_id = chat_stream(client, reasoning(chunks=0, finish_reason="length", usage="always"))
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert kinds(server.record(request_id)) == ["role", *["reasoning"] * 3, "finish", "usage", "done"]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3

    with pytest.raises(Exception, match=r"Connection error|peer closed connection"):
        chat_stream(client, reasoning(disconnect_after=0))
    record = server.last_record()
    assert kinds(record) == ["role", *["reasoning"] * 3, "disconnect"]
    assert record.outcome == "disconnected"


def test_client_closing_while_reasoning(server: FakeServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    stream = client.chat.completions.create(
        model="o4-mini",
        messages=MESSAGES,
        stream=True,
        extra_headers=reasoning(tokens=20, reasoning_delay_ms=100),
    )
    for _ in range(4):  # the role chunk and 3 reasoning chunks
        next(stream)
    stream.close()
    record = server.last_record(wait=2.0)
    assert record.outcome == "client_closed" and record.first_content_ns is None
    assert 3 <= len(record.reasoning_event_ns) <= 4


# -- Responses ---------------------------------------------------------------------------------------

RESPONSES_REASONING = {
    "text": [
        "response.output_item.added",
        "response.content_part.added",
        *["response.reasoning_text.delta"] * 3,
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ],
    "hidden": ["response.output_item.added", "response.output_item.done"],
    "summary": [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        *["response.reasoning_summary_text.delta"] * 3,
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
    ],
}
RESPONSES_ANSWER = [
    "response.output_item.added",
    "response.content_part.added",
    *["response.output_text.delta"] * 2,
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


@pytest.mark.parametrize("mode", MODES)
def test_responses_stream_in_each_mode(server: FakeServer, mode: str) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    events = list(
        client.responses.create(
            model="o4-mini",
            input="hi",
            stream=True,
            reasoning={"effort": "medium", "summary": "auto"},
            extra_headers=reasoning(mode),
        )
    )
    shape = "text" if mode in ("reasoning_content", "reasoning") else mode
    types = [e.type for e in events]
    assert types == [
        "response.created",
        "response.in_progress",
        *RESPONSES_REASONING[shape],
        *RESPONSES_ANSWER,
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    reasoning_events = [e for e in events if "reasoning" in e.type and e.type.endswith(".delta")]
    assert "".join(e.delta for e in reasoning_events) == ("" if mode == "hidden" else THOUGHT)  # type: ignore[union-attr]
    for event in reasoning_events:
        assert (event.item_id, event.output_index) == (events[2].item.id, 0)  # type: ignore[union-attr]
        index = "content_index" if shape == "text" else "summary_index"
        assert getattr(event, index) == 0
    answer = [e for e in events if e.type == "response.output_text.delta"]
    assert [e.output_index for e in answer] == [1, 1]  # type: ignore[union-attr]
    final = events[-1].response  # type: ignore[union-attr]
    assert [item.type for item in final.output] == [
        "reasoning",
        "message",
    ] and final.output_text == "tok0 tok1"
    assert final.usage is not None and final.usage.output_tokens == 5
    assert final.usage.output_tokens_details.reasoning_tokens == 3

    record = server.last_record()
    logged = [k.removeprefix("event:") for k in kinds(record) if k.startswith("event:")]
    assert logged == types
    hidden = mode in ("hidden", "summary")
    assert ("reasoning_hidden_start" in kinds(record)) is hidden
    assert len(record.reasoning_event_ns) == (0 if mode == "hidden" else 3)
    assert len(record.content_event_ns) == 2  # reasoning deltas are not the answer channel
    assert record.first_content_ns == record.event_ns("event:response.output_text.delta")[0]
    if mode != "hidden":
        assert record.first_token_ns == record.first_reasoning_ns and record.first_token_ns is not None
        assert record.first_token_ns < record.first_content_ns
    assert record.body["reasoning"] == {"effort": "medium", "summary": "auto"}


@pytest.mark.parametrize("mode", MODES)
def test_responses_json_and_stream_helper(server: FakeServer, mode: str) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    response = client.responses.create(
        model="o4-mini", input="hi", reasoning={"effort": "high"}, extra_headers=reasoning(mode)
    )
    item, message = response.output
    assert item.type == "reasoning" and message.type == "message"
    assert response.output_text == "tok0 tok1"
    assert [c.text for c in item.content or []] == ([THOUGHT] if mode in MODES[:2] else [])
    assert [s.text for s in item.summary] == ([THOUGHT] if mode == "summary" else [])
    assert response.usage is not None and response.usage.output_tokens_details.reasoning_tokens == 3
    with client.responses.stream(model="o4-mini", input="hi", extra_headers=reasoning(mode)) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert [o.type for o in final.output] == ["reasoning", "message"] and final.output_text == "tok0 tok1"


def test_completions_hide_the_reasoning(server: FakeServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    pieces = list(
        client.completions.create(
            model="d",
            prompt="hi",
            stream=True,
            stream_options={"include_usage": True},
            extra_headers=reasoning("reasoning"),
        )
    )
    assert "".join(p.choices[0].text for p in pieces if p.choices) == "tok0 tok1"
    assert pieces[-1].usage is not None and pieces[-1].usage.completion_tokens == 5
    record = server.last_record()
    assert kinds(record)[:2] == ["reasoning_hidden_start", "reasoning_hidden_end"]
    assert record.reasoning_event_ns == [] and len(record.content_event_ns) == 2
    completion = client.completions.create(model="d", prompt="hi", extra_headers=reasoning())
    assert completion.usage is not None and completion.usage.completion_tokens_details is not None
    assert completion.usage.completion_tokens_details.reasoning_tokens == 3


# -- script keys -------------------------------------------------------------------------------------


def test_bad_reasoning_values_are_rejected(server: FakeServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    for header, value in (
        ("reasoning-mode", "loud"),
        ("reasoning-tokens", "-1"),
        ("reasoning-delay-ms", "soon"),
        ("write-batch", "0"),
    ):
        with pytest.raises(openai.BadRequestError, match=f"x-fake-{header}"):
            client.chat.completions.create(
                model="m", messages=MESSAGES, extra_headers={f"x-fake-{header}": value}
            )
    with pytest.raises(ScriptError):
        FakeServer(defaults={"write-batch": "0"})


def test_server_defaults_and_every_apply_to_the_new_keys() -> None:
    defaults = {"reasoning-tokens": 2, "reasoning-mode": "reasoning", "every": "2:reasoning-tokens=4"}
    with FakeServer(defaults=defaults) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="sk-test", max_retries=0)
        counts = []
        for _ in range(2):
            completion = client.chat.completions.create(model="m", messages=MESSAGES)
            assert completion.usage is not None and completion.usage.completion_tokens_details is not None
            counts.append(completion.usage.completion_tokens_details.reasoning_tokens)
        assert counts == [2, 4]


def test_fake_server_help_lists_the_new_keys() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "openai_latency.fake_server", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])},
    )
    assert result.returncode == 0
    for key in ("reasoning-tokens", "reasoning-delay-ms", "reasoning-mode", "write-batch"):
        assert f"--{key}" in result.stdout
        assert f"\n  {key} " in result.stdout  # the table row that says what it does
    assert "``" not in result.stdout


# -- the schedule, from the server's log -------------------------------------------------------------


def _sdk(server: SpawnedServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def _in_ms(ns: int) -> float:
    return ns / MS


def _streamed_reasoning_schedule(server: SpawnedServer) -> Callable[[], Lateness]:
    """The brief's example: 20 reasoning tokens at 10 ms, then 5 answer chunks at 30 ms."""

    def scenario() -> Lateness:
        headers = reasoning(tokens=20, reasoning_delay_ms=10, ttft_ms=50, chunks=5, chunk_delay_ms=30)
        _, request_id = chat_stream(_sdk(server), headers)
        record = server.record(request_id)
        role_ns = record.event_ns("role")[0]
        assert record.first_reasoning_ns is not None and record.first_content_ns is not None
        assert record.first_token_ns == record.first_reasoning_ns
        assert record.last_token_ns is not None and len(record.token_event_ns) == 25
        late = Lateness()
        late.at_least(_in_ms(record.first_reasoning_ns - role_ns), 50, "first reasoning token")
        late.paced(gaps_ms(record.reasoning_event_ns), 10, "reasoning gaps", PACE_SLACK_MS)
        answer_after = _in_ms(record.first_content_ns - record.event_ns("reasoning")[-1])
        late.at_least(answer_after, 10, "answer after the reasoning")
        late.paced(gaps_ms(record.content_event_ns), 30, "answer gaps", PACE_SLACK_MS)
        span = _in_ms(record.last_token_ns - record.first_token_ns)
        # 19 x 10 + 10 + 4 x 30 over 24 token gaps
        late.at_least(span, 320, "first to last token", slack=24 * PACE_SLACK_MS)
        return late

    return scenario


def _hidden_reasoning_silence(server: SpawnedServer) -> Callable[[], Lateness]:
    def scenario() -> Lateness:
        headers = reasoning("hidden", tokens=20, reasoning_delay_ms=10, ttft_ms=50, chunks=3)
        _, request_id = chat_stream(_sdk(server), headers)
        record = server.record(request_id)
        assert kinds(record)[:4] == ["role", "reasoning_hidden_start", "reasoning_hidden_end", "content"]
        role_ns, (start, end) = record.event_ns("role")[0], record.hidden_reasoning_ns or (0, 0)
        assert record.first_content_ns is not None
        late = Lateness()
        late.at_least(_in_ms(start - role_ns), 50, "silence starts")
        late.at_least(_in_ms(end - start), 200, "N x D of silence")
        late.at_least(_in_ms(record.first_content_ns - end), 0, "answer after the silence")
        late.at_least(_in_ms(record.first_content_ns - role_ns), 250, "first answer token")
        return late

    return scenario


def _responses_summary_schedule(server: SpawnedServer) -> Callable[[], Lateness]:
    def scenario() -> Lateness:
        headers = reasoning("summary", tokens=5, reasoning_delay_ms=20, ttft_ms=40, chunks=2)
        with _sdk(server).responses.with_streaming_response.create(
            model="o4-mini", input="hi", stream=True, extra_headers=headers
        ) as response:
            list(response.parse())
            record = server.record(response.headers["x-request-id"])
        opened = record.event_ns("event:response.output_item.added")[0]  # the reasoning item, at once
        start, end = record.hidden_reasoning_ns or (0, 0)
        summary = record.reasoning_event_ns
        assert record.first_content_ns is not None and len(summary) == 5
        late = Lateness()
        late.at_least(_in_ms(start - opened), 40, "silence starts")
        late.at_least(_in_ms(end - start), 100, "silence")
        late.at_least(_in_ms(summary[0] - end), 0, "first summary delta")
        late.paced(gaps_ms(summary), 20, "summary gaps", PACE_SLACK_MS)
        late.at_least(_in_ms(record.first_content_ns - summary[-1]), 20, "answer after the summary")
        return late

    return scenario


def _responses_text_schedule(server: SpawnedServer) -> Callable[[], Lateness]:
    def scenario() -> Lateness:
        headers = reasoning("reasoning", tokens=4, reasoning_delay_ms=20, ttft_ms=40, chunks=2)
        with _sdk(server).responses.with_streaming_response.create(
            model="o4-mini", input="hi", stream=True, extra_headers=headers
        ) as response:
            list(response.parse())
            record = server.record(response.headers["x-request-id"])
        part_added = record.event_ns("event:response.content_part.added")[0]  # of the reasoning text
        deltas = record.event_ns("event:response.reasoning_text.delta")
        assert record.reasoning_event_ns == deltas and record.first_content_ns is not None
        closed = record.event_ns("event:response.reasoning_text.done")[0]
        assert deltas[-1] < closed <= record.first_content_ns
        late = Lateness()
        late.at_least(_in_ms(deltas[0] - part_added), 40, "first reasoning delta")
        late.paced(gaps_ms(deltas), 20, "reasoning gaps", PACE_SLACK_MS)
        # the reasoning item closes and the message opens with the first answer delta, D after
        late.at_least(_in_ms(record.first_content_ns - deltas[-1]), 20, "answer after the reasoning")
        return late

    return scenario


def test_reasoning_schedules(timing_server: SpawnedServer) -> None:
    """Every reasoning schedule at once, each on its own client; the log shows what was scripted."""
    scenarios = (
        _streamed_reasoning_schedule,
        _hidden_reasoning_silence,
        _responses_summary_schedule,
        _responses_text_schedule,
    )
    run_concurrently(
        *(lambda make=make: retry_timing(make(timing_server), Lateness.check) for make in scenarios)
    )


# -- batched writes ----------------------------------------------------------------------------------

PACE_MS = 1.5


def _check_batches(record: RequestRecord, tokens: int, batch: int) -> Lateness:
    """``tokens`` tokens written ``batch`` at a time at the scripted pace: one log time per batch, each
    batch written once its last token was due (checked here), soon after and the pace right on
    average (the returned timing half)."""
    times, due = record.token_event_ns, record.scripted_ns
    assert len(times) == len(due) == tokens
    writes = sorted(set(times))
    assert len(writes) == tokens // batch
    assert [times[i : i + batch] for i in range(0, tokens, batch)] == [[w] * batch for w in writes]
    # the deadlines: exactly the scripted pace
    assert {b - a for a, b in itertools.pairwise(due)} == {round(PACE_MS * MS)}
    assert abs((due[-1] - due[0]) / (tokens - 1) / MS - PACE_MS) <= 0.05 * PACE_MS
    # each batch goes out once its last token is due, and soon after
    late = Lateness()
    for j, write in enumerate(writes):
        late.at_least(_in_ms(write - due[(j + 1) * batch - 1]), 0, f"batch {j}")
    # the writes keep the pace: first batch to last, over the tokens between them
    pace = _in_ms(writes[-1] - writes[0]) / (tokens - batch)
    late.late.append(("pace off the script", abs(pace - PACE_MS), 0.05 * PACE_MS))
    return late


def _batched_chat(server: SpawnedServer) -> Callable[[], Lateness]:
    def scenario() -> Lateness:
        headers = fake(chunks=64, chunk_delay_ms=PACE_MS, ttft_ms=PACE_MS, write_batch=4)
        chunks, request_id = chat_stream(_sdk(server), headers)
        assert "".join(delta_field(chunks, "content")) == " ".join(f"tok{i}" for i in range(64))
        record = server.record(request_id)
        assert kinds(record) == ["role", *["content"] * 64, "finish", "done"]
        return _check_batches(record, 64, 4)

    return scenario


def _batched_responses_reasoning(server: SpawnedServer) -> Callable[[], Lateness]:
    """30 reasoning + 34 answer tokens, 4 a batch: one batch holds both channels (and the events that
    close the reasoning item and open the message between them)."""

    def scenario() -> Lateness:
        headers = reasoning(
            "reasoning_content",
            tokens=30,
            reasoning_delay_ms=PACE_MS,
            ttft_ms=PACE_MS,
            chunks=34,
            chunk_delay_ms=PACE_MS,
            write_batch=4,
        )
        with _sdk(server).responses.with_streaming_response.create(
            model="o4-mini", input="hi", stream=True, extra_headers=headers
        ) as response:
            events = list(response.parse())
            record = server.record(response.headers["x-request-id"])
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert events[-1].response.output_text == " ".join(f"tok{i}" for i in range(34))  # type: ignore[union-attr]
        late = _check_batches(record, 64, 4)
        straddling = record.reasoning_event_ns[-1]
        assert record.content_event_ns[1] == straddling  # r28 r29 a0 a1 in one write
        assert record.event_ns("event:response.output_item.done")[0] == straddling
        return late

    return scenario


def test_write_batch_coalesces_at_a_fast_pace(timing_server: SpawnedServer) -> None:
    run_concurrently(
        lambda: retry_timing(_batched_chat(timing_server), Lateness.check),
        lambda: retry_timing(_batched_responses_reasoning(timing_server), Lateness.check),
    )
