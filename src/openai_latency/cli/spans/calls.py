"""Operation spans -> :class:`Call`: one compact record per call, with its phases summed per name.

The join of a call's phase spans is :mod:`.collect`'s; this module reads one operation span's own
attributes (:func:`new_call`) and holds what a call is (:class:`Call`, :class:`Interval`).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from . import names
from .names import BENCH_LOAD, BENCH_OUTPUT_CHUNKS, BENCH_TARGET, GROUP_KEYS, PHASE, PHASE_PREFIX, phase_rank
from .server_account import server_account
from .span import Span

_PREFIX_LENGTH = len(PHASE_PREFIX)


class Interval(NamedTuple):
    """One phase span of a call: epoch nanoseconds; depth 0 = a phase, 1 = an http.* sub-phase."""

    phase: str
    start_ns: int
    end_ns: int
    depth: int


@dataclass(slots=True)
class Call:
    """One operation span with its phases summed per name (seconds)."""

    name: str
    #: Shared by the calls with the same keys: read only.
    keys: dict[str, str]
    duration: float
    phases: dict[str, float]
    http: dict[str, float]
    error_type: str | None
    ttft: float | None
    tpot: float | None
    consumer_time: float | None
    dominant_attribute: str | None
    start_ns: int = 0
    end_ns: int = 0
    trace_id: str = ""
    request_id: str | None = None
    category: str | None = None
    #: ``error.type`` of each retried attempt, in order (``openai_latency.retry.error_types``).
    retry_reasons: tuple[str, ...] = ()
    ttfc: float | None = None
    #: Time to the first answer token, and the thinking time before it (reasoning streamed).
    ttft_answer: float | None = None
    reasoning: float | None = None
    #: The first token was already waiting when the caller came back: its TTFT is unknown.
    first_token_waiting: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    usage_estimated: bool = False
    stream: bool = False
    end_state: str | None = None
    #: The phase spans in start order (empty when collected with ``intervals=False`` or without
    #: phase spans): what a waterfall draws.
    intervals: list[Interval] = field(default_factory=list)
    #: The server's own account (``openai_latency.server.*``) by short name
    #: (:data:`.server_account.FIELDS`), when the server sent one.
    server: dict[str, float] | None = None

    def dominant(self) -> tuple[str, float] | None:
        """(phase with the largest time, its share of the call); the span's own answer without phases."""
        if self.phases:
            phase = max(self.phases, key=lambda name: (self.phases[name], -phase_rank(name)))
            return phase, (self.phases[phase] / self.duration if self.duration > 0 else 0.0)
        if self.dominant_attribute:
            return self.dominant_attribute, math.nan
        return None


@dataclass
class Collected:
    calls: list[Call]
    #: Names of spans that are neither operations nor their phases (for "no operation spans" errors).
    other_names: Counter[str] = field(default_factory=Counter)
    phase_spans: int = 0


def is_operation(attributes: dict[str, Any]) -> bool:
    """An operation by its own attributes (a span with phase children is one too); a tool's or an
    agent's span (``gen_ai.operation.name=execute_tool``, ...) is none."""
    operation = attributes.get(names.OPERATION_NAME)
    if operation is not None:
        return operation.__class__ is not str or operation not in names.NO_CALL_OPERATIONS
    if names.DOMINANT_PHASE in attributes:
        return True
    for key in attributes:  # noqa: SIM110 - a loop, not any() over a generator: cheaper for few keys
        if key.startswith(PHASE_PREFIX):
            return True
    return False


def ours(attributes: dict[str, Any]) -> bool:
    """A span of the instrumentation's (or of another GenAI instrumentation's)."""
    if names.OPERATION_NAME in attributes or PHASE in attributes:
        return True
    return any(key.startswith(names.OUR_PREFIXES) for key in attributes)


class Shared:
    """What many calls of one read have in common, stored once: the keys dict of each distinct
    combination of key attributes (a dozen in a file of 160,000 calls), one string object per
    distinct text (span names, error types, end states, phases).

    Measured on 200,000 spans (34,000 calls): without it the read keeps 1,281 instead of 945 bytes
    per call and :func:`~.collect.collect_calls` takes 14 % longer (the keys dict and its strings made
    again for every call). One per read, dropped with it."""

    def __init__(self) -> None:
        self.keys: dict[tuple[Any, ...], dict[str, str]] = {}
        self.texts: dict[str, str] = {}

    def text(self, text: str) -> str:
        """The one object for this text."""
        return self.texts.setdefault(text, text)

    def optional(self, text: str | None) -> str | None:
        return None if text is None else self.texts.setdefault(text, text)


#: The phase attributes of each distinct set of attribute keys, found once: an instrumentation writes
#: a handful (a call, a retried one, a failed one), and a scan of an operation span's ~40 keys for the
#: prefix was 4 % of ``report --by trace``. Bounded: past :data:`MAX_KEY_SETS` sets, keys are scanned.
_PHASE_KEYS: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}
MAX_KEY_SETS = 256


def phases_of(attributes: dict[str, Any]) -> dict[str, float]:
    """An operation span's phases from its ``openai_latency.phase.*`` attributes, seconds by name."""
    keys = tuple(attributes)
    found = _PHASE_KEYS.get(keys)
    if found is None:
        found = tuple((key, key[_PREFIX_LENGTH:]) for key in keys if key.startswith(PHASE_PREFIX))
        if len(_PHASE_KEYS) < MAX_KEY_SETS:
            _PHASE_KEYS[keys] = found
    phases: dict[str, float] = {}
    for key, name in found:
        value = attributes[key]
        if value.__class__ is float:  # finite()'s answer for the usual value, inline
            if -math.inf < value < math.inf:
                phases[name] = value
        else:
            number = finite(value)
            if number is not None:
                phases[name] = number
    return phases


def new_call(span: Span, shared: Shared, attribute_phases: bool = True) -> Call:
    """The call of an operation span from its own attributes; phases from its ``openai_latency.phase.*``
    attributes when ``attribute_phases`` (replaced by its phase spans when they are found)."""
    attributes = span.attributes
    get = attributes.get
    phases = phases_of(attributes) if attribute_phases else {}
    raw = (
        get(names.SERVER_ADDRESS),
        get(names.SERVER_PORT),
        get(names.REQUEST_MODEL) or get(names.RESPONSE_MODEL),
        get(names.OPERATION_NAME) or span.name,
        get(names.PROVIDER_NAME),
        span.service,
        get(BENCH_TARGET),
        get(BENCH_LOAD),
    )
    try:
        keys = shared.keys.get(raw)  # the same attribute values, the same keys: computed once
        if keys is None:
            keys = shared.keys.setdefault(raw, _keys(*raw))
    except TypeError:  # an unhashable (array) value where a string belongs
        keys = _keys(*raw)
    error = get(names.ERROR_TYPE)
    if error is None and span.status_error:
        error = "_OTHER"
    dominant = get(names.DOMINANT_PHASE)
    request_id = get(names.REQUEST_ID)
    output_tokens = get(names.OUTPUT_TOKENS)
    if output_tokens is None:
        output_tokens = get(BENCH_OUTPUT_CHUNKS)
    return Call(
        name=shared.text(span.name),
        keys=keys,
        duration=span.duration_s,
        phases=phases,
        http={},
        error_type=None if error is None else shared.text(str(error)),
        ttft=finite(get(names.TIME_TO_FIRST_TOKEN)),
        tpot=finite(get(names.TIME_PER_OUTPUT_TOKEN)),
        consumer_time=finite(get(names.STREAM_CONSUMER_TIME)),
        dominant_attribute=shared.text(dominant) if isinstance(dominant, str) else None,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        trace_id=span.trace_id,
        request_id=request_id if request_id is None or request_id.__class__ is str else str(request_id),
        category=shared.optional(_text(get(names.ERROR_CATEGORY))),
        retry_reasons=_texts(get(names.RETRY_ERROR_TYPES)),
        ttfc=finite(get(names.TIME_TO_FIRST_CHUNK)),
        ttft_answer=finite(get(names.TIME_TO_FIRST_ANSWER_TOKEN)),
        reasoning=finite(get(names.REASONING_DURATION)),
        first_token_waiting=get(names.FIRST_TOKEN_WAITING) is True,
        input_tokens=_int(get(names.INPUT_TOKENS)),
        output_tokens=_int(output_tokens),
        cached_tokens=_int(get(names.CACHED_TOKENS)),
        usage_estimated=get(names.USAGE_ESTIMATED) is True,
        stream=get(names.REQUEST_STREAM) is True,
        end_state=shared.optional(_text(get(names.STREAM_END_STATE))),
        server=server_account(get),
    )


def _keys(
    address: Any, port: Any, model: Any, operation: Any, provider: Any, service: Any, target: Any, load: Any
) -> dict[str, str]:
    endpoint = f"{address}:{port}" if address and port not in (None, "") else str(address or "-")
    values = (endpoint, str(model or "-"), str(operation), str(provider or "-"), service or "-")
    return dict(zip(GROUP_KEYS, (*values, str(target or "-"), str(load or "-")), strict=True))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _texts(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, (list, tuple)) else ()


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():  # OTLP JSON's intValue is a string
        return int(value)
    return None


def finite(value: Any) -> float | None:
    """A finite float from an attribute value, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None
