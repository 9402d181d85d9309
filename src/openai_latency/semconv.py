"""Attribute names: the public contract of the spans, events and metric points, in one place.

Names the OpenTelemetry semantic conventions define come from ``opentelemetry-semantic-conventions``
(re-exported here under their own constant names); ours start with ``OPENAI_LATENCY_``. Users build
dashboards and queries on these strings: rename one only with a changelog entry (see
docs/ARCHITECTURE.md, "The public contract").
"""

from __future__ import annotations

from typing import Final

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _gen_ai
from opentelemetry.semconv._incubating.attributes import url_attributes as _url
from opentelemetry.semconv.attributes import error_attributes as _error
from opentelemetry.semconv.attributes import http_attributes as _http
from opentelemetry.semconv.attributes import network_attributes as _network
from opentelemetry.semconv.attributes import server_attributes as _server

# --- semantic conventions -------------------------------------------------------------------------

ERROR_TYPE: Final = _error.ERROR_TYPE
HTTP_REQUEST_METHOD: Final = _http.HTTP_REQUEST_METHOD
HTTP_REQUEST_RESEND_COUNT: Final = _http.HTTP_REQUEST_RESEND_COUNT
HTTP_RESPONSE_STATUS_CODE: Final = _http.HTTP_RESPONSE_STATUS_CODE
NETWORK_PROTOCOL_VERSION: Final = _network.NETWORK_PROTOCOL_VERSION
SERVER_ADDRESS: Final = _server.SERVER_ADDRESS
SERVER_PORT: Final = _server.SERVER_PORT
URL_TEMPLATE: Final = _url.URL_TEMPLATE
GEN_AI_OPERATION_NAME: Final = _gen_ai.GEN_AI_OPERATION_NAME
GEN_AI_PROVIDER_NAME: Final = _gen_ai.GEN_AI_PROVIDER_NAME
GEN_AI_REQUEST_MODEL: Final = _gen_ai.GEN_AI_REQUEST_MODEL
GEN_AI_RESPONSE_MODEL: Final = _gen_ai.GEN_AI_RESPONSE_MODEL
GEN_AI_RESPONSE_FINISH_REASONS: Final = _gen_ai.GEN_AI_RESPONSE_FINISH_REASONS
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
"""Not a constant of every supported semantic-conventions release yet."""
GEN_AI_USAGE_INPUT_TOKENS: Final = _gen_ai.GEN_AI_USAGE_INPUT_TOKENS
GEN_AI_USAGE_OUTPUT_TOKENS: Final = _gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS
GEN_AI_TOKEN_TYPE: Final = _gen_ai.GEN_AI_TOKEN_TYPE
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = _gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS
GEN_AI_REQUEST_REASONING_LEVEL: Final = "gen_ai.request.reasoning.level"
"""The requested reasoning effort; proposed in the GenAI conventions, in no released
``opentelemetry-semantic-conventions`` package yet (0.66b2 is the newest)."""

# --- ours: the operation span's summary -----------------------------------------------------------

OPENAI_LATENCY_PHASE_PREFIX: Final = "openai_latency.phase."
"""+ a phase name (``openai_latency.phase.network_wait``): seconds per phase, summed over the call."""
OPENAI_LATENCY_DOMINANT_PHASE: Final = "openai_latency.dominant_phase"
OPENAI_LATENCY_ATTEMPTS: Final = "openai_latency.attempts"
OPENAI_LATENCY_RETRY_ERROR_TYPES: Final = "openai_latency.retry.error_types"
OPENAI_LATENCY_CONNECTION_REUSED: Final = "openai_latency.connection.reused"
OPENAI_LATENCY_NETWORK_OVERHEAD: Final = "openai_latency.network.overhead"
OPENAI_LATENCY_REQUEST_ID: Final = "openai_latency.request_id"
OPENAI_LATENCY_SERVER_PROCESSING_TIME: Final = "openai_latency.server.processing_time"
OPENAI_LATENCY_SERVER_QUEUE_TIME: Final = "openai_latency.server.queue_time"
"""The server's account (:mod:`.server_timing`), seconds: time queued before scheduling (vLLM)."""
OPENAI_LATENCY_SERVER_PREFILL_TIME: Final = "openai_latency.server.prefill_time"
"""Prompt processing of the tokens not found in the server's cache (llama.cpp ``prompt_ms``)."""
OPENAI_LATENCY_SERVER_TIME_TO_FIRST_TOKEN: Final = "openai_latency.server.time_to_first_token"
OPENAI_LATENCY_SERVER_DECODE_TIME: Final = "openai_latency.server.decode_time"
"""First token -> last token, as the server measured it."""
OPENAI_LATENCY_SERVER_TIME_PER_OUTPUT_TOKEN: Final = "openai_latency.server.time_per_output_token"
OPENAI_LATENCY_SERVER_CACHED_PROMPT_TOKENS: Final = "openai_latency.server.cached_prompt_tokens"
OPENAI_LATENCY_CLIENT_OVERHEAD_TIME_TO_FIRST_TOKEN: Final = (
    "openai_latency.client_overhead.time_to_first_token"
)
"""Our time to first token minus the server's: network and client (and queueing the server does
not report)."""
OPENAI_LATENCY_RATELIMIT_PREFIX: Final = "openai_latency.ratelimit."
"""+ limit_requests, limit_tokens, remaining_requests, remaining_tokens, reset_requests, reset_tokens."""
OPENAI_LATENCY_ERROR_CATEGORY: Final = "openai_latency.error.category"
OPENAI_LATENCY_TIME_TO_FIRST_TOKEN: Final = "openai_latency.time_to_first_token"
OPENAI_LATENCY_TIME_PER_OUTPUT_TOKEN: Final = "openai_latency.time_per_output_token"
OPENAI_LATENCY_TIME_PER_OUTPUT_TOKEN_RULE: Final = "openai_latency.time_per_output_token.rule"
"""``all_tokens`` (reasoning streamed: every token's window) or ``answer_tokens`` (the answer's)."""
OPENAI_LATENCY_TIME_TO_FIRST_ANSWER_TOKEN: Final = "openai_latency.time_to_first_answer_token"
OPENAI_LATENCY_REASONING_DURATION: Final = "openai_latency.reasoning.duration"
OPENAI_LATENCY_REASONING_VISIBILITY: Final = "openai_latency.reasoning.visibility"
"""``streamed``, ``summary``, ``hidden`` or ``none``."""
OPENAI_LATENCY_STREAM_FIRST_TOKEN_WAITING: Final = "openai_latency.stream.first_token_waiting"
"""True when the first token was already waiting when the caller, back from its own work, asked for
it: its arrival time is unknown, so time_to_first_token is left unset."""
OPENAI_LATENCY_USAGE_ESTIMATED: Final = "openai_latency.usage.estimated"
OPENAI_LATENCY_STREAM_END_STATE: Final = "openai_latency.stream.end_state"
OPENAI_LATENCY_STREAM_CHUNKS: Final = "openai_latency.stream.chunks"
OPENAI_LATENCY_STREAM_WAIT_TIME: Final = "openai_latency.stream.wait_time"
OPENAI_LATENCY_STREAM_CONSUMER_TIME: Final = "openai_latency.stream.consumer_time"
OPENAI_LATENCY_STREAM_MAX_GAP: Final = "openai_latency.stream.max_gap"
OPENAI_LATENCY_STREAM_BUFFERED_CHUNKS: Final = "openai_latency.stream.buffered_chunks"

# --- ours: phase spans and events -----------------------------------------------------------------

OPENAI_LATENCY_PHASE: Final = "openai_latency.phase"
"""On every phase span and ``openai_latency.phase.duration`` point: the phase name without prefix."""
OPENAI_LATENCY_HTTP_PREFIX: Final = "openai_latency."
"""+ an http.* sub-phase name (``openai_latency.http.connect``): its seconds, on a network_wait span
when the sub-phases are not spans of their own (``phase_spans=phases``)."""
OPENAI_LATENCY_HTTP_FAILED: Final = "openai_latency.http.failed"
OPENAI_LATENCY_RETRY_REASON: Final = "openai_latency.retry.reason"
OPENAI_LATENCY_RETRY_DELAY: Final = "openai_latency.retry.delay"
OPENAI_LATENCY_RETRY_DELAY_SOURCE: Final = "openai_latency.retry.delay_source"
OPENAI_LATENCY_STREAM_STALL: Final = "openai_latency.stream.stall"
"""Event name; its attributes are the two below."""
OPENAI_LATENCY_STALL_GAP: Final = "openai_latency.stall.gap"
OPENAI_LATENCY_STALL_CHUNK_INDEX: Final = "openai_latency.stall.chunk_index"

# --- ours: WebSocket transports (docs/ARCHITECTURE.md, "WebSocket transports") --------------------

OPENAI_LATENCY_TRANSPORT: Final = "openai_latency.transport"
"""``http`` on every HTTP call, ``websocket`` on a turn of a WebSocket connection; a metric attribute."""
OPENAI_LATENCY_REALTIME_TRIGGER: Final = "openai_latency.realtime.trigger"
"""What started a Realtime model response: ``response.create``, ``commit`` or ``speech_stopped``."""
OPENAI_LATENCY_TIME_TO_FIRST_AUDIO: Final = "openai_latency.time_to_first_audio"
"""Realtime: the trigger -> the first output audio delta's arrival, seconds."""
OPENAI_LATENCY_WEBSOCKET_HANDOVER_MAX: Final = "openai_latency.websocket.handover_delay.max"
OPENAI_LATENCY_WEBSOCKET_HANDOVER_TOTAL: Final = "openai_latency.websocket.handover_delay.total"
"""A turn's events: the longest and the summed time from a frame's arrival (stamped in the websockets
reader) to the caller's ``recv()`` returning its event (the SDK's parse and the caller's own pace)."""
OPENAI_LATENCY_WEBSOCKET_DNS: Final = "openai_latency.websocket.dns"
OPENAI_LATENCY_WEBSOCKET_CONNECT: Final = "openai_latency.websocket.connect"
OPENAI_LATENCY_WEBSOCKET_TLS: Final = "openai_latency.websocket.tls"
OPENAI_LATENCY_WEBSOCKET_UPGRADE: Final = "openai_latency.websocket.upgrade"
"""On ``openai.websocket.connect``, seconds: name resolution (``OPENAI_LATENCY_TRACE_DNS=true``), the
TCP connect (DNS included when not observed apart; TLS too when ``tls`` is absent), the TLS handshake
(``wss://``, where its boundaries are observed), the HTTP upgrade (request written -> 101 read).
Attributes, not spans: the handshake is one short span."""
OPENAI_LATENCY_WEBSOCKET_RECONNECT_ATTEMPT: Final = "openai_latency.websocket.reconnect_attempt"
"""On ``openai.websocket.connect``: 0 for the first handshake, N for the SDK's Nth reconnect attempt
(openai 2.x, which keeps no attempt number: the Nth reconnect of the connection)."""
