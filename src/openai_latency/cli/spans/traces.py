"""Spans -> whole traces (``report --by trace``): every span of a trace as a compact :class:`Node`,
a trace handed on once it is complete.

A span's *kind* is all the critical path needs of its attributes (:func:`kind_of`): one of our
operation spans (``llm``: an LLM call, whose phases and server spans stay below it), a phase span of
one (``phase``), a tool (``gen_ai.operation.name=execute_tool``), an agent framework's own span
(``invoke_agent``, ``create_agent``: the application's code), an inference server's own span
(``server``: vLLM's ``llm_request`` and SGLang's, recognised by any of the ``gen_ai.latency.*``
attributes of :data:`SERVER_FIELDS`)
or anything else (``other``: DB, HTTP, queues).

Memory: the readers stream spans in file order, and a trace's spans may be spread over a whole file
(exporters write spans as they end, traces interleaved). :func:`assemble_traces` keeps only the
nodes of the traces still open: a trace is handed on when its root span (no parent) has arrived and
:data:`WINDOW` more spans have been read after it (the late spans of other services' exporters:
the server's batch, a sibling process). A span that comes for a trace already handed on is counted
(:attr:`TraceReadStats.late_spans`) and left out, never made into a second, partial trace. Traces
whose root never comes (a file holding part of a trace) are handed on at the end. So memory is
bounded by the traces open within the window, and the largest trace, not by the file; one trace id
per finished trace is kept to recognise late spans.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from . import names
from .calls import Shared, is_operation, phases_of
from .span import Span

#: Spans read after a trace's root before the trace is handed on.
WINDOW: Final = 100_000
#: :func:`assemble_traces`'s release point when no rooted trace waits: beyond any span count.
_NONE_WAITS: Final = 1 << 62
TOOL_OPERATION: Final = "execute_tool"
AGENT_OPERATIONS: Final = frozenset({"invoke_agent", "create_agent"})
#: OpenInference's own convention (its instrumentations set no ``gen_ai.operation.name``).
OPENINFERENCE_KIND: Final = "openinference.span.kind"
#: The inference server's own account on its SERVER span (vLLM's ``llm_request``, SGLang's), seconds.
SERVER_LATENCY_PREFIX: Final = "gen_ai.latency."
SERVER_QUEUE: Final = "gen_ai.latency.time_in_queue"
SERVER_TTFT: Final = "gen_ai.latency.time_to_first_token"
SERVER_PREFILL: Final = "gen_ai.latency.time_in_model_prefill"
SERVER_DECODE: Final = "gen_ai.latency.time_in_model_decode"
SERVER_INFERENCE: Final = "gen_ai.latency.time_in_model_inference"
SERVER_E2E: Final = "gen_ai.latency.e2e"
SERVER_FIELDS: Final = (
    ("queue", SERVER_QUEUE),
    ("ttft", SERVER_TTFT),
    ("prefill", SERVER_PREFILL),
    ("decode", SERVER_DECODE),
    ("inference", SERVER_INFERENCE),
    ("e2e", SERVER_E2E),
)

_SERVER_KEYS: Final = frozenset(key for _, key in SERVER_FIELDS)

LLM: Final = "llm"
PHASE: Final = "phase"
TOOL: Final = "tool"
AGENT: Final = "agent"
SERVER: Final = "server"
OTHER: Final = "other"


@dataclass(slots=True)
class CallFacts:
    """What a turn needs of an LLM call's own attributes (not :class:`~.calls.Call`'s every field:
    reading those was 15 % of ``report --by trace``)."""

    phases: dict[str, float]
    error_type: str | None
    retry_reasons: tuple[str, ...]
    input_tokens: int | None
    output_tokens: int | None


def _count(value: Any) -> int | None:
    if value.__class__ is int:
        return int(value)
    if isinstance(value, str) and value.isdigit():  # OTLP JSON's intValue is a string
        return int(value)
    return None


def call_facts(
    attributes: dict[str, Any], status_error: bool, shared: Shared, attribute_phases: bool = True
) -> CallFacts:
    """An operation span's :class:`CallFacts` (phases from its ``openai_latency.phase.*`` when
    ``attribute_phases``; its phase spans replace them)."""
    # a key mostly absent looked for with ``in`` first: ``get`` may be a method in Python
    # (:class:`~.decode_msgspec.LazyAttributes`), ``in`` is the dict's own
    get = attributes.get
    phases = phases_of(attributes) if attribute_phases else {}
    error = get(names.ERROR_TYPE) if names.ERROR_TYPE in attributes else None
    if error is None and status_error:
        error = "_OTHER"
    reasons = get(names.RETRY_ERROR_TYPES) if names.RETRY_ERROR_TYPES in attributes else None
    input_tokens = get(names.INPUT_TOKENS)
    output_tokens = get(names.OUTPUT_TOKENS)
    if output_tokens is None:
        output_tokens = get(names.BENCH_OUTPUT_CHUNKS)
    return CallFacts(
        phases,
        None if error is None else shared.text(str(error)),
        tuple(str(item) for item in reasons) if isinstance(reasons, (list, tuple)) else (),
        # _count's answer for an int (the usual value) without the call
        input_tokens if input_tokens.__class__ is int else _count(input_tokens),
        output_tokens if output_tokens.__class__ is int else _count(output_tokens),
    )


@dataclass(slots=True)
class Node:
    """One span of a trace, as much of it as the critical path needs."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    kind: str
    service: str | None = None
    error: bool = False
    #: The phase of a ``phase`` node (``network_wait``...).
    phase: str | None = None
    #: The call of an ``llm`` node (tokens, retries, error, phases from its attributes).
    call: CallFacts | None = None
    #: The server's account of a ``server`` node (seconds by short name, :data:`SERVER_FIELDS`).
    server: dict[str, float] | None = None
    #: ``http.request.resend_count`` of an ``llm`` node (retries taken).
    retries: int = 0


@dataclass(slots=True)
class Trace:
    trace_id: str
    nodes: list[Node]


@dataclass
class TraceReadStats:
    traces: int = 0
    #: Spans that came for a trace already handed on (more than :data:`WINDOW` spans after its root).
    late_spans: int = 0
    #: The most nodes held at once (the memory bound, in spans).
    max_open_nodes: int = 0
    spans: int = 0
    late_traces: set[str] = field(default_factory=set)


def kind_of(attributes: dict[str, Any]) -> str:
    """The node's kind from the span's own attributes (an ``other`` span with phase children is
    made ``llm`` later, by the tree)."""
    return PHASE if attributes.get(names.PHASE).__class__ is str else _kind_of_no_phase(attributes)


def _kind_of_no_phase(attributes: dict[str, Any]) -> str:
    """:func:`kind_of` of a span without a phase."""
    if not attributes:  # an application's root span, often: what the checks below answer
        return OTHER
    operation = attributes.get(names.OPERATION_NAME) if names.OPERATION_NAME in attributes else None
    if operation == TOOL_OPERATION:
        return TOOL
    if operation in AGENT_OPERATIONS:
        return AGENT
    if operation is None and OPENINFERENCE_KIND in attributes:
        openinference = attributes[OPENINFERENCE_KIND]
        if openinference == "TOOL":
            return TOOL
        if openinference == "AGENT":
            return AGENT
    # any server key: a few lookups in C (the shorter of the two is iterated), not a Python loop
    if not attributes.keys().isdisjoint(_SERVER_KEYS):
        return SERVER
    # an operation name here is no tool's or agent's: is_operation's first answer, without the call
    if operation is not None or is_operation(attributes):
        return LLM
    return OTHER


def server_fields(attributes: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for short, key in SERVER_FIELDS:
        value = attributes.get(key)
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                continue
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            out[short] = float(value)
    return out


class NodeMaker:
    """Spans -> nodes for one read, their texts stored once (:class:`~.calls.Shared`).

    :meth:`node` takes a span's fields: it is a :data:`~.span.SpanMaker`, so the msgspec reader builds
    each node straight from its decoder, without a :class:`~.span.Span` in between (with
    ``lazy_values``: a node reads few of its attribute values, the others are never decoded);
    :meth:`of` takes a ``Span``."""

    __slots__ = ("_last", "_text", "shared")

    def __init__(self, shared: Shared | None = None) -> None:
        self.shared = shared if shared is not None else Shared()
        self._text = self.shared.texts.setdefault  # Shared.text, inline: once or twice for every span
        #: The node made last (its phase span, right before an operation span: see :meth:`node`).
        self._last: Node | None = None

    def node(
        self, trace_id: str, span_id: str, parent_id: str, name: str, start_ns: int, end_ns: int,
        attributes: dict[str, Any], status_error: bool, service: str | None,
    ) -> Node:  # fmt: skip
        text = self._text
        if service is not None:
            service = text(service, service)
        error = status_error or names.ERROR_TYPE in attributes
        phase = attributes.get(names.PHASE) if names.PHASE in attributes else None  # see call_facts
        if phase.__class__ is str:  # kind_of's first answer, inline: most spans are phase spans
            self._last = node = Node(
                trace_id, span_id, parent_id, text(name, name), start_ns, end_ns, PHASE, service, error,
                text(phase, phase),
            )  # fmt: skip
            return node
        kind = _kind_of_no_phase(attributes)
        last = self._last
        self._last = node = Node(
            trace_id, span_id, parent_id, text(name, name), start_ns, end_ns, kind, service, error
        )
        if kind == LLM or (kind == OTHER and _may_be_call(attributes)):
            # a call's phases from its attributes are only read when it has no phase spans (the tree
            # puts a phase span below the span its parent id names); exporters write spans as they
            # end, so a call's phase spans mostly come right before it: then its attributes' phases
            # (an operation span's ~40 keys looked at, their values decoded) are not looked for
            phase_spans = (
                last is not None
                and last.parent_id == span_id
                and last.kind == PHASE
                and last.trace_id == trace_id
            )
            node.call = call_facts(attributes, status_error, self.shared, not phase_spans)
            resend = attributes.get(names.RESEND_COUNT)
            if isinstance(resend, str) and resend.isdigit():
                resend = int(resend)
            if isinstance(resend, int) and resend > 0 and not isinstance(resend, bool):
                node.retries = resend
        elif kind == SERVER:
            node.server = server_fields(attributes)
        return node

    def of(self, span: Span) -> Node:
        """The node of a :class:`~.span.Span`."""
        return self.node(
            span.trace_id, span.span_id, span.parent_span_id, span.name, span.start_ns, span.end_ns,
            span.attributes, span.status_error, span.service,
        )  # fmt: skip


def _may_be_call(attributes: dict[str, Any]) -> bool:
    """A span of a GenAI instrumentation without operation attributes: an operation if phase spans
    turn up below it (see :func:`~.collect.collect_calls`)."""
    for key in attributes:  # noqa: SIM110 - a loop, not any() over a generator: cheaper for few keys
        if key.startswith(names.OUR_PREFIXES):
            return True
    return False


def assemble_traces(
    spans: Iterable[Span], stats: TraceReadStats | None = None, window: int = WINDOW
) -> Iterator[Trace]:
    """Every trace of ``spans``, each once, as soon as it is complete (see the module docstring)."""
    return assemble_nodes(map(NodeMaker().of, spans), stats, window)


def assemble_nodes(
    nodes: Iterable[Node], stats: TraceReadStats | None = None, window: int = WINDOW
) -> Iterator[Trace]:
    """:func:`assemble_traces` of the spans' nodes (:class:`NodeMaker`), in the spans' order."""
    stats = stats if stats is not None else TraceReadStats()
    open_traces: dict[str, list[Node]] = {}
    rooted: deque[tuple[int, str]] = deque()  # (span count when the root came, trace id)
    done: set[str] = set()
    held = most = count = 0
    release = _NONE_WAITS  # the span count at which the oldest rooted trace is handed on
    for node in nodes:
        count += 1
        trace_id = node.trace_id
        members = open_traces.get(trace_id)
        if members is None:
            if trace_id in done:
                stats.late_spans += 1
                stats.late_traces.add(trace_id)
                continue
            members = open_traces[trace_id] = []
        members.append(node)
        held += 1
        if not node.parent_id:
            rooted.append((count, trace_id))
            if release == _NONE_WAITS:
                release = count + window
        while release <= count:
            if held > most:  # held grows until a trace is handed on: its most is right before
                most = held
            _, finished = rooted.popleft()
            release = rooted[0][0] + window if rooted else _NONE_WAITS
            ready = open_traces.pop(finished, None)
            if ready is not None:
                done.add(finished)
                held -= len(ready)
                stats.traces += 1
                stats.max_open_nodes = max(stats.max_open_nodes, most)
                yield Trace(finished, ready)
    stats.max_open_nodes = max(stats.max_open_nodes, most, held)
    stats.spans += count
    for trace_id, members in open_traces.items():
        stats.traces += 1
        yield Trace(trace_id, members)
