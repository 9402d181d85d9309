"""The inference server's own span joined to the LLM call that caused it (``report --by trace``).

vLLM (``llm_request``) and SGLang export a SERVER span whose parent is the ``traceparent`` the
instrumentation sends with each attempt, so it lands below the call's ``openai.network_wait`` span.
Its ``gen_ai.latency.*`` attributes (seconds) split the call: the server's queue, prefill and decode,
and the rest (network, the client, the SDK). The split is given only when the join holds:

- ``joined``: every server span below the call lies inside the call's window, give or take the skew
  bound, and the server's queue + prefill + decode fit in the call (give or take the bound);
- ``outside_window``: a server span starts before the call or ends after it by more than the bound
  (another clock, or a span that is not this call's): no split, rather than a wrong one;
- ``exceeds_call``: the server's account is longer than the call by more than the bound;
- ``no_account``: the span has none of queue, prefill, decode;
- ``no_server_span``: nothing below the call; when the trace holds server spans elsewhere (siblings of
  the call, :attr:`~.critical_path.Turn.detached_server_spans`) the server dropped or mangled the
  ``traceparent``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..spans.traces import LLM, Node

JOINED: Final = "joined"
OUTSIDE_WINDOW: Final = "outside_window"
EXCEEDS_CALL: Final = "exceeds_call"
NO_ACCOUNT: Final = "no_account"
NO_SERVER_SPAN: Final = "no_server_span"
#: Parents climbed from a server span to find its call (an HTTP client span may sit between).
MAX_DEPTH: Final = 64


@dataclass(slots=True)
class ServerSplit:
    """Seconds of one call (or summed over calls): the server's queue, prefill, decode; the rest."""

    queue: float = 0.0
    prefill: float = 0.0
    decode: float = 0.0
    rest: float = 0.0
    calls: int = 0

    def add(self, other: ServerSplit, scale: float = 1.0) -> None:
        self.queue += other.queue * scale
        self.prefill += other.prefill * scale
        self.decode += other.decode * scale
        self.rest += other.rest * scale
        self.calls += other.calls

    def as_dict(self) -> dict[str, float | int]:
        return {
            "queue": self.queue, "prefill": self.prefill, "decode": self.decode,
            "rest": self.rest, "calls": self.calls,
        }  # fmt: skip


def servers_by_call(nodes: list[Node], by_id: dict[str, Node]) -> tuple[dict[str, list[Node]], int]:
    """The server spans below each call (by the call's span id), and how many are below none."""
    joined: dict[str, list[Node]] = {}
    detached = 0
    for node in nodes:
        if node.server is None:
            continue
        parent = by_id.get(node.parent_id)
        depth = 0
        while parent is not None and parent.kind != LLM and depth < MAX_DEPTH:
            parent = by_id.get(parent.parent_id)
            depth += 1
        if parent is None or parent.kind != LLM:
            detached += 1
        else:
            joined.setdefault(parent.span_id, []).append(node)
    return joined, detached


def _account(fields: dict[str, float]) -> tuple[float, float, float] | None:
    """(queue, prefill, decode) from one span's fields; None when it has none of them."""
    queue = fields.get("queue")
    prefill = fields.get("prefill")
    if prefill is None and "ttft" in fields:
        prefill = fields["ttft"] - (queue or 0.0)
    decode = fields.get("decode")
    if decode is None and "inference" in fields and prefill is not None:
        decode = fields["inference"] - prefill
    if decode is None and "e2e" in fields and "ttft" in fields:
        decode = fields["e2e"] - fields["ttft"]
    if queue is None and prefill is None and decode is None:
        return None
    return max(queue or 0.0, 0.0), max(prefill or 0.0, 0.0), max(decode or 0.0, 0.0)


def split_call(
    start_ns: int, end_ns: int, servers: list[Node], bound_s: float
) -> tuple[ServerSplit | None, str]:
    """The split of the call ``start_ns..end_ns`` by its server spans, or None and why not."""
    if not servers:
        return None, NO_SERVER_SPAN
    bound_ns = bound_s * 1e9
    split = ServerSplit(calls=1)
    for server in servers:
        if server.start_ns < start_ns - bound_ns or server.end_ns > end_ns + bound_ns:
            return None, OUTSIDE_WINDOW
        account = _account(server.server or {})
        if account is None:
            return None, NO_ACCOUNT
        split.queue += account[0]
        split.prefill += account[1]
        split.decode += account[2]
    duration = (end_ns - start_ns) / 1e9
    split.rest = duration - split.queue - split.prefill - split.decode
    if split.rest < -bound_s:
        return None, EXCEEDS_CALL
    split.rest = max(split.rest, 0.0)
    return split, JOINED
