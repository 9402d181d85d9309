"""The instruments (the metrics table of docs/ARCHITECTURE.md, "The public contract") and one
``record`` per finished operation.

Recording happens once, when the call ends, inside the operation span's context so that an SDK
exemplar filter can link each point to its trace. Attributes stay low-cardinality.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import Histogram, Meter
from opentelemetry.util.types import AttributeValue

from . import semconv as sc

# Explicit bucket advice of the GenAI semantic conventions (docs/gen-ai/gen-ai-metrics.md).
# Client metrics: operation.duration, time_to_first_chunk and time_per_output_chunk share one set.
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
# Our own time_to_first_token / time_per_output_token reuse the advice of their server-side twins
# (gen_ai.server.time_to_first_token, gen_ai.server.time_per_output_token).
TIME_TO_FIRST_TOKEN_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
)
TIME_PER_OUTPUT_TOKEN_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
# Phases (and http.* sub-phases) go down to fractions of a millisecond: finer low end, same top.
PHASE_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, *DURATION_BUCKETS)

UNLINKED = trace.set_span_in_context(trace.INVALID_SPAN)
"""A context without a (sampled) span: points recorded in it offer no exemplar. Not an empty context:
the SDK replaces a falsy context with the current one."""

# Span attributes that metric points may carry (low cardinality: never ids, never content).
METRIC_ATTRIBUTES = (
    sc.GEN_AI_OPERATION_NAME,
    sc.GEN_AI_PROVIDER_NAME,
    sc.GEN_AI_REQUEST_MODEL,
    sc.GEN_AI_RESPONSE_MODEL,
    sc.SERVER_ADDRESS,
    sc.SERVER_PORT,
    sc.ERROR_TYPE,
    sc.OPENAI_LATENCY_TRANSPORT,
)


def metric_attributes(*sources: Mapping[str, AttributeValue]) -> dict[str, AttributeValue]:
    """:data:`METRIC_ATTRIBUTES` from the first of ``sources`` that has each (no merged copy)."""
    out: dict[str, AttributeValue] = {}
    for key in METRIC_ATTRIBUTES:
        for source in sources:
            if key in source:
                out[key] = source[key]
                break
    return out


@dataclass(slots=True)
class Measurements:
    """What one finished call contributes to the metrics, in seconds and tokens."""

    attributes: dict[str, AttributeValue]
    """The point attributes: the span's :data:`METRIC_ATTRIBUTES` it has."""
    duration: float
    phases: list[tuple[str, float]] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    time_to_first_chunk: float | None = None
    time_to_first_token: float | None = None
    time_to_first_answer_token: float | None = None
    reasoning_duration: float | None = None
    time_per_output_token: float | None = None
    chunk_gaps: Iterable[float] = ()
    retries: list[str] = field(default_factory=list)
    """error.type of every retried attempt."""
    server: Iterable[tuple[str, float]] = ()
    """(histogram attribute of :class:`Metrics`, seconds): the server's own account of the call."""


# attribute of Metrics -> (instrument name, unit, description, bucket advice)
_HISTOGRAMS = {
    "duration": ("gen_ai.client.operation.duration", "s", "GenAI operation duration.", DURATION_BUCKETS),
    "token_usage": (
        "gen_ai.client.token.usage",
        "{token}",
        "Number of input and output tokens used.",
        TOKEN_BUCKETS,
    ),
    "time_to_first_chunk": (
        "gen_ai.client.operation.time_to_first_chunk",
        "s",
        "Time from the start of the call to the first chunk of the response stream.",
        DURATION_BUCKETS,
    ),
    "time_per_output_chunk": (
        "gen_ai.client.operation.time_per_output_chunk",
        "s",
        "Server-side time between two chunks (the caller's own time excluded).",
        DURATION_BUCKETS,
    ),
    "time_to_first_token": (
        "openai_latency.time_to_first_token",
        "s",
        "Call start to the first generated token of any channel (reasoning included), caller time excluded.",
        TIME_TO_FIRST_TOKEN_BUCKETS,
    ),
    "time_to_first_answer_token": (
        "openai_latency.time_to_first_answer_token",
        "s",
        "Call start to the first answer token (after any streamed reasoning), caller time excluded.",
        TIME_TO_FIRST_TOKEN_BUCKETS,
    ),
    "reasoning_duration": (
        "openai_latency.reasoning.duration",
        "s",
        "Thinking time of a stream: first reasoning token to first answer token.",
        DURATION_BUCKETS,
    ),
    "time_per_output_token": (
        "openai_latency.time_per_output_token",
        "s",
        "Server-side time per output token after the first.",
        TIME_PER_OUTPUT_TOKEN_BUCKETS,
    ),
    "server_queue_time": (
        "openai_latency.server.queue_time",
        "s",
        "Time the request queued in the server before it was scheduled, as the server reports it (vLLM).",
        TIME_TO_FIRST_TOKEN_BUCKETS,
    ),
    "server_prefill_time": (
        "openai_latency.server.prefill_time",
        "s",
        "Prompt processing (prefill) of the uncached prompt tokens, as the server reports it.",
        TIME_TO_FIRST_TOKEN_BUCKETS,
    ),
    "server_time_to_first_token": (
        "openai_latency.server.time_to_first_token",
        "s",
        "Time to first token as the server reports it (llama.cpp timings, vLLM metrics).",
        TIME_TO_FIRST_TOKEN_BUCKETS,
    ),
    "server_time_per_output_token": (
        "openai_latency.server.time_per_output_token",
        "s",
        "Decode time per output token after the first, as the server reports it.",
        TIME_PER_OUTPUT_TOKEN_BUCKETS,
    ),
    "client_overhead_time_to_first_token": (
        "openai_latency.client_overhead.time_to_first_token",
        "s",
        "Client time to first token minus the server's: network and client (streams).",
        TIME_TO_FIRST_TOKEN_BUCKETS,
    ),
    "time_to_first_audio": (
        "openai_latency.time_to_first_audio",
        "s",
        "Realtime: the trigger of a model response to its first output audio delta's arrival.",
        TIME_TO_FIRST_TOKEN_BUCKETS,
    ),
    "phase_duration": (
        "openai_latency.phase.duration",
        "s",
        "Duration of one phase of a call (attribute openai_latency.phase).",
        PHASE_BUCKETS,
    ),
}


class Metrics:
    duration: Histogram
    token_usage: Histogram
    time_to_first_chunk: Histogram
    time_per_output_chunk: Histogram
    time_to_first_token: Histogram
    time_to_first_answer_token: Histogram
    reasoning_duration: Histogram
    time_per_output_token: Histogram
    phase_duration: Histogram
    server_queue_time: Histogram
    server_prefill_time: Histogram
    server_time_to_first_token: Histogram
    server_time_per_output_token: Histogram
    client_overhead_time_to_first_token: Histogram
    time_to_first_audio: Histogram

    def __init__(self, meter: Meter) -> None:
        for attribute, (name, unit, description, buckets) in _HISTOGRAMS.items():
            histogram = meter.create_histogram(
                name, unit=unit, description=description, explicit_bucket_boundaries_advisory=buckets
            )
            setattr(self, attribute, histogram)
        self.retries = meter.create_counter(
            "openai_latency.retries",
            unit="{retry}",
            description="Retries taken by the SDK, by error.type of the retried attempt.",
        )

    def record(self, m: Measurements, context: otel_context.Context) -> None:
        """Records ``m``. Only the latency points users open traces from (duration, time to first
        chunk/token, time per output token, and the opt-in phase durations: "which call made this
        phase's p95?") get ``context``, so an exemplar filter links them to the trace; token counts,
        chunk gaps and retries get a span-less context: an exemplar there costs the SDK's
        reservoir on every point and links nothing worth opening."""
        base = m.attributes
        self.duration.record(m.duration, base, context=context)
        if m.input_tokens is not None:
            self.token_usage.record(m.input_tokens, {**base, sc.GEN_AI_TOKEN_TYPE: "input"}, context=UNLINKED)
        if m.output_tokens is not None:
            self.token_usage.record(
                m.output_tokens, {**base, sc.GEN_AI_TOKEN_TYPE: "output"}, context=UNLINKED
            )
        if m.time_to_first_chunk is not None:
            self.time_to_first_chunk.record(m.time_to_first_chunk, base, context=context)
        if m.time_to_first_token is not None:
            self.time_to_first_token.record(m.time_to_first_token, base, context=context)
        if m.time_to_first_answer_token is not None:
            self.time_to_first_answer_token.record(m.time_to_first_answer_token, base, context=context)
        if m.reasoning_duration is not None:
            self.reasoning_duration.record(m.reasoning_duration, base, context=context)
        if m.time_per_output_token is not None:
            self.time_per_output_token.record(m.time_per_output_token, base, context=context)
        for gap in m.chunk_gaps:
            self.time_per_output_chunk.record(gap, base, context=UNLINKED)
        for phase, seconds in m.phases:
            self.phase_duration.record(seconds, {**base, sc.OPENAI_LATENCY_PHASE: phase}, context=context)
        for instrument, seconds in m.server:
            getattr(self, instrument).record(seconds, base, context=context)
        for error_type in m.retries:
            self.retries.add(1, {**base, sc.ERROR_TYPE: error_type}, context=UNLINKED)
