"""What the fake server did, per request: the ground truth timing tests compare against.

Every time is ``time.perf_counter_ns()`` of the server process (CLOCK_MONOTONIC on Linux, so it is
comparable with the client's ``perf_counter_ns``/``monotonic_ns`` even across processes).

The event loop thread fills a record while the request is in flight (plain attribute writes and list
appends, atomic under the GIL); readers in other threads only ever get copies.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Outcome = Literal["pending", "ok", "error", "disconnected", "client_closed"]

#: Event kinds that carry answer output (besides the Responses ``*.delta`` events of the answer).
CONTENT_KINDS: Final = frozenset({"content", "text"})
#: The chat reasoning chunk (``delta.reasoning_content`` or ``delta.reasoning``).
REASONING_KIND: Final = "reasoning"
#: Responses events of the reasoning item start with this (``response.reasoning_text.delta``,
#: ``response.reasoning_summary_text.delta``, their ``.done``, the summary part events).
_RESPONSES_REASONING: Final = "event:response.reasoning"
#: When hidden reasoning began and ended (no bytes sent: the scripted silence, logged when it ran out).
HIDDEN_REASONING_START: Final = "reasoning_hidden_start"
HIDDEN_REASONING_END: Final = "reasoning_hidden_end"


def is_content_kind(kind: str) -> bool:
    """The answer channel: chat ``content`` (and tool-call argument) chunks, completions ``text``,
    Responses ``*.delta`` but the reasoning ones (output text, refusal, function-call arguments, audio)."""
    return kind in CONTENT_KINDS or (
        kind.startswith("event:") and kind.endswith(".delta") and not kind.startswith(_RESPONSES_REASONING)
    )


def is_reasoning_kind(kind: str) -> bool:
    """The reasoning channel: chat ``reasoning`` chunks, Responses reasoning text and summary deltas."""
    return kind == REASONING_KIND or (kind.startswith(_RESPONSES_REASONING) and kind.endswith(".delta"))


def is_token_kind(kind: str) -> bool:
    """A generated token of either channel (reasoning or answer)."""
    return is_content_kind(kind) or is_reasoning_kind(kind)


@dataclass(slots=True)
class RequestRecord:
    """One request as the server saw and answered it.

    ``events`` holds ``(kind, ns)`` for every body piece, logged after it was written and drained:
    chat SSE ``role``, ``reasoning``, ``content`` (also tool-call argument chunks), ``finish``,
    ``usage``, ``done``; completions SSE ``text``, ``finish``, ``usage``, ``done``; Responses SSE
    ``event:<type>``; a non-stream body ``body``; the scripted faults ``error_event``, ``malformed``,
    ``disconnect``; and, written nothing, ``reasoning_hidden_start`` / ``reasoning_hidden_end``: when
    hidden reasoning's first token was due (``ttft-ms`` after the opening events) and when its time
    (N x ``reasoning-delay-ms``) ran out. With ``write-batch`` K the events of one batch share the
    time of its one write.

    ``scripted_ns`` holds, with ``write-batch`` K > 1, each token's deadline: when it was scripted to
    go out (reasoning and answer tokens in log order: it pairs with :attr:`token_event_ns`). With K = 1
    it stays empty: each token is written as soon as its pause has run out, so its log time is that
    (:attr:`scripted_token_ns` gives either).
    """

    request_id: str
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    attempt: int
    connection_id: int
    connection_request_index: int
    received_ns: int
    headers_sent_ns: int | None = None
    events: list[tuple[str, int]] = field(default_factory=list)
    scripted_ns: list[int] = field(default_factory=list)
    finished_ns: int | None = None
    status: int = 0
    outcome: Outcome = "pending"

    @property
    def finished(self) -> bool:
        return self.finished_ns is not None

    @property
    def content_event_ns(self) -> list[int]:
        """Times of the answer events (not reasoning), in order."""
        return [ns for kind, ns in self.events if is_content_kind(kind)]

    @property
    def first_content_ns(self) -> int | None:
        """The first answer event (not reasoning)."""
        return self._first(is_content_kind)

    @property
    def last_content_ns(self) -> int | None:
        """The last answer event (not reasoning)."""
        return self._last(is_content_kind)

    @property
    def reasoning_event_ns(self) -> list[int]:
        """Times of the streamed reasoning events (chat reasoning chunks, Responses reasoning deltas)."""
        return [ns for kind, ns in self.events if is_reasoning_kind(kind)]

    @property
    def first_reasoning_ns(self) -> int | None:
        return self._first(is_reasoning_kind)

    @property
    def last_reasoning_ns(self) -> int | None:
        return self._last(is_reasoning_kind)

    @property
    def token_event_ns(self) -> list[int]:
        """Times of the token events of either channel, in order (pairs with ``scripted_ns``)."""
        return [ns for kind, ns in self.events if is_token_kind(kind)]

    @property
    def first_token_ns(self) -> int | None:
        """The first token event of either channel (reasoning or answer)."""
        return self._first(is_token_kind)

    @property
    def last_token_ns(self) -> int | None:
        """The last token event of either channel."""
        return self._last(is_token_kind)

    @property
    def scripted_token_ns(self) -> list[int]:
        """When each token was due: ``scripted_ns`` (``write-batch`` > 1), else the log times."""
        return list(self.scripted_ns) if self.scripted_ns else self.token_event_ns

    @property
    def hidden_reasoning_ns(self) -> tuple[int, int] | None:
        """``(start, end)`` of hidden reasoning (the ``reasoning_hidden_*`` events), if it ran out."""
        start, end = self.event_ns(HIDDEN_REASONING_START), self.event_ns(HIDDEN_REASONING_END)
        return (start[0], end[0]) if start and end else None

    def _first(self, matches: Callable[[str], bool]) -> int | None:
        return next((ns for kind, ns in self.events if matches(kind)), None)

    def _last(self, matches: Callable[[str], bool]) -> int | None:
        return next((ns for kind, ns in reversed(self.events) if matches(kind)), None)

    def event_ns(self, kind: str) -> list[int]:
        """Times of the events of one kind."""
        return [ns for k, ns in self.events if k == kind]

    def copy(self) -> RequestRecord:
        return dataclasses.replace(
            self,
            query=dict(self.query),
            headers=dict(self.headers),
            events=list(self.events),
            scripted_ns=list(self.scripted_ns),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what the debug endpoint serves)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["events"] = [[kind, ns] for kind, ns in self.events]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
        values["events"] = [(str(kind), int(ns)) for kind, ns in data.get("events", ())]
        values["scripted_ns"] = [int(ns) for ns in data.get("scripted_ns", ())]
        return cls(**values)


class RecordLog:
    """The server's request log: appended by the loop thread, read (as copies) from any thread."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._records: list[RequestRecord] = []
        self._by_id: dict[str, RequestRecord] = {}

    def add(self, record: RequestRecord) -> None:
        with self._cond:
            self._records.append(record)
            self._by_id[record.request_id] = record

    def finish(self, record: RequestRecord, outcome: Outcome, finished_ns: int) -> None:
        with self._cond:
            record.outcome = outcome
            record.finished_ns = finished_ns
            self._cond.notify_all()

    def clear(self) -> None:
        with self._cond:
            self._records.clear()
            self._by_id.clear()

    def snapshot(self, wait: float = 0.0) -> list[RequestRecord]:
        """Copies of all records in arrival order, after waiting up to ``wait`` s for in-flight ones."""
        with self._cond:
            pending = [r for r in self._records if r.finished_ns is None]
            if pending and wait > 0:
                self._cond.wait_for(lambda: all(r.finished_ns is not None for r in pending), wait)
            return [r.copy() for r in self._records]

    def get(self, request_id: str, wait: float = 0.0) -> RequestRecord:
        """A copy of one record; waits up to ``wait`` s for it to finish. ``KeyError`` if unknown."""
        with self._cond:
            record = self._by_id[request_id]
            if record.finished_ns is None and wait > 0:
                self._cond.wait_for(lambda: record.finished_ns is not None, wait)
            return record.copy()

    def last(self, wait: float = 0.0) -> RequestRecord:
        """A copy of the latest record; ``LookupError`` if the log is empty."""
        with self._cond:
            if not self._records:
                raise LookupError("the fake server has not logged any request")
            return self.get(self._records[-1].request_id, wait)

    def find(self, request_id: str) -> RequestRecord | None:
        """The live record (loop thread only)."""
        return self._by_id.get(request_id)

    def live(self) -> list[RequestRecord]:
        """The live records (loop thread only)."""
        with self._cond:
            return list(self._records)
