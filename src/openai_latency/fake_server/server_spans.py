"""The fake server's own span per request, shaped as vLLM's ``llm_request`` (``--export-spans``).

vLLM (``vllm/tracing/utils.py``, ``vllm/v1/engine/output_processor.py``) exports one SERVER span per
request, named ``llm_request``, whose parent is the request's ``traceparent`` and which starts at the
request's arrival. Its ``gen_ai.latency.*`` attributes are seconds: ``time_in_queue``,
``time_to_first_token``, ``e2e``, ``time_in_model_prefill``, ``time_in_model_decode``,
``time_in_model_inference``. The fake exports the same span, its numbers read from its own log
(:class:`~.records.RequestRecord`), so a test compares them with the log it can read:

- queue: arrival -> the response headers (``delay-ms``, and the wait of ``capacity``);
- prefill: the headers -> the first token (``ttft-ms``; a non-stream body: the headers -> the body);
- decode: the first token -> the last (``chunk-delay-ms`` between tokens);
- e2e: arrival -> the end of the response; time to first token = queue + prefill.

Where it goes: an ``http(s)://`` URL is an OTLP/HTTP collector (JSON, ``/v1/traces`` added when the
URL has no path); anything else is a file, one OTLP JSON line per batch, as the collector's file
exporter writes them. A thread of its own sends the batches; the server's loop only queues a span.

The script key ``server-span-parent`` breaks the join as real servers do: ``lost`` (the server
started its own trace: the header was dropped), ``stale`` (the right trace, a parent span that is not
the call's: context from another request).
"""

from __future__ import annotations

import json
import logging
import queue
import secrets
import threading
import time
import urllib.request
from typing import Any, Final
from urllib.parse import urlsplit

from .records import RequestRecord

logger = logging.getLogger("openai_latency.fake_server")

SPAN_NAME: Final = "llm_request"
SERVICE: Final = "fake-server"
#: OTLP's SPAN_KIND_SERVER.
KIND_SERVER: Final = 2
#: Seconds between batches.
FLUSH_S: Final = 0.2
PARENT_MODES: Final = ("traceparent", "lost", "stale")

_STOP: Final = object()


def _attribute(key: str, value: object) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": str(value)}}


def _ids(traceparent: str | None, mode: str) -> tuple[str, str]:
    """``(trace id, parent span id)`` of the span: the header's, or broken as ``mode`` says."""
    parts = (traceparent or "").split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16 or mode == "lost":
        return secrets.token_hex(16), ""
    if mode == "stale":
        return parts[1], secrets.token_hex(8)
    return parts[1], parts[2]


def latency(record: RequestRecord, end: int) -> dict[str, float]:
    """The ``gen_ai.latency.*`` numbers (seconds) of a record that ended at ``end``, from its log."""
    arrival = record.received_ns
    headers = record.headers_sent_ns if record.headers_sent_ns is not None else end
    first = record.first_token_ns
    last = record.last_token_ns
    if first is None or last is None:  # a non-stream body (or no token at all)
        first = last = record.events[-1][1] if record.events else end
    queue_s = (headers - arrival) / 1e9
    prefill = (first - headers) / 1e9
    decode = (last - first) / 1e9
    return {
        "gen_ai.latency.time_in_queue": queue_s,
        "gen_ai.latency.time_to_first_token": queue_s + prefill,
        "gen_ai.latency.e2e": (end - arrival) / 1e9,
        "gen_ai.latency.time_in_model_prefill": prefill,
        "gen_ai.latency.time_in_model_decode": decode,
        "gen_ai.latency.time_in_model_inference": prefill + decode,
    }


class ServerSpans:
    """Exports one ``llm_request`` span per finished request to ``destination`` (see the module)."""

    def __init__(self, destination: str, service: str = SERVICE) -> None:
        self.destination = destination
        self.service = service
        url = urlsplit(destination)
        self._url = None
        if url.scheme in ("http", "https"):
            self._url = destination if url.path not in ("", "/") else destination.rstrip("/") + "/v1/traces"
        # perf_counter_ns (the log's clock) -> Unix time, taken once, as the instrumentation does
        self._offset_ns = time.time_ns() - time.perf_counter_ns()
        self._queue: queue.Queue[object] = queue.Queue()
        self.exported = 0
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name="fake-server-spans", daemon=True)
        self._thread.start()

    def span(self, record: RequestRecord, mode: str, outcome: str, end: int) -> dict[str, Any]:
        """The OTLP JSON span of a record that ended at ``end`` (``perf_counter_ns``)."""
        trace_id, parent = _ids(record.headers.get("traceparent"), mode)
        attributes: dict[str, object] = {
            **latency(record, end),
            "gen_ai.request.id": record.request_id,
            "gen_ai.usage.completion_tokens": len(record.token_event_ns),
            "http.response.status_code": record.status,
        }
        body = record.body if isinstance(record.body, dict) else {}
        if isinstance(body.get("model"), str):
            attributes["gen_ai.request.model"] = body["model"]
        span: dict[str, Any] = {
            "traceId": trace_id,
            "spanId": secrets.token_hex(8),
            "name": SPAN_NAME,
            "kind": KIND_SERVER,
            "startTimeUnixNano": str(record.received_ns + self._offset_ns),
            "endTimeUnixNano": str(end + self._offset_ns),
            "attributes": [_attribute(key, value) for key, value in attributes.items()],
            "status": {"code": 2} if outcome != "ok" else {},
        }
        if parent:
            span["parentSpanId"] = parent
        return span

    def add(self, record: RequestRecord, mode: str, outcome: str, end: int) -> None:
        """Queue the span of a record that has just ended (the server's loop: no I/O here)."""
        self._queue.put(self.span(record, mode, outcome, end))

    def flush(self) -> None:
        """Return once every span queued so far was sent (or failed)."""
        self._queue.join()

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued, then stop the thread."""
        self._queue.put(_STOP)
        self._thread.join(timeout)

    def _document(self, spans: list[dict[str, Any]]) -> dict[str, Any]:
        resource = {"attributes": [_attribute("service.name", self.service)]}
        scope = {"scope": {"name": "openai_latency.fake_server"}, "spans": spans}
        return {"resourceSpans": [{"resource": resource, "scopeSpans": [scope]}]}

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: list[dict[str, Any]] = []
            taken = 0
            try:
                item = self._queue.get(timeout=FLUSH_S)
                taken += 1
                while True:
                    if item is _STOP:
                        stopping = True
                        break
                    assert isinstance(item, dict)
                    batch.append(item)
                    item = self._queue.get_nowait()
                    taken += 1
            except queue.Empty:
                pass
            if batch:
                self._send(batch)
            for _ in range(taken):
                self._queue.task_done()

    def _send(self, batch: list[dict[str, Any]]) -> None:
        data = json.dumps(self._document(batch), separators=(",", ":"))
        try:
            if self._url is None:
                with open(self.destination, "a", encoding="utf-8") as handle:
                    handle.write(data + "\n")
            else:
                request = urllib.request.Request(
                    self._url, data=data.encode(), headers={"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(request, timeout=10) as response:
                    response.read()
        except OSError as exc:
            self.failures += len(batch)
            logger.warning(
                "fake server: cannot export %d span(s) to %s: %s", len(batch), self.destination, exc
            )
        else:
            self.exported += len(batch)
