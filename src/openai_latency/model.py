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
    """Key of the chunk observer in :mod:`openai_latency.streams`: chat, responses, completions, any."""


@dataclass(slots=True)
class StreamStats:
    """Per-chunk counters, updated in place by the stream wrappers (no allocation per chunk)."""

    chunks: int = 0
    output_chunks: int = 0
    wait_ns: int = 0
    consumer_ns: int = 0
    consumer_before_output_ns: int = 0
    max_gap_ns: int = 0
    first_chunk_ns: int = 0
    buffered_chunks: int = 0
    """Chunks that were already there when asked for: the server was ahead of the caller."""
    output_gap_ns: int = 0
    output_gaps: int = 0
    """Observed server-side gaps between output chunks (arrival to arrival), sum and count."""
    last_activity_ns: int = 0
    gaps: array[int] | None = None
    """Observed server-side gaps (ns), made at the first one: most calls are not streams."""
    stalls: list[tuple[int, int, int]] | None = None
    """(chunk index, gap ns, mono ns) for gaps above the stall threshold."""
    first_attributes: Attributes | None = None
    """Response attributes of the first chunk (id, model...), read when it came."""
    final_item: Any = None
    """The final Response of a Responses stream (its last event): an SDK object, read by duck typing."""
    usage: Any = None
    """The SDK's usage object of the stream (chat: the usage chunk's; Responses: the final one's)."""
    finish_reasons: list[str] | None = None
    error_item: Any = None
    """The provider's error object (``ResponseError``, an ``error`` event...) that ended the stream."""


Observer = Callable[[StreamStats, Any], bool]
"""Reads one stream chunk (an SDK object) into the stats; True when the chunk carries output
(:data:`.streams.OBSERVERS`; content capture extends one: :meth:`.ContentCapture.observer`)."""


Wrapped = Callable[..., Any]
"""The SDK (or stdlib) function that wrapt hands a wrapper: any signature, any result."""
Args = tuple[Any, ...]
Kwargs = dict[str, Any]
Wrapper = Callable[[Wrapped, Any, Args, Kwargs], Any]
"""A wrapt wrapper: ``(wrapped, instance, args, kwargs) -> what wrapped returns``."""
