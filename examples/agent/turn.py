"""One agent turn with the OpenAI Agents SDK, traced end to end: the agent framework's spans (OpenLLMetry's
``opentelemetry-instrumentation-openai-agents``: ``invoke_agent``, ``execute_tool``), openai-latency's
LLM spans and phases, and the inference server's own span, in one trace.

The agent has two tools, ``search`` and ``fetch``, that sleep for scripted times (:data:`TOOL_SECONDS`).
Against the project's fake server, the script ``tool-plan: search,fetch`` makes the model call
``search`` first, ``fetch`` once a tool result is in the conversation, then answer: three LLM calls,
two tools, as a real agent's loop, each call streamed; ``x-fake-delay-ms``, ``ttft-ms`` and
``chunk-delay-ms`` script the server's queue, prefill and decode of each.

Run it (from the repository root, ``pip install -e '.[agent]'``)::

    python -m examples.agent            # the turn, then report --by trace's breakdown of it

Why OpenLLMetry's instrumentation and not OpenInference's (``openinference-instrumentation-openai-
agents``): both put the Agents SDK's spans in the same trace as openai-latency's, by default. OpenLLMetry's
spans carry the GenAI conventions (``gen_ai.operation.name=execute_tool`` on each tool span,
``invoke_agent`` on the agent's), which ``report --by trace`` reads as tools. OpenInference marks them in
its own convention (``openinference.span.kind=TOOL``); the report reads that too, but the GenAI one is the
standard. OpenLLMetry also wraps each model call in an ``openai.response`` span (``gen_ai.operation.name=
chat``) around openai-latency's ``chat <model>``: the report counts that as the same call, not a second.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final

import openai
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from openai_latency import OpenAILatencyInstrumentor

ROOT_NAME: Final = "agent turn"
MODEL: Final = "gpt-4o-mini"
#: How long each tool sleeps (seconds).
TOOL_SECONDS: Final = {"search": 0.050, "fetch": 0.080}
#: The fake server's script of every model call of the turn.
SCRIPT: Final = {
    "x-fake-tool-plan": "search,fetch",
    "x-fake-delay-ms": "20",  # the server's queue
    "x-fake-ttft-ms": "40",  # prefill
    "x-fake-chunks": "4",
    "x-fake-chunk-delay-ms": "10",  # decode: 3 gaps
}


def instrument(provider: TracerProvider) -> None:
    """openai-latency and the Agents SDK's OpenLLMetry instrumentation, on one tracer provider."""
    from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAILatencyInstrumentor().instrument(tracer_provider=provider)
    # its processor instead of the Agents SDK's own exporter (to OpenAI's traces dashboard)
    OpenAIAgentsInstrumentor(replace_existing_processors=True).instrument(tracer_provider=provider)


def uninstrument() -> None:
    from agents import set_trace_processors
    from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().uninstrument()
    set_trace_processors([])  # its uninstrument leaves its processor in place
    OpenAILatencyInstrumentor().uninstrument()


def build_agent(client: openai.AsyncOpenAI, script: dict[str, str] | None = None) -> Any:
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, function_tool

    @function_tool
    async def search(text: str) -> str:
        """Search the documents."""
        await asyncio.sleep(TOOL_SECONDS["search"])
        return f"3 documents about {text}"

    @function_tool
    async def fetch(text: str) -> str:
        """Fetch one document."""
        await asyncio.sleep(TOOL_SECONDS["fetch"])
        return f"the document {text}"

    return Agent(
        name="helper",
        instructions="Answer with the documents you find.",
        tools=[search, fetch],
        model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        model_settings=ModelSettings(extra_headers=script if script is not None else SCRIPT),
    )


async def run_turn(provider: TracerProvider, base_url: str, question: str = "why is the sky blue?") -> str:
    """One turn under the app's own root span: the agent's answer."""
    from agents import Runner

    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-fake", max_retries=0)
    agent = build_agent(client)
    with provider.get_tracer("example-agent").start_as_current_span(ROOT_NAME, kind=SpanKind.SERVER):
        result = Runner.run_streamed(agent, question)  # each model call streamed
        async for _ in result.stream_events():
            pass
    await client.close()
    return str(result.final_output)


def traced_turn(base_url: str) -> tuple[str, list[ReadableSpan]]:
    """A turn with a tracer provider of its own, its spans kept in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(provider)
    try:
        answer = asyncio.run(run_turn(provider, base_url))
    finally:
        uninstrument()
    spans = list(exporter.get_finished_spans())
    exporter.clear()  # the agent SDK's instrumentation may keep the provider: not its spans
    provider.shutdown()
    return answer, spans


def main(out_dir: Path = Path("out/agent")) -> int:
    """The turn against a fake server that exports its own spans, then ``report --by trace``."""
    from openai_latency.cli import main as cli
    from openai_latency.cli.spans.write import write_otlp_json
    from openai_latency.fake_server import FakeServer

    out_dir.mkdir(parents=True, exist_ok=True)
    server_file = out_dir / "server.jsonl"
    server_file.unlink(missing_ok=True)
    with FakeServer(export_spans=str(server_file), span_service="vllm") as server:
        answer, spans = traced_turn(server.base_url)
        server.flush_spans()
    app_file = out_dir / "app.jsonl"
    app_file.unlink(missing_ok=True)
    write_otlp_json(str(app_file), spans)
    print(f"the agent answered {answer!r}; {len(spans)} spans in {app_file}, the server's in {server_file}\n")
    return cli(["report", str(app_file), str(server_file), "--by", "trace"])
