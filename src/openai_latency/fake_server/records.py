"""What the fake server did, per request: the ground truth timing tests compare against.

Every time is ``time.perf_counter_ns()`` of the server process (CLOCK_MONOTONIC on Linux, so it is
comparable with the client's ``perf_counter_ns``/``monotonic_ns`` even across processes).

The event loop thread fills a record while the request is in flight (plain attribute writes and list
appends, atomic under the GIL); readers in other threads only ever get copies.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Outcome = Literal["pending", "ok", "error", "disconnected", "client_closed"]

#: Event kinds that carry model output (what ends the client's "first token" phase).
CONTENT_KINDS: Final = frozenset({"content", "text"})


def is_content_kind(kind: str) -> bool:
    """Chat ``content`` (and tool-call argument) chunks, completions ``text``, Responses ``*.delta``."""
    return kind in CONTENT_KINDS or (kind.startswith("event:") and kind.endswith(".delta"))


@dataclass(slots=True)
class RequestRecord:
    """One request as the server saw and answered it.

    ``events`` holds ``(kind, ns)`` for every body piece, logged after it was written and drained:
    chat SSE ``role``, ``content`` (also tool-call argument chunks), ``finish``, ``usage``, ``done``;
    completions SSE ``text``, ``finish``, ``usage``, ``done``; Responses SSE ``event:<type>``;
    a non-stream body ``body``; and the scripted faults ``error_event``, ``malformed``, ``disconnect``.
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
    finished_ns: int | None = None
    status: int = 0
    outcome: Outcome = "pending"

    @property
    def finished(self) -> bool:
        return self.finished_ns is not None

    @property
    def content_event_ns(self) -> list[int]:
        """Times of the output-bearing events, in order."""
        return [ns for kind, ns in self.events if is_content_kind(kind)]

    @property
    def first_content_ns(self) -> int | None:
        for kind, ns in self.events:
            if is_content_kind(kind):
                return ns
        return None

    @property
    def last_content_ns(self) -> int | None:
        for kind, ns in reversed(self.events):
            if is_content_kind(kind):
                return ns
        return None

    def event_ns(self, kind: str) -> list[int]:
        """Times of the events of one kind."""
        return [ns for k, ns in self.events if k == kind]

    def copy(self) -> RequestRecord:
        return dataclasses.replace(
            self, query=dict(self.query), headers=dict(self.headers), events=list(self.events)
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
