"""The OpenAI Agents SDK (``openai-agents``) with its WebSocket transport against the fake server: each
model turn of an agent run is one span with its phases, in the caller's trace.

openai-agents opens its own ``websockets`` connection (it does not use ``responses.connect()``), so
this is the proof that :mod:`openai_latency.websocket.agents` sees it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider

from openai_latency.fake_server import FakeServer
from tests.support.retry import retry_timing
from tests.support.span_checks import Captured, assert_same_instant, assert_tiles, attrs, end_mono
from tests.websocket.support import record_of

agents = pytest.importorskip("agents", reason="no openai-agents (the agent extra)")
if not hasattr(agents, "OpenAIResponsesWSModel"):
    pytest.skip("this openai-agents has no WebSocket model", allow_module_level=True)


@pytest.fixture(scope="module")
def paced_server() -> Iterator[Any]:
    """A server of its own process whose events are spaced (the loop is idle when each arrives)."""
    with FakeServer.spawn({"delay-ms": 60, "ttft-ms": 40, "chunks": 5, "chunk-delay-ms": 10}) as server:
        yield server


@pytest.fixture
def websocket_transport() -> Iterator[None]:
    agents.set_tracing_disabled(True)
    agents.set_default_openai_responses_transport("websocket")
    yield
    agents.set_default_openai_responses_transport("http")


def test_each_model_turn_is_one_span_with_its_phases_in_the_callers_trace(
    instrument: Callable[..., Captured],
    paced_server: Any,
    tracer_provider: TracerProvider,
    websocket_transport: None,
) -> None:
    captured = instrument()
    tracer = tracer_provider.get_tracer("app")

    async def run() -> list[str]:
        client = openai.AsyncOpenAI(base_url=paced_server.base_url, api_key="sk-test")
        agent = agents.Agent(
            name="helper",
            instructions="be brief",
            model=agents.OpenAIResponsesWSModel("gpt-4o-mini", client),
        )
        # warm-up: the SDK's lazy model builds block the event loop for 100-300 ms on a process's first
        # turn, and the asyncio client's reader (its protocol) runs on that loop: frames arriving then
        # are stamped when the loop is free again (docs/ARCHITECTURE.md, "WebSocket transports")
        await agents.Runner.run(agent, "warm up")
        captured.clear()
        outputs = []
        with tracer.start_as_current_span("agent request"):
            for prompt in ("hello", "and again"):
                result = await agents.Runner.run(agent, prompt)
                outputs.append(str(result.final_output))
        return outputs

    def agent_turns() -> list[Any]:
        outputs = asyncio.run(run())
        assert outputs and all(text.startswith("tok0") for text in outputs)
        [parent] = [s for s in captured.spans() if s.name == "agent request"]
        turns = [s for s in captured.operations() if s.name == "chat gpt-4o-mini"]
        assert len(turns) == 2
        handshakes = [s for s in captured.spans() if s.name == "openai.websocket.connect"]
        assert handshakes == []  # opened by the warm-up: the agent keeps its connection from turn to turn
        for turn in turns:
            assert turn.context.trace_id == parent.context.trace_id
            assert turn.parent is not None and turn.parent.span_id == parent.context.span_id
            assert len(turn.links) == 1  # to the handshake of the warm-up's connection
            phases = captured.phases(turn)
            assert [p.name for p in phases] == [
                "openai.request_build",
                "openai.network_wait",
                "openai.first_token",
                "openai.stream_drain",
            ]
            assert_tiles(turn, phases)
            a = attrs(turn)
            assert a["openai_latency.transport"] == "websocket"
            assert a["openai_latency.stream.end_state"] == "completed"
            assert a["gen_ai.usage.output_tokens"] == 5
        return turns

    def timing(turns: list[Any]) -> None:
        """Each turn's ``response.created`` and end against the server's log (±3 ms): a loaded 2-core
        machine delays the event loop, where the asyncio client's frames are stamped, now and then."""
        for turn in turns:
            record = record_of(paced_server, turn)
            network_wait = captured.phases(turn)[1]
            assert_same_instant(
                end_mono(network_wait), record.event_ns("event:response.created")[0], "created"
            )
            assert_same_instant(end_mono(turn), record.event_ns("event:response.completed")[0], "completed")

    retry_timing(agent_turns, timing)


def test_uninstrument_unwraps_the_agents_model(instrument: Callable[..., Captured]) -> None:
    import wrapt

    from openai_latency import OpenAILatencyInstrumentor

    instrument()
    model = agents.OpenAIResponsesWSModel
    names = ("_open_websocket_connection", "_iter_websocket_response_events")
    assert all(isinstance(vars(model)[name], wrapt.FunctionWrapper) for name in names)
    OpenAILatencyInstrumentor().uninstrument()
    assert not any(isinstance(vars(model)[name], wrapt.FunctionWrapper) for name in names)
