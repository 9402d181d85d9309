"""Writes the example page behind docs/images/turn-waterfall.png: three built agent turns (a planner
agent, a streamed call with vLLM's own span below it beside a short overlapped call, a tool that
calls another service and the model, a DB write; the search service's clock 3 ms ahead), through
``report --by trace --html``.

    .venv/bin/python scripts/turn_waterfall_example.py OUT.html
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1500 \
        --screenshot=docs/images/turn-waterfall.png OUT.html
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.trace import SpanKind
from tests.support.turns import TraceBuilder

from openai_latency.cli.report.command import main

STREAM = [("request_build", 1), ("network_wait", 99), ("first_token", 620), ("stream_drain", 380)]
VLLM = {
    "gen_ai.latency.time_in_queue": 0.210,
    "gen_ai.latency.time_to_first_token": 0.690,
    "gen_ai.latency.time_in_model_prefill": 0.480,
    "gen_ai.latency.time_in_model_decode": 0.370,
    "gen_ai.latency.e2e": 1.060,
}
b = TraceBuilder()
for i, slow in enumerate((0, 150, 900)):
    at = i * 10_000
    root = b.span("agent turn", at, at + 2100 + slow, kind=SpanKind.SERVER)
    plan = b.span(
        "invoke_agent planner",
        at + 20,
        at + 2080 + slow,
        root,
        attributes={"gen_ai.operation.name": "invoke_agent"},
    )
    _, phases = b.llm(at + 60, STREAM, plan, model="gpt-4o")
    b.span(
        "llm_request",
        at + 65,
        at + 1125,
        phases["network_wait"],
        kind=SpanKind.SERVER,
        service="vllm",
        attributes=VLLM,
    )
    b.llm(at + 70, [("request_build", 1), ("network_wait", 40), ("response_read", 250)], plan)
    tool = b.tool("search_docs", at + 1180, at + 1700 + slow, plan)
    client = b.span("GET /search", at + 1200, at + 1420 + slow, tool, kind=SpanKind.CLIENT)
    served = b.span(
        "GET /search", at + 1203, at + 1423 + slow, client, service="search", kind=SpanKind.SERVER
    )
    b.span(
        "SELECT docs",
        at + 1230,
        at + 1400 + slow,
        served,
        service="search",
        attributes={"db.system": "postgresql"},
    )
    b.llm(at + 1450 + slow, [("request_build", 1), ("network_wait", 60), ("response_read", 180)], tool)
    b.span(
        "INSERT history",
        at + 1760 + slow,
        at + 1830 + slow,
        plan,
        service="app",
        attributes={"db.system": "postgresql"},
    )
with tempfile.TemporaryDirectory() as folder:
    spans = b.write(Path(folder) / "turns.jsonl")
    sys.exit(
        main([str(spans), "--by", "trace", "--html", sys.argv[1] if len(sys.argv) > 1 else "turns.html"])
    )
