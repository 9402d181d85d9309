"""Generates deploy/grafana/dashboards/openai-latency.json (the provisioned Grafana dashboard).

    python deploy/grafana/make_dashboard.py            # rewrite the JSON
    python deploy/grafana/make_dashboard.py --check    # exit 1 if the JSON is out of date

Edit the panels here, not in the JSON. Every PromQL expression must only use metric names that
the collector pipeline produces: tests/stack/test_grafana_dashboard.py checks that.
"""

from __future__ import annotations

import argparse
import json
import string
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "dashboards" / "openai-latency.json"
DS = {"type": "prometheus", "uid": "prometheus"}
M = 'gen_ai_request_model=~"$model"'
RI = "$__rate_interval"
MODEL = "gen_ai_request_model"
CALLS = "gen_ai_client_operation_duration_seconds_count"
PER_CALL = f" / scalar(sum(rate({CALLS}{{{M}}}[{RI}])))"
"""Divides a per-second rate by the calls per second: a share of calls, or a mean per call."""
# Phase spans of openai-latency (span names are the public contract: docs/ARCHITECTURE.md).
PHASE_SPANS = r'span_name=~"openai\\..+|http\\..+"'
OPERATION_SPANS = r'span_name=~"(chat|embeddings|text_completion|generate_content|openai) .+"'
SPAN_DURATION = "traces_span_metrics_duration_seconds"


@dataclass(frozen=True)
class Query:
    """One PromQL target of a panel (its refId is its place in the panel: A, B, ...)."""

    expr: str
    legend: str
    exemplar: bool = False
    instant: bool = False

    def target(self, ref: str) -> dict[str, Any]:
        target: dict[str, Any] = {
            "datasource": DS,
            "expr": self.expr,
            "legendFormat": self.legend,
            "refId": ref,
            "exemplar": self.exemplar,
        }
        if self.instant:
            target.update({"instant": True, "range": False, "format": "table"})
        else:
            target["range"] = True
        return target


def label(name: str) -> str:
    """The legend of a series by one label: ``{{name}}``."""
    return "{{" + name + "}}"


def sum_rate(by: str, metric: str, matchers: str = M) -> str:
    return f"sum by ({by}) (rate({metric}{{{matchers}}}[{RI}]))"


def quantile(p: float, metric: str, by: str, matchers: str = M) -> str:
    return f"histogram_quantile({p}, sum by (le, {by}) (rate({metric}_bucket{{{matchers}}}[{RI}])))"


def percentile(p: float, metric: str, by: str, matchers: str = M, legend: str | None = None) -> Query:
    """The ``p`` quantile of a histogram per ``by``, with exemplars (legend ``p95 {{by}}`` by default)."""
    return Query(quantile(p, metric, by, matchers), legend or f"p{p * 100:g} {label(by)}", exemplar=True)


def p50_p95_by_model(metric: str) -> list[Query]:
    return [percentile(p, metric, MODEL) for p in (0.5, 0.95)]


class Layout:
    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self.y = 0
        self.x = 0
        self.row_h = 0
        self.next_id = 1

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append(
            {
                "type": "row",
                "title": title,
                "id": self._id(),
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
                "panels": [],
            }
        )
        self.y += 1

    def panel(
        self,
        title: str,
        description: str,
        queries: Sequence[Query],
        *,
        unit: str,
        w: int = 12,
        h: int = 8,
        kind: str = "timeseries",
        stack: bool = False,
        overrides: list[dict[str, Any]] | None = None,
    ) -> None:
        if self.x + w > 24:
            self._newline()
        custom: dict[str, Any] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 10,
            "showPoints": "never",
        }
        if stack:
            custom.update({"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 60})
        panel: dict[str, Any] = {
            "type": kind,
            "title": title,
            "description": description,
            "id": self._id(),
            "datasource": DS,
            "gridPos": {"h": h, "w": w, "x": self.x, "y": self.y},
            "targets": [
                query.target(ref) for query, ref in zip(queries, string.ascii_uppercase, strict=False)
            ],
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": overrides or []},
            "options": {
                "legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
                "tooltip": {"mode": "multi", "sort": "desc"},
            },
        }
        if kind == "timeseries":
            panel["fieldConfig"]["defaults"]["custom"] = custom
        else:
            panel["options"] = {"showHeader": True}
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)

    def _newline(self) -> None:
        self.y += self.row_h
        self.x = 0
        self.row_h = 0

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def build() -> dict[str, Any]:
    d = Layout()
    tpot = "openai_latency_time_per_output_token_seconds"

    d.row("Overview")
    d.panel(
        "LLM calls per second by model",
        "Completed SDK calls (success and failure) per second, from gen_ai.client.operation.duration.",
        [Query(sum_rate(MODEL, CALLS), label(MODEL))],
        unit="reqps",
        w=8,
    )
    d.panel(
        "Error rate by error.type",
        "Share of calls that failed, split by error.type (provider error code, HTTP status or exception "
        "name). A retried call that finally succeeded is not an error here: see Retries.",
        [Query(sum_rate("error_type", CALLS, f'{M}, error_type!=""') + PER_CALL, label("error_type"))],
        unit="percentunit",
        w=8,
        stack=True,
    )
    d.panel(
        "Operation duration p50 / p95 by model",
        "Whole call, from create() to the last chunk (streams) or the parsed response. Dots are "
        "exemplars: click one to open its trace in Jaeger.",
        p50_p95_by_model("gen_ai_client_operation_duration_seconds"),
        unit="s",
        w=8,
    )

    d.row("Time to first token and decode speed")
    d.panel(
        "Time to first token p50 / p95 by model",
        "openai_latency.time_to_first_token: operation start to the first generated token of any "
        "channel, reasoning included (role-only chunks do not count), caller's own time excluded. "
        "Streams only. Exemplars link to the trace.",
        p50_p95_by_model("openai_latency_time_to_first_token_seconds"),
        unit="s",
    )
    d.panel(
        "Time to first answer token p50 / p95 by model",
        "openai_latency.time_to_first_answer_token: operation start to the first answer token. For a "
        "reasoning model whose reasoning streams, the gap to the time to first token is its thinking "
        "time; otherwise the two are equal.",
        p50_p95_by_model("openai_latency_time_to_first_answer_token_seconds"),
        unit="s",
    )
    d.panel(
        "Thinking time p50 / p95 by model",
        "openai_latency.reasoning.duration: first reasoning token to first answer token, for streams "
        "whose reasoning reaches the client (hidden reasoning is inside the first-token time).",
        p50_p95_by_model("openai_latency_reasoning_duration_seconds"),
        unit="s",
    )
    d.panel(
        "Time per output token p50 / p95 by model",
        "openai_latency.time_per_output_token: server-side wait between output chunks divided by "
        "(output tokens - 1). Time the caller spends between chunks is not counted.",
        p50_p95_by_model(tpot),
        unit="s",
    )
    d.panel(
        "Output tokens per second (throughput) by model",
        "All output tokens received per second (gen_ai.client.token.usage, token type output): how "
        "much the application consumes.",
        [
            Query(
                sum_rate(MODEL, "gen_ai_client_token_usage_sum", f'{M}, gen_ai_token_type="output"'),
                label(MODEL),
            )
        ],
        unit="short",
    )
    d.panel(
        "Decode speed per stream (tokens/s) by model",
        "1 / mean time per output token: how fast one stream produces tokens once it started.",
        [Query(f"1 / ({sum_rate(MODEL, f'{tpot}_sum')} / {sum_rate(MODEL, f'{tpot}_count')})", label(MODEL))],
        unit="short",
    )

    server_ttft = "openai_latency_server_time_to_first_token_seconds"
    overhead = "openai_latency_client_overhead_time_to_first_token_seconds"
    d.panel(
        "Time to first token: the server's share and the rest (p50 by model)",
        "For servers that report their own account of each request (llama.cpp's timings; vLLM's "
        "per-request metrics when OPENAI_LATENCY_SERVER_METRICS=request asks for them): "
        "openai_latency.server.time_to_first_token (the server's queue, when it reports one, and its "
        "prefill) against openai_latency.client_overhead.time_to_first_token (the client's time to "
        "first token minus the server's: network and client, plus any queueing the server does not "
        "report, as llama.cpp does not). A growing server share: the model or its queue; a growing "
        "rest: the network, a gateway or the client. Streams only. In the example load, the fast "
        "stream scenario's fake server sends llama.cpp-shaped timings.",
        [
            percentile(0.5, server_ttft, MODEL, legend=f"server {label(MODEL)}"),
            percentile(0.5, overhead, MODEL, legend=f"network and client {label(MODEL)}"),
        ],
        unit="s",
        w=24,
    )

    d.row("Where the time goes: phases")
    phase = "openai_latency_phase"
    d.panel(
        "Phase breakdown: mean seconds per call (stacked)",
        "openai_latency.phase.duration summed per phase and divided by the number of calls: the "
        "stack height is the mean call duration, each band the phase's share (request_build, "
        "network_wait, retry_backoff, first_token, reasoning, stream_drain, response_read).",
        [Query(sum_rate(phase, "openai_latency_phase_duration_seconds_sum") + PER_CALL, label(phase))],
        unit="s",
        stack=True,
    )
    d.panel(
        "Phase p95 (openai_latency.phase.duration)",
        "95th percentile of each phase across calls, from the instrumentation's own histogram.",
        [percentile(0.95, "openai_latency_phase_duration_seconds", phase, legend=label(phase))],
        unit="s",
    )
    d.panel(
        "Phase and sub-phase span p95 (spanmetrics)",
        "The collector's spanmetrics connector turns every span into a duration histogram per span "
        "name, so each phase span (openai.*) and HTTP sub-phase span (http.pool_wait, http.connect, "
        "http.tls, http.send, http.server_wait) gets a p95 without any extra instrumentation.",
        [percentile(0.95, SPAN_DURATION, "span_name", PHASE_SPANS, legend=label("span_name"))],
        unit="s",
    )
    d.panel(
        "Operation span p95 by span name (spanmetrics)",
        "The operation spans (`chat {model}`, ...) as seen by the collector, per server.address.",
        [
            percentile(
                0.95,
                SPAN_DURATION,
                "span_name, server_address",
                OPERATION_SPANS,
                legend=f"{label('span_name')} @ {label('server_address')}",
            )
        ],
        unit="s",
    )

    d.row("Retries and failures")
    d.panel(
        "Retries per second by error.type",
        "openai_latency.retries: attempts the SDK retried, by the error.type of the failed attempt "
        "(429 rate limits, 5xx, timeouts). Time spent waiting is the retry_backoff phase.",
        [Query(sum_rate("error_type", "openai_latency_retries_total"), label("error_type"))],
        unit="short",
        stack=True,
    )
    d.panel(
        "Failed LLM spans per second by error.type (spanmetrics)",
        "Operation spans with status ERROR counted by the collector, split by error.type.",
        [
            Query(
                sum_rate(
                    "error_type",
                    "traces_span_metrics_calls_total",
                    f'{OPERATION_SPANS}, status_code="STATUS_CODE_ERROR"',
                ),
                label("error_type"),
            )
        ],
        unit="short",
        stack=True,
    )
    d.panel(
        "Slowest spans right now (p95 over 5 min, spanmetrics)",
        "Top 15 span names by p95 duration over the last 5 minutes.",
        [
            Query(
                "topk(15, histogram_quantile(0.95, sum by (le, span_name, gen_ai_request_model) "
                f"(rate({SPAN_DURATION}_bucket[5m]))))",
                label("span_name"),
                instant=True,
            )
        ],
        unit="s",
        w=24,
        kind="table",
    )

    return {
        "uid": "openai-latency",
        "title": "OpenAI latency",
        "description": "Where the time of OpenAI SDK calls goes (openai-latency + spanmetrics).",
        "tags": ["openai", "llm", "opentelemetry"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "10s",
        "time": {"from": "now-15m", "to": "now"},
        "links": [
            {
                "title": "Jaeger: traces of example-backend",
                "type": "link",
                "targetBlank": True,
                "url": "http://localhost:16686/search?service=example-backend",
            },
        ],
        "templating": {
            "list": [
                {
                    "name": "model",
                    "label": "model",
                    "type": "query",
                    "datasource": DS,
                    "query": {"query": f"label_values({CALLS}, gen_ai_request_model)", "refId": "model"},
                    "definition": f"label_values({CALLS}, gen_ai_request_model)",
                    "refresh": 2,
                    "multi": True,
                    "includeAll": True,
                    "allValue": ".*",
                    "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
                    "sort": 1,
                }
            ]
        },
        "panels": d.panels,
        "annotations": {"list": []},
    }


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail if the JSON on disk is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run python {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
