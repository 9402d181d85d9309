"""A call's phases as data: monotonic marks in, phase intervals out.

While the call runs, the hooks record plain integers (``time.perf_counter_ns()``) and the SDK's
response data through the methods here (``Timeline.begin_attempt``, ``Attempt.record_response``,
``Timeline.begin_backoff``, ``Backoff.note_delay``...). When the call ends, :meth:`Timeline.phases`
turns the marks into non-overlapping intervals, in order, that tile the operation; the span layer
converts them to spans with :func:`openai_latency.clock.to_epoch_ns`. Which hook records which
mark: docs/ARCHITECTURE.md, "Phase boundaries and where they are recorded".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import semconv as sc
from .._guard import guarded, report
from ..clock import seconds
from ..model import Attributes
from ..read.errors import qualified_name, response_error_code

if TYPE_CHECKING:
    from opentelemetry.trace import Span


@dataclass(slots=True)
class Attempt:
    """One HTTP attempt: from send entry to response headers (or failure)."""

    index: int
    start_ns: int
    end_ns: int = 0
    headers_ns: int = 0
    status_code: int = 0
    error_type: str | None = None
    http_version: str | None = None
    response_headers: Mapping[str, str] | None = None
    events: list[tuple[str, int]] = field(default_factory=list)
    """httpcore ``trace`` events as (name, ns), in arrival order."""
    failures: dict[str, str] | None = None
    """httpcore step that failed (``connect_tcp``, ``start_tls``, ``send_request_body``...) -> the
    qualified name of its exception, from the ``*.failed`` trace events."""
    dns: tuple[int, int] | None = None
    """(first start, last end) of the name resolutions during this attempt (``trace_dns``)."""
    new_connection: bool = False
    """httpcore opened a connection (TCP connect) for this attempt."""
    span: Span | None = None
    """Its ``openai.network_wait`` span, started with the attempt so that spans made during the send
    (an HTTP client instrumentation's, a server's through ``traceparent``) nest under it."""
    _times: dict[str, int] | None = field(default=None, repr=False)
    _server_wait_ns: int | None = field(default=None, repr=False)

    def record_response(self, response: Any, now: int) -> None:
        """The send returned the SDK's HTTP ``response`` at ``now``: its status, protocol version,
        headers, and for an error status the provider's code (else the status) as error.type.
        Never raises (a hot hook: :func:`._guard.guarded`'s rule without its extra frame)."""
        try:
            self.settle(now)
            status = self.status_code = response.status_code
            if not self.headers_ns:
                self.headers_ns = now
            version = getattr(response, "http_version", "")
            self.http_version = version.split("/", 1)[1] if "/" in version else version or None
            self.response_headers = response.headers
            if status >= 400:
                self.error_type = response_error_code(response) or str(status)
        except Exception:
            report("Attempt.record_response")

    @guarded()
    def record_error(self, exc: BaseException, now: int) -> None:
        """The send raised ``exc`` at ``now`` (a connection, TLS or timeout error...)."""
        self.settle(now)
        self.error_type = qualified_name(type(exc))

    @guarded()
    def note_dns(self, start_ns: int, end_ns: int) -> None:
        """One name resolution of this attempt; several (happy eyeballs, retries) span first to last."""
        first = self.dns[0] if self.dns is not None else start_ns
        self.dns = (first, end_ns)

    def settle(self, now: int) -> None:
        """The attempt's send returned (or raised) at ``now``: its headers time (the trace event, else
        ``now``), whether it opened a connection and its server wait, from the trace events received
        so far (every event that the sub-phases use comes before the send returns)."""
        self.end_ns = now
        times = self._times = self._first_times()
        self.new_connection = "connect_tcp.started" in times
        self.headers_ns = times.get("receive_response_headers.complete", 0)
        self._server_wait_ns = _server_wait(times)

    def event_times(self) -> dict[str, int]:
        """First time of each event, keyed without the ``http11.``/``http2.``/``connection.`` prefix."""
        return self._times if self._times is not None else self._first_times()

    def _first_times(self) -> dict[str, int]:
        times: dict[str, int] = {}
        for name, ns in reversed(self.events):
            times[name.partition(".")[2]] = ns
        return times

    @property
    def server_wait_ns(self) -> int | None:
        """Request body sent -> response headers (http.server_wait), None without both trace events."""
        if self._times is None:  # still in flight (the call was cancelled or abandoned meanwhile)
            return _server_wait(self._first_times())
        return self._server_wait_ns

    @property
    def connection_reused(self) -> bool | None:
        if not self.events:
            return None
        if self._times is None:  # still in flight (the call was cancelled or abandoned meanwhile)
            return "connect_tcp.started" not in self._first_times()
        return not self.new_connection


@dataclass(slots=True)
class Backoff:
    """The SDK's sleep between two attempts."""

    start_ns: int
    end_ns: int = 0
    reason: str = ""
    delay_s: float | None = None
    delay_source: str = "backoff"
    """``backoff`` (the SDK's own exponential delay), or the header it came from:
    ``retry-after-ms`` / ``retry-after``."""

    @guarded()
    def note_delay(self, delay: float, headers: Mapping[str, str] | None) -> None:
        """The delay the SDK chose, and whether it came from the server's retry-after(-ms) header."""
        self.delay_s = round(float(delay), 9)  # the SDK's jittered float, to the nanosecond
        if headers is None:
            return
        for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
            raw = headers.get(name)
            if raw is None:
                continue
            try:
                if abs(float(raw) / divisor - self.delay_s) < 1e-9:
                    self.delay_source = name
            except ValueError:
                pass
            return

    def end(self, now: int) -> None:
        """The sleep ended (or was interrupted) at ``now``."""
        self.end_ns = now


@dataclass(slots=True)
class Phase:
    name: str
    start_ns: int
    end_ns: int
    attributes: Attributes = field(default_factory=dict)
    """A phase's span attributes, ``openai_latency.phase`` included (built once, with the phase: the
    span takes this dict as it is); an http.* sub-phase's carry only its ``error.type``."""
    children: Sequence[Phase] = ()
    """The http.* sub-phases of a network_wait."""
    span: Span | None = None
    """The span already started for this phase (network_wait), if any."""

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)


_PHASE = sc.OPENAI_LATENCY_PHASE

PHASE_NAMES = (
    "request_build",
    "network_wait",
    "retry_backoff",
    "first_token",
    "reasoning",
    "stream_drain",
    "response_read",
)


@dataclass(slots=True)
class Timeline:
    start_ns: int
    streaming: bool = False
    returned_ns: int = 0
    """When the SDK method returned to the caller (for streams: the stream object)."""
    end_ns: int = 0
    first_token_ns: int = 0
    """Hand-over of the first chunk that carried a token of any channel (reasoning or answer)."""
    first_answer_ns: int = 0
    """Hand-over of the first chunk that carried an answer token."""
    attempts: list[Attempt] = field(default_factory=list)
    backoffs: list[Backoff] = field(default_factory=list)

    def begin_attempt(self, now: int, span: Span | None) -> Attempt:
        """The next HTTP attempt starts at ``now`` (``span``: its network_wait span, if any)."""
        attempt = Attempt(index=len(self.attempts), start_ns=now, span=span)
        self.attempts.append(attempt)
        return attempt

    @guarded()
    def begin_backoff(self, now: int, response: Any, exc: BaseException | None) -> Backoff:
        """The SDK decided to retry at ``now``, after an HTTP ``response`` it retries on (429, 5xx...)
        or, without one, after ``exc``. The reason: the retried attempt's error.type (the provider's
        code when it sent one), else the status, else the exception's qualified name."""
        if response is not None:
            retried = self.attempts[-1].error_type if self.attempts else None
            reason = retried or str(response.status_code)
        else:
            reason = qualified_name(type(exc)) if exc is not None else "_OTHER"
        backoff = Backoff(start_ns=now, reason=reason)
        self.backoffs.append(backoff)
        return backoff

    def name_final_attempt(self, failure: Mapping[str, object]) -> None:
        """The final attempt's error.type is the operation's when the operation failed on that
        attempt's HTTP status (a streamed error body is read by the SDK only after the attempt ended)."""
        status = failure.get(sc.HTTP_RESPONSE_STATUS_CODE)
        if status is None or not self.attempts:
            return
        last = self.attempts[-1]
        error_type = failure.get(sc.ERROR_TYPE)
        if last.status_code == status and isinstance(error_type, str):
            last.error_type = error_type

    @property
    def headers_ns(self) -> int:
        """Response headers of the final attempt, 0 when none came (the body may still have failed)."""
        if not self.attempts:
            return 0
        return self.attempts[-1].headers_ns

    def phases(self, http_subphases: bool) -> list[Phase]:
        """The call's phases in order; they do not overlap and cover ``start_ns .. end_ns``."""
        end = self.end_ns
        first_send = self.attempts[0].start_ns if self.attempts else end
        phases = [Phase("request_build", self.start_ns, min(first_send, end), {_PHASE: "request_build"})]
        last_index = len(self.attempts) - 1
        for i, attempt in enumerate(self.attempts):
            backoff = self.backoffs[i] if i < len(self.backoffs) else None
            # A failed attempt lasts until the SDK decides to retry, then come the backoff sleep and
            # the retry's request_build.
            attempt_end = backoff.start_ns if backoff is not None and i < last_index else None
            phases.append(_network_wait(attempt, i == last_index, end, http_subphases, attempt_end))
            if backoff is not None:
                phases.append(_backoff(backoff))
                if i < last_index and backoff.end_ns:
                    # the SDK rebuilds the request after the sleep: that is request building again
                    rebuild: Attributes = {_PHASE: "request_build", sc.HTTP_REQUEST_RESEND_COUNT: i + 1}
                    phases.append(
                        Phase("request_build", backoff.end_ns, self.attempts[i + 1].start_ns, rebuild)
                    )
        headers = self.headers_ns
        if headers:
            if self.streaming:
                phases.extend(self._stream_phases(headers, end))
            else:
                phases.append(Phase("response_read", headers, end, {_PHASE: "response_read"}))
        return phases

    def _stream_phases(self, headers: int, end: int) -> list[Phase]:
        """first_token (headers -> first token of any channel), reasoning (first reasoning token ->
        first answer token, or the end when no answer came), stream_drain (first answer -> end)."""
        first_token = self.first_token_ns or end
        phases = [Phase("first_token", headers, first_token, {_PHASE: "first_token"})]
        first_answer = self.first_answer_ns
        if self.first_token_ns and first_answer != first_token:
            phases.append(Phase("reasoning", first_token, first_answer or end, {_PHASE: "reasoning"}))
        if first_answer:
            phases.append(Phase("stream_drain", first_answer, end, {_PHASE: "stream_drain"}))
        return phases


def _network_wait(
    attempt: Attempt, is_last: bool, call_end: int, http_subphases: bool, retry_decided: int | None
) -> Phase:
    if is_last:
        # A final attempt without response headers failed: like a retried one lasts until the SDK
        # decides to retry, it lasts until the SDK gives up and raises (the call's end).
        end = attempt.headers_ns or call_end
    else:
        end = retry_decided or attempt.end_ns or attempt.headers_ns or call_end
    attributes: Attributes = {_PHASE: "network_wait", sc.HTTP_REQUEST_RESEND_COUNT: attempt.index}
    if attempt.status_code:
        attributes[sc.HTTP_RESPONSE_STATUS_CODE] = attempt.status_code
    if attempt.error_type:
        attributes[sc.ERROR_TYPE] = attempt.error_type
    if attempt.http_version:
        attributes[sc.NETWORK_PROTOCOL_VERSION] = attempt.http_version
    reused = attempt.connection_reused
    if reused is not None:
        attributes[sc.OPENAI_LATENCY_CONNECTION_REUSED] = reused
    children = _http_subphases(attempt, end) if http_subphases and attempt.events else []
    return Phase("network_wait", attempt.start_ns, end, attributes, children, attempt.span)


def subphase_attributes(children: Sequence[Phase], out: Attributes | None = None) -> Attributes:
    """A network_wait's http.* sub-phases as its attributes (``phase_spans=phases``): seconds per
    sub-phase (``openai_latency.http.connect``...) and the first one that failed
    (``openai_latency.http.failed``, e.g. ``http.tls``); written into ``out`` when given."""
    if out is None:
        out = {}
    for child in children:
        out[sc.OPENAI_LATENCY_HTTP_PREFIX + child.name] = seconds(child.end_ns - child.start_ns)
        if sc.ERROR_TYPE in child.attributes and sc.OPENAI_LATENCY_HTTP_FAILED not in out:
            out[sc.OPENAI_LATENCY_HTTP_FAILED] = child.name
    return out


def _backoff(backoff: Backoff) -> Phase:
    attributes: Attributes = {
        _PHASE: "retry_backoff",
        sc.OPENAI_LATENCY_RETRY_REASON: backoff.reason,
        sc.OPENAI_LATENCY_RETRY_DELAY_SOURCE: backoff.delay_source,
    }
    if backoff.delay_s is not None:
        attributes[sc.OPENAI_LATENCY_RETRY_DELAY] = backoff.delay_s
    return Phase("retry_backoff", backoff.start_ns, backoff.end_ns or backoff.start_ns, attributes)


def _http_subphases(attempt: Attempt, end: int) -> list[Phase]:
    """pool_wait, dns, connect, tls, send, server_wait from the attempt's httpcore trace events.

    Each sub-phase starts where the previous one ended, so together they tile the network_wait:
    httpcore's bookkeeping between two steps (microseconds, or a GC pause) counts to the next step.
    """
    times = attempt.event_times()
    ev = times.get
    # (sub-phase, when it ended, the httpcore steps whose failure it names), in order
    # httpcore does not trace the pool: pool_wait is entry -> first event
    steps: list[tuple[str, int, tuple[str, ...]]] = [("http.pool_wait", attempt.events[0][1], ())]
    if ev("connect_tcp.started", 0):
        if attempt.dns is not None:
            steps.append(("http.dns", attempt.dns[1], ()))
        connected = ev("connect_tcp.complete", 0) or ev("connect_tcp.failed", 0) or end
        steps.append(("http.connect", connected, ("connect_tcp",)))
    if ev("start_tls.started", 0):
        tls_done = ev("start_tls.complete", 0) or ev("start_tls.failed", 0) or end
        steps.append(("http.tls", tls_done, ("start_tls",)))
    if ev("send_connection_init.started", 0) or ev("send_request_headers.started", 0):
        sent = _request_sent(times) or end
        steps.append(("http.send", sent, _SEND_STEPS))
        headers = ev("receive_response_headers.complete", 0) or end
        steps.append(("http.server_wait", headers, ("receive_response_headers",)))
    failures = attempt.failures
    out: list[Phase] = []
    cursor = attempt.start_ns
    for name, until, names in steps:
        until = min(max(until, cursor), end)
        # the step that failed: how far the attempt got
        failed = next((failures[step] for step in names if step in failures), None) if failures else None
        out.append(Phase(name, cursor, until, {} if failed is None else {sc.ERROR_TYPE: failed}))
        cursor = until
    return out


_SEND_STEPS = ("send_connection_init", "send_request_headers", "send_request_body")


def _server_wait(times: dict[str, int]) -> int | None:
    sent = _request_sent(times)
    headers = times.get("receive_response_headers.complete")
    return headers - sent if sent and headers else None


def _request_sent(times: dict[str, int]) -> int:
    """When the request left: body sent (or failed), else headers sent (no body); 0 if not yet."""
    return (
        times.get("send_request_body.complete")
        or times.get("send_request_body.failed")
        or times.get("send_request_headers.complete")
        or 0
    )
