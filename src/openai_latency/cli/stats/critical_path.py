"""One trace -> :class:`Turn`: its duration, its critical path by category, its LLM calls.

**The critical path** (Jaeger's rule): start at the root's end; the child that ended last at or before
the current point is on the path from its end to its start, and the path continues inside it the same way
(recursively); the time between that child's end and the current point, and between the first child's
start and the span's start, is the span's own. A child that ends after the current point (it overlaps
a later one) is off the path. LLM calls are not entered: their whole window is the call's.

**Categories** of time on the path, by the span that owns it: ``llm`` (an operation span of ours,
everything below it included), ``tool`` (``gen_ai.operation.name=execute_tool``, its own time),
``other`` (any other span's own time: DB, HTTP, queues) and ``self`` (the root's own time and that of
an agent framework's ``invoke_agent``/``create_agent`` spans: the application's code between spans).
They add up to the turn's duration.

**Skew**: a child outside its parent's window (spans of services whose clocks differ by a few ms, or
work that outlived its parent) is clamped to the parent, as Jaeger does; a child wholly outside is
left off the path. Both are counted; the output says whether the largest clamp was within
:data:`SKEW_BOUND_S` (clock skew) or not.

**A missing root** (the input holds part of the trace): the turn runs from the earliest start to the
latest end, the top spans are its children, and the time none covers is ``self``.
**A parent that never arrived**: its children are attached to the root (and counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Final

from ..spans.traces import AGENT, LLM, OTHER, PHASE, SERVER, TOOL, Node, Trace
from .server_join import JOINED, NO_SERVER_SPAN, ServerSplit, servers_by_call, split_call

#: Clamps up to this long are clock skew between services; also the server join's tolerance.
SKEW_BOUND_S: Final = 0.010
CATEGORIES: Final = ("llm", "tool", "other", "self")
_CATEGORY = {LLM: "llm", TOOL: "tool", AGENT: "self"}
_ROOT_ID: Final = "\x00root"
_START: Final = attrgetter("start_ns")


@dataclass(slots=True)
class Segment:
    """A piece of the path: ``category`` time of span ``name`` (epoch ns)."""

    start_ns: int
    end_ns: int
    category: str
    name: str
    span_id: str


@dataclass(slots=True)
class TurnCall:
    """One LLM call of a turn, on the path or not (``on_path=False``: overlapped by another span)."""

    span_id: str
    name: str
    start_ns: int
    end_ns: int
    on_path: bool
    phases: dict[str, float]
    input_tokens: int | None
    output_tokens: int | None
    retries: int
    error_type: str | None
    in_tool: bool
    server: ServerSplit | None
    server_status: str

    @property
    def duration(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


@dataclass
class Turn:
    trace_id: str
    #: The root span's name; None when the root is missing.
    root: str | None
    service: str | None
    start_ns: int
    end_ns: int
    path: dict[str, float]
    llm_phases: dict[str, float]
    segments: list[Segment]
    calls: list[TurnCall]
    spans: int
    #: Spans clamped to their parent's window, the largest clamp (s), spans wholly outside it.
    clamped: int = 0
    clamp_max: float = 0.0
    outside: int = 0
    #: Spans whose parent never arrived (attached to the root).
    orphans: int = 0
    #: Server spans below no LLM call (the server dropped the traceparent, or exported siblings).
    detached_server_spans: int = 0
    #: The server's split summed over the calls on the path that joined.
    server_path: ServerSplit | None = None
    notes: list[str] = field(default_factory=list)
    #: Only server spans: the server started a trace of its own (it lost the caller's traceparent).
    server_only: bool = False
    #: The root has a parent that never arrived: a caller that sent a traceparent, exported nothing.
    caller_missing: bool = False

    @property
    def duration(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9

    @property
    def root_missing(self) -> bool:
        return self.root is None

    def slim(self) -> None:
        """Drops what only a waterfall or the trace's JSON needs (the path's pieces, each call's
        phases), keeping every number the groups use."""
        self.segments = []
        for call in self.calls:
            call.phases = {}

    def dominant(self) -> str:
        return max(CATEGORIES, key=self.path.__getitem__)


class _Tree:
    """The path's tree: children of every span the path may enter, with clamped windows."""

    def __init__(self, trace: Trace) -> None:
        nodes = trace.nodes
        self.by_id = by_id = {node.span_id: node for node in nodes}
        self.phases: dict[str, list[Node]] = {}
        phases = self.phases
        tops: list[Node] = []  # the spans whose parent is not in the trace (its root among them)
        self.servers: list[Node] = []  # the server spans (:func:`.server_join.servers_by_call`)
        for node in nodes:
            kind = node.kind
            if kind == SERVER:
                self.servers.append(node)
            elif kind == PHASE:
                parent = by_id.get(node.parent_id)
                if parent is not None and parent.kind != PHASE:
                    siblings = phases.get(parent.span_id)
                    if siblings is None:
                        phases[parent.span_id] = [node]
                    else:
                        siblings.append(node)
                    if parent.kind != LLM and parent.call is not None:
                        parent.kind = LLM  # a span of ours with phase children is an operation
            elif node.parent_id not in by_id:
                tops.append(node)
        for call_id in self.phases:  # a framework's span around our call (OpenLLMetry's
            inner = by_id[call_id]  # openai.response): not a second call
            outer = by_id.get(inner.parent_id) if inner.kind == LLM else None
            if outer is not None and outer.kind == LLM and outer.span_id not in self.phases:
                outer.kind = OTHER
        roots = [n for n in tops if not n.parent_id]
        self.orphans = 0
        self.caller_missing = False
        if roots:
            self.root = roots[0] if len(roots) == 1 else min(roots, key=lambda n: (n.start_ns, -n.end_ns))
            self.root_name: str | None = self.root.name
            self.orphans = len(tops) - 1
        elif len(tops) == 1:  # the entry span of a service whose caller does not export (traceparent)
            self.root = tops[0]
            self.root_name = self.root.name
            self.caller_missing = True
        else:
            start = min(n.start_ns for n in nodes)
            end = max(n.end_ns for n in nodes)
            self.root = Node(trace.trace_id, _ROOT_ID, "", "", start, end, AGENT)
            self.root_name = None
        self.children: dict[str, list[Node]] = {}
        children = self.children
        root = self.root
        for node in nodes:
            if node.kind in (PHASE, SERVER) or node is root:
                continue
            parent_id = node.parent_id if node.parent_id in by_id else root.span_id
            kids = children.get(parent_id)
            if kids is None:
                children[parent_id] = [node]
            else:
                kids.append(node)
        self.window: dict[str, tuple[int, int]] = {}
        self.clamped = self.outside = 0
        self.clamp_max_ns = 0
        self._clamp()

    def _clamp(self) -> None:
        root = self.root
        window, children = self.window, self.children
        window[root.span_id] = (root.start_ns, root.end_ns)
        stack = [root]
        while stack:
            parent = stack.pop()
            low, high = window[parent.span_id]
            kept = []
            for child in children.get(parent.span_id, ()):
                start, end = child.start_ns, child.end_ns
                if end < low or start > high:
                    self.outside += 1
                    continue
                if start < low or end > high:  # max(start, low), min(end, high)
                    cut = (low - start if start < low else 0) + (end - high if end > high else 0)
                    start, end = max(start, low), min(end, high)
                    self.clamped += 1
                    self.clamp_max_ns = max(self.clamp_max_ns, cut)
                window[child.span_id] = (start, end)
                kept.append(child)
                if child.kind != LLM and child.span_id in children:  # a leaf has nothing to clamp
                    stack.append(child)
            if len(kept) > 1:
                kept.sort(key=lambda n: window[n.span_id][1], reverse=True)
            if kept:
                children[parent.span_id] = kept
            else:
                children.pop(parent.span_id, None)

    def walk(self) -> list[Segment]:
        """The path, latest first: Jaeger's rule, iteratively (a deep trace needs no recursion)."""
        pieces: list[tuple[Node, int, int]] = []  # (owner, start, end): made Segments at the end
        window = self.window
        root = self.root
        children = self.children.get
        # frames: [span, the current point, its children latest-ending first, next child to look at]
        stack: list[list[object]] = [[root, window[root.span_id][1], children(root.span_id, []), 0]]
        while stack:
            frame = stack[-1]
            node: Node = frame[0]  # type: ignore[assignment]
            point: int = frame[1]  # type: ignore[assignment]
            kids: list[Node] = frame[2]  # type: ignore[assignment]
            index: int = frame[3]  # type: ignore[assignment]
            while index < len(kids) and window[kids[index].span_id][1] > point:
                index += 1
            if index < len(kids):
                child = kids[index]
                frame[3] = index + 1
                start, end = window[child.span_id]
                if end < point:
                    pieces.append((node, end, point))
                frame[1] = start
                grandchildren = children(child.span_id)
                if child.kind == LLM or not grandchildren:
                    pieces.append((child, start, end))
                else:
                    stack.append([child, end, grandchildren, 0])
            else:
                start = window[node.span_id][0]
                if start < point:
                    pieces.append((node, start, point))
                stack.pop()
        return [
            Segment(
                start, end, "self" if node is root else _CATEGORY.get(node.kind, "other"),
                node.name or "(root missing)", node.span_id,
            )
            for node, start, end in pieces
        ]  # fmt: skip


def _phases(node: Node, phase_nodes: Sequence[Node]) -> tuple[dict[str, float], int]:
    """The call's phases (by its phase spans, else its attributes) and its attempts (network_wait spans)."""
    if phase_nodes:
        phases: dict[str, float] = {}
        attempts = 0
        for phase in phase_nodes:
            name = phase.phase or phase.name
            if phase.phase == "network_wait":
                attempts += 1
            phases[name] = phases.get(name, 0.0) + (phase.end_ns - phase.start_ns) / 1e9
        return phases, attempts
    return (dict(node.call.phases) if node.call is not None else {}), 0


def _in_tool(node: Node, by_id: dict[str, Node]) -> bool:
    parent = by_id.get(node.parent_id)
    for _ in range(256):
        if parent is None:
            return False
        if parent.kind == TOOL:
            return True
        parent = by_id.get(parent.parent_id)
    return False


def analyze(trace: Trace, skew_bound_s: float = SKEW_BOUND_S) -> Turn:
    """The turn of one trace (see the module docstring)."""
    tree = _Tree(trace)
    segments = tree.walk()
    segments.reverse()
    path = dict.fromkeys(CATEGORIES, 0.0)
    on_path: dict[str, int] = {}
    for segment in segments:
        path[segment.category] += (segment.end_ns - segment.start_ns) / 1e9
        if segment.category == "llm":
            on_path[segment.span_id] = segment.end_ns - segment.start_ns
    servers, detached = servers_by_call(tree.servers, tree.by_id)
    calls: list[TurnCall] = []
    llm_phases: dict[str, float] = {}
    server_path: ServerSplit | None = None
    phase_nodes = tree.phases
    for node in trace.nodes:
        if node.kind != LLM:
            continue
        phases, attempts = _phases(node, phase_nodes.get(node.span_id, ()))
        call = node.call
        retries = max(node.retries, len(call.retry_reasons) if call else 0, attempts - 1)
        below = servers.get(node.span_id)
        split, status = (
            split_call(node.start_ns, node.end_ns, below, skew_bound_s) if below else (None, NO_SERVER_SPAN)
        )
        calls.append(
            TurnCall(
                node.span_id, node.name, node.start_ns, node.end_ns, node.span_id in on_path, phases,
                call.input_tokens if call else None, call.output_tokens if call else None, retries,
                call.error_type if call else ("_OTHER" if node.error else None),
                _in_tool(node, tree.by_id), split, status,
            )
        )  # fmt: skip
        length = on_path.get(node.span_id)
        if length is None:
            continue
        duration = node.end_ns - node.start_ns
        scale = length / duration if duration > 0 else 0.0  # a clamped call: its phases in proportion
        for name, seconds in phases.items():
            llm_phases[name] = llm_phases.get(name, 0.0) + seconds * scale
        if split is not None and status == JOINED:
            server_path = server_path or ServerSplit()
            server_path.add(split, scale)
    calls.sort(key=_START)
    root = tree.root
    turn = Turn(
        trace.trace_id, tree.root_name, root.service, root.start_ns, root.end_ns, path, llm_phases,
        segments, calls, len(trace.nodes), tree.clamped, tree.clamp_max_ns / 1e9, tree.outside,
        tree.orphans, detached, server_path,
    )  # fmt: skip
    nodes = trace.nodes  # the first node answers for most traces, without a generator
    turn.server_only = not nodes or (nodes[0].kind == SERVER and all(node.kind == SERVER for node in nodes))
    turn.caller_missing = tree.caller_missing
    if turn.server_only and trace.nodes:  # its root is the server's span
        turn.root = trace.nodes[0].name
    turn.notes = turn_notes(turn, skew_bound_s)
    return turn


def turn_notes(turn: Turn, skew_bound_s: float = SKEW_BOUND_S) -> list[str]:
    """What the reader must know to trust the turn's numbers, in words."""
    notes = []
    if turn.root_missing:
        notes.append("root span missing: the turn runs from the earliest start to the latest end")
    if turn.caller_missing:
        notes.append(
            f"the root's parent span never arrived (a caller that exported nothing): {turn.root} is the turn"
        )
    if turn.orphans:
        notes.append(f"{turn.orphans} span(s) whose parent never arrived: attached to the root")
    if turn.clamped:
        largest = f"{turn.clamp_max * 1e3:.1f} ms"
        why = (
            "clock skew between services"
            if turn.clamp_max <= skew_bound_s
            else f"more than the {skew_bound_s * 1e3:g} ms skew bound: work that outlived its parent?"
        )
        notes.append(f"{turn.clamped} span(s) clamped to their parent (up to {largest}, {why})")
    if turn.outside:
        notes.append(f"{turn.outside} span(s) wholly outside their parent: left off the path")
    for call in turn.calls:
        if call.server_status not in (JOINED, NO_SERVER_SPAN):
            notes.append(f"server split of {call.name} not given: {call.server_status.replace('_', ' ')}")
    if turn.detached_server_spans:
        missing = sum(1 for call in turn.calls if call.server_status == "no_server_span")
        notes.append(
            f"{turn.detached_server_spans} server span(s) below no LLM call ({missing} call(s) without"
            " one): the server dropped the traceparent or exported its spans as siblings; no split"
        )
    return notes
