"""What the readers know of the spans the instrumentation writes: attribute keys, the phases and
their one order, the keys calls are grouped by, and bench's own attributes.

The instrumentation defines these names (``semconv.py``, ``timeline.PHASE_NAMES``); the CLI keeps its
own list on purpose, as a dashboard does: it reads files written by other versions too, and a rename
there must be a decision here. Every other module of ``cli/`` takes its attribute names from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

# --------------------------------------------------------------------------- the instrumentation's
OPERATION_NAME: Final = "gen_ai.operation.name"
#: Operation names of GenAI spans that are no LLM call: a tool's, an agent framework's own
NO_CALL_OPERATIONS: Final = frozenset({"execute_tool", "invoke_agent", "create_agent"})
PROVIDER_NAME: Final = "gen_ai.provider.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
REQUEST_STREAM: Final = "gen_ai.request.stream"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
SERVICE_NAME: Final = "service.name"  # a resource attribute
ERROR_TYPE: Final = "error.type"
STATUS_CODE: Final = "http.response.status_code"
RESEND_COUNT: Final = "http.request.resend_count"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
CACHED_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"

#: On a phase span: its phase (the name without ``openai.``); no operation span has it.
PHASE: Final = "openai_latency.phase"
#: On an operation span: the seconds of each phase, summed (``openai_latency.phase.network_wait``).
PHASE_PREFIX: Final = "openai_latency.phase."
#: On a network_wait span (``phase_spans=phases``): the seconds of each http.* sub-phase
#: (``openai_latency.http.connect``; ``openai_latency.http.failed`` names one and is no number).
HTTP_PREFIX: Final = "openai_latency.http."
DOMINANT_PHASE: Final = "openai_latency.dominant_phase"
TIME_TO_FIRST_TOKEN: Final = "openai_latency.time_to_first_token"
TIME_TO_FIRST_ANSWER_TOKEN: Final = "openai_latency.time_to_first_answer_token"
REASONING_DURATION: Final = "openai_latency.reasoning.duration"
#: True when the first token had arrived unseen while the caller was busy: no TTFT on that call.
FIRST_TOKEN_WAITING: Final = "openai_latency.stream.first_token_waiting"
TIME_PER_OUTPUT_TOKEN: Final = "openai_latency.time_per_output_token"
REQUEST_ID: Final = "openai_latency.request_id"
ERROR_CATEGORY: Final = "openai_latency.error.category"
RETRY_ERROR_TYPES: Final = "openai_latency.retry.error_types"
RETRY_REASON: Final = "openai_latency.retry.reason"
RETRY_DELAY_SOURCE: Final = "openai_latency.retry.delay_source"
USAGE_ESTIMATED: Final = "openai_latency.usage.estimated"
CONNECTION_REUSED: Final = "openai_latency.connection.reused"
STREAM_END_STATE: Final = "openai_latency.stream.end_state"
STREAM_CHUNKS: Final = "openai_latency.stream.chunks"
STREAM_CONSUMER_TIME: Final = "openai_latency.stream.consumer_time"
#: Attribute prefixes of ours and of the GenAI conventions: a span without any is not ours.
OUR_PREFIXES: Final = ("gen_ai.", "openai_latency.")
#: The operation span's array-valued attributes (Jaeger keeps arrays as JSON text).
ARRAY_ATTRIBUTES: Final = frozenset({RETRY_ERROR_TYPES, FINISH_REASONS, STOP_SEQUENCES})

# --------------------------------------------------------------------------------------- bench's
#: Set on every span of an ``openai-latency bench`` run: the target's name and the load level.
BENCH_TARGET: Final = "openai_latency.bench.target"
BENCH_LOAD: Final = "openai_latency.bench.load"
#: On the spans of a warm-up request (dropped before anything is counted or written).
BENCH_WARMUP: Final = "openai_latency.bench.warmup"
#: Set by bench on a streamed call whose server sent no usage: the content chunks the client received
#: (the call's output tokens, estimated; ``openai_latency.usage.estimated`` says so).
BENCH_OUTPUT_CHUNKS: Final = "openai_latency.bench.output_chunks"

# ---------------------------------------------------------------------------- phases and grouping
#: Phases of an operation (direct children), in the order of a call.
PHASES: Final = (
    "request_build",
    "network_wait",
    "retry_backoff",
    "first_token",
    "reasoning",
    "stream_drain",
    "response_read",
)
#: Sub-phases of network_wait (its children), in order.
HTTP_PHASES: Final = ("pool_wait", "dns", "connect", "tls", "send", "server_wait")
#: What calls can be grouped by (``report --by``), in the order of :attr:`Call.keys`.
GROUP_KEYS: Final = ("endpoint", "model", "operation", "provider", "service", "target", "load")


def phase_rank(name: str, order: Sequence[str] = PHASES) -> int:
    """Where a phase comes in a call (``order``: :data:`PHASES` or :data:`HTTP_PHASES`); unknown last."""
    return order.index(name) if name in order else len(order)


def phase_sort_key(name: str, order: Sequence[str] = PHASES) -> tuple[int, str]:
    """:func:`phase_rank`, unknown phases by name: the one order every table and the JSON use."""
    return phase_rank(name, order), name
