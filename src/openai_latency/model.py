"""Plain data shared by the modules that handle one call: no behaviour, and no import of the package
at run time (the types in annotations come from :mod:`.config` and :mod:`.metrics`, both leaves).

Every module may import this one; it imports none of them back (tests/test_architecture.py).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry.util.types import AttributeValue

if TYPE_CHECKING:
    from opentelemetry._logs import Logger
    from opentelemetry.trace import Tracer

    from .config import Settings
    from .metrics import Metrics

Attributes = dict[str, AttributeValue]
"""Span (and metric point) attributes as this package builds them."""


@dataclass
class Telemetry:
    """What every operation needs from the instrumentor: set once per ``instrument()``."""

    tracer: Tracer
    metrics: Metrics | None
    settings: Settings
    logger: Logger | None = None
    """OTel Logs API logger for the content event; None unless content capture asks for events."""


@dataclass(frozen=True)
class OperationKind:
    """How to name, describe and read one family of SDK calls (the instances: :mod:`.routing`)."""

    operation: str
    """gen_ai.operation.name: chat, embeddings, text_completion, or ``openai`` for the fallback."""
    api_type: str | None
    stream_kind: str
    """Key of the chunk observer in :mod:`openai_latency.hooks.streams`: chat, responses, completions, any."""


ANSWER = 1
"""Channel bit of a chunk that carries an answer token: chat content, refusal or tool-call deltas;
completions text; Responses output text, refusal, function-call arguments, audio..."""
REASONING = 2
"""Channel bit of a chunk that carries reasoning text: chat ``reasoning_content`` / ``reasoning`` /
``reasoning_details``; Responses ``response.reasoning_text.delta``."""
SUMMARY = 4
"""Channel bit of a Responses ``response.reasoning_summary_text.delta``: a summary of reasoning that
stays hidden."""


@dataclass(slots=True)
class StreamStats:
    """Per-chunk counters, updated in place by the stream wrappers (no allocation per chunk).

    Arrival times: a chunk whose ``next`` blocked arrived when it was handed over; a chunk that was
    already buffered arrived at some unknown time since the last observed arrival, at the latest when
    it was asked for: its hand-over is sure up to ``doubt_ns``. Each token mark keeps both, so the
    summary knows how sure each boundary is."""

    chunks: int = 0
    wait_ns: int = 0
    consumer_ns: int = 0
    max_gap_ns: int = 0
    """The largest observed gap between two token chunks (never the wait for the first token)."""
    first_chunk_ns: int = 0
    buffered_chunks: int = 0
    """Chunks that were already there when asked for: the server was ahead of the caller."""
    doubt_ns: int = 0
    """Time since the last observed arrival (a ``next`` that blocked) that was spent outside our
    waits: the caller's own work, and the SDK's between the headers and the first ``next``. A
    buffered chunk may have arrived at any moment of it; an idle caller leaves it near 0."""
    channels: int = 0
    """:data:`ANSWER` | :data:`REASONING` | :data:`SUMMARY` bits of every token chunk seen."""
    token_chunks: int = 0
    """Chunks that carried a generated token of any channel."""
    answering: bool = False
    """An answer token came (``Timeline.first_answer_ns`` is set)."""
    tokens_to_answer: int = 0
    """Token chunks before the first answer token: the answer window has the rest."""
    first_token_doubt_ns: int = 0
    """``doubt_ns`` when the first token chunk was handed over (its time: ``Timeline.first_token_ns``)."""
    first_answer_doubt_ns: int = 0
    last_token_ns: int = 0
    last_token_doubt_ns: int = 0
    reads: int = 0
    """Reads of the body so far (:mod:`.hooks.reads`); 0 when they could not be counted."""
    read_ns: int = 0
    """When the bytes of the latest read of the body had reached the process (:mod:`.hooks.reads`): the
    event loop's stamp of them (:mod:`.hooks.arrival_stamps`), else when the read returned."""
    first_token_read: int = 0
    """``reads`` when the first token chunk was handed over: the read that brought it."""
    burst: int = 0
    """Token chunks that came in the same read as the first token (:mod:`.hooks.reads`): made before the
    window that starts at the first token's arrival."""
    token_gap_ns: int = 0
    token_gaps: int = 0
    """Observed server-side gaps between token chunks (arrival to arrival), sum and count."""
    token_gap_ns_to_answer: int = 0
    token_gaps_to_answer: int = 0
    """The two sums above as they stood at the first answer chunk (the answer window's start)."""
    last_activity_ns: int = 0
    last_mark_ns: int = 0
    """The previous chunk's arrival mark: its read's return, else its hand-over."""
    gaps: array[int] | None = None
    """Observed server-side gaps between chunks of any kind (ns), made at the first one: most calls
    are not streams."""
    stalls: list[tuple[int, int, int]] | None = None
    """(chunk index, gap ns, mono ns) for token gaps above the stall threshold."""
    first_attributes: Attributes | None = None
    """Response attributes of the first chunk (id, model...), read when it came."""
    final_item: Any = None
    """The final Response of a Responses stream (its last event): an SDK object, read by duck typing."""
    usage: Any = None
    """The SDK's usage object of the stream (chat: the usage chunk's; Responses: the final one's)."""
    finish_reasons: list[str] | None = None
    server_item: Any = None
    """The last chunk that carried the server's own account (llama.cpp ``timings``, vLLM
    ``metrics``): read once, when the call ends (:func:`.server_timing.server_attributes`)."""
    error_item: Any = None
    """The provider's error object (``ResponseError``, an ``error`` event...) that ended the stream."""


Observer = Callable[[StreamStats, Any], int]
"""Reads one stream chunk (an SDK object) into the stats; returns the channel bits of the tokens it
carries (:data:`ANSWER`, :data:`REASONING`, :data:`SUMMARY`; 0 for role-only, empty, usage and
lifecycle chunks) (:data:`.streams.OBSERVERS`; content capture extends one:
:meth:`.ContentCapture.observer`)."""


Wrapped = Callable[..., Any]
"""The SDK (or stdlib) function that wrapt hands a wrapper: any signature, any result."""
Args = tuple[Any, ...]
Kwargs = dict[str, Any]
Wrapper = Callable[[Wrapped, Any, Args, Kwargs], Any]
"""A wrapt wrapper: ``(wrapped, instance, args, kwargs) -> what wrapped returns``."""
